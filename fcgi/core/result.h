/*
 * result.h - reading a run's result.json safely.
 */
#ifndef CODEBOX_RESULT_H
#define CODEBOX_RESULT_H

#include <stddef.h>

/* Deepest nesting of arrays and objects accepted in result.json. */
#define RESULT_MAX_DEPTH 512

/* Python's default limit on the digits of an integer it converts from text. */
#define RESULT_MAX_INT_DIGITS 4300

enum result_status {
	RESULT_NONE,        /* no file, or JSON null: result null, resultError null */
	RESULT_OK,          /* a JSON value other than null */
	RESULT_OPEN_FAILED, /* a symlink, or it cannot be opened */
	RESULT_NOT_REGULAR, /* a directory, FIFO, socket or device */
	RESULT_TOO_LARGE,   /* more than the limit */
	RESULT_INVALID,     /* not strict UTF-8 JSON */
};

/*
 * Writes the exact resultError string for status into buf (max_bytes appears in the
 * too-large message). Returns buf, or NULL for RESULT_NONE and RESULT_OK.
 */
const char *result_error_string(enum result_status status, size_t max_bytes, char *buf,
                                size_t buf_len);

/*
 * Parses in[0..n) as one strict JSON value (RFC 8259: no NaN or Infinity, no BOM, no raw
 * control characters in strings, no lone surrogates, valid UTF-8, nesting at most
 * RESULT_MAX_DEPTH) and writes it compactly to *out (caller frees): whitespace dropped,
 * strings re-escaped canonically, numbers kept verbatim so that big integers survive.
 * Returns RESULT_OK, RESULT_NONE (the value is null; *out is NULL) or RESULT_INVALID.
 */
enum result_status result_parse(const char *in, size_t n, char **out, size_t *out_len);

/*
 * Reads "result.json" in the directory dirfd: never through a symlink, regular files only,
 * never more than max_bytes + 1 bytes, then result_parse(). *out as for result_parse().
 * Call it only once nothing of the run is alive, so the file cannot change underneath.
 */
enum result_status result_read(int dirfd, size_t max_bytes, char **out, size_t *out_len);

#endif
