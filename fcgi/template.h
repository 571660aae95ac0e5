/*
 * template.h - a warm template: a copy of the zygote's interpreter that clones the init of
 * every run of its tier, for any worker.
 */
#ifndef CODEBOX_TEMPLATE_H
#define CODEBOX_TEMPLATE_H

#include <stdbool.h>
#include <stdnoreturn.h>
#include <sys/types.h>

#include "seccomp.h"
#include "warm.h"

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
	int retire_fd; /* closed by the zygote: end between two requests */
	pid_t zygote;  /* its parent: it ends with it */
};

/*
 * In a fork of the zygote: becomes the template t (never returns). It reports ready on
 * t->note_fd (a struct warm_ready), then serves t->serve_fd until it is retired, its life
 * (max_runs, max_seconds) is up and it is retired, or the zygote ends.
 */
noreturn void template_main(const struct template_base *base, const struct template_args *t);

#endif
