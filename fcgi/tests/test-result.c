/* Unit tests for result.c: the strict parser and the safe reader. */
#include "core/result.h"
#include "tap.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static void
parses_to(const char *in, const char *want, const char *what)
{
	char *out;
	size_t len;
	enum result_status st = result_parse(in, strlen(in), &out, &len);

	ok(st == RESULT_OK && out && strcmp(out, want) == 0 && len == strlen(want), "parse: %s",
	   what);
	if (st != RESULT_OK || !out || strcmp(out, want) != 0)
		printf("#   got: %s (status %d)\n", out ? out : "(null)", st);
	free(out);
}

static void
rejects(const char *in, size_t n, const char *what)
{
	char *out;
	size_t len;

	ok(result_parse(in, n, &out, &len) == RESULT_INVALID && out == NULL, "rejects: %s", what);
}

static enum result_status
read_in(int dirfd, size_t max, char **out)
{
	size_t len;

	return result_read(dirfd, max, out, &len);
}

static void
write_file(int dirfd, const char *name, const char *data, size_t n)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);

	if (fd < 0 || write(fd, data, n) != (ssize_t)n)
		abort();
	close(fd);
}

int
main(void)
{
	char *out, buf[128], tmpl[] = "/tmp/codebox-test-result.XXXXXX";
	size_t len;
	int dirfd;

	parses_to("{\"a\": [1, 2.50, -0.5e-3, true, false, null]}",
	          "{\"a\":[1,2.50,-0.5e-3,true,false,null]}",
	          "whitespace dropped, numbers verbatim");
	parses_to("265252859812191058636308480000000", "265252859812191058636308480000000",
	          "a big integer survives exactly");
	parses_to(" \"caf\\u00e9 \\ud83d\\ude00 \\/ \\u0000\" ",
	          "\"caf\xc3\xa9 \xf0\x9f\x98\x80 / \\u0000\"",
	          "escapes decoded, surrogate pairs joined, NUL re-escaped");
	parses_to("{\"k\":1,\"k\":2}", "{\"k\":1,\"k\":2}",
	          "duplicate keys kept (the last wins in a parser)");
	parses_to("[[]]", "[[]]", "nested empty arrays");
	ok(result_parse("null", 4, &out, &len) == RESULT_NONE && out == NULL, "null is no result");
	ok(result_parse(" null\n", 6, &out, &len) == RESULT_NONE,
	   "null with whitespace is no result");

	rejects("", 0, "an empty file");
	rejects("NaN", 3, "NaN");
	rejects("[Infinity]", 10, "Infinity");
	rejects("[-Infinity]", 11, "-Infinity");
	rejects("\xef\xbb\xbf{}", 5, "a BOM");
	rejects("{\"a\":1,}", 8, "a trailing comma");
	rejects("{'a':1}", 7, "single quotes");
	rejects("01", 2, "a leading zero");
	rejects("1.", 2, "a bare decimal point");
	rejects("\"\\ud800\"", 8, "a lone high surrogate");
	rejects("\"\\udc00\"", 8, "a lone low surrogate");
	rejects("\"a\nb\"", 5, "a raw newline in a string");
	rejects("\"\xff\"", 3, "invalid UTF-8");
	rejects("\"\xed\xa0\x80\"", 5, "an encoded surrogate");
	rejects("{} {}", 5, "two documents");
	rejects("\"\\x41\"", 6, "an unknown escape");
	rejects("[1] x", 5, "trailing garbage");

	/* numbers as Python's json.loads reads them: every float token, integers up to 4300
	 * digits (one more and Python refuses the whole document) */
	parses_to("1e400", "1e400", "a float past a double's range is kept (Python reads inf)");
	{
		static char big[RESULT_MAX_INT_DIGITS + 16];
		memset(big, '7', RESULT_MAX_INT_DIGITS);
		big[RESULT_MAX_INT_DIGITS] = '\0';
		ok(result_parse(big, RESULT_MAX_INT_DIGITS, &out, &len) == RESULT_OK &&
		       len == RESULT_MAX_INT_DIGITS,
		   "an integer of 4300 digits is accepted");
		free(out);
		big[0] = '-';
		memset(big + 1, '7', RESULT_MAX_INT_DIGITS);
		ok(result_parse(big, RESULT_MAX_INT_DIGITS + 1, &out, &len) == RESULT_OK,
		   "a negative integer of 4300 digits is accepted (the sign is no digit)");
		free(out);
		memset(big, '7', RESULT_MAX_INT_DIGITS + 1);
		rejects(big, RESULT_MAX_INT_DIGITS + 1, "an integer of 4301 digits");
		big[0] = '-';
		memset(big + 1, '7', RESULT_MAX_INT_DIGITS + 1);
		rejects(big, RESULT_MAX_INT_DIGITS + 2, "a negative integer of 4301 digits");
		/* with a fraction or an exponent it is a float: any length */
		memset(big, '7', RESULT_MAX_INT_DIGITS + 10);
		big[1] = '.';
		ok(result_parse(big, RESULT_MAX_INT_DIGITS + 10, &out, &len) == RESULT_OK &&
		       len == RESULT_MAX_INT_DIGITS + 10,
		   "a float token of 4310 characters is accepted verbatim");
		free(out);
		memset(big, '1', 600);
		memcpy(big + 600, "e-700", 5);
		ok(result_parse(big, 605, &out, &len) == RESULT_OK,
		   "a 605-character exponent float");
		free(out);
	}

	char deep[2 * RESULT_MAX_DEPTH + 10];
	memset(deep, '[', RESULT_MAX_DEPTH);
	memset(deep + RESULT_MAX_DEPTH, ']', RESULT_MAX_DEPTH);
	ok(result_parse(deep, 2 * RESULT_MAX_DEPTH, &out, &len) == RESULT_OK,
	   "nesting at the limit");
	free(out);
	memset(deep, '[', RESULT_MAX_DEPTH + 1);
	memset(deep + RESULT_MAX_DEPTH + 1, ']', RESULT_MAX_DEPTH + 1);
	rejects(deep, 2 * RESULT_MAX_DEPTH + 2, "nesting past the limit");

	is_str(result_error_string(RESULT_TOO_LARGE, 65536, buf, sizeof(buf)),
	       "result.json is larger than 65536 bytes", "the too-large message carries the limit");
	is_str(result_error_string(RESULT_OPEN_FAILED, 1, buf, sizeof(buf)),
	       "result.json could not be opened (symlinks are rejected)", "the open message");
	is_str(result_error_string(RESULT_NOT_REGULAR, 1, buf, sizeof(buf)),
	       "result.json is not a regular file", "the not-regular message");
	is_str(result_error_string(RESULT_INVALID, 1, buf, sizeof(buf)),
	       "result.json is not valid JSON", "the invalid message");
	ok(result_error_string(RESULT_NONE, 1, buf, sizeof(buf)) == NULL,
	   "no message without error");

	if (mkdtemp(tmpl) == NULL)
		abort();
	dirfd = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ok(read_in(dirfd, 100, &out) == RESULT_NONE, "read: no file");

	write_file(dirfd, "result.json", "{\"x\": 1}", 8);
	ok(read_in(dirfd, 8, &out) == RESULT_OK && strcmp(out, "{\"x\":1}") == 0,
	   "read: exactly the limit is accepted");
	free(out);
	ok(read_in(dirfd, 7, &out) == RESULT_TOO_LARGE, "read: one byte over the limit");
	write_file(dirfd, "result.json", "{\"x\": 1", 7);
	ok(read_in(dirfd, 100, &out) == RESULT_INVALID, "read: invalid JSON");
	unlinkat(dirfd, "result.json", 0);

	write_file(dirfd, "secret", "{\"secret\": 1}", 13);
	if (symlinkat("secret", dirfd, "result.json") < 0)
		abort();
	ok(read_in(dirfd, 100, &out) == RESULT_OPEN_FAILED, "read: a symlink is rejected");
	unlinkat(dirfd, "result.json", 0);

	if (mkfifoat(dirfd, "result.json", 0600) < 0)
		abort();
	ok(read_in(dirfd, 100, &out) == RESULT_NOT_REGULAR,
	   "read: a FIFO without writer does not block");
	unlinkat(dirfd, "result.json", 0);

	if (mkdirat(dirfd, "result.json", 0700) < 0)
		abort();
	ok(read_in(dirfd, 100, &out) == RESULT_NOT_REGULAR,
	   "read: a directory is not a regular file");
	unlinkat(dirfd, "result.json", AT_REMOVEDIR);
	unlinkat(dirfd, "secret", 0);
	close(dirfd);
	rmdir(tmpl);
	return tap_done();
}
