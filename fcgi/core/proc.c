/*
 * proc.c - the kill helper and the sweep that leaves no process of a run behind.
 *
 * A run may setsid() a daemon out of its process group, double-fork so that the daemon's
 * parent is gone, or fork as fast as it can. The worker is a child subreaper, so every orphan
 * of a run becomes the worker's child instead of init's. Killing the worker's direct children
 * is race-free: a child's pid cannot be reused until the worker itself reaps it, so a pid read
 * from /proc/self/task/<tid>/children still names the same process when kill() runs. Each
 * round kills every direct child; their children are reparented to the worker and die in the
 * next round. A fork racing with SIGKILL is cancelled by the kernel (copy_process checks for
 * a pending fatal signal), so the rounds converge.
 */
#include "core/proc.h"

#include "core/log.h"
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int
proc_kill(pid_t target, int sig, const char *what)
{
	if (kill(target, sig) == 0 || errno == ESRCH)
		return 0;
	log_msg(LOG_ERROR, "kill(%d, %d) failed while killing %s: %s", (int)target, sig, what,
	        strerror(errno));
	return -1;
}

int
proc_children_of(pid_t pid, pid_t *pids, int max)
{
	char path[64], buf[4096];
	int n = 0;

	if (pid > 0)
		snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", (long)pid, (long)pid);
	else
		snprintf(path, sizeof(path), "/proc/self/task/%ld/children",
		         (long)syscall(SYS_gettid));
	/* one bounded read; more children than fit are found in the next round */
	if (util_read_small(path, buf, sizeof(buf)) < 0)
		return -1;
	for (char *p = buf; *p && n < max;) {
		char *endp;
		long v = strtol(p, &endp, 10);
		/* a number cut by the buffer's end is no pid: the next round has it */
		if (endp == p || (*endp != ' ' && *endp != '\n'))
			break;
		if (v > 0)
			pids[n++] = (pid_t)v;
		p = endp;
		while (*p == ' ' || *p == '\n')
			p++;
	}
	return n;
}

/* Reaps every child that has exited. Returns the number reaped, or -1 on ECHILD (none left). */
static int
proc_reap(pid_t main_pid, bool *main_reaped, int *main_status, struct rusage *main_ru)
{
	int reaped = 0;

	for (;;) {
		struct rusage ru;
		int status;
		pid_t p = wait4(-1, &status, WNOHANG | __WALL, &ru);
		if (p > 0) {
			if (p == main_pid && !*main_reaped) {
				*main_reaped = true;
				*main_status = status;
				*main_ru = ru;
			}
			reaped++;
			continue;
		}
		if (p < 0 && errno == EINTR)
			continue;
		if (p < 0 && errno == ECHILD)
			return -1;
		return reaped;
	}
}

int
proc_kill_all_children(pid_t pgid, pid_t main_pid, bool *main_reaped, int *main_status,
                       struct rusage *main_ru, long long deadline_ms)
{
	static bool warned;
	pid_t pids[256];

	if (pgid > 0)
		proc_kill(-pgid, SIGKILL, "the run's process group");
	for (;;) {
		if (proc_reap(main_pid, main_reaped, main_status, main_ru) < 0)
			return 0; /* no child left */
		int n = proc_children_of(0, pids, (int)(sizeof(pids) / sizeof(pids[0])));
		if (n < 0) {
			if (!warned) {
				log_msg(LOG_WARN,
				        "no /proc/self/task/*/children: only the process group "
				        "is killed");
				warned = true;
			}
			n = 0;
		}
		for (int i = 0; i < n; i++)
			proc_kill(pids[i], SIGKILL, "a process left by a run");
		if (util_now_ms() >= deadline_ms)
			break;
		/* SIGKILLed processes need a moment to exit; wait for the next one to change */
		(void)poll(NULL, 0, n > 0 ? 1 : 5);
	}
	log_msg(LOG_ERROR, "processes of a run are still alive after the kill deadline");
	return -1;
}
