/*
 * template.h - a warm template: a copy of the zygote's interpreter that clones the init of
 * every run of its tier, for any worker.
 */
#ifndef CODEBOX_TEMPLATE_H
#define CODEBOX_TEMPLATE_H

#include <stdbool.h>
#include <stdnoreturn.h>
#include <sys/types.h>

#include "box/seccomp.h"
#include "warm/warm.h"

/* What every run a template clones has in common: the zygote's, from its configuration. */
struct template_base {
	const struct warm_settings *settings;
	const char *python;
	const struct seccomp_filter *seccomp; /* prog.filter NULL: none */
	int etc_fd;                           /* the sandbox's /etc (O_PATH) */
	int init_fd; /* codebox-init, a sealed memfd: the one-copy start (sandbox.h); -1: off */
};

/* One template process, as the zygote sees it. */
struct template_args {
	bool heavy;   /* imports the heavy tier's modules first */
	int serve_fd; /* the tier's socket: requests from every worker */
	int note_fd; /* its notices to the zygote: the ready report, then 'R' when its life is up */
	/* from the zygote: a word on it retires the template (it ends between two requests); its
	 * end without a word means the zygote died, and the template serves on, an orphan, until
	 * the pool's next zygote serves its tier (at most WARM_ORPHAN_MS) */
	int retire_fd;
	pid_t zygote; /* its parent: it ends with it */
};

/*
 * In a fork of the zygote: becomes the template t (never returns). It reports ready on
 * t->note_fd (a struct warm_ready), then serves t->serve_fd until it is retired (its life,
 * max_runs or max_seconds, up, it says so on note_fd and the zygote retires it once a
 * successor serves), the pool is gone, or, orphaned by a zygote that died, WARM_ORPHAN_MS
 * passed.
 */
noreturn void template_main(const struct template_base *base, const struct template_args *t);

#endif
