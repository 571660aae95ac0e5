/*
 * limits.h - the per-request limits nginx passes as fastcgi_params.
 */
#ifndef CODEBOX_LIMITS_H
#define CODEBOX_LIMITS_H

#include <stddef.h>

struct limits {
	long execution_timeout_seconds;
	long max_concurrent_executions;
	size_t max_code_bytes;
	size_t max_stdout_bytes;
	size_t max_stderr_bytes;
	size_t max_result_bytes;
	size_t max_stdin_bytes;
	unsigned long long memory_bytes;
	unsigned long max_processes;
	unsigned long long disk_bytes;
};

/*
 * Fills l from the parameters that get(name, ctx) returns (NULL when absent). Every one must
 * be present, a plain decimal integer, and within its range. Returns 0, or -1 with a sentence
 * naming the bad parameter in why (for the log, not for the client).
 */
int limits_parse(struct limits *l, const char *(*get)(const char *name, void *ctx), void *ctx,
                 char *why, size_t why_len);

/* The most body bytes a worker reads for one request under l. */
size_t limits_max_body_bytes(const struct limits *l);

#endif
