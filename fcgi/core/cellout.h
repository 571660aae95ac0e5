/*
 * cellout.h - a session cell's structured answer: its execution count, its outputs in
 * Jupyter's nbformat 4 output form, and its error as E2B and Daytona give it.
 *
 * The session's program makes them (fcgi/box/cell.py, inside the sandbox) and sends them as JSON;
 * what it sends is untrusted. cellout_render() parses it within bounds and writes back only
 * what nbformat 4 allows, rebuilt: stream outputs (stdout or stderr text), display_data and
 * execute_result (MIME bundles: text as strings, binary as base64 strings, JSON types as
 * JSON), error outputs (ename, evalue, traceback lines). Anything else (another key, another
 * type, a malformed MIME type, a string where a list belongs) is left out, never passed on:
 * whatever the program sends, the answer stays valid JSON of the documented shape.
 */
#ifndef CODEBOX_CELLOUT_H
#define CODEBOX_CELLOUT_H

#include <stdbool.h>
#include <stddef.h>

/* the most outputs of one cell kept, and traceback lines of one error */
#define CELLOUT_MAX_OUTPUTS 2000
#define CELLOUT_MAX_LINES 1000

/*
 * The members `"executionCount":N,"outputs":[...],"error":{...}|null` (no braces) for a cell
 * whose program sent json[0..len) (NULL: it sent nothing, e.g. it died). Where the JSON is
 * absent or unusable, the outputs are made from the cell's stdout and stderr text (valid
 * UTF-8, either may be NULL) as two stream outputs, the count is null, and note (may be NULL)
 * is added as a last stderr stream. Returns a NUL-terminated string (caller frees) with its
 * length in len, or NULL when out of memory.
 */
char *cellout_render(const char *json, size_t len, const char *out, size_t out_len, const char *err,
                     size_t err_len, const char *note, size_t *rlen);

/* Whether s[0..n) is a MIME type as a bundle may name it: type/subtype of [a-z0-9.+-]. */
bool cellout_mime_ok(const char *s, size_t n);

#endif
