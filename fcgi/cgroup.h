/*
 * cgroup.h - a control group per run, for memory and process caps, where the host allows.
 */
#ifndef CODEBOX_CGROUP_H
#define CODEBOX_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct cgroup_ctx {
	int version;      /* 0: unavailable, 1: v1 memory + pids, 2: unified */
	char memory[512]; /* the parent of every run's cgroup (v2: the only one) */
	char pids[512];   /* v1 only */
};

/*
 * Finds a hierarchy where this process may create cgroups with memory and pids controllers
 * (v2 with both delegated, else v1 memory and pids), and creates codebox's parent group
 * there. Call it once, in the supervisor, before forking. Returns the version, 0 when no
 * layer is usable (why says so).
 */
int cgroup_setup(struct cgroup_ctx *ctx, char *why, size_t why_len);

/* Removes codebox's parent group (it must be empty). */
void cgroup_teardown(struct cgroup_ctx *ctx);

struct cgroup_run {
	char memory[600];
	char pids[600];
	bool active;
};

/* Creates the run's group with its caps. Returns 0 or -1 (logged). */
int cgroup_run_create(const struct cgroup_ctx *ctx, struct cgroup_run *run, const char *name,
                      unsigned long long memory_bytes, unsigned long max_processes);

/* Moves pid (and its future children) into the run's group. Returns 0 or -1. */
int cgroup_run_attach(const struct cgroup_run *run, pid_t pid);

/* Whether the run hit its memory cap (an OOM kill) or its process cap (a refused fork). */
void cgroup_run_events(const struct cgroup_run *run, bool *oom_killed, bool *pids_max);

/* Peak memory of the run's group, or 0. */
unsigned long long cgroup_run_peak_bytes(const struct cgroup_run *run);

/*
 * Removes groups whose names start with prefix, left by a worker that died mid-run: kills
 * whatever is still in them first. Call it when a worker starts.
 */
void cgroup_sweep(const struct cgroup_ctx *ctx, const char *prefix);

/* Removes the run's group; every process in it must be dead. */
void cgroup_run_remove(struct cgroup_run *run);

#endif
