/*
 * run.c - the parent side of one run.
 *
 * Theory of operation
 *
 *   worker ── fork ──▶ child ── sandbox_enter() ──▶ execve(python3 -I -u main.py)
 *
 * Before fork the worker prepares everything the child needs (the working directory with
 * main.py, a memfd holding stdin, the argv and environment arrays), because between fork and
 * execve the child may only make system calls. Three pipes connect them:
 *
 *   stdout, stderr  the program's output; the worker drains both with poll() into bounded
 *                   captures, reading and discarding bytes past the limits so the program
 *                   never blocks on a full pipe.
 *   error pipe      close-on-exec; EOF means execve() succeeded, a struct sandbox_failure
 *                   means a setup step failed (the sandbox's fault: a 500, not an outcome).
 *
 * The program's exit is watched through a pidfd in the same poll() call, against a deadline
 * on CLOCK_MONOTONIC. Who kills whom: the worker kills, always through proc.c, on every path:
 *
 *   - the program exits: the worker kills the rest of its process group and every orphan
 *     (the worker is a child subreaper), so children that keep the pipes open cannot hold the
 *     reply hostage; then it drains what is left in the pipes, briefly;
 *   - the deadline passes: the same kill, and the run is timed_out with its partial output;
 *   - setup fails, or the worker's own code fails: the same kill.
 *
 * Only when nothing of the run is alive does the worker read result.json (so the file cannot
 * change while it is read) and remove the directory. durationMs runs from the creation of the
 * directory to the result being read.
 */
#include "run.h"

#include "log.h"
#include "proc.h"
#include "sandbox.h"
#include "workdir.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* After the program ends, how long leftover output may take to drain. */
#define RUN_DRAIN_MS 1000
/* How long the kill sweep may take before the worker gives up on a process (logged). */
#define RUN_KILL_MS 3000
/* Reads of one pipe per wake-up, so a flood on one stream cannot starve the other. */
#define RUN_READS_PER_WAKE 16

int
run_init_reaper(void)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
		log_msg(LOG_ERROR, "prctl(PR_SET_CHILD_SUBREAPER) failed: %s", strerror(errno));
		return -1;
	}
	return 0;
}

static void
close_fd(int *fd)
{
	if (*fd >= 0) {
		close(*fd);
		*fd = -1;
	}
}

static int
stdin_memfd(const char *data, size_t len)
{
	int fd = memfd_create("codebox-stdin", MFD_CLOEXEC);

	if (fd < 0)
		return -1;
	while (len > 0) {
		ssize_t w = write(fd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			close(fd);
			return -1;
		}
		data += w;
		len -= (size_t)w;
	}
	if (lseek(fd, 0, SEEK_SET) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Drains what is available on *fd into c; closes it at EOF. */
static void
drain(int *fd, struct capture *c)
{
	char buf[65536];

	for (int i = 0; i < RUN_READS_PER_WAKE && *fd >= 0; i++) {
		ssize_t r = read(*fd, buf, sizeof(buf));
		if (r > 0) {
			capture_append(c, buf, (size_t)r);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		close_fd(fd); /* EOF, or an error that will not go away */
	}
}

int
run_execute(const struct run_config *cfg, const struct run_spec *spec, struct run_outcome *out,
            char *why, size_t why_len)
{
	struct workdir wd = {.fd = -1};
	int in_fd = -1, out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, ctl_p[2] = {-1, -1};
	int pidfd = -1;
	pid_t pid = -1;
	bool main_reaped = false, timed_out = false, setup_failed = false;
	int main_status = 0, rc = -1;
	struct rusage ru = {0};
	struct sandbox_failure failure = {0};
	long long t0, deadline, drain_deadline = 0;
	char home[4200], tmpdir[4200];

	memset(out, 0, sizeof(*out));
	if (capture_init(&out->out, spec->max_stdout_bytes) < 0 ||
	    capture_init(&out->err, spec->max_stderr_bytes) < 0) {
		snprintf(why, why_len, "out of memory for the output buffers");
		return -1;
	}
	t0 = proc_now_ms();
	if (workdir_create(&wd, cfg->runs_dir_fd, cfg->runs_dir, cfg->drop_privileges, cfg->run_uid,
	                   cfg->run_gid, spec->code, spec->code_len) < 0) {
		snprintf(why, why_len, "could not create the run's working directory");
		return -1;
	}
	in_fd = stdin_memfd(spec->stdin_data, spec->stdin_len);
	if (in_fd < 0 || pipe2(out_p, O_CLOEXEC) < 0 || pipe2(err_p, O_CLOEXEC) < 0 ||
	    pipe2(ctl_p, O_CLOEXEC) < 0) {
		snprintf(why, why_len, "could not create the run's pipes: %s", strerror(errno));
		goto out;
	}

	snprintf(home, sizeof(home), "HOME=%s", wd.path);
	snprintf(tmpdir, sizeof(tmpdir), "TMPDIR=%s", wd.path);
	char *const envp[] = {
	    "PATH=/usr/local/bin:/usr/bin:/bin",
	    home,
	    tmpdir,
	    "LANG=C.UTF-8",
	    "OPENBLAS_NUM_THREADS=1",
	    "OMP_NUM_THREADS=1",
	    "MKL_NUM_THREADS=1",
	    NULL,
	};
	char *const argv[] = {(char *)cfg->python, "-I", "-u", "main.py", NULL};
	struct sandbox_spec sb = {
	    .stdin_fd = in_fd,
	    .stdout_fd = out_p[1],
	    .stderr_fd = err_p[1],
	    .error_fd = ctl_p[1],
	    .workdir = wd.path,
	    .python = cfg->python,
	    .argv = argv,
	    .envp = envp,
	    .drop_privileges = cfg->drop_privileges,
	    .uid = cfg->run_uid,
	    .gid = cfg->run_gid,
	    .parent_pid = getpid(),
	    /* a backstop only: CPU time can exceed wall time only with threads */
	    .cpu_limit_seconds = spec->wall_ms / 1000 + 2,
	};

	pid = fork();
	if (pid < 0) {
		snprintf(why, why_len, "fork() failed: %s", strerror(errno));
		goto out;
	}
	if (pid == 0)
		sandbox_enter(&sb);

	close_fd(&in_fd);
	close_fd(&out_p[1]);
	close_fd(&err_p[1]);
	close_fd(&ctl_p[1]);
	(void)fcntl(out_p[0], F_SETFL, O_NONBLOCK);
	(void)fcntl(err_p[0], F_SETFL, O_NONBLOCK);
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0); /* close-on-exec by definition */
	deadline = t0 + spec->wall_ms;

	for (;;) {
		struct pollfd pfd[4];
		int n = 0, i_out = -1, i_err = -1, i_ctl = -1, i_pid = -1;
		long long now = proc_now_ms(), until;

		bool ended = main_reaped || timed_out;

		if (ended && out_p[0] < 0 && err_p[0] < 0)
			break;
		if (!ended && now >= deadline) {
			timed_out = true;
			proc_kill_all_children(pid, pid, &main_reaped, &main_status, &ru,
			                       now + RUN_KILL_MS);
			drain_deadline = proc_now_ms() + RUN_DRAIN_MS;
			continue;
		}
		if (ended && now >= drain_deadline)
			break;
		until = ended ? drain_deadline : deadline;
		if (out_p[0] >= 0) {
			i_out = n;
			pfd[n++] = (struct pollfd){.fd = out_p[0], .events = POLLIN};
		}
		if (err_p[0] >= 0) {
			i_err = n;
			pfd[n++] = (struct pollfd){.fd = err_p[0], .events = POLLIN};
		}
		if (ctl_p[0] >= 0) {
			i_ctl = n;
			pfd[n++] = (struct pollfd){.fd = ctl_p[0], .events = POLLIN};
		}
		if (!ended && pidfd >= 0) {
			i_pid = n;
			pfd[n++] = (struct pollfd){.fd = pidfd, .events = POLLIN};
		}
		long long wait_ms = until - now;
		if (pidfd < 0 && !ended && wait_ms > 10)
			wait_ms = 10; /* no pidfd (kernel < 5.3): check the child every 10 ms */
		if (poll(pfd, (nfds_t)n, (int)wait_ms) < 0 && errno != EINTR) {
			snprintf(why, why_len, "poll() failed: %s", strerror(errno));
			goto out;
		}
		if (i_out >= 0 && pfd[i_out].revents)
			drain(&out_p[0], &out->out);
		if (i_err >= 0 && pfd[i_err].revents)
			drain(&err_p[0], &out->err);
		if (i_ctl >= 0 && pfd[i_ctl].revents) {
			ssize_t r = read(ctl_p[0], &failure, sizeof(failure));
			if (r == (ssize_t)sizeof(failure))
				setup_failed = true;
			if (r != -1 || errno != EINTR)
				close_fd(&ctl_p[0]);
		}
		if (!ended && (pidfd < 0 || (i_pid >= 0 && pfd[i_pid].revents))) {
			int st;
			struct rusage r1;
			pid_t p = wait4(pid, &st, WNOHANG, &r1);
			if (p == pid) {
				main_reaped = true;
				main_status = st;
				ru = r1;
			}
		}
		if (main_reaped && drain_deadline == 0) {
			/* the program ended: nothing it started may keep the pipes open */
			proc_kill_all_children(pid, pid, &main_reaped, &main_status, &ru,
			                       proc_now_ms() + RUN_KILL_MS);
			drain_deadline = proc_now_ms() + RUN_DRAIN_MS;
		}
	}
	rc = 0;
out:
	/* every exit path: nothing of the run may outlive this function */
	if (pid > 0)
		proc_kill_all_children(pid, pid, &main_reaped, &main_status, &ru,
		                       proc_now_ms() + RUN_KILL_MS);
	close_fd(&pidfd);
	close_fd(&in_fd);
	close_fd(&out_p[0]);
	close_fd(&out_p[1]);
	close_fd(&err_p[0]);
	close_fd(&err_p[1]);
	close_fd(&ctl_p[0]);
	close_fd(&ctl_p[1]);
	if (rc == 0 && setup_failed) {
		snprintf(why, why_len, "sandbox setup failed while %s: %s",
		         sandbox_step_string((enum sandbox_step)failure.step),
		         strerror(failure.err));
		rc = -1;
	}
	if (rc == 0) {
		if (timed_out) {
			out->status = RUN_TIMED_OUT;
			out->has_exit_code = false;
			out->term_signal = SIGKILL;
			out->limit_exceeded = RUN_LIMIT_TIME;
		} else if (WIFEXITED(main_status)) {
			out->has_exit_code = true;
			out->exit_code = WEXITSTATUS(main_status);
			out->status = out->exit_code == 0 ? RUN_SUCCEEDED : RUN_FAILED;
		} else {
			out->has_exit_code = true;
			out->term_signal =
			    WIFSIGNALED(main_status) ? WTERMSIG(main_status) : SIGKILL;
			out->exit_code = -out->term_signal;
			out->status = RUN_FAILED;
		}
		out->cpu_ms = (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
		              (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
		out->max_rss_bytes = (long long)ru.ru_maxrss * 1024;
		out->result_status =
		    result_read(wd.fd, spec->max_result_bytes, &out->result_json, &out->result_len);
		out->duration_ms = proc_now_ms() - t0;
	}
	if (workdir_remove(&wd, cfg->runs_dir_fd) < 0 && rc == 0) {
		/* the outcome is still true; the leftover is logged by workdir_remove */
	}
	return rc;
}
