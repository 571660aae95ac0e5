/* Unit tests for multipart.c, and a bounded fuzz: random and mutated bodies, each parsed from
 * an exactly sized heap copy so that ASan catches any read past the end. */
#include "http/multipart.h"
#include "core/workspace.h"
#include "tap.h"

#include <stdlib.h>

static int
parse(const char *body, size_t len, const char *boundary, struct multipart_file *f,
      const char **why)
{
	char *copy = malloc(len ? len : 1);
	int rc;

	memcpy(copy, body, len);
	rc = multipart_find_file(copy, len, boundary, "file", f, why);
	if (rc == 0) /* the data must point into the copy; read it before it is freed */
		f->data = f->data - copy + body;
	free(copy);
	return rc;
}

/* The body, handed out in pieces of 1 to 8 bytes (or up to 4 KiB), by a seeded generator. */
struct chunks {
	const char *body;
	size_t len, pos;
	unsigned long seed;
	bool fail; /* a read error instead of the end */
};

static long
chunks_read(void *ctx, char *buf, size_t len)
{
	struct chunks *c = ctx;
	size_t n;

	if (c->pos >= c->len)
		return c->fail ? -1 : 0;
	c->seed = c->seed * 6364136223846793005UL + 1442695040888963407UL;
	n = (c->seed >> 62) == 0 ? 1 + (c->seed >> 33) % 4096 : 1 + (c->seed >> 33) % 8;
	if (n > len)
		n = len;
	if (n > c->len - c->pos)
		n = c->len - c->pos;
	memcpy(buf, c->body + c->pos, n);
	c->pos += n;
	return (long)n;
}

static struct multipart_stream stream; /* 64 KiB: not on the stack */
static char streamed[1 << 21];

/* The same parse through the stream reader; the data lands in streamed[0..*len). */
static int
stream_parse(const char *body, size_t len, const char *boundary, struct multipart_file *f,
             size_t *data_len, const char **why, unsigned long seed, bool fail)
{
	struct chunks c = {.body = body, .len = len, .seed = seed, .fail = fail};
	const char *d;
	long n;

	*data_len = 0;
	multipart_stream_init(&stream, boundary, chunks_read, &c);
	if (multipart_stream_file(&stream, "file", f, why) < 0)
		return -1;
	while ((n = multipart_stream_data(&stream, &d, why)) > 0) {
		if (*data_len + (size_t)n > sizeof(streamed))
			return -2;
		memcpy(streamed + *data_len, d, (size_t)n);
		*data_len += (size_t)n;
	}
	return n < 0 ? -1 : 0;
}

/* what requests (urllib3) sends for files={'file': (name, data)} */
#define REQ(b, name, data)                                                                         \
	"--" b "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" name               \
	"\"\r\n\r\n" data "\r\n--" b "--\r\n"

static void
test_boundary(void)
{
	char b[MULTIPART_MAX_BOUNDARY + 1];
	char longb[200];

	ok(multipart_boundary("multipart/form-data; boundary=abc123", b) == 0 &&
	       !strcmp(b, "abc123"),
	   "boundary: plain token");
	ok(multipart_boundary("Multipart/Form-Data;boundary=\"a b;c\"", b) == 0 &&
	       !strcmp(b, "a b;c"),
	   "boundary: quoted, case-insensitive type");
	ok(multipart_boundary("multipart/form-data; charset=utf-8; boundary=x", b) == 0 &&
	       !strcmp(b, "x"),
	   "boundary: after another parameter");
	ok(multipart_boundary("application/json", b) < 0, "boundary: another type is refused");
	ok(multipart_boundary("multipart/form-data", b) < 0, "boundary: missing");
	ok(multipart_boundary("multipart/form-data; boundary=", b) < 0, "boundary: empty");
	ok(multipart_boundary(NULL, b) < 0, "boundary: no header");
	memset(longb, 'a', sizeof(longb));
	memcpy(longb, "multipart/form-data; boundary=", 30);
	longb[30 + 71] = '\0';
	ok(multipart_boundary(longb, b) < 0, "boundary: 71 characters is too long");
	longb[30 + 70] = '\0';
	ok(multipart_boundary(longb, b) == 0 && strlen(b) == 70, "boundary: 70 characters is fine");
}

static void
test_parts(void)
{
	struct multipart_file f;
	const char *why;
	static const char simple[] = REQ("xyz", "test.txt", "Hello Sandbox!");
	static const char binary[] = REQ("xyz", "d/bin", "a\r\n--xy\0z\r\n-xyzq");
	static const char second[] =
	    "preamble\r\n--B\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\nv\r\n"
	    "--B\r\ncontent-disposition: form-data; filename=\"q\\\"x;y\"; name=file\r\n"
	    "Content-Type: application/octet-stream\r\n\r\n\r\n--B--";
	static const char empty[] = REQ("xyz", "e", "");

	ok(parse(simple, sizeof(simple) - 1, "xyz", &f, &why) == 0 &&
	       !strcmp(f.filename, "test.txt") && f.len == 14 &&
	       !memcmp(f.data, "Hello Sandbox!", 14),
	   "parts: what requests sends");
	ok(parse(binary, sizeof(binary) - 1, "xyz", &f, &why) == 0 && f.len == 16 &&
	       !memcmp(f.data, "a\r\n--xy\0z\r\n-xyzq", 16),
	   "parts: data that holds CRLF, dashes and NUL but not the delimiter");
	ok(parse(second, sizeof(second) - 1, "B", &f, &why) == 0 && !strcmp(f.filename, "q\"x;y") &&
	       f.len == 0,
	   "parts: the second part, quoted escapes, a ';' inside quotes, another header");
	ok(parse(empty, sizeof(empty) - 1, "xyz", &f, &why) == 0 && f.len == 0,
	   "parts: empty file");
	ok(parse(simple, sizeof(simple) - 1, "xy", &f, &why) < 0, "parts: wrong boundary");
	ok(parse(simple, sizeof(simple) - 8, "xyz", &f, &why) < 0 && strstr(why, "not closed"),
	   "parts: a body cut short: %s", why);
	{
		static const char nofile[] =
		    "--B\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nv\r\n--B--";
		ok(parse(nofile, sizeof(nofile) - 1, "B", &f, &why) < 0,
		   "parts: a field without a filename is not a file: %s", why);
	}
	{
		static const char noend[] =
		    "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a";
		ok(parse(noend, sizeof(noend) - 1, "B", &f, &why) < 0,
		   "parts: headers that never end");
	}
	ok(parse("", 0, "B", &f, &why) < 0, "parts: empty body");
}

static void
test_paths(void)
{
	ok(workspace_path_ok("a", 1), "path: a plain name");
	ok(workspace_path_ok("dir/sub/file.txt", 16), "path: nested");
	ok(workspace_path_ok("..a/b..", 7), "path: dots inside names are fine");
	ok(!workspace_path_ok("", 0), "path: empty");
	ok(!workspace_path_ok("/etc/passwd", 11), "path: absolute");
	ok(!workspace_path_ok("../x", 4), "path: ..");
	ok(!workspace_path_ok("a/../../x", 9), "path: .. inside");
	ok(!workspace_path_ok("a/..", 4), "path: .. at the end");
	ok(!workspace_path_ok("./a", 3), "path: .");
	ok(!workspace_path_ok("a//b", 4), "path: an empty component");
	ok(!workspace_path_ok("a/", 2), "path: a trailing slash");
	ok(!workspace_path_ok("a\0b", 3), "path: NUL");
	ok(!workspace_path_ok("a\nb", 3), "path: newline");
	ok(!workspace_path_ok("a\x7f", 2), "path: DEL");
}

/* resolve PATH: what workspace_path_resolve() makes of it ("ESCAPES", "TOO_LONG" or the path) */
static const char *
resolve(const char *path, size_t out_len)
{
	static char out[64];

	switch (workspace_path_resolve(path, strlen(path), out, out_len)) {
	case WORKSPACE_INSIDE:
		return out;
	case WORKSPACE_ESCAPES:
		return "ESCAPES";
	case WORKSPACE_TOO_LONG:
		return "TOO_LONG";
	}
	return "?";
}

static void
test_resolve(void)
{
	is_str(resolve("", 64), ".", "resolve: empty is the workspace itself");
	is_str(resolve(".", 64), ".", "resolve: . is the workspace itself");
	is_str(resolve("/", 64), ".", "resolve: / is the workspace itself");
	is_str(resolve("./", 64), ".", "resolve: ./ is the workspace itself");
	is_str(resolve("a", 64), "a", "resolve: a plain name");
	is_str(resolve("dir/sub/f.txt", 64), "dir/sub/f.txt", "resolve: nested");
	is_str(resolve("/etc/passwd", 64), "etc/passwd", "resolve: leading slashes are dropped");
	is_str(resolve("//a//b/", 64), "a/b", "resolve: empty components are dropped");
	is_str(resolve("a/./b/.", 64), "a/b", "resolve: . components are dropped");
	is_str(resolve("a/../b", 64), "b", "resolve: .. drops the name before it");
	is_str(resolve("a/b/../../c", 64), "c", "resolve: .. twice, back to the top");
	is_str(resolve("a/..", 64), ".", "resolve: .. back to the workspace itself");
	is_str(resolve("..a/b../...", 64), "..a/b../...", "resolve: dots inside names are names");
	is_str(resolve("a\nb/\x7f", 64), "a\nb/\x7f", "resolve: control characters are kept");
	is_str(resolve("..", 64), "ESCAPES", "resolve: .. climbs out");
	is_str(resolve("../x", 64), "ESCAPES", "resolve: ../x climbs out");
	is_str(resolve("/../etc/passwd", 64), "ESCAPES", "resolve: /../etc climbs out");
	is_str(resolve("a/../../x", 64), "ESCAPES", "resolve: a/../../x climbs out");
	is_str(resolve("a/../../a/x", 64), "ESCAPES",
	       "resolve: a path that climbs out and back in still climbed out");
	is_str(resolve("./../x", 64), "ESCAPES", "resolve: ./../x climbs out");
	is_str(resolve("abcdefgh/ij", 11), "TOO_LONG", "resolve: one byte short of room");
	is_str(resolve("abcdefgh/ij", 12), "abcdefgh/ij", "resolve: just room, with its NUL");
	is_str(resolve("a", 1), "TOO_LONG", "resolve: no room for the NUL");
	is_str(resolve("", 1), "TOO_LONG", "resolve: no room for .");
	is_str(resolve("x/../../y", 2), "ESCAPES", "resolve: climbing out is said before length");
}

/* Bounded fuzz: random bytes around real delimiters, and mutations of a valid body. Each
 * parse must end (linear), and a success must point inside the body. */
static void
test_fuzz(void)
{
	static const char base[] = REQ("bnd", "f.txt", "payload\r\n--bn");
	static const char pieces[][32] = {
	    "--bnd",     "\r\n",        "\r\n\r\n",
	    "--",        "\"",          ";",
	    "name=file", "filename=\"", "Content-Disposition: form-data",
	    "\\",        "bnd",         "x"};
	char buf[512];
	struct multipart_file f;
	const char *why;
	unsigned long seed = 12345;
	int bad = 0, found = 0, differ = 0;

	for (int i = 0; i < 20000; i++) {
		size_t n = 0;
		seed = seed * 6364136223846793005UL + 1442695040888963407UL;
		if (i % 2) {
			/* a mutation: flip, cut or duplicate bytes of the valid body */
			n = sizeof(base) - 1;
			memcpy(buf, base, n);
			for (int k = (int)(seed >> 60) + 1; k > 0; k--) {
				seed = seed * 6364136223846793005UL + 1;
				size_t at = (seed >> 33) % n;
				buf[at] = (char)(seed >> 20);
			}
			n = (seed >> 40) % (n + 1);
		} else {
			while (n < 400) {
				seed = seed * 6364136223846793005UL + 1;
				const char *p =
				    pieces[(seed >> 33) % (sizeof(pieces) / sizeof(pieces[0]))];
				size_t pl = strlen(p);
				if ((seed >> 50) % 7 == 0)
					break;
				memcpy(buf + n, p, pl);
				n += pl;
			}
		}
		int rc = parse(buf, n, "bnd", &f, &why);
		if (rc == 0) {
			found++;
			if (f.data < buf || f.data + f.len > buf + n ||
			    f.filename_len > MULTIPART_MAX_FILENAME)
				bad++;
		}
		{
			/* the stream reader agrees, whatever the pieces the body comes in */
			static struct multipart_file g;
			size_t glen;
			const char *gwhy;
			int grc = stream_parse(buf, n, "bnd", &g, &glen, &gwhy, seed, false);
			if (grc != rc ||
			    (rc == 0 && (glen != f.len || memcmp(streamed, f.data, glen) != 0 ||
			                 g.filename_len != f.filename_len ||
			                 strcmp(g.filename, f.filename) != 0)))
				differ++;
		}
	}
	ok(bad == 0, "fuzz: 20000 random and mutated bodies, %d parsed, none out of bounds", found);
	ok(differ == 0,
	   "fuzz: the stream reader agrees with the in-memory one on all of them (%d differ)",
	   differ);
}

/* Large bodies through the stream reader: data larger than the window, delimiter look-alikes
 * across piece boundaries, a header block larger than the window, a read error. */
static void
test_stream(void)
{
	static char body[(1 << 20) + 4096];
	static struct multipart_file f;
	const char *why;
	size_t n = 0, data_len, dlen;
	static const char head[] = "--BND\r\nContent-Disposition: form-data; name=\"other\"\r\n\r\n"
	                           "skipped\r\n--BND\r\nContent-Disposition: form-data; "
	                           "name=\"file\"; filename=\"big.bin\"\r\n\r\n";
	const size_t data_start = sizeof(head) - 1;

	memcpy(body, head, data_start);
	n = data_start;
	for (size_t i = 0; n < data_start + (1 << 20); i++) {
		/* "\r\n--BN" and "\r\n--BNX": look-alikes of the delimiter */
		const char *piece = i % 97 == 0   ? "\r\n--BN"
		                    : i % 89 == 0 ? "\r\n--BNX"
		                                  : "abcdefg";
		memcpy(body + n, piece, strlen(piece));
		n += strlen(piece);
	}
	dlen = n - data_start;
	memcpy(body + n, "\r\n--BND--\r\n", 11);
	n += 11;
	ok(stream_parse(body, n, "BND", &f, &data_len, &why, 7, false) == 0 &&
	       !strcmp(f.filename, "big.bin") && data_len == dlen &&
	       memcmp(streamed, body + data_start, dlen) == 0,
	   "stream: a 1 MiB file after another part, in small pieces, comes out whole");
	ok(stream_parse(body, n - 11, "BND", &f, &data_len, &why, 7, false) == -1 &&
	       !strcmp(why, "the multipart body is not closed"),
	   "stream: the same without its closing delimiter is refused");
	ok(stream_parse(body, n - 11, "BND", &f, &data_len, &why, 7, true) == -1 &&
	       !strcmp(why, "the request body could not be read"),
	   "stream: a read error is reported as such");
	n = 0;
	memcpy(body, "--BND\r\nX-Long: ", 16);
	n = 16;
	memset(body + n, 'h', MULTIPART_STREAM_WINDOW);
	n += MULTIPART_STREAM_WINDOW;
	memcpy(body + n, "\r\n\r\ndata\r\n--BND--", 17);
	n += 17;
	ok(stream_parse(body, n, "BND", &f, &data_len, &why, 3, false) == -1 &&
	       !strcmp(why, "a multipart part's headers are too long"),
	   "stream: a header block larger than the window is refused");
	ok(stream_parse(REQ("b", "x.txt", "v"), sizeof(REQ("b", "x.txt", "v")) - 1, "b", &f,
	                &data_len, &why, 1, false) == 0 &&
	       data_len == 1 && streamed[0] == 'v',
	   "stream: what requests sends");
	ok(stream_parse("", 0, "b", &f, &data_len, &why, 1, false) == -1 &&
	       !strcmp(why, "the body is not multipart/form-data"),
	   "stream: an empty body");
}

int
main(void)
{
	test_boundary();
	test_parts();
	test_paths();
	test_resolve();
	test_fuzz();
	test_stream();
	return tap_done();
}
