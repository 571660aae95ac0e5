/* Unit tests for files.c: the inputs' rules, writing them, collecting and rendering artifacts,
 * types by magic, base64. */
#include "core/files.h"
#include "tap.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* base64 as the answers carry it (jsonw_base64()), without the string's quotes */
static char *
encode(const char *data, size_t n, size_t *out_len)
{
	struct jsonw w;
	size_t len;
	char *s;

	jsonw_init(&w);
	jsonw_base64(&w, data, n);
	s = jsonw_take(&w, &len);
	if (s == NULL || len < 2)
		return s;
	memmove(s, s + 1, len - 2);
	s[len - 2] = '\0';
	*out_len = len - 2;
	return s;
}

/* the "artifacts" array artifacts_write() writes, parsed back; with the types found once
 * (as the worker does) and sniffed on the way, which must agree */
static json_t *
render(const char *blob, size_t len)
{
	struct jsonw w;
	char *text, *again;
	const char **types = artifacts_types(blob, len);
	json_t *list;

	jsonw_init(&w);
	artifacts_write(&w, blob, len, types);
	text = jsonw_take(&w, NULL);
	jsonw_init(&w);
	artifacts_write(&w, blob, len, NULL);
	again = jsonw_take(&w, NULL);
	list = text && again && strcmp(text, again) == 0 ? json_loads(text, 0, NULL) : NULL;
	free(types);
	free(text);
	free(again);
	return list;
}

static char msg[512];

static int
parse(const char *files_json, char **blob, size_t *len, size_t *count)
{
	json_t *v = json_loads(files_json, JSON_ALLOW_NUL, NULL);
	int rc = files_parse(v, 1000, blob, len, count, msg, sizeof(msg));
	json_decref(v);
	return rc;
}

static void
refused(const char *files_json, const char *want, const char *what)
{
	char *blob;
	size_t len, count;
	int rc = parse(files_json, &blob, &len, &count);

	ok(rc < 0 && strstr(msg, want) != NULL, "400: %s (%s)", what, rc < 0 ? msg : "accepted");
	if (rc == 0)
		free(blob);
}

static void
put(int dirfd, const char *name, const char *data, size_t n)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, data, n) != (ssize_t)n)
		printf("# could not write %s\n", name);
	if (fd >= 0)
		close(fd);
}

static json_t *
find(json_t *list, const char *path)
{
	size_t i;
	json_t *a;

	json_array_foreach(list, i, a)
	{
		if (strcmp(json_string_value(json_object_get(a, "path")), path) == 0)
			return a;
	}
	return NULL;
}

static const char *
field(json_t *a, const char *key)
{
	return json_string_value(json_object_get(a, key));
}

/* artifacts_collect_since()'s listing of path after a mark: whether it is listed, and as what */
static const char *
listed_since(int dirfd, const struct artifacts_mark *m, const char *path)
{
	static char content[64];
	char *ab = NULL;
	size_t al = 0;
	json_t *list;
	const char *c;

	content[0] = '\0';
	if (artifacts_collect_since(dirfd, NULL, 0, ARTIFACTS_ALL, m, &ab, &al) < 0)
		return NULL;
	list = render(ab, al);
	c = field(find(list, path), "contentBase64");
	if (c != NULL)
		snprintf(content, sizeof(content), "%s", c);
	json_decref(list);
	free(ab);
	return c != NULL ? content : NULL;
}

/* waits (bounded: 1 s) until the clock that stamps files has passed t: what is stamped after
 * is later than t, and when t was that clock's, the clock has just ticked */
static void
tick_past(const struct timespec *t)
{
	struct timespec now, pause = {0, 1000 * 1000};

	for (int i = 0; i < 1000; i++) {
		(void)clock_gettime(CLOCK_REALTIME_COARSE, &now);
		if (now.tv_sec > t->tv_sec || (now.tv_sec == t->tv_sec && now.tv_nsec > t->tv_nsec))
			return;
		nanosleep(&pause, NULL);
	}
}

/* A session cell's files: a mark, then what changed after it, the moment after it too. */
static void
test_marks(void)
{
	struct artifacts_mark m;
	struct timespec future;
	struct stat st;
	int found = 0, fresh = 0, kept = 0, dirfd;
	char name[32], dir[] = "/tmp/codebox-test-marks-XXXXXX", cmd[128];
	const char *c;

	if (mkdtemp(dir) == NULL || (dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		ok(0, "a directory for the marks");
		return;
	}

	/* a file made at once after the mark is the cell's: the kernel stamps it with the coarse
	 * clock, a tick behind CLOCK_REALTIME, and a fine read as since missed nearly all */
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "made-%03d.txt", i);
		/* at the start of a tick: the file made below is in the mark's */
		(void)clock_gettime(CLOCK_REALTIME_COARSE, &future);
		tick_past(&future);
		if (artifacts_mark(dirfd, &m) < 0)
			break;
		put(dirfd, name, "made", 4);
		found += listed_since(dirfd, &m, name) != NULL;
		artifacts_mark_free(&m);
		(void)unlinkat(dirfd, name, 0);
	}
	ok(found == 200, "a file made right after the mark is listed (%d of 200)", found);
	/* one made just before the mark, in its tick, is not (unless it changes) */
	for (int i = 0; i < 50; i++) {
		snprintf(name, sizeof(name), "before-%03d.txt", i);
		put(dirfd, name, "old!", 4);
		if (artifacts_mark(dirfd, &m) < 0)
			break;
		kept += listed_since(dirfd, &m, name) == NULL;
		put(dirfd, name, "new!", 4); /* rewritten, its size kept, in the same tick */
		c = listed_since(dirfd, &m, name);
		fresh += c != NULL && strcmp(c, "bmV3IQ==") == 0;
		artifacts_mark_free(&m);
	}
	ok(kept == 50, "a file made just before the mark is not listed (%d of 50)", kept);
	ok(fresh == 50, "rewritten after it, its size kept, it is, as it now is (%d of 50)", fresh);
	/* times a program sets: an earlier file's mtime in the future is not this cell's; a
	 * file of this cell's dated back is */
	put(dirfd, "future.txt", "later", 5);
	(void)clock_gettime(CLOCK_REALTIME, &future);
	future.tv_sec += 3600;
	(void)utimensat(dirfd, "future.txt", (struct timespec[2]){future, future}, 0);
	if (fstatat(dirfd, "future.txt", &st, 0) == 0)
		tick_past(&st.st_ctim);
	if (artifacts_mark(dirfd, &m) == 0) {
		ok(listed_since(dirfd, &m, "future.txt") == NULL,
		   "an earlier file's mtime in the future does not list it");
		put(dirfd, "dated.txt", "dated", 5);
		(void)utimensat(dirfd, "dated.txt", (struct timespec[2]){{1, 0}, {1, 0}}, 0);
		ok(listed_since(dirfd, &m, "dated.txt") != NULL,
		   "a file made after the mark, its mtime set to 1970, is listed");
		artifacts_mark_free(&m);
	}
	close(dirfd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
}

int
main(void)
{
	char *blob, *enc, *dec, dir[] = "/tmp/codebox-test-files.XXXXXX", big[64];
	size_t len, count, n;
	int dirfd;

	/* base64 */
	enc = encode("hi!?", 4, &n);
	is_str(enc, "aGkhPw==", "base64 of four bytes is padded");
	free(enc);
	dec = files_base64_decode("aGkhPw==", 8, &n);
	ok(dec != NULL && n == 4 && memcmp(dec, "hi!?", 4) == 0, "base64 decodes");
	free(dec);
	ok(files_base64_decode("aGkhPw", 6, &n) == NULL, "unpadded base64 is refused");
	ok(files_base64_decode("aGk hPw=", 8, &n) == NULL, "whitespace in base64 is refused");
	ok(files_base64_decode("aGkhPx==", 8, &n) == NULL,
	   "non-canonical padding bits are refused");
	dec = files_base64_decode("", 0, &n);
	ok(dec != NULL && n == 0, "empty base64 is empty content");
	free(dec);
	for (int k = 0; k < 64; k++)
		big[k] = (char)(k * 37);
	enc = encode(big, 61, &n);
	dec = enc ? files_base64_decode(enc, n, &len) : NULL;
	ok(dec != NULL && len == 61 && memcmp(dec, big, 61) == 0, "binary bytes round-trip");
	free(enc);
	free(dec);

	/* the inputs' rules */
	ok(parse("[{\"path\":\"data/in.csv\",\"content\":\"a,b\\n1,2\\n\"},"
	         "{\"path\":\"bin\",\"contentBase64\":\"AAEC\"}]",
	         &blob, &len, &count) == 0 &&
	       count == 2,
	   "two files, text and base64, are accepted");
	free(blob);
	ok(parse("[]", &blob, &len, &count) == 0 && count == 0, "no files");
	free(blob);
	refused("{}", "(files: list_type)", "not an array");
	refused("[1]", "(files[0]: dict_type)", "not an object");
	refused("[{\"path\":\"a\"}]", "(files[0]: missing)", "no content");
	refused("[{\"path\":\"a\",\"content\":\"x\",\"contentBase64\":\"\"}]",
	        "(files[0]: extra_forbidden)", "both contents");
	refused("[{\"path\":\"a\",\"content\":\"x\",\"mode\":1}]",
	        "(files[0].mode: extra_forbidden)", "an unknown key");
	refused("[{\"content\":\"x\"}]", "(files[0].path: missing)", "no path");
	refused("[{\"path\":\"/etc/passwd\",\"content\":\"x\"}]", "(files[0].path: value_error)",
	        "an absolute path");
	refused("[{\"path\":\"a/../../b\",\"content\":\"x\"}]", "must be relative",
	        "a .. component");
	refused("[{\"path\":\"a//b\",\"content\":\"x\"}]", "must be relative",
	        "an empty component");
	refused("[{\"path\":\"a\\u0000b\",\"content\":\"x\"}]", "must be relative", "a NUL");
	refused("[{\"path\":\"main.py\",\"content\":\"x\"}]", "names main.py", "main.py");
	refused("[{\"path\":\"result.json\",\"content\":\"x\"}]", "names main.py", "result.json");
	refused("[{\"path\":\"a\",\"content\":\"x\"},{\"path\":\"a\",\"content\":\"y\"}]",
	        "files[0]'s", "a duplicate");
	refused("[{\"path\":\"a\",\"content\":\"x\"},{\"path\":\"a/b\",\"content\":\"y\"}]",
	        "(files[1].path: value_error)", "a file under a file");
	refused("[{\"path\":\"a/b\",\"content\":\"x\"},{\"path\":\"a\",\"content\":\"y\"}]",
	        "(files[1].path: value_error)", "a file over a directory");
	refused("[{\"path\":\"a\",\"contentBase64\":\"!!!!\"}]",
	        "(files[0].contentBase64: value_error)", "bad base64");
	refused("[{\"path\":\"a\",\"content\":7}]", "(files[0].content: string_type)",
	        "a number as content");
	{
		char name[300], body[400];
		memset(name, 'n', 256);
		name[256] = '\0';
		snprintf(body, sizeof(body), "[{\"path\":\"%s\",\"content\":\"\"}]", name);
		refused(body, "longer than 255", "a component over NAME_MAX");
	}
	refused("[{\"path\":\"a/b/c/d/e/f/g/h/i/j/k/l/m/n/o/p/q\",\"content\":\"\"}]", "16 levels",
	        "too deep");
	{
		/* 1000 bytes is the bound given to parse() */
		char body[2200];
		char x[601];
		memset(x, 'x', 600);
		x[600] = '\0';
		snprintf(
		    body, sizeof(body),
		    "[{\"path\":\"a\",\"content\":\"%s\"},{\"path\":\"b\",\"content\":\"%s\"}]", x,
		    x);
		refused(body, "(files[1]: too_long)", "more bytes than the bound, in all");
	}
	{
		json_t *v = json_array();
		for (int k = 0; k <= FILES_MAX_COUNT; k++)
			json_array_append_new(v,
			                      json_pack("{s:s, s:s}", "path", "x", "content", ""));
		ok(files_parse(v, 1000, &blob, &len, &count, msg, sizeof(msg)) < 0 &&
		       strstr(msg, "(files: too_long)") != NULL,
		   "101 files are too many (%s)", msg);
		json_decref(v);
	}

	/* written, then collected as the run would leave them */
	if (mkdtemp(dir) == NULL || (dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		ok(0, "a temporary directory");
		return tap_done();
	}
	ok(parse("[{\"path\":\"data/in.csv\",\"content\":\"a,b\\n1,2\\n\"},"
	         "{\"path\":\"data/deep/x.bin\",\"contentBase64\":\"AAEC\"},"
	         "{\"path\":\"notes.txt\",\"content\":\"keep\"}]",
	         &blob, &len, &count) == 0,
	   "inputs for the run");
	ok(files_write(dirfd, blob, len) == 0, "files_write writes them");
	{
		struct stat st;
		ok(fstatat(dirfd, "data/deep/x.bin", &st, 0) == 0 && st.st_size == 3 &&
		       (st.st_mode & 0777) == 0600,
		   "a nested file, 0600, its decoded size");
		ok(fstatat(dirfd, "data", &st, 0) == 0 && (st.st_mode & 0777) == 0700,
		   "its directory, 0700");
	}
	ok(files_write(dirfd, blob, len) < 0, "files_write never replaces a file");
	/* what the program did */
	put(dirfd, "main.py", "print(1)", 8);
	put(dirfd, "result.json", "{}", 2);
	put(dirfd, "notes.txt", "changed", 7);
	put(dirfd, "chart.png", "\x89PNG\r\n\x1a\n....", 12);
	put(dirfd, "out.json", "{\"a\": [1, 2]}", 13);
	put(dirfd, "out.csv", "x,y\n1,2\n3,4\n", 12);
	put(dirfd, "pic.svg", "<?xml version=\"1.0\"?>\n<!-- c -->\n<svg xmlns=\"x\"/>", 48);
	put(dirfd, "blob.bin", "\x00\x01\xfe", 3);
	mkdirat(dirfd, "__pycache__", 0700);
	put(dirfd, "__pycache__/m.pyc", "x", 1);
	ok(symlinkat("/etc/passwd", dirfd, "link") == 0, "a symlink to /etc/passwd");
	(void)mkfifoat(dirfd, "fifo", 0600);
	{
		char *ab;
		size_t al;
		json_t *list;
		char *man;
		size_t man_len;
		ok(files_manifest(blob, len, &man, &man_len) == 0 &&
		       man_len == 3 * (sizeof(struct file_rec) + sizeof(struct file_digest)) +
		                      strlen("data/in.csvdata/deep/x.binnotes.txt"),
		   "files_manifest: a record per input, a digest for its content");
		ok(artifacts_collect(dirfd, man, man_len, ARTIFACTS_ALL, &ab, &al) == 0,
		   "artifacts_collect");
		free(man);
		list = render(ab, al);
		ok(list != NULL && json_array_size(list) == 6, "six artifacts (%zu)",
		   list ? json_array_size(list) : 0);
		ok(find(list, "main.py") == NULL && find(list, "result.json") == NULL,
		   "main.py and result.json are not artifacts");
		ok(find(list, "data/in.csv") == NULL && find(list, "data/deep/x.bin") == NULL,
		   "unchanged inputs are not artifacts");
		ok(find(list, "notes.txt") != NULL, "a changed input is");
		ok(find(list, "link") == NULL && find(list, "fifo") == NULL &&
		       find(list, "__pycache__/m.pyc") == NULL,
		   "no symlink, FIFO or __pycache__");
		is_str(field(find(list, "chart.png"), "mimeType"), "image/png", "PNG by magic");
		is_str(field(find(list, "out.json"), "mimeType"), "application/json", "JSON");
		is_str(field(find(list, "out.csv"), "mimeType"), "text/csv", "CSV");
		is_str(field(find(list, "pic.svg"), "mimeType"), "image/svg+xml", "SVG");
		is_str(field(find(list, "blob.bin"), "mimeType"), "application/octet-stream",
		       "binary");
		is_str(field(find(list, "notes.txt"), "mimeType"), "text/plain", "text");
		is_str(field(find(list, "notes.txt"), "contentBase64"),
		       "Y2hhbmdlZA==", "the content in base64");
		ok(json_is_null(json_object_get(find(list, "notes.txt"), "omitted")) &&
		       json_integer_value(json_object_get(find(list, "notes.txt"), "bytes")) == 7,
		   "sent: omitted is null, bytes its size");
		is_str(field(json_array_get(list, 0), "path"), "blob.bin", "sorted by path");
		json_decref(list);
		/* a malformed blob renders as far as it is well-formed */
		list = render(ab, al - 1);
		ok(list != NULL && json_array_size(list) == 5, "a cut blob: all but the last (%zu)",
		   list ? json_array_size(list) : 0);
		json_decref(list);
		free(ab);
		/* only the pictures (what MCP shows a model): PNG yes, SVG (text) no */
		put(dirfd, "photo.jpg", "\xff\xd8\xff\xe0 jfif", 10);
		put(dirfd, "fake.png", "not a picture", 13);
		ok(artifacts_collect(dirfd, NULL, 0, ARTIFACTS_IMAGES, &ab, &al) == 0,
		   "artifacts_collect, pictures only");
		list = render(ab, al);
		ok(list != NULL && json_array_size(list) == 2, "two pictures (%zu)",
		   list ? json_array_size(list) : 0);
		ok(find(list, "chart.png") != NULL && find(list, "photo.jpg") != NULL,
		   "PNG and JPEG by their magic");
		ok(find(list, "fake.png") == NULL && find(list, "pic.svg") == NULL &&
		       find(list, "notes.txt") == NULL,
		   "by content, not by name: no other file is listed or counted");
		json_decref(list);
		free(ab);
		ok(artifacts_collect(dirfd, NULL, 0, ARTIFACTS_NONE, &ab, &al) == 0 && ab == NULL &&
		       al == 0,
		   "none wanted: nothing walked, nothing allocated");
		ok(unlinkat(dirfd, "photo.jpg", 0) == 0 && unlinkat(dirfd, "fake.png", 0) == 0,
		   "the pictures' test files removed");
	}
	free(blob);
	/* bounds: too many, too large */
	for (int k = 0; k < ARTIFACTS_MAX_SENT + 3; k++) {
		char name[32];
		snprintf(name, sizeof(name), "many-%02d.txt", k);
		put(dirfd, name, "m", 1);
	}
	{
		int fd = openat(dirfd, "huge.bin", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
		char *ab;
		size_t al;
		json_t *list, *huge;
		int sent = 0, too_many = 0;
		size_t i;
		json_t *a;

		ok(fd >= 0 && ftruncate(fd, ARTIFACTS_MAX_BYTES + 1) == 0, "a sparse huge file");
		if (fd >= 0)
			close(fd);
		ok(artifacts_collect(dirfd, NULL, 0, ARTIFACTS_ALL, &ab, &al) == 0 &&
		       al <= ARTIFACTS_BLOB_MAX,
		   "collected within ARTIFACTS_BLOB_MAX");
		list = render(ab, al);
		json_array_foreach(list, i, a)
		{
			if (json_is_string(json_object_get(a, "contentBase64")))
				sent++;
			else if (strstr(field(a, "omitted"), "maxArtifacts files") != NULL)
				too_many++;
		}
		ok(sent == ARTIFACTS_MAX_SENT, "at most %d sent (%d)", ARTIFACTS_MAX_SENT, sent);
		ok(too_many > 0, "the rest listed as too many (%d)", too_many);
		huge = find(list, "huge.bin");
		ok(huge != NULL && json_is_null(json_object_get(huge, "contentBase64")) &&
		       strstr(field(huge, "omitted"), "larger than") != NULL &&
		       json_integer_value(json_object_get(huge, "bytes")) ==
		           ARTIFACTS_MAX_BYTES + 1,
		   "a file over the bound is listed, its size and why, no content");
		json_decref(list);
		free(ab);
	}
	close(dirfd);
	{
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			printf("# could not remove %s\n", dir);
	}

	/* many inputs: those left as they were are neither listed nor counted, so every output
	 * is sent whatever their number, and a change that keeps the size is still a change */
	{
		char dir2[] = "/tmp/codebox-test-files-XXXXXX";
		json_t *v = json_array(), *list;
		char *ab, *man;
		size_t al, man_len;
		int d2;

		for (int k = 0; k < FILES_MAX_COUNT; k++) {
			char name[32], content[40];
			snprintf(name, sizeof(name), "in/f-%03d.txt", k);
			/* one long enough for several of the digest's reads */
			if (k == 7)
				json_array_append_new(
				    v, json_pack("{s:s, s:s%}", "path", name, "content",
				                 "0123456789abcdef0123456789abcdef0123456789abcd",
				                 46));
			else {
				snprintf(content, sizeof(content), "input %03d", k);
				json_array_append_new(
				    v, json_pack("{s:s, s:s}", "path", name, "content", content));
			}
		}
		ok(files_parse(v, 1 << 20, &blob, &len, &count, msg, sizeof(msg)) == 0 &&
		       count == FILES_MAX_COUNT,
		   "%d inputs", FILES_MAX_COUNT);
		json_decref(v);
		d2 = mkdtemp(dir2) != NULL ? open(dir2, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
		ok(d2 >= 0 && files_write(d2, blob, len) == 0 &&
		       files_manifest(blob, len, &man, &man_len) == 0,
		   "written, and their manifest");
		put(d2, "a.txt", "first", 5);
		put(d2, "z.txt", "last", 4);
		put(d2, "in/f-050.txt", "INPUT 050", 9); /* the same size, changed */
		ok(artifacts_collect(d2, man, man_len, ARTIFACTS_ALL, &ab, &al) == 0, "collected");
		list = render(ab, al);
		ok(list != NULL && json_array_size(list) == 3,
		   "only what the program made or changed is listed (%zu)",
		   list ? json_array_size(list) : 0);
		is_str(field(find(list, "a.txt"), "contentBase64"), "Zmlyc3Q=", "a.txt is sent");
		is_str(field(find(list, "z.txt"), "contentBase64"),
		       "bGFzdA==", "z.txt, after 100 inputs by path, is sent");
		is_str(field(find(list, "in/f-050.txt"), "contentBase64"), "SU5QVVQgMDUw",
		       "an input changed in place, its size kept, is sent");
		json_decref(list);
		free(ab);
		/* a manifest of other content: every input counts as changed */
		put(d2, "in/f-007.txt", "0123456789abcdef0123456789abcdef0123456789abcX", 46);
		ok(artifacts_collect(d2, man, man_len, ARTIFACTS_ALL, &ab, &al) == 0,
		   "collected again");
		list = render(ab, al);
		ok(find(list, "in/f-007.txt") != NULL,
		   "a change in a long input's last word is seen");
		json_decref(list);
		free(ab);
		free(man);
		free(blob);
		if (d2 >= 0) {
			char cmd[128];
			close(d2);
			snprintf(cmd, sizeof(cmd), "rm -rf %s", dir2);
			if (system(cmd) != 0)
				printf("# could not remove %s\n", dir2);
		}
	}

	/* types by magic */
	is_str(files_sniff("\xff\xd8\xff\xe0", 4, false), "image/jpeg", "JPEG");
	is_str(files_sniff("GIF89a...", 9, false), "image/gif", "GIF");
	is_str(files_sniff("%PDF-1.7", 8, false), "application/pdf", "PDF");
	is_str(files_sniff("<svg></svg>", 11, false), "image/svg+xml", "a bare SVG");
	is_str(files_sniff("[1, 2", 5, false), "text/plain", "broken JSON is text");
	is_str(files_sniff("caf\xc3\xa9", 5, false), "text/plain", "UTF-8 text");
	is_str(files_sniff("caf\xe9", 4, false), "application/octet-stream", "Latin-1 is not text");
	is_str(files_sniff("one line, no newline", 20, false), "text/plain", "one line is text");
	is_str(files_sniff("a,b\nc\n", 6, false), "text/plain", "ragged commas are not CSV");
	test_marks();
	return tap_done();
}
