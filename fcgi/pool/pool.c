/*
 * pool.c - the prefork pool.
 *
 * One supervisor forks N workers that all accept on one socket. It waits for events with
 * ppoll(), which unblocks SIGCHLD, SIGTERM, SIGINT and SIGALRM only while it waits (they are
 * blocked everywhere else), so no SIGCHLD is ever lost between a check and the wait. A worker that
 * dies is logged with its exit status or signal and respawned at once; one that dies within a
 * second of its start is respawned after a second (SIGALRM), so a worker that cannot start does not
 * spin.
 *
 * Execution slots: the supervisor creates the shared table of slots (slots.c) before the first
 * fork. When it reaps a worker that died holding a slot (killed mid-run), it gives the slot
 * back before the replacement starts, so a crash never shrinks capacity.
 *
 * Warm interpreters: the supervisor execs the zygote (warm.c) before the first worker and
 * keeps it: its ready report and death come through ppoll() and SIGCHLD like everything else,
 * and a successor is started when its life is up, without ever waiting for one to import.
 *
 * Shutdown: SIGTERM or SIGINT first removes the socket's path, so nothing new can connect
 * (nginx answers its own JSON 502), then is forwarded to every worker; idle ones answer what
 * is left in the socket's backlog with 503 and exit, busy ones after answering their run.
 * After drain_seconds the rest are SIGKILLed; a second SIGTERM or SIGINT does that at once.
 * Draining sessions first: SIGUSR1 (a pod's preStop, before its SIGTERM) marks the sessions
 * directory (session_drain_begin()): from then on the workers make no new session (429,
 * Codebox-Busy: draining, which the fleet's router retries on another pod) and serve
 * everything else, the open sessions' calls included, until the stop signal.
 * The supervisor is a child subreaper too, so runs orphaned by a killed worker are swept
 * before it exits. It is also the parent of the background executions' watchers (sessionexec.c),
 * which it reaps as they end, and which die with it.
 */
#include "pool/pool.h"

#include "core/metrics.h"

#include "core/log.h"
#include "core/proc.h"
#include "run/session.h"
#include "core/slots.h"
#include "core/util.h"
#include "warm/warm.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static volatile sig_atomic_t pool_got_chld, pool_got_term, pool_got_alrm, pool_got_usr1;
static volatile sig_atomic_t pool_term_count;

static void
pool_on_signal(int sig)
{
	if (sig == SIGCHLD)
		pool_got_chld = 1;
	else if (sig == SIGALRM)
		pool_got_alrm = 1;
	else if (sig == SIGUSR1)
		pool_got_usr1 = 1;
	else {
		pool_got_term = 1;
		pool_term_count++;
	}
}

struct pool_worker {
	pid_t pid; /* 0 when not running */
	long long started_ms;
	bool respawn_pending;
};

/* the supervisor: a worker whose parent is not this pid was orphaned before it started */
static pid_t pool_supervisor_pid;

/* The new worker's side, in a fork of the supervisor. */
static noreturn void
pool_worker_child(void *ctx, int index)
{
	const struct pool_config *pc = ctx;
	struct worker_config wc = pc->worker;
	struct sigaction dfl = {.sa_handler = SIG_DFL};

	sigaction(SIGCHLD, &dfl, NULL);
	sigaction(SIGALRM, &dfl, NULL);
	sigaction(SIGUSR1, &dfl, NULL); /* blocked: the supervisor's signal alone */
	warm_worker_init();
	/* the worker dies with the pool rather than serving on alone */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	/* the pool died before the signal was armed (not "the parent is pid 1": in a container
	 * the pool itself is pid 1) */
	if (getppid() != pool_supervisor_pid)
		_exit(1);
	/* its own copy of the snapshot key, which its children (a cold run's init) see zeroed */
	if (snapshot_key_adopt(&wc.snapshot_key) < 0)
		log_msg(LOG_WARN, "worker %d: the snapshot key's own page failed: %s", index,
		        strerror(errno));
	wc.index = index;
	wc.run.drop_privileges = pc->drop_privileges;
	wc.run.run_uid = pc->run_uid_base + (uid_t)index;
	wc.run.run_gid = (gid_t)(pc->run_uid_base + (uid_t)index);
	worker_main(&wc);
}

static pid_t
pool_spawn(struct pool_config *pc, struct pool_worker *worker, int index)
{
	pid_t pid = fork();

	if (pid < 0) {
		log_msg(LOG_ERROR, "fork() failed while starting worker %d: %s", index,
		        strerror(errno));
		return -1;
	}
	if (pid == 0)
		pool_worker_child(pc, index);
	worker->pid = pid;
	worker->started_ms = util_now_ms();
	worker->respawn_pending = false;
	return pid;
}

static void
pool_log_exit(int index, pid_t pid, int status, bool stopping)
{
	if (WIFEXITED(status))
		log_msg(stopping && WEXITSTATUS(status) == 0 ? LOG_INFO : LOG_ERROR,
		        "worker %d (pid %d) exited with status %d", index, (int)pid,
		        WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		log_msg(stopping ? LOG_INFO : LOG_ERROR,
		        "worker %d (pid %d) was killed by signal %d%s", index, (int)pid,
		        WTERMSIG(status), WCOREDUMP(status) ? " (core dumped)" : "");
}

/* The supervisor's loop state: its workers and where their shutdown stands. */
struct pool_loop {
	struct pool_config *pc;
	struct pool_worker *workers;
	int alive;
	bool stopping;
	long long kill_at; /* when workers still draining are killed */
};

/* The first stop signal: nothing new connects, the zygote ends, the workers drain. */
static void
pool_begin_stop(struct pool_loop *pl)
{
	struct pool_config *pc = pl->pc;

	pl->stopping = true;
	/* nothing new connects; what is already queued is answered */
	if (pc->socket_path != NULL && unlink(pc->socket_path) < 0 && errno != ENOENT)
		log_msg(LOG_WARN, "unlink(%s) failed: %s", pc->socket_path, strerror(errno));
	log_msg(LOG_INFO, "shutting down: draining %d workers (at most %d s)", pl->alive,
	        pc->drain_seconds);
	warm_pool_stop();
	for (int i = 0; i < pc->workers; i++)
		if (pl->workers[i].pid > 0)
			proc_kill(pl->workers[i].pid, SIGTERM, "a worker");
	pl->kill_at = util_now_ms() + pc->drain_seconds * 1000LL;
	alarm((unsigned)pc->drain_seconds + 1);
}

/* Reaps what ended: a warm process, a worker (respawned unless stopping: at once, or a second
 * later if it died within a second of its start), or an orphaned run. */
static void
pool_reap(struct pool_loop *pl)
{
	struct pool_config *pc = pl->pc;
	struct pool_worker *workers = pl->workers;
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		if (warm_pool_reaped(pid, status))
			continue;
		for (int i = 0; i < pc->workers; i++) {
			if (workers[i].pid != pid)
				continue;
			pool_log_exit(i, pid, status, pl->stopping);
			metrics_worker_exited(i, !pl->stopping);
			if (slots_reconcile(pc->worker.slots, i))
				log_msg(
				    LOG_WARN,
				    "worker %d died holding an execution slot; the slot is free "
				    "again",
				    i);
			(void)slots_reconcile(pc->worker.streams, i);
			workers[i].pid = 0;
			pl->alive--;
			if (pl->stopping)
				break;
			if (util_now_ms() - workers[i].started_ms < 1000) {
				workers[i].respawn_pending = true;
				alarm(1);
			} else if (pool_spawn(pc, &workers[i], i) > 0) {
				pl->alive++;
			}
			break;
		}
		/* anything else is an orphaned run, or a background execution's watcher (a
		 * worker's copy made the supervisor's child, sessionexec.c), reaped here */
	}
}

/* The alarm: workers past the drain are killed; those whose respawn waited are started. */
static void
pool_on_alarm(struct pool_loop *pl)
{
	struct pool_config *pc = pl->pc;

	if (pl->stopping && util_now_ms() >= pl->kill_at - 1000) {
		for (int i = 0; i < pc->workers; i++)
			if (pl->workers[i].pid > 0) {
				log_msg(LOG_WARN,
				        "worker %d did not finish within %d s; killing it", i,
				        pc->drain_seconds);
				proc_kill(pl->workers[i].pid, SIGKILL, "a worker past the drain");
			}
	}
	for (int i = 0; !pl->stopping && i < pc->workers; i++)
		if (pl->workers[i].respawn_pending && pool_spawn(pc, &pl->workers[i], i) > 0)
			pl->alive++;
}

/* what the workers share, made before they are forked: the execution slots and the streams' */
static int
pool_shared_create(struct pool_config *pc)
{
	pc->worker.slots = slots_create(
	    "codebox-slots", (int)pc->worker.ceilings->max_concurrent_executions, pc->workers);
	/* a stream holds its worker, not an execution slot: at most one each (the bound is the
	 * request's CODEBOX_MAX_STREAMS, for which the pool has workers of its own) */
	pc->worker.streams = slots_create("codebox-streams", pc->workers, pc->workers);
	if (pc->worker.slots == NULL || pc->worker.streams == NULL) {
		log_msg(LOG_ERROR, "creating the shared execution slots failed: %s",
		        strerror(errno));
		slots_destroy(pc->worker.slots);
		slots_destroy(pc->worker.streams);
		pc->worker.slots = pc->worker.streams = NULL;
		return -1;
	}
	return 0;
}

/* the supervisor's signals: each sets a flag that the loop reads; *waitmask is the mask the
 * loop waits under (those five let through) */
static void
pool_signals(sigset_t *waitmask)
{
	static const int sigs[] = {SIGCHLD, SIGTERM, SIGINT, SIGALRM, SIGUSR1};
	struct sigaction sa = {.sa_handler = pool_on_signal};

	sigemptyset(&sa.sa_mask);
	sigprocmask(SIG_SETMASK, NULL, waitmask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		sigaction(sigs[i], &sa, NULL);
		sigdelset(waitmask, sigs[i]);
	}
}

int
pool_run(struct pool_config *pc)
{
	struct pool_loop pl = {.pc = pc,
	                       .workers = calloc((size_t)pc->workers, sizeof(*pl.workers))};
	sigset_t waitmask;

	pool_supervisor_pid = getpid();

	if (pl.workers == NULL) {
		log_msg(LOG_ERROR, "out of memory");
		return -1;
	}
	if (pool_shared_create(pc) < 0) {
		free(pl.workers);
		return -1;
	}
	/* before the handlers and the workers: the zygote is exec'd, and workers are forked with
	 * their end of its tiers' sockets */
	if (pc->warm.enabled &&
	    warm_pool_start(&pc->warm, pc->worker.run.python, pc->worker.run.seccomp,
	                    pc->worker.run.etc_fd, pc->init_fd) == 0)
		log_msg(LOG_INFO, "warm interpreters: the zygote is ready");
	pool_signals(&waitmask);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
		log_msg(LOG_WARN, "prctl(PR_SET_CHILD_SUBREAPER) failed: %s", strerror(errno));

	for (int i = 0; i < pc->workers; i++)
		if (pool_spawn(pc, &pl.workers[i], i) > 0)
			pl.alive++;
	log_msg(LOG_INFO, "pool started %d workers", pl.alive);

	for (;;) {
		if (pool_got_term && pl.stopping && pool_term_count > 1 &&
		    pl.kill_at > util_now_ms()) {
			log_msg(LOG_WARN, "a second stop signal: killing the workers now");
			pl.kill_at = util_now_ms();
			pool_got_alrm = 1;
		}
		if (pool_got_term && !pl.stopping)
			pool_begin_stop(&pl);
		if (pool_got_chld) {
			pool_got_chld = 0;
			pool_reap(&pl);
		}
		if (pool_got_alrm) {
			pool_got_alrm = 0;
			pool_on_alarm(&pl);
		}
		if (pool_got_usr1) {
			pool_got_usr1 = 0;
			if (pc->worker.sessions_fd >= 0 &&
			    session_drain_begin(pc->worker.sessions_fd) == 0)
				log_msg(LOG_INFO, "draining: no new session; the open ones are "
				                  "served until the pool stops");
		}
		if (pl.stopping && pl.alive == 0)
			break;
		if (pl.stopping)
			pool_got_term = 0; /* seen; a further one counts as the second */
		if (!pl.stopping)
			warm_pool_check();
		if (!pool_got_chld && !pool_got_alrm && !pool_got_term && !pool_got_usr1) {
			/* ppoll() takes the signals as sigsuspend() would, and hears the zygotes;
			 * a second at most, for the zygote's age */
			struct pollfd pfd[2];
			struct timespec tick = {1, 0};
			int n = 0;

			if (!pl.stopping)
				warm_pool_poll_fds(pfd, &n);
			(void)ppoll(pfd, (nfds_t)n, pc->warm.enabled && !pl.stopping ? &tick : NULL,
			            &waitmask);
		}
	}
	/* every request is answered: the sessions end now (their inits are the templates'
	 * children, or orphans of theirs adopted here) */
	session_close_all(pc->worker.sessions_fd);
	/* runs orphaned by killed workers were reparented here: leave nothing behind */
	bool unused = false;
	int st;
	struct rusage ru;
	proc_kill_all_children(0, -1, &unused, &st, &ru, util_now_ms() + 3000);
	free(pl.workers);
	slots_destroy(pc->worker.slots);
	slots_destroy(pc->worker.streams);
	pc->worker.slots = NULL;
	log_msg(LOG_INFO, "pool stopped");
	return 0;
}
