/*
 * main.c - start-up of codebox-pool, the only place that may die().
 *
 * Order: parse options, open the runs directory, measure the interpreter (probe.c runs it
 * through the real sandbox and refuses to start without every promised module), bind the
 * FastCGI socket, then hand over to the pool. The probe runs before any worker exists because
 * the run's kill sweep treats every child of the calling process as part of the run.
 */
#include "log.h"
#include "pool.h"
#include "probe.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdnoreturn.h>
#include <string.h>
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
	fprintf(f, "usage: codebox-pool --socket PATH --runs-dir DIR --workers N\n"
	           "                    [--python PATH] [--socket-group GROUP]\n"
	           "                    [--run-uid-base UID] [--drain-seconds S]\n"
	           "Serves codebox's FastCGI protocol with a prefork pool of N workers.\n");
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
listen_unix(const char *path, const char *group)
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
	if (group != NULL) {
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

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"socket", required_argument, NULL, 's'},
	    {"runs-dir", required_argument, NULL, 'r'},
	    {"workers", required_argument, NULL, 'w'},
	    {"python", required_argument, NULL, 'p'},
	    {"socket-group", required_argument, NULL, 'g'},
	    {"run-uid-base", required_argument, NULL, 'u'},
	    {"drain-seconds", required_argument, NULL, 'd'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *socket_path = NULL, *runs_dir = NULL, *python = "/usr/bin/python3";
	const char *group = NULL;
	struct pool_config pc = {.drain_seconds = 40, .run_uid_base = 20000};
	static struct probe_info probe;
	char why[1024], runs_real[4096];
	sigset_t blocked;
	int c;

	log_set_component("pool");
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			socket_path = optarg;
			break;
		case 'r':
			runs_dir = optarg;
			break;
		case 'w':
			pc.workers = (int)parse_long(optarg, "--workers", 1, 1024);
			break;
		case 'p':
			python = optarg;
			break;
		case 'g':
			group = optarg;
			break;
		case 'u':
			pc.run_uid_base =
			    (uid_t)parse_long(optarg, "--run-uid-base", 1000, 1L << 30);
			break;
		case 'd':
			pc.drain_seconds = (int)parse_long(optarg, "--drain-seconds", 1, 3600);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (socket_path == NULL || runs_dir == NULL || pc.workers == 0) {
		usage(stderr);
		return 2;
	}
	if (python[0] != '/')
		die("--python must be an absolute path");
	if (access(python, X_OK) < 0)
		die("the interpreter %s is not executable: %s", python, strerror(errno));

	/* SIGTERM and friends are blocked from here on: pool and workers wait for them explicitly
	 */
	sigemptyset(&blocked);
	sigaddset(&blocked, SIGCHLD);
	sigaddset(&blocked, SIGTERM);
	sigaddset(&blocked, SIGINT);
	sigaddset(&blocked, SIGALRM);
	sigprocmask(SIG_BLOCK, &blocked, NULL);
	signal(SIGPIPE, SIG_IGN);

	if (realpath(runs_dir, runs_real) == NULL)
		die("the runs directory %s: %s", runs_dir, strerror(errno));
	pc.drop_privileges = geteuid() == 0;
	/* runs must not list it: write and search only, for its owner; search for the others */
	if (chmod(runs_real, 0311) < 0)
		die("chmod(%s) failed: %s", runs_real, strerror(errno));
	pc.worker.run.python = python;
	pc.worker.run.runs_dir = runs_real;
	pc.worker.run.runs_dir_fd = open(runs_real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (pc.worker.run.runs_dir_fd < 0)
		die("open(%s) failed: %s", runs_real, strerror(errno));
	pc.worker.run.drop_privileges = pc.drop_privileges;
	pc.worker.run.run_uid = pc.run_uid_base + (uid_t)pc.workers; /* the probe's own uid */
	pc.worker.run.run_gid = (gid_t)pc.worker.run.run_uid;
	pc.worker.probe = &probe;
	pc.worker.files_contained = false;

	if (run_init_reaper() < 0)
		die("cannot become a child subreaper");
	if (probe_measure(&pc.worker.run, &probe, why, sizeof(why)) < 0)
		die("refusing to start: %s", why);
	log_msg(LOG_INFO, "python %s with %zu modules (%s %s, ...); runs as %s",
	        probe.python_version, probe.n_modules, probe.modules[0].import_name,
	        probe.modules[0].version,
	        pc.drop_privileges ? "per-worker uids" : "the pool's uid");

	pc.worker.listen_fd = listen_unix(socket_path, group);
	c = pool_run(&pc);
	unlink(socket_path);
	return c < 0 ? 1 : 0;
}
