/*
 * files.h - files into a run (POST /execute's "files") and out of it ("artifacts").
 *
 * In: the worker validates the request's files (files_parse(): paths, count, bytes, base64)
 * and packs them into one blob that travels down the control pipe after the code and stdin;
 * the sandbox's child writes them into the working directory next to main.py (files_write()).
 *
 * Out: after the program and everything it started are gone, init (or, in direct mode, the
 * worker) walks the working directory without following a symlink or opening anything but a
 * regular file (artifacts_collect()) and packs what it found into a blob bounded by
 * ARTIFACTS_BLOB_MAX; the worker reads that blob as untrusted input and renders the answer's
 * "artifacts" array (artifacts_write(), record by record with artifacts_next()): each file's
 * path, its type from its content's magic (files_sniff()), its size and its content in base64,
 * or why the content was not sent. The content is encoded from the blob straight into the
 * answer as it streams out (jsonw.h): its bytes are copied once, as base64.
 *
 * Both blobs are sequences of records, each a fixed header followed by its path and data.
 */
#ifndef CODEBOX_FILES_H
#define CODEBOX_FILES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "core/jsonw.h"
#include "core/limits.h"

/* Inputs: at most this many files, each path at most FILES_MAX_PATH bytes, each component at
 * most 255 (NAME_MAX), and at most FILES_MAX_DEPTH directories deep. */
#define FILES_MAX_COUNT 100
#define FILES_MAX_PATH 1024
#define FILES_MAX_DEPTH 16

/* Outputs: at most ARTIFACTS_MAX_SENT files are sent with their content, at most
 * ARTIFACTS_MAX_BYTES of content in all; at most ARTIFACTS_MAX_LISTED are listed (the rest
 * with why their content is not sent); the walk visits at most ARTIFACTS_MAX_VISITED entries
 * and FILES_MAX_DEPTH levels. */
#define ARTIFACTS_MAX_SENT 32
#define ARTIFACTS_MAX_BYTES (8U << 20)
#define ARTIFACTS_MAX_LISTED 256
#define ARTIFACTS_MAX_VISITED 4096
/* the head of an unsent file, for its type */
#define ARTIFACTS_HEAD_BYTES 512
/* the largest blob artifacts_collect() makes */
#define ARTIFACTS_BLOB_MAX                                                                         \
	((size_t)ARTIFACTS_MAX_BYTES +                                                             \
	 (size_t)ARTIFACTS_MAX_LISTED *                                                            \
	     (sizeof(struct artifact_rec) + FILES_MAX_PATH + ARTIFACTS_HEAD_BYTES))

/* Which files a run's answer wants back: none, every one, or only the pictures (what MCP shows
 * a model: PNG, JPEG and GIF by their magic, artifacts_is_image()). */
enum artifacts_want {
	ARTIFACTS_NONE = 0,
	ARTIFACTS_ALL = 1,
	ARTIFACTS_IMAGES = 2,
};

/* A record of the inputs' blob: path_len bytes of path, then data_len bytes of content. */
struct file_rec {
	uint32_t path_len;
	uint32_t data_len;
};

/* Why an artifact's content is not sent. */
enum artifact_omit {
	ARTIFACT_SENT = 0,
	ARTIFACT_TOO_LARGE,  /* larger than ARTIFACTS_MAX_BYTES on its own */
	ARTIFACT_OVER_TOTAL, /* the files before it (by path) used up ARTIFACTS_MAX_BYTES */
	ARTIFACT_TOO_MANY,   /* ARTIFACTS_MAX_SENT files were sent before it */
	ARTIFACT_UNREADABLE, /* it could not be opened or read (its mode, a race) */
	ARTIFACT_OMIT_COUNT
};

/* A record of the artifacts' blob: path_len bytes of path, then data_len bytes of content
 * (all of it when omitted == ARTIFACT_SENT, else at most ARTIFACTS_HEAD_BYTES of its head). */
struct artifact_rec {
	uint32_t path_len;
	uint32_t omitted; /* enum artifact_omit */
	uint64_t bytes;   /* its size */
	uint32_t data_len;
	uint32_t pad;
};

/* The most input bytes (decoded, all files) a run takes: half its disk. */
unsigned long long files_max_bytes(const struct limits *l);

/*
 * Validates the request's "files" (v: its value, not NULL) and packs it into *blob (malloc'd;
 * *blob_len bytes, *count files). A file is {"path": p, "content": UTF-8 text} or {"path": p,
 * "contentBase64": base64}; p is relative, with no empty, "." or ".." component and no control
 * character (port 8888's rule), not main.py or result.json, not a path of another file or a
 * directory of one. Returns 0, or -1 with a sentence for the client in message naming which
 * file and why (the 400's, ending in "(files[i].key: type)" as the others do).
 */
int files_parse(json_t *v, unsigned long long max_bytes, char **blob, size_t *blob_len,
                size_t *count, char *message, size_t message_len);

/*
 * In the sandbox's child, in the working directory dirfd: writes every file of the blob (mode
 * 0600, directories 0700, never following a symlink or replacing anything). Returns 0 or -1
 * (errno).
 */
int files_write(int dirfd, const char *blob, size_t len);

/* The same; with replace, a file that exists at a path (an earlier cell's of a session: a
 * symlink too) is unlinked and written anew. Never through a symlink. */
int files_write_over(int dirfd, const char *blob, size_t len, bool replace);

/* A manifest record's data: an input file's size and a 64-bit digest of its content. */
struct file_digest {
	uint64_t bytes;
	uint64_t hash;
};

/* The largest manifest files_manifest() makes. */
#define FILES_MANIFEST_MAX                                                                         \
	((size_t)FILES_MAX_COUNT *                                                                 \
	 (sizeof(struct file_rec) + FILES_MAX_PATH + sizeof(struct file_digest)))

/*
 * The inputs' manifest, for artifacts_collect(): the inputs' blob (files_parse()'s) with each
 * file's content replaced by a struct file_digest (the records' format is the blob's). Made by
 * whoever writes the inputs, before any code of the run executes. Returns 0, or -1 (ENOMEM).
 */
int files_manifest(const char *inputs, size_t len, char **manifest, size_t *manifest_len);

/*
 * After the run, walks the working directory dirfd (top-level main.py and result.json and
 * every __pycache__ directory excepted) and packs every regular file it finds, sorted by path,
 * into *blob (malloc'd, at most ARTIFACTS_BLOB_MAX bytes), but the inputs of the manifest
 * (files_manifest()'s, or NULL) that are as they were written: those are neither listed nor
 * counted against the bounds. With ARTIFACTS_IMAGES, only the files whose content is a
 * picture (artifacts_is_image() of its type) are listed and counted; the rest are as if absent.
 * Returns 0 or -1 (errno: ENOMEM).
 */
int artifacts_collect(int dirfd, const char *manifest, size_t manifest_len,
                      enum artifacts_want wanted, char **blob, size_t *len);

/*
 * A session cell's mark, taken before the cell writes anything: since, a read of the clock the
 * kernel stamps inodes with (the coarse one: every file changed after the read has a ctime at
 * or after it), and the manifest (files_manifest()'s format) of the files whose ctime is at or
 * after since already, changed in the same tick before the mark, with their contents' digests.
 */
struct artifacts_mark {
	struct timespec since;
	char *recent; /* malloc'd, or NULL */
	size_t recent_len;
};

/* Takes *m in the working directory dirfd. Returns 0, or -1 (errno) with since read and no
 * recent files (then a file of theirs is listed again, none missed). */
int artifacts_mark(int dirfd, struct artifacts_mark *m);
void artifacts_mark_free(struct artifacts_mark *m);

/* The same as artifacts_collect(), of the files changed (written, or their status: the ctime)
 * at or after mark's since but those of its recent files that are as they were (mark NULL:
 * every file): a session's cell reports what it made or changed, not what earlier cells left. */
int artifacts_collect_since(int dirfd, const char *manifest, size_t manifest_len,
                            enum artifacts_want wanted, const struct artifacts_mark *mark,
                            char **blob, size_t *len);

/* One record of a blob of artifacts_collect()'s, pointing into the blob. */
struct artifact_view {
	const char *path; /* path_len bytes, not NUL-terminated, maybe not UTF-8 */
	size_t path_len;
	const char *data; /* the content (sent), or its head (not sent) */
	size_t data_len;
	uint64_t bytes; /* the file's size */
	enum artifact_omit omitted;
	const char *type; /* files_sniff() of data */
};

/*
 * The next record of blob at *off, *count of them read so far (both start at 0). The blob is
 * untrusted (it came from the run's init): reading stops at the first malformed record, and
 * after ARTIFACTS_MAX_LISTED. Its type is types[*count] (artifacts_types()'s), or sniffed now
 * when types is NULL. Returns false at the end.
 */
bool artifacts_next(const char *blob, size_t len, const char *const *types, size_t *off,
                    size_t *count, struct artifact_view *a);

/*
 * Each record's type (files_sniff(), which parses JSON whole), found once: a reply is written
 * twice (counted, then streamed) and must say the same both times. Returns a malloc'd array
 * of ARTIFACTS_MAX_LISTED, one type per record artifacts_next() reads in order, or NULL (no
 * blob, or out of memory).
 */
const char **artifacts_types(const char *blob, size_t len);

/* The record's path as a JSON string: a name that is not UTF-8 as Python shows it decoded
 * with "replace". */
void artifacts_put_path(struct jsonw *w, const struct artifact_view *a);

/*
 * The answer's "artifacts" array from a blob of artifacts_collect()'s, written into w as far as
 * the blob is well-formed: each file's path, mimeType, bytes, contentBase64 (encoded straight
 * from the blob into the text: the content's only copy) and omitted.
 */
void artifacts_write(struct jsonw *w, const char *blob, size_t len, const char *const *types);

/* The MIME type of content by its magic: PNG, JPEG, GIF, PDF, SVG, JSON, CSV, plain text
 * (valid UTF-8 with no NUL), else application/octet-stream. cut: data is only the file's head
 * (it may end inside a character, and is not parsed as JSON). */
const char *files_sniff(const char *data, size_t n, bool cut);

/* Whether a type of files_sniff()'s is a picture a model is shown (MCP's image content). */
bool artifacts_is_image(const char *mime);

/* Base64 (RFC 4648, padded), decoded strictly (no whitespace, padding required) into a
 * malloc'd buffer; NULL when invalid or out of memory. Encoding is jsonw_base64()'s, straight
 * into an answer. */
char *files_base64_decode(const char *s, size_t n, size_t *out_len);

/* Why an artifact's content is not sent, for the answer. */
const char *artifacts_omit_string(enum artifact_omit o);

#endif
