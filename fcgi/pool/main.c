/*
 * main.c - start-up of codebox-pool, the only place that may die().
 *
 * Order: parse options; open the runs directory; probe the isolation layers (namespaces,
 * seccomp, Landlock, cgroups) minus those CODEBOX_DISABLE names; prepare the sandbox's /etc;
 * measure the interpreter through the real sandbox (probe.c) - if a layer's set-up step fails
 * there, that layer is turned off and the probe tried again, so what /isolation reports is
 * what worked; refuse to start if CODEBOX_REQUIRE names a layer that is off or a promised
 * module is missing; log one line of layers; create port 8888's workspace and open the audit
 * trail when they are configured; start the warm pool's zygote (warm.c); bind the FastCGI
 * socket; hand over to the pool.
 * The probe runs before any worker exists because the run's kill sweep treats every child of
 * the calling process as part of the run.
 */
#include "run/cgroup.h"
#include "core/figures.h"
#include "core/isolation.h"
#include "box/landlock.h"
#include "core/log.h"
#include "core/metrics.h"
#include "pool/pool.h"
#include "run/probe.h"
#include "box/sandbox.h"
#include "box/seccomp.h"
#include "run/session.h"
#include "core/util.h"
#include "core/workspace.h"
#include "warm/warm.h"
#include "warm/warmproto.h"
#include "core/snapshot.h"
#include "run/trace.h"
#include "warm/zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdnoreturn.h>
#include <string.h>
#include <dirent.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static noreturn void
die(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_msg(LOG_ERROR, "%s", msg);
	fprintf(stderr, "codebox-pool: %s\n", msg);
	exit(1);
}

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: codebox-pool --socket PATH --runs-dir DIR --workers N\n"
	        "                    [--python PATH] [--socket-user USER | --socket-group GROUP]\n"
	        "                    [--run-uid-base UID] [--max-sessions S] [--drain-seconds S]\n"
	        "                    [--agent-workspace-bytes N] [--nginx-busy-log PATH]\n"
	        "                    [--ceilings NAME=VALUE,...]\n"
	        "                    [--pool-memory-bytes BYTES] [--probe-cache FILE]\n"
	        "       codebox-pool --print-agent-timeout-ms | --print-kill-grace-seconds\n"
	        "       codebox-pool --check-ceilings NAME=VALUE,...\n"
	        "Serves codebox's FastCGI protocol with a prefork pool of N workers.\n"
	        "--socket-user USER: only USER (nginx's) may connect: the socket is USER's, 0600.\n"
	        "--ceilings: every limit a request brings is capped at these\n"
	        "(scripts/check-config.sh --print-ceilings).\n"
	        "--agent-workspace-bytes turns on port 8888's agent protocol with a workspace\n"
	        "of N bytes; SANDBOX_EXEC_TIMEOUT_SECONDS is its command timeout (default 300).\n"
	        "--print-agent-timeout-ms prints that timeout as validated, and exits.\n"
	        "--print-kill-grace-seconds prints how long a run can take past its deadline\n"
	        "until its reply is written (scripts/check-config.sh), and exits.\n"
	        "--nginx-busy-log is the file nginx logs its own 429s to (GET /metrics).\n"
	        "A root pool runs programs as host uids UID..UID+N (default 20000), port 8888's\n"
	        "commands as UID+N+1 and each session as one of UID+N+2..UID+N+1+S of its own\n"
	        "(--max-sessions, default 8: CODEBOX_MAX_SESSIONS, check-config.sh\n"
	        "--print-max-sessions): they must be this pool's alone; it refuses to start\n"
	        "when a process runs under one or another pool holds them. A pool that is not\n"
	        "root gives each sandbox (N workers' runs, S sessions) its share of the\n"
	        "signals the kernel queues for its uid (RLIMIT_SIGPENDING).\n"
	        "--pool-memory-bytes caps all runs together (0, the default: 3/4 of the memory\n"
	        "of the host or of the pool's container).\n"
	        "--probe-cache FILE keeps the start-up probe's measure of the promised modules:\n"
	        "a start that finds their files, and the interpreter's, unchanged imports none.\n");
}

static long
parse_long(const char *s, const char *what, long min, long max)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *s == '\0' || *end != '\0' || v < min || v > max)
		die("%s must be an integer from %ld to %ld, not \"%s\"", what, min, max, s);
	return v;
}

static int
listen_unix(const char *path, const char *user, const char *group)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat sb;
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path))
		die("the socket path %s is too long", path);
	memcpy(sa.sun_path, path, strlen(path) + 1);
	/* a stale socket from a previous run; refuse to remove anything else */
	if (lstat(path, &sb) == 0) {
		if (!S_ISSOCK(sb.st_mode))
			die("%s exists and is not a socket", path);
		if (unlink(path) < 0)
			die("unlink(%s) failed: %s", path, strerror(errno));
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		die("socket() failed: %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("bind(%s) failed: %s", path, strerror(errno));
	if (user != NULL) {
		struct passwd *pw = getpwnam(user);
		if (pw == NULL)
			die("no user named %s for the socket", user);
		if (chown(path, pw->pw_uid, pw->pw_gid) < 0 || chmod(path, 0600) < 0)
			die("giving %s to user %s failed: %s", path, user, strerror(errno));
	} else if (group != NULL) {
		struct group *gr = getgrnam(group);
		if (gr == NULL)
			die("no group named %s for the socket", group);
		if (chown(path, (uid_t)-1, gr->gr_gid) < 0 || chmod(path, 0660) < 0)
			die("giving %s to group %s failed: %s", path, group, strerror(errno));
	} else if (chmod(path, 0600) < 0) {
		die("chmod(%s) failed: %s", path, strerror(errno));
	}
	if (listen(fd, 256) < 0)
		die("listen(%s) failed: %s", path, strerror(errno));
	return fd;
}

static int
copy_file(const char *src, int dirfd, const char *name)
{
	char buf[65536];
	int in = open(src, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;
	long total = 0;

	if (in < 0)
		return errno == ENOENT ? 0 : -1;
	out = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (out < 0) {
		close(in);
		return -1;
	}
	/* bounded: these are small files (ld.so.cache, localtime) */
	while ((n = read(in, buf, sizeof(buf))) > 0 && total < (16L << 20)) {
		if (write(out, buf, (size_t)n) != n)
			break;
		total += n;
	}
	close(in);
	close(out);
	return n == 0 ? 0 : -1;
}

static int
write_small(int dirfd, const char *name, const char *text)
{
	int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define INNER STRINGIFY(SANDBOX_INNER_ID)

/* The sandbox's /etc: who the run is, and what the dynamic loader and time zones need. */
static void
etc_prepare(int runs_fd, const char *runs_dir, char *etc, size_t etc_len)
{
	int fd;

	snprintf(etc, etc_len, "%s/etc", runs_dir);
	if (mkdirat(runs_fd, "etc", 0755) < 0 && errno != EEXIST)
		die("mkdir(%s) failed: %s", etc, strerror(errno));
	fd = openat(runs_fd, "etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fchmod(fd, 0755) < 0)
		die("open(%s) failed: %s", etc, strerror(errno));
	if (write_small(fd, "passwd",
	                "root:x:0:0:root:/nonexistent:/usr/sbin/nologin\n"
	                "sandbox:x:" INNER ":" INNER ":codebox run:/nonexistent:/usr/sbin/nologin\n"
	                "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n") < 0 ||
	    write_small(fd, "group", "root:x:0:\nsandbox:x:" INNER ":\nnogroup:x:65534:\n") < 0 ||
	    write_small(fd, "hostname", "codebox\n") < 0 ||
	    write_small(fd, "sitecustomize.py", figures_sitecustomize) < 0 ||
	    copy_file("/etc/ld.so.cache", fd, "ld.so.cache") < 0 ||
	    copy_file("/etc/localtime", fd, "localtime") < 0 ||
	    /* Debian's matplotlib reads its defaults from /etc/matplotlibrc alone */
	    copy_file("/etc/matplotlibrc", fd, "matplotlibrc") < 0 ||
	    (mkdirat(fd, "alternatives", 0755) < 0 && errno != EEXIST))
		die("preparing %s failed: %s", etc, strerror(errno));
	close(fd);
}

/*
 * The directory the runs live in: DIR itself when the pool may chmod it (its owner, or root),
 * else a directory of the pool's own inside it, DIR/codebox-<uid>. A Kubernetes emptyDir is
 * root-owned: 0777, or with the pod's fsGroup as its group and g+rwxs; a non-root pool cannot
 * chmod it but can create its own directory there. Either way the result is 0311: runs must
 * not list it (write and search for the owner, search for the others). REAL receives the path.
 */
static void
runs_dir_claim(const char *dir, char *real, size_t real_len)
{
	char base[4096];
	struct stat st;
	int n;

	if (realpath(dir, base) == NULL)
		die("the runs directory %s: %s", dir, strerror(errno));
	if (chmod(base, 0311) == 0) {
		snprintf(real, real_len, "%s", base);
		return;
	}
	if (errno != EPERM)
		die("chmod(%s) failed: %s", base, strerror(errno));
	if (stat(base, &st) < 0)
		die("stat(%s) failed: %s", base, strerror(errno));
	n = snprintf(real, real_len, "%s/codebox-%u", base, (unsigned)geteuid());
	if (n < 0 || (size_t)n >= real_len)
		die("the runs directory %s: path too long", base);
	/* a restarted container finds the directory its predecessor made: reuse it */
	if (mkdir(real, 0700) < 0 && errno != EEXIST)
		die("the runs directory %s belongs to uid %u (mode %04o) and the pool, uid %u, can "
		    "neither chmod it nor create %s in it: %s; give the pool a directory it owns, "
		    "or one it can write (an emptyDir with the pod's fsGroup)",
		    base, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)geteuid(),
		    real, strerror(errno));
	if (lstat(real, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
		die("%s exists and is not a directory of the pool's uid %u: refusing to run in it",
		    real, (unsigned)geteuid());
	if (chmod(real, 0311) < 0)
		die("chmod(%s) failed: %s", real, strerror(errno));
	log_msg(LOG_INFO, "the runs directory %s is not the pool's to chmod: runs live in %s", base,
	        real);
}

/* The last of a root pool's host uids: the workers', the probe's, port 8888's, the sessions'. */
static uid_t
uid_range_last(const struct pool_config *pc)
{
	return pc->run_uid_base + (uid_t)pc->workers + 1 + (uid_t)pc->max_sessions;
}

/*
 * A non-root pool's runs and sessions share its one host uid, and the kernel charges the
 * signals queued in each box's user namespace to that uid too, against the pool's own
 * RLIMIT_SIGPENDING (measured on 6.18: one box that queued until refused left the others
 * none). Each box gets 1/(workers + sessions + 2) of it as its own limit (the probe's and the
 * pool's own shares the two more), so that no box can take another's; 0 under a root pool
 * (a uid each) or without a finite limit.
 */
static unsigned long
sigpending_share(const struct pool_config *pc)
{
	struct rlimit rl;
	unsigned long boxes = (unsigned long)pc->workers + (unsigned long)pc->max_sessions + 2;

	if (pc->drop_privileges || getrlimit(RLIMIT_SIGPENDING, &rl) < 0 ||
	    rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return rl.rlim_cur / boxes > 0 ? (unsigned long)(rl.rlim_cur / boxes) : 1;
}

/*
 * A root pool's runs execute as host uids first..last, which must be this pool's alone:
 * per-user kernel limits (processes, pipe buffers, epoll watches, inotify...) are counted per
 * uid. Each uid is claimed with a lock file held for the life of the pool (inherited by the
 * workers, close-on-exec for runs), and no process may run under one already.
 */
static void
uid_range_claim(uid_t first, uid_t last)
{
	static const char lock_dir[] = "/run/lock/codebox-uids";
	DIR *d;
	struct dirent *e;

	if (mkdir(lock_dir, 0700) < 0 && errno != EEXIST)
		log_msg(LOG_WARN, "cannot create %s (%s): the uid range is checked, not locked",
		        lock_dir, strerror(errno));
	for (uid_t uid = first; uid <= last; uid++) {
		char path[64];
		int fd;
		snprintf(path, sizeof(path), "%s/%u", lock_dir, (unsigned)uid);
		fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			continue; /* warned above */
		if (flock(fd, LOCK_EX | LOCK_NB) < 0)
			die("the run uid %u is held by another codebox pool (%s); give each pool "
			    "its "
			    "own range with --run-uid-base",
			    (unsigned)uid, path);
		/* kept open: the lock lasts as long as this pool */
	}
	d = opendir("/proc");
	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		char path[300], buf[4096], *line;
		unsigned long ids[4];
		if (e->d_name[0] < '1' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%.200s/status", e->d_name);
		if (util_read_small(path, buf, sizeof(buf)) <= 0)
			continue;
		/* a zombie runs nothing: one just killed (cgroup_sweep_dead_pools()) until its
		 * parent reaps it */
		line = strstr(buf, "\nState:");
		if (line != NULL && line[strspn(line + 7, " \t") + 7] == 'Z')
			continue;
		line = strstr(buf, "\nUid:");
		if (line == NULL ||
		    sscanf(line, "\nUid: %lu %lu %lu %lu", &ids[0], &ids[1], &ids[2], &ids[3]) != 4)
			continue;
		for (int i = 0; i < 4; i++)
			if (ids[i] >= first && ids[i] <= last)
				die("process %s already runs as uid %lu, inside this pool's run "
				    "uid range "
				    "%u-%u; give the pool another range with --run-uid-base",
				    e->d_name, ids[i], (unsigned)first, (unsigned)last);
	}
	closedir(d);
}

/* The run configuration the layers in force call for; Landlock is added per worker. */
static void
config_from_isolation(struct run_config *run, const struct isolation *iso,
                      const struct seccomp_filter *filter, const struct cgroup_ctx *cg)
{
	run->clone_flags = iso_clone_flags(iso);
	run->userns = (run->clone_flags & CLONE_NEWUSER) != 0;
	run->mount_proc = iso->proc;
	run->cgroupns = iso->on[ISO_CGROUPNS];
	run->mask_proc = iso->on[ISO_MASKEDPATHS];
	run->high_pids = iso->high_pids;
	/* in a mount namespace init builds each run's own ruleset, once its tmpfs exists */
	run->landlock_abi = iso->on[ISO_LANDLOCK] && iso->on[ISO_MOUNTNS] ? iso->landlock_abi : 0;
	run->seccomp = iso->on[ISO_SECCOMP] ? filter : NULL;
	run->cgroup = iso->on[ISO_CGROUP] ? cg : NULL;
	/* a pids cgroup refuses the fork itself (and records it for details) */
	run->nproc_rlimit = strcmp(iso_process_limit(iso), "rlimit-nproc") == 0;
}

/*
 * Port 8888's agent protocol: its command timeout, and its workspace, created once here so
 * that every worker inherits it. Off (workers answer 503, saying why) without a mount
 * namespace for runs or when the kernel cannot give a detached tmpfs.
 */
static void
agent_setup(struct pool_config *pc, const struct isolation *iso, unsigned long long bytes)
{
	static char off[300];
	struct agent_config *ac = &pc->worker.agent;
	char why[256];

	ac->workspace_fd = -1;
	ac->iso = iso;
	ac->workspace_bytes = bytes;
	ac->timeout_ms = agent_timeout_ms(getenv("SANDBOX_EXEC_TIMEOUT_SECONDS"), why, sizeof(why));
	if (why[0])
		log_msg(LOG_WARN, "%s", why);
	/* its own uid under a root pool: above every worker's and the probe's */
	ac->uid = pc->drop_privileges ? pc->run_uid_base + (uid_t)pc->workers + 1 : geteuid();
	ac->gid = pc->drop_privileges ? (gid_t)ac->uid : getegid();
	if (bytes == 0) {
		ac->off_reason = "the pool was started without --agent-workspace-bytes";
		return;
	}
	if (!iso->on[ISO_MOUNTNS]) {
		ac->off_reason = "runs have no mount namespace to attach the workspace at /app in";
		log_msg(LOG_WARN, "the agent protocol is off: %s", ac->off_reason);
		return;
	}
	ac->workspace_fd = workspace_create(bytes, ac->uid, ac->gid, why, sizeof(why));
	if (ac->workspace_fd < 0) {
		snprintf(off, sizeof(off), "the workspace could not be created: %s", why);
		ac->off_reason = off;
		log_msg(LOG_WARN, "the agent protocol is off: %s", off);
		return;
	}
	log_msg(LOG_INFO,
	        "agent protocol: a %llu-byte workspace at /app, commands time out after %ld ms",
	        bytes, ac->timeout_ms);
}

/* codebox-init, beside this binary, as a sealed copy: the sealed copy of this binary cannot
 * name its directory, so the file is copied before the exec and the copy's fd passed through
 * it (CODEBOX_INIT_FD). */
#define MAIN_INIT_FD_ENV "CODEBOX_INIT_FD"
#define MAIN_INIT_MAX_BYTES (64LL << 20)

static int
main_seal_init(void)
{
	char path[4096], *slash;
	ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
	int src, mfd;

	if (n <= 0)
		return -1;
	path[n] = '\0';
	slash = strrchr(path, '/');
	/* the sealed copy has no directory: only the exec's env can say */
	if (strncmp(path, "/memfd:", 7) == 0 || slash == NULL ||
	    (size_t)(slash + 1 - path) + sizeof("codebox-init") > sizeof(path))
		return -1;
	memcpy(slash + 1, "codebox-init", sizeof("codebox-init"));
	src = open(path, O_RDONLY | O_CLOEXEC);
	if (src < 0)
		return -1;
	mfd = util_sealed_copy(src, "codebox-init", MAIN_INIT_MAX_BYTES, true);
	close(src);
	return mfd;
}

/* The sealed codebox-init: the one passed through the exec, or made now when the pool runs
 * from its file; -1 when there is none. */
static int
main_init_source(void)
{
	const char *env = getenv(MAIN_INIT_FD_ENV);
	char *end;
	long fd;

	if (env == NULL)
		return main_seal_init();
	fd = strtol(env, &end, 10);
	(void)unsetenv(MAIN_INIT_FD_ENV);
	if (*end != '\0' || fd < 3 || fd > 1 << 20 || fcntl((int)fd, F_SETFD, FD_CLOEXEC) < 0)
		return -1;
	return (int)fd;
}

/*
 * Runs the pool from a sealed anonymous copy of its own binary. Warm runs are clones of the
 * pool's processes, so the binary stays mapped in them: from a file, /proc/self/maps and
 * /proc/self/exe would name its host path (a build tree, the image's layout); from a memfd
 * they name only "/memfd:codebox". Returns only when the copy cannot be made or run (the pool
 * then goes on from the file, and says so), or when this already is the copy.
 */
static void
main_exec_from_memfd(char **argv)
{
	char exe[64];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	int src = -1, mfd = -1;

	if (n > 0) {
		exe[n] = '\0';
		if (strncmp(exe, "/memfd:codebox", 14) == 0) {
			(void)prctl(PR_SET_NAME, "codebox-pool");
			return;
		}
	}
	src = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	if (src < 0)
		goto fail;
	mfd = util_sealed_copy(src, "codebox", 256LL << 20, false);
	if (mfd < 0)
		goto fail;
	{
		/* codebox-init crosses the exec, sealed too */
		char num[16];
		int init = main_seal_init();
		if (init >= 0 && fcntl(init, F_SETFD, 0) == 0) {
			snprintf(num, sizeof(num), "%d", init);
			(void)setenv(MAIN_INIT_FD_ENV, num, 1);
		}
	}
	close(src);
	fexecve(mfd, argv, environ);
	src = -1;
fail:
	fprintf(stderr,
	        "codebox-pool: running from its file, not a sealed copy (%s): warm runs "
	        "can see the binary's path\n",
	        strerror(errno));
	if (src >= 0)
		close(src);
	if (mfd >= 0)
		close(mfd);
}

/* What the command line says, copied out of the argument area (init overwrites it: see
 * sandbox_set_title_area()). */
struct main_options {
	const char *socket_path, *runs_dir, *python, *group, *user, *ceilings, *busy_log;
	const char *probe_cache; /* NULL: the probe imports every promised module */
	unsigned long long agent_bytes;
	unsigned long long pool_memory_bytes; /* 0: derived from the memory available */
};

static const char *
dup_or_die(const char *s)
{
	char *d;

	if (s == NULL)
		return NULL;
	d = strdup(s);
	if (d == NULL)
		die("out of memory");
	return d;
}

static void
options_parse(int argc, char **argv, struct main_options *o, struct pool_config *pc)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"runs-dir", required_argument, NULL, 'r'},
	    {"workers", required_argument, NULL, 'w'},
	    {"python", required_argument, NULL, 'p'},
	    {"socket-group", required_argument, NULL, 'g'},
	    {"run-uid-base", required_argument, NULL, 'u'},
	    {"max-sessions", required_argument, NULL, 'S'},
	    {"drain-seconds", required_argument, NULL, 'd'},
	    {"agent-workspace-bytes", required_argument, NULL, 'a'},
	    {"print-agent-timeout-ms", no_argument, NULL, 'T'},
	    {"check-ceilings", required_argument, NULL, 'C'},
	    {"print-kill-grace-seconds", no_argument, NULL, 'K'},
	    {"nginx-busy-log", required_argument, NULL, 'b'},
	    {"socket-user", required_argument, NULL, 'U'},
	    {"ceilings", required_argument, NULL, 'c'},
	    {"pool-memory-bytes", required_argument, NULL, 'm'},
	    {"probe-cache", required_argument, NULL, 'P'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	char why[256];
	int c;

	memset(o, 0, sizeof(*o));
	o->python = "/usr/bin/python3";
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			o->socket_path = optarg;
			break;
		case 'r':
			o->runs_dir = optarg;
			break;
		case 'w':
			pc->workers = (int)parse_long(optarg, "--workers", 1, 1024);
			break;
		case 'p':
			o->python = optarg;
			break;
		case 'g':
			o->group = optarg;
			break;
		case 'U':
			o->user = optarg;
			break;
		case 'c':
			o->ceilings = optarg;
			break;
		case 'u':
			pc->run_uid_base =
			    (uid_t)parse_long(optarg, "--run-uid-base", 1000, 1L << 30);
			break;
		case 'S':
			pc->max_sessions =
			    (int)parse_long(optarg, "--max-sessions", 0, SESSION_UIDS_MAX);
			break;
		case 'd':
			pc->drain_seconds = (int)parse_long(optarg, "--drain-seconds", 1, 3600);
			break;
		case 'b':
			o->busy_log = optarg;
			break;
		case 'a':
			o->agent_bytes = (unsigned long long)parse_long(
			    optarg, "--agent-workspace-bytes", 0, 1L << 40);
			break;
		case 'T': {
			long ms = agent_timeout_ms(getenv("SANDBOX_EXEC_TIMEOUT_SECONDS"), why,
			                           sizeof(why));
			if (why[0])
				log_msg(LOG_WARN, "%s", why);
			printf("%ld\n", ms);
			exit(0);
		}
		case 'K':
			printf("%d\n", run_kill_grace_seconds());
			exit(0);
		case 'C': {
			/* check-config.sh asks before anything starts: the ranges are the pool's */
			struct limits ceil;
			size_t body;
			if (limits_parse_ceilings(&ceil, &body, optarg, why, sizeof(why)) < 0) {
				fprintf(stderr, "%s\n", why);
				exit(1);
			}
			exit(0);
		}
		case 'm':
			o->pool_memory_bytes = (unsigned long long)parse_long(
			    optarg, "--pool-memory-bytes", 0, (long)(((1ULL << 62) - 1)));
			break;
		case 'P':
			if (optarg[0] != '/')
				die("--probe-cache must be an absolute path");
			o->probe_cache = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			exit(2);
		}
	}
	if (o->socket_path == NULL || o->runs_dir == NULL || pc->workers == 0) {
		usage(stderr);
		exit(2);
	}
	o->python = dup_or_die(o->python);
	o->socket_path = dup_or_die(o->socket_path);
	o->runs_dir = dup_or_die(o->runs_dir);
	o->group = dup_or_die(o->group);
	o->busy_log = dup_or_die(o->busy_log);
	o->user = dup_or_die(o->user);
	o->probe_cache = dup_or_die(o->probe_cache);
	/* o->ceilings stays in the argument area: ceilings_setup() reads it before any run */
}

/* The ceilings every request's limits are capped at (--ceilings, or the sanity maxima). */
static void
ceilings_setup(const char *arg, struct pool_config *pc, struct limits *ceil)
{
	char why[512];

	if (arg == NULL) {
		limits_default_ceilings(ceil, &pc->worker.max_body_bytes);
		ceil->max_concurrent_executions = pc->workers;
		log_msg(LOG_WARN, "started without --ceilings: requests' limits are capped only at "
		                  "the sanity maxima");
	} else if (limits_parse_ceilings(ceil, &pc->worker.max_body_bytes, arg, why, sizeof(why)) <
	           0) {
		die("--ceilings: %s", why);
	}
	if (ceil->max_concurrent_executions > pc->workers)
		die("CODEBOX_MAX_CONCURRENT_EXECUTIONS (%ld) exceeds --workers (%d)",
		    ceil->max_concurrent_executions, pc->workers);
	pc->worker.ceilings = ceil;
}

/* SIGTERM and friends are blocked from here on: pool and workers wait for them explicitly. */
static void
signals_block(void)
{
	sigset_t blocked;

	sigemptyset(&blocked);
	sigaddset(&blocked, SIGCHLD);
	sigaddset(&blocked, SIGTERM);
	sigaddset(&blocked, SIGINT);
	sigaddset(&blocked, SIGALRM);
	sigaddset(&blocked, SIGUSR1);
	sigprocmask(SIG_BLOCK, &blocked, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* The runs directory, its sandbox /etc, and (root) the run uid range, claimed for this pool. */
static void
runs_setup(const char *runs_dir, struct pool_config *pc, char *real, size_t real_len, char *etc,
           size_t etc_len)
{
	runs_dir_claim(runs_dir, real, real_len);
	pc->drop_privileges = geteuid() == 0;
	pc->worker.runs_dir = real;
	/* O_PATH: a non-root owner has no read permission on 0311 either */
	pc->worker.runs_dir_fd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pc->worker.runs_dir_fd < 0)
		die("open(%s) failed: %s", real, strerror(errno));
	etc_prepare(pc->worker.runs_dir_fd, real, etc, etc_len);
	snprintf(pc->worker.sessions_dir, sizeof(pc->worker.sessions_dir), "%s/sessions", real);
	pc->worker.sessions_fd = session_dir_setup(pc->worker.runs_dir_fd, real, NULL);
	if (!pc->drop_privileges)
		return;
	uid_range_claim(pc->run_uid_base, uid_range_last(pc));
	/* each session a uid of its own, above the workers', the probe's and port 8888's */
	pc->worker.session_uids.first = pc->run_uid_base + (uid_t)pc->workers + 2;
	pc->worker.session_uids.count = (uint32_t)pc->max_sessions;
}

/*
 * The layers this host offers, each probed by its own module, before the probe run confirms
 * them (probe_confirm()).
 */
static void
layers_probe(struct isolation *iso, const bool disabled[ISO_LAYER_COUNT],
             const struct pool_config *pc, struct seccomp_filter *filter, struct cgroup_ctx *cg,
             unsigned long long pool_memory_bytes)
{
	iso->root_pool = pc->drop_privileges;
	iso->uid_first = pc->drop_privileges ? pc->run_uid_base : geteuid();
	iso->uid_last = pc->drop_privileges ? uid_range_last(pc) : geteuid();
	iso->session_uid_first = pc->worker.session_uids.first;
	iso->session_uid_count = pc->worker.session_uids.count;
	iso->sigpending_share = sigpending_share(pc);
	iso_probe_namespaces(iso, disabled);
	landlock_probe(iso, disabled[ISO_LANDLOCK]);
	seccomp_probe(iso, disabled[ISO_SECCOMP], filter);
	cgroup_probe(iso, disabled, cg, pool_memory_bytes);
}

/*
 * Runs the interpreter once through the real sandbox (probe_measure()): it measures what
 * /capabilities reports and confirms the layers. A layer whose set-up fails is turned off
 * (probe_blame()) and the probe run again; refuses to start when nothing can be blamed or a
 * required layer is off.
 */
static void
probe_confirm(struct pool_config *pc, struct isolation *iso, struct seccomp_filter *filter,
              const struct cgroup_ctx *cg, const bool required[ISO_LAYER_COUNT],
              const char *probe_cache, struct probe_info *probe)
{
	char why[1024];

	if (run_init_reaper() < 0)
		die("cannot become a child subreaper");
	for (int attempt = 0;; attempt++) {
		struct run_config run;
		struct run_outcome fault;
		int rc;

		config_from_isolation(&pc->worker.run, iso, filter, cg);
		pc->worker.index = pc->workers; /* the probe's own directory, w<N> */
		if (worker_prepare_run(&pc->worker, &run) < 0)
			die("cannot prepare the probe's run directory");
		rc = probe_measure(&run, probe_cache, probe, &fault, why, sizeof(why));
		if (run.landlock_fd >= 0)
			close(run.landlock_fd);
		close(run.work_parent_fd);
		if (rc == 0)
			break;
		if (attempt >= 8 || !probe_blame(iso, &fault, why))
			die("refusing to start: %s", why);
		log_msg(LOG_WARN, "a layer failed in the start-up probe and is now off: %s", why);
	}
	if (seccomp_reconcile(iso, filter) < 0)
		die("rebuilding the seccomp filter without Landlock failed");
	if (iso_check_required(iso, required, why, sizeof(why)) < 0)
		die("refusing to start: %s", why);
	pc->worker.files_contained = iso->on[ISO_MOUNTNS] || iso->on[ISO_LANDLOCK];
}

/* The audit trail and the shared metrics, both set up before the first fork. */
static void
records_setup(struct pool_config *pc, const char *busy_log)
{
	char why[512];

	if (history_setup(&pc->worker.history, why, sizeof(why)) < 0)
		die("CODEBOX_HISTORY_DIR: %s", why);
	if (trace_export_setup(why, sizeof(why)) < 0)
		die("%s", why);
	pc->worker.agent.history = &pc->worker.history;
	if (pc->worker.history.dir_fd >= 0)
		log_msg(LOG_INFO, "audit trail in %s: at most %lu runs and %llu bytes",
		        pc->worker.history.dir, pc->worker.history.max_runs,
		        pc->worker.history.max_bytes);
	if (metrics_init() < 0)
		log_msg(LOG_WARN, "mapping the metrics' shared counters failed: %s",
		        strerror(errno));
	pc->worker.nginx_busy_log = busy_log;
}

/* Warm interpreters stay on only where the embedded libpython is the cold runs' interpreter. */
static void
warm_decide(struct pool_config *pc, const char *python, const struct isolation *iso)
{
	char real[4096];

	/* a template's clone is init of a pid namespace: the worker ends the whole run by
	 * killing it through its pidfd, which needs no parenthood. Without one, runs are cold */
	if (pc->warm.enabled && !iso->on[ISO_PIDNS]) {
		log_msg(LOG_WARN, "warm interpreters: off, runs are cold: a warm run's init is a "
		                  "template's child, and needs a pid namespace");
		pc->warm.enabled = pc->worker.warm_enabled = false;
	}

	if (pc->warm.enabled &&
	    (realpath(python, real) == NULL || strcmp(real, WARM_INTERPRETER) != 0)) {
		log_msg(LOG_WARN,
		        "warm interpreters: off, runs are cold: they embed %s's library and "
		        "--python is %s",
		        WARM_INTERPRETER, python);
		pc->warm.enabled = pc->worker.warm_enabled = false;
	}
	if (pc->warm.enabled)
		log_msg(LOG_INFO,
		        "warm interpreters: on (%d preloaded modules, %s first, %d of them in the "
		        "heavy tier; a template serves at most %lu runs or %lu s)",
		        pc->warm.n_modules, pc->warm.n_modules ? pc->warm.modules[0] : "none",
		        pc->warm.n_heavy, pc->warm.max_runs, pc->warm.max_seconds);
	else
		log_msg(LOG_INFO, "warm interpreters: off (CODEBOX_WARM=0); every run starts one");
}

/* the settings read from the environment and the options, checked before anything is made */
static void
settings_check(const struct main_options *o, struct pool_config *pc, bool *disabled, bool *required)
{
	char why[1024];

	if (o->python[0] != '/')
		die("--python must be an absolute path");
	if (access(o->python, X_OK) < 0)
		die("the interpreter %s is not executable: %s", o->python, strerror(errno));
	if (iso_parse_list(getenv("CODEBOX_DISABLE"), disabled, why, sizeof(why)) < 0)
		die("CODEBOX_DISABLE: %s", why);
	if (iso_parse_list(getenv("CODEBOX_REQUIRE"), required, why, sizeof(why)) < 0)
		die("CODEBOX_REQUIRE: %s", why);
	if (warm_parse_settings(&pc->warm, why, sizeof(why)) < 0)
		die("%s", why);
	if (session_ordinal_parse(getenv("CODEBOX_POD_ORDINAL"), &pc->worker.pod_ordinal, why,
	                          sizeof(why)) < 0)
		die("%s", why);
	pc->worker.warm_enabled = pc->warm.enabled;
}

/* what the start-up found: the layers, the interpreter and the uids runs take */
static void
startup_report(const struct pool_config *pc, const struct isolation *iso,
               const struct probe_info *probe)
{
	char summary[768];

	iso_summary(iso, summary, sizeof(summary));
	log_msg(LOG_INFO, "isolation: %s", summary);
	log_msg(LOG_INFO, "python %s with %zu modules (%s %s, ...), %s; runs as %s",
	        probe->python_version, probe->n_modules, probe->modules[0].import_name,
	        probe->modules[0].version,
	        probe->cached ? "as the probe cache measured them (no file of theirs changed)"
	                      : "each imported",
	        pc->drop_privileges ? "per-worker uids, and a uid per session"
	        : iso->sigpending_share
	            ? "the pool's uid, a share of its queued signals per sandbox"
	            : "the pool's uid");
}

/* the key that signs this pool's session snapshots: the fleet's, or a random one of its own */
static void
snapshot_key_setup(struct pool_config *pc)
{
	char why[1024];

	if (snapshot_key_load(&pc->worker.snapshot_key, getenv("CODEBOX_FLEET_KEY_FILE"), why,
	                      sizeof(why)) < 0)
		die("refusing to start: %s", why);
	log_msg(LOG_INFO, "snapshots: %s",
	        pc->worker.snapshot_key.fleet
	            ? "signed with the fleet's key (CODEBOX_FLEET_KEY_FILE): any pod of the fleet "
	              "restores them"
	            : "signed with a random key of this pool's: they restore only here, until it "
	              "restarts (set CODEBOX_FLEET_KEY_FILE for a fleet)");
}

int
main(int argc, char **argv)
{
	static struct limits ceil;
	static struct probe_info probe;
	static struct isolation iso;
	static struct seccomp_filter filter;
	static struct cgroup_ctx cg;
	static char etc[4200], runs_real[4096];
	struct pool_config pc = {
	    .drain_seconds = 40, .run_uid_base = 20000, .max_sessions = SESSION_DEFAULT_MAX};
	struct main_options o;
	bool disabled[ISO_LAYER_COUNT], required[ISO_LAYER_COUNT];
	int rc;

	main_exec_from_memfd(argv);
	if (argc == 2 && strcmp(argv[1], WARM_ZYGOTE_ARG) == 0) {
		/* the warm interpreters' root, exec'd by the supervisor (warm.c): a program image
		 * of its own, that has seen nothing of the pool's but what it is sent */
		sandbox_set_title_area(argv[0], (size_t)(argv[1] + strlen(argv[1]) - argv[0]));
		zygote_main();
	}
	log_set_component("pool");
	pc.init_fd = main_init_source();
	/* the argument area, contiguous from argv[0] to the end of the last argument */
	sandbox_set_title_area(argv[0],
	                       (size_t)(argv[argc - 1] + strlen(argv[argc - 1]) - argv[0]));
	options_parse(argc, argv, &o, &pc);
	ceilings_setup(o.ceilings, &pc, &ceil);
	settings_check(&o, &pc, disabled, required);
	signals_block();
	/* what a pool that was killed left running goes first: its processes would hold the
	 * run uids claimed next */
	cgroup_sweep_dead_pools();
	runs_setup(o.runs_dir, &pc, runs_real, sizeof(runs_real), etc, sizeof(etc));

	layers_probe(&iso, disabled, &pc, &filter, &cg, o.pool_memory_bytes);
	pc.worker.run.python = o.python;
	pc.worker.run.drop_privileges = pc.drop_privileges;
	pc.worker.run.sigpending = iso.sigpending_share;
	pc.worker.run.run_uid = pc.run_uid_base + (uid_t)pc.workers; /* the probe's own uid */
	pc.worker.run.run_gid = (gid_t)pc.worker.run.run_uid;
	/* a directory fd: the runs' /etc is copied from it, and its path (in the runtime
	 * directory) is given to no process that becomes part of a run */
	pc.worker.run.etc_fd = open(etc, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (pc.worker.run.etc_fd < 0)
		die("open(%s) failed: %s", etc, strerror(errno));
	pc.worker.probe = &probe;
	pc.worker.iso = &iso;
	probe_confirm(&pc, &iso, &filter, &cg, required, o.probe_cache, &probe);
	free((char *)o.probe_cache); /* read by the start-up probe alone */
	o.probe_cache = NULL;
	startup_report(&pc, &iso, &probe);

	agent_setup(&pc, &iso, o.agent_bytes);
	records_setup(&pc, o.busy_log);
	warm_decide(&pc, o.python, &iso);
	/* after the probe (whose runs are copies of this process): the workers' copy only */
	snapshot_key_setup(&pc);
	pc.worker.listen_fd = listen_unix(o.socket_path, o.user, o.group);
	pc.socket_path = o.socket_path;
	rc = pool_run(&pc);

	unlink(o.socket_path);
	if (iso.on[ISO_CGROUP])
		cgroup_teardown(&cg);
	if (pc.worker.agent.workspace_fd >= 0)
		close(pc.worker.agent.workspace_fd);
	seccomp_free(&filter);
	free((char *)pc.worker.history.dir);
	free((char *)o.python);
	free((char *)o.socket_path);
	free((char *)o.runs_dir);
	free((char *)o.group);
	free((char *)o.busy_log);
	free((char *)o.user);
	return rc < 0 ? 1 : 0;
}
