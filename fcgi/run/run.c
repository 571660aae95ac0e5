/*
 * run.c - the parent side of one run.
 *
 * docs/DESIGN.md tells the process model ("One run": the three shapes, the box built ahead,
 * the pipes, who kills whom; "Warm interpreters"; "The trust boundary"); this is a map of the
 * file. One run, in three phases that share one struct run_watch:
 *
 *   run_start()    take the stream's box built ahead if its caps fit (else build one,
 *                  box_build(): cloned by the worker, or by a template of the tier the last
 *                  request needed, warm_box_clone()), hand it the request (run_box_send():
 *                  the code, stdin, the input files); a box that died while it waited is
 *                  rebuilt once
 *   run_watch()    poll the output, error, report and client pipes, the pidfd and the OOM
 *                  eventfd against the deadline; stop at the deadline, the first OOM or a
 *                  client's hang-up (the run is then abandoned)
 *   run_collect()  kill what is left, read init's report (the program's status, the stop, a
 *                  full disk, the rusage, result.json, the artifacts) or, in direct mode,
 *                  result.json and the artifacts; the cgroup's events; classify
 *                  (outcome_classify(), pure and unit-tested); tear the box down
 *
 * run_never_began() runs the three phases once more when a box built ahead died before it read
 * the request. What is kept between runs is a struct run_stream its caller owns, never a file
 * static. Nothing the run started is alive when run_execute() returns; init's own exit (a
 * copy of an address space) is reaped after the reply, by run_stream_finish().
 *
 * A session's parent side (sessionrun.c) builds its box and watches its executions with this
 * file's box and watch (run.h); init's report is read by report.c.
 */
#include "run/run.h"

#include "core/buf.h"
#include "core/files.h"

#include "run/cgroup.h"
#include "box/child.h"
#include "core/jsonw.h"
#include "core/limits.h"
#include "core/log.h"
#include "core/proc.h"
#include "run/report.h"
#include "box/sandbox.h"
#include "box/seccomp.h"
#include "core/userns.h"
#include "core/util.h"
#include "warm/warm.h"
#include "run/workdir.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* After the program ends, how long leftover output may take to drain. */
#define RUN_DRAIN_MS 1000
/* How long the kill sweep may take before the worker gives up on a process (logged). */
#define RUN_KILL_MS 3000
/* After 'S', how long init may take to kill the rest, read the result and report. */
#define RUN_STOP_MS 3000

int
run_kill_grace_seconds(void)
{
	/* namespace mode's worst case after the deadline: init's stop, then SIGKILL of init and
	 * its reaping, the pipes' drain, the last sweep; then a second to read the result and
	 * reply. Direct mode needs less (a sweep, the drain, a sweep). */
	int ms = RUN_STOP_MS + RUN_KILL_MS + RUN_DRAIN_MS + RUN_KILL_MS;

	return (ms + 999) / 1000 + 1;
}

int
run_init_reaper(void)
{
	if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
		log_msg(LOG_ERROR, "prctl(PR_SET_CHILD_SUBREAPER) failed: %s", strerror(errno));
		return -1;
	}
	return 0;
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
		util_close_fd(fd); /* EOF, or an error that will not go away */
	}
}

/* drain() of stdout (which 0) or stderr (1), and what it kept to the watcher's on_output */
static void
drain_watched(int *fd, struct capture *c, int which,
              void (*on_output)(void *ctx, int which, const char *p, size_t n), void *ctx)
{
	size_t before = c->len;

	drain(fd, c);
	if (on_output != NULL && c->len > before)
		on_output(ctx, which, c->buf + before, c->len - before);
}

/* The user namespace's maps: the run's one inner uid and gid onto its host ones (a root
 * pool's run uid, else the pool's own). */
static int
write_id_maps(const struct run_config *cfg, pid_t pid)
{
	return userns_write_maps(pid, SANDBOX_INNER_ID,
	                         cfg->drop_privileges ? cfg->run_uid : geteuid(),
	                         cfg->drop_privileges ? cfg->run_gid : getegid());
}

/*
 * The sandbox's fault: what failed, then what a module below reported (f, its errno kept from
 * its site), or, without f, errno as it is now (call it at the failure site then).
 */
static void
set_fault_from(struct run_outcome *out, enum run_fault fault, char *why, size_t why_len,
               const char *what, const struct fault *f)
{
	char detail[400];

	if (out != NULL)
		out->fault = fault;
	snprintf(why, why_len, "%s: %s", what,
	         f != NULL ? util_fault_string(f, detail, sizeof(detail)) : strerror(errno));
}

void
run_set_fault(struct run_outcome *out, enum run_fault fault, char *why, size_t why_len,
              const char *what)
{
	set_fault_from(out, fault, why, why_len, what, NULL);
}

struct run_spec
run_spec_from_limits(const struct limits *l, const char *code, size_t code_len, long wall_ms,
                     int client_fd)
{
	return (struct run_spec){
	    .code = code,
	    .code_len = code_len,
	    .stdin_data = "",
	    .wall_ms = wall_ms,
	    .max_stdout_bytes = l->max_stdout_bytes,
	    .max_stderr_bytes = l->max_stderr_bytes,
	    .max_result_bytes = l->max_result_bytes,
	    .caps =
	        {
	            .memory_bytes = l->memory_bytes,
	            .max_processes = l->max_processes,
	            .disk_bytes = l->disk_bytes,
	            .cpu_millicores = l->cpu_millicores,
	        },
	    .watch_client = true,
	    .client_fd = client_fd,
	};
}

static bool
box_fits(const struct run_box *box, const struct run_caps *caps)
{
	return box->active && box->caps.memory_bytes == caps->memory_bytes &&
	       box->caps.max_processes == caps->max_processes &&
	       box->caps.disk_bytes == caps->disk_bytes &&
	       box->caps.cpu_millicores == caps->cpu_millicores && box->caps.heavy == caps->heavy &&
	       box->caps.warm_command == caps->warm_command;
}

void
run_box_close_fds(struct run_box *box)
{
	util_close_fd(&box->pidfd);
	util_close_fd(&box->out_r);
	util_close_fd(&box->err_r);
	util_close_fd(&box->fail_r);
	util_close_fd(&box->ctl_w);
	util_close_fd(&box->rep_r);
}

/* Kills everything of the box: in direct mode its process group and every process reparented
 * to the worker; in namespace mode its init, which takes the whole namespace with it. */
static void
box_kill(struct run_box *box, bool *main_reaped, int *main_status, struct rusage *ru)
{
	if (box->pid > 0 && box->foreign) {
		/* init dies, and the kernel kills the rest of its namespace before it is gone */
		long long deadline = util_now_ms() + RUN_KILL_MS;

		if (*main_reaped)
			return;
		(void)syscall(SYS_pidfd_send_signal, box->pidfd, SIGKILL, NULL, 0);
		for (;;) {
			struct pollfd p = {.fd = box->pidfd, .events = POLLIN};
			long long left = deadline - util_now_ms();
			int r = poll(&p, 1, left > 0 ? (int)left : 0);

			if (r > 0) {
				*main_reaped = true;
				*main_status = SIGKILL; /* as a wait status: killed by SIGKILL */
				memset(ru, 0, sizeof(*ru));
				return;
			}
			if (r == 0) {
				log_msg(
				    LOG_ERROR,
				    "a run's init (pid %d) is still alive after the kill deadline",
				    (int)box->pid);
				return;
			}
			if (errno != EINTR)
				return;
		}
	}
	if (box->pid > 0 && box->ns_mode) {
		/* init dies, and the kernel kills the rest of its namespace with it; nothing of the
		 * run can be outside it. The worker's other children (the other port's box built
		 * ahead) are not this run's: only init is killed and reaped */
		long long deadline = util_now_ms() + RUN_KILL_MS;

		if (*main_reaped)
			return;
		proc_kill(box->pid, SIGKILL, "a run's init");
		for (;;) {
			struct pollfd p = {.fd = box->pidfd, .events = POLLIN};
			long long left = deadline - util_now_ms();
			pid_t r = wait4(box->pid, main_status, WNOHANG | __WALL, ru);

			if (r == box->pid || (r < 0 && errno == ECHILD)) {
				if (r < 0) { /* reaped already: killed, as far as anyone knows */
					*main_status = SIGKILL;
					memset(ru, 0, sizeof(*ru));
				}
				*main_reaped = true;
				return;
			}
			if (left <= 0) {
				log_msg(
				    LOG_ERROR,
				    "a run's init (pid %d) is still alive after the kill deadline",
				    (int)box->pid);
				return;
			}
			/* no pidfd (kernel < 5.3): look again in 10 ms */
			(void)poll(&p, box->pidfd >= 0 ? 1 : 0, box->pidfd >= 0 ? (int)left : 10);
		}
	}
	if (box->pid > 0)
		proc_kill_all_children(box->pid, box->pid, main_reaped, main_status, ru,
		                       util_now_ms() + RUN_KILL_MS);
}

/* Kills what is left of the box's processes and removes its directory; its cgroup is removed
 * too, or, given spent, handed there to be removed after the reply. */
static void
box_teardown(const struct run_config *cfg, struct run_box *box, bool *main_reaped, int *main_status,
             struct rusage *ru, struct cgroup_run *spent)
{
	box_kill(box, main_reaped, main_status, ru);
	run_box_close_fds(box);
	if (spent != NULL && box->cg.active) {
		cgroup_run_remove(spent);
		*spent = box->cg;
		box->cg.active = false;
	}
	cgroup_run_remove(&box->cg);
	(void)workdir_remove(&box->wd, cfg->work_parent_fd); /* a leftover is logged there */
	box->active = false;
	box->pid = -1;
}

void
run_box_discard(const struct run_config *cfg, struct run_box *box)
{
	bool reaped = false;
	int st;
	struct rusage ru;

	if (box->active)
		box_teardown(cfg, box, &reaped, &st, &ru, NULL);
}

/* A box's pipes, as pairs: stdout, stderr, error, control, and (namespace mode) report. */
static int
box_pipes_open(int p[5][2], bool ns_mode)
{
	for (int i = 0; i < (ns_mode ? 5 : 4); i++)
		if (pipe2(p[i], O_CLOEXEC) < 0)
			return -1;
	return 0;
}

static void
box_pipes_close(int p[5][2])
{
	for (int i = 0; i < 5; i++) {
		util_close_fd(&p[i][0]);
		util_close_fd(&p[i][1]);
	}
}

/* The box takes the worker's ends of its pipes p (the child's are closed); the ends it reads
 * do not block. */
static void
box_take_pipes(struct run_box *box, int p[5][2])
{
	for (int i = 0; i < 5; i++)
		util_close_fd(&p[i][i == 3 ? 0 : 1]);
	box->out_r = p[0][0];
	box->err_r = p[1][0];
	box->fail_r = p[2][0];
	box->ctl_w = p[3][1];
	box->rep_r = p[4][0];
	p[0][0] = p[1][0] = p[2][0] = p[3][1] = p[4][0] = -1;
	(void)fcntl(box->out_r, F_SETFL, O_NONBLOCK);
	(void)fcntl(box->err_r, F_SETFL, O_NONBLOCK);
	(void)fcntl(box->fail_r, F_SETFL, O_NONBLOCK);
	if (box->rep_r >= 0)
		(void)fcntl(box->rep_r, F_SETFL, O_NONBLOCK);
}

/*
 * A warm box: a template clones init (as its own child; the worker gets a pidfd). A heavy
 * program the heavy tier cannot take now gets the light one (it imports the rest), and the
 * light one's failure means a cold run: box->pid stays -1, and the box has new pipes (an init
 * a template may still clone onto the old ones reads EOF from the control pipe and ends).
 * Returns 0, or -1 when the new pipes could not be made (fault set).
 */
static int
box_clone_warm(const struct run_config *cfg, const struct run_caps *caps, int session_fd,
               struct run_box *box, int p[5][2], struct child_spec *child,
               struct run_outcome *fault, char *why, size_t why_len)
{
	/* one bound for both tiers' answers: the heavy tier has most of it, and a heavy
	 * template that does not answer leaves the light one time to */
	long long t0 = util_now_ms();

	/* a session is promised the heavy tier's modules: never the light one (its creation
	 * waits for the heavy template instead, run_session_create()) */
	int lowest = session_fd >= 0 && caps->heavy ? 1 : 0;

	for (int heavy = caps->heavy; box->pid < 0 && heavy >= lowest; heavy--) {
		int fds[CHILD_FD_COUNT] = {p[0][1], p[1][1], p[2][1], p[3][0], p[4][1]};
		char wwhy[256];
		bool serving = warm_serving();

		box->pid = warm_box_clone(cfg, heavy, session_fd, box->wd.path, caps->disk_bytes,
		                          fds, t0 + (heavy ? WARM_HEAVY_ANSWER_MS : WARM_ANSWER_MS),
		                          &box->as_base_bytes, &box->pidfd, wwhy, sizeof(wwhy));
		if (box->pid > 0) {
			box->warm = box->foreign = true;
			box->tier = heavy ? RUN_TIER_HEAVY : RUN_TIER_LIGHT;
			if (caps->heavy && !heavy)
				box->fallback = RUN_FALLBACK_LIGHT;
			break;
		}
		box->fallback = serving ? RUN_FALLBACK_TEMPLATE : RUN_FALLBACK_NO_ZYGOTE;
		log_msg(LOG_WARN, "the %s template failed (%s); this %s", heavy ? "heavy" : "light",
		        wwhy,
		        heavy > lowest    ? "run is on the light one"
		        : session_fd >= 0 ? "session waits for it"
		                          : "run is cold");
		/* it may still clone onto the pipes it was sent: the fallback gets new ones
		 * (an init on the old ones reads EOF from the control pipe and ends) */
		box_pipes_close(p);
		if (box_pipes_open(p, true) < 0) {
			run_set_fault(fault, RUN_FAULT_OTHER, why, why_len,
			              "could not create the run's pipes");
			return -1;
		}
		child_set_fds(child,
		              (int[CHILD_FD_COUNT]){p[0][1], p[1][1], p[2][1], p[3][0], p[4][1]});
	}
	return 0;
}

/*
 * One attempt of box_build() (below); a template may clone the child only when allow_warm.
 * On failure, *warm_failed says whether a template had cloned it.
 */
int
run_box_build_once(const struct run_config *cfg, const struct run_caps *caps, int session_fd,
                   struct run_box *box, bool allow_warm, bool *warm_failed,
                   struct run_outcome *fault, char *why, size_t why_len)
{
	int p[5][2] = {{-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}, {-1, -1}};
	int *out_p = p[0], *err_p = p[1], *fail_p = p[2], *ctl_p = p[3], *rep_p = p[4];
	bool ns_mode = cfg->clone_flags != 0;
	char cg_name[80];
	static struct child_spec child; /* large; the worker is single-threaded */
	struct fault f = {"", 0};

	memset(box, 0, sizeof(*box));
	box->pid = -1;
	box->wd.fd = -1;
	box->pidfd = box->out_r = box->err_r = box->fail_r = box->ctl_w = box->rep_r = -1;
	box->ns_mode = ns_mode;
	box->caps = *caps;
	if (workdir_create(&box->wd, cfg->work_parent_fd, cfg->work_parent, cfg->drop_privileges,
	                   cfg->run_uid, cfg->run_gid, &f) < 0) {
		set_fault_from(fault, RUN_FAULT_OTHER, why, why_len,
		               "could not create the run's working directory", &f);
		return -1;
	}
	box->active = true;
	if (cfg->cgroup != NULL) {
		/* a session's outlives its worker: named apart from what a worker sweeps */
		if (session_fd >= 0)
			snprintf(cg_name, sizeof(cg_name), "s-%s", box->wd.name);
		else
			snprintf(cg_name, sizeof(cg_name), "w%d-%s", cfg->worker_index,
			         box->wd.name);
		if (cgroup_run_create(cfg->cgroup, &box->cg, cg_name, caps->memory_bytes,
		                      caps->max_processes, caps->cpu_millicores, &f) < 0) {
			set_fault_from(fault, RUN_FAULT_CGROUP, why, why_len,
			               "could not create the run's cgroup", &f);
			goto fail;
		}
	}
	if (box_pipes_open(p, ns_mode) < 0) {
		run_set_fault(fault, RUN_FAULT_OTHER, why, why_len,
		              "could not create the run's pipes");
		goto fail;
	}

	child_prepare(cfg, session_fd, box->wd.path, caps->disk_bytes, &child);
	child_set_fds(&child,
	              (int[CHILD_FD_COUNT]){out_p[1], err_p[1], fail_p[1], ctl_p[0], rep_p[1]});

	/* warm: Python programs, and an agent's command that is a plain Python invocation (any
	 * other is a shell's), with init */
	if (allow_warm && cfg->warm && ns_mode && (cfg->workspace_fd < 0 || caps->warm_command) &&
	    box_clone_warm(cfg, caps, session_fd, box, p, &child, fault, why, why_len) < 0)
		goto fail;
	if (box->pid < 0 && ns_mode)
		box->pid = child_clone(cfg, cfg->clone_flags, NULL);
	else if (box->pid < 0)
		box->pid = fork();
	if (box->pid < 0) {
		run_set_fault(fault, ns_mode ? RUN_FAULT_CLONE : RUN_FAULT_OTHER, why, why_len,
		              ns_mode ? "clone() of the run's namespaces failed" : "fork() failed");
		goto fail;
	}
	if (box->pid == 0) {
		if (ns_mode)
			sandbox_init(&child.sb);
		sandbox_run_program(&child.sb);
	}

	box_take_pipes(box, p);
	if (!box->foreign) /* a template sent its own, taken at the clone */
		box->pidfd = (int)syscall(SYS_pidfd_open, box->pid, 0); /* close-on-exec */

	/* a foreign init is reaped by the kernel the moment it dies: its pid is only its own
	 * while the pidfd says it lives (it waits for 'G', so it cannot die on its own now) */
	if (box->foreign && syscall(SYS_pidfd_send_signal, box->pidfd, 0, NULL, 0) < 0) {
		run_set_fault(fault, RUN_FAULT_OTHER, why, why_len,
		              "a template's init died before its start");
		goto fail;
	}
	if (cfg->userns && write_id_maps(cfg, box->pid) < 0) {
		run_set_fault(fault, RUN_FAULT_UID_MAP, why, why_len,
		              "writing the run's uid and gid maps failed");
		goto fail;
	}
	if (box->cg.active && cgroup_run_attach(&box->cg, box->pid, &f) < 0) {
		set_fault_from(fault, RUN_FAULT_CGROUP, why, why_len,
		               "moving the run into its cgroup failed", &f);
		goto fail;
	}
	if (write(box->ctl_w, "G", 1) != 1) {
		run_set_fault(fault, RUN_FAULT_OTHER, why, why_len, "starting the sandbox failed");
		goto fail;
	}
	return 0;
fail:
	*warm_failed = box->warm;
	box_pipes_close(p);
	run_box_discard(cfg, box);
	return -1;
}

/*
 * Builds a sandbox for a run with caps: its directory, cgroup and pipes, and its child (cold:
 * cloned here; warm: by a template of the zygote's), which waits for 'G' and then for the
 * request. A warm box that fails before the go (its init killed while it waited for the uid
 * maps, say) is built again cold: the warm path never fails a request. Returns 0, or -1 with
 * nothing left of it, the reason in why and, in fault (may be NULL), which layer failed.
 */
static int
box_build(const struct run_config *cfg, const struct run_caps *caps, struct run_box *box,
          struct run_outcome *fault, char *why, size_t why_len)
{
	bool warm_failed = false;

	if (run_box_build_once(cfg, caps, -1, box, true, &warm_failed, fault, why, why_len) == 0)
		return 0;
	if (!warm_failed)
		return -1;
	log_msg(LOG_WARN, "a warm sandbox failed before its start (%s); this run is cold", why);
	if (fault != NULL)
		fault->fault = RUN_FAULT_NONE;
	if (run_box_build_once(cfg, caps, -1, box, false, &warm_failed, fault, why, why_len) < 0)
		return -1;
	box->fallback = RUN_FALLBACK_TEMPLATE;
	return 0;
}

/* Sends the request to the box's child, bounded in time (the child is reading it). */
int
run_box_send(struct run_box *box, const struct run_spec *spec, const struct run_config *cfg)
{
	struct sandbox_request req = {
	    .magic = SANDBOX_REQUEST_MAGIC,
	    .code_len = (uint32_t)spec->code_len,
	    .stdin_len = (uint32_t)spec->stdin_len,
	    .max_result_bytes = (uint32_t)spec->max_result_bytes,
	    .files_len = (uint32_t)spec->files_len,
	    .flags = spec->artifacts == ARTIFACTS_ALL      ? SANDBOX_WANT_ARTIFACTS
	             : spec->artifacts == ARTIFACTS_IMAGES ? SANDBOX_WANT_IMAGES
	                                                   : 0,
	    .nproc = cfg->nproc_rlimit ? spec->caps.max_processes : 0,
	    .sigpending = cfg->sigpending,
	    .fsize_bytes = spec->caps.disk_bytes,
	    /* warm: the template's own address space is shared, not the run's */
	    .as_bytes = cfg->cgroup == NULL ? spec->caps.memory_bytes + box->as_base_bytes : 0,
	    .as_exec_bytes =
	        cfg->cgroup == NULL && box->as_base_bytes ? spec->caps.memory_bytes : 0,
	    /* a backstop only: CPU time can exceed wall time only with threads */
	    .cpu_limit_seconds = spec->wall_ms / 1000 + 2,
	    .session_idle_seconds = spec->session_idle_seconds,
	    .session_life_seconds = spec->session_life_seconds,
	};
	if (spec->session) {
		req.flags |= SANDBOX_SESSION;
		/* the program lives as long as the session: its backstop is the lifetime's */
		req.cpu_limit_seconds = (int64_t)spec->session_life_seconds + 2;
	}
	const struct {
		const void *p;
		size_t n;
	} parts[] = {{&req, sizeof(req)},
	             {spec->code, spec->code_len},
	             {spec->stdin_data, spec->stdin_len},
	             {spec->files, spec->files_len}};
	long long deadline = util_now_ms() + RUN_STOP_MS;

	(void)fcntl(box->ctl_w, F_SETFL, O_NONBLOCK);
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++) {
		const char *p = parts[i].p;
		size_t n = parts[i].n;
		while (n > 0) {
			ssize_t w = write(box->ctl_w, p, n);
			if (w > 0) {
				p += w;
				n -= (size_t)w;
				continue;
			}
			if (w < 0 && errno != EAGAIN && errno != EINTR)
				return -1;
			long long left = deadline - util_now_ms();
			struct pollfd pfd = {.fd = box->ctl_w, .events = POLLOUT};
			if (left <= 0) {
				errno = ETIMEDOUT;
				return -1;
			}
			(void)poll(&pfd, 1, (int)left);
		}
	}
	return 0;
}

void
run_stream_init(struct run_stream *s)
{
	memset(s, 0, sizeof(*s));
	s->box.pid = -1;
	s->dying.pid = -1;
}

void
run_stream_build_ahead(const struct run_config *cfg, struct run_stream *s)
{
	char why[512];

	if (!s->last_known || s->box.active)
		return;
	if (box_build(cfg, &s->last, &s->box, NULL, why, sizeof(why)) < 0)
		log_msg(LOG_WARN, "building a sandbox ahead failed: %s", why);
}

void
run_stream_finish(const struct run_config *cfg, struct run_stream *s)
{
	run_box_discard(cfg, &s->dying);
	cgroup_run_remove(&s->spent);
}

void
run_stream_close(const struct run_config *cfg, struct run_stream *s)
{
	run_box_discard(cfg, &s->box);
	run_stream_finish(cfg, s);
}

/*
 * Phase 1: takes the stream's box if it fits spec (else builds one), and hands it the program.
 * Returns 0 when the program is on its way; -1 when it is not, with the reason in why and
 * out->fault (w->box is NULL when nothing is left to tear down; a failed set-up step read
 * from the error pipe is in w->failure).
 */
static int
run_start(const struct run_config *cfg, const struct run_spec *spec, struct run_stream *s,
          struct run_watch *w, struct run_outcome *out, char *why, size_t why_len)
{
	struct run_caps caps = spec->caps;
	int sent;

	memset(w, 0, sizeof(*w));
	w->client_fd = spec->watch_client ? spec->client_fd : -1;
	w->on_output = spec->on_output;
	w->output_ctx = spec->output_ctx;
	w->t0 = util_now_ms();
	/* the tier (decided by the caller) is a build-time cap too: the next box is built for the
	 * last request's */
	s->last = caps;
	s->last_known = true;
	if (capture_init(&out->out, spec->max_stdout_bytes) < 0 ||
	    capture_init(&out->err, spec->max_stderr_bytes) < 0) {
		out->fault = RUN_FAULT_OTHER;
		snprintf(why, why_len, "out of memory for the output buffers");
		run_box_discard(cfg, &s->box);
		return -1;
	}
	/* built ahead: the namespaces and mounts cost nothing now */
	bool ahead = box_fits(&s->box, &caps);
	w->ahead = ahead;
	if (!ahead) {
		run_box_discard(cfg, &s->box);
		if (box_build(cfg, &caps, &s->box, out, why, why_len) < 0)
			return -1;
	}
	w->box = &s->box;
	/* one byte past the largest valid report: a longer one is seen as not one */
	if (s->box.ns_mode)
		w->rb.max = sizeof(struct sandbox_report) + spec->max_result_bytes +
		            (spec->artifacts != ARTIFACTS_NONE ? ARTIFACTS_BLOB_MAX : 0) + 1;
	sent = run_box_send(&s->box, spec, cfg);
	if (sent < 0 && ahead) {
		/* a box built ahead may have died while it waited (the OOM killer prefers it):
		 * build a fresh one and try once more */
		log_msg(LOG_WARN, "the sandbox built ahead is gone (%s); building a new one",
		        strerror(errno));
		run_box_discard(cfg, &s->box);
		if (box_build(cfg, &caps, &s->box, out, why, why_len) < 0) {
			buf_free(&w->rb.b);
			w->box = NULL;
			return -1;
		}
		sent = run_box_send(&s->box, spec, cfg);
	}
	if (sent < 0) {
		/* the child died or failed a step: its error pipe says which */
		run_set_fault(out, RUN_FAULT_OTHER, why, why_len,
		              "handing the program to the sandbox failed");
		if (read(s->box.fail_r, &w->failure, sizeof(w->failure)) ==
		    (ssize_t)sizeof(w->failure))
			w->setup_failed = true;
		return -1;
	}
	w->deadline = util_now_ms() + spec->wall_ms;
	return 0;
}

/* What the watch loop polls: one entry each of its table of pollfds, -1 (which poll() skips)
 * while it is not watched. */
enum run_watched {
	RUN_WATCH_OUT,    /* the program's stdout */
	RUN_WATCH_ERR,    /* its stderr */
	RUN_WATCH_FAIL,   /* the error pipe: a failed set-up step */
	RUN_WATCH_REPORT, /* namespace mode: init's report */
	RUN_WATCH_PID,    /* the pidfd of the program (direct mode) or init, until reaped */
	RUN_WATCH_CLIENT, /* the request's connection, for a hang-up, until reaped */
	RUN_WATCH_OOM,    /* the run's cgroup's OOM eventfd, until reaped or stopped */
	RUN_WATCH_COUNT,
};

/* The run's deadlines, at now: past the wall time it is stopped (init stops it and still
 * reports; a cold run without init is killed), and an init that does not stop it in time is
 * killed. Returns true when the watch must look again at once. */
static bool
watch_deadlines(struct run_watch *w, long long now)
{
	struct run_box *box = w->box;

	if (!w->main_reaped && !w->stop_sent && now >= w->deadline) {
		w->timed_out = true;
		if (box->ns_mode) {
			w->stop_sent = true;
			if (write(box->ctl_w, "S", 1) != 1)
				w->stop_deadline = now; /* init is gone already */
			else
				w->stop_deadline = now + RUN_STOP_MS;
		} else {
			box_kill(box, &w->main_reaped, &w->main_status, &w->ru);
			w->drain_deadline = util_now_ms() + RUN_DRAIN_MS;
		}
		return true;
	}
	if (!w->main_reaped && w->stop_sent && now >= w->stop_deadline) {
		log_msg(LOG_WARN, "init did not stop the run within %d ms; killing it",
		        RUN_STOP_MS);
		if (box->foreign)
			(void)syscall(SYS_pidfd_send_signal, box->pidfd, SIGKILL, NULL, 0);
		else
			proc_kill(box->pid, SIGKILL, "a run's init");
		w->stop_deadline = now + RUN_KILL_MS;
	}
	return false;
}

/* Whether the run's first process ended (exited: its pidfd readable): reaped, or, a foreign
 * init, gone (the kernel reaps it; what it reported is all there is). Once it has, nothing it
 * started may keep the pipes open: the rest is killed, and the pipes drained for a while. */
static void
watch_reap(struct run_watch *w, bool exited)
{
	struct run_box *box = w->box;

	if (!w->main_reaped && box->foreign && exited) {
		w->main_reaped = true;
		w->main_status = SIGKILL;
	} else if (!w->main_reaped && (box->pidfd < 0 || exited)) {
		int st;
		struct rusage r1;
		pid_t p = wait4(box->pid, &st, WNOHANG | __WALL, &r1);
		if (p == box->pid) {
			w->main_reaped = true;
			w->main_status = st;
			w->ru = r1;
		}
	}
	if (w->main_reaped && w->drain_deadline == 0) {
		box_kill(box, &w->main_reaped, &w->main_status, &w->ru);
		w->drain_deadline = util_now_ms() + RUN_DRAIN_MS;
	}
}

/*
 * Phase 2: drains the output and the report until the program (or init) is reaped and the
 * pipes are closed or their drain time is up; stops the run at the deadline or its first OOM,
 * and at once when the client hangs up (out->abandoned). Returns 0, or -1 when poll() fails.
 */
int
run_watch(struct run_watch *w, struct run_outcome *out, char *why, size_t why_len)
{
	struct run_box *box = w->box;

	for (;;) {
		long long now = util_now_ms(), until;

		if (w->main_reaped && box->out_r < 0 && box->err_r < 0 && box->rep_r < 0)
			return 0;
		if (w->session && !w->main_reaped && report_complete(&w->rb)) {
			/* the program flushed the cell's output before init reported: what is in
			 * the pipes is all of it (a process the cell left running may keep them
			 * open, so their end is not waited for) */
			drain_watched(&box->out_r, &out->out, 0, w->on_output, w->output_ctx);
			drain_watched(&box->err_r, &out->err, 1, w->on_output, w->output_ctx);
			w->reported = true;
			return 0;
		}
		if (box->ns_mode && !w->main_reaped && box->out_r < 0 && box->err_r < 0 &&
		    box->fail_r < 0 && box->rep_r >= 0 && report_complete(&w->rb)) {
			/* init reports after it reaped every other process of the run: all that is
			 * left is init's own exit, which run_collect() leaves for after the reply
			 * (the error pipe is at its end too: a failed step is never missed)
			 */
			w->reported = true;
			return 0;
		}
		if (watch_deadlines(w, now))
			continue;
		if (w->main_reaped && now >= w->drain_deadline)
			return 0;
		until = w->main_reaped ? w->drain_deadline
		        : w->stop_sent ? w->stop_deadline
		                       : w->deadline;
		struct pollfd pfd[RUN_WATCH_COUNT] = {
		    [RUN_WATCH_OUT] = {.fd = box->out_r, .events = POLLIN},
		    [RUN_WATCH_ERR] = {.fd = box->err_r, .events = POLLIN},
		    [RUN_WATCH_FAIL] = {.fd = box->fail_r, .events = POLLIN},
		    [RUN_WATCH_REPORT] = {.fd = box->rep_r, .events = POLLIN},
		    [RUN_WATCH_PID] = {.fd = w->main_reaped ? -1 : box->pidfd, .events = POLLIN},
		    /* POLLRDHUP only: bytes nginx sent that libfcgi has not read are no sign */
		    [RUN_WATCH_CLIENT] = {.fd = w->main_reaped ? -1 : w->client_fd,
		                          .events = POLLRDHUP},
		    [RUN_WATCH_OOM] = {.fd = !w->main_reaped && !w->stop_sent && box->cg.active
		                                 ? box->cg.oom_fd
		                                 : -1,
		                       .events = POLLIN},
		};
		long long wait_ms = until - now;
		if (wait_ms < 0)
			wait_ms = 0;
		if (box->pidfd < 0 && !w->main_reaped && wait_ms > 10)
			wait_ms = 10; /* no pidfd (kernel < 5.3): check the child every 10 ms */
		if (poll(pfd, RUN_WATCH_COUNT, (int)wait_ms) < 0 && errno != EINTR) {
			run_set_fault(out, RUN_FAULT_OTHER, why, why_len, "poll() failed");
			return -1;
		}
		if (pfd[RUN_WATCH_CLIENT].revents & (POLLRDHUP | POLLHUP | POLLERR)) {
			out->abandoned = true;
			return 0; /* the kill in run_collect() is the same as for any end */
		}
		if (pfd[RUN_WATCH_OUT].revents)
			drain_watched(&box->out_r, &out->out, 0, w->on_output, w->output_ctx);
		if (pfd[RUN_WATCH_ERR].revents)
			drain_watched(&box->err_r, &out->err, 1, w->on_output, w->output_ctx);
		if (pfd[RUN_WATCH_REPORT].revents)
			report_drain(&box->rep_r, &w->rb);
		if (pfd[RUN_WATCH_OOM].revents && cgroup_run_oom(&box->cg)) {
			/* the run's first OOM ends it, before a second process is killed */
			box->oom_stopped = true;
			w->deadline =
			    util_now_ms(); /* stopped like a timeout, reported as memory */
			continue;
		}
		if (pfd[RUN_WATCH_FAIL].revents) {
			ssize_t r = read(box->fail_r, &w->failure, sizeof(w->failure));
			if (r == (ssize_t)sizeof(w->failure))
				w->setup_failed = true;
			if (r != -1 || errno != EINTR)
				util_close_fd(&box->fail_r);
		}
		watch_reap(w, pfd[RUN_WATCH_PID].revents != 0);
	}
}

/*
 * Phase 3, on every path that built a box: kills whatever of the run is left, names a failed
 * set-up step, reads what the run left (init's report, or result.json in direct mode), the
 * cgroup's events and peak, classifies the outcome (outcome_classify()), and tears the box
 * down. rc is what the earlier phases returned; returns the final one.
 */
static int
run_collect(const struct run_config *cfg, const struct run_spec *spec, struct run_stream *s,
            struct run_watch *w, int rc, struct run_outcome *out, char *why, size_t why_len)
{
	struct run_box *box = w->box;
	struct outcome_facts f = {0};

	/* nothing of the run may outlive run_execute() (and the teardown need not sweep again),
	 * but init once it has reported: the rest of the run is gone, and it is exiting */
	if (!w->reported) {
		box_kill(box, &w->main_reaped, &w->main_status, &w->ru);
		box->pid = -1;
	}
	if (w->setup_failed) {
		out->fault = RUN_FAULT_STEP;
		out->fault_step = w->failure.step;
		out->fault_detail = w->failure.detail;
		if (w->failure.step == SANDBOX_MOUNTS)
			snprintf(why, why_len, "sandbox setup failed while %s (%s): %s",
			         sandbox_step_string(SANDBOX_MOUNTS),
			         mounts_step_string((enum mounts_step)w->failure.detail),
			         strerror(w->failure.err));
		else
			snprintf(why, why_len, "sandbox setup failed while %s: %s",
			         sandbox_step_string((enum sandbox_step)w->failure.step),
			         strerror(w->failure.err));
		rc = -1;
	}
	if (box->cg.active)
		cgroup_run_events(&box->cg, &f.oom, &f.pids_max);
	if (rc == 0) {
		f.have_status = true;
		f.wait_status = w->main_status;
		f.stopped = w->timed_out;
		out->cpu_ms = report_cpu_ms(&w->ru);
		out->minor_faults = w->ru.ru_minflt;
		out->max_rss_bytes = (long long)w->ru.ru_maxrss * 1024;
		if (box->ns_mode && !report_read(&w->rb, spec->max_result_bytes, &f, out)) {
			/* init died without a word: the run is lost. The OOM killer's doing is the
			 * program's (memory); any other kill came from outside, the sandbox's fault
			 */
			f.have_status = false;
			out->result_status = RESULT_NONE;
			if (!w->timed_out && !f.oom && !box->oom_stopped && !out->abandoned) {
				/* no system call failed: no errno to name */
				out->fault = RUN_FAULT_LOST;
				snprintf(
				    why, why_len, "%s",
				    "the run's init was killed from outside before it reported");
				rc = -1;
			}
		} else if (!box->ns_mode) {
			out->result_status = result_read(box->wd.fd, spec->max_result_bytes,
			                                 &out->result_json, &out->result_len);
			/* direct mode: every process of the run is gone (box_kill above) */
			if (spec->artifacts != ARTIFACTS_NONE) {
				char *manifest = NULL;
				size_t manifest_len = 0;
				char *blob = NULL;
				if ((spec->files_len == 0 ||
				     files_manifest(spec->files, spec->files_len, &manifest,
				                    &manifest_len) == 0) &&
				    artifacts_collect(box->wd.fd, manifest, manifest_len,
				                      spec->artifacts, &blob,
				                      &out->artifacts_len) == 0) {
					out->artifacts_mem = blob;
					out->artifacts = blob;
				}
				free(manifest);
			}
		}
		f.oom_stopped = box->oom_stopped;
		outcome_classify(&f, out);
		if (box->cg.active) {
			unsigned long long peak = cgroup_run_peak_bytes(&box->cg);
			if (peak > 0)
				out->max_rss_bytes = (long long)peak;
		}
		out->duration_ms = util_now_ms() - w->t0;
		out->tier = box->tier;
		out->fallback = box->fallback;
	}
	buf_free(&w->rb.b);
	if (w->reported) {
		/* reaped, and the box removed, after the reply (run_stream_finish()) */
		run_box_discard(cfg, &s->dying);
		s->dying = *box;
		*box = (struct run_box){.pid = -1}; /* as run_stream_init() leaves it: inactive */
		return rc;
	}
	box_teardown(cfg, box, &w->main_reaped, &w->main_status, &w->ru, &s->spent);
	return rc;
}

/*
 * Whether init died before it had read the whole request, so that nothing of the program can
 * have run: namespace mode, init gone without a word, no output, and bytes of the request still
 * in the control pipe (init reads it all before it starts the program). A box built ahead can
 * die between the send and the read: the kill is asynchronous, and the pipe takes the request.
 */
static bool
run_never_began(const struct run_watch *w, const struct run_outcome *out)
{
	int queued = 0;

	if (!w->box->ns_mode || !w->main_reaped || w->timed_out || out->abandoned ||
	    w->setup_failed || w->rb.b.len > 0 || out->out.len > 0 || out->err.len > 0)
		return false;
	return ioctl(w->box->ctl_w, FIONREAD, &queued) == 0 && queued > 0;
}

int
run_execute(const struct run_config *cfg, const struct run_spec *spec, struct run_stream *s,
            struct run_outcome *out, char *why, size_t why_len)
{
	struct run_watch w;
	int rc;

	memset(out, 0, sizeof(*out));
	rc = run_start(cfg, spec, s, &w, out, why, why_len);
	if (rc == 0)
		rc = run_watch(&w, out, why, why_len);
	else if (w.box == NULL)
		return -1;
	if (rc == 0 && w.ahead && run_never_began(&w, out)) {
		/* once: the second box is built for this request, so it cannot have waited */
		log_msg(LOG_WARN, "the sandbox built ahead died before it read the program; "
		                  "running it in a new one");
		box_teardown(cfg, w.box, &w.main_reaped, &w.main_status, &w.ru, &s->spent);
		buf_free(&w.rb.b);
		run_outcome_free(out);
		rc = run_start(cfg, spec, s, &w, out, why, why_len);
		if (rc == 0)
			rc = run_watch(&w, out, why, why_len);
		else if (w.box == NULL)
			return -1;
	}
	return run_collect(cfg, spec, s, &w, rc, out, why, why_len);
}

/*
 * The outcome's log line: as fields a log pipeline reads (api, outcome: the reply's status,
 * named apart from access.log's HTTP status; exitCode, durationMs, cpuMs, the byte counts,
 * the tier and a fallback), and as text.
 */
void
run_log_outcome(const char *api, const struct run_outcome *o, bool has_exit_code, int exit_code)
{
	struct jsonw w;
	char *fields;

	jsonw_init(&w);
	jsonw_lit(&w, ",\"api\":");
	jsonw_cstr(&w, api);
	jsonw_lit(&w, ",\"outcome\":");
	jsonw_cstr(&w, run_status_string(o->status));
	jsonw_lit(&w, ",\"exitCode\":");
	if (has_exit_code)
		jsonw_int(&w, exit_code);
	else
		jsonw_lit(&w, "null");
	jsonw_lit(&w, ",\"durationMs\":");
	jsonw_int(&w, o->duration_ms);
	jsonw_lit(&w, ",\"cpuMs\":");
	jsonw_int(&w, o->cpu_ms);
	jsonw_lit(&w, ",\"minorFaults\":");
	jsonw_int(&w, o->minor_faults);
	jsonw_lit(&w, ",\"maxRssBytes\":");
	jsonw_int(&w, o->max_rss_bytes);
	jsonw_lit(&w, ",\"stdoutBytes\":");
	jsonw_int(&w, (long long)o->out.total_bytes);
	jsonw_lit(&w, ",\"stderrBytes\":");
	jsonw_int(&w, (long long)o->err.total_bytes);
	jsonw_lit(&w, ",\"tier\":");
	jsonw_cstr(&w, run_tier_string(o->tier));
	if (o->fallback != RUN_FALLBACK_NONE) {
		jsonw_lit(&w, ",\"fallback\":");
		jsonw_cstr(&w, run_fallback_string(o->fallback));
	}
	fields = jsonw_take(&w, NULL);
	log_msg_fields(LOG_INFO, fields,
	               "%s outcome=%s exitCode=%d durationMs=%lld cpuMs=%lld stdoutBytes=%llu "
	               "stderrBytes=%llu tier=%s%s%s",
	               api, run_status_string(o->status), has_exit_code ? exit_code : 0,
	               o->duration_ms, o->cpu_ms, (unsigned long long)o->out.total_bytes,
	               (unsigned long long)o->err.total_bytes, run_tier_string(o->tier),
	               o->fallback != RUN_FALLBACK_NONE ? " fallback=" : "",
	               o->fallback != RUN_FALLBACK_NONE ? run_fallback_string(o->fallback) : "");
	free(fields);
}
