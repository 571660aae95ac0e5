/*
 * warmsettings.h - the warm interpreters' settings (CODEBOX_WARM*, parsed by warm.c): what the
 * pool's side (warm.h) and the zygote's protocol (warmproto.h) both carry, below both.
 */
#ifndef CODEBOX_WARMSETTINGS_H
#define CODEBOX_WARMSETTINGS_H

#include <stdbool.h>

#define WARM_DEFAULT_MODULES                                                                       \
	"numpy,pandas,scipy,sympy,sklearn,matplotlib.pyplot,IPython.core.formatters"
/* The light tier's modules: the preloaded modules among these (CODEBOX_WARM_LIGHT_MODULES) */
#define WARM_DEFAULT_LIGHT_MODULES "numpy"
/* How long a worker waits for templates' clones of one sandbox, all told (then the run is
 * cold): a bound on what a sandbox built on the request's path may add (not counted in the
 * kill grace; nginx's read timeout leaves 4 s past it and the execution timeout). The heavy
 * tier has WARM_HEAVY_ANSWER_MS of it (a clone of its larger interpreter is slower on a loaded
 * host), the light one the rest at least. */
#define WARM_ANSWER_MS 2500
#define WARM_HEAVY_ANSWER_MS 2000
#define WARM_MAX_MODULES 32
/* The interpreter whose library (libpython3.11) is embedded: warm runs need --python to be it. */
#define WARM_INTERPRETER "/usr/bin/python3.11"

struct warm_settings {
	bool enabled;                       /* CODEBOX_WARM (default on) */
	char modules[WARM_MAX_MODULES][64]; /* CODEBOX_WARM_MODULES, comma-separated */
	int n_modules;
	/* light[i]: modules[i] is in the light tier (the zygote and its light template have
	 * it); the others are the heavy tier's, imported by the heavy template alone */
	bool light[WARM_MAX_MODULES];
	int n_heavy;               /* modules not in the light tier; 0: one tier */
	unsigned long max_runs;    /* CODEBOX_WARM_MAX_RUNS: a template's runs before renewal */
	unsigned long max_seconds; /* CODEBOX_WARM_MAX_SECONDS: a template's and zygote's life */
	unsigned long one_copy;    /* CODEBOX_WARM_ONE_COPY: 1 (default) starts a run with one copy
	                            * of the interpreter (codebox-init exec'd), 0 with two */
};

#endif
