/*
 * limits.c - validation of the limits that arrive with every request.
 *
 * The limits live in nginx's config (one include file) and reach the worker as fastcgi_params,
 * so a location can carry its own policy. A missing or malformed value is the operator's
 * mistake, never the client's: the worker answers 500 misconfigured and logs this module's
 * sentence. The ranges are sanity bounds that keep buffers and deadlines finite.
 */
#include "core/limits.h"

#include <errno.h>
#include <stdbool.h>
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
    {"CODEBOX_CPU_MILLICORES", 10, 1024000, UL_FIELD(cpu_millicores)},
};

static void limits_store(struct limits *l, const struct limit_spec *s, long long n);

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
		limits_store(l, s, n);
	}
	return 0;
}

static void
limits_store(struct limits *l, const struct limit_spec *s, long long n)
{
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

static long long
limits_load(const struct limits *l, const struct limit_spec *s)
{
	const char *field = (const char *)l + s->offset;

	switch (s->kind) {
	case 1:
		return (long long)*(const size_t *)(const void *)field;
	case 2:
		return (long long)*(const unsigned long long *)(const void *)field;
	case 3:
		return (long long)*(const unsigned long *)(const void *)field;
	default:
		return (long long)*(const long *)(const void *)field;
	}
}

void
limits_default_ceilings(struct limits *ceil, size_t *max_body_bytes)
{
	for (size_t i = 0; i < sizeof(limit_specs) / sizeof(limit_specs[0]); i++)
		limits_store(ceil, &limit_specs[i], limit_specs[i].max);
	*max_body_bytes = LIMITS_DEFAULT_MAX_BODY_BYTES;
}

int
limits_parse_ceilings(struct limits *ceil, size_t *max_body_bytes, const char *list, char *why,
                      size_t why_len)
{
	size_t n_specs = sizeof(limit_specs) / sizeof(limit_specs[0]);
	bool seen[sizeof(limit_specs) / sizeof(limit_specs[0]) + 1] = {false};
	const char *p = list;

	limits_default_ceilings(ceil, max_body_bytes);
	while (*p) {
		const char *eq = strchr(p, '='), *end = strchr(p, ',');
		char name[64], value[32];
		long long n;
		size_t i;

		if (end == NULL)
			end = p + strlen(p);
		if (eq == NULL || eq > end || (size_t)(eq - p) >= sizeof(name) ||
		    (size_t)(end - eq - 1) >= sizeof(value)) {
			snprintf(why, why_len, "\"%.*s\" is not NAME=VALUE", (int)(end - p), p);
			return -1;
		}
		memcpy(name, p, (size_t)(eq - p));
		name[eq - p] = '\0';
		memcpy(value, eq + 1, (size_t)(end - eq - 1));
		value[end - eq - 1] = '\0';
		for (i = 0; i < n_specs && strcmp(limit_specs[i].name, name) != 0; i++)
			;
		if (i == n_specs && strcmp(name, "CODEBOX_MAX_BODY_BYTES") != 0) {
			snprintf(why, why_len, "%s is not a limit", name);
			return -1;
		}
		if (parse_decimal(value, &n) < 0 ||
		    (i < n_specs ? (n < limit_specs[i].min || n > limit_specs[i].max)
		                 : (n < 1024 || n > (1LL << 30)))) {
			snprintf(why, why_len,
			         "%s=%s is out of range: it must be an integer from %lld to %lld",
			         name, value, i < n_specs ? limit_specs[i].min : 1024,
			         i < n_specs ? limit_specs[i].max : 1LL << 30);
			return -1;
		}
		if (i < n_specs)
			limits_store(ceil, &limit_specs[i], n);
		else
			*max_body_bytes = (size_t)n;
		seen[i] = true;
		p = *end ? end + 1 : end;
	}
	for (size_t i = 0; i <= n_specs; i++)
		if (!seen[i]) {
			snprintf(why, why_len, "no ceiling for %s",
			         i < n_specs ? limit_specs[i].name : "CODEBOX_MAX_BODY_BYTES");
			return -1;
		}
	return 0;
}

int
limits_cap(struct limits *l, const struct limits *ceil, char *what, size_t what_len)
{
	int capped = 0;

	for (size_t i = 0; i < sizeof(limit_specs) / sizeof(limit_specs[0]); i++) {
		const struct limit_spec *s = &limit_specs[i];
		long long v = limits_load(l, s), c = limits_load(ceil, s);

		if (v <= c)
			continue;
		if (capped++ == 0)
			snprintf(what, what_len, "%s=%lld exceeds the ceiling %lld", s->name, v, c);
		limits_store(l, s, c);
	}
	return capped;
}
