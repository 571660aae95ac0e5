/*
 * multipart.c - a small, bounded multipart/form-data reader (RFC 7578, RFC 2046 section 5.1).
 *
 * Debian ships no maintained C library for multipart/form-data, so this is our own: it reads
 * a body already in memory (nginx bounds its size), finds the delimiters with memmem(), reads
 * each part's header lines up to the blank line, and keeps the one file field it is asked
 * for. Every access is checked against the end of the body; nothing is allocated. It is
 * unit-tested and fuzzed with random and mutated bodies (fcgi/tests/test-multipart.c).
 */
#include "multipart.h"

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
		char name[256];
		size_t name_len = 0;
		bool is_field = false, has_filename = false, too_long;

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
		/* each header line [line, eol) */
		for (const char *line = headers; line < hend;) {
			const char *eol = memmem(line, (size_t)(hend - line), "\r\n", 2);
			static const char cd[] = "content-disposition:";
			if (eol == NULL)
				eol = hend;
			if ((size_t)(eol - line) >= sizeof(cd) - 1 &&
			    strncasecmp(line, cd, sizeof(cd) - 1) == 0) {
				const char *v = line + sizeof(cd) - 1;
				while (v < eol && (*v == ' ' || *v == '\t'))
					v++;
				if ((size_t)(eol - v) >= 9 && strncasecmp(v, "form-data", 9) == 0) {
					if (header_param(v, eol, "name", name, sizeof(name),
					                 &name_len, &too_long) &&
					    !too_long && name_len == strlen(field) &&
					    memcmp(name, field, name_len) == 0)
						is_field = true;
					if (header_param(v, eol, "filename", f->filename,
					                 MULTIPART_MAX_FILENAME, &f->filename_len,
					                 &too_long)) {
						if (too_long) {
							*why = "the file name is too long";
							return -1;
						}
						has_filename = true;
					}
				}
			}
			line = eol + 2;
		}
		if (is_field && has_filename) {
			f->filename[f->filename_len] = '\0';
			f->data = data;
			f->len = (size_t)(next - data);
			return 0;
		}
		p = next + dlen;
	}
}
