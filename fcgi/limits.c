/*
 * limits.c - validation of the limits that arrive with every request.
 *
 * The limits live in nginx's config (one include file) and reach the worker as fastcgi_params,
 * so a location can carry its own policy. A missing or malformed value is the operator's
 * mistake, never the client's: the worker answers 500 misconfigured and logs this module's
 * sentence. The ranges are sanity bounds that keep buffers and deadlines finite.
 */
#include "limits.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct limit_spec {
	const char *name;
	long long min;
	long long max;
	size_t offset;
	int kind; /* 1: size_t, 0: long, 2: unsigned long long, 3: unsigned long */
};

#define SIZE_FIELD(f) offsetof(struct limits, f), 1
#define LONG_FIELD(f) offsetof(struct limits, f), 0
#define ULL_FIELD(f) offsetof(struct limits, f), 2
#define UL_FIELD(f) offsetof(struct limits, f), 3

static const struct limit_spec limit_specs[] = {
    {"CODEBOX_EXECUTION_TIMEOUT_SECONDS", 1, 3600, LONG_FIELD(execution_timeout_seconds)},
    {"CODEBOX_MAX_CONCURRENT_EXECUTIONS", 1, 1024, LONG_FIELD(max_concurrent_executions)},
    {"CODEBOX_MAX_CODE_BYTES", 1, 16 << 20, SIZE_FIELD(max_code_bytes)},
    {"CODEBOX_MAX_STDOUT_BYTES", 0, 64 << 20, SIZE_FIELD(max_stdout_bytes)},
    {"CODEBOX_MAX_STDERR_BYTES", 0, 64 << 20, SIZE_FIELD(max_stderr_bytes)},
    {"CODEBOX_MAX_RESULT_BYTES", 0, 64 << 20, SIZE_FIELD(max_result_bytes)},
    {"CODEBOX_MAX_STDIN_BYTES", 0, 16 << 20, SIZE_FIELD(max_stdin_bytes)},
    {"CODEBOX_MEMORY_BYTES", 16LL << 20, 64LL << 30, ULL_FIELD(memory_bytes)},
    {"CODEBOX_MAX_PROCESSES", 1, 4096, UL_FIELD(max_processes)},
    {"CODEBOX_DISK_BYTES", 1LL << 20, 64LL << 30, ULL_FIELD(disk_bytes)},
};

static int
parse_decimal(const char *s, long long *out)
{
	long long v = 0;

	if (*s == '\0' || strlen(s) > 12)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		v = v * 10 + (*s - '0');
	}
	*out = v;
	return 0;
}

int
limits_parse(struct limits *l, const char *(*get)(const char *name, void *ctx), void *ctx,
             char *why, size_t why_len)
{
	memset(l, 0, sizeof(*l));
	for (size_t i = 0; i < sizeof(limit_specs) / sizeof(limit_specs[0]); i++) {
		const struct limit_spec *s = &limit_specs[i];
		const char *v = get(s->name, ctx);
		long long n;

		if (v == NULL) {
			snprintf(why, why_len, "fastcgi_param %s is missing", s->name);
			return -1;
		}
		if (parse_decimal(v, &n) < 0 || n < s->min || n > s->max) {
			snprintf(why, why_len,
			         "fastcgi_param %s must be an integer from %lld to %lld", s->name,
			         s->min, s->max);
			return -1;
		}
		char *field = (char *)l + s->offset;
		switch (s->kind) {
		case 1:
			*(size_t *)(void *)field = (size_t)n;
			break;
		case 2:
			*(unsigned long long *)(void *)field = (unsigned long long)n;
			break;
		case 3:
			*(unsigned long *)(void *)field = (unsigned long)n;
			break;
		default:
			*(long *)(void *)field = (long)n;
			break;
		}
	}
	return 0;
}

size_t
limits_max_body_bytes(const struct limits *l)
{
	/* a JSON escape is at most 6 bytes per input byte (\u00XX) */
	return 6 * (l->max_code_bytes + l->max_stdin_bytes) + 4096;
}
