/* Unit tests for outcome.c: the classification of what the worker observed of a run. */
#include "core/outcome.h"
#include "tap.h"

#include <signal.h>

/* wait statuses as the kernel encodes them (W_EXITCODE, W_STOPCODE's sibling) */
#define EXITED(code) (((code)&0xff) << 8)
#define KILLED(sig) ((sig)&0x7f)

static struct run_outcome
classify(struct outcome_facts f)
{
	struct run_outcome o;

	memset(&o, 0xa5, sizeof(o)); /* whatever was there is overwritten */
	outcome_classify(&f, &o);
	return o;
}

int
main(void)
{
	struct run_outcome o;

	o = classify((struct outcome_facts){.have_status = true, .wait_status = EXITED(0)});
	ok(o.status == RUN_SUCCEEDED && o.has_exit_code && o.exit_code == 0 && o.term_signal == 0 &&
	       o.limit_exceeded == RUN_LIMIT_NONE,
	   "exit 0 succeeds, with no signal and no limit");

	o = classify((struct outcome_facts){.have_status = true, .wait_status = EXITED(3)});
	ok(o.status == RUN_FAILED && o.has_exit_code && o.exit_code == 3 &&
	       o.limit_exceeded == RUN_LIMIT_NONE,
	   "exit 3 fails with exit code 3");

	o = classify((struct outcome_facts){.have_status = true, .wait_status = KILLED(SIGSEGV)});
	ok(o.status == RUN_FAILED && o.has_exit_code && o.exit_code == -SIGSEGV &&
	       o.term_signal == SIGSEGV,
	   "a signal is the exit code -N and the terminating signal");

	o = classify((struct outcome_facts){.have_status = false, .wait_status = EXITED(0)});
	ok(o.status == RUN_FAILED && o.exit_code == -SIGKILL && o.term_signal == SIGKILL,
	   "a lost status (init killed without a report) is a SIGKILL, whatever the word says");

	o = classify((struct outcome_facts){
	    .have_status = true, .wait_status = KILLED(SIGKILL), .stopped = true});
	ok(o.status == RUN_TIMED_OUT && !o.has_exit_code && o.term_signal == SIGKILL &&
	       o.limit_exceeded == RUN_LIMIT_TIME,
	   "stopped at the deadline: timed out, no exit code, limit time");

	o = classify((struct outcome_facts){.have_status = true,
	                                    .wait_status = EXITED(0),
	                                    .stopped = true,
	                                    .oom = true,
	                                    .pids_max = true});
	ok(o.status == RUN_TIMED_OUT && o.limit_exceeded == RUN_LIMIT_TIME,
	   "the deadline is named before memory and processes");

	o = classify((struct outcome_facts){.have_status = true,
	                                    .wait_status = KILLED(SIGKILL),
	                                    .stopped = true,
	                                    .oom_stopped = true});
	ok(o.status == RUN_FAILED && o.has_exit_code && o.exit_code == -SIGKILL &&
	       o.limit_exceeded == RUN_LIMIT_MEMORY,
	   "stopped at its first OOM: failed with SIGKILL, limit memory, not a timeout");

	o = classify((struct outcome_facts){
	    .have_status = true, .wait_status = KILLED(SIGKILL), .oom = true, .pids_max = true});
	ok(o.limit_exceeded == RUN_LIMIT_MEMORY, "an OOM kill is memory, before processes");

	o = classify((struct outcome_facts){
	    .have_status = true, .wait_status = EXITED(1), .pids_max = true});
	ok(o.status == RUN_FAILED && o.exit_code == 1 && o.limit_exceeded == RUN_LIMIT_PROCESSES,
	   "a refused fork keeps the exit code and names processes");

	o = classify((struct outcome_facts){
	    .have_status = true, .wait_status = EXITED(1), .pids_max = true, .disk_full = true});
	ok(o.limit_exceeded == RUN_LIMIT_PROCESSES, "processes are named before disk");

	o = classify((struct outcome_facts){
	    .have_status = true, .wait_status = EXITED(1), .disk_full = true});
	ok(o.limit_exceeded == RUN_LIMIT_DISK, "a full working directory is disk");

	o = classify((struct outcome_facts){.have_status = true, .wait_status = KILLED(SIGXFSZ)});
	ok(o.exit_code == -SIGXFSZ && o.limit_exceeded == RUN_LIMIT_DISK,
	   "SIGXFSZ (RLIMIT_FSIZE) is disk");

	is_str(run_status_string(RUN_TIMED_OUT), "timed_out", "status names");
	is_str(run_limit_string(RUN_LIMIT_PROCESSES), "processes", "limit names");
	ok(run_limit_string(RUN_LIMIT_NONE) == NULL, "no limit has no name");
	return tap_done();
}
