/*
 * worker.h - one FastCGI worker: accept, handle one request, repeat.
 */
#ifndef CODEBOX_WORKER_H
#define CODEBOX_WORKER_H

#include <stdnoreturn.h>

#include "probe.h"
#include "run.h"

struct worker_config {
	int listen_fd;                  /* non-blocking, shared by every worker */
	int index;                      /* 0..N-1, stable across respawns */
	struct run_config run;          /* per worker: its own run uid */
	const struct probe_info *probe; /* measured at start-up */
	bool files_contained;           /* runs cannot leave files outside their directory */
};

/*
 * Serves requests until SIGTERM, then finishes the request in hand and exits 0. Expects
 * SIGTERM and SIGINT to be blocked on entry. A failed request never ends the worker.
 */
noreturn void worker_main(const struct worker_config *wc);

#endif
