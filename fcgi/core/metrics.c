/*
 * metrics.c - the counters behind GET /metrics.
 *
 * The supervisor maps one zeroed, shared, anonymous region before it forks; every worker
 * (respawned ones included, since they are forked from the supervisor too) inherits the
 * mapping and adds to it with atomic operations, so no lock and no message passing is needed
 * and a worker that dies mid-update loses at most its own increment. Nothing in the region is
 * a pointer. The in-flight gauge is one flag per worker, cleared by the supervisor when the
 * worker exits, so a crash cannot leave it high.
 *
 * nginx's own 429s (limit_conn rejects before any worker sees the request) are counted by
 * nginx: a second access log, written only for a 429 without an upstream, with a two-byte
 * line per request. Its size is the count; reading it is one fstat().
 */
#include "core/metrics.h"
#include "core/proc.h"

#include "core/util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#ifndef CODEBOX_VERSION
#define CODEBOX_VERSION "unknown"
#endif

/* Upper bounds of the duration histogram, in milliseconds (+Inf is implied). */
/* (5 ms: below a warm print(1), so that warm runs are told from cold ones) */
static const long metrics_buckets_ms[] = {5,    10,   25,    50,    100,   250,    500,   1000,
                                          2500, 5000, 10000, 30000, 60000, 120000, 300000};
#define METRICS_NBUCKETS (sizeof(metrics_buckets_ms) / sizeof(metrics_buckets_ms[0]))
#define METRICS_NSTATUS 4 /* succeeded, failed, timed_out, error */
#define METRICS_NLIMITS 5 /* enum run_limit */

struct metrics_shared {
	uint64_t runs[METRICS_PORT_COUNT][METRICS_NSTATUS];
	uint64_t limits[METRICS_PORT_COUNT][METRICS_NLIMITS];
	uint64_t buckets[METRICS_PORT_COUNT][METRICS_NBUCKETS]; /* not cumulative */
	uint64_t duration_ms_sum[METRICS_PORT_COUNT];
	uint64_t tiers[METRICS_PORT_COUNT][RUN_TIER_COUNT];
	uint64_t fallbacks[RUN_FALLBACK_COUNT];
	uint64_t zygote_starts[2]; /* [0] replacements of one that died, [1] renewals */
	uint64_t busy_pool;
	uint64_t busy_tenant; /* the pool's 429s for a token at its share (Codebox-Busy: tenant) */
	uint64_t worker_exits;
	uint64_t worker_restarts;
	uint64_t sessions_made;
	uint64_t sessions_ended[METRICS_SESSION_END_COUNT];
	uint64_t snapshots;
	uint64_t restores;
	uint8_t in_flight[METRICS_MAX_WORKERS];
};

static struct metrics_shared *metrics_mem;

int
metrics_init(void)
{
	void *p = util_map_shared(NULL, sizeof(struct metrics_shared));

	if (p == NULL)
		return -1;
	metrics_mem = p;
	return 0;
}

static void
add(uint64_t *counter, uint64_t n)
{
	__atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static uint64_t
get(const uint64_t *counter)
{
	return __atomic_load_n(counter, __ATOMIC_RELAXED);
}

void
metrics_run_begin(int worker_index)
{
	if (metrics_mem != NULL && worker_index >= 0 && worker_index < METRICS_MAX_WORKERS)
		__atomic_store_n(&metrics_mem->in_flight[worker_index], 1, __ATOMIC_RELAXED);
}

void
metrics_run_end(int worker_index)
{
	if (metrics_mem != NULL && worker_index >= 0 && worker_index < METRICS_MAX_WORKERS)
		__atomic_store_n(&metrics_mem->in_flight[worker_index], 0, __ATOMIC_RELAXED);
}

void
metrics_record_run(enum metrics_port port, const struct run_outcome *o)
{
	size_t b = 0;
	long long ms = o->duration_ms < 0 ? 0 : o->duration_ms;

	if (metrics_mem == NULL || port >= METRICS_PORT_COUNT)
		return;
	add(&metrics_mem->runs[port][o->status], 1);
	if ((int)o->tier < RUN_TIER_COUNT)
		add(&metrics_mem->tiers[port][o->tier], 1);
	if (o->fallback != RUN_FALLBACK_NONE && (int)o->fallback < RUN_FALLBACK_COUNT)
		add(&metrics_mem->fallbacks[o->fallback], 1);
	if (o->limit_exceeded != RUN_LIMIT_NONE && (int)o->limit_exceeded < METRICS_NLIMITS)
		add(&metrics_mem->limits[port][o->limit_exceeded], 1);
	while (b < METRICS_NBUCKETS && ms > metrics_buckets_ms[b])
		b++;
	if (b < METRICS_NBUCKETS)
		add(&metrics_mem->buckets[port][b], 1);
	add(&metrics_mem->duration_ms_sum[port], (uint64_t)ms);
}

void
metrics_record_error(enum metrics_port port)
{
	if (metrics_mem != NULL && port < METRICS_PORT_COUNT)
		add(&metrics_mem->runs[port][3], 1);
}

void
metrics_zygote_started(bool renewal)
{
	if (metrics_mem != NULL)
		add(&metrics_mem->zygote_starts[renewal ? 1 : 0], 1);
}

void
metrics_record_busy(void)
{
	if (metrics_mem != NULL)
		add(&metrics_mem->busy_pool, 1);
}

void
metrics_record_busy_tenant(void)
{
	if (metrics_mem != NULL)
		add(&metrics_mem->busy_tenant, 1);
}

/* How many lines nginx wrote in name beside the busy log (two bytes a line), 0 if none. */
static long long
nginx_count(const char *nginx_busy_log, const char *name)
{
	char path[4096];
	const char *slash = nginx_busy_log ? strrchr(nginx_busy_log, '/') : NULL;
	struct stat sb;
	int n;

	if (slash == NULL)
		return 0;
	n = snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - nginx_busy_log), nginx_busy_log,
	             name);
	if (n < 0 || (size_t)n >= sizeof(path) || stat(path, &sb) != 0)
		return 0;
	return (long long)sb.st_size / 2;
}

void
metrics_session_made(void)
{
	if (metrics_mem != NULL)
		add(&metrics_mem->sessions_made, 1);
}

void
metrics_session_ended(enum metrics_session_end why)
{
	if (metrics_mem != NULL && why != METRICS_SESSION_NOT_MADE &&
	    why < METRICS_SESSION_END_COUNT)
		add(&metrics_mem->sessions_ended[why], 1);
}

void
metrics_session_snapshot(void)
{
	if (metrics_mem != NULL)
		add(&metrics_mem->snapshots, 1);
}

void
metrics_session_restored(void)
{
	if (metrics_mem != NULL)
		add(&metrics_mem->restores, 1);
}

void
metrics_worker_exited(int worker_index, bool restart)
{
	if (metrics_mem == NULL)
		return;
	metrics_run_end(worker_index);
	add(&metrics_mem->worker_exits, 1);
	if (restart)
		add(&metrics_mem->worker_restarts, 1);
}

static const char *const metrics_port_names[METRICS_PORT_COUNT] = {"execute", "agent", "mcp"};

const char *
metrics_port_name(enum metrics_port port)
{
	return port < METRICS_PORT_COUNT ? metrics_port_names[port] : "?";
}
static const char *const metrics_status_names[METRICS_NSTATUS] = {"succeeded", "failed",
                                                                  "timed_out", "error"};

/* The answers nginx logged by status (nginx-status-<code>.log beside the busy log, two bytes
 * a line: see nginx.conf), as codebox_http_responses_total. */
static void
render_statuses(FILE *f, const char *nginx_busy_log)
{
	char dir[4096];
	const char *slash = nginx_busy_log ? strrchr(nginx_busy_log, '/') : NULL;
	struct dirent *e;
	DIR *d;
	int fd;

	fprintf(f, "# HELP codebox_http_responses_total Answers sent, by HTTP status (nginx's and "
	           "the pool's alike, both ports).\n"
	           "# TYPE codebox_http_responses_total counter\n");
	if (slash == NULL || (size_t)(slash - nginx_busy_log) >= sizeof(dir))
		return;
	memcpy(dir, nginx_busy_log, (size_t)(slash - nginx_busy_log));
	dir[slash - nginx_busy_log] = '\0';
	fd = open(dir[0] ? dir : "/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	d = fd >= 0 ? fdopendir(fd) : NULL;
	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	for (int n = 0; n < 1000 && (e = readdir(d)) != NULL; n++) {
		unsigned code;
		char tail[8];
		struct stat sb;

		bool other = strcmp(e->d_name, "nginx-status-other.log") == 0;

		if (!other && (sscanf(e->d_name, "nginx-status-%3u.%4s", &code, tail) != 2 ||
		               strcmp(tail, "log") != 0 || code < 100 || code > 599))
			continue;
		if (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(sb.st_mode))
			continue;
		if (other)
			fprintf(f, "codebox_http_responses_total{code=\"other\"} %lld\n",
			        (long long)sb.st_size / 2);
		else
			fprintf(f, "codebox_http_responses_total{code=\"%u\"} %lld\n", code,
			        (long long)sb.st_size / 2);
	}
	closedir(d);
}

/* utime + stime (clock ticks) and RSS (pages) of pid, from /proc/<pid>/stat; 0 when gone */
static int
proc_usage(pid_t pid, unsigned long long *ticks, unsigned long long *rss_pages,
           unsigned long long *start_ticks)
{
	char path[64], buf[1024], *p;
	unsigned long long v[24];

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if (util_read_small(path, buf, sizeof(buf)) <= 0)
		return -1;
	p = strrchr(buf, ')');
	if (p == NULL)
		return -1;
	p += 2; /* past ") " at field 3, the state */
	for (int i = 0; i < 22; i++) {
		p = strchr(p, ' ');
		if (p == NULL)
			return -1;
		v[i] = strtoull(++p, NULL, 10);
	}
	/* after the state: v[0] is field 4 (ppid); utime 14, stime 15, starttime 22, rss 24 */
	*ticks = v[10] + v[11];
	*start_ticks = v[18];
	*rss_pages = v[20];
	return 0;
}

/*
 * The pool's process_* series: its supervisor and the supervisor's children (the workers and
 * the zygote), summed; the start time and descriptors are the supervisor's.
 */
static void
render_process(FILE *f)
{
	pid_t sup = getppid(), kids[256];
	char path[96];
	unsigned long long ticks = 0, rss = 0, start = 0, t, r, st;
	long hz = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	double boot = 0;
	int fds = 0, n;
	FILE *up;
	DIR *d;
	struct rlimit lim = {0};

	if (proc_usage(sup, &ticks, &rss, &start) < 0 || hz <= 0)
		return;
	n = proc_children_of(sup, kids, 256);
	for (int k = 0; k < n; k++) {
		if (proc_usage(kids[k], &t, &r, &st) == 0) {
			ticks += t;
			rss += r;
		}
	}
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)sup);
	d = opendir(path);
	for (struct dirent *e; d != NULL && fds < 1000000 && (e = readdir(d)) != NULL;)
		fds += e->d_name[0] != '.';
	if (d != NULL)
		closedir(d);
	(void)prlimit(sup, RLIMIT_NOFILE, NULL, &lim);
	up = fopen("/proc/stat", "re");
	for (char line[256]; up != NULL && fgets(line, sizeof(line), up) != NULL;)
		if (sscanf(line, "btime %lf", &boot) == 1)
			break;
	if (up != NULL)
		fclose(up);
	fprintf(f,
	        "# HELP process_cpu_seconds_total CPU time of the pool's supervisor and its "
	        "children (workers, zygote), user and system.\n"
	        "# TYPE process_cpu_seconds_total counter\n"
	        "process_cpu_seconds_total %.2f\n"
	        "# HELP process_resident_memory_bytes Resident memory of the pool's supervisor and "
	        "its children, summed (pages they share count in each).\n"
	        "# TYPE process_resident_memory_bytes gauge\n"
	        "process_resident_memory_bytes %llu\n"
	        "# HELP process_start_time_seconds When the pool's supervisor started, in seconds "
	        "since the epoch.\n"
	        "# TYPE process_start_time_seconds gauge\n"
	        "process_start_time_seconds %.2f\n",
	        (double)ticks / (double)hz, rss * (unsigned long long)page,
	        boot + (double)start / (double)hz);
	if (d != NULL || fds > 0)
		fprintf(f,
		        "# HELP process_open_fds Open descriptors of the pool's supervisor.\n"
		        "# TYPE process_open_fds gauge\n"
		        "process_open_fds %d\n",
		        fds);
	if (lim.rlim_max > 0)
		fprintf(f,
		        "# HELP process_max_fds The supervisor's descriptor limit.\n"
		        "# TYPE process_max_fds gauge\n"
		        "process_max_fds %llu\n",
		        (unsigned long long)lim.rlim_cur);
}

static const char *const metrics_session_end_names[METRICS_SESSION_END_COUNT] = {
    "", "deleted", "idle", "lifetime", "killed", "pool_stop", "failed"};

/* The sessions' counters: made, ended by reason, snapshots and restores, and the background
 * executions running */
static void
render_session_counts(FILE *f, const struct metrics_capacity *cap)
{
	const struct metrics_shared *m = metrics_mem;

	fprintf(f,
	        "# HELP codebox_sessions_made_total Sessions made (POST /sessions, MCP's "
	        "\"new\", restores).\n"
	        "# TYPE codebox_sessions_made_total counter\n"
	        "codebox_sessions_made_total %llu\n"
	        "# HELP codebox_sessions_ended_total Sessions ended, by reason (idle: found ended "
	        "between executions within its lifetime).\n"
	        "# TYPE codebox_sessions_ended_total counter\n",
	        (unsigned long long)m->sessions_made);
	for (int i = 1; i < METRICS_SESSION_END_COUNT; i++)
		fprintf(f, "codebox_sessions_ended_total{reason=\"%s\"} %llu\n",
		        metrics_session_end_names[i], (unsigned long long)m->sessions_ended[i]);
	fprintf(f,
	        "# HELP codebox_session_snapshots_total Snapshots taken "
	        "(POST /sessions/{id}/snapshot, MCP's \"snapshot\").\n"
	        "# TYPE codebox_session_snapshots_total counter\n"
	        "codebox_session_snapshots_total %llu\n"
	        "# HELP codebox_session_restores_total Sessions restored from a snapshot.\n"
	        "# TYPE codebox_session_restores_total counter\n"
	        "codebox_session_restores_total %llu\n"
	        "# HELP codebox_background_executions Background executions running now.\n"
	        "# TYPE codebox_background_executions gauge\n"
	        "codebox_background_executions %ld\n",
	        (unsigned long long)m->snapshots, (unsigned long long)m->restores,
	        cap->background_running);
}

/* The sessions' gauges: what they hold of the pod's bounds (KEDA's sessions trigger,
 * deploy/overlays/scale/scaledobject.yaml), and whether the pod is draining */
static void
render_sessions(FILE *f, const struct metrics_capacity *cap)
{
	if (metrics_mem != NULL)
		render_session_counts(f, cap);
	fprintf(f,
	        "# HELP codebox_sessions_open Sessions open now (POST /sessions, MCP's "
	        "session \"new\").\n"
	        "# TYPE codebox_sessions_open gauge\n"
	        "codebox_sessions_open %ld\n"
	        "# HELP codebox_sessions_max Sessions this pod holds at once "
	        "(CODEBOX_MAX_SESSIONS; 0: sessions are off).\n"
	        "# TYPE codebox_sessions_max gauge\n"
	        "codebox_sessions_max %ld\n"
	        "# HELP codebox_sessions_memory_bytes Memory the open sessions' caps reserve of "
	        "the pool's budget.\n"
	        "# TYPE codebox_sessions_memory_bytes gauge\n"
	        "codebox_sessions_memory_bytes %llu\n",
	        cap->sessions_open, cap->sessions_max, cap->sessions_memory_bytes);
	/* only where the pool has a budget: a pod without one is never full by memory */
	if (cap->memory_budget_bytes > 0)
		fprintf(f,
		        "# HELP codebox_memory_budget_bytes The pool's memory budget, which the "
		        "runs' and sessions' memory caps are held of.\n"
		        "# TYPE codebox_memory_budget_bytes gauge\n"
		        "codebox_memory_budget_bytes %llu\n",
		        cap->memory_budget_bytes);
	fprintf(f,
	        "# HELP codebox_draining 1 while the pod drains (SIGUSR1): no new session, "
	        "the open ones served on.\n"
	        "# TYPE codebox_draining gauge\n"
	        "codebox_draining %d\n",
	        cap->draining ? 1 : 0);
}

char *
metrics_render(const char *nginx_busy_log, const char *python_version,
               const struct metrics_capacity *cap, size_t *len)
{
	char *buf = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&buf, &size);
	const struct metrics_shared *m = metrics_mem;
	struct stat sb;
	long long nginx_busy = 0;
	unsigned in_flight = 0;

	if (f == NULL)
		return NULL;
	if (m == NULL) {
		fprintf(f, "# codebox: the shared counters could not be mapped at start-up\n");
		goto out;
	}
	fprintf(f,
	        "# HELP codebox_build_info What this codebox is built of.\n"
	        "# TYPE codebox_build_info gauge\n"
	        "codebox_build_info{version=\"%s\",python=\"%s\"} 1\n",
	        CODEBOX_VERSION, python_version ? python_version : "unknown");

	fprintf(f, "# HELP codebox_executions_total Runs finished, by API (execute: POST /execute, "
	           "agent: port 8888's commands, mcp: tools/call) and status (error: the sandbox "
	           "could not run it).\n"
	           "# TYPE codebox_executions_total counter\n");
	for (int p = 0; p < METRICS_PORT_COUNT; p++)
		for (int s = 0; s < METRICS_NSTATUS; s++)
			fprintf(f, "codebox_executions_total{api=\"%s\",status=\"%s\"} %llu\n",
			        metrics_port_names[p], metrics_status_names[s],
			        (unsigned long long)get(&m->runs[p][s]));

	fprintf(f, "# HELP codebox_limit_exceeded_total Runs that hit a limit, by limit.\n"
	           "# TYPE codebox_limit_exceeded_total counter\n");
	for (int p = 0; p < METRICS_PORT_COUNT; p++)
		for (int l = RUN_LIMIT_TIME; l < METRICS_NLIMITS; l++)
			fprintf(f, "codebox_limit_exceeded_total{api=\"%s\",limit=\"%s\"} %llu\n",
			        metrics_port_names[p], run_limit_string((enum run_limit)l),
			        (unsigned long long)get(&m->limits[p][l]));

	fprintf(f, "# HELP codebox_execution_duration_seconds Wall time of finished runs.\n"
	           "# TYPE codebox_execution_duration_seconds histogram\n");
	for (int p = 0; p < METRICS_PORT_COUNT; p++) {
		unsigned long long cum = 0;
		for (size_t b = 0; b < METRICS_NBUCKETS; b++) {
			cum += get(&m->buckets[p][b]);
			fprintf(f,
			        "codebox_execution_duration_seconds_bucket{api=\"%s\",le=\"%g\"} "
			        "%llu\n",
			        metrics_port_names[p], (double)metrics_buckets_ms[b] / 1000, cum);
		}
		/* runs longer than the last bound are counted in the total only */
		unsigned long long count = 0;
		for (int s = 0; s < 3; s++)
			count += get(&m->runs[p][s]);
		fprintf(f,
		        "codebox_execution_duration_seconds_bucket{api=\"%s\",le=\"+Inf\"} %llu\n",
		        metrics_port_names[p], count);
		fprintf(f, "codebox_execution_duration_seconds_sum{api=\"%s\"} %.3f\n",
		        metrics_port_names[p], (double)get(&m->duration_ms_sum[p]) / 1000);
		fprintf(f, "codebox_execution_duration_seconds_count{api=\"%s\"} %llu\n",
		        metrics_port_names[p], count);
	}

	fprintf(f, "# HELP codebox_executions_by_tier_total Runs finished, by the interpreter that "
	           "ran them (cold: a fresh one; light, heavy: a copy of that tier's warm "
	           "template).\n"
	           "# TYPE codebox_executions_by_tier_total counter\n");
	for (int p = 0; p < METRICS_PORT_COUNT; p++)
		for (int t = 0; t < RUN_TIER_COUNT; t++)
			fprintf(f,
			        "codebox_executions_by_tier_total{api=\"%s\",tier=\"%s\"} %llu\n",
			        metrics_port_names[p], run_tier_string((enum run_tier)t),
			        (unsigned long long)get(&m->tiers[p][t]));
	fprintf(f, "# HELP codebox_warm_fallbacks_total Runs that could have been warm and were "
	           "not, or not on their tier, by why.\n"
	           "# TYPE codebox_warm_fallbacks_total counter\n");
	for (int r = RUN_FALLBACK_NONE + 1; r < RUN_FALLBACK_COUNT; r++)
		fprintf(f, "codebox_warm_fallbacks_total{reason=\"%s\"} %llu\n",
		        run_fallback_string((enum run_fallback)r),
		        (unsigned long long)get(&m->fallbacks[r]));
	fprintf(f,
	        "# HELP codebox_zygote_starts_total Zygotes started after the first, by why "
	        "(renewal: the serving one's life was up; replacement: none served).\n"
	        "# TYPE codebox_zygote_starts_total counter\n"
	        "codebox_zygote_starts_total{reason=\"renewal\"} %llu\n"
	        "codebox_zygote_starts_total{reason=\"replacement\"} %llu\n",
	        (unsigned long long)get(&m->zygote_starts[1]),
	        (unsigned long long)get(&m->zygote_starts[0]));

	for (int w = 0; w < METRICS_MAX_WORKERS; w++)
		in_flight += __atomic_load_n(&m->in_flight[w], __ATOMIC_RELAXED);
	fprintf(f,
	        "# HELP codebox_executions_in_flight Runs in progress now.\n"
	        "# TYPE codebox_executions_in_flight gauge\n"
	        "codebox_executions_in_flight %u\n",
	        in_flight);
	/* capacity: saturation is in_flight / slots */
	fprintf(f,
	        "# HELP codebox_execution_slots Runs port 8080 admits at once (POST /execute and "
	        "MCP's tools/call share them; port 8888 has slots of its own).\n"
	        "# TYPE codebox_execution_slots gauge\n"
	        "codebox_execution_slots %ld\n",
	        cap ? cap->execute_slots : 0);
	if (cap != NULL)
		render_sessions(f, cap);

	if (nginx_busy_log != NULL && stat(nginx_busy_log, &sb) == 0)
		nginx_busy = (long long)sb.st_size / 2;
	fprintf(f,
	        "# HELP codebox_busy_rejections_total Requests answered 429, by who refused "
	        "them (nginx: limit_conn; pool: the workers; tenant: a bearer token over its "
	        "request rate, nginx's limit_req, or at its share of the execution slots).\n"
	        "# TYPE codebox_busy_rejections_total counter\n"
	        "codebox_busy_rejections_total{source=\"nginx\"} %lld\n"
	        "codebox_busy_rejections_total{source=\"pool\"} %llu\n"
	        "codebox_busy_rejections_total{source=\"tenant\"} %llu\n",
	        nginx_busy, (unsigned long long)get(&m->busy_pool),
	        (unsigned long long)nginx_count(nginx_busy_log, "nginx-tenant-429.log") +
	            (unsigned long long)get(&m->busy_tenant));

	fprintf(f,
	        "# HELP codebox_worker_restarts_total Workers that died and were respawned.\n"
	        "# TYPE codebox_worker_restarts_total counter\n"
	        "codebox_worker_restarts_total %llu\n",
	        (unsigned long long)get(&m->worker_restarts));
	render_statuses(f, nginx_busy_log);
	render_process(f);
out:
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	*len = size;
	return buf;
}
