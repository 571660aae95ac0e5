/*
 * multipart.h - the one multipart/form-data field POST /upload needs: from a body in memory,
 * or streamed from a reader through a bounded window (never the whole body in memory).
 */
#ifndef CODEBOX_MULTIPART_H
#define CODEBOX_MULTIPART_H

#include <stdbool.h>
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

/* The stream reader's window: a part's header block must fit in it. */
#define MULTIPART_STREAM_WINDOW (64 * 1024)

/* Reads up to len bytes of the body into buf: returns how many (> 0), 0 at its end, or -1 on
 * an error. */
typedef long (*multipart_read_fn)(void *ctx, char *buf, size_t len);

/* A body read through a bounded window (about 64 KiB: keep it off the stack). */
struct multipart_stream {
	multipart_read_fn read;
	void *ctx;
	char delim[MULTIPART_MAX_BOUNDARY + 4]; /* CRLF "--" boundary */
	size_t dlen;                            /* 0: the boundary is unusable */
	size_t pos, len;                        /* buf[pos..len) is read, not yet consumed */
	bool eof, started, in_part, part_ended;
	char buf[MULTIPART_STREAM_WINDOW];
};

/* Starts reading a body delimited by boundary (as multipart_boundary() gives it) through read. */
void multipart_stream_init(struct multipart_stream *s, const char *boundary, multipart_read_fn read,
                           void *ctx);

/*
 * Reads up to the first part whose Content-Disposition is form-data with name="field" and a
 * filename, as multipart_find_file() does, skipping the parts before it. Returns 0 with the
 * name in f (f->data is NULL: read the data with multipart_stream_data()), or -1 with a short
 * English reason in *why (a static string). A header block longer than the window is refused.
 */
int multipart_stream_file(struct multipart_stream *s, const char *field, struct multipart_file *f,
                          const char **why);

/*
 * The next piece of the part found by multipart_stream_file(): returns its length (> 0) with
 * *data pointing into the window (valid until the next call), 0 once the part's closing
 * delimiter was read, or -1 with *why (the body ends before the delimiter, or reading failed).
 */
long multipart_stream_data(struct multipart_stream *s, const char **data, const char **why);

#endif
