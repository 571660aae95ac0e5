/*
 * history.h - the optional audit trail of every run (CODEBOX_HISTORY_DIR).
 */
#ifndef CODEBOX_HISTORY_H
#define CODEBOX_HISTORY_H

#include <stdbool.h>
#include <stddef.h>

#include "core/outcome.h"

struct history_config {
	int dir_fd;                   /* -1: off */
	const char *dir;              /* its path */
	unsigned long max_runs;       /* entries kept at most (oldest pruned) */
	unsigned long long max_bytes; /* bytes kept at most, all files together */
};

/*
 * Reads CODEBOX_HISTORY_DIR (unset or empty: off), CODEBOX_HISTORY_MAX_RUNS (default 1000)
 * and CODEBOX_HISTORY_MAX_BYTES (default 64 MiB); creates the directory (0700) if needed and
 * opens it. Returns 0 (hc->dir_fd is -1 when off), or -1 with a reason in why.
 */
int history_setup(struct history_config *hc, char *why, size_t why_len);

/*
 * Before a run: writes <stem>.py (exactly what runs: the program, or the agent's shell
 * command) and <stem>.meta.json with "status": "pending". Cheap: two small files. Does
 * nothing when off. port is "execute" or "agent"; trace_id is the request's W3C trace id (NULL:
 * none; trace.h). A failure is logged, never fatal: the run
 * goes on without an entry.
 */
void history_begin(const struct history_config *hc, const char *port, const char *code,
                   size_t code_len, const char *request_id, const char *trace_id);

/*
 * After the run: prepares <stem>.result.json and the final .meta.json from the outcome (o
 * NULL: the sandbox failed), to be written by history_flush() once the reply is sent.
 * exit_code is what the client was told.
 */
void history_end(const struct history_config *hc, const struct run_outcome *o, int exit_code,
                 bool has_exit_code);

/* Writes what history_end() prepared and prunes the oldest entries past the bounds; an entry
 * another worker pruned while it ran keeps nothing of its end and is not counted. Call after
 * the reply is out (off the request's path). */
void history_flush(const struct history_config *hc);

#endif
