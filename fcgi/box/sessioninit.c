/*
 * sessioninit.c - a session's init: once its program (interp.c's cell loop, fcgi/box/cell.py)
 * waits for cells, init serves the session's listening socket (sessionproto.h) one connection
 * at a time: an execution (or a snapshot, or a restore) hands the cell to the program over the
 * cell socket and reports it to the worker as a run's init reports a run; a ping, a workdir,
 * an interrupt and a close are answered here. Reached through the spec's init_session hook
 * (sandbox.h), as the program's enter is: sandbox.c knows nothing of it.
 */
#include "box/sessioninit.h"

#include "core/files.h"
#include "core/result.h"
#include "core/sessionproto.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* The program's CPU time so far (its own and its reaped children's), in ms, and its minor
 * faults, from /proc/<prog>/stat (0 without a /proc). */
static void
session_prog_use(pid_t prog, long long *cpu_ms, long *minflt)
{
	char path[64], buf[1024], *p;
	unsigned long long f[18] = {0};
	long tick = sysconf(_SC_CLK_TCK);
	ssize_t n;
	int fd;

	*cpu_ms = 0;
	*minflt = 0;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)prog);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	/* the fields after the name, which may hold anything but ends at the last ')' */
	p = strrchr(buf, ')');
	if (p == NULL || tick <= 0)
		return;
	p++;
	/* f[3] is the state's field (3); minflt is field 10, utime..cstime 14..17 */
	for (int i = 3; i <= 17 && p != NULL && *p; i++) {
		while (*p == ' ')
			p++;
		f[i] = strtoull(p, &p, 10);
		if (i == 3) { /* the state is a letter */
			p = strchr(p, ' ');
		}
	}
	*minflt = (long)f[10];
	*cpu_ms = (long long)((f[14] + f[15] + f[16] + f[17]) * 1000 / (unsigned long long)tick);
}

/* The request's buffers, whatever sandbox_read_request() left. */
static void
session_input_free(struct sandbox_input *in)
{
	free(in->code);
	free(in->input);
	free(in->files);
	memset(in, 0, sizeof(*in));
}

/* Writes the cell's inputs (main.py, the files, a memfd of stdin); returns the stdin fd, or
 * -1 with errno. What an earlier cell left at those paths is replaced, never followed. */
static int
session_cell_inputs(struct sandbox_spec *s, struct sandbox_input *in)
{
	int fd, stdin_fd, rc;

	stdin_fd = sandbox_make_stdin(in->input, in->input_len);
	if (stdin_fd < 0)
		return -1;
	(void)unlink("main.py");
	(void)unlink("result.json");
	fd = open("main.py", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	rc = fd < 0 ? -1 : util_write_all(fd, in->code, in->code_len);
	if (fd >= 0)
		close(fd);
	if (rc == 0 && in->files_len > 0)
		rc = files_write_over(AT_FDCWD, in->files, in->files_len, true);
	if (rc == 0 && s->artifacts && in->files_len > 0)
		rc = files_manifest(in->files, in->files_len, &s->manifest, &s->manifest_len);
	if (rc < 0) {
		int e = errno;
		close(stdin_fd);
		errno = e;
		return -1;
	}
	return stdin_fd;
}

/* Answers WORKDIR on conn: a with an O_PATH fd of the working directory, or not ok. */
static void
session_send_workdir(int conn, const char *workdir, struct session_answer *a)
{
	int dfd = open(workdir, O_PATH | O_DIRECTORY | O_CLOEXEC);

	a->ok = a->ok && dfd >= 0;
	(void)util_send_fds(conn, a, sizeof(*a), &dfd, dfd >= 0 ? 1 : 0, 0);
	if (dfd >= 0)
		close(dfd);
}

/* A connection to the session's socket while a cell runs: PING (busy), INTERRUPT (SIGINT into
 * the program), CLOSE (the session ends with the cell), WORKDIR (the worker's file operations
 * go on meanwhile); another execution is refused. Returns whether it was CLOSE. */
static bool
sandbox_session_aside(int session_fd, const char *workdir, pid_t prog,
                      const struct session_answer *base)
{
	int fds[SESSION_FDS + 1] = {-1, -1, -1, -1, -1}, n, conn;
	struct session_answer a = *base;
	struct session_msg m;
	struct timeval tv = {2, 0};
	bool close_it = false;

	conn = accept4(session_fd, NULL, NULL, SOCK_CLOEXEC);
	if (conn < 0)
		return false;
	(void)setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	n = util_recv_fds(conn, &m, sizeof(m), fds, SESSION_FDS + 1, 0);
	a.busy = 1;
	if (n != 0 || m.magic != SESSION_MSG_MAGIC) {
		a.ok = 0;
	} else if (m.op == SESSION_OP_INTERRUPT) {
		a.interrupted = kill(prog, SIGINT) == 0;
	} else if (m.op == SESSION_OP_CLOSE) {
		close_it = true;
	} else if (m.op == SESSION_OP_WORKDIR) {
		session_send_workdir(conn, workdir, &a);
		close(conn);
		return false;
	} else if (m.op != SESSION_OP_PING) {
		a.ok = 0; /* one execution at a time */
	}
	(void)util_send_fds(conn, &a, sizeof(a), NULL, 0, 0);
	for (int i = 0; i < n && i < SESSION_FDS + 1; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	close(conn);
	return close_it;
}

/* How a cell ended, in rep: the session over (everything of it killed, no value), or the
 * cell's exit code and the CPU and faults its program spent since cpu0 and flt0. */
static void
session_cell_end(pid_t prog, bool over, int exit_code, long long cpu0, long flt0,
                 struct sandbox_report *rep)
{
	long long cpu1;
	long flt1;

	session_prog_use(prog, &cpu1, &flt1);
	if (over) {
		sandbox_init_kill_all(prog, rep);
		rep->session_over = 1;
		rep->has_value = 0;
		rep->value_len = 0;
		return;
	}
	rep->program_reaped = 1;
	rep->program_status = (exit_code & 0xff) << 8;
	rep->children.ru_utime.tv_sec = (time_t)((cpu1 - cpu0) / 1000);
	rep->children.ru_utime.tv_usec = (suseconds_t)((cpu1 - cpu0) % 1000 * 1000);
	rep->children.ru_minflt = flt1 - flt0;
}

/* The mark a cell's artifacts are found by, before it writes anything (its inputs neither). */
static void
session_cell_mark(const struct sandbox_spec *s, struct artifacts_mark *mark)
{
	int dirfd;

	if (s->artifacts == ARTIFACTS_NONE) {
		/* nothing is collected: the clock alone, no walk */
		(void)clock_gettime(CLOCK_REALTIME_COARSE, &mark->since);
		return;
	}
	dirfd = open(s->workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0 || artifacts_mark(dirfd, mark) < 0)
		(void)clock_gettime(CLOCK_REALTIME_COARSE, &mark->since);
	if (dirfd >= 0)
		close(dirfd);
}

/* A cell's report to its worker: rep (its end), then what it left: result.json, the files
 * changed since its mark, its value (rep's value_len bytes) and its JSON (cell_len). */
static void
session_cell_report(const struct sandbox_spec *s, const int *fds, struct sandbox_report *rep,
                    const struct artifacts_mark *mark, const char *value, const char *cell)
{
	size_t json_len = 0, artifacts_len = 0;
	char *json = NULL, *artifacts = NULL;
	int dirfd;

	if (rep->session_over) {
		/* its program is gone: whatever it sent of the cell is not its outputs' */
		rep->cell_len = 0;
		rep->cell_dropped = 0;
	}

	dirfd = open(s->workdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd >= 0) {
		struct statvfs sv;
		if (s->mounts != NULL && fstatvfs(dirfd, &sv) == 0 && sv.f_bavail == 0)
			rep->disk_full = 1;
		rep->result_status =
		    (int32_t)result_read(dirfd, s->max_result_bytes, &json, &json_len);
		(void)artifacts_collect_since(dirfd, s->manifest, s->manifest_len, s->artifacts,
		                              mark, &artifacts, &artifacts_len);
		close(dirfd);
	} else {
		rep->result_status = RESULT_OPEN_FAILED;
	}
	rep->result_len = (uint32_t)json_len;
	rep->artifacts_len = (uint32_t)artifacts_len;
	if (util_write_all(fds[SESSION_FD_REPORT], rep, sizeof(*rep)) == 0 &&
	    util_write_all(fds[SESSION_FD_REPORT], json, json_len) == 0 &&
	    util_write_all(fds[SESSION_FD_REPORT], artifacts, artifacts_len) == 0 &&
	    util_write_all(fds[SESSION_FD_REPORT], value, rep->value_len) == 0)
		(void)util_write_all(fds[SESSION_FD_REPORT], cell, rep->cell_len);
	free(json);
	free(artifacts);
}

/* The program's answer to a cell: one message (done and the value) with at most one fd, the
 * cell's JSON in a memfd. Returns the message's length (0: the program closed its end), or -1
 * (nothing there yet, or a broken message). */
static ssize_t
session_recv_done(int cell_fd, char *msg, size_t cap, int *memfd)
{
	char cbuf[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {.iov_base = msg, .iov_len = cap};
	struct msghdr mh = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	ssize_t n;

	*memfd = -1;
	n = recvmsg(cell_fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t got = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		const int *p = (const int *)CMSG_DATA(c);
		for (size_t i = 0; i < got; i++) {
			if (*memfd < 0)
				*memfd = p[i];
			else
				close(p[i]);
		}
	}
	return n;
}

/* The cell's JSON from the program's memfd (untrusted: a regular file, at most
 * SESSION_CELL_MAX bytes, read without blocking on anything else), or NULL; closes memfd. */
static char *
session_cell_json(int memfd, struct sandbox_report *rep)
{
	struct stat st;
	char *p = NULL;

	if (memfd < 0)
		return NULL;
	if (fstat(memfd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
		if ((unsigned long long)st.st_size > SESSION_CELL_MAX) {
			rep->cell_dropped = 1;
		} else if ((p = malloc((size_t)st.st_size)) != NULL) {
			size_t got = 0;
			while (got < (size_t)st.st_size) {
				ssize_t r =
				    pread(memfd, p + got, (size_t)st.st_size - got, (off_t)got);
				if (r < 0 && errno == EINTR)
					continue;
				if (r <= 0)
					break;
				got += (size_t)r;
			}
			rep->cell_len = (uint32_t)got;
		}
	}
	close(memfd);
	return p;
}

/* The program's answer, if one is there: done and its value (msg, of cap bytes, holds it;
 * value points into it) into rep, and the cell's JSON (cell_json, replaced). Returns whether
 * the cell ended; *over is set when the program closed its end (it cannot serve on). */
static bool
session_cell_answer(int cell_fd, char *msg, size_t cap, struct session_cell_done *done,
                    struct sandbox_report *rep, const char **value, char **cell_json, bool *over)
{
	int memfd;
	ssize_t n = session_recv_done(cell_fd, msg, cap, &memfd);
	bool ended = false;

	if (n >= (ssize_t)sizeof(*done)) {
		free(*cell_json);
		*cell_json = session_cell_json(memfd, rep);
		memfd = -1;
		memcpy(done, msg, sizeof(*done));
		if (done->has_value && done->value_len <= (size_t)n - sizeof(*done) &&
		    done->value_len <= SESSION_VALUE_MAX) {
			*value = msg + sizeof(*done);
			rep->value_len = done->value_len;
			rep->has_value = 1;
		}
		ended = true;
	} else if (n == 0) {
		*over = ended = true; /* it closed its end: it cannot serve on */
	}
	if (memfd >= 0)
		close(memfd);
	return ended;
}

/* The cell's fd 0 and kind: a code cell's inputs written (its stdin), or, for a snapshot or a
 * restore (no code, no files), a copy of the worker's memfd. Returns the fd, or -1 (errno). */
static int
session_cell_begin(struct sandbox_spec *s, const struct session_msg *m, const int *fds,
                   struct sandbox_input *in, struct session_cell *cell, struct artifacts_mark *mark)
{
	if (m->op == SESSION_OP_EXECUTE) {
		session_cell_mark(s, mark);
		return session_cell_inputs(s, in);
	}
	(void)clock_gettime(CLOCK_REALTIME_COARSE, &mark->since);
	cell->kind = m->op == SESSION_OP_SNAPSHOT ? SESSION_CELL_SNAPSHOT : SESSION_CELL_RESTORE;
	cell->blob_max = m->op == SESSION_OP_SNAPSHOT ? m->blob_max : 0;
	return fcntl(fds[SESSION_FD_BLOB], F_DUPFD_CLOEXEC, 0);
}

/*
 * One cell: the request from the control pipe into the working directory, the cell to the
 * program, then its end, the worker's stop (SIGINT into the program: a KeyboardInterrupt; the
 * session is killed if the cell does not end within SESSION_INTERRUPT_MS) or the program's
 * death, and the report. The session's lifetime ends at life_until (CLOCK_MONOTONIC ms) even
 * while the cell runs: the cell is stopped as at its deadline, and the session ends with it.
 * Returns whether the session lives on.
 */
static bool
sandbox_session_cell(struct sandbox_spec *s, pid_t prog, int cell_fd, const int *fds,
                     const sigset_t *waitmask, const struct session_answer *base,
                     long long life_until, const struct session_msg *m)
{
	struct sandbox_report rep = {.magic = SANDBOX_REPORT_MAGIC};
	struct sandbox_input in = {0};
	struct session_cell cell = {SESSION_MSG_MAGIC, SESSION_VALUE_MAX, SESSION_CELL_CODE, 0};
	struct session_cell_done done = {0};
	size_t cap = sizeof(done) + SESSION_VALUE_MAX + 1;
	char *msg;
	const char *value = NULL;
	char *cell_json = NULL;
	long long cpu0, interrupt_at = 0;
	long flt0;
	struct artifacts_mark mark = {{0, 0}, NULL, 0};
	bool over = false, ended = false, too_old = false;
	int stdin_fd;

	free(s->manifest);
	s->manifest = NULL;
	s->manifest_len = 0;
	if (sandbox_read_request(fds[SESSION_FD_CONTROL], s, &in) < 0) {
		session_input_free(&in);
		return true; /* the worker gave it up before it began: nothing ran */
	}
	stdin_fd = session_cell_begin(s, m, fds, &in, &cell, &mark);
	session_input_free(&in);
	msg = malloc(cap);
	if (stdin_fd < 0 || msg == NULL) {
		/* nothing ran: the cell fails as a program would, with its reason */
		dprintf(fds[SESSION_FD_STDERR],
		        "codebox: the cell's files could not be written: %s\n", strerror(errno));
		if (stdin_fd >= 0)
			close(stdin_fd);
		rep.program_reaped = 1;
		rep.program_status = 1 << 8;
		rep.result_status = RESULT_NONE;
		(void)util_write_all(fds[SESSION_FD_REPORT], &rep, sizeof(rep));
		free(msg);
		artifacts_mark_free(&mark);
		return true;
	}
	session_prog_use(prog, &cpu0, &flt0);
	{
		int cfds[3] = {stdin_fd, fds[SESSION_FD_STDOUT], fds[SESSION_FD_STDERR]};
		if (util_send_fds(cell_fd, &cell, sizeof(cell), cfds, 3, 0) < 0)
			over = ended = true; /* the program is gone */
	}
	close(stdin_fd);
	while (!ended) {
		struct pollfd pfd[3] = {
		    {.fd = cell_fd, .events = POLLIN},
		    {.fd = interrupt_at ? -1 : fds[SESSION_FD_CONTROL], .events = POLLIN},
		    {.fd = s->session_fd, .events = POLLIN}};
		struct timespec tick = {0, 100 * 1000 * 1000};
		pid_t p;
		int st;

		(void)ppoll(pfd, 3, &tick, waitmask);
		if ((pfd[2].revents & POLLIN) &&
		    sandbox_session_aside(s->session_fd, s->workdir, prog, base)) {
			/* closed while it ran: the session ends with this cell */
			over = ended = true;
			continue;
		}
		while ((p = waitpid(-1, &st, WNOHANG)) > 0)
			if (p == prog) {
				rep.program_reaped = 1;
				rep.program_status = st;
				over = ended = true;
			}
		if (!ended && (pfd[0].revents & POLLIN)) {
			ended = session_cell_answer(cell_fd, msg, cap, &done, &rep, &value,
			                            &cell_json, &over);
		} else if (!ended && (pfd[0].revents & (POLLHUP | POLLERR))) {
			over = ended = true;
		}
		too_old = too_old || util_now_ms() >= life_until;
		if (!ended && !interrupt_at &&
		    (too_old || (pfd[1].revents & (POLLIN | POLLHUP | POLLERR)))) {
			/* 'S' (the deadline), EOF (the worker is gone) or the session's lifetime
			 * over: interrupt the cell */
			rep.stopped = 1;
			(void)kill(prog, SIGINT);
			interrupt_at = util_now_ms();
		}
		if (!ended && interrupt_at && util_now_ms() - interrupt_at >= SESSION_INTERRUPT_MS)
			over = ended = true;
	}
	/* past its lifetime the session ends with the cell, whatever the cell did */
	over = over || too_old;
	session_cell_end(prog, over, done.exit_code, cpu0, flt0, &rep);
	session_cell_report(s, fds, &rep, &mark, value, cell_json);
	artifacts_mark_free(&mark);
	free(cell_json);
	free(msg);
	return !over;
}

/* Answers one connection to the session's socket. Returns whether the session lives on. */
static bool
sandbox_session_serve(struct sandbox_spec *s, int conn, pid_t prog, int cell_fd,
                      const sigset_t *waitmask, long long start, long long *last,
                      uint64_t *executions)
{
	struct session_msg m;
	int fds[SESSION_FDS + 1] = {-1, -1, -1, -1, -1}, n, self;
	struct timeval tv = {2, 0};
	long long now = util_now_ms();
	struct session_answer a = {.magic = SESSION_MSG_MAGIC,
	                           .ok = 1,
	                           .executions = *executions,
	                           .idle_ms = now - *last,
	                           .age_ms = now - start,
	                           .idle_limit_ms = s->session_idle_ms,
	                           .life_limit_ms = s->session_life_ms};
	bool live = true;

	/* a worker sends at once and reads at once: none may hold the session */
	(void)setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	(void)setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	n = util_recv_fds(conn, &m, sizeof(m), fds, SESSION_FDS + 1, 0);
	if (n < 0 || m.magic != SESSION_MSG_MAGIC) {
		n = n < 0 ? 0 : n;
		a.ok = 0;
		(void)util_send_fds(conn, &a, sizeof(a), NULL, 0, 0);
	} else if ((m.op == SESSION_OP_EXECUTE && n == SESSION_FDS) ||
	           ((m.op == SESSION_OP_SNAPSHOT || m.op == SESSION_OP_RESTORE) &&
	            n == SESSION_FDS + 1)) {
		/* the worker watches the session through it, and kills it through it */
		self = (int)syscall(SYS_pidfd_open, getpid(), 0);
		if (self < 0) {
			a.ok = 0; /* no pidfd to watch it by: not taken */
			(void)util_send_fds(conn, &a, sizeof(a), NULL, 0, 0);
		} else if (util_send_fds(conn, &a, sizeof(a), &self, 1, 0) == 0) {
			live = sandbox_session_cell(s, prog, cell_fd, fds, waitmask, &a,
			                            start + s->session_life_ms, &m);
			(*executions)++;
		}
		if (self >= 0)
			close(self);
		*last = util_now_ms();
	} else if (m.op == SESSION_OP_WORKDIR && n == 0) {
		session_send_workdir(conn, s->workdir, &a);
	} else {
		live = !(m.op == SESSION_OP_CLOSE && n == 0);
		/* INTERRUPT between cells: nothing runs, nothing to do */
		a.ok = (m.op == SESSION_OP_PING || m.op == SESSION_OP_CLOSE ||
		        m.op == SESSION_OP_INTERRUPT) &&
		       n == 0;
		if (!live) {
			/* closed: nothing of it is left but init when the worker hears so */
			struct sandbox_report end = {0};
			sandbox_init_kill_all(prog, &end);
		}
		(void)util_send_fds(conn, &a, sizeof(a), NULL, 0, 0);
	}
	for (int i = 0; i < n && i < SESSION_FDS + 1; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return live;
}

/*
 * A session's init, once its program waits for cells: serves the session's socket, one
 * connection at a time, until it is closed, its program dies, or it has been idle or alive
 * for longer than its bounds; then kills everything of it and ends (the worker that finds it
 * gone removes its directory and cgroup). The creating worker's pipes are not needed: it
 * learns the session is ready from a PING answered here.
 */
noreturn void
sessioninit_serve(struct sandbox_spec *s, pid_t prog, int cell_fd, const sigset_t *waitmask)
{
	long long start = util_now_ms(), last = start;
	uint64_t executions = 0;
	struct sandbox_report end = {0};

	signal(SIGPIPE, SIG_IGN); /* a worker gone mid-report must not end the session */
	close(s->ctl_fd);
	close(s->report_fd);
	s->ctl_fd = s->report_fd = -1;
	(void)fcntl(s->session_fd, F_SETFL, O_NONBLOCK);
	for (;;) {
		long long now = util_now_ms(), until = last + s->session_idle_ms, wait;
		struct pollfd pfd[2] = {{.fd = s->session_fd, .events = POLLIN},
		                        {.fd = cell_fd, .events = POLLIN}};
		struct timespec ts;
		bool gone = false;
		pid_t p;
		int st, conn;

		if (start + s->session_life_ms < until)
			until = start + s->session_life_ms;
		if (now >= until)
			break;
		wait = until - now < 1000 ? until - now : 1000;
		ts = (struct timespec){wait / 1000, (wait % 1000) * 1000 * 1000};
		(void)ppoll(pfd, 2, &ts, waitmask);
		while ((p = waitpid(-1, &st, WNOHANG)) > 0)
			if (p == prog)
				gone = true;
		if (pfd[1].revents) {
			/* the program speaks only when asked: what it sends between cells is
			 * dropped, and its end closed means it cannot serve on */
			char junk[256];
			if (recv(cell_fd, junk, sizeof(junk), MSG_DONTWAIT) == 0 ||
			    (pfd[1].revents & (POLLHUP | POLLERR)))
				gone = true;
		}
		if (gone)
			break;
		if (!(pfd[0].revents & POLLIN))
			continue;
		conn = accept4(s->session_fd, NULL, NULL, SOCK_CLOEXEC);
		if (conn < 0)
			continue;
		bool live = sandbox_session_serve(s, conn, prog, cell_fd, waitmask, start, &last,
		                                  &executions);
		close(conn);
		if (!live)
			break;
	}
	close(s->session_fd);
	sandbox_init_kill_all(prog, &end);
	_exit(0);
}
