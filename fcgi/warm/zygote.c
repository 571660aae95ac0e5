/*
 * zygote.c - the warm interpreters' root: the one process that holds the interpreter as it
 * was after the imports, and forks every template from it (docs/DESIGN.md, "Warm
 * interpreters" and "The trust boundary").
 *
 * It is the pool's binary exec'd again (warm.c), not a fork of the supervisor, and is given
 * over its socket only what runs need: the warm settings, the interpreter's path, the seccomp
 * filter, the sandbox's /etc as a directory fd, and the serving end of each tier's socket.
 * It forks the heavy template (which imports the heavy tier's modules) before its heap is
 * collapsed into huge pages, then the light one (its interpreter as it is), and reports ready.
 * tier_check() keeps each tier's serving template, its successor and the retired one, and
 * says what happens when one dies. The supervisor closing the zygote's socket retires it
 * (zygote_retire()).
 */
#include "warm/zygote.h"

#include "warm/interp.h"
#include "core/log.h"
#include "core/proc.h"
#include "box/initexec.h"
#include "warm/template.h"
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

/* How long retired templates may take to end before they are killed. */
#define ZYGOTE_RETIRE_MS 10000

struct tmpl {
	pid_t pid;     /* -1: none */
	int pidfd;     /* readable when it ends */
	int note_fd;   /* its notices: the ready report, then 'R' when its life is up */
	int retire_fd; /* closed by the zygote: the template ends between two requests */
	long long started_ms;
	bool retiring; /* it said 'R': a successor is forked, and it serves until that is ready */
};
#define TMPL_NONE ((struct tmpl){.pid = -1, .pidfd = -1, .note_fd = -1, .retire_fd = -1})

struct tier {
	bool heavy;
	int serve_fd; /* -1: the tier is off */
	struct tmpl cur, next, old;
	long long last_fork_ms;
	long long backoff_ms; /* between forks of one that keeps dying before it is ready */
	bool replace_now;
};

static struct tier zygote_tiers[2];
static struct template_base zygote_base;

static const char *
tier_name(const struct tier *t)
{
	return t->heavy ? "heavy template" : "light template";
}

/*
 * Retires a template: a word on its retire pipe, then the pipe closed. It ends between two
 * requests. (The pipe's end without the word means the zygote died: the template serves on,
 * an orphan, until the pool's next zygote serves its tier; template.c.)
 */
static void
tmpl_retire(struct tmpl *h)
{
	if (h->retire_fd >= 0 && write(h->retire_fd, "X", 1) != 1)
		log_msg(LOG_WARN, "telling a %s to retire failed: %s",
		        h->pid > 0 ? "template" : "?", strerror(errno));
	util_close_fd(&h->retire_fd);
}

static void
tmpl_close(struct tmpl *h)
{
	util_close_fd(&h->pidfd);
	util_close_fd(&h->note_fd);
	util_close_fd(&h->retire_fd);
	*h = TMPL_NONE;
}

/* Kills and reaps a template (it ends at once: SIGKILL). */
static void
tmpl_kill(struct tmpl *h)
{
	if (h->pid > 0) {
		proc_kill(h->pid, SIGKILL, "a template");
		while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	tmpl_close(h);
}

/* Forks a template of tier t into h. Returns 0, or -1 (logged). */
static int
tier_fork(struct tier *t, struct tmpl *h)
{
	int np[2], rp[2];
	pid_t pid, self = getpid();

	if (pipe2(np, O_CLOEXEC) < 0) {
		log_msg(LOG_ERROR, "pipe2() for a template failed: %s", strerror(errno));
		return -1;
	}
	if (pipe2(rp, O_CLOEXEC) < 0) {
		log_msg(LOG_ERROR, "pipe2() for a template failed: %s", strerror(errno));
		close(np[0]);
		close(np[1]);
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		struct template_args a = {.heavy = t->heavy,
		                          .serve_fd = t->serve_fd,
		                          .note_fd = np[1],
		                          .retire_fd = rp[0],
		                          .zygote = self};
		template_main(&zygote_base, &a);
	}
	close(np[1]);
	close(rp[0]);
	if (pid < 0) {
		log_msg(LOG_ERROR, "fork() of the %s failed: %s", tier_name(t), strerror(errno));
		close(np[0]);
		close(rp[1]);
		return -1;
	}
	*h = (struct tmpl){.pid = pid,
	                   .pidfd = (int)syscall(SYS_pidfd_open, pid, 0),
	                   .note_fd = np[0],
	                   .retire_fd = rp[1],
	                   .started_ms = util_now_ms()};
	return 0;
}

/* The tier is off (logged by the caller): its runs are cold. */
static void
tier_off(struct tier *t)
{
	tmpl_kill(&t->next);
	tmpl_kill(&t->cur);
	tmpl_kill(&t->old);
	util_close_fd(&t->serve_fd);
}

/* Forks the tier's first template and waits (bounded) until it is ready. */
static void
tier_start(struct tier *t, long long wait_ms)
{
	struct warm_ready ready = {0};

	if (tier_fork(t, &t->cur) < 0) {
		tier_off(t);
		return;
	}
	if (util_wait_readable(t->cur.note_fd, wait_ms) != 1 ||
	    read(t->cur.note_fd, &ready, sizeof(ready)) != (ssize_t)sizeof(ready) || !ready.ok) {
		ready.why[sizeof(ready.why) - 1] = '\0';
		log_msg(LOG_ERROR, "the %s failed (%s): its runs are cold", tier_name(t),
		        ready.why[0] ? ready.why : "it did not start in time");
		tier_off(t);
	}
}

/*
 * After every poll: reaps templates that ended; when the serving one's life is up (its 'R'),
 * forks its successor, which both serve until the successor is ready, then retires it;
 * replaces one that crashed or ended (after a second, doubling while they keep dying).
 */
static void
tier_check(struct tier *t)
{
	long long now = util_now_ms();
	int st;

	if (t->serve_fd < 0)
		return;
	if (t->old.pid > 0 && waitpid(t->old.pid, &st, WNOHANG) == t->old.pid)
		tmpl_close(&t->old);
	if (t->cur.pid > 0 && waitpid(t->cur.pid, &st, WNOHANG) == t->cur.pid) {
		/* it ended without being retired: it crashed, or its successor never came */
		t->replace_now = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		log_msg(t->replace_now ? LOG_INFO : LOG_WARN, "the %s ended (%s)", tier_name(t),
		        t->replace_now ? "its life is up" : "it crashed");
		tmpl_close(&t->cur);
	}
	if (t->cur.note_fd >= 0 && !t->cur.retiring) {
		char c;
		struct pollfd p = {.fd = t->cur.note_fd, .events = POLLIN};
		if (poll(&p, 1, 0) == 1) {
			if (read(t->cur.note_fd, &c, 1) == 1 && c == 'R')
				t->cur.retiring = true;
			else
				util_close_fd(
				    &t->cur.note_fd); /* it is ending: its pidfd says when */
		}
	}
	if (t->next.pid > 0) {
		struct warm_ready ready = {0};
		struct pollfd p = {.fd = t->next.note_fd, .events = POLLIN};

		if (poll(&p, 1, 0) == 1) {
			ssize_t r = read(t->next.note_fd, &ready, sizeof(ready));
			if (r != (ssize_t)sizeof(ready)) {
				/* it died before it was ready (killed, or it crashed): another one
				 * is forked, after a second, then two, four... (at most a minute)
				 */
				log_msg(LOG_WARN, "the next %s ended before it was ready",
				        tier_name(t));
				tmpl_kill(&t->next);
				t->backoff_ms =
				    t->backoff_ms * 2 > 60000 ? 60000 : t->backoff_ms * 2;
				return;
			}
			if (!ready.ok) {
				ready.why[sizeof(ready.why) - 1] = '\0';
				log_msg(LOG_ERROR, "the next %s failed (%s): its runs are cold",
				        tier_name(t), ready.why);
				tier_off(t);
				return;
			}
			/* it serves: the one it succeeds ends between two requests */
			if (t->cur.pid > 0) {
				tmpl_retire(&t->cur);
				if (t->old.pid > 0)
					tmpl_kill(&t->old);
				t->old = t->cur;
			}
			t->cur = t->next;
			t->next = TMPL_NONE;
			t->backoff_ms = 1000;
		} else if (now - t->next.started_ms >= WARM_ZYGOTE_READY_MS) {
			log_msg(LOG_ERROR,
			        "the next %s was not ready within %d s: killed; the serving one "
			        "retires",
			        tier_name(t), WARM_ZYGOTE_READY_MS / 1000);
			tmpl_kill(&t->next);
			if (t->cur.pid > 0)
				tmpl_retire(&t->cur);
			t->replace_now = true;
			return;
		}
	}
	if (t->next.pid < 0 &&
	    ((t->cur.pid > 0 && t->cur.retiring && t->cur.retire_fd >= 0 &&
	      now - t->last_fork_ms >= t->backoff_ms) ||
	     (t->cur.pid < 0 && (t->replace_now || now - t->last_fork_ms >= t->backoff_ms)))) {
		log_msg(LOG_INFO, "forking the next %s (%s)", tier_name(t),
		        t->cur.pid > 0 ? "the serving one's life is up" : "none serves");
		t->last_fork_ms = now;
		t->replace_now = false;
		(void)tier_fork(t, &t->next);
	}
}

/* What tier_check() waits for (pidfds and notices), appended to pfd (room for 6). */
static void
tier_poll_fds(const struct tier *t, struct pollfd *pfd, int *n)
{
	const struct tmpl *all[] = {&t->cur, &t->next, &t->old};

	for (int i = 0; i < 3; i++) {
		if (all[i]->pidfd >= 0)
			pfd[(*n)++] = (struct pollfd){.fd = all[i]->pidfd, .events = POLLIN};
		if (all[i]->note_fd >= 0 && all[i] != &t->old &&
		    !(all[i] == &t->cur && t->cur.retiring))
			pfd[(*n)++] = (struct pollfd){.fd = all[i]->note_fd, .events = POLLIN};
	}
}

/* The tiers whose template serves now (WARM_TIER_*). */
static unsigned
zygote_serving(void)
{
	unsigned t = 0;

	if (zygote_tiers[0].serve_fd >= 0 && zygote_tiers[0].cur.pid > 0)
		t |= WARM_TIER_LIGHT;
	if (zygote_tiers[1].serve_fd >= 0 && zygote_tiers[1].cur.pid > 0)
		t |= WARM_TIER_HEAVY;
	return t;
}

/* Retired by the supervisor: every template ends between two requests, then the zygote. */
static noreturn void
zygote_retire(void)
{
	long long deadline = util_now_ms() + ZYGOTE_RETIRE_MS;

	for (int i = 0; i < 2; i++) {
		struct tier *t = &zygote_tiers[i];
		tmpl_kill(&t->next); /* a successor still importing serves nothing yet */
		tmpl_retire(&t->cur);
		tmpl_retire(&t->old);
		util_close_fd(&t->serve_fd);
	}
	for (int i = 0; i < 2; i++) {
		struct tmpl *all[] = {&zygote_tiers[i].cur, &zygote_tiers[i].old};
		for (int k = 0; k < 2; k++) {
			struct tmpl *h = all[k];
			long long left = deadline - util_now_ms();
			if (h->pid <= 0)
				continue;
			if (h->pidfd < 0 || util_wait_readable(h->pidfd, left > 0 ? left : 0) != 1)
				log_msg(LOG_WARN, "a retired template did not end within %d s",
				        ZYGOTE_RETIRE_MS / 1000);
			tmpl_kill(h);
		}
	}
	log_msg(LOG_INFO, "retired");
	_exit(0);
}

/* Reads the configuration the supervisor sends first. Returns 0, or -1 with why. */
static int
zygote_configure(int sock, struct warm_zygote_config *cfg, int fds[WARM_FD_COUNT], char *why,
                 size_t why_len)
{
	static struct seccomp_filter filter;
	int n;

	if (util_wait_readable(sock, 10000) != 1) {
		snprintf(why, why_len, "no configuration from the supervisor");
		return -1;
	}
	n = util_recv_fds(sock, cfg, sizeof(*cfg), fds, WARM_FD_COUNT, 0);
	if (n != WARM_FD_COUNT - (cfg->has_init ? 0 : 1) || cfg->magic != WARM_CONFIG_MAGIC ||
	    memchr(cfg->python, '\0', sizeof(cfg->python)) == NULL ||
	    cfg->seccomp_len > WARM_SECCOMP_MAX || cfg->settings.n_modules > WARM_MAX_MODULES) {
		snprintf(why, why_len, "a malformed configuration (%d fds)", n);
		return -1;
	}
	filter.prog.len = (unsigned short)cfg->seccomp_len;
	filter.prog.filter = cfg->seccomp_len > 0 ? cfg->seccomp : NULL;
	filter.denies_unix = cfg->seccomp_denies_unix != 0;
	zygote_base = (struct template_base){.settings = &cfg->settings,
	                                     .python = cfg->python,
	                                     .seccomp = &filter,
	                                     .etc_fd = fds[WARM_FD_ETC],
	                                     .init_fd = cfg->has_init ? fds[WARM_FD_INIT] : -1};
	return 0;
}

/* The probe's stub: what a run's stub does before its exec, without a run. */
static int
zygote_probe_stub(void *arg)
{
	char *argv[] = {"codebox-init", "--check-caps", NULL}, *envp[] = {NULL};

	if (initexec_ambient_caps() < 0)
		_exit(1);
	(void)syscall(SYS_execveat, *(int *)arg, "", argv, envp, AT_EMPTY_PATH);
	_exit(127);
}

/*
 * Whether the one-copy start works here: a stub cloned as a run's is (sharing this memory, in
 * a user namespace whose root it is not) execs codebox-init and still holds the capabilities
 * init needs. A host that forbids executing a memfd (vm.memfd_noexec, an LSM) or ambient
 * capabilities (a locked SECBIT_NO_CAP_AMBIENT_RAISE) fails it. Returns true, or false with why.
 */
static bool
zygote_probe_one_copy(int init_fd, char *why, size_t why_len)
{
	static char stack[64 * 1024] __attribute__((aligned(16)));
	int fd = init_fd, st = -1, pidfd;
	pid_t pid;

	pid = clone(zygote_probe_stub, stack + sizeof(stack),
	            CLONE_VM | CLONE_VFORK | CLONE_NEWUSER | SIGCHLD, &fd);
	if (pid < 0 && errno == EPERM) /* no user namespace: a run's init is root, as this is */
		pid = clone(zygote_probe_stub, stack + sizeof(stack),
		            CLONE_VM | CLONE_VFORK | SIGCHLD, &fd);
	if (pid < 0) {
		snprintf(why, why_len, "clone(): %s", strerror(errno));
		return false;
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (pidfd < 0 || util_wait_readable(pidfd, 5000) != 1)
		(void)kill(pid, SIGKILL);
	if (pidfd >= 0)
		close(pidfd);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == SANDBOX_CAPS_OK)
		return true;
	snprintf(
	    why, why_len,
	    "codebox-init, exec'd as a run's init is, fails or lacks the capabilities init needs "
	    "(wait status %d)",
	    st);
	return false;
}

/* Serves until retired: watches the supervisor's socket and the tiers' templates, and tells
 * the supervisor whenever the tiers that serve change (ready: what it was told last). */
static noreturn void
zygote_serve(int sock, struct warm_ready *ready)
{
	for (;;) {
		struct pollfd pfd[13] = {{.fd = sock, .events = POLLIN}};
		int n = 1;

		for (int i = 0; i < 2; i++)
			tier_poll_fds(&zygote_tiers[i], pfd, &n);
		if (poll(pfd, (nfds_t)n, 1000) < 0 && errno != EINTR)
			_exit(1);
		if (pfd[0].revents) {
			char c;
			ssize_t r = read(sock, &c, 1);
			if (r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN))
				zygote_retire(); /* the supervisor retires us, or is gone */
		}
		for (int i = 0; i < 2; i++)
			tier_check(&zygote_tiers[i]);
		if (zygote_serving() != ready->tiers) {
			/* the supervisor tells the workers: no request waits for a tier that is
			 * not there */
			ready->tiers = zygote_serving();
			if (util_write_all(sock, ready, sizeof(*ready)) < 0)
				zygote_retire();
		}
	}
}

noreturn void
zygote_main(void)
{
	static struct warm_zygote_config cfg;
	struct warm_ready ready = {0};
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	int fds[WARM_FD_COUNT] = {-1, -1, -1, -1}, sock = WARM_ZYGOTE_FD, devnull;
	long long t0 = util_now_ms();

	log_set_component("zygote");
	(void)prctl(PR_SET_NAME, "codebox-zygote");
	/* inherited across the execve (it had to be); nothing it starts may inherit it */
	(void)fcntl(sock, F_SETFD, FD_CLOEXEC);
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	/* the signal mask is the supervisor's (SIGTERM, SIGINT blocked), inherited by the
	 * templates and every init, as a cold init inherits its worker's */
	sigaction(SIGCHLD, &dfl, NULL);
	/* nothing a run reads comes from the pool's stdin, nor names the pool's directory */
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull >= 0) {
		dup2(devnull, 0);
		close(devnull);
	}
	if (chdir("/") < 0)
		_exit(1);
	if (zygote_configure(sock, &cfg, fds, ready.why, sizeof(ready.why)) < 0)
		goto report;
	{
		int keep[] = {sock, fds[0], fds[1], fds[2], fds[3]};
		(void)util_close_fds_except(keep, 5);
	}
	if (zygote_base.init_fd >= 0 &&
	    !zygote_probe_one_copy(zygote_base.init_fd, ready.why, sizeof(ready.why))) {
		log_msg(LOG_WARN, "warm runs start with two copies of the interpreter: %s",
		        ready.why);
		ready.why[0] = '\0';
		close(zygote_base.init_fd);
		zygote_base.init_fd = -1;
	}
	ready.one_copy = zygote_base.init_fd >= 0;
	zygote_tiers[0] = (struct tier){.heavy = false,
	                                .serve_fd = fds[WARM_FD_LIGHT],
	                                .cur = TMPL_NONE,
	                                .next = TMPL_NONE,
	                                .old = TMPL_NONE,
	                                .backoff_ms = 1000};
	zygote_tiers[1] = (struct tier){.heavy = true,
	                                .serve_fd = fds[WARM_FD_HEAVY],
	                                .cur = TMPL_NONE,
	                                .next = TMPL_NONE,
	                                .old = TMPL_NONE,
	                                .backoff_ms = 1000};
	if (cfg.settings.n_heavy == 0)
		util_close_fd(&zygote_tiers[1].serve_fd);
	if (interp_init(&cfg.settings, cfg.python, ready.why, sizeof(ready.why)) == 0) {
		int threads = interp_threads();
		if (threads != 1) {
			snprintf(ready.why, sizeof(ready.why),
			         "the preloaded modules started threads (%d): a user namespace "
			         "needs a single-threaded process",
			         threads);
		} else {
			/* the heavy tier's template forks from here: light modules only; within
			 * the supervisor's wait, leaving room for the collapse and the light one */
			if (zygote_tiers[1].serve_fd >= 0)
				tier_start(&zygote_tiers[1],
				           WARM_ZYGOTE_READY_MS - (util_now_ms() - t0) - 20000);
			interp_collapse();
			tier_start(&zygote_tiers[0], 10000);
			ready.ok = zygote_tiers[0].serve_fd >= 0;
			if (!ready.ok)
				snprintf(ready.why, sizeof(ready.why), "the light template failed");
			else
				log_msg(LOG_INFO,
				        "zygote ready: %d modules imported in %lld ms (%d of them "
				        "by the heavy template%s)",
				        cfg.settings.n_modules, util_now_ms() - t0,
				        cfg.settings.n_heavy,
				        cfg.settings.n_heavy > 0 && zygote_tiers[1].serve_fd < 0
				            ? ", which failed"
				            : "");
		}
	}
report:
	ready.tiers = ready.ok ? zygote_serving() : 0;
	if (util_write_all(sock, &ready, sizeof(ready)) < 0 || !ready.ok)
		_exit(1);
	zygote_serve(sock, &ready);
}
