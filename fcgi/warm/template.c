/*
 * template.c - a warm template: a fork of the zygote that never runs Python code of its own
 * and clones, for any worker, the init of each run of its tier (docs/DESIGN.md, "Warm
 * interpreters" and "The trust boundary", tells how the processes fit together).
 *
 * Per request (warmproto.h) it clone()s init with the run's namespaces and CLONE_PIDFD, as its
 * own child, and answers with init's pidfd; SIGCHLD is ignored, so the kernel reaps init.
 * init keeps no parent-death signal (a template's end must not end its runs). The request's
 * one host path is wiped here once cloned. Succession: after CODEBOX_WARM_MAX_RUNS runs or
 * CODEBOX_WARM_MAX_SECONDS it says 'R' on its notice pipe and serves on until the zygote closes
 * its retirement pipe, then ends between two requests.
 */
#include "warm/template.h"

#include "box/child.h"
#include "box/initexec.h"
#include "warm/interp.h"
#include "core/log.h"
#include "core/proc.h"
#include "box/sessioninit.h"
#include "core/util.h"
#include "warm/warmproto.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#endif

/* The run's configuration: the template's base and the worker's request. */
static void
template_run_config(const struct template_base *base, const struct warm_box_request *req,
                    int landlock_fd, int workspace_fd, struct run_config *run)
{
	*run = (struct run_config){
	    .set = req->run, /* whole: the worker's record */
	    .python = base->python,
	    .work_parent_fd = -1,
	    .etc_fd = base->etc_fd,
	    .landlock_fd = landlock_fd,
	    .seccomp = req->seccomp && base->seccomp->prog.filter != NULL ? base->seccomp : NULL,
	    .workspace_fd = workspace_fd,
	};
	run->warm = true;
}

/* The run's child spec: large, and the template is single-threaded. */
static struct child_spec template_child;

/* Fills template_child for req: the run's configuration, its pipes, the warm entries. */
static void
template_prepare(const struct template_base *base, const struct warm_box_request *req,
                 const int *fds, struct run_config *run)
{
	struct child_spec *child = &template_child;

	template_run_config(base, req, req->landlock_fd ? fds[WARM_BOX_FD_LANDLOCK] : -1,
	                    req->workspace ? fds[WARM_BOX_FD_LANDLOCK + req->landlock_fd] : -1,
	                    run);
	child_prepare(run, req->session ? fds[WARM_BOX_FD_LANDLOCK + req->landlock_fd] : -1,
	              req->workdir, req->disk_bytes, child);
	child_set_fds(child, fds); /* the first five, in enum child_fd's order */
	child->sb.enter = interp_enter;
	/* the program prepares the interpreter before the request */
	child->sb.prepare = interp_prepare;
	child->sb.orphan_init = true;
	if (req->session) {
		child->sb.enter_session = interp_enter_session;
		child->sb.init_session = sessioninit_serve;
	}
}

/* Clones the init of one run, a copy of this template; its pid (or -errno) and pidfd into a
 * and *pidfd. */
static void
template_clone(const struct template_base *base, struct warm_box_request *req, const int *fds,
               int *pidfd, struct warm_box_answer *a)
{
	struct run_config run;
	pid_t pid;

	template_prepare(base, req, fds, &run);
	pid = child_clone(&run, run.clone_flags, pidfd);
	if (pid == 0)
		sandbox_init(&template_child.sb);
	a->pid = pid < 0 ? -errno : pid;
	a->as_bytes = interp_address_space_bytes();
	/* the next clone must not carry this run's host path */
	explicit_bzero(req->workdir, sizeof(req->workdir));
	explicit_bzero(&template_child, sizeof(template_child));
}

/* The stub's answer to the worker (initexec_stub_main()), sent from its stack. */
struct template_answer {
	int sock;
	uint64_t as_bytes;
};

static int
template_answer(void *ctx, pid_t pid, int pidfd)
{
	const struct template_answer *t = ctx;
	struct warm_box_answer a = {.pid = pid, .as_bytes = t->as_bytes};

	return util_send_fds(t->sock, &a, sizeof(a), &pidfd, 1, 0);
}

/* The room left on this stack between the caller's frames and the stub's. */
#define TEMPLATE_STUB_GAP (64 * 1024)

/*
 * The one-copy start (sandbox.h): init is cloned sharing this memory, suspended here until it
 * execs codebox-init, having forked the program, and it answers the worker itself. Returns
 * false when it could not begin (nothing was cloned: the caller clones a copy instead);
 * otherwise a says the error, if init could not answer.
 */
static bool
template_clone_one_copy(const struct template_base *base, struct warm_box_request *req,
                        const int *fds, struct warm_box_answer *a, bool *answered)
{
	static struct sandbox_wire wire;
	struct template_answer ctx = {.sock = fds[WARM_BOX_FD_ANSWER],
	                              .as_bytes = interp_address_space_bytes()};
	struct sandbox_stub st = {.exe_fd = base->init_fd,
	                          .wire_fd = -1,
	                          .ready_fd = {-1, -1},
	                          .handoff_fd = {-1, -1},
	                          .cell_fd = {-1, -1},
	                          .answer = template_answer,
	                          .ctx = &ctx};
	int wp[2] = {-1, -1}, *ends[] = {wp, st.ready_fd, st.handoff_fd, st.cell_fd};
	struct run_config run;
	bool ok = false;
	char *stack;
	pid_t pid;

	*answered = false;
	template_prepare(base, req, fds, &run);
	st.spec = &template_child.sb;
	/* the wire is written whole before init reads it: a pipe too small must not block */
	if (pipe2(wp, O_CLOEXEC | O_NONBLOCK) < 0 || pipe2(st.ready_fd, O_CLOEXEC) < 0 ||
	    pipe2(st.handoff_fd, O_CLOEXEC) < 0 ||
	    (req->session &&
	     socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, st.cell_fd) < 0) ||
	    initexec_wire_pack(&run, req->workdir, req->disk_bytes, &template_child.sb, &st,
	                       &wire) < 0 ||
	    write(wp[1], &wire, sizeof(wire)) != (ssize_t)sizeof(wire))
		goto out;
	close(wp[1]);
	wp[1] = -1;
	st.wire_fd = wp[0];
	/* the stub reads its fds from it; init has the path */
	explicit_bzero(wire.workdir, sizeof(wire.workdir));
	st.wire = &wire;
	/* the program is a copy of this memory: no host path may be left in it (init was told
	 * the run's directory on the wire). Without a mount namespace the path is the program's
	 * working directory, seen as it is: it keeps it */
	if (template_child.sb.mounts != NULL)
		explicit_bzero(req->workdir, sizeof(req->workdir));
	sandbox_scrub_stack();
	ok = true;
	stack = (char *)((uintptr_t)((char *)__builtin_frame_address(0) - TEMPLATE_STUB_GAP) &
	                 ~(uintptr_t)15);
	pid = child_clone_vm(&run, run.clone_flags, initexec_stub_main, stack, &st, &st.host_pid);
#if defined(__SANITIZE_ADDRESS__)
	/* the stub's frames never returned: their red zones are still marked on this stack */
	__asan_unpoison_memory_region(stack - 256 * 1024, 256 * 1024);
#endif
	explicit_bzero(req->workdir, sizeof(req->workdir));
	*answered = st.answered != 0;
	if (!*answered) {
		a->pid = pid < 0 ? -errno : -(st.err != 0 ? st.err : EIO);
		a->as_bytes = ctx.as_bytes;
	}
out:
	explicit_bzero(&wire, sizeof(wire));
	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
		for (int j = 0; j < 2; j++)
			if (ends[i][j] >= 0)
				close(ends[i][j]);
	if (!ok)
		return false;
	explicit_bzero(&template_child, sizeof(template_child));
	return true;
}

/* Whether req is one this template serves, with n fds. */
static bool
template_request_ok(const struct warm_box_request *req, int n)
{
	return req->magic == WARM_BOX_MAGIC && req->landlock_fd <= 1 && req->workspace <= 1 &&
	       req->session <= 1 && req->workspace + req->session <= 1 &&
	       n == WARM_BOX_FD_LANDLOCK + req->landlock_fd + req->workspace + req->session &&
	       req->workdir[0] == '/' && memchr(req->workdir, '\0', sizeof(req->workdir)) &&
	       (req->run.clone_flags & CLONE_NEWPID) && req->run.run_uid != 0;
}

/* Takes one request from the tier's socket, if another template has not, and answers it: an
 * init cloned (counted in *runs), or why not. */
static void
template_serve_one(const struct template_base *base, const struct template_args *t,
                   unsigned long *runs)
{
	static struct warm_box_request req;
	struct warm_box_answer a = {0};
	int fds[WARM_BOX_FDS] = {-1, -1, -1, -1, -1, -1, -1, -1};
	int n, pidfd = -1;
	bool answered = false; /* by the stub of a one-copy start */

	/* other templates read the same socket: whoever is first takes a request */
	n = util_recv_fds(t->serve_fd, &req, sizeof(req), fds, WARM_BOX_FDS, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0 && errno == EPIPE)
		_exit(0); /* the pool is gone */
	if (n < 0)
		return;
	if (n >= 6) {
		/* a worker that gave up on this request (its end of the answer's socket is
		 * closed) has reused its pipes: no init may be cloned onto them */
		struct pollfd hup = {.fd = fds[WARM_BOX_FD_ANSWER], .events = 0};
		if (poll(&hup, 1, 0) == 1 && (hup.revents & (POLLHUP | POLLERR))) {
			log_msg(LOG_WARN, "a request its worker gave up on is skipped");
			a.pid = -ECANCELED;
		}
	}
	if (a.pid == 0 && !template_request_ok(&req, n)) {
		a.pid = -EPROTO;
	} else if (a.pid == 0) {
		if (base->init_fd < 0 || !template_clone_one_copy(base, &req, fds, &a, &answered))
			template_clone(base, &req, fds, &pidfd, &a);
		(*runs)++;
	}
	explicit_bzero(&req, sizeof(req));
	for (int i = 0; i < n; i++)
		if (i != WARM_BOX_FD_ANSWER && fds[i] >= 0)
			close(fds[i]);
	if (n > WARM_BOX_FD_ANSWER && answered) {
		close(fds[WARM_BOX_FD_ANSWER]);
	} else if (n > WARM_BOX_FD_ANSWER) {
		if (util_send_fds(fds[WARM_BOX_FD_ANSWER], &a, sizeof(a), &pidfd, 1, 0) < 0 &&
		    pidfd >= 0)
			/* nobody will watch this init: it must not wait for a 'G' */
			(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
		close(fds[WARM_BOX_FD_ANSWER]);
	}
	if (pidfd >= 0)
		close(pidfd);
}

noreturn void
template_main(const struct template_base *base, const struct template_args *t)
{
	struct warm_ready ready = {0};
	struct sigaction ign = {.sa_handler = SIG_IGN};
	unsigned long runs = 0;
	long long t0 = util_now_ms(), orphan_since = 0;
	bool retiring = false;
	const struct warm_settings *ws = base->settings;

	log_set_component(t->heavy ? "heavy" : "template");
	/* no parent-death signal: a template outlives a zygote that dies (it serves on, an
	 * orphan, until the pool's next zygote serves its tier); it ends when retired, when the
	 * pool is gone (its socket's other end), or when the pool ends it */
	if (getppid() != t->zygote)
		_exit(0);
	{
		/* nothing of the zygote's: its socket to the supervisor (which must see EOF the
		 * moment the zygote dies), the other templates' pipes */
		int keep[] = {t->serve_fd, t->note_fd, t->retire_fd, base->etc_fd, base->init_fd};
		(void)util_close_fds_except(keep, 5);
	}
	(void)prctl(PR_SET_NAME, t->heavy ? "codebox-heavy" : "codebox-warm");
	if (!t->heavy) {
		ready.ok = 1;
	} else if (interp_import(ws, false, ready.why, sizeof(ready.why)) == 0) {
		int threads = interp_threads();
		if (threads != 1) {
			snprintf(ready.why, sizeof(ready.why),
			         "the heavy tier's modules started threads (%d)", threads);
		} else {
			interp_collapse();
			ready.ok = 1;
		}
	}
	/* SIGPIPE is ignored (the interpreter's start-up): a zygote that stopped waiting is
	 * only an error here */
	if (util_write_all(t->note_fd, &ready, sizeof(ready)) < 0 || !ready.ok)
		_exit(1);
	if (t->heavy)
		log_msg(LOG_INFO, "heavy template ready: %d modules imported in %lld ms",
		        ws->n_heavy, util_now_ms() - t0);
	/* inits are reaped by the kernel: nothing here waits for them */
	sigaction(SIGCHLD, &ign, NULL);
	interp_read_mm();
	t0 = util_now_ms();
	for (;;) {
		int wait_ms;
		long long now = util_now_ms(),
		          life_ms = (long long)ws->max_seconds * 1000 - (now - t0);
		struct pollfd pfd[2] = {{.fd = t->serve_fd, .events = POLLIN},
		                        {.fd = orphan_since ? -1 : t->retire_fd, .events = POLLIN}};

		if (orphan_since && now - orphan_since >= WARM_ORPHAN_MS)
			_exit(0); /* no zygote took over in time: the pool's next one will */
		if (!retiring && !orphan_since && (runs >= ws->max_runs || life_ms <= 0)) {
			/* the zygote forks the successor; this one serves until that one does (an
			 * orphan has no zygote: it serves on, bounded by WARM_ORPHAN_MS) */
			retiring = true;
			if (write(t->note_fd, "R", 1) != 1)
				_exit(0);
		}
		wait_ms = orphan_since ? 1000
		          : !retiring  ? (int)(life_ms < 1000 ? life_ms : 1000) + 1
		                       : -1;
		if (poll(pfd, 2,
		         wait_ms < 0   ? -1
		         : wait_ms < 1 ? 1
		                       : wait_ms) < 0 &&
		    errno != EINTR)
			_exit(1);
		if (pfd[1].revents) {
			char word;
			if (read(t->retire_fd, &word, 1) == 1)
				_exit(0); /* retired, between two requests */
			/* the pipe's end without a word: the zygote died */
			orphan_since = util_now_ms();
			log_msg(LOG_WARN,
			        "the zygote is gone: this %s serves on until the pool's next "
			        "zygote serves its tier (at most %d s)",
			        t->heavy ? "heavy template" : "template", WARM_ORPHAN_MS / 1000);
			continue;
		}
		if ((pfd[0].revents & (POLLHUP | POLLERR)) && !(pfd[0].revents & POLLIN))
			_exit(0); /* the pool is gone */
		if (!pfd[0].revents)
			continue;
		template_serve_one(base, t, &runs);
	}
}
