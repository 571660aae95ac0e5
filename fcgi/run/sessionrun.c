/*
 * sessionrun.c - a session's parent side (sessionrun.h): what the worker does to create a
 * session, to run an execution in it, to ask its init something and to remove it. A session's
 * box is built as a run's (run.h) and its executions are watched as runs are; its init's
 * side, the cell loop and the socket server, is sessioninit.c's.
 */
#include "run/sessionrun.h"

#include "core/buf.h"
#include "core/cellout.h"
#include "core/log.h"
#include "run/report.h"
#include "box/sandbox.h"
#include "core/sessionproto.h"
#include "core/util.h"
#include "run/workdir.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* Sends a session's init one message (and fds), and reads its answer (and init's pidfd, for
 * an execution) within SESSION_ANSWER_MS. Returns 0, or -1 when it does not serve. */
static int
sessionrun_ask_blob(int conn, enum session_op op, unsigned blob_max, const int *fds, int n,
                    struct session_answer *a, int *pidfd)
{
	struct session_msg m = {SESSION_MSG_MAGIC, (uint32_t)op, blob_max, 0};
	int got;

	if (util_send_fds(conn, &m, sizeof(m), fds, n, 0) < 0 ||
	    util_wait_readable(conn, RUN_SESSION_ANSWER_MS) != 1)
		return -1;
	got = util_recv_fds(conn, a, sizeof(*a), pidfd, pidfd ? 1 : 0, 0);
	if (got < 0 || a->magic != SESSION_MSG_MAGIC || !a->ok || (pidfd && got != 1)) {
		if (pidfd && got == 1)
			util_close_fd(pidfd);
		/* a cell still ending (its client left, its worker died): busy, not gone */
		if (got >= 0 && a->magic == SESSION_MSG_MAGIC && a->busy)
			errno = EBUSY;
		else
			errno = ENOENT;
		return -1;
	}
	return 0;
}

static int
sessionrun_ask(int conn, enum session_op op, const int *fds, int n, struct session_answer *a,
               int *pidfd)
{
	return sessionrun_ask_blob(conn, op, 0, fds, n, a, pidfd);
}

int
run_session_ask(const char *path, enum session_op op, struct session_answer *a)
{
	int conn = run_session_connect(path), rc;

	if (conn < 0) {
		if (errno == EAGAIN)
			errno = EBUSY; /* its backlog is full: it lives */
		return -1;
	}
	rc = sessionrun_ask(conn, op, NULL, 0, a, NULL);
	close(conn);
	return rc;
}

int
run_session_ask_on(int conn, enum session_op op, struct session_answer *a)
{
	return sessionrun_ask(conn, op, NULL, 0, a, NULL);
}

int
run_session_workdir(const char *path, struct session_answer *a)
{
	int conn = run_session_connect(path), fd = -1;

	if (conn < 0) {
		if (errno == EAGAIN)
			errno = EBUSY;
		return -1;
	}
	if (sessionrun_ask(conn, SESSION_OP_WORKDIR, NULL, 0, a, &fd) < 0)
		fd = -1;
	close(conn);
	return fd;
}

int
run_session_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/* init takes one connection at a time; its backlog holds the others. A full backlog
	 * would block connect() without end: the send timeout bounds it (EAGAIN: busy) */
	struct timeval tv = {RUN_SESSION_ANSWER_MS / 1000, 0};
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int
run_session_create(const struct run_config *cfg, const struct run_spec *spec, int listen_fd,
                   const char *sock_path, int sb_parent_fd, const char *sb_parent,
                   struct run_session_box *sb, char *why, size_t why_len)
{
	struct run_config scfg = *cfg;
	struct run_box box;
	struct run_outcome fault = {0};
	bool warm_failed = false;
	struct session_answer a;
	int rc = -1;

	memset(sb, 0, sizeof(*sb));
	scfg.work_parent_fd = sb_parent_fd;
	scfg.work_parent = sb_parent;
	if (!cfg->warm || cfg->clone_flags == 0) {
		snprintf(why, why_len, "sessions need warm interpreters, which this host has not");
		errno = ENOTSUP;
		return -1;
	}
	/* a template that cannot clone now (the heavy one renewed, or restarting) is waited
	 * for, a bounded time: the session is never started on a tier without its modules */
	for (long long until = util_now_ms() + RUN_SESSION_TIER_WAIT_MS;;) {
		if (run_box_build_once(&scfg, &spec->caps, listen_fd, &box, true, &warm_failed,
		                       &fault, why, why_len) < 0)
			return -1;
		if (box.warm)
			break;
		run_box_discard(&scfg, &box);
		if (util_now_ms() >= until) {
			snprintf(why, why_len,
			         "no %s template could start the session within %d ms",
			         spec->caps.heavy ? "heavy" : "warm", RUN_SESSION_TIER_WAIT_MS);
			errno = EAGAIN;
			return -1;
		}
		struct timespec pause = {0, 200 * 1000 * 1000};
		nanosleep(&pause, NULL);
	}
	if (run_box_send(&box, spec, &scfg) < 0) {
		snprintf(why, why_len, "handing the session its bounds failed");
		goto out;
	}
	/* ready once its init answers on the socket: by then its program waits for cells */
	{
		long long deadline = util_now_ms() + RUN_SESSION_READY_MS;
		int conn = run_session_connect(sock_path);
		struct session_msg m = {SESSION_MSG_MAGIC, SESSION_OP_PING, 0, 0};

		if (conn >= 0 && util_send_fds(conn, &m, sizeof(m), NULL, 0, 0) == 0) {
			for (;;) {
				struct pollfd p[2] = {{.fd = conn, .events = POLLIN},
				                      {.fd = box.pidfd, .events = POLLIN}};
				long long left = deadline - util_now_ms();
				if (left <= 0 || poll(p, 2, (int)left) <= 0)
					break;
				if (p[0].revents) {
					rc = util_recv_fds(conn, &a, sizeof(a), NULL, 0, 0) == 0 &&
					             a.magic == SESSION_MSG_MAGIC && a.ok
					         ? 0
					         : -1;
					break;
				}
				if (p[1].revents)
					break; /* init died before it served */
			}
		}
		if (conn >= 0)
			close(conn);
	}
	if (rc < 0) {
		struct sandbox_failure f;
		if (read(box.fail_r, &f, sizeof(f)) == (ssize_t)sizeof(f))
			snprintf(why, why_len, "the session's sandbox failed while %s: %s",
			         sandbox_step_string((enum sandbox_step)f.step), strerror(f.err));
		else
			snprintf(why, why_len, "the session did not start within %d ms",
			         RUN_SESSION_READY_MS);
		goto out;
	}
	/* v1: no worker watches the session between executions: the kernel's killer does */
	if (box.cg.active && cgroup_run_kernel_oom(&box.cg) < 0)
		log_msg(LOG_WARN, "the session's group keeps the kernel's OOM killer off: %s",
		        strerror(errno));
	/* it is the session's now: nothing of it is the worker's but its record */
	sb->cg = box.cg;
	if (sb->cg.active && sb->cg.oom_fd >= 0)
		close(sb->cg.oom_fd);
	sb->cg.oom_fd = -1;
	box.cg.active = false;
	snprintf(sb->dir, sizeof(sb->dir), "%s", box.wd.name);
	sb->heavy = box.tier == RUN_TIER_HEAVY;
	if (box.wd.fd >= 0)
		close(box.wd.fd);
	run_box_close_fds(&box);
	return 0;
out:
	run_box_discard(&scfg, &box);
	return -1;
}

void
run_session_remove(int sb_parent_fd, struct run_session_box *sb)
{
	if (sb->cg.active) {
		sb->cg.oom_fd = -1;
		/* its uid is given to another session once its record is gone: nothing of this
		 * one may run under it then */
		cgroup_run_kill(&sb->cg, "a process left by an ended session");
		cgroup_run_remove(&sb->cg);
	}
	if (sb->dir[0] != '\0') {
		if (workdir_remove_tree(sb_parent_fd, sb->dir) < 0 && errno != ENOENT)
			log_msg(LOG_WARN, "removing a session's directory %s failed: %s", sb->dir,
			        strerror(errno));
		sb->dir[0] = '\0';
	}
}

/* A session's execution that ran to its end (w, its box): its outcome, from its init's report
 * and f (its cgroup's events). Returns 0, or -1 when its init ended without a word for a reason
 * not the program's (fault set: the session is over). */
static int
session_execution_outcome(struct run_watch *w, const struct run_box *box,
                          const struct run_spec *spec, struct outcome_facts *f,
                          struct run_outcome *out, char *why, size_t why_len)
{
	f->have_status = true;
	f->wait_status = w->main_status;
	f->stopped = w->timed_out;
	f->oom_stopped = box->oom_stopped;
	if (!w->reported || !report_read(&w->rb, spec->max_result_bytes, f, out)) {
		/* init died without a word: the session is over. The OOM killer's doing is
		 * the program's; any other kill came from outside */
		f->have_status = false;
		out->result_status = RESULT_NONE;
		out->session_over = true;
		if (!w->timed_out && !f->oom && !box->oom_stopped) {
			out->fault = RUN_FAULT_LOST;
			snprintf(why, why_len, "%s", "the session's init ended before it reported");
			return -1;
		}
	}
	outcome_classify(f, out);
	out->duration_ms = util_now_ms() - w->t0;
	out->tier = box->tier;
	if (box->cg.active) {
		/* the session's peak so far: its memory is held across executions */
		unsigned long long peak = cgroup_run_peak_bytes(&box->cg);
		if (peak > 0)
			out->max_rss_bytes = (long long)peak;
	}
	return 0;
}

/* the execution's box: the session's init (named by its pidfd only: its pid is 1 in its
 * namespace), the worker's ends of the four pipes (taken out of p) and the session's cgroup */
static void
session_box_take(struct run_box *box, int p[4][2], int pidfd, const struct run_session_box *sb,
                 const struct run_spec *spec)
{
	memset(box, 0, sizeof(*box));
	box->active = box->ns_mode = box->foreign = box->warm = true;
	box->pid = 1;
	box->pidfd = pidfd;
	box->out_r = p[0][0];
	box->err_r = p[1][0];
	box->ctl_w = p[2][1];
	box->rep_r = p[3][0];
	box->fail_r = -1;
	box->wd.fd = -1;
	box->cg = sb->cg;
	/* v1: the worker stops the execution at its first OOM, as a run's; v2: memory.oom.group
	 * kills the session, and its init with it */
	cgroup_run_arm_oom(&box->cg);
	box->caps = spec->caps;
	box->tier = sb->heavy ? RUN_TIER_HEAVY : RUN_TIER_LIGHT;
	p[0][0] = p[1][0] = p[2][1] = p[3][0] = -1;
	(void)fcntl(box->out_r, F_SETFL, O_NONBLOCK);
	(void)fcntl(box->err_r, F_SETFL, O_NONBLOCK);
	(void)fcntl(box->rep_r, F_SETFL, O_NONBLOCK);
}

/* The cell's answer (cellout.h) from what its program sent, or from its output. */
static void
session_cell_doc(struct run_outcome *out)
{
	size_t ol = 0, el = 0;
	char *o = capture_utf8(&out->out, &ol), *e = capture_utf8(&out->err, &el);
	char note[128] = "";

	if (out->cell_dropped)
		snprintf(note, sizeof(note),
		         "codebox: the cell's outputs exceeded %u bytes and are left out\n",
		         SESSION_CELL_MAX);
	out->cell_doc = cellout_render(out->cell, out->cell_len, o, ol, e, el,
	                               note[0] ? note : NULL, &out->cell_doc_len);
	free(o);
	free(e);
}

int
run_session_execute(const struct run_config *cfg, const struct run_spec *spec, int conn,
                    const struct run_session_box *sb, struct run_outcome *out, char *why,
                    size_t why_len)
{
	int p[4][2] = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};
	struct session_answer a;
	struct run_box box;
	struct run_watch w;
	struct outcome_facts f = {0};
	int rc, pidfd = -1;
	bool oom_before = false, pids_before = false;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < 4; i++)
		if (pipe2(p[i], O_CLOEXEC) < 0) {
			run_set_fault(out, RUN_FAULT_OTHER, why, why_len,
			              "could not create the pipes");
			rc = -1;
			goto close_pipes;
		}
	{
		int child[SESSION_FDS + 1] = {[SESSION_FD_STDOUT] = p[0][1],
		                              [SESSION_FD_STDERR] = p[1][1],
		                              [SESSION_FD_CONTROL] = p[2][0],
		                              [SESSION_FD_REPORT] = p[3][1],
		                              [SESSION_FD_BLOB] = spec->session_blob_fd};
		bool blob = spec->session_op != 0;
		if (sessionrun_ask_blob(conn, blob ? spec->session_op : SESSION_OP_EXECUTE,
		                        blob ? spec->session_blob_max : 0, child,
		                        SESSION_FDS + (blob ? 1 : 0), &a, &pidfd) < 0) {
			rc = errno == EBUSY ? RUN_SESSION_BUSY : RUN_SESSION_GONE;
			goto close_pipes;
		}
	}
	for (int i = 0; i < 4; i++)
		util_close_fd(&p[i][i == 2 ? 0 : 1]);
	session_box_take(&box, p, pidfd, sb, spec);
	if (box.cg.active)
		cgroup_run_events(&box.cg, &oom_before, &pids_before);

	memset(&w, 0, sizeof(w));
	w.box = &box;
	w.session = true;
	w.client_fd = spec->watch_client ? spec->client_fd : -1;
	w.t0 = util_now_ms();
	w.on_output = spec->on_output;
	w.output_ctx = spec->output_ctx;
	w.rb.max = sizeof(struct sandbox_report) + spec->max_result_bytes +
	           (spec->artifacts != ARTIFACTS_NONE ? ARTIFACTS_BLOB_MAX : 0) +
	           SESSION_VALUE_MAX + SESSION_CELL_MAX + 1;
	if (capture_init(&out->out, spec->max_stdout_bytes) < 0 ||
	    capture_init(&out->err, spec->max_stderr_bytes) < 0) {
		run_set_fault(out, RUN_FAULT_OTHER, why, why_len,
		              "out of memory for the output buffers");
		rc = -1;
		goto close_box;
	}
	if (run_box_send(&box, spec, cfg) < 0) {
		rc = RUN_SESSION_GONE;
		goto close_box;
	}
	w.deadline = util_now_ms() + spec->wall_ms;
	rc = run_watch(&w, out, why, why_len);
	if (rc == 0 && out->abandoned) {
		/* the client left: the cell is interrupted, the session lives on if it ends */
		if (write(box.ctl_w, "S", 1) < 0) {
			/* init is gone already */
		}
		goto close_box;
	}
	if (box.cg.active) {
		cgroup_run_events(&box.cg, &f.oom, &f.pids_max);
		/* the counts are the session's: only what this execution added is its own */
		f.oom = f.oom && !oom_before;
		f.pids_max = f.pids_max && !pids_before;
	}
	if (rc == 0)
		rc = session_execution_outcome(&w, &box, spec, &f, out, why, why_len);
	if (rc == 0)
		session_cell_doc(out);
close_box:
	buf_free(&w.rb.b);
	box.pid = -1;
	util_close_fd(&box.cg.oom_fd);
	box.cg.active = false; /* the session's, not this execution's */
	run_box_close_fds(&box);
close_pipes:
	for (int i = 0; i < 4; i++) {
		util_close_fd(&p[i][0]);
		util_close_fd(&p[i][1]);
	}
	return rc;
}
