/*
 * multipart.h - the one multipart/form-data field POST /upload needs, from a body in memory.
 */
#ifndef CODEBOX_MULTIPART_H
#define CODEBOX_MULTIPART_H

#include <stddef.h>

/* The longest boundary RFC 2046 allows. */
#define MULTIPART_MAX_BOUNDARY 70
/* The longest filename accepted (a path relative to the workspace). */
#define MULTIPART_MAX_FILENAME 4095

struct multipart_file {
	char filename[MULTIPART_MAX_FILENAME + 1]; /* unquoted; may hold anything but NUL */
	size_t filename_len;
	const char *data; /* borrowed from the body */
	size_t len;
};

/*
 * Reads the boundary parameter of a Content-Type header ("multipart/form-data;
 * boundary=..."), quoted or not, into out (MULTIPART_MAX_BOUNDARY + 1 bytes). Returns 0, or -1
 * when the type is not multipart/form-data or the boundary is missing, empty or too long.
 */
int multipart_boundary(const char *content_type, char *out);

/*
 * Finds the first part whose Content-Disposition is form-data with name="field" and a
 * filename, in body[0..len) delimited by boundary. Returns 0 and fills f, or -1 with a short
 * English reason in *why (a static string). Never reads outside body; linear in len.
 */
int multipart_find_file(const char *body, size_t len, const char *boundary, const char *field,
                        struct multipart_file *f, const char **why);

#endif
