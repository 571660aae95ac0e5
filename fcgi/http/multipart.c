/*
 * multipart.c - a small, bounded multipart/form-data reader (RFC 7578, RFC 2046 section 5.1).
 *
 * Debian ships no maintained C library for multipart/form-data, so this is our own: it reads
 * a body already in memory (nginx bounds its size), finds the delimiters with memmem(), reads
 * each part's header lines up to the blank line, and keeps the one file field it is asked
 * for. Every access is checked against the end of the body; nothing is allocated. It is
 * unit-tested and fuzzed with random and mutated bodies (fcgi/tests/test-multipart.c).
 */
#include "http/multipart.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

int
multipart_boundary(const char *ct, char *out)
{
	static const char type[] = "multipart/form-data";
	const char *p;
	size_t n = 0;

	if (ct == NULL)
		return -1;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	if (strncasecmp(ct, type, sizeof(type) - 1) != 0)
		return -1;
	p = ct + sizeof(type) - 1;
	for (;;) {
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != ';')
			return -1;
		p++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (strncasecmp(p, "boundary=", 9) == 0)
			break;
		while (*p && *p != ';') /* another parameter */
			p++;
	}
	p += 9;
	if (*p == '"') {
		for (p++; *p && *p != '"'; p++) {
			if (n >= MULTIPART_MAX_BOUNDARY)
				return -1;
			out[n++] = *p;
		}
		if (*p != '"')
			return -1;
	} else {
		for (; *p && *p != ';' && *p != ' ' && *p != '\t'; p++) {
			if (n >= MULTIPART_MAX_BOUNDARY)
				return -1;
			out[n++] = *p;
		}
	}
	out[n] = '\0';
	return n == 0 ? -1 : 0;
}

/* A parameter's value in a header line [p, end): name="value" or name=token. Returns true and
 * the unquoted value in out (at most out_max bytes) when the parameter is there. */
static bool
header_param(const char *p, const char *end, const char *name, char *out, size_t out_max,
             size_t *out_len, bool *too_long)
{
	size_t nlen = strlen(name);

	*too_long = false;
	while (p < end) {
		/* the next parameter starts after a ';' */
		while (p < end && *p != ';') {
			if (*p == '"') { /* skip a quoted string whole: it may hold ';' */
				for (p++; p < end && *p != '"'; p++)
					if (*p == '\\' && p + 1 < end)
						p++;
			}
			if (p < end)
				p++;
		}
		if (p >= end)
			return false;
		p++;
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if ((size_t)(end - p) > nlen && strncasecmp(p, name, nlen) == 0 && p[nlen] == '=') {
			size_t n = 0;
			p += nlen + 1;
			if (p < end && *p == '"') {
				for (p++; p < end && *p != '"'; p++) {
					if (*p == '\\' && p + 1 < end &&
					    (p[1] == '"' || p[1] == '\\'))
						p++;
					if (n >= out_max) {
						*too_long = true;
						return true;
					}
					out[n++] = *p;
				}
				if (p >= end)
					return false; /* unterminated */
			} else {
				for (; p < end && *p != ';' && *p != ' ' && *p != '\t'; p++) {
					if (n >= out_max) {
						*too_long = true;
						return true;
					}
					out[n++] = *p;
				}
			}
			*out_len = n;
			return true;
		}
	}
	return false;
}

/* The Content-Disposition of one part's header block [headers, hend): whether it is form-data
 * named field, and its filename (into f) if it has one. Returns 0, or -1 with *why. */
static int
part_disposition(const char *headers, const char *hend, const char *field, struct multipart_file *f,
                 bool *is_field, bool *has_filename, const char **why)
{
	*is_field = *has_filename = false;
	/* each header line [line, eol) */
	for (const char *line = headers; line < hend;) {
		const char *eol = memmem(line, (size_t)(hend - line), "\r\n", 2);
		static const char cd[] = "content-disposition:";
		char name[256];
		size_t name_len = 0;
		bool too_long;

		if (eol == NULL)
			eol = hend;
		if ((size_t)(eol - line) >= sizeof(cd) - 1 &&
		    strncasecmp(line, cd, sizeof(cd) - 1) == 0) {
			const char *v = line + sizeof(cd) - 1;
			while (v < eol && (*v == ' ' || *v == '\t'))
				v++;
			if ((size_t)(eol - v) >= 9 && strncasecmp(v, "form-data", 9) == 0) {
				if (header_param(v, eol, "name", name, sizeof(name), &name_len,
				                 &too_long) &&
				    !too_long && name_len == strlen(field) &&
				    memcmp(name, field, name_len) == 0)
					*is_field = true;
				if (header_param(v, eol, "filename", f->filename,
				                 MULTIPART_MAX_FILENAME, &f->filename_len,
				                 &too_long)) {
					if (too_long) {
						*why = "the file name is too long";
						return -1;
					}
					*has_filename = true;
				}
			}
		}
		line = eol + 2;
	}
	if (*has_filename)
		f->filename[f->filename_len] = '\0';
	return 0;
}

int
multipart_find_file(const char *body, size_t len, const char *boundary, const char *field,
                    struct multipart_file *f, const char **why)
{
	char delim[MULTIPART_MAX_BOUNDARY + 5];
	size_t blen = strlen(boundary), dlen;
	const char *end = body + len, *p;

	*why = "the body is not multipart/form-data";
	if (blen == 0 || blen > MULTIPART_MAX_BOUNDARY)
		return -1;
	/* the first delimiter may open the body; later ones follow a CRLF */
	delim[0] = '\r';
	delim[1] = '\n';
	delim[2] = delim[3] = '-';
	memcpy(delim + 4, boundary, blen);
	dlen = blen + 4;
	if (len >= dlen - 2 && memcmp(body, delim + 2, dlen - 2) == 0) {
		p = body + dlen - 2;
	} else {
		p = memmem(body, len, delim, dlen);
		if (p == NULL)
			return -1;
		p += dlen;
	}
	for (;;) {
		/* after a delimiter: "--" closes the body, else optional whitespace and CRLF */
		const char *headers, *hend, *data, *next;
		bool is_field, has_filename;

		if (end - p >= 2 && p[0] == '-' && p[1] == '-') {
			*why = "the body has no file field named \"file\"";
			return -1;
		}
		while (p < end && (*p == ' ' || *p == '\t'))
			p++;
		if (end - p < 2 || p[0] != '\r' || p[1] != '\n') {
			*why = "a multipart delimiter is malformed";
			return -1;
		}
		headers = p + 2;
		/* the headers end at the first blank line (or at once: no headers) */
		if (end - headers >= 2 && headers[0] == '\r' && headers[1] == '\n') {
			hend = headers;
			data = headers + 2;
		} else {
			hend = memmem(headers, (size_t)(end - headers), "\r\n\r\n", 4);
			if (hend == NULL) {
				*why = "a multipart part's headers do not end";
				return -1;
			}
			hend += 2; /* keep the last header's CRLF inside */
			data = hend + 2;
		}
		next = memmem(data, (size_t)(end - data), delim, dlen);
		if (next == NULL) {
			*why = "the multipart body is not closed";
			return -1;
		}
		if (part_disposition(headers, hend, field, f, &is_field, &has_filename, why) < 0)
			return -1;
		if (is_field && has_filename) {
			f->data = data;
			f->len = (size_t)(next - data);
			return 0;
		}
		p = next + dlen;
	}
}

/*
 * The stream reader keeps a window of the body in s->buf: buf[pos..len) is read and not yet
 * consumed. It parses exactly as multipart_find_file() does, as if the body were prefixed by a
 * CRLF, so that the first delimiter is found like every later one. A part's data is handed
 * out up to the last dlen - 1 bytes of the window, which might begin a delimiter; a part's
 * header block must fit in the window.
 */
void
multipart_stream_init(struct multipart_stream *s, const char *boundary, multipart_read_fn read,
                      void *ctx)
{
	size_t blen = strlen(boundary);

	s->read = read;
	s->ctx = ctx;
	s->dlen = 0;
	if (blen > 0 && blen <= MULTIPART_MAX_BOUNDARY) {
		s->delim[0] = '\r';
		s->delim[1] = '\n';
		s->delim[2] = s->delim[3] = '-';
		memcpy(s->delim + 4, boundary, blen);
		s->dlen = blen + 4;
	}
	s->buf[0] = '\r';
	s->buf[1] = '\n';
	s->pos = 0;
	s->len = 2;
	s->eof = s->started = s->part_ended = false;
	s->in_part = true; /* the preamble, skipped like the data of a part */
}

/* Moves the unconsumed bytes to the front and reads more after them. Returns the number of
 * bytes read (0 at the end of the body or with a full window), or -1 on a read error. */
static long
stream_fill(struct multipart_stream *s)
{
	long r;

	if (s->pos > 0) {
		memmove(s->buf, s->buf + s->pos, s->len - s->pos);
		s->len -= s->pos;
		s->pos = 0;
	}
	if (s->eof || s->len == sizeof(s->buf))
		return 0;
	r = s->read(s->ctx, s->buf + s->len, sizeof(s->buf) - s->len);
	if (r < 0)
		return -1;
	if (r == 0)
		s->eof = true;
	s->len += (size_t)r;
	return r;
}

/* Whether n unconsumed bytes are in the window, reading as needed; -1 on a read error. */
static int
stream_need(struct multipart_stream *s, size_t n)
{
	while (s->len - s->pos < n && !s->eof) {
		if (stream_fill(s) < 0)
			return -1;
	}
	return s->len - s->pos >= n;
}

long
multipart_stream_data(struct multipart_stream *s, const char **data, const char **why)
{
	if (!s->in_part) {
		*why = "no part is being read";
		return -1;
	}
	if (s->part_ended) {
		s->part_ended = s->in_part = false;
		return 0;
	}
	for (;;) {
		const char *p = s->buf + s->pos, *hit;
		size_t avail = s->len - s->pos, n;

		hit = memmem(p, avail, s->delim, s->dlen);
		if (hit != NULL) {
			n = (size_t)(hit - p);
			*data = p;
			s->pos += n + s->dlen;
			if (n == 0) {
				s->in_part = false;
				return 0;
			}
			s->part_ended = true;
			return (long)n;
		}
		/* no delimiter can begin before the last dlen - 1 bytes */
		if (avail >= s->dlen) {
			n = avail - (s->dlen - 1);
			*data = p;
			s->pos += n;
			return (long)n;
		}
		if (s->eof) {
			*why = s->started ? "the multipart body is not closed"
			                  : "the body is not multipart/form-data";
			return -1;
		}
		if (stream_fill(s) < 0) {
			*why = "the request body could not be read";
			return -1;
		}
	}
}

int
multipart_stream_file(struct multipart_stream *s, const char *field, struct multipart_file *f,
                      const char **why)
{
	f->data = NULL;
	f->len = 0;
	if (s->dlen == 0) {
		*why = "the body is not multipart/form-data";
		return -1;
	}
	for (;;) {
		const char *data;
		size_t hstart, hend, dstart;
		bool is_field, has_filename;
		int r;

		/* the rest of the current part (or the preamble) up to its delimiter */
		while (s->in_part) {
			long n = multipart_stream_data(s, &data, why);
			if (n < 0)
				return -1;
		}
		s->started = true;
		/* after a delimiter: "--" closes the body, else optional whitespace and CRLF */
		if ((r = stream_need(s, 2)) < 0)
			goto read_failed;
		if (r && s->buf[s->pos] == '-' && s->buf[s->pos + 1] == '-') {
			*why = "the body has no file field named \"file\"";
			return -1;
		}
		while ((r = stream_need(s, 1)) > 0 &&
		       (s->buf[s->pos] == ' ' || s->buf[s->pos] == '\t'))
			s->pos++;
		if (r < 0 || (r = stream_need(s, 2)) < 0)
			goto read_failed;
		if (!r || s->buf[s->pos] != '\r' || s->buf[s->pos + 1] != '\n') {
			*why = "a multipart delimiter is malformed";
			return -1;
		}
		s->pos += 2;
		/* the headers end at the first blank line (or at once: no headers); offsets are
		 * from pos, which a refill moves to 0 */
		if ((r = stream_need(s, 2)) < 0)
			goto read_failed;
		if (r && s->buf[s->pos] == '\r' && s->buf[s->pos + 1] == '\n') {
			hstart = hend = 0;
			dstart = 2;
		} else {
			const char *blank;
			size_t searched = 0;
			for (;;) {
				size_t avail = s->len - s->pos;
				/* resume a little before where the last search stopped */
				size_t from = searched > 3 ? searched - 3 : 0;
				blank = memmem(s->buf + s->pos + from, avail - from, "\r\n\r\n", 4);
				if (blank != NULL)
					break;
				searched = avail;
				if (s->eof) {
					*why = "a multipart part's headers do not end";
					return -1;
				}
				if (s->pos == 0 && s->len == sizeof(s->buf)) {
					*why = "a multipart part's headers are too long";
					return -1;
				}
				if (stream_fill(s) < 0)
					goto read_failed;
			}
			hstart = 0;
			hend = (size_t)(blank - (s->buf + s->pos)) + 2; /* keep the last CRLF */
			dstart = hend + 2;
		}
		if (part_disposition(s->buf + s->pos + hstart, s->buf + s->pos + hend, field, f,
		                     &is_field, &has_filename, why) < 0)
			return -1;
		s->pos += dstart;
		s->in_part = true;
		if (is_field && has_filename)
			return 0;
	}
read_failed:
	*why = "the request body could not be read";
	return -1;
}
