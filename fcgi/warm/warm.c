/*
 * warm.c - warm interpreters, the pool's side (docs/DESIGN.md, "Warm interpreters" and "The
 * trust boundary"): the supervisor starts, renews and replaces the zygote (fork+execve of its
 * own binary, --warm-zygote: zygote.c), adopts and ends orphaned templates, and keeps the
 * shared word that says which tiers serve; a worker asks its tier's template for the init of
 * its next run (warm_box_clone()) over the tier sockets the supervisor made once, for the
 * pool's whole life.
 */
#include "warm/warm.h"

#include "core/log.h"
#include "core/metrics.h"
#include "core/proc.h"
#include "core/runconfig.h"
#include "box/seccomp.h"
#include "core/tier.h"
#include "core/util.h"
#include "warm/warmproto.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static struct warm_settings warm_settings;

/* ---- settings ---- */

static int
parse_ulong(const char *name, unsigned long dflt, unsigned long min, unsigned long *out, char *why,
            size_t why_len)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	*out = dflt;
	if (v == NULL || *v == '\0')
		return 0;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end != '\0' || v[0] == '-' || n < min) {
		snprintf(why, why_len, "%s must be an integer >= %lu, not \"%.40s\"", name, min, v);
		return -1;
	}
	*out = n;
	return 0;
}

static bool
module_name_ok(const char *m)
{
	if (*m == '\0' || *m == '.')
		return false;
	for (const char *p = m; *p; p++)
		if (!(*p == '_' || *p == '.' || (*p >= 'a' && *p <= 'z') ||
		      (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
			return false;
	return true;
}

int
warm_parse_settings(struct warm_settings *s, char *why, size_t why_len)
{
	const char *on = getenv("CODEBOX_WARM");
	const char *mods = getenv("CODEBOX_WARM_MODULES");

	memset(s, 0, sizeof(*s));
	if (on == NULL || *on == '\0' || strcmp(on, "1") == 0) {
		s->enabled = true;
	} else if (strcmp(on, "0") != 0) {
		snprintf(why, why_len, "CODEBOX_WARM must be 0 or 1, not \"%.40s\"", on);
		return -1;
	}
	if (mods == NULL)
		mods = WARM_DEFAULT_MODULES;
	for (const char *p = mods; *p;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n > 0) {
			if (s->n_modules >= WARM_MAX_MODULES || n >= sizeof(s->modules[0])) {
				snprintf(why, why_len,
				         "CODEBOX_WARM_MODULES: at most %d names of at most %zu "
				         "characters",
				         WARM_MAX_MODULES, sizeof(s->modules[0]) - 1);
				return -1;
			}
			memcpy(s->modules[s->n_modules], p, n);
			s->modules[s->n_modules][n] = '\0';
			if (!module_name_ok(s->modules[s->n_modules])) {
				snprintf(why, why_len,
				         "CODEBOX_WARM_MODULES: \"%s\" is not a module name",
				         s->modules[s->n_modules]);
				return -1;
			}
			s->n_modules++;
		}
		p = end ? end + 1 : p + n;
	}
	{
		const char *light = getenv("CODEBOX_WARM_LIGHT_MODULES");
		bool explicit_light = light != NULL;

		if (light == NULL)
			light = WARM_DEFAULT_LIGHT_MODULES;
		for (const char *p = light; *p;) {
			const char *end = strchr(p, ',');
			size_t n = end ? (size_t)(end - p) : strlen(p);
			bool found = false;

			for (int i = 0; n > 0 && i < s->n_modules; i++)
				if (strlen(s->modules[i]) == n && strncmp(s->modules[i], p, n) == 0)
					s->light[i] = found = true;
			if (n > 0 && !found && explicit_light) {
				snprintf(why, why_len,
				         "CODEBOX_WARM_LIGHT_MODULES: \"%.*s\" is not one of the "
				         "preloaded modules (CODEBOX_WARM_MODULES)",
				         (int)(n > 64 ? 64 : n), p);
				return -1;
			}
			p = end ? end + 1 : p + n;
		}
		for (int i = 0; i < s->n_modules; i++)
			if (!s->light[i])
				s->n_heavy++;
	}
	if (parse_ulong("CODEBOX_WARM_MAX_RUNS", 1000, 1, &s->max_runs, why, why_len) < 0 ||
	    parse_ulong("CODEBOX_WARM_MAX_SECONDS", 900, 1, &s->max_seconds, why, why_len) < 0 ||
	    parse_ulong("CODEBOX_WARM_ONE_COPY", 1, 0, &s->one_copy, why, why_len) < 0)
		return -1;
	if (s->one_copy > 1) {
		snprintf(why, why_len, "CODEBOX_WARM_ONE_COPY must be 0 or 1");
		return -1;
	}
	return 0;
}

bool
warm_wants_heavy(const char *code, size_t len)
{
	for (int i = 0; warm_settings.n_heavy > 0 && i < warm_settings.n_modules; i++)
		if (!warm_settings.light[i] && tier_code_names(code, len, warm_settings.modules[i]))
			return true;
	return false;
}

/* ---- the supervisor's side: its warm processes, in one table ---- */

/* What a process of the table is to the supervisor. */
enum warm_role {
	WARM_FREE,     /* an empty record */
	WARM_STARTING, /* a zygote starting: a successor or a replacement (at most one) */
	WARM_SERVING,  /* the zygote whose templates serve (at most one; none until one is ready) */
	WARM_RETIRED,  /* the zygote it succeeded, ending once its templates have (at most one) */
	WARM_KILLED,   /* a zygote killed, not reaped yet */
	WARM_ORPHAN,   /* a template whose zygote died: it serves on, adopted by the pool */
	WARM_ORPHAN_KILLED, /* an orphan killed, not reaped yet */
};

/* One of the supervisor's warm processes, as nginx's ngx_processes[] holds its own. */
struct warm_proc {
	enum warm_role role;
	pid_t pid;
	int sock; /* a zygote's: the supervisor's end (closing it retires the zygote), or -1 */
	long long started_ms;
	unsigned tiers; /* the serving zygote's tiers that serve now; an orphan's tier */
};

/* Three zygotes and the killed ones waiting to be reaped, WARM_MAX_ORPHANS orphans. No zygote
 * is started without a free record; an orphan past WARM_MAX_ORPHANS is killed, and reaped by
 * the pool's loop as any unknown child. */
#define WARM_MAX_ORPHANS 8
#define WARM_MAX_PROCS 16
static struct warm_proc warm_procs[WARM_MAX_PROCS] = {
    [0 ... WARM_MAX_PROCS - 1] = {.role = WARM_FREE, .sock = -1}};

static long long zy_last_start_ms;
static struct warm_zygote_config warm_config;
static int warm_etc_fd = -1;
/* codebox-init, a sealed memfd, for the one-copy start (sandbox.h); -1: two copies */
static int warm_init_fd = -1;
/* the tiers' sockets: [0] the workers' ends, [1] the templates'; index 0 light, 1 heavy */
static int tier_sock[2][2] = {{-1, -1}, {-1, -1}};

/* The supervisor's word to its workers: whether a zygote serves. Shared by the pool's own
 * processes only (the zygote is exec'd, and a run's first process unmaps it). */
struct warm_state {
	unsigned tiers;    /* WARM_TIER_*: the serving zygote's tiers that serve now; 0: none */
	unsigned one_copy; /* its templates start runs with one copy of the interpreter */
};
static struct warm_state *warm_state;
/* a zygote failed for a reason a new one would meet again (an import, a thread): no more */
static bool zy_failed;
/* the wait before the next start of one that died before it was ready (doubles, to 60 s) */
static long long zy_backoff_ms = 1000;

/* The record of role r (the first one), or NULL. */
static struct warm_proc *
warm_proc_role(enum warm_role r)
{
	for (int i = 0; i < WARM_MAX_PROCS; i++)
		if (warm_procs[i].role == r)
			return &warm_procs[i];
	return NULL;
}

/* The record of pid, or NULL. */
static struct warm_proc *
warm_proc_of(pid_t pid)
{
	for (int i = 0; i < WARM_MAX_PROCS; i++)
		if (warm_procs[i].role != WARM_FREE && warm_procs[i].pid == pid)
			return &warm_procs[i];
	return NULL;
}

/* A new record of role r for pid, or NULL when the table is full. */
static struct warm_proc *
warm_proc_add(enum warm_role r, pid_t pid)
{
	struct warm_proc *p = warm_proc_role(WARM_FREE);

	if (p != NULL)
		*p = (struct warm_proc){
		    .role = r, .pid = pid, .sock = -1, .started_ms = util_now_ms()};
	return p;
}

/* Forgets p: its socket closed, its record free. */
static void
warm_proc_forget(struct warm_proc *p)
{
	util_close_fd(&p->sock);
	*p = (struct warm_proc){.role = WARM_FREE, .sock = -1};
}

/* The serving zygote's tiers that serve now (0: none serves). */
static unsigned
zygote_tiers(void)
{
	const struct warm_proc *z = warm_proc_role(WARM_SERVING);

	return z != NULL ? z->tiers : 0;
}

static void
warm_set_serving(unsigned tiers)
{
	if (warm_state != NULL)
		__atomic_store_n(&warm_state->tiers, tiers, __ATOMIC_RELEASE);
}

/* The zygote's environment: what every run's is built from, nothing of the pool's (not even
 * the sanitizers' options, which may name host paths: a sanitized zygote runs with its
 * defaults). */
static char *const zygote_envp[] = {"PATH=/usr/local/bin:/usr/bin:/bin",
                                    "LANG=C.UTF-8",
                                    "OPENBLAS_NUM_THREADS=1",
                                    "OMP_NUM_THREADS=1",
                                    "MKL_NUM_THREADS=1",
                                    NULL};

/* Kills z (the pool's loop reaps it, and then forgets its record). */
static void
zygote_kill(struct warm_proc *z)
{
	util_close_fd(&z->sock);
	proc_kill(z->pid, SIGKILL, "a zygote");
	z->role = WARM_KILLED;
	z->tiers = 0;
}

/* The one spawner of warm processes: a zygote, by fork and execve of this binary, sent its
 * configuration. Returns its record (WARM_STARTING), or NULL (logged). Never waits for it to
 * be ready. */
static struct warm_proc *
zygote_spawn(void)
{
	char *argv[] = {"codebox-zygote", WARM_ZYGOTE_ARG, NULL};
	int sv[2], fds[WARM_FD_COUNT];
	pid_t pid, self = getpid();
	struct warm_proc *z;

	zy_last_start_ms = util_now_ms();
	if (warm_proc_role(WARM_FREE) == NULL) {
		log_msg(LOG_ERROR, "no record is free for a new zygote");
		return NULL;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_msg(LOG_ERROR, "socketpair() failed while starting the zygote: %s",
		        strerror(errno));
		return NULL;
	}
	pid = fork();
	if (pid == 0) {
		/* between fork and execve: system calls only. The signal mask is the
		 * supervisor's (SIGTERM, SIGINT, SIGALRM, SIGCHLD blocked), as a worker's and so a
		 * cold init's: a group's SIGTERM ends no run before its reply */
		(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != self)
			_exit(1);
		if (sv[1] == WARM_ZYGOTE_FD)
			(void)fcntl(sv[1], F_SETFD, 0);
		else if (dup2(sv[1], WARM_ZYGOTE_FD) < 0)
			_exit(127);
		execve("/proc/self/exe", argv, zygote_envp);
		_exit(127);
	}
	close(sv[1]);
	if (pid < 0) {
		log_msg(LOG_ERROR, "fork() failed while starting the zygote: %s", strerror(errno));
		close(sv[0]);
		return NULL;
	}
	z = warm_proc_add(WARM_STARTING, pid); /* a free record: checked above */
	z->sock = sv[0];
	fds[WARM_FD_LIGHT] = tier_sock[0][1];
	fds[WARM_FD_HEAVY] = tier_sock[1][1];
	fds[WARM_FD_ETC] = warm_etc_fd;
	fds[WARM_FD_INIT] = warm_init_fd;
	if (util_send_fds(z->sock, &warm_config, sizeof(warm_config), fds,
	                  WARM_FD_COUNT - (warm_init_fd >= 0 ? 0 : 1), 0) < 0) {
		log_msg(LOG_ERROR, "sending the zygote its configuration failed: %s",
		        strerror(errno));
		zygote_kill(z); /* reaped by the pool's loop (warm_pool_reaped) */
		return NULL;
	}
	return z;
}

/* Reads z's ready report (its socket is readable). Returns 1 ready (its tiers in *tiers), 0
 * failed (why logged). */
static int
zygote_read_ready(const struct warm_proc *z, bool *retry, unsigned *tiers)
{
	struct warm_ready ready = {0};
	ssize_t r = read(z->sock, &ready, sizeof(ready));
	int err = r < 0 ? errno : 0;

	*retry = false;
	*tiers = ready.tiers;
	if (r == (ssize_t)sizeof(ready) && ready.ok) {
		if (warm_state != NULL)
			__atomic_store_n(&warm_state->one_copy, ready.one_copy != 0,
			                 __ATOMIC_RELEASE);
		return 1;
	}
	ready.why[sizeof(ready.why) - 1] = '\0';
	/* killed before it was ready (the OOM killer, an operator): that says nothing of the
	 * modules, so it may be started again */
	*retry = r == 0 || err == ECONNRESET;
	log_msg(*retry ? LOG_WARN : LOG_ERROR, "a zygote (pid %d) failed: %s", (int)z->pid,
	        ready.why[0] ? ready.why : "it died before it was ready");
	return 0;
}

/*
 * Templates whose zygote died (killed, crashed, or retired by a SIGKILL) serve on, orphans:
 * the pool adopts them (it is a child subreaper), and ends each once a zygote serves its tier
 * again, so that no run waits cold for a zygote's start. Found by name among the pool's
 * children when a zygote is reaped; at most WARM_ORPHAN_MS each (template.c). This adopts
 * those that are not known yet.
 */
static void
orphans_find(void)
{
	pid_t kids[256];
	int n = proc_children_of(0, kids, 256), orphans = 0;

	for (int i = 0; i < WARM_MAX_PROCS; i++)
		orphans +=
		    warm_procs[i].role == WARM_ORPHAN || warm_procs[i].role == WARM_ORPHAN_KILLED;
	for (int c = 0; c < n; c++) {
		char path[64], comm[32];
		ssize_t len;
		unsigned tier;
		struct warm_proc *o;

		snprintf(path, sizeof(path), "/proc/%d/comm", (int)kids[c]);
		len = util_read_small(path, comm, sizeof(comm));
		if (len <= 0)
			continue;
		if (strcmp(comm, "codebox-warm\n") == 0)
			tier = WARM_TIER_LIGHT;
		else if (strcmp(comm, "codebox-heavy\n") == 0)
			tier = WARM_TIER_HEAVY;
		else
			continue;
		o = warm_proc_of(kids[c]);
		if (o != NULL)
			continue; /* known */
		o = orphans < WARM_MAX_ORPHANS ? warm_proc_add(WARM_ORPHAN, kids[c]) : NULL;
		if (o == NULL) {
			proc_kill(kids[c], SIGKILL, "an orphaned template (too many)");
			continue;
		}
		orphans++;
		o->tiers = tier;
		log_msg(LOG_INFO, "the %s template (pid %d) of a zygote that died serves on",
		        tier == WARM_TIER_HEAVY ? "heavy" : "light", (int)kids[c]);
	}
}

/* Ends the orphans of the tiers the serving zygote covers; what serves is the union. */
static void
orphans_settle(void)
{
	unsigned covered = zygote_tiers(), tiers = covered;

	for (int i = 0; i < WARM_MAX_PROCS; i++) {
		struct warm_proc *o = &warm_procs[i];
		if (o->role != WARM_ORPHAN)
			continue;
		if (covered & o->tiers) {
			proc_kill(o->pid, SIGKILL, "an orphaned template");
			o->role = WARM_ORPHAN_KILLED; /* reaped by the pool's loop */
			continue;
		}
		tiers |= o->tiers;
	}
	warm_set_serving(tiers);
}

/* The settings the zygote is sent (warm_config), its files, the shared word and the tiers'
 * sockets: 0 or -1. */
static int
warm_pool_prepare(const struct warm_settings *s, const char *python, const struct seccomp_filter *f,
                  int etc_fd, int init_fd)
{
	warm_settings = *s;
	memset(&warm_config, 0, sizeof(warm_config));
	warm_config.magic = WARM_CONFIG_MAGIC;
	warm_config.settings = *s;
	if (strlen(python) >= sizeof(warm_config.python)) {
		log_msg(LOG_ERROR, "warm interpreters: the interpreter's path is too long");
		return -1;
	}
	memcpy(warm_config.python, python, strlen(python) + 1);
	if (f != NULL && f->prog.filter != NULL) {
		if (f->prog.len > WARM_SECCOMP_MAX) {
			log_msg(LOG_ERROR, "warm interpreters: the seccomp filter is too long");
			return -1;
		}
		warm_config.seccomp_len = f->prog.len;
		warm_config.seccomp_denies_unix = f->denies_unix;
		memcpy(warm_config.seccomp, f->prog.filter,
		       sizeof(struct sock_filter) * f->prog.len);
	}
	warm_etc_fd = etc_fd;
	/* whether it runs here, and keeps what init needs, the zygote tries (zygote.c) */
	if (s->one_copy)
		warm_init_fd = init_fd;
	else if (init_fd >= 0)
		close(init_fd);
	warm_config.has_init = warm_init_fd >= 0;
	if (warm_init_fd < 0)
		log_msg(LOG_WARN, "warm runs start with two copies of the interpreter: %s",
		        s->one_copy ? "codebox-init is not beside codebox-pool"
		                    : "CODEBOX_WARM_ONE_COPY=0");
	warm_state = util_map_shared(NULL, sizeof(*warm_state));
	if (warm_state == NULL) {
		log_msg(LOG_ERROR, "warm interpreters: mmap() failed: %s", strerror(errno));
		return -1;
	}
	for (int i = 0; i < 2; i++)
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, tier_sock[i]) < 0) {
			log_msg(LOG_ERROR, "socketpair() for the warm tiers failed: %s",
			        strerror(errno));
			return -1;
		}
	return 0;
}

int
warm_pool_start(const struct warm_settings *s, const char *python, const struct seccomp_filter *f,
                int etc_fd, int init_fd)
{
	struct warm_proc *z;
	unsigned tiers = 0;

	/* whatever fails below, warm_pool_check() starts nothing: the pool is cold for good */
	zy_failed = true;
	if (warm_pool_prepare(s, python, f, etc_fd, init_fd) < 0)
		return -1;
	for (int attempt = 0;; attempt++) {
		bool retry = false;

		z = zygote_spawn();
		if (z == NULL)
			return -1;
		if (util_wait_readable(z->sock, WARM_ZYGOTE_READY_MS) == 1 &&
		    zygote_read_ready(z, &retry, &tiers) == 1)
			break;
		if (!retry)
			log_msg(LOG_ERROR, "warm interpreters are unavailable, runs are cold");
		zygote_kill(z);
		if (attempt > 0 || !retry)
			return -1;
		log_msg(LOG_WARN, "the zygote died while it imported: starting another");
	}
	z->role = WARM_SERVING;
	z->tiers = tiers;
	zy_failed = false;
	warm_set_serving(tiers);
	return 0;
}

void
warm_pool_poll_fds(struct pollfd *pfd, int *n)
{
	const struct warm_proc *z;

	if ((z = warm_proc_role(WARM_SERVING)) != NULL && z->sock >= 0)
		pfd[(*n)++] = (struct pollfd){.fd = z->sock, .events = POLLIN};
	if ((z = warm_proc_role(WARM_STARTING)) != NULL && z->sock >= 0)
		pfd[(*n)++] = (struct pollfd){.fd = z->sock, .events = POLLIN};
}

/* The starting zygote z said it is ready, or failed: it serves from now on (the one it
 * succeeds retires, and ends once its templates have), or is killed. */
static void
zygote_started(struct warm_proc *z)
{
	struct warm_proc *cur = warm_proc_role(WARM_SERVING), *old;
	bool retry;
	unsigned tiers;

	if (zygote_read_ready(z, &retry, &tiers) == 1) {
		log_msg(LOG_INFO, "a new zygote serves (pid %d)", (int)z->pid);
		if (cur != NULL) {
			if ((old = warm_proc_role(WARM_RETIRED)) != NULL)
				zygote_kill(old);
			util_close_fd(&cur->sock);
			cur->role = WARM_RETIRED;
			cur->tiers = 0;
		}
		z->role = WARM_SERVING;
		z->tiers = tiers;
		zy_backoff_ms = 1000;
		orphans_settle();
		return;
	}
	zygote_kill(z);
	if (retry) {
		zy_backoff_ms = zy_backoff_ms * 2 > 60000 ? 60000 : zy_backoff_ms * 2;
	} else {
		/* the serving one (if any) serves on; none is started again */
		log_msg(LOG_ERROR, "no further zygote will be started: runs are cold once the "
		                   "serving one ends");
		zy_failed = true;
	}
}

/* Reads what the serving zygote z says after its ready report: which tiers serve; EOF: it
 * is gone. */
static void
zygote_heard(struct warm_proc *z)
{
	struct pollfd p = {.fd = z->sock, .events = POLLIN};
	struct warm_ready note;
	ssize_t r;

	while (poll(&p, 1, 0) == 1) {
		r = read(z->sock, &note, sizeof(note));
		if (r == (ssize_t)sizeof(note)) {
			log_msg(LOG_INFO, "the zygote's tiers now serving: light %s, heavy %s",
			        note.tiers & WARM_TIER_LIGHT ? "yes" : "no",
			        note.tiers & WARM_TIER_HEAVY ? "yes" : "no");
			z->tiers = note.tiers;
			orphans_settle();
			continue;
		}
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			break;
		z->tiers = 0;
		orphans_settle();
		util_close_fd(&z->sock);
		break;
	}
}

void
warm_pool_check(void)
{
	long long now = util_now_ms();
	struct warm_proc *next = warm_proc_role(WARM_STARTING), *cur;

	if (warm_state == NULL || zy_failed)
		return; /* never started, or cannot: the pool is cold */
	if (next != NULL && next->sock >= 0) {
		struct pollfd p = {.fd = next->sock, .events = POLLIN};
		if (poll(&p, 1, 0) == 1) {
			zygote_started(next);
		} else if (now - next->started_ms >= WARM_ZYGOTE_READY_MS) {
			log_msg(LOG_ERROR, "a new zygote was not ready within %d s: killed",
			        WARM_ZYGOTE_READY_MS / 1000);
			zygote_kill(next);
			zy_backoff_ms = 60000;
		}
	}
	cur = warm_proc_role(WARM_SERVING);
	if (cur != NULL && cur->sock >= 0)
		zygote_heard(cur);
	if (!zy_failed && warm_proc_role(WARM_STARTING) == NULL &&
	    now - zy_last_start_ms >= zy_backoff_ms &&
	    (cur == NULL || cur->sock < 0 ||
	     now - cur->started_ms >= (long long)warm_settings.max_seconds * 1000)) {
		bool renewal = cur != NULL && cur->sock >= 0;

		log_msg(LOG_INFO, "starting a new zygote (%s)",
		        renewal ? "the serving one's life is up" : "none serves");
		metrics_zygote_started(renewal);
		if (zygote_spawn() == NULL)
			zy_backoff_ms = 60000;
	}
}

bool
warm_pool_reaped(pid_t pid, int status)
{
	struct warm_proc *p = pid > 0 ? warm_proc_of(pid) : NULL;

	if (p == NULL)
		return false;
	switch (p->role) {
	case WARM_ORPHAN:
		log_msg(LOG_INFO, "an orphaned template (pid %d) ended", (int)pid);
		/* fall through */
	case WARM_ORPHAN_KILLED:
		warm_proc_forget(p);
		orphans_settle();
		return true;
	case WARM_RETIRED:
		log_msg(LOG_INFO, "the retired zygote (pid %d) ended", (int)pid);
		break;
	case WARM_STARTING:
	case WARM_SERVING:
		if (WIFSIGNALED(status))
			log_msg(LOG_WARN, "a zygote (pid %d) was killed by signal %d", (int)pid,
			        WTERMSIG(status));
		else
			log_msg(LOG_WARN, "a zygote (pid %d) exited with status %d", (int)pid,
			        WEXITSTATUS(status));
		break;
	case WARM_KILLED:
	case WARM_FREE:
		break;
	}
	warm_proc_forget(p);
	/* its templates are the pool's children now: they serve on */
	orphans_find();
	orphans_settle();
	return true;
}

void
warm_pool_stop(void)
{
	for (int i = 0; i < WARM_MAX_PROCS; i++) {
		struct warm_proc *p = &warm_procs[i];
		if (p->role == WARM_ORPHAN) {
			proc_kill(p->pid, SIGKILL, "an orphaned template");
			p->role = WARM_ORPHAN_KILLED;
		} else if (p->role == WARM_STARTING || p->role == WARM_SERVING ||
		           p->role == WARM_RETIRED) {
			zygote_kill(p);
		}
	}
	warm_set_serving(0);
}

/* ---- the worker's side ---- */

/* when each tier last failed a worker: it is not asked again for a second */
static long long tier_failed_ms[2] = {-1000000, -1000000};

void
warm_worker_init(void)
{
	for (int i = 0; i < WARM_MAX_PROCS; i++)
		util_close_fd(&warm_procs[i].sock);
	util_close_fd(&tier_sock[0][1]);
	util_close_fd(&tier_sock[1][1]);
}

bool
warm_serving(void)
{
	return warm_state != NULL && __atomic_load_n(&warm_state->tiers, __ATOMIC_ACQUIRE) != 0;
}

bool
warm_one_copy(void)
{
	return warm_state != NULL && __atomic_load_n(&warm_state->one_copy, __ATOMIC_ACQUIRE) != 0;
}

/* Whether the serving zygote's template of that tier serves now. */
static bool
warm_tier_serving(bool heavy)
{
	unsigned t = warm_state != NULL ? __atomic_load_n(&warm_state->tiers, __ATOMIC_ACQUIRE) : 0;

	return (t & (heavy ? WARM_TIER_HEAVY : WARM_TIER_LIGHT)) != 0;
}

pid_t
warm_box_clone(const struct run_config *run, bool heavy, int session_fd, const char *workdir,
               unsigned long long disk_bytes, const int fds[5], long long deadline,
               unsigned long long *as_base_bytes, int *pidfd, char *why, size_t why_len)
{
	static struct warm_box_request b;
	struct warm_box_answer a = {0};
	int tier = heavy ? 1 : 0, sock = tier_sock[tier][0];
	int rp[2], all[WARM_BOX_FDS], n, sent = -1;

	*as_base_bytes = 0;
	*pidfd = -1;
	if (!warm_serving() || sock < 0) {
		snprintf(why, why_len, "no zygote serves");
		return -1;
	}
	if (!warm_tier_serving(heavy)) {
		snprintf(why, why_len, "no %s template serves", heavy ? "heavy" : "light");
		return -1;
	}
	if (util_now_ms() - tier_failed_ms[tier] < 1000) {
		snprintf(why, why_len, "the %s tier failed within the last second",
		         heavy ? "heavy" : "light");
		return -1;
	}
	if (strlen(workdir) >= sizeof(b.workdir)) {
		snprintf(why, why_len, "the run's path is too long");
		return -1;
	}
	memset(&b, 0, sizeof(b));
	b = (struct warm_box_request){
	    .magic = WARM_BOX_MAGIC,
	    .run = run->set,
	    .seccomp = run->seccomp != NULL,
	    .landlock_fd = run->landlock_fd >= 0,
	    .workspace = run->workspace_fd >= 0,
	    .session = session_fd >= 0 && run->workspace_fd < 0,
	    .disk_bytes = disk_bytes,
	};
	memcpy(b.workdir, workdir, strlen(workdir) + 1);
	/* the answer comes on a socket of this request's own: a late one cannot be taken for
	 * the next, and the template's end closing means it is gone */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rp) < 0) {
		snprintf(why, why_len, "socketpair(): %s", strerror(errno));
		return -1;
	}
	for (int i = 0; i < 5; i++)
		all[i] = fds[i];
	all[WARM_BOX_FD_ANSWER] = rp[1];
	n = WARM_BOX_FD_LANDLOCK;
	if (run->landlock_fd >= 0)
		all[n++] = run->landlock_fd;
	if (run->workspace_fd >= 0)
		all[n++] = run->workspace_fd;
	else if (session_fd >= 0)
		all[n++] = session_fd;
	/* the socket is shared by every worker: never block in sendmsg(), one deadline for all */
	while ((sent = util_send_fds(sock, &b, sizeof(b), all, n, MSG_DONTWAIT)) < 0 &&
	       (errno == EAGAIN || errno == EINTR) && util_now_ms() < deadline) {
		struct pollfd out = {.fd = sock, .events = POLLOUT};
		long long left = deadline - util_now_ms();
		(void)poll(&out, 1, left > 0 ? (int)left : 0);
	}
	if (sent < 0) {
		snprintf(why, why_len, "sending to the %s template: %s", heavy ? "heavy" : "light",
		         errno == EAGAIN ? "it takes no requests" : strerror(errno));
		close(rp[0]);
		close(rp[1]);
		goto failed;
	}
	close(rp[1]);
	{
		long long left = deadline - util_now_ms();
		n = util_wait_readable(rp[0], left > 0 ? left : 0) == 1
		        ? util_recv_fds(rp[0], &a, sizeof(a), pidfd, 1, 0)
		        : -1;
	}
	/* closing our end tells a template that has not taken the request yet to skip it */
	close(rp[0]);
	if (n != 1 || a.pid <= 0) {
		if (n >= 1)
			close(*pidfd);
		*pidfd = -1;
		snprintf(why, why_len, "the %s template %s", heavy ? "heavy" : "light",
		         n < 0 ? "did not answer" : "could not clone the run");
		goto failed;
	}
	*as_base_bytes = a.as_bytes;
	return (pid_t)a.pid;
failed:
	tier_failed_ms[tier] = util_now_ms();
	return -1;
}
