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
	unsigned long cpu_millicores; /* CPU time per second of wall time, 1000 = one CPU */
};

/*
 * Fills l from the parameters that get(name, ctx) returns (NULL when absent). Every one must
 * be present, a plain decimal integer, and within its range. Returns 0, or -1 with a sentence
 * naming the bad parameter in why (for the log, not for the client).
 */
int limits_parse(struct limits *l, const char *(*get)(const char *name, void *ctx), void *ctx,
                 char *why, size_t why_len);

/* nginx's client_max_body_size in nginx.conf, for a pool started without ceilings. */
#define LIMITS_DEFAULT_MAX_BODY_BYTES (1024 * 1024)

/*
 * The ceilings a pool is started with: every limit a request brings is capped at them, so a
 * request forged on the FastCGI socket cannot exceed what ops configured. Without ceilings
 * they are the sanity maxima of limits_parse() and a body bound of 1 MiB.
 */
void limits_default_ceilings(struct limits *ceil, size_t *max_body_bytes);

/*
 * Parses "NAME=VALUE,NAME=VALUE,..." (scripts/check-config.sh --print-ceilings): every limit
 * of limits_parse() and CODEBOX_MAX_BODY_BYTES (nginx's client_max_body_size), each once and
 * in range. Returns 0, or -1 with the reason in why.
 */
int limits_parse_ceilings(struct limits *ceil, size_t *max_body_bytes, const char *list, char *why,
                          size_t why_len);

/*
 * Lowers every value of l above its ceiling to the ceiling. Returns how many were lowered,
 * naming the first in what (for the log).
 */
int limits_cap(struct limits *l, const struct limits *ceil, char *what, size_t what_len);

/*
 * How many files and directories a tmpfs of size_bytes may hold (its nr_inodes): one per
 * LIMITS_BYTES_PER_INODE bytes, at least LIMITS_MIN_INODES (a file of one page and its
 * directory entry; an empty file costs the host about 1 KiB of kernel memory, outside every
 * cgroup, whatever its size). The run's tmpfs (diskBytes) and the agent workspace both.
 */
#define LIMITS_BYTES_PER_INODE 8192
#define LIMITS_MIN_INODES 256
static inline unsigned long long
limits_inodes(unsigned long long size_bytes)
{
	unsigned long long n = size_bytes / LIMITS_BYTES_PER_INODE;

	return n < LIMITS_MIN_INODES ? LIMITS_MIN_INODES : n;
}

#endif
