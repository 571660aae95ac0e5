/*
 * outcome.h - what came of one run, as plain data: the program's outcome (a 200 with a
 * status) apart from the sandbox's fault (a 5xx), the names of both, and the pure rule that
 * turns what the worker observed into the outcome.
 *
 * Data only: reply.c, metrics.c and history.c format an outcome without linking the
 * process code (run.c) that produces it.
 */
#ifndef CODEBOX_OUTCOME_H
#define CODEBOX_OUTCOME_H

#include <stdbool.h>
#include <stddef.h>

#include "core/capture.h"
#include "core/result.h"

enum run_status {
	RUN_SUCCEEDED, /* exit code 0 */
	RUN_FAILED,    /* any other exit code, or killed by a signal */
	RUN_TIMED_OUT, /* the wall-clock limit fired */
};

enum run_limit {
	RUN_LIMIT_NONE,
	RUN_LIMIT_TIME,
	RUN_LIMIT_MEMORY,
	RUN_LIMIT_PROCESSES,
	RUN_LIMIT_DISK,
};

/* Which interpreter ran the program: a fresh one, or a copy of a warm template's. */
enum run_tier {
	RUN_TIER_COLD,
	RUN_TIER_LIGHT,
	RUN_TIER_HEAVY,
	RUN_TIER_COUNT,
};

/* Why a run that could have been warm (a Python program, warm interpreters on, with a pid
 * namespace) was not, or not on the tier it named. */
enum run_fallback {
	RUN_FALLBACK_NONE,
	RUN_FALLBACK_NO_ZYGOTE, /* no zygote served (one starting, or none could) */
	RUN_FALLBACK_TEMPLATE,  /* the template did not answer, or could not clone */
	RUN_FALLBACK_LIGHT,     /* a heavy program the heavy template could not take: light */
	RUN_FALLBACK_COUNT,
};

const char *run_tier_string(enum run_tier t);
const char *run_fallback_string(enum run_fallback f); /* NULL for RUN_FALLBACK_NONE */

const char *run_status_string(enum run_status s);
const char *run_limit_string(enum run_limit l); /* NULL for RUN_LIMIT_NONE */

/* Why the sandbox (not the program) failed; lets start-up turn a layer off. */
enum run_fault {
	RUN_FAULT_NONE,
	RUN_FAULT_STEP,    /* a child's set-up step: fault_step, fault_detail */
	RUN_FAULT_CLONE,   /* clone() with the namespace flags */
	RUN_FAULT_UID_MAP, /* writing the user namespace's maps */
	RUN_FAULT_CGROUP,  /* creating or joining the run's cgroup */
	RUN_FAULT_LOST,    /* init was killed from outside while the program ran */
	RUN_FAULT_OTHER,
};

/* What came of it. Free with run_outcome_free(). */
struct run_outcome {
	enum run_status status;
	bool has_exit_code; /* false iff timed out */
	int exit_code;      /* -N when killed by signal N */
	int term_signal;    /* the signal that ended the program, or 0 */
	enum run_limit limit_exceeded;
	struct capture out;
	struct capture err;
	enum result_status result_status;
	char *result_json; /* normalised JSON text when result_status is RESULT_OK */
	size_t result_len;
	/* requested: the files the run left, a blob of artifacts_collect()'s (files.h), or NULL.
	 * It may point into artifacts_mem (init's report, taken whole: its bytes are not copied) */
	const char *artifacts;
	size_t artifacts_len;
	void *artifacts_mem;         /* owns artifacts' bytes */
	const char **artifact_types; /* each record's type, found once (artifacts_types()) */
	long long duration_ms;
	long long cpu_ms;
	long long max_rss_bytes;
	long long
	    minor_faults; /* the program's and its descendants' (pages it touched or copied) */
	enum run_tier tier;
	enum run_fallback fallback;
	bool abandoned;       /* killed because the client's connection closed: no reply */
	enum run_fault fault; /* when run_execute() returned -1 */
	int fault_step;       /* enum sandbox_step */
	int fault_detail;
	/* a session's execution (session.h): the final expression's repr (untrusted bytes, in
	 * value_mem), and whether the session ended with it */
	bool has_value;
	const char *value;
	size_t value_len;
	char *value_mem;
	/* and the cell as JSON (untrusted, cell.py's; in the same buffer), or NULL */
	const char *cell;
	size_t cell_len;
	bool cell_dropped; /* the program's was over SESSION_CELL_MAX */
	/* what the answer says of the cell (cellout_render()'s members), owned, or NULL */
	char *cell_doc;
	size_t cell_doc_len;
	bool session_over;
};

void run_outcome_free(struct run_outcome *out);

/* What the worker observed of a finished run, whichever process told it. */
struct outcome_facts {
	bool have_status; /* wait_status is the program's (false: lost, e.g. init killed) */
	int wait_status;  /* as from waitpid() */
	bool stopped;     /* the deadline stopped it */
	bool oom_stopped; /* the worker stopped it at its cgroup's first OOM */
	bool oom;         /* its cgroup recorded an OOM kill */
	bool pids_max;    /* its cgroup refused a fork at pids.max */
	bool disk_full;   /* its working directory filled up (init saw ENOSPC) */
};

/*
 * The program's outcome from what was observed: status, exit code, terminating signal and
 * the limit it exceeded, into o (nothing else of o is touched). A timeout has no exit code
 * and reports SIGKILL; a stop at the first OOM is a memory limit, not a timeout; a lost
 * status is a SIGKILL; a limit is named in the order time, memory, processes, disk.
 */
void outcome_classify(const struct outcome_facts *f, struct run_outcome *o);

#endif
