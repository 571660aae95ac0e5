/*
 * warm.h - warm interpreters: runs forked from a template that has imported the preloaded
 * modules once, with every sandbox step still taken in C before any of the run's code.
 */
#ifndef CODEBOX_WARM_H
#define CODEBOX_WARM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdnoreturn.h>
#include <sys/types.h>

#define WARM_DEFAULT_MODULES "numpy,pandas,scipy,sympy,sklearn"
/* The light tier's modules: the preloaded modules among these (CODEBOX_WARM_LIGHT_MODULES) */
#define WARM_DEFAULT_LIGHT_MODULES "numpy"
/* How long a worker waits for the heavy template's clone, all told (then the run uses the
 * worker's own template): a bound on what a sandbox built on the request's path may add
 * (like the light template's answer, it is not counted in the kill grace) */
#define WARM_HEAVY_ANSWER_MS 2000
#define WARM_MAX_MODULES 32
/* The interpreter whose library (libpython3.11) is embedded: warm runs need --python to be it. */
#define WARM_INTERPRETER "/usr/bin/python3.11"

struct warm_settings {
	bool enabled;                       /* CODEBOX_WARM (default on) */
	char modules[WARM_MAX_MODULES][64]; /* CODEBOX_WARM_MODULES, comma-separated */
	int n_modules;
	/* light[i]: modules[i] is in the light tier (the zygote, the workers and their templates
	 * have it); the others are the heavy tier's, imported by the heavy template alone */
	bool light[WARM_MAX_MODULES];
	int n_heavy;               /* modules not in the light tier; 0: one tier */
	unsigned long max_runs;    /* CODEBOX_WARM_MAX_RUNS: a template's runs before replacement */
	unsigned long max_seconds; /* CODEBOX_WARM_MAX_SECONDS: a template's (and zygote's) life */
};

/*
 * Reads the CODEBOX_WARM* variables into s. Returns 0, or -1 with the reason in why
 * (a malformed value: start-up refuses it).
 */
int warm_parse_settings(struct warm_settings *s, char *why, size_t why_len);

/* Called in a worker cloned by the zygote: becomes that worker (must not return). */
typedef void (*warm_worker_fn)(void *ctx, int index);

/*
 * Supervisor: forks the zygote, which scrubs the environment it inherited, embeds the
 * interpreter python, imports the preloaded modules and then clones workers on request.
 * Waits (bounded) until it is ready. Returns 0, or -1 (logged; the pool then forks cold
 * workers).
 */
int warm_zygote_start(const struct warm_settings *s, const char *python, warm_worker_fn fn,
                      void *ctx);

/*
 * Supervisor: asks the zygote for worker index, replacing the zygote first when it is older
 * than max_seconds or gone. Returns the worker's pid (a child of the caller), or -1 (logged
 * once per failure; the caller forks a cold worker).
 */
pid_t warm_zygote_spawn(int index);

/* Supervisor: kills the zygote (at shutdown). */
void warm_zygote_stop(void);

/*
 * Worker, before its first request: forks this worker's template, a pristine copy of the
 * zygote's interpreter that, per run, clones the run's child as the worker's own child.
 * run is the worker's run configuration (struct run_config). Returns 0, or -1 when this
 * worker is cold (no interpreter, or the fork failed; logged).
 */
struct run_config;
int warm_template_start(const struct run_config *run);

/* Worker: whether a template is up for the next run. */
bool warm_template_usable(void);

/*
 * Worker: has the template clone a run's child for workdir with the child's ends of its
 * pipes (stdout, stderr, error, control, report; the last is -1 in direct mode). Returns the
 * child's pid (the caller's child), with the template's address-space size in *as_base_bytes,
 * or -1 with the reason in why; a template that failed is stopped and not used again.
 */
pid_t warm_template_clone(const char *workdir, unsigned long long disk_bytes, const int fds[5],
                          unsigned long long *as_base_bytes, char *why, size_t why_len);

/* Worker: whether the template has served max_runs, lived max_seconds, or died (the worker
 * then ends after its reply, and the pool starts a fresh one from the zygote). */
bool warm_template_expired(void);

/* Worker: stops the template (at exit). */
void warm_template_stop(void);

/*
 * Worker: whether code needs the heavy tier: it names one of the heavy tier's modules as a
 * word (a guess from the text alone: a wrong one costs speed, never correctness, since a
 * module the template lacks is imported as in a cold run). False when there is one tier.
 */
bool warm_wants_heavy(const char *code, size_t len);

/* Worker: whether the heavy template is up for a run under run (namespace mode only). */
bool warm_heavy_usable(const struct run_config *run);

/* Supervisor, once the isolation in force is known: one tier when the heavy template could
 * never serve (no pid namespace, or Landlock without a mount namespace). */
void warm_settings_one_tier(struct warm_settings *s);

/*
 * Worker: has the heavy template (shared by the workers, a child of the zygote) clone a run's
 * init for workdir under run, with the child's ends of its pipes (stdout, stderr, error,
 * control, report). The init is not this process's child: it is watched and killed through
 * the pidfd returned in *pidfd, and reaped by the heavy template. Returns its pid, or -1
 * with the reason in why; after a failure the heavy tier is not used by this worker again.
 */
pid_t warm_heavy_clone(const struct run_config *run, const char *workdir,
                       unsigned long long disk_bytes, const int fds[5],
                       unsigned long long *as_base_bytes, int *pidfd, char *why, size_t why_len);

#endif
