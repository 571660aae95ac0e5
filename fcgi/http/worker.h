/*
 * worker.h - one FastCGI worker: accept, handle one request, repeat.
 */
#ifndef CODEBOX_WORKER_H
#define CODEBOX_WORKER_H

#include <stdnoreturn.h>

#include "run/run.h"
#include "http/surface.h"

/*
 * Completes wc->run with this worker's own part: its directory of runs, runs_dir/w<index>
 * (created 0311: runs can reach their own directory in it but not list it), and its Landlock
 * ruleset, built once per worker rather than once per run. Returns 0 or -1 (logged).
 */
int worker_prepare_run(const struct worker_config *wc, struct run_config *run);

/*
 * Serves requests until SIGTERM, then finishes the request in hand and exits 0. Expects
 * SIGTERM and SIGINT to be blocked on entry. A failed request never ends the worker.
 */
noreturn void worker_main(const struct worker_config *wc);

#endif
