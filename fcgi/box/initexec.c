/*
 * initexec.c - the one-copy warm start (docs/DESIGN.md, "The cost of a run"): the template
 * clones a stub that shares its memory (initexec_stub_main()); the stub answers the worker,
 * forks the program (initexec_program(), the run's one copy of the interpreter) and execs
 * codebox-init (initmain.c), which reads its spec from a pipe (struct sandbox_wire, packed by
 * initexec_wire_pack()) and takes init's phases (initexec_init(), sandbox.h's steps). Of
 * init's confinement, the program then takes in itself what must be its own: the cgroup
 * namespace, its Landlock ruleset, ids, no capabilities, not dumpable, chdir
 * (sandbox_settle()).
 */
#include "box/initexec.h"

#include "box/sessioninit.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/rseq.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Copies src into dst[len]; -1 if it does not fit. */
static int
wire_copy(char *dst, size_t len, const char *src)
{
	size_t n = src != NULL ? strlen(src) : 0;

	if (n >= len)
		return -1;
	memcpy(dst, src != NULL ? src : "", n + 1);
	return 0;
}

int
initexec_wire_pack(const struct run_config *cfg, const char *workdir, unsigned long long disk_bytes,
                   const struct sandbox_spec *s, const struct sandbox_stub *st,
                   struct sandbox_wire *w)
{
	memset(w, 0, sizeof(*w));
	*w = (struct sandbox_wire){
	    .magic = SANDBOX_WIRE_MAGIC,
	    .run = cfg->set,
	    .disk_bytes = disk_bytes,
	    .ctl_fd = s->ctl_fd,
	    .report_fd = s->report_fd,
	    .error_fd = s->error_fd,
	    .session_fd = s->session_fd,
	    .workspace_fd = s->workspace_fd,
	    .etc_fd = s->mounts != NULL ? s->mounts->etc_fd : -1,
	    .ready_fd = st->ready_fd[1],
	    .handoff_fd = st->handoff_fd[0],
	    .cell_fd = st->cell_fd[0],
	};
	if (wire_copy(w->workdir, sizeof(w->workdir), workdir) < 0 ||
	    wire_copy(w->python, sizeof(w->python), cfg->python) < 0) {
		explicit_bzero(w, sizeof(*w));
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

void
initexec_wire_spec(struct sandbox_wire *w, struct child_spec *c)
{
	const struct run_config cfg = {
	    .set = w->run,
	    .python = w->python,
	    .work_parent_fd = -1,
	    .etc_fd = w->etc_fd,
	    .landlock_fd = -1, /* the program's, never init's */
	    .workspace_fd = w->workspace_fd,
	};

	w->workdir[sizeof(w->workdir) - 1] = '\0';
	w->python[sizeof(w->python) - 1] = '\0';
	child_prepare(&cfg, w->session_fd, w->workdir, w->disk_bytes, c);
	c->sb.error_fd = w->error_fd;
	c->sb.ctl_fd = w->ctl_fd;
	c->sb.report_fd = w->report_fd;
	c->sb.orphan_init = true;
	c->sb.high_pids = false;        /* the stub made them high before it forked the program */
	c->sb.landlock_abi = 0;         /* the program builds its ruleset itself */
	c->sb.argv = c->sb.envp = NULL; /* init execs nothing */
}
void
initexec_wire_fds(const struct sandbox_wire *w, int wire_fd, int fds[SANDBOX_WIRE_FDS])
{
	const int all[SANDBOX_WIRE_FDS] = {
	    wire_fd,         w->ctl_fd, w->report_fd, w->error_fd,   w->session_fd,
	    w->workspace_fd, w->etc_fd, w->ready_fd,  w->handoff_fd, w->cell_fd};

	memcpy(fds, all, sizeof(all));
}

/* The program's pids high (sandbox_high_pids()) from the stub, through the template's /proc
 * (ns_last_pid is the writer's pid namespace's); where its /proc/sys is read-only (a
 * container's), through a /proc of the run's own, mounted over it in the run's mount
 * namespace (private first: nothing propagates out), which init's new root replaces. */
static int
stub_high_pids(void)
{
	if (sandbox_high_pids() == 0)
		return 0;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return -1;
	return sandbox_high_pids();
}

int
initexec_ambient_caps(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data) < 0)
		return -1;
	data[0].inheritable = data[0].permitted;
	data[1].inheritable = data[1].permitted;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -1;
	for (unsigned c = 0; c < 64; c++)
		if (data[c / 32].permitted & (1u << (c % 32)) &&
		    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, c, 0, 0) < 0)
			return -1;
	return 0;
}

/*
 * The program of a one-copy start: forked by the stub before init's exec, so a copy of the
 * template's interpreter and nothing of init's. It keeps only the run's fds, waits for init's
 * word that the run's view of the system is built (mounts, masks, hostname), then takes in
 * itself the steps init took for it before (the cgroup namespace, its Landlock ruleset, ids,
 * capabilities, dumpable, the working directory), and goes on as the program ahead.
 */
static noreturn void
initexec_program(struct sandbox_stub *st)
{
	struct sandbox_spec *s = st->spec;
	ssize_t r;
	char c;

	(void)prctl(PR_SET_NAME, SANDBOX_PROGRAM_NAME);
	/* a CLONE_VM child has no rseq area registered, nor so a fork of it: glibc's (in the
	 * thread's control block) is registered again, or sched_getcpu() would read a stale cpu */
	if (__rseq_size > 0)
		(void)syscall(SYS_rseq, (char *)__builtin_thread_pointer() + __rseq_offset,
		              /* glibc registers at least the original 32 bytes (its __rseq_size is
		               * the features' size, 20 on 2.36) */
		              __rseq_size < 32 ? 32u : (uint32_t)__rseq_size, 0, RSEQ_SIG);
	{
		/* nothing of the template's (its serving socket, codebox-init), of init's ends,
		 * nor a session's listening socket */
		int keep[] = {s->stdout_fd,   s->stderr_fd,    s->error_fd,       s->ctl_fd,
		              s->landlock_fd, st->ready_fd[0], st->handoff_fd[1], st->cell_fd[1]};
		if (util_close_fds_except(keep, 8) < 0)
			sandbox_fail(s, SANDBOX_CLOSE_FDS, 0);
	}
	s->report_fd = s->session_fd = s->workspace_fd = -1;
	s->cell_fd = st->cell_fd[1];
	do
		r = read(st->ready_fd[0], &c, 1);
	while (r < 0 && errno == EINTR);
	if (r != 1)
		_exit(0); /* init failed (it said why on the error pipe) */
	close(st->ready_fd[0]);
	if (s->cgroupns && unshare(CLONE_NEWCGROUP) < 0)
		sandbox_fail(s, SANDBOX_CGROUPNS, 0);
	if (s->mounts != NULL && s->landlock_abi > 0 && sandbox_landlock(s) < 0)
		sandbox_fail(s, SANDBOX_LANDLOCK, 0);
	sandbox_settle(s, true);
	sandbox_program_ahead(s, st->handoff_fd[1]);
}

int
initexec_stub_main(void *arg)
{
	struct sandbox_stub *st = arg;
	struct sandbox_spec *s = st->spec;
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	struct pollfd go = {.fd = s->ctl_fd, .events = POLLIN};
	char prog_arg[24], wire_arg[24];
	char *argv[] = {"codebox-init", prog_arg, wire_arg, NULL}, *envp[] = {NULL};
	pid_t prog;
	int pidfd;

	/* the template ignores SIGCHLD (the kernel reaps its inits); init reaps its own */
	(void)sigaction(SIGCHLD, &dfl, NULL);
	/* the worker's answer comes from here (the template is suspended until the exec): init's
	 * host pid, which clone() wrote into the template's memory, and its pidfd */
	pidfd = (int)syscall(SYS_pidfd_open, 1, 0);
	if (st->host_pid <= 0 || pidfd < 0) {
		st->err = st->host_pid <= 0 ? ESRCH : errno;
		_exit(127);
	}
	if (st->answer(st->ctx, st->host_pid, pidfd) < 0) {
		st->err = errno;
		_exit(0); /* the worker gave the request up */
	}
	st->answered = 1;
	close(pidfd);
	/* the program is forked from this memory: nothing of the answer (init's host pid) may
	 * be left in it, here or on the stack below */
	st->host_pid = 0;
	sandbox_scrub_stack();
	/* the go: the uid maps written, init in the run's cgroup, so that the program is born
	 * there. Bounded: a worker that stalls must not hold the template */
	if (poll(&go, 1, SANDBOX_STUB_GO_MS) != 1)
		_exit(0); /* the worker sees init end through its pidfd */
	if (sandbox_wait_go(s) < 0)
		sandbox_fail(s, SANDBOX_WAIT, 0);
	if (s->high_pids && stub_high_pids() < 0)
		sandbox_fail(s, SANDBOX_PIDS, 0);
	/* the run's one copy of the interpreter; _Fork runs no atfork handler in the
	 * template's memory */
	prog = _Fork();
	if (prog < 0)
		sandbox_fail(s, SANDBOX_FORK, 0);
	if (prog == 0)
		initexec_program(st);
	{
		/* init's fds cross the exec; the rest (the output pipes, the template's) do not */
		int cross[SANDBOX_WIRE_FDS];
		initexec_wire_fds(st->wire, st->wire_fd, cross);
		for (size_t i = 0; i < SANDBOX_WIRE_FDS; i++)
			if (cross[i] >= 0 && fcntl(cross[i], F_SETFD, 0) < 0)
				sandbox_fail(s, SANDBOX_EXEC, 1);
	}
	/* an exec whose real and effective ids differ is a set-id exec to kernels before 6.15,
	 * which clears the ambient capabilities: in a user namespace, the run's ids in all three
	 * first (init takes them anyway; its capabilities stay, as no id was the namespace's
	 * root) */
	if (s->ids_before_mounts && sandbox_ids(s) < 0)
		sandbox_fail(s, SANDBOX_IDS, 0);
	/* an exec by a uid that is not the namespace's root clears the capabilities init still
	 * needs (mounts, ids): carried across as ambient ones, dropped by init once confined */
	if (initexec_ambient_caps() < 0)
		sandbox_fail(s, SANDBOX_CAPS, 2);
	/* snprintf() of an int neither allocates nor locks */
	snprintf(prog_arg, sizeof(prog_arg), "%d", (int)prog);
	snprintf(wire_arg, sizeof(wire_arg), "%d", st->wire_fd);
	(void)syscall(SYS_execveat, st->exe_fd, "", argv, envp, AT_EMPTY_PATH);
	sandbox_fail(s, SANDBOX_EXEC, 1);
}

noreturn void
initexec_init(struct sandbox_wire *w, pid_t prog)
{
	static struct child_spec child;
	struct sandbox_spec *s = &child.sb;
	struct sandbox_report rep = {.magic = SANDBOX_REPORT_MAGIC};
	sigset_t waitmask;

	initexec_wire_spec(w, &child);
	sandbox_init_signals(&waitmask);
	{
		int keep[SANDBOX_WIRE_FDS];
		initexec_wire_fds(w, -1, keep);
		if (util_close_fds_except(keep, SANDBOX_WIRE_FDS) < 0 ||
		    syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC) < 0)
			sandbox_fail(s, SANDBOX_CLOSE_FDS, 0);
	}
	sandbox_retitle();
	/* the go came to the stub; the program's pids are high already */
	sandbox_init_confine(s);
	/* the program confines itself now: its mounts, proc and hostname exist */
	if (util_write_all(w->ready_fd, "R", 1) < 0 && errno != EPIPE)
		sandbox_fail(s, SANDBOX_FORK, 2);
	close(w->ready_fd);
	sandbox_init_handoff(s, prog, w->handoff_fd, &rep);
	if (w->cell_fd >= 0 && !rep.program_reaped)
		sessioninit_serve(s, prog, w->cell_fd, &waitmask);
	if (w->cell_fd >= 0)
		close(w->cell_fd);
	sandbox_init_wait(s, prog, &waitmask, &rep);
	sandbox_init_kill_all(prog, &rep);
	sandbox_init_report(s, &rep);
}
