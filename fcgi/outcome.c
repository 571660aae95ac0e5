/*
 * outcome.c - the plain-data side of run.h: enum names and freeing an outcome.
 *
 * Kept apart from run.c so that reply.c and its unit test link without the process code.
 */
#include "run.h"

#include <stdlib.h>
#include <string.h>

const char *
run_status_string(enum run_status s)
{
	switch (s) {
	case RUN_SUCCEEDED:
		return "succeeded";
	case RUN_FAILED:
		return "failed";
	case RUN_TIMED_OUT:
		return "timed_out";
	}
	return "failed";
}

const char *
run_limit_string(enum run_limit l)
{
	switch (l) {
	case RUN_LIMIT_NONE:
		return NULL;
	case RUN_LIMIT_TIME:
		return "time";
	case RUN_LIMIT_MEMORY:
		return "memory";
	case RUN_LIMIT_PROCESSES:
		return "processes";
	case RUN_LIMIT_DISK:
		return "disk";
	}
	return NULL;
}

void
run_outcome_free(struct run_outcome *out)
{
	capture_free(&out->out);
	capture_free(&out->err);
	free(out->result_json);
	memset(out, 0, sizeof(*out));
}
