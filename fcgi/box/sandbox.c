/*
 * sandbox.c - the child side of a run, in a fixed, commented order of steps.
 *
 * Two shapes, chosen at start-up by what the host allows (isolation.c):
 *
 *   direct mode     worker ─fork─▶ program
 *   namespace mode  worker ─clone(NEWUSER|NEWPID|NEWNET|NEWNS|NEWIPC|NEWUTS)─▶ init (pid 1)
 *                                                                  ─fork─▶ program (pid 2)
 *
 * Between fork and execve a child may not take locks the copied image might hold, so the
 * program's steps are system calls on data the worker prepared. Init is long-lived but runs
 * only this file's code: a copy of its parent (cold runs, and warm ones started with two
 * copies), or codebox-init (initexec.c, the one-copy start), a program of its own. It
 * allocates for the inputs' manifest (which files the program left as they were given), for
 * a session's cells, and, after every other process of the run is dead, to read result.json
 * and the artifacts (the worker and the templates are single-threaded, so the malloc state a
 * copied init holds is consistent).
 *
 * The request is taken (sandbox_take_request()) before the program's confinement: read from
 * the control pipe, stdin made a memfd of its data, main.py and the input files written into
 * the working directory. In direct mode the program does it itself, switching to the worker's
 * unprivileged run uid and gid (under a root pool) before it writes them; in namespace mode
 * init does, once the run's view of the system is built (below).
 *
 * The program's confinement, in order, one table (sandbox_confinement[]):
 *   signals       the worker blocks SIGTERM and ignores SIGPIPE; a program starts with defaults
 *   setsid        a session and process group of its own (the kill target in direct mode)
 *   stdio         the stdin memfd and the two capture pipes become 0, 1 and 2
 *   close fds     nothing of the worker reaches the program; the error pipe stays, close-on-exec
 *   parent death  PR_SET_PDEATHSIG after the uid change (which clears it), then a check that the
 *                 parent did not die in between
 *   rlimits       no core files; nofile; fsize (disk); nproc (processes, counted per user
 *                 namespace); a non-root pool's share of its uid's queued signals (sigpending);
 *                 CPU time as a backstop; address space when no cgroup caps memory
 *   oom score     1000, so the kernel's OOM killer takes a run before nginx or a worker
 *   no_new_privs  required by Landlock and seccomp, and no setuid binary can give privileges back
 *   landlock      read-only system, read-write run directory, no TCP, scoped signals
 *   seccomp       last, so that the steps above may use what it denies
 * and then
 *   execve        with the environment the worker built; nothing inherited. In warm mode
 *                 (interp.c) the process is a copy of a template interpreter instead, and
 *                 spec->enter takes over here: the same steps, in the same order, are in
 *                 force before any of the run's code executes.
 *
 * Warm mode with a pid namespace (spec->prepare): init forks the program as soon as the
 * sandbox is ready, before the request. The program takes the same table's steps in the same
 * order, but for what needs the request (stdin, the rlimits); then the template's interpreter
 * prepares (spec->prepare: reseeding, environment, signals), and only then does the program
 * take the request (stdin, main.py), set the rlimits, hand init the result's size limit and
 * enter the interpreter. Init does not read the control pipe until that handoff.
 *
 * The one-copy start (docs/DESIGN.md, "The cost of a run") is initexec.c's: its stub and
 * codebox-init take the steps and init's phases below, which sandbox.h lists for it. A
 * session's init, once its program waits for cells, is sessioninit.c's, reached through the
 * spec's init_session hook as the program's enter is.
 *
 * Init's phases (sandbox_init()), each a function:
 *   begin         nothing of the worker's fds or pages, its own name, parent death, then the
 *                 worker's go (the worker writes the uid and gid maps and moves init into the
 *                 run's cgroup first)
 *   confine       in this order: oom score; a cgroup namespace (so /proc/self/cgroup shows
 *                 "/", not the pool's groups); hostname; mounts (mounts.c), with ids first in
 *                 a user namespace; high pids (ns_last_pid near pid_max: a program's pids never
 *                 match the pool container's or the host's, whose clients check /proc/<pid>
 *                 after a run); the masked /proc paths; the run's own Landlock ruleset (its
 *                 directories exist only now); ids (the inner unprivileged uid); caps (all
 *                 dropped: init keeps no power a compromised program could borrow); not
 *                 dumpable (the program cannot read init's memory through /proc); chdir
 *   fork          cold: take the request (main.py into the working tmpfs), then fork the
 *                 program; warm: fork the program ahead, which takes the request itself
 *   wait          for the program's end or the worker's stop
 *   kill all      every other process of the namespace
 *   report        result.json and the artifacts, with the program's status, to the worker
 */
#include "box/sandbox.h"

#include "core/files.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/close_range.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "box/landlock.h"
#include "core/util.h"

const char *
sandbox_step_string(enum sandbox_step step)
{
	switch (step) {
	case SANDBOX_WAIT:
		return "waiting for the worker";
	case SANDBOX_CGROUPNS:
		return "entering a cgroup namespace";
	case SANDBOX_HOSTNAME:
		return "setting the hostname";
	case SANDBOX_PIDS:
		return "allocating the program's pids high";
	case SANDBOX_MOUNTS:
		return "building the mount namespace";
	case SANDBOX_IDS:
		return "switching to the run's uid and gid";
	case SANDBOX_CAPS:
		return "dropping capabilities";
	case SANDBOX_CODE:
		return "writing main.py";
	case SANDBOX_FORK:
		return "forking the program";
	case SANDBOX_SIGNALS:
		return "resetting signals";
	case SANDBOX_SETSID:
		return "setsid()";
	case SANDBOX_STDIO:
		return "setting up stdin, stdout and stderr";
	case SANDBOX_CLOSE_FDS:
		return "closing inherited descriptors";
	case SANDBOX_CHDIR:
		return "entering the working directory";
	case SANDBOX_PARENT_DEATH:
		return "arming the parent-death signal";
	case SANDBOX_RLIMITS:
		return "setting rlimits";
	case SANDBOX_OOM_SCORE:
		return "setting the OOM score";
	case SANDBOX_NO_NEW_PRIVS:
		return "setting no_new_privs";
	case SANDBOX_LANDLOCK:
		return "enforcing Landlock";
	case SANDBOX_SECCOMP:
		return "loading the seccomp filter";
	case SANDBOX_EXEC:
		return "execve() of the interpreter";
	}
	return "an unknown step";
}

static char *title_area;
static size_t title_len;

void
sandbox_set_title_area(char *start, size_t len)
{
	title_area = start;
	title_len = len;
}

/* init is a copy of the worker: rename it, so a run sees nothing of the pool's arguments */
void
sandbox_retitle(void)
{
	static const char title[] = "codebox-init";

	(void)prctl(PR_SET_NAME, title);
	if (title_area == NULL || title_len < sizeof(title))
		return;
	memset(title_area, 0, title_len);
	memcpy(title_area, title, sizeof(title));
}

void
sandbox_set_title(char *const *argv)
{
	const char *slash = strrchr(argv[0], '/');
	char name[16] = "";
	size_t n = 0;

	strncpy(name, slash ? slash + 1 : argv[0], sizeof(name) - 1);
	(void)prctl(PR_SET_NAME, name);
	if (title_area == NULL)
		return;
	memset(title_area, 0, title_len);
	for (int i = 0; argv[i] != NULL; i++) {
		size_t len = strlen(argv[i]) + 1;
		if (n + len > title_len)
			break;
		memcpy(title_area + n, argv[i], len);
		n += len;
	}
}

noreturn void
sandbox_fail(const struct sandbox_spec *s, enum sandbox_step step, int detail)
{
	struct sandbox_failure f = {.step = step, .detail = detail, .err = errno};
	ssize_t unused = write(s->error_fd, &f, sizeof(f));

	(void)unused;
	_exit(127);
}

static int
read_full(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EPIPE;
			return -1;
		}
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* What the warm program tells init once it has read the request; manifest_len bytes of the
 * inputs' manifest follow. */
struct sandbox_handoff {
	uint64_t max_result_bytes;
	uint64_t artifacts;
	uint64_t manifest_len;
	int64_t session_idle_ms; /* a session's bounds, from its creation request */
	int64_t session_life_ms;
};

/*
 * Reads the request that follows 'G' and applies its limits to s. The input's buffers are
 * allocated here (the worker is single-threaded, so its malloc is consistent in the copy).
 */
int
sandbox_read_request(int fd, struct sandbox_spec *s, struct sandbox_input *in)
{
	struct sandbox_request req;

	if (read_full(fd, &req, sizeof(req)) < 0)
		return -1;
	if (req.magic != SANDBOX_REQUEST_MAGIC || req.code_len > SANDBOX_MAX_INPUT_BYTES ||
	    req.stdin_len > SANDBOX_MAX_INPUT_BYTES || req.files_len > SANDBOX_MAX_INPUT_BYTES) {
		errno = EPROTO;
		return -1;
	}
	in->code = malloc((size_t)req.code_len + 1);
	in->input = malloc((size_t)req.stdin_len + 1);
	/* most runs bring no files: nothing allocated for them */
	in->files = req.files_len > 0 ? malloc(req.files_len) : NULL;
	if (in->code == NULL || in->input == NULL || (req.files_len > 0 && in->files == NULL) ||
	    read_full(fd, in->code, req.code_len) < 0 ||
	    read_full(fd, in->input, req.stdin_len) < 0 ||
	    read_full(fd, in->files, req.files_len) < 0)
		return -1;
	in->code[req.code_len] = '\0'; /* an agent's command is a C string */
	in->code_len = req.code_len;
	in->input_len = req.stdin_len;
	in->files_len = req.files_len;
	s->nproc = (unsigned long)req.nproc;
	s->sigpending = (unsigned long)req.sigpending;
	s->fsize_bytes = req.fsize_bytes;
	s->as_bytes = req.as_bytes;
	s->as_exec_bytes = req.as_exec_bytes;
	s->cpu_limit_seconds = (long)req.cpu_limit_seconds;
	s->max_result_bytes = req.max_result_bytes;
	if (req.flags & SANDBOX_SESSION) {
		s->session_idle_ms = (long long)req.session_idle_seconds * 1000;
		s->session_life_ms = (long long)req.session_life_seconds * 1000;
	}
	s->artifacts = (req.flags & SANDBOX_WANT_ARTIFACTS) ? ARTIFACTS_ALL
	               : (req.flags & SANDBOX_WANT_IMAGES)  ? ARTIFACTS_IMAGES
	                                                    : ARTIFACTS_NONE;
	return 0;
}

/* stdin: a memfd holding the request's data, rewound */
int
sandbox_make_stdin(const char *data, size_t len)
{
	int fd = memfd_create("codebox-stdin", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	if (util_write_all(fd, data, len) < 0 || lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* main.py and the input files, into the working directory (the current one), and the inputs'
 * manifest into s when init will collect the artifacts (manifest); frees what they were read
 * into, but the code when keep_code (an agent's command is run, not written) */
static int
sandbox_write_inputs(struct sandbox_spec *s, struct sandbox_input *in, bool keep_code,
                     bool manifest)
{
	int fd, rc = 0;

	if (!keep_code) {
		fd = open("main.py", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		rc = fd < 0 ? -1 : util_write_all(fd, in->code, in->code_len);
		if (fd >= 0)
			close(fd);
		free(in->code);
		in->code = NULL;
	}
	if (rc == 0 && in->files_len > 0)
		rc = files_write(AT_FDCWD, in->files, in->files_len);
	if (rc == 0 && manifest && s->artifacts && in->files_len > 0)
		rc = files_manifest(in->files, in->files_len, &s->manifest, &s->manifest_len);
	free(in->files);
	free(in->input);
	in->files = in->input = NULL;
	return rc;
}

/* Blocks for the worker's go. */
int
sandbox_wait_go(const struct sandbox_spec *s)
{
	char c;
	ssize_t r;

	do
		r = read(s->ctl_fd, &c, 1);
	while (r < 0 && errno == EINTR);
	if (r != 1 || c != 'G') {
		errno = r == 0 ? EPIPE : errno;
		return -1;
	}
	return 0;
}

int
sandbox_ids(const struct sandbox_spec *s)
{
	if (!s->set_ids)
		return 0;
	/* EPERM when the user namespace denies setgroups: there are none to drop then */
	if (setgroups(0, NULL) < 0 && errno != EPERM)
		return -1;
	if (setresgid(s->gid, s->gid, s->gid) < 0 || setresuid(s->uid, s->uid, s->uid) < 0)
		return -1;
	return 0;
}

/* What comes between the steps of taking the request (sandbox_take_request()). */
struct sandbox_take {
	const char *dir; /* entered before the inputs are written there; NULL: where it is */
	bool stdin_now;  /* the stdin memfd becomes fd 0 at once (the program ahead) */
	bool set_ids;    /* direct mode: the run's ids before the write, so that they own main.py */
	bool command;    /* an agent's: the code is a command, kept (returned), not main.py */
	bool manifest;   /* init collects the artifacts: the inputs' manifest into the spec */
};

/*
 * Takes the request that follows the go, in this order: reads it and applies its limits to s
 * (a worker that gave the sandbox up ends the process quietly), makes stdin a memfd holding its
 * data (s->stdin_fd), enters t->dir, switches ids (t->set_ids), and writes main.py (but for a
 * command) and the input files. A failed step ends the process (sandbox_fail()). Returns the
 * command (t->command; a C string the caller keeps), else NULL.
 */
static char *
sandbox_take_request(struct sandbox_spec *s, const struct sandbox_take *t)
{
	struct sandbox_input in;

	if (sandbox_read_request(s->ctl_fd, s, &in) < 0)
		_exit(0); /* the worker gave this sandbox up */
	s->stdin_fd = sandbox_make_stdin(in.input, in.input_len);
	if (s->stdin_fd < 0)
		sandbox_fail(s, SANDBOX_STDIO, 0);
	if (t->stdin_now) {
		if (dup2(s->stdin_fd, 0) < 0)
			sandbox_fail(s, SANDBOX_STDIO, 0);
		close(s->stdin_fd);
	}
	if (t->dir != NULL && chdir(t->dir) < 0)
		sandbox_fail(s, SANDBOX_CHDIR, 0);
	if (t->set_ids && sandbox_ids(s) < 0)
		sandbox_fail(s, SANDBOX_IDS, 0);
	if (sandbox_write_inputs(s, &in, t->command, t->manifest) < 0)
		sandbox_fail(s, SANDBOX_CODE, 0);
	return t->command ? in.code : NULL;
}

/* An agent's command is run by /bin/sh -c in place of the interpreter. */
static void
sandbox_as_shell(struct sandbox_spec *s, char *command)
{
	static char *agent_argv[4] = {"/bin/sh", "-c", NULL, NULL};

	agent_argv[2] = command;
	s->argv = agent_argv;
	s->python = "/bin/sh";
}

static int
sandbox_oom_score(void)
{
	int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
	int rc;

	if (fd < 0)
		return errno == ENOENT || errno == EACCES ? 0 : -1; /* no /proc: nothing to do */
	rc = util_write_all(fd, "1000", 4);
	close(fd);
	return rc;
}

static int
set_limit(int resource, unsigned long long soft, unsigned long long hard)
{
	struct rlimit rl = {(rlim_t)soft, (rlim_t)hard};

	return setrlimit(resource, &rl);
}

/* What a step of the program's confinement is given. */
struct sandbox_confine {
	const struct sandbox_spec *s;
	bool ahead;     /* the program forked before the request (warm, sandbox_program_ahead()) */
	int handoff_fd; /* the program ahead's pipe to init, kept open; -1: none */
};

static int
confine_signals(const struct sandbox_confine *c)
{
	struct sigaction sa = {.sa_handler = SIG_DFL};
	sigset_t none;

	(void)c;
	for (int sig = 1; sig < NSIG; sig++)
		if (sig != SIGKILL && sig != SIGSTOP)
			(void)sigaction(sig, &sa, NULL); /* EINVAL for reserved signals */
	sigemptyset(&none);
	return sigprocmask(SIG_SETMASK, &none, NULL);
}

static int
confine_setsid(const struct sandbox_confine *c)
{
	(void)c;
	return setsid() < 0 ? -1 : 0;
}

/* stdin (the program ahead has none yet: it takes it with the request), stdout, stderr */
static int
confine_stdio(const struct sandbox_confine *c)
{
	const struct sandbox_spec *s = c->s;

	/* the sources are all >= 3 (the worker keeps 0..2 open), so no dup2 clobbers another */
	if ((!c->ahead && dup2(s->stdin_fd, 0) < 0) || dup2(s->stdout_fd, 1) < 0 ||
	    dup2(s->stderr_fd, 2) < 0)
		return -1;
	return 0;
}

static int
confine_close_fds(const struct sandbox_confine *c)
{
	const struct sandbox_spec *s = c->s;
	/* the error pipe reports later failures; the Landlock ruleset is applied below; the
	 * program ahead still reads the request and hands init the result's size limit */
	int keep[] = {s->error_fd, s->landlock_fd, c->ahead ? s->ctl_fd : -1, c->handoff_fd,
	              s->cell_fd};

	return util_close_fds_except(keep, 5);
}

/* the working directory is inherited: the caller entered it (and wrote main.py there) */
static int
confine_parent_death(const struct sandbox_confine *c)
{
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return -1;
	/* the parent died before the signal was armed: nobody will reap us, so stop here */
	if (c->s->parent_pid > 0 && getppid() != c->s->parent_pid) {
		errno = ESRCH;
		return -1;
	}
	return 0;
}

static int
confine_rlimits(const struct sandbox_confine *c)
{
	const struct sandbox_spec *s = c->s;

	if (set_limit(RLIMIT_CORE, 0, 0) < 0)
		return -1;
	if (s->nofile && set_limit(RLIMIT_NOFILE, s->nofile, s->nofile) < 0)
		return -1;
	if (s->fsize_bytes && set_limit(RLIMIT_FSIZE, s->fsize_bytes, s->fsize_bytes) < 0)
		return -1;
	if (s->nproc && set_limit(RLIMIT_NPROC, s->nproc, s->nproc) < 0)
		return -1;
	if (s->sigpending && set_limit(RLIMIT_SIGPENDING, s->sigpending, s->sigpending) < 0)
		return -1;
	if (s->as_bytes && set_limit(RLIMIT_AS, s->as_bytes, s->as_bytes) < 0)
		return -1;
	if (s->cpu_limit_seconds > 0 &&
	    set_limit(RLIMIT_CPU, (unsigned long long)s->cpu_limit_seconds,
	              (unsigned long long)s->cpu_limit_seconds + 1) < 0)
		return -1;
	return 0;
}

static int
confine_oom_score(const struct sandbox_confine *c)
{
	(void)c;
	return sandbox_oom_score();
}

static int
confine_no_new_privs(const struct sandbox_confine *c)
{
	(void)c;
	return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ? -1 : 0;
}

static int
confine_landlock(const struct sandbox_confine *c)
{
	if (c->s->landlock_fd < 0)
		return 0;
	if (landlock_apply(c->s->landlock_fd) < 0)
		return -1;
	close(c->s->landlock_fd);
	return 0;
}

static int
confine_seccomp(const struct sandbox_confine *c)
{
	return c->s->seccomp != NULL && seccomp_apply(c->s->seccomp) < 0 ? -1 : 0;
}

/*
 * The program's confinement, in the order it is taken, by both program paths: a program with
 * its request (sandbox_program()) takes every step; the program forked ahead of its request
 * (warm, sandbox_program_ahead()) the ones that need no request, then, once it has it, the ones
 * that do (the rlimits it carries).
 */
static const struct {
	enum sandbox_step step;
	int (*take)(const struct sandbox_confine *c);
	bool needs_request;
} sandbox_confinement[] = {
    {SANDBOX_SIGNALS, confine_signals, false},
    {SANDBOX_SETSID, confine_setsid, false},
    {SANDBOX_STDIO, confine_stdio, false},
    {SANDBOX_CLOSE_FDS, confine_close_fds, false},
    {SANDBOX_PARENT_DEATH, confine_parent_death, false},
    {SANDBOX_RLIMITS, confine_rlimits, true},
    {SANDBOX_OOM_SCORE, confine_oom_score, false},
    {SANDBOX_NO_NEW_PRIVS, confine_no_new_privs, false},
    {SANDBOX_LANDLOCK, confine_landlock, false},
    {SANDBOX_SECCOMP, confine_seccomp, false}, /* last: the steps above may use what it denies */
};

/* Which of the confinement's steps sandbox_confine() takes. */
enum sandbox_confine_part {
	SANDBOX_CONFINE_ALL,       /* every step: the program has its request */
	SANDBOX_CONFINE_AHEAD,     /* the steps that need no request */
	SANDBOX_CONFINE_REQUESTED, /* the rest, once the program ahead has its request */
};

/* Takes part of the confinement's steps, in order; a failed step ends the process. */
static void
sandbox_confine(const struct sandbox_spec *s, enum sandbox_confine_part part, int handoff_fd)
{
	const struct sandbox_confine c = {
	    .s = s, .ahead = part != SANDBOX_CONFINE_ALL, .handoff_fd = handoff_fd};

	for (size_t i = 0; i < sizeof(sandbox_confinement) / sizeof(sandbox_confinement[0]); i++) {
		bool needs = sandbox_confinement[i].needs_request;
		if ((part == SANDBOX_CONFINE_AHEAD && needs) ||
		    (part == SANDBOX_CONFINE_REQUESTED && !needs))
			continue;
		if (sandbox_confinement[i].take(&c) < 0)
			sandbox_fail(s, sandbox_confinement[i].step, 0);
	}
}

/* The program with its request; in namespace mode, init has already set ids, caps and mounts. */
static noreturn void
sandbox_program(const struct sandbox_spec *s)
{
	/* its own name from the fork on, so a profile tells its cost from init's (`make bench`
	 * splits a request's CPU by it); the interpreter or execve() names it python3 */
	(void)prctl(PR_SET_NAME, SANDBOX_PROGRAM_NAME);
	sandbox_confine(s, SANDBOX_CONFINE_ALL, -1);
	/* warm mode: the template's interpreter takes over here; if it cannot, exec as cold */
	if (s->enter != NULL)
		s->enter(s);
	execve(s->python, s->argv, s->envp);
	sandbox_fail(s, SANDBOX_EXEC, 0);
}

/*
 * Warm mode in a pid namespace: the program forked by init before the request. It takes the
 * confinement's steps that need no request, in the same order; then the interpreter prepares,
 * the request is taken (stdin, main.py), the rest of the steps follow, init is told the
 * result's size limit through handoff_fd, and the program entered. No code of the run executes
 * before every step is in force.
 */
noreturn void
sandbox_program_ahead(struct sandbox_spec *s, int handoff_fd)
{
	struct sandbox_handoff handoff;
	bool prepared;

	(void)prctl(PR_SET_NAME, SANDBOX_PROGRAM_NAME);
	sandbox_confine(s, SANDBOX_CONFINE_AHEAD, handoff_fd);
	prepared = s->prepare(s) == 0;

	/* the request: from here on the run's clock is running. A command runs in the
	 * workspace; enter() runs it if it is a plain Python invocation (pycmd.h), else the
	 * shell does, as cold */
	const struct sandbox_take take = {.dir = s->agent ? "/app" : NULL,
	                                  .stdin_now = true,
	                                  .command = s->agent,
	                                  .manifest = true};
	s->command = sandbox_take_request(s, &take);
	close(s->ctl_fd); /* init's again: the worker's 'S' */
	sandbox_confine(s, SANDBOX_CONFINE_REQUESTED, handoff_fd);
	handoff = (struct sandbox_handoff){s->max_result_bytes, (uint64_t)s->artifacts,
	                                   s->manifest_len, s->session_idle_ms, s->session_life_ms};
	if (util_write_all(handoff_fd, &handoff, sizeof(handoff)) < 0 ||
	    util_write_all(handoff_fd, s->manifest, s->manifest_len) < 0)
		sandbox_fail(s, SANDBOX_FORK, 1);
	close(handoff_fd);
	free(s->manifest);
	s->manifest = NULL;
	if (s->cell_fd >= 0) {
		/* a session: the cell loop, or nothing (there is no cold program to exec) */
		if (prepared && s->enter_session != NULL)
			s->enter_session(s);
		sandbox_fail(s, SANDBOX_EXEC, 0);
	}
	if (prepared)
		s->enter(s);
	if (s->agent)
		sandbox_as_shell(s, (char *)s->command);
	/* what is exec'd has only its own pages: the cold limit */
	if (s->as_exec_bytes && set_limit(RLIMIT_AS, s->as_exec_bytes, s->as_exec_bytes) < 0)
		sandbox_fail(s, SANDBOX_RLIMITS, 0);
	execve(s->python, s->argv, s->envp);
	sandbox_fail(s, SANDBOX_EXEC, 0);
}

noreturn void
sandbox_run_program(const struct sandbox_spec *spec)
{
	struct sandbox_spec s = *spec;

	/* no page of the pool's admission, metrics or audit trail in a run */
	util_unmap_shared();
	if (sandbox_wait_go(&s) < 0)
		sandbox_fail(&s, SANDBOX_WAIT, 0);
	/* direct mode runs programs only (an agent's command needs a mount namespace) */
	const struct sandbox_take take = {.dir = s.workdir, .set_ids = true};
	(void)sandbox_take_request(&s, &take);
	sandbox_program(&s);
}

/*
 * The program's pids start at 15/16 of the namespace's pid_max: with a per-namespace pid_max
 * (Linux >= 6.14, 4194304 by default) that is above any pid the host or a pod can have; on
 * older kernels it is at least far from the small pids a container's processes get.
 */
int
sandbox_high_pids(void)
{
	char buf[32];
	long max;
	ssize_t n;
	int fd;

	if (util_read_small("/proc/sys/kernel/pid_max", buf, sizeof(buf)) <= 0)
		return -1;
	max = strtol(buf, NULL, 10);
	if (max < 4096) {
		errno = ERANGE;
		return -1;
	}
	n = snprintf(buf, sizeof(buf), "%ld", max / 16 * 15);
	fd = open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = util_write_all(fd, buf, (size_t)n);
	close(fd);
	return (int)n;
}

/* In a mount namespace the run's directories exist only now: a ruleset of the run's own. */
int
sandbox_landlock(struct sandbox_spec *s)
{
	/* an agent run also writes its workspace */
	const char *rw[] = {s->workdir, "/tmp", "/var/tmp", "/dev/shm", "/app"};
	int fd = landlock_build(s->landlock_abi, rw, s->agent ? 5 : 4, s->python, false);

	if (fd < 0)
		return -1;
	if (s->landlock_fd >= 0)
		close(s->landlock_fd);
	s->landlock_fd = fd;
	return 0;
}

static int
sandbox_drop_caps(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];

	memset(data, 0, sizeof(data));
	return (int)syscall(SYS_capset, &hdr, data);
}

static void
sandbox_on_chld(int sig)
{
	(void)sig;
}

/*
 * Empties the stack below the caller's frame, where the mount steps left the host paths they
 * built: a program forked from here copies it. Its whole pages are given back to the kernel
 * (MADV_DONTNEED: read again, they are zero), not written: once a run's program has been
 * forked from this memory, every write to one of them would copy it, with a TLB flush, in the
 * template. The ends are zeroed. noinline, so that the array is below.
 */
__attribute__((noinline)) void
sandbox_scrub_stack(void)
{
	char below[128 * 1024];
	uintptr_t lo = ((uintptr_t)below + 4095) & ~(uintptr_t)4095,
	          hi = ((uintptr_t)below + sizeof(below)) & ~(uintptr_t)4095;

	if (madvise((void *)lo, hi - lo, MADV_DONTNEED) < 0)
		lo = hi = (uintptr_t)below + sizeof(below); /* zeroed whole, below */
	explicit_bzero(below, lo - (uintptr_t)below);
	explicit_bzero((char *)hi, (uintptr_t)below + sizeof(below) - hi);
	__asm__ volatile("" : : "r"(below) : "memory");
}

/* SIGCHLD is taken only inside ppoll() (init's mask for it into waitmask), so no exit is
 * missed; a handler, so that it interrupts ppoll() (the default action is ignore). */
void
sandbox_init_signals(sigset_t *waitmask)
{
	struct sigaction sa = {.sa_handler = sandbox_on_chld};
	sigset_t chld;

	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, waitmask);
	sigdelset(waitmask, SIGCHLD);
	sigemptyset(&sa.sa_mask);
	sigaction(SIGCHLD, &sa, NULL);
}

/*
 * Init's first phase: nothing of the pool's pages or fds, SIGCHLD taken only where init waits
 * (its mask for ppoll() into waitmask), its own name, parent death, and the worker's go.
 */
static void
sandbox_init_begin(const struct sandbox_spec *s, sigset_t *waitmask)
{
	/* no page of the pool's admission, metrics or audit trail in a run (a cold init is a
	 * copy of its worker) */
	util_unmap_shared();
	sandbox_init_signals(waitmask);
	{
		/* nothing of the worker (its FastCGI connection, the listen socket) stays in init
		 */
		int keep[] = {s->stdin_fd,    s->stdout_fd,    s->stderr_fd,
		              s->error_fd,    s->ctl_fd,       s->report_fd,
		              s->landlock_fd, s->workspace_fd, s->mounts ? s->mounts->etc_fd : -1,
		              s->session_fd};
		if (util_close_fds_except(keep, 10) < 0)
			sandbox_fail(s, SANDBOX_CLOSE_FDS, 0);
	}
	sandbox_retitle();
	if (!s->orphan_init && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		sandbox_fail(s, SANDBOX_PARENT_DEATH, 0);
	if (sandbox_wait_go(s) < 0)
		sandbox_fail(s, SANDBOX_WAIT, 0);
}

/* The last steps of init's confinement, and of the one-copy program's: the run's ids (when
 * ids), no capability (nothing a compromised program could borrow), not dumpable (its memory
 * unreadable through /proc), the working directory. */
void
sandbox_settle(const struct sandbox_spec *s, bool ids)
{
	if (ids && sandbox_ids(s) < 0)
		sandbox_fail(s, SANDBOX_IDS, 0);
	if (sandbox_drop_caps() < 0)
		sandbox_fail(s, SANDBOX_CAPS, 0);
	if (prctl(PR_SET_DUMPABLE, 0) < 0)
		sandbox_fail(s, SANDBOX_CAPS, 1);
	if (chdir(s->workdir) < 0)
		sandbox_fail(s, SANDBOX_CHDIR, 0);
}

/*
 * Init's second phase, once the worker has written the uid maps and moved it into the run's
 * cgroup: the run's view of the system, before its request exists, in this order.
 */
void
sandbox_init_confine(struct sandbox_spec *s)
{
	enum mounts_step mstep = 0;

	/* the OOM killer should take a run before anything else; inherited by the program */
	if (sandbox_oom_score() < 0)
		sandbox_fail(s, SANDBOX_OOM_SCORE, 0);
	/* the worker moved init into the run's group before the go: that becomes the root */
	if (s->cgroupns && unshare(CLONE_NEWCGROUP) < 0)
		sandbox_fail(s, SANDBOX_CGROUPNS, 0);
	if (s->uts && sethostname("codebox", 7) < 0)
		sandbox_fail(s, SANDBOX_HOSTNAME, 0);
	/*
	 * In a user namespace, switch ids first: init's host uid is not mapped inside, so files
	 * it created would have no owner (EOVERFLOW), and the switch keeps its capabilities
	 * (the namespace has no uid 0 whose loss would clear them). Without one, a root init
	 * mounts first, since becoming the run's host uid drops its capabilities.
	 */
	if (s->ids_before_mounts && sandbox_ids(s) < 0)
		sandbox_fail(s, SANDBOX_IDS, 0);
	if (s->mounts != NULL && mounts_build(s->mounts, &mstep) < 0)
		sandbox_fail(s, SANDBOX_MOUNTS, (int)mstep);
	if (s->mounts != NULL) {
		close(s->mounts->etc_fd);
		/* the host's path of the run's directory was only the new root's mount point:
		 * nothing the program copies of init (warm: its memory) may still hold it */
		explicit_bzero((char *)s->mounts->workdir, strlen(s->mounts->workdir));
		sandbox_scrub_stack();
	}
	if (s->high_pids && sandbox_high_pids() < 0)
		sandbox_fail(s, SANDBOX_PIDS, 0);
	if (s->mask_proc && mounts_mask(&mstep) < 0)
		sandbox_fail(s, SANDBOX_MOUNTS, (int)mstep);
	if (s->mounts != NULL && s->landlock_abi > 0 && sandbox_landlock(s) < 0)
		sandbox_fail(s, SANDBOX_LANDLOCK, 0);
	if (s->workspace_fd >= 0) {
		/* attached (or not): the program must never hold it */
		close(s->workspace_fd);
		s->workspace_fd = -1;
	}
	sandbox_settle(s, !s->ids_before_mounts);
}

/* Cold: init takes the request and forks the program. Returns the program's pid. */
static pid_t
sandbox_init_fork(struct sandbox_spec *s)
{
	char *command;
	pid_t prog;

	/* the sandbox is ready: from here on, it waits for its request. A command runs in the
	 * workspace; init keeps no file of its own there */
	const struct sandbox_take take = {
	    .dir = s->agent ? "/app" : NULL, .command = s->agent, .manifest = true};
	command = sandbox_take_request(s, &take);
	if (s->agent)
		sandbox_as_shell(s, command);
	prog = fork();
	if (prog < 0)
		sandbox_fail(s, SANDBOX_FORK, 0);
	if (prog == 0)
		sandbox_program(s);
	/* init keeps no end of the program's pipes: EOF must mean the run is over */
	close(s->stdin_fd);
	close(s->stdout_fd);
	close(s->stderr_fd);
	close(s->error_fd);
	return prog;
}

/*
 * Init's side of the program's handoff (the result's size limit, the artifacts wanted, the
 * inputs' manifest, a session's bounds), read from hp once the program has taken the request.
 * If the program ended before it, rep says how (or, when the worker gave the sandbox up, init
 * ends).
 */
void
sandbox_init_handoff(struct sandbox_spec *s, pid_t prog, int hp, struct sandbox_report *rep)
{
	struct sandbox_handoff handoff = {0, 0, 0, 0, 0};
	ssize_t r;
	int st;

	close(s->stdout_fd);
	close(s->stderr_fd);
	close(s->error_fd);
	/* until the program has read the request, the control pipe is its own */
	do
		r = read(hp, &handoff, sizeof(handoff));
	while (r < 0 && errno == EINTR);
	/* the manifest: bounded, and none unless the program said it wants the artifacts */
	if (r == (ssize_t)sizeof(handoff) && handoff.manifest_len > 0) {
		s->manifest = handoff.manifest_len <= FILES_MANIFEST_MAX && handoff.artifacts
		                  ? malloc(handoff.manifest_len)
		                  : NULL;
		if (s->manifest == NULL || read_full(hp, s->manifest, handoff.manifest_len) < 0) {
			free(s->manifest);
			s->manifest = NULL;
		} else {
			s->manifest_len = (size_t)handoff.manifest_len;
		}
	}
	close(hp);
	if (r != (ssize_t)sizeof(handoff)) {
		/* gone before the request: the worker gave the sandbox up (status 0),
		 * or a step failed (reported on the error pipe); report what happened */
		while (waitpid(prog, &st, 0) < 0 && errno == EINTR)
			;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
			_exit(0);
		rep->program_reaped = 1;
		rep->program_status = st;
	}
	s->max_result_bytes = (size_t)handoff.max_result_bytes;
	s->session_idle_ms = handoff.session_idle_ms;
	s->session_life_ms = handoff.session_life_ms;
	s->artifacts = handoff.artifacts == ARTIFACTS_ALL      ? ARTIFACTS_ALL
	               : handoff.artifacts == ARTIFACTS_IMAGES ? ARTIFACTS_IMAGES
	                                                       : ARTIFACTS_NONE;
}

/*
 * Warm: init forks the program now, and the program reads the request itself
 * (sandbox_program_ahead()). Returns the program's pid; if it ended before it handed init
 * the result's size limit, rep says how (or, when the worker gave the sandbox up, init ends).
 */
static pid_t
sandbox_init_fork_ahead(struct sandbox_spec *s, struct sandbox_report *rep, int *cell_fd)
{
	int hp[2], cp[2] = {-1, -1};
	pid_t prog;

	if (pipe2(hp, O_CLOEXEC) < 0)
		sandbox_fail(s, SANDBOX_FORK, 0);
	/* a session: init and its program talk over a socket of their own, cell by cell */
	if (s->session_fd >= 0 && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, cp) < 0)
		sandbox_fail(s, SANDBOX_FORK, 0);
	prog = fork();
	if (prog < 0)
		sandbox_fail(s, SANDBOX_FORK, 0);
	if (prog == 0) {
		close(hp[0]);
		if (s->session_fd >= 0) {
			/* the program never holds the session's socket */
			close(s->session_fd);
			close(cp[0]);
			s->cell_fd = cp[1];
		}
		sandbox_program_ahead(s, hp[1]);
	}
	close(hp[1]);
	if (s->session_fd >= 0) {
		close(cp[1]);
		*cell_fd = cp[0];
	}
	sandbox_init_handoff(s, prog, hp[0], rep);
	return prog;
}

/* Init waits until the program is reaped, or the worker says stop ('S', or EOF: it is gone). */
void
sandbox_init_wait(const struct sandbox_spec *s, pid_t prog, const sigset_t *waitmask,
                  struct sandbox_report *rep)
{
	while (!rep->program_reaped && !rep->stopped) {
		struct pollfd pfd = {.fd = s->ctl_fd, .events = POLLIN};
		struct timespec tick = {1, 0};
		pid_t p;
		int st;

		/* SIGCHLD interrupts the wait; the tick only bounds it */
		(void)ppoll(&pfd, 1, &tick, waitmask);
		while ((p = waitpid(-1, &st, WNOHANG)) > 0)
			if (p == prog) {
				rep->program_reaped = 1;
				rep->program_status = st;
			}
		if (!rep->program_reaped && (pfd.revents & (POLLIN | POLLHUP | POLLERR)))
			rep->stopped = 1; /* 'S', or EOF: the worker is gone */
	}
}

/*
 * pid 1's kill(-1) reaches every other process of the namespace. A process forked while
 * kill() walks the task list can be missed, so kill and reap until nothing is left (the
 * worker's stop deadline bounds this; past it the worker kills init, and the namespace).
 */
void
sandbox_init_kill_all(pid_t prog, struct sandbox_report *rep)
{
	for (;;) {
		struct timespec ms = {0, 1000 * 1000};
		pid_t p;
		int st;

		(void)kill(-1, SIGKILL);
		while ((p = waitpid(-1, &st, WNOHANG)) > 0)
			if (p == prog && !rep->program_reaped) {
				rep->program_reaped = 1;
				rep->program_status = st;
			}
		if (p < 0 && errno == ECHILD)
			break;
		(void)nanosleep(&ms, NULL);
	}
	(void)getrusage(RUSAGE_CHILDREN, &rep->children);
}

/* Init's last phase, with every other process of the run gone: reads result.json and the
 * files the program left from the working tmpfs, and sends the worker its report. */
noreturn void
sandbox_init_report(const struct sandbox_spec *s, struct sandbox_report *rep)
{
	char *json = NULL, *artifacts = NULL;
	size_t json_len = 0, artifacts_len = 0;
	int dirfd = s->agent ? -1 : open(s->workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (s->agent) {
		rep->result_status = RESULT_NONE; /* agents have no result.json */
	} else if (dirfd >= 0) {
		struct statvfs sv;
		if (s->mounts != NULL && fstatvfs(dirfd, &sv) == 0 && sv.f_bavail == 0)
			rep->disk_full = 1;
		rep->result_status =
		    (int32_t)result_read(dirfd, s->max_result_bytes, &json, &json_len);
		/* the files the program left (all of it is gone: nothing changes them now) */
		(void)artifacts_collect(dirfd, s->manifest, s->manifest_len, s->artifacts,
		                        &artifacts, &artifacts_len);
		close(dirfd);
	} else {
		rep->result_status = RESULT_OPEN_FAILED;
	}
	rep->result_len = (uint32_t)json_len;
	rep->artifacts_len = (uint32_t)artifacts_len;
	if (util_write_all(s->report_fd, rep, sizeof(*rep)) == 0 &&
	    util_write_all(s->report_fd, json, json_len) == 0)
		(void)util_write_all(s->report_fd, artifacts, artifacts_len);
	_exit(0);
}

noreturn void
sandbox_init(const struct sandbox_spec *spec)
{
	struct sandbox_spec spec_copy = *spec, *s = &spec_copy;
	struct sandbox_report rep = {.magic = SANDBOX_REPORT_MAGIC};
	sigset_t waitmask;
	pid_t prog;
	int cell_fd = -1;

	sandbox_init_begin(s, &waitmask);
	sandbox_init_confine(s);
	/* warm: the program is forked before the request and reads it itself */
	prog =
	    s->prepare != NULL ? sandbox_init_fork_ahead(s, &rep, &cell_fd) : sandbox_init_fork(s);
	if (cell_fd >= 0 && !rep.program_reaped && s->init_session != NULL)
		s->init_session(s, prog, cell_fd, &waitmask);
	sandbox_init_wait(s, prog, &waitmask, &rep);
	sandbox_init_kill_all(prog, &rep);
	sandbox_init_report(s, &rep);
}
