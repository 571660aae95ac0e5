/*
 * cgroup.c - memory and process caps per run through control groups.
 *
 * v2: one group per run under codebox's parent, memory.max, memory.swap.max = 0,
 * memory.oom.group = 1 (an OOM kill takes the whole run), pids.max. The parent must have the
 * controllers in cgroup.subtree_control, which the kernel allows only for a group without
 * processes of its own; so the supervisor first moves itself into a leaf "pool" group.
 * v1 (this project's development host): the memory and pids hierarchies separately,
 * memory.limit_in_bytes (and memsw when swap accounting exists), pids.max, and the cpu
 * hierarchy's CFS quota where it exists. v1 has no memory.oom.group: left alone, the kernel
 * kills one process of a run after another, each kill some 80 lines of kernel log. So the
 * kernel's OOM killer is disabled in each run's group and in the pool's parent, an eventfd
 * is registered on memory.oom_control, and the worker stops the whole run when it fires:
 * a run at its own limit, or the largest run when the pool-wide budget is exhausted (the
 * notification reaches every group below the one out of memory). No kernel OOM kill in a
 * run's group. A session's group is the exception (cgroup_run_kernel_oom()): no worker
 * watches it between its executions, so the kernel's killer is on there, for the session's
 * life: it may kill a process of a session out of memory. During an execution the worker
 * also watches the group (cgroup_run_arm_oom()) and stops the execution at its first OOM.
 * The pool-wide budget is the parent's limit (memory.max, memory.limit_in_bytes); the pool
 * and nginx live outside it.
 * Where neither is writable (most pods), the caller falls back to rlimits and
 * oom_score_adj, and /isolation says so.
 */
#include "run/cgroup.h"

#include "core/log.h"
#include "core/proc.h"
#include "core/util.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Reads "key N" from a flat-keyed file such as memory.events. Returns N, or 0. */
static unsigned long long
read_key(const char *dir, const char *file, const char *key)
{
	char path[700], buf[8192];
	unsigned long long v = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	if (util_read_small(path, buf, sizeof(buf)) <= 0)
		return 0;
	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t kl = strlen(key);
		if (key[0] == '\0') {
			v = strtoull(line, NULL, 10);
			break;
		}
		if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
			v = strtoull(line + kl + 1, NULL, 10);
			break;
		}
	}
	return v;
}

/* This process's group in the hierarchy named by controller ("" for v2). */
static int
own_group(const char *controller, char *out, size_t out_len)
{
	char buf[4096];

	if (util_read_small("/proc/self/cgroup", buf, sizeof(buf)) <= 0)
		return -1;
	char *save_line = NULL;
	for (char *line = strtok_r(buf, "\n", &save_line); line;
	     line = strtok_r(NULL, "\n", &save_line)) {
		char *c1 = strchr(line, ':'), *c2, *save_tok = NULL;
		bool match;

		if (c1 == NULL || (c2 = strchr(c1 + 1, ':')) == NULL)
			continue;
		*c2 = '\0';
		match = controller[0] == '\0' && c1[1] == '\0';
		for (char *tok = strtok_r(c1 + 1, ",", &save_tok); !match && tok;
		     tok = strtok_r(NULL, ",", &save_tok))
			match = controller[0] != '\0' && strcmp(tok, controller) == 0;
		if (match) {
			snprintf(out, out_len, "%s", c2 + 1);
			return 0;
		}
	}
	return -1;
}

static void kill_group(const char *dir, const char *why);

/*
 * v1 parents are named after their pool's pid: a pool that was SIGKILLed left its
 * codebox-<pid> groups, its runs' groups inside (w<N>-...) and its sessions' (s-...), whose
 * processes may live on (a session's init is no worker's child). Removes those whose pool is
 * dead, and kills first what this pid namespace sees in their groups: a pool's group holds its
 * runs and sessions and nothing else. A live pid may be another pool on this host, and is left
 * alone; so is a group whose processes are not this namespace's to see (another pool's, in a
 * pid namespace of its own): it holds them, and rmdir says EBUSY.
 */
static void
sweep_dead_pools(const char *parent)
{
	DIR *d;
	struct dirent *e;

	d = opendir(parent);
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		char dir[700], *end;
		long pid;

		if (strncmp(e->d_name, "codebox-", 8) != 0)
			continue;
		pid = strtol(e->d_name + 8, &end, 10);
		if (end == e->d_name + 8 || *end != '\0' || pid <= 0 || pid == (long)getpid() ||
		    kill((pid_t)pid, 0) == 0 || errno != ESRCH)
			continue;
		snprintf(dir, sizeof(dir), "%.500s/%.80s", parent, e->d_name);
		DIR *runs = opendir(dir);
		struct dirent *r;
		while (runs != NULL && (r = readdir(runs)) != NULL) {
			char sub[800];
			if (r->d_type != DT_DIR || r->d_name[0] == '.')
				continue;
			char procs[850], pids[64];
			snprintf(sub, sizeof(sub), "%s/%.80s", dir, r->d_name);
			snprintf(procs, sizeof(procs), "%s/cgroup.procs", sub);
			if (util_read_small(procs, pids, sizeof(pids)) > 0)
				log_msg(LOG_WARN,
				        "killing the processes of %s, left by a pool that "
				        "died (pid %ld)",
				        sub, pid);
			kill_group(sub, "a process left by a pool that died");
			if (rmdir(sub) < 0 && errno != ENOENT)
				log_msg(LOG_WARN, "rmdir(%s) failed: %s", sub, strerror(errno));
		}
		if (runs != NULL)
			closedir(runs);
		if (rmdir(dir) == 0)
			log_msg(LOG_WARN, "removed %s, left by a pool that died (pid %ld)", dir,
			        pid);
	}
	closedir(d);
}

void
cgroup_sweep_dead_pools(void)
{
	static const char *const hierarchies[] = {"memory", "pids", "cpu"};

	for (size_t i = 0; i < sizeof(hierarchies) / sizeof(hierarchies[0]); i++) {
		char own[256], parent[400];
		if (own_group(hierarchies[i], own, sizeof(own)) < 0)
			continue; /* not a v1 hierarchy here */
		snprintf(parent, sizeof(parent), "/sys/fs/cgroup/%s%.300s", hierarchies[i],
		         strcmp(own, "/") == 0 ? "" : own);
		/* a pool that may make no group here has none to sweep either */
		if (access(parent, W_OK) == 0)
			sweep_dead_pools(parent);
	}
}

/* v1: an eventfd the kernel signals when dir (or a group above it) runs out of memory */
static int
oom_eventfd(const char *dir)
{
	char path[700], line[64];
	int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), cfd;

	if (efd < 0)
		return -1;
	snprintf(path, sizeof(path), "%s/memory.oom_control", dir);
	cfd = open(path, O_RDONLY | O_CLOEXEC);
	if (cfd < 0) {
		close(efd);
		return -1;
	}
	snprintf(line, sizeof(line), "%d %d", efd, cfd);
	if (util_write_file(dir, "cgroup.event_control", line) < 0) {
		close(cfd);
		close(efd);
		return -1;
	}
	close(cfd); /* the registration holds the group, not the file */
	return efd;
}

static int
setup_v1(struct cgroup_ctx *ctx, unsigned long long pool_memory_bytes, bool want_cpu, char *why,
         size_t why_len)
{
	char mem_own[256], pids_own[256];

	if (access("/sys/fs/cgroup/memory/cgroup.procs", F_OK) < 0 ||
	    access("/sys/fs/cgroup/pids/cgroup.procs", F_OK) < 0) {
		snprintf(why, why_len, "no cgroup v1 memory and pids hierarchies");
		return -1;
	}
	if (own_group("memory", mem_own, sizeof(mem_own)) < 0 ||
	    own_group("pids", pids_own, sizeof(pids_own)) < 0) {
		snprintf(why, why_len, "this process's v1 groups are unknown");
		return -1;
	}
	snprintf(ctx->memory, sizeof(ctx->memory), "/sys/fs/cgroup/memory%s/codebox-%d",
	         strcmp(mem_own, "/") == 0 ? "" : mem_own, (int)getpid());
	snprintf(ctx->pids, sizeof(ctx->pids), "/sys/fs/cgroup/pids%s/codebox-%d",
	         strcmp(pids_own, "/") == 0 ? "" : pids_own, (int)getpid());
	if (mkdir(ctx->memory, 0755) < 0 && errno != EEXIST) {
		snprintf(why, why_len, "cannot create %.200s: %s", ctx->memory, strerror(errno));
		return -1;
	}
	if (mkdir(ctx->pids, 0755) < 0 && errno != EEXIST) {
		snprintf(why, why_len, "cannot create %.200s: %s", ctx->pids, strerror(errno));
		rmdir(ctx->memory);
		return -1;
	}
	/* v1 groups inherit use_hierarchy; a child's limits then count toward the parent */
	ctx->version = 1;
	if (want_cpu) {
		char cpu_own[256];
		if (access("/sys/fs/cgroup/cpu/cgroup.procs", F_OK) < 0 ||
		    own_group("cpu", cpu_own, sizeof(cpu_own)) < 0) {
			snprintf(ctx->cpu_why, sizeof(ctx->cpu_why), "no cgroup v1 cpu hierarchy");
		} else {
			snprintf(ctx->cpu, sizeof(ctx->cpu), "/sys/fs/cgroup/cpu%s/codebox-%d",
			         strcmp(cpu_own, "/") == 0 ? "" : cpu_own, (int)getpid());
			if (mkdir(ctx->cpu, 0755) < 0 && errno != EEXIST) {
				snprintf(ctx->cpu_why, sizeof(ctx->cpu_why),
				         "cannot create a v1 cpu group: %s", strerror(errno));
				ctx->cpu[0] = '\0';
			} else {
				ctx->cpu_quota = true;
			}
		}
	}
	if (pool_memory_bytes > 0) {
		char v[32];
		int probe_fd;
		snprintf(v, sizeof(v), "%llu", pool_memory_bytes);
		if (util_write_file(ctx->memory, "memory.limit_in_bytes", v) < 0) {
			snprintf(ctx->pool_why, sizeof(ctx->pool_why),
			         "cannot set the pool's memory.limit_in_bytes: %s",
			         strerror(errno));
		} else {
			(void)util_write_file(ctx->memory, "memory.memsw.limit_in_bytes", v);
			ctx->pool_memory_bytes = pool_memory_bytes;
			/* the workers stop the largest run themselves, if they can be told */
			probe_fd = oom_eventfd(ctx->memory);
			if (probe_fd >= 0) {
				close(probe_fd);
				(void)util_write_file(ctx->memory, "memory.oom_control", "1");
			}
		}
	}
	return 1;
}

/* Whether the space-separated list has word. */
static bool
has_word(const char *list, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = list; (p = strstr(p, word)) != NULL; p += n)
		if ((p == list || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' ' || p[n] == '\n'))
			return true;
	return false;
}

static int
setup_v2(struct cgroup_ctx *ctx, unsigned long long pool_memory_bytes, bool want_cpu, char *why,
         size_t why_len)
{
	char own[256], base[300], pool[400];
	char controllers[256] = "";

	if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) < 0) {
		snprintf(why, why_len, "no unified cgroup hierarchy at /sys/fs/cgroup");
		return -1;
	}
	if (own_group("", own, sizeof(own)) < 0) {
		snprintf(why, why_len, "this process's v2 group is unknown");
		return -1;
	}
	snprintf(base, sizeof(base), "/sys/fs/cgroup%.250s", strcmp(own, "/") == 0 ? "" : own);
	snprintf(pool, sizeof(pool), "%.300s/cgroup.controllers", base);
	(void)util_read_small(pool, controllers, sizeof(controllers));
	if (!has_word(controllers, "memory") || !has_word(controllers, "pids")) {
		snprintf(why, why_len, "memory and pids are not delegated to %.200s", base);
		return -1;
	}
	/* leave the group so that it may have controllers for its children */
	snprintf(pool, sizeof(pool), "%.300s/codebox-pool", base);
	if ((mkdir(pool, 0755) < 0 && errno != EEXIST) ||
	    util_write_file(pool, "cgroup.procs", "0") < 0) {
		snprintf(why, why_len, "cannot move into %.200s: %s", pool, strerror(errno));
		return -1;
	}
	if (util_write_file(base, "cgroup.subtree_control", "+memory +pids") < 0) {
		snprintf(why, why_len, "cannot enable memory and pids under %.200s: %s", base,
		         strerror(errno));
		return -1;
	}
	snprintf(ctx->memory, sizeof(ctx->memory), "%.300s/codebox-runs", base);
	if ((mkdir(ctx->memory, 0755) < 0 && errno != EEXIST) ||
	    util_write_file(ctx->memory, "cgroup.subtree_control", "+memory +pids") < 0) {
		snprintf(why, why_len, "cannot prepare %.200s: %s", ctx->memory, strerror(errno));
		return -1;
	}
	ctx->version = 2;
	if (want_cpu) {
		if (!has_word(controllers, "cpu"))
			snprintf(ctx->cpu_why, sizeof(ctx->cpu_why), "cpu is not delegated here");
		else if (util_write_file(base, "cgroup.subtree_control", "+cpu") < 0 ||
		         util_write_file(ctx->memory, "cgroup.subtree_control", "+cpu") < 0)
			snprintf(ctx->cpu_why, sizeof(ctx->cpu_why), "cannot enable cpu: %s",
			         strerror(errno));
		else
			ctx->cpu_quota = true;
	}
	if (pool_memory_bytes > 0) {
		char v[32];
		snprintf(v, sizeof(v), "%llu", pool_memory_bytes);
		if (util_write_file(ctx->memory, "memory.max", v) < 0) {
			snprintf(ctx->pool_why, sizeof(ctx->pool_why),
			         "cannot set the pool's memory.max: %s", strerror(errno));
		} else {
			(void)util_write_file(ctx->memory, "memory.swap.max", "0");
			ctx->pool_memory_bytes = pool_memory_bytes;
		}
	}
	return 2;
}

int
cgroup_setup(struct cgroup_ctx *ctx, unsigned long long pool_memory_bytes, bool want_cpu, char *why,
             size_t why_len)
{
	char why2[256] = "";

	memset(ctx, 0, sizeof(*ctx));
	if (pool_memory_bytes == 0)
		snprintf(ctx->pool_why, sizeof(ctx->pool_why), "no budget configured");
	if (!want_cpu)
		snprintf(ctx->cpu_why, sizeof(ctx->cpu_why), "disabled by CODEBOX_DISABLE");
	if (setup_v2(ctx, pool_memory_bytes, want_cpu, why2, sizeof(why2)) == 2)
		return 2;
	if (setup_v1(ctx, pool_memory_bytes, want_cpu, why, why_len) == 1)
		return 1;
	snprintf(why + strlen(why), why_len - strlen(why), "; %s", why2);
	memset(ctx, 0, sizeof(*ctx));
	return 0;
}

void
cgroup_teardown(struct cgroup_ctx *ctx)
{
	if (ctx->version == 1) {
		rmdir(ctx->memory);
		rmdir(ctx->pids);
		if (ctx->cpu[0])
			rmdir(ctx->cpu);
	}
	/* v2: the parent stays (the supervisor itself lives in codebox-pool) */
	ctx->version = 0;
}

int
cgroup_run_create(const struct cgroup_ctx *ctx, struct cgroup_run *run, const char *name,
                  unsigned long long memory_bytes, unsigned long max_processes,
                  unsigned long cpu_millicores, struct fault *f)
{
	char mem[32], pids[32], quota[32];
	const char *step = "mkdir()";

	memset(run, 0, sizeof(*run));
	run->oom_fd = -1;
	if (ctx->version == 0) {
		util_fault(f, 0, "no cgroup hierarchy is set up");
		return -1;
	}
	run->memory_bytes = memory_bytes;
	snprintf(run->parent, sizeof(run->parent), "%s", ctx->memory);
	/* CFS: cpu_millicores/1000 of a CPU in every 100 ms period */
	snprintf(quota, sizeof(quota), "%lu", cpu_millicores * 100);
	snprintf(mem, sizeof(mem), "%llu", memory_bytes);
	snprintf(pids, sizeof(pids), "%lu", max_processes);
	snprintf(run->memory, sizeof(run->memory), "%s/%s", ctx->memory, name);
	if (ctx->version == 1)
		snprintf(run->pids, sizeof(run->pids), "%s/%s", ctx->pids, name);
	else
		snprintf(run->pids, sizeof(run->pids), "%s", run->memory);
	if (mkdir(run->memory, 0755) < 0)
		goto fail;
	run->active = true;
	if (ctx->version == 1) {
		if (mkdir(run->pids, 0755) < 0)
			goto fail;
		step = "writing memory.limit_in_bytes";
		if (util_write_file(run->memory, "memory.limit_in_bytes", mem) < 0)
			goto fail;
		/* with swap accounting, swap counts too; without it the file is absent */
		(void)util_write_file(run->memory, "memory.memsw.limit_in_bytes", mem);
		step = "writing pids.max";
		if (util_write_file(run->pids, "pids.max", pids) < 0)
			goto fail;
		if (ctx->cpu_quota && cpu_millicores > 0) {
			snprintf(run->cpu, sizeof(run->cpu), "%s/%s", ctx->cpu, name);
			step = "mkdir() of the cpu group";
			if (mkdir(run->cpu, 0755) < 0) {
				run->cpu[0] = '\0';
				goto fail;
			}
			step = "writing the CFS quota";
			if (util_write_file(run->cpu, "cpu.cfs_period_us", "100000") < 0 ||
			    util_write_file(run->cpu, "cpu.cfs_quota_us", quota) < 0)
				goto fail;
		}
		/* the worker stops the run at its first OOM; the kernel kills nothing */
		run->oom_fd = oom_eventfd(run->memory);
		step = "writing memory.oom_control";
		if (run->oom_fd >= 0 && util_write_file(run->memory, "memory.oom_control", "1") < 0)
			goto fail;
	} else {
		step = "writing memory.max and pids.max";
		if (util_write_file(run->memory, "memory.max", mem) < 0 ||
		    util_write_file(run->memory, "pids.max", pids) < 0)
			goto fail;
		(void)util_write_file(run->memory, "memory.swap.max", "0");
		(void)util_write_file(run->memory, "memory.oom.group", "1");
		if (ctx->cpu_quota && cpu_millicores > 0) {
			char max[48];
			snprintf(max, sizeof(max), "%s 100000", quota);
			step = "writing cpu.max";
			if (util_write_file(run->memory, "cpu.max", max) < 0)
				goto fail;
		}
	}
	return 0;
fail:
	util_fault(f, errno, "setting up the run's cgroup %s (%s)", run->memory, step);
	cgroup_run_remove(run);
	return -1;
}

int
cgroup_run_attach(const struct cgroup_run *run, pid_t pid, struct fault *f)
{
	char p[32];

	snprintf(p, sizeof(p), "%d", (int)pid);
	if (util_write_file(run->memory, "cgroup.procs", p) < 0 ||
	    (strcmp(run->pids, run->memory) != 0 &&
	     util_write_file(run->pids, "cgroup.procs", p) < 0) ||
	    (run->cpu[0] && util_write_file(run->cpu, "cgroup.procs", p) < 0)) {
		util_fault(f, errno, "moving pid %d into %s", (int)pid, run->memory);
		return -1;
	}
	return 0;
}

void
cgroup_run_events(const struct cgroup_run *run, bool *oom_killed, bool *pids_max)
{
	*oom_killed = false;
	*pids_max = false;
	if (!run->active)
		return;
	if (strcmp(run->pids, run->memory) != 0) {
		/* v1: oom_kill in memory.oom_control (kernel >= 4.13), failcnt as a fallback */
		*oom_killed = read_key(run->memory, "memory.oom_control", "oom_kill") > 0;
	} else {
		*oom_killed = read_key(run->memory, "memory.events", "oom_kill") > 0;
	}
	*oom_killed = *oom_killed || run->oom_seen;
	*pids_max = read_key(run->pids, "pids.events", "max") > 0;
}

unsigned long long
cgroup_run_peak_bytes(const struct cgroup_run *run)
{
	if (!run->active)
		return 0;
	if (strcmp(run->pids, run->memory) != 0)
		return read_key(run->memory, "memory.max_usage_in_bytes", "");
	return read_key(run->memory, "memory.peak", "");
}

/* rmdir that waits, bounded, for exiting tasks to leave the group */
static void
remove_group(const char *dir)
{
	for (int i = 0; i < 200; i++) {
		struct timespec ms = {0, 5 * 1000 * 1000};
		if (rmdir(dir) == 0 || errno == ENOENT)
			return;
		if (errno != EBUSY)
			break;
		nanosleep(&ms, NULL);
	}
	log_msg(LOG_ERROR, "rmdir(%s) failed: %s", dir, strerror(errno));
}

int
cgroup_run_kernel_oom(const struct cgroup_run *run)
{
	if (!run->active || strcmp(run->pids, run->memory) == 0)
		return 0; /* none, or v2: memory.oom.group, as for a run */
	return util_write_file(run->memory, "memory.oom_control", "0");
}

void
cgroup_run_arm_oom(struct cgroup_run *run)
{
	run->oom_fd = -1;
	/* v1 (a pids hierarchy of its own): the group's OOM notifications (a session's group keeps
	 * the kernel's killer on, cgroup_run_kernel_oom(); the worker stops the execution) */
	if (run->active && strcmp(run->pids, run->memory) != 0)
		run->oom_fd = oom_eventfd(run->memory);
}

void
cgroup_run_remove(struct cgroup_run *run)
{
	/* an inactive (or zeroed) struct owns no descriptor */
	if (!run->active)
		return;
	if (run->oom_fd >= 0) {
		close(run->oom_fd);
		run->oom_fd = -1;
	}
	remove_group(run->memory);
	if (strcmp(run->pids, run->memory) != 0)
		remove_group(run->pids);
	if (run->cpu[0])
		remove_group(run->cpu);
	run->active = false;
}

static bool (*session_namer)(const char *dir, char *id, size_t len, void *ctx);
static void *session_namer_ctx;

void
cgroup_name_sessions(bool (*fn)(const char *dir, char *id, size_t len, void *ctx), void *ctx)
{
	session_namer = fn;
	session_namer_ctx = ctx;
}

/* Kills the session whose group is at dir (bytes in it), the largest at the pool's budget
 * (parent_usage of parent_limit) when no run is there to stop, and says so: which session (by
 * its name in the logs), its memory, and why. */
static void
kill_session_at_budget(const char *dir, unsigned long long bytes, unsigned long long parent_usage,
                       unsigned long long parent_limit)
{
	char name[64];

	if (session_namer == NULL || !session_namer(dir, name, sizeof(name), session_namer_ctx))
		snprintf(name, sizeof(name), "%.60s", strrchr(dir, '/') + 1);
	log_msg(LOG_WARN,
	        "session %s killed at the pool's memory budget: it used %llu bytes, the largest "
	        "session, when the pool's sessions alone used %llu of its %llu bytes (no run to "
	        "stop)",
	        name, bytes, parent_usage, parent_limit);
	kill_group(dir, "a session at the pool's memory budget");
}

/* usage within this much of a limit counts as at the limit (charges come in batches) */
#define CGROUP_OOM_SLACK_BYTES (2ULL << 20)

bool
cgroup_run_oom(struct cgroup_run *run)
{
	uint64_t n;
	unsigned long long usage, parent_usage, parent_limit, largest = 0;
	const char *self = strrchr(run->memory, '/');
	char largest_dir[800] = "";
	DIR *d;
	struct dirent *e;

	if (run->oom_fd >= 0 && read(run->oom_fd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		return false;
	if (run->oom_seen || !run->active)
		return run->oom_seen;
	usage = read_key(run->memory, "memory.usage_in_bytes", "");
	if (usage + CGROUP_OOM_SLACK_BYTES >= run->memory_bytes ||
	    read_key(run->memory, "memory.oom_control", "oom_kill") > 0) {
		run->oom_seen = true; /* its own limit */
		return true;
	}
	/* else the pool-wide budget (every group below it is told). Sessions hold their caps of
	 * the budget from their creation (session_reserve() admits no more than it holds), so
	 * what exhausts it is the runs' load: the largest run is stopped, never a session, and
	 * a session's own execution is never the one stopped (self a session: it goes on) */
	parent_usage = read_key(run->parent, "memory.usage_in_bytes", "");
	parent_limit = read_key(run->parent, "memory.limit_in_bytes", "");
	if (parent_limit == 0 || parent_usage + CGROUP_OOM_SLACK_BYTES < parent_limit)
		return false;
	bool self_session = strncmp(self + 1, "s-", 2) == 0;
	char largest_session[800] = "";
	unsigned long long session_largest = 0;
	d = opendir(run->parent);
	if (d == NULL)
		return false;
	while ((e = readdir(d)) != NULL) {
		char dir[800];
		unsigned long long u;
		bool session = strncmp(e->d_name, "s-", 2) == 0;
		if (e->d_type != DT_DIR || e->d_name[0] == '.' || strcmp(e->d_name, self + 1) == 0)
			continue;
		snprintf(dir, sizeof(dir), "%s/%.100s", run->parent, e->d_name);
		u = read_key(dir, "memory.usage_in_bytes", "");
		if (session) {
			if (u > session_largest) {
				session_largest = u;
				snprintf(largest_session, sizeof(largest_session), "%s", dir);
			}
			continue;
		}
		/* ties go to the smaller name, so exactly one worker acts */
		if (u > largest && (self_session || u > usage ||
		                    (u == usage && strcmp(e->d_name, self + 1) < 0))) {
			largest = u;
			snprintf(largest_dir, sizeof(largest_dir), "%s", dir);
		}
	}
	closedir(d);
	if (largest > 0)
		return false; /* a larger run: its own worker stops it */
	/* no run but this session's and the budget spent by sessions alone (a budget lowered
	 * under them): the largest session goes, the only way out of a pool whose tasks wait
	 * for memory */
	if (self_session && session_largest > usage) {
		kill_session_at_budget(largest_session, session_largest, parent_usage,
		                       parent_limit);
		return false;
	}
	run->oom_seen = true;
	return true;
}

/* SIGKILLs every process of the group at dir, a bounded number of rounds (they may fork while
 * being killed). */
static void
kill_group(const char *dir, const char *why)
{
	char procs[800], buf[4096];

	snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
	for (int round = 0; round < 50; round++) {
		if (util_read_small(procs, buf, sizeof(buf)) <= 0)
			break;
		for (char *p = buf; *p;) {
			char *end;
			long pid = strtol(p, &end, 10);
			/* a line cut by the buffer's end is no pid: the next round has it */
			if (end == p || *end != '\n')
				break;
			if (pid > 0)
				proc_kill((pid_t)pid, SIGKILL, why);
			p = end;
			while (*p == '\n')
				p++;
		}
		struct timespec ms = {0, 5 * 1000 * 1000};
		nanosleep(&ms, NULL);
	}
}

void
cgroup_run_kill(const struct cgroup_run *run, const char *why)
{
	if (!run->active)
		return;
	kill_group(run->memory, why);
	if (strcmp(run->pids, run->memory) != 0)
		kill_group(run->pids, why);
}

static void
sweep_dir(const char *parent, const char *prefix)
{
	DIR *d = opendir(parent);
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		char dir[700];

		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		snprintf(dir, sizeof(dir), "%.600s/%.80s", parent, e->d_name);
		kill_group(dir, "a process left in a dead worker's cgroup");
		log_msg(LOG_WARN, "removing %s, left by a worker that died mid-run", dir);
		remove_group(dir);
	}
	closedir(d);
}

void
cgroup_sweep(const struct cgroup_ctx *ctx, const char *prefix)
{
	if (ctx->version == 0)
		return;
	sweep_dir(ctx->memory, prefix);
	if (ctx->version == 1)
		sweep_dir(ctx->pids, prefix);
	if (ctx->version == 1 && ctx->cpu[0])
		sweep_dir(ctx->cpu, prefix);
}

/* The smallest limit from dir's memory files up to the hierarchy's root (v2: memory.max). */
static unsigned long long
v2_limit(const char *own)
{
	char dir[600];
	unsigned long long min = 0;

	snprintf(dir, sizeof(dir), "/sys/fs/cgroup%s", strcmp(own, "/") == 0 ? "" : own);
	for (;;) {
		char path[700], buf[64];
		snprintf(path, sizeof(path), "%s/memory.max", dir);
		if (util_read_small(path, buf, sizeof(buf)) > 0 && buf[0] >= '0' && buf[0] <= '9') {
			unsigned long long v = strtoull(buf, NULL, 10);
			if (min == 0 || v < min)
				min = v;
		}
		char *slash = strrchr(dir, '/');
		if (slash == NULL || strcmp(dir, "/sys/fs/cgroup") == 0)
			break;
		*slash = '\0';
	}
	return min;
}

unsigned long long
cgroup_available_memory(void)
{
	unsigned long long total = 0, limit = 0;
	char own[256], dir[600], meminfo[4096], *line;

	/* MemTotal is meminfo's first line */
	if (util_read_small("/proc/meminfo", meminfo, sizeof(meminfo)) > 0 &&
	    (line = strstr(meminfo, "MemTotal:")) != NULL &&
	    (line == meminfo || line[-1] == '\n') && sscanf(line, "MemTotal: %llu kB", &total) == 1)
		total *= 1024;
	if (own_group("memory", own, sizeof(own)) == 0) {
		/* v1: the kernel already takes the smallest limit above the group */
		snprintf(dir, sizeof(dir), "/sys/fs/cgroup/memory%s",
		         strcmp(own, "/") == 0 ? "" : own);
		limit = read_key(dir, "memory.stat", "hierarchical_memory_limit");
	} else if (own_group("", own, sizeof(own)) == 0) {
		limit = v2_limit(own);
	}
	if (limit > 0 && (total == 0 || limit < total))
		return limit;
	return total;
}

void
cgroup_probe(struct isolation *iso, const bool disabled[ISO_LAYER_COUNT], struct cgroup_ctx *ctx,
             unsigned long long pool_memory_bytes)
{
	char why[512] = "";

	if (disabled[ISO_CGROUP]) {
		snprintf(iso->why_off[ISO_CGROUP], sizeof(iso->why_off[0]),
		         "disabled by CODEBOX_DISABLE");
		for (int l = ISO_POOLMEMORY; l <= ISO_CPUQUOTA; l++)
			snprintf(iso->why_off[l], sizeof(iso->why_off[0]), "%s",
			         disabled[l] ? "disabled by CODEBOX_DISABLE"
			                     : "needs the cgroup layer");
		return;
	}
	if (pool_memory_bytes == 0)
		pool_memory_bytes = cgroup_available_memory() / 4 * 3;
	iso->cgroup_version = cgroup_setup(ctx, disabled[ISO_POOLMEMORY] ? 0 : pool_memory_bytes,
	                                   !disabled[ISO_CPUQUOTA], why, sizeof(why));
	iso->on[ISO_CGROUP] = iso->cgroup_version > 0;
	if (!iso->on[ISO_CGROUP])
		snprintf(iso->why_off[ISO_CGROUP], sizeof(iso->why_off[0]),
		         "no writable cgroup hierarchy (%.120s)", why);
	iso->on[ISO_POOLMEMORY] = iso->on[ISO_CGROUP] && ctx->pool_memory_bytes > 0;
	iso->pool_memory_bytes = ctx->pool_memory_bytes;
	iso->on[ISO_CPUQUOTA] = iso->on[ISO_CGROUP] && ctx->cpu_quota;
	if (!iso->on[ISO_POOLMEMORY])
		snprintf(iso->why_off[ISO_POOLMEMORY], sizeof(iso->why_off[0]), "%s",
		         disabled[ISO_POOLMEMORY] ? "disabled by CODEBOX_DISABLE"
		         : iso->on[ISO_CGROUP]    ? ctx->pool_why
		                                  : "needs the cgroup layer");
	if (!iso->on[ISO_CPUQUOTA])
		snprintf(iso->why_off[ISO_CPUQUOTA], sizeof(iso->why_off[0]), "%s",
		         iso->on[ISO_CGROUP] ? ctx->cpu_why : "needs the cgroup layer");
}
