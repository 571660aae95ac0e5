/*
 * notebook.h - a session as a notebook: its cells' code and outputs, kept as they run, and
 * rendered as a valid nbformat 4 document (an .ipynb) that Jupyter opens as it is.
 *
 * The workers keep it in the sessions directory (no run sees it), as <id>.cells: one JSON line
 * per execution, `{"source": CODE, <cellout_render()'s members>}`, appended by the worker that
 * ran it (it holds the session's lock, so lines never interleave), removed with the session.
 * It is bounded: past NOTEBOOK_MAX_BYTES a cell's outputs are left out (its code is kept, and
 * a note says so), past NOTEBOOK_MAX_CELLS nothing more is kept.
 */
#ifndef CODEBOX_NOTEBOOK_H
#define CODEBOX_NOTEBOOK_H

#include <stddef.h>

#define NOTEBOOK_MAX_BYTES (32u * 1024 * 1024)
#define NOTEBOOK_MAX_CELLS 10000

/*
 * Appends one executed cell to the notebook file `name` under dirfd: its code[0..code_len)
 * (valid UTF-8 or not: made valid) and doc[0..doc_len) (cellout_render()'s members, NULL when
 * there are none). Returns 0, or -1 with errno (the notebook lacks the cell; the caller logs).
 */
int notebook_append(int dirfd, const char *name, const char *code, size_t code_len, const char *doc,
                    size_t doc_len);

/*
 * The notebook file `name` under dirfd (absent: no cell yet) as an nbformat 4.5 document, its
 * language Python python_version ("3.11.2"). Returns a NUL-terminated string (caller frees)
 * with its length in len, or NULL with errno.
 */
char *notebook_render(int dirfd, const char *name, const char *python_version, size_t *len);

#endif
