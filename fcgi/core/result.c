/*
 * result.c - the structured result of a run: result.json, read without trusting it.
 *
 * The file is the program's to forge: it may be a symlink to a secret, a FIFO that never
 * delivers, a directory, a gigabyte, or text that is almost JSON. It is opened with
 * O_NOFOLLOW | O_NONBLOCK, checked with fstat, read with a byte bound, then parsed by a strict
 * recursive-descent parser that also writes the normalised text the reply splices in.
 */
#include "core/result.h"

#include "core/jsonw.h"
#include "core/utf8.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *
result_error_string(enum result_status status, size_t max_bytes, char *buf, size_t buf_len)
{
	switch (status) {
	case RESULT_NONE:
	case RESULT_OK:
		return NULL;
	case RESULT_OPEN_FAILED:
		snprintf(buf, buf_len, "result.json could not be opened (symlinks are rejected)");
		return buf;
	case RESULT_NOT_REGULAR:
		snprintf(buf, buf_len, "result.json is not a regular file");
		return buf;
	case RESULT_TOO_LARGE:
		snprintf(buf, buf_len, "result.json is larger than %zu bytes", max_bytes);
		return buf;
	case RESULT_INVALID:
		snprintf(buf, buf_len, "result.json is not valid JSON");
		return buf;
	}
	return NULL;
}

struct parser {
	const unsigned char *p;
	const unsigned char *end;
	struct jsonw w;
};

static void
parser_ws(struct parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static bool
parser_lit(struct parser *ps, const char *lit)
{
	size_t n = strlen(lit);

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, lit, n) != 0)
		return false;
	jsonw_raw(&ps->w, lit, n);
	ps->p += n;
	return true;
}

static bool
parser_digits(struct parser *ps)
{
	const unsigned char *start = ps->p;

	while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
		ps->p++;
	return ps->p > start;
}

static bool
parser_number(struct parser *ps)
{
	const unsigned char *start = ps->p;

	if (ps->p < ps->end && *ps->p == '-')
		ps->p++;
	if (ps->p < ps->end && *ps->p == '0')
		ps->p++;
	else if (ps->p >= ps->end || *ps->p < '1' || *ps->p > '9' || !parser_digits(ps))
		return false;
	if (ps->p < ps->end && *ps->p == '.') {
		ps->p++;
		if (!parser_digits(ps))
			return false;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (!parser_digits(ps))
			return false;
	}
	size_t len = (size_t)(ps->p - start);
	/*
	 * Classified as Python's json.loads does, so that a Python client can read every reply:
	 * an integer of more than 4300 digits (sys.int_info.default_max_str_digits) is refused
	 * there, so it is not valid JSON here; every float token is accepted, whatever its
	 * length (1e400 reads as inf in Python, and is copied as written).
	 */
	if (!memchr(start, '.', len) && !memchr(start, 'e', len) && !memchr(start, 'E', len) &&
	    len - (*start == '-') > RESULT_MAX_INT_DIGITS)
		return false;
	jsonw_raw(&ps->w, (const char *)start, len);
	return true;
}

static int
parser_hex4(struct parser *ps)
{
	int v = 0;

	if (ps->end - ps->p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		int c = ps->p[i], d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if (c >= 'a' && c <= 'f')
			d = c - 'a' + 10;
		else if (c >= 'A' && c <= 'F')
			d = c - 'A' + 10;
		else
			return -1;
		v = v * 16 + d;
	}
	ps->p += 4;
	return v;
}

static size_t
utf8_encode(unsigned cp, char *out)
{
	if (cp < 0x80) {
		out[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		out[0] = (char)(0xC0 | (cp >> 6));
		out[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		out[0] = (char)(0xE0 | (cp >> 12));
		out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		out[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	out[0] = (char)(0xF0 | (cp >> 18));
	out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	out[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* Parses a string whose opening quote is at ps->p and writes it re-escaped. The decoded text
 * is collected first so jsonw_str() alone decides the output escaping. */
static bool
parser_string(struct parser *ps)
{
	struct jsonw s;
	bool ok = false;

	jsonw_init(&s);
	ps->p++; /* opening quote */
	for (;;) {
		if (ps->p >= ps->end)
			goto out;
		unsigned char c = *ps->p;
		if (c == '"') {
			ps->p++;
			break;
		}
		if (c < 0x20)
			goto out; /* raw control characters are not allowed */
		if (c < 0x80 && c != '\\') {
			jsonw_raw(&s, (const char *)ps->p, 1);
			ps->p++;
			continue;
		}
		if (c >= 0x80) {
			size_t n = utf8_valid_len(ps->p, ps->end);
			if (n == 0)
				goto out;
			jsonw_raw(&s, (const char *)ps->p, n);
			ps->p += n;
			continue;
		}
		/* an escape */
		ps->p++;
		if (ps->p >= ps->end)
			goto out;
		c = *ps->p++;
		char ch;
		switch (c) {
		case '"':
			ch = '"';
			break;
		case '\\':
			ch = '\\';
			break;
		case '/':
			ch = '/';
			break;
		case 'b':
			ch = '\b';
			break;
		case 'f':
			ch = '\f';
			break;
		case 'n':
			ch = '\n';
			break;
		case 'r':
			ch = '\r';
			break;
		case 't':
			ch = '\t';
			break;
		case 'u': {
			int cp = parser_hex4(ps);
			char enc[4];
			if (cp < 0)
				goto out;
			if (cp >= 0xDC00 && cp <= 0xDFFF)
				goto out; /* a lone low surrogate */
			if (cp >= 0xD800 && cp <= 0xDBFF) {
				if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u')
					goto out; /* a lone high surrogate */
				ps->p += 2;
				int lo = parser_hex4(ps);
				if (lo < 0xDC00 || lo > 0xDFFF)
					goto out;
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
			}
			jsonw_raw(&s, enc, utf8_encode((unsigned)cp, enc));
			continue;
		}
		default:
			goto out;
		}
		jsonw_raw(&s, &ch, 1);
	}
	if (s.failed)
		goto out;
	jsonw_str(&ps->w, s.b.p ? s.b.p : "", s.b.len);
	ok = true;
out:
	jsonw_free(&s);
	return ok;
}

static bool parser_value(struct parser *ps, int depth);

static bool
parser_container(struct parser *ps, int depth, bool object)
{
	char close = object ? '}' : ']';

	if (depth >= RESULT_MAX_DEPTH)
		return false;
	jsonw_raw(&ps->w, object ? "{" : "[", 1);
	ps->p++;
	parser_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		jsonw_raw(&ps->w, &close, 1);
		return true;
	}
	for (;;) {
		if (object) {
			parser_ws(ps);
			if (ps->p >= ps->end || *ps->p != '"' || !parser_string(ps))
				return false;
			parser_ws(ps);
			if (ps->p >= ps->end || *ps->p != ':')
				return false;
			ps->p++;
			jsonw_raw(&ps->w, ":", 1);
		}
		if (!parser_value(ps, depth + 1))
			return false;
		parser_ws(ps);
		if (ps->p >= ps->end)
			return false;
		if (*ps->p == ',') {
			ps->p++;
			jsonw_raw(&ps->w, ",", 1);
			continue;
		}
		if (*ps->p == close) {
			ps->p++;
			jsonw_raw(&ps->w, &close, 1);
			return true;
		}
		return false;
	}
}

static bool
parser_value(struct parser *ps, int depth)
{
	parser_ws(ps);
	if (ps->p >= ps->end)
		return false;
	switch (*ps->p) {
	case '{':
		return parser_container(ps, depth, true);
	case '[':
		return parser_container(ps, depth, false);
	case '"':
		return parser_string(ps);
	case 't':
		return parser_lit(ps, "true");
	case 'f':
		return parser_lit(ps, "false");
	case 'n':
		return parser_lit(ps, "null");
	default:
		return parser_number(ps);
	}
}

enum result_status
result_parse(const char *in, size_t n, char **out, size_t *out_len)
{
	struct parser ps = {.p = (const unsigned char *)in, .end = (const unsigned char *)in + n};

	*out = NULL;
	*out_len = 0;
	jsonw_init(&ps.w);
	if (!parser_value(&ps, 0))
		goto invalid;
	parser_ws(&ps);
	if (ps.p != ps.end)
		goto invalid;
	if (ps.w.failed)
		goto invalid;
	if (ps.w.b.len == 4 && memcmp(ps.w.b.p, "null", 4) == 0) {
		jsonw_free(&ps.w);
		return RESULT_NONE;
	}
	*out = jsonw_take(&ps.w, out_len);
	return *out ? RESULT_OK : RESULT_INVALID;
invalid:
	jsonw_free(&ps.w);
	return RESULT_INVALID;
}

enum result_status
result_read(int dirfd, size_t max_bytes, char **out, size_t *out_len)
{
	enum result_status st;
	struct stat sb;
	char *buf = NULL;
	size_t len = 0;
	int fd;

	*out = NULL;
	*out_len = 0;
	/* classify before opening: a socket cannot be opened at all, and a device node must
	 * never be opened by the worker */
	if (fstatat(dirfd, "result.json", &sb, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? RESULT_NONE : RESULT_OPEN_FAILED;
	if (S_ISLNK(sb.st_mode))
		return RESULT_OPEN_FAILED;
	if (!S_ISREG(sb.st_mode))
		return RESULT_NOT_REGULAR;
	/* O_NOFOLLOW and O_NONBLOCK all the same: nothing may have swapped it, but if it did,
	 * the open neither follows a symlink nor waits on a FIFO */
	fd =
	    openat(dirfd, "result.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? RESULT_NONE : RESULT_OPEN_FAILED;
	if (fstat(fd, &sb) < 0) {
		st = RESULT_OPEN_FAILED;
		goto out;
	}
	if (!S_ISREG(sb.st_mode)) {
		st = RESULT_NOT_REGULAR;
		goto out;
	}
	/* never more than max_bytes + 1: enough to know it is too large */
	buf = malloc(max_bytes + 1);
	if (buf == NULL) {
		st = RESULT_OPEN_FAILED;
		goto out;
	}
	while (len < max_bytes + 1) {
		ssize_t r = read(fd, buf + len, max_bytes + 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			st = RESULT_OPEN_FAILED;
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	if (len > max_bytes) {
		st = RESULT_TOO_LARGE;
		goto out;
	}
	st = result_parse(buf, len, out, out_len);
out:
	free(buf);
	close(fd);
	return st;
}
