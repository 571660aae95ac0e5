/*
 * outcome.c - what came of a run, as data: enum names, freeing an outcome, and the pure
 * classification of what the worker observed (outcome.h).
 *
 * Kept apart from run.c so that reply.c and the unit tests link without the process code.
 */
#include "core/outcome.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

const char *
run_tier_string(enum run_tier t)
{
	switch (t) {
	case RUN_TIER_LIGHT:
		return "light";
	case RUN_TIER_HEAVY:
		return "heavy";
	case RUN_TIER_COLD:
	case RUN_TIER_COUNT:
		break;
	}
	return "cold";
}

const char *
run_fallback_string(enum run_fallback f)
{
	switch (f) {
	case RUN_FALLBACK_NO_ZYGOTE:
		return "no_zygote";
	case RUN_FALLBACK_TEMPLATE:
		return "template";
	case RUN_FALLBACK_LIGHT:
		return "heavy_to_light";
	case RUN_FALLBACK_NONE:
	case RUN_FALLBACK_COUNT:
		break;
	}
	return NULL;
}

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
	free(out->artifacts_mem);
	free(out->artifact_types);
	free(out->value_mem);
	free(out->cell_doc);
	memset(out, 0, sizeof(*out));
}

void
outcome_classify(const struct outcome_facts *f, struct run_outcome *o)
{
	/* the worker stops a run at its first OOM the way the deadline does: memory, not time */
	bool timed_out = f->stopped && !f->oom_stopped;
	bool oom = f->oom || f->oom_stopped;

	if (timed_out) {
		o->status = RUN_TIMED_OUT;
		o->has_exit_code = false;
		o->exit_code = 0;
		o->term_signal = SIGKILL;
	} else if (f->have_status && WIFEXITED(f->wait_status)) {
		o->has_exit_code = true;
		o->exit_code = WEXITSTATUS(f->wait_status);
		o->term_signal = 0;
		o->status = o->exit_code == 0 ? RUN_SUCCEEDED : RUN_FAILED;
	} else {
		/* killed by a signal, or lost without a status (init killed): SIGKILL */
		o->has_exit_code = true;
		o->term_signal = f->have_status && WIFSIGNALED(f->wait_status)
		                     ? WTERMSIG(f->wait_status)
		                     : SIGKILL;
		o->exit_code = -o->term_signal;
		o->status = RUN_FAILED;
	}
	if (timed_out)
		o->limit_exceeded = RUN_LIMIT_TIME;
	else if (oom)
		o->limit_exceeded = RUN_LIMIT_MEMORY;
	else if (f->pids_max)
		o->limit_exceeded = RUN_LIMIT_PROCESSES;
	else if (f->disk_full || o->term_signal == SIGXFSZ)
		o->limit_exceeded = RUN_LIMIT_DISK;
	else
		o->limit_exceeded = RUN_LIMIT_NONE;
}
