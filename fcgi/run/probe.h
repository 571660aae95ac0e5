/*
 * probe.h - what the sandbox's interpreter offers, measured at start-up.
 */
#ifndef CODEBOX_PROBE_H
#define CODEBOX_PROBE_H

#include <stdbool.h>
#include <stddef.h>

struct run_config;
struct run_outcome;

/* the five promised, and up to 11 an extended image adds (CODEBOX_EXTRA_MODULES) */
#define PROBE_MAX_MODULES 16

struct probe_module {
	char import_name[64];
	char distribution[64];
	char version[64];
};

struct probe_info {
	char python_version[32];
	struct probe_module modules[PROBE_MAX_MODULES];
	size_t n_modules;
	bool cached; /* read from the probe cache: nothing it fingerprints changed */
};

/*
 * Runs the interpreter once through the sandbox (the same path as every run) and reads the
 * Python version and the version of every promised module: the five, then those of
 * CODEBOX_EXTRA_MODULES ("import" or "import=distribution", comma-separated: what an image
 * built FROM codebox's adds). With cache_path (NULL: none), the run imports nothing when the
 * cache's fingerprint of the interpreter and the modules' files still holds, and writes the
 * cache when it imported (probe.c). Returns 0, or -1 with the reason (a missing module is
 * named; a malformed CODEBOX_EXTRA_MODULES too) in why. When the sandbox itself failed,
 * fault->fault says how (so that start-up can turn the failing layer off and try again). Call
 * it before any worker is forked.
 */
int probe_measure(const struct run_config *cfg, const char *cache_path, struct probe_info *info,
                  struct run_outcome *fault, char *why, size_t why_len);

struct isolation;
struct run_outcome;

/*
 * After the start-up probe run failed with fault f (run_execute()'s out): turns off the layer
 * that failed, the namespace clone() (the pid namespace), the uid maps (the user namespace),
 * the cgroup, or the one a child's set-up step belongs to (probe.c's one table). Returns false
 * when no layer can be blamed (the interpreter itself failed, or no namespace is left to give
 * up).
 */
bool probe_blame(struct isolation *iso, const struct run_outcome *f, const char *why);

#endif
