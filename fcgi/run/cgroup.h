/*
 * cgroup.h - a control group per run, for memory and process caps, where the host allows.
 */
#ifndef CODEBOX_CGROUP_H
#define CODEBOX_CGROUP_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "core/isolation.h"
#include "core/util.h"

struct cgroup_ctx {
	int version;      /* 0: unavailable, 1: v1 memory + pids, 2: unified */
	char memory[512]; /* the parent of every run's cgroup (v2: the only one) */
	char pids[512];   /* v1 only */
	char cpu[512];    /* v1: the parent in the cpu hierarchy; "" when there is none */
	bool cpu_quota;   /* runs get a CFS quota (v1 cpu, or v2 cpu delegated) */
	unsigned long long pool_memory_bytes; /* the budget of all runs together; 0: none */
	char cpu_why[160];                    /* why there is no CPU quota */
	char pool_why[160];                   /* why there is no pool-wide budget */
};

/*
 * Finds a hierarchy where this process may create cgroups with memory and pids controllers
 * (v2 with both delegated, else v1 memory and pids), and creates codebox's parent group
 * there. With pool_memory_bytes > 0 the parent group caps all runs together at that many
 * bytes (a run that hits it is stopped and reported as a memory limit, never the pool or
 * nginx, which live outside it). With want_cpu, runs also get a CPU quota where the cpu
 * controller is available (cpu_quota says whether). Call it once, in the supervisor, before
 * forking. Returns the version, 0 when no layer is usable (why says so).
 */
int cgroup_setup(struct cgroup_ctx *ctx, unsigned long long pool_memory_bytes, bool want_cpu,
                 char *why, size_t why_len);

/*
 * The memory this process may use: the smaller of the host's MemTotal and the limits of its
 * own memory cgroup and their ancestors that it can see (a container's limit). 0 if unknown.
 */
unsigned long long cgroup_available_memory(void);

/*
 * The cgroup layers' start-up probe: sets ctx up (cgroup_setup()) unless disabled, with a
 * pool-wide budget of pool_memory_bytes (0: three quarters of cgroup_available_memory()),
 * and fills iso's cgroup, poolmemory and cpuquota layers, saying why each one that is off
 * is off.
 */
void cgroup_probe(struct isolation *iso, const bool disabled[ISO_LAYER_COUNT],
                  struct cgroup_ctx *ctx, unsigned long long pool_memory_bytes);

/* Removes codebox's parent group (it must be empty). */
void cgroup_teardown(struct cgroup_ctx *ctx);

struct cgroup_run {
	char memory[600];
	char pids[600];
	char cpu[600]; /* v1 with a cpu hierarchy; else "" */
	char parent[512];
	unsigned long long memory_bytes;
	int oom_fd; /* v1: an eventfd that the kernel signals on an OOM in the group; or -1.
	             * Owned only while active (a zeroed struct owns nothing) */
	bool oom_seen;
	bool active;
};

/*
 * Creates the run's group with its caps: memory_bytes, max_processes, and cpu_millicores of
 * CPU time per second of wall time (0: none, or no CPU quota here). At most one OOM kill
 * per run: v2 kills the whole group at once (memory.oom.group); v1 has no such switch, so
 * the kernel's killer is disabled for the group (memory.oom_control) and oom_fd is armed:
 * the worker stops the run itself when it fires (cgroup_run_oom). Returns 0, or -1 with what failed
 * in f (not logged).
 */
int cgroup_run_create(const struct cgroup_ctx *ctx, struct cgroup_run *run, const char *name,
                      unsigned long long memory_bytes, unsigned long max_processes,
                      unsigned long cpu_millicores, struct fault *f);

/*
 * After oom_fd is readable: whether the run must be stopped for memory, either at its own
 * limit (its tasks wait, frozen, for memory) or because the pool-wide budget is exhausted
 * and this run is the largest one in it. Remembers it for cgroup_run_events().
 */
bool cgroup_run_oom(struct cgroup_run *run);

/*
 * Who names a session's group in the line logged when it is killed at the pool's memory budget
 * (cgroup_run_oom()): fn writes the session's name in the logs for the group's memory
 * directory (as every session's line names it) or returns false. Set once by a worker;
 * without it, or when fn finds none, the line names the group.
 */
void cgroup_name_sessions(bool (*fn)(const char *dir, char *name, size_t len, void *ctx),
                          void *ctx);

/* Moves pid (and its future children) into the run's group. Returns 0, or -1 with what failed
 * in f (not logged). */
int cgroup_run_attach(const struct cgroup_run *run, pid_t pid, struct fault *f);

/* Whether the run hit its memory cap (an OOM kill) or its process cap (a refused fork). */
void cgroup_run_events(const struct cgroup_run *run, bool *oom_killed, bool *pids_max);

/* Peak memory of the run's group, or 0. */
unsigned long long cgroup_run_peak_bytes(const struct cgroup_run *run);

/*
 * v1: removes the groups of pools that died (codebox-<pid>, the pid gone), and kills what this
 * pid namespace sees in them first (the runs and sessions a SIGKILLed pool left running). Call
 * it at start-up, before the run uids are claimed (their processes would hold them).
 */
void cgroup_sweep_dead_pools(void);

/*
 * Removes groups whose names start with prefix, left by a worker that died mid-run: kills
 * whatever is still in them first. Call it when a worker starts.
 */
void cgroup_sweep(const struct cgroup_ctx *ctx, const char *prefix);

/* Removes the run's group; every process in it must be dead. */
void cgroup_run_remove(struct cgroup_run *run);

/* SIGKILLs whatever still runs in the group (an ended session's leftovers: nothing may run
 * under its uid once the uid is free again); why names them in a failed kill's log line. */
void cgroup_run_kill(const struct cgroup_run *run, const char *why);

/* v1: gives the kernel's OOM killer back to the group (a session's, which no worker watches
 * between its executions: the killer, not a frozen group, ends it). Returns 0 or -1. */
int cgroup_run_kernel_oom(const struct cgroup_run *run);

/* v1: arms run->oom_fd again for a group made earlier (a session's, by another worker); v2
 * needs none (memory.oom.group). Leaves -1 when there is none; the caller closes it. */
void cgroup_run_arm_oom(struct cgroup_run *run);

#endif
