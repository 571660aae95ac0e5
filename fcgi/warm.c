/*
 * warm.c - warm interpreters: the zygote, the templates, and a run's entry into Python.
 *
 * Processes (the whole picture is in run.c's theory of operation):
 *
 *   supervisor ─fork─▶ zygote   scrubs the environment it inherited (zeroes the strings, so
 *                               no secret of the pool's environment is anywhere in its memory),
 *                               embeds libpython as `python3 -I -u` would configure itself,
 *                               imports the preloaded modules, freezes the garbage collector
 *                               and backs its heap with huge pages (MADV_COLLAPSE), so that
 *                               copying it costs page-table entries per 2 MiB, not per 4 KiB.
 *              ◀─clone(CLONE_PARENT)─ workers: on the supervisor's request the zygote clones
 *                               each worker, which is thus the supervisor's child (supervised
 *                               as before) and shares the zygote's pages.
 *   worker ─fork─▶ template     before the worker's first request: a pristine copy that never
 *                               runs Python code. Per run, on the worker's request (a
 *                               SOCK_SEQPACKET message with the run's directory and the child's
 *                               ends of the pipes as SCM_RIGHTS), it clone()s the run's child
 *                               with CLONE_PARENT and the run's namespaces: the child is the
 *                               worker's own child, exactly as if the worker had cloned it, and
 *                               takes the same sandbox.c steps (init, then the program).
 *   program                     after the last step (seccomp), sandbox.c calls warm_enter()
 *                               instead of execve(): reseed, environment, signals, argv, then
 *                               main.py, as `python3 -I -u main.py` runs it.
 *
 *   heavy template              with two tiers, the zygote imports only the light tier's
 *                               modules, and before its heap is collapsed forks the heavy
 *                               template, which imports the others and clones, for every
 *                               worker, the init of each run that names them: its own child
 *                               (the kernel reaps it), the worker holding its pidfd (the end
 *                               of this file says why).
 *
 * Lifetimes: the zygote seeds string hashing once; it is replaced after max_seconds, and a
 * template after max_runs or max_seconds (the worker ends after its reply and the supervisor
 * clones a new one from the current zygote). A template that dies makes its worker run cold
 * and end after the reply. Nothing is ever fatal: any failure means a cold run.
 *
 * The worker is single-threaded and so are the zygote and templates (OPENBLAS_NUM_THREADS=1:
 * no module starts a thread on import; checked before each template starts), which creating
 * a user namespace requires.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "warm.h"

#include "log.h"
#include "proc.h"
#include "run.h"
#include "sandbox.h"
#include "tier.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

/* How long the zygote may take to import the modules (a cold page cache, sanitizers). */
#define WARM_ZYGOTE_READY_MS 180000
/* How long the zygote or a template may take to answer one request. */
#define WARM_ANSWER_MS 10000

extern char **environ;
/* set by the interpreter when KeyboardInterrupt ended the program (exported by libpython) */
extern int _Py_UnhandledKeyboardInterrupt;
/* the interpreter's own handling of SystemExit: the exit code, the message printed */
int _Py_HandleSystemExit(int *exitcode_p);

static struct warm_settings warm_settings;

/* ---- settings ---- */

static int
parse_ulong(const char *name, unsigned long dflt, unsigned long min, unsigned long *out, char *why,
            size_t why_len)
{
	const char *v = getenv(name);
	char *end;
	unsigned long n;

	*out = dflt;
	if (v == NULL || *v == '\0')
		return 0;
	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || *end != '\0' || v[0] == '-' || n < min) {
		snprintf(why, why_len, "%s must be an integer >= %lu, not \"%.40s\"", name, min, v);
		return -1;
	}
	*out = n;
	return 0;
}

static bool
module_name_ok(const char *m)
{
	if (*m == '\0' || *m == '.')
		return false;
	for (const char *p = m; *p; p++)
		if (!(*p == '_' || *p == '.' || (*p >= 'a' && *p <= 'z') ||
		      (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
			return false;
	return true;
}

int
warm_parse_settings(struct warm_settings *s, char *why, size_t why_len)
{
	const char *on = getenv("CODEBOX_WARM");
	const char *mods = getenv("CODEBOX_WARM_MODULES");

	memset(s, 0, sizeof(*s));
	if (on == NULL || *on == '\0' || strcmp(on, "1") == 0) {
		s->enabled = true;
	} else if (strcmp(on, "0") != 0) {
		snprintf(why, why_len, "CODEBOX_WARM must be 0 or 1, not \"%.40s\"", on);
		return -1;
	}
	if (mods == NULL)
		mods = WARM_DEFAULT_MODULES;
	for (const char *p = mods; *p;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);

		if (n > 0) {
			if (s->n_modules >= WARM_MAX_MODULES || n >= sizeof(s->modules[0])) {
				snprintf(why, why_len,
				         "CODEBOX_WARM_MODULES: at most %d names of at most %zu "
				         "characters",
				         WARM_MAX_MODULES, sizeof(s->modules[0]) - 1);
				return -1;
			}
			memcpy(s->modules[s->n_modules], p, n);
			s->modules[s->n_modules][n] = '\0';
			if (!module_name_ok(s->modules[s->n_modules])) {
				snprintf(why, why_len,
				         "CODEBOX_WARM_MODULES: \"%s\" is not a module name",
				         s->modules[s->n_modules]);
				return -1;
			}
			s->n_modules++;
		}
		p = end ? end + 1 : p + n;
	}
	{
		const char *light = getenv("CODEBOX_WARM_LIGHT_MODULES");
		bool explicit_light = light != NULL;

		if (light == NULL)
			light = WARM_DEFAULT_LIGHT_MODULES;
		for (const char *p = light; *p;) {
			const char *end = strchr(p, ',');
			size_t n = end ? (size_t)(end - p) : strlen(p);
			bool found = false;

			for (int i = 0; n > 0 && i < s->n_modules; i++)
				if (strlen(s->modules[i]) == n && strncmp(s->modules[i], p, n) == 0)
					s->light[i] = found = true;
			if (n > 0 && !found && explicit_light) {
				snprintf(why, why_len,
				         "CODEBOX_WARM_LIGHT_MODULES: \"%.*s\" is not one of the "
				         "preloaded modules (CODEBOX_WARM_MODULES)",
				         (int)(n > 64 ? 64 : n), p);
				return -1;
			}
			p = end ? end + 1 : p + n;
		}
		for (int i = 0; i < s->n_modules; i++)
			if (!s->light[i])
				s->n_heavy++;
	}
	if (parse_ulong("CODEBOX_WARM_MAX_RUNS", 1000, 1, &s->max_runs, why, why_len) < 0 ||
	    parse_ulong("CODEBOX_WARM_MAX_SECONDS", 900, 1, &s->max_seconds, why, why_len) < 0)
		return -1;
	return 0;
}

/* ---- small helpers ---- */

/* Waits until fd is readable, at most ms. Returns 1, 0 on timeout, -1 on error. */
static int
wait_readable(int fd, long long ms)
{
	long long deadline = proc_now_ms() + ms;

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		long long left = deadline - proc_now_ms();
		int r;

		if (left < 0)
			left = 0;
		r = poll(&pfd, 1, (int)left);
		if (r > 0)
			return 1;
		if (r == 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

static int send_with_fds_flags(int sock, const void *buf, size_t len, const int *fds, int n,
                               int flags);

/* Sends buf with up to n fds (those < 0 are left out). */
static int
send_with_fds(int sock, const void *buf, size_t len, const int *fds, int n)
{
	return send_with_fds_flags(sock, buf, len, fds, n, 0);
}

/* The same, with sendmsg() flags added to MSG_NOSIGNAL (MSG_DONTWAIT: EAGAIN when full). */
static int
send_with_fds_flags(int sock, const void *buf, size_t len, const int *fds, int n, int flags)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 8)];
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	int kept[8], k = 0;

	for (int i = 0; i < n && k < 8; i++)
		if (fds[i] >= 0)
			kept[k++] = fds[i];
	if (k > 0) {
		struct cmsghdr *c;
		memset(cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)k);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)k);
		memcpy(CMSG_DATA(c), kept, sizeof(int) * (size_t)k);
	}
	for (;;) {
		ssize_t w = sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
		if (w == (ssize_t)len)
			return 0;
		if (w < 0 && errno == EINTR)
			continue;
		if (w >= 0)
			errno = EMSGSIZE;
		return -1;
	}
}

/* Receives one message of exactly len bytes with up to max fds (close-on-exec). Returns the
 * number of fds, 0 with errno 0 at EOF... -1 on error or EOF (errno EPIPE). */
static int
recv_with_fds_flags(int sock, void *buf, size_t len, int *fds, int max, int flags)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 8)];
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr msg = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	ssize_t r;
	int n = 0;

	do
		r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
	while (r < 0 && errno == EINTR);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); r >= 0 && c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int got = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int *p = (int *)CMSG_DATA(c);
		for (int i = 0; i < got; i++) {
			if (n < max)
				fds[n++] = p[i];
			else
				close(p[i]);
		}
	}
	if (r != (ssize_t)len || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (int i = 0; i < n; i++)
			close(fds[i]);
		errno = r == 0 ? EPIPE : r < 0 ? errno : EPROTO;
		return -1;
	}
	return n;
}

static int
recv_with_fds(int sock, void *buf, size_t len, int *fds, int max)
{
	return recv_with_fds_flags(sock, buf, len, fds, max, 0);
}

static int
count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

/* ---- the zygote ---- */

static int zygote_sock = -1;
static pid_t zygote_pid = -1;
static bool zygote_failed; /* a start failed: the pool stays cold */
static long long zygote_started_ms;
static warm_worker_fn zygote_fn;
static void *zygote_ctx;
static const char *zygote_python;

/* The functions every run calls on entry and exit (defined in the zygote, private here). */
static PyObject *warm_enter_fn;
static PyObject *warm_leave_fn;

static const char warm_enter_source[] =
    "def enter(env, orig_argv):\n"
    "    import os, random, signal, sys\n"
    "    os.environ.clear()\n"
    "    os.environ.update(env)\n"
    "    sys.orig_argv = orig_argv\n"
    "    signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "    random.seed()\n"
    "    np = sys.modules.get('numpy')\n"
    "    if np is not None and hasattr(np, 'random'):\n"
    "        np.random.seed()\n"
    "    tf = sys.modules.get('tempfile')\n"
    "    if tf is not None:\n"
    "        tf.tempdir = None\n"
    "\n"
    "def leave():\n"
    "    # what the interpreter's finalisation does that a program can see: wait for\n"
    "    # non-daemon threads, run atexit handlers, drop __main__'s objects (their __del__\n"
    "    # runs, open files are flushed and closed), collect cycles, flush stdout and\n"
    "    # stderr. The template's own modules are not torn down: the process ends.\n"
    "    import atexit, gc, sys\n"
    "    try:\n"
    "        t = sys.modules.get('threading')\n"
    "        if t is not None:\n"
    "            t._shutdown()\n"
    "    except BaseException:\n"
    "        pass\n"
    "    atexit._run_exitfuncs()\n"
    "    m = sys.modules.get('__main__')\n"
    "    if m is not None:\n"
    "        m.__dict__.clear()\n"
    "    gc.collect()\n"
    "    ok = True\n"
    "    for f in (sys.stdout, sys.stderr):\n"
    "        try:\n"
    "            if f is not None:\n"
    "                f.flush()\n"
    "        except BaseException:\n"
    "            ok = False\n"
    "    return ok\n";

/*
 * Run once by the zygote after the imports, never by a run: the submodules programs commonly
 * import and the first calls that fill the modules' caches, so that a run does not pay for
 * them again. Only the configured modules are touched; a failure only costs speed.
 */
static const char warm_exercise_source[] =
    "import sys\n"
    "def exercise(wanted):\n"
    "    if 'numpy' in wanted:\n"
    "        import numpy as np\n"
    "        a = np.array([[2.0, 1, 1], [1, 3, 2], [3, 2, 1]])\n"
    "        np.linalg.solve(a, np.array([13.0, 19, 18])).round(2).tolist()\n"
    "        np.linalg.inv(a); np.linalg.eigvals(a); np.random.default_rng(0).normal(size=8)\n"
    "        import json; json.dumps({'a': [1.5]})\n"
    "    if 'pandas' in wanted:\n"
    "        import pandas as pd\n"
    "        f = pd.DataFrame({'x': [1.0, 2.0, 3.0], 'g': ['a', 'b', 'a']})\n"
    "        f.groupby('g')['x'].mean(); f.describe(); f['x'].sum(); f.to_dict(); str(f)\n"
    "    if 'scipy' in wanted:\n"
    "        import scipy.optimize, scipy.stats, scipy.linalg, scipy.integrate\n"
    "        import scipy.interpolate, scipy.special, scipy.sparse, scipy.signal\n"
    "        scipy.optimize.brentq(lambda v: v * v - 2, 0, 2)\n"
    "        scipy.optimize.minimize(lambda v: (v[0] - 1) ** 2, [0.0])\n"
    "        scipy.stats.norm.cdf(0.5); scipy.integrate.quad(lambda v: v, 0, 1)\n"
    "    if 'sympy' in wanted:\n"
    "        import sympy\n"
    "        t = sympy.symbols('t')\n"
    "        str(sympy.diff(t ** 3 + 2 * t, t)); sympy.solve(t ** 2 - 2, t)\n"
    "        sympy.simplify(sympy.sin(t) ** 2 + sympy.cos(t) ** 2); sympy.integrate(t ** 2, t)\n"
    "    if 'sklearn' in wanted:\n"
    "        import numpy as np\n"
    "        import sklearn.linear_model, sklearn.model_selection, sklearn.preprocessing\n"
    "        import sklearn.metrics, sklearn.cluster, sklearn.tree, sklearn.ensemble\n"
    "        x = np.arange(10, dtype=float).reshape(-1, 1)\n"
    "        m = sklearn.linear_model.LinearRegression().fit(x, 3 * x.ravel() + 2)\n"
    "        m.predict(x); sklearn.metrics.r2_score(x.ravel(), x.ravel())\n";

/* Zeroes the inherited environment's strings and installs the runs' fixed one. */
static void
zygote_scrub_environment(void)
{
	for (char **e = environ; e != NULL && *e != NULL; e++)
		explicit_bzero(*e, strlen(*e));
	clearenv();
	setenv("PATH", "/usr/local/bin:/usr/bin:/bin", 1);
	setenv("LANG", "C.UTF-8", 1);
	setenv("OPENBLAS_NUM_THREADS", "1", 1);
	setenv("OMP_NUM_THREADS", "1", 1);
	setenv("MKL_NUM_THREADS", "1", 1);
}

/* Backs every private anonymous mapping with huge pages where 2 MiB-aligned ranges exist. */
static void
zygote_collapse(void)
{
	FILE *f = fopen("/proc/self/maps", "re");
	char line[512];
	const unsigned long huge = 2UL << 20;

	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		unsigned long lo, hi, ino;
		char perms[8], path[256] = "";

		if (sscanf(line, "%lx-%lx %7s %*s %*s %lu %255s", &lo, &hi, perms, &ino, path) < 4)
			continue;
		if (strcmp(perms, "rw-p") != 0 || ino != 0 ||
		    (path[0] != '\0' && strcmp(path, "[heap]") != 0))
			continue;
		lo = (lo + huge - 1) & ~(huge - 1);
		hi &= ~(huge - 1);
		if (hi <= lo)
			continue;
		(void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE);
		(void)madvise((void *)lo, hi - lo, MADV_COLLAPSE);
	}
	fclose(f);
}

static int zygote_import(bool light, char *why, size_t why_len);

static int
zygote_python_init(const char *python, char *why, size_t why_len)
{
	PyPreConfig pre;
	PyConfig cfg;
	PyStatus st;
	char *argv[] = {"main.py"};
	PyObject *ns, *r;

	PyPreConfig_InitPythonConfig(&pre);
	pre.isolated = 1;
	pre.use_environment = 0;
	/* glibc's malloc: its arenas are what MADV_COLLAPSE turns into huge pages */
	pre.allocator = PYMEM_ALLOCATOR_MALLOC;
	st = Py_PreInitialize(&pre);
	if (PyStatus_Exception(st)) {
		snprintf(why, why_len, "Py_PreInitialize: %s", st.err_msg ? st.err_msg : "?");
		return -1;
	}
	/* what `python3 -I -u main.py` configures */
	PyConfig_InitPythonConfig(&cfg);
	cfg.isolated = 1;
	cfg.use_environment = 0;
	cfg.user_site_directory = 0;
	cfg.safe_path = 1;
	cfg.buffered_stdio = 0;
	cfg.parse_argv = 0;
	cfg.install_signal_handlers = 1;
	st = PyConfig_SetBytesString(&cfg, &cfg.program_name, python);
	if (!PyStatus_Exception(st))
		st = PyConfig_SetBytesString(&cfg, &cfg.executable, python);
	if (!PyStatus_Exception(st))
		st = PyConfig_SetBytesArgv(&cfg, 1, argv);
	if (!PyStatus_Exception(st))
		st = Py_InitializeFromConfig(&cfg);
	PyConfig_Clear(&cfg);
	if (PyStatus_Exception(st)) {
		snprintf(why, why_len, "Py_InitializeFromConfig: %s",
		         st.err_msg ? st.err_msg : "?");
		return -1;
	}
	ns = PyDict_New();
	if (ns == NULL || PyDict_SetItemString(ns, "__builtins__", PyEval_GetBuiltins()) < 0) {
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	r = PyRun_String(warm_enter_source, Py_file_input, ns, ns);
	warm_enter_fn = r ? PyDict_GetItemString(ns, "enter") : NULL;
	warm_leave_fn = r ? PyDict_GetItemString(ns, "leave") : NULL;
	Py_XDECREF(r);
	if (warm_enter_fn == NULL || warm_leave_fn == NULL) {
		PyErr_Print();
		snprintf(why, why_len, "defining the entry function failed");
		return -1;
	}
	Py_INCREF(warm_enter_fn);
	Py_INCREF(warm_leave_fn);
	/* what the entry imports, imported now (a run's copy need not) */
	PyRun_SimpleString("import os, random, signal, sys\n");
	return zygote_import(true, why, why_len);
}

/*
 * Imports the modules of one tier (light: the zygote's; else the heavy template's), runs the
 * warm-up exercise for them and freezes the garbage collector. Returns 0, or -1 with why.
 */
static int
zygote_import(bool light, char *why, size_t why_len)
{
	PyObject *ns, *r, *gc;

	for (int i = 0; i < warm_settings.n_modules; i++) {
		if (warm_settings.light[i] != light)
			continue;
		PyObject *m = PyImport_ImportModule(warm_settings.modules[i]);
		if (m == NULL) {
			PyErr_Print();
			snprintf(why, why_len, "importing %s failed (the traceback is above)",
			         warm_settings.modules[i]);
			return -1;
		}
		Py_DECREF(m);
	}
	ns = PyDict_New();
	if (ns == NULL || PyDict_SetItemString(ns, "__builtins__", PyEval_GetBuiltins()) < 0) {
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	{
		PyObject *wanted = PySet_New(NULL), *fn;
		for (int i = 0; wanted && i < warm_settings.n_modules; i++) {
			if (warm_settings.light[i] != light)
				continue;
			PyObject *name = PyUnicode_FromString(warm_settings.modules[i]);
			if (name == NULL || PySet_Add(wanted, name) < 0)
				Py_CLEAR(wanted);
			Py_XDECREF(name);
		}
		r = wanted ? PyRun_String(warm_exercise_source, Py_file_input, ns, ns) : NULL;
		Py_XDECREF(r);
		fn = r ? PyDict_GetItemString(ns, "exercise") : NULL;
		r = fn ? PyObject_CallOneArg(fn, wanted) : NULL;
		if (r == NULL) {
			log_msg(LOG_WARN, "the warm-up exercise failed (runs pay for it):");
			PyErr_Print();
		}
		Py_XDECREF(r);
		Py_XDECREF(wanted);
	}
	Py_DECREF(ns);
	/* objects that exist now are never scanned again: a run's collections do not write to
	 * (and so copy) the template's pages */
	gc = PyImport_ImportModule("gc");
	r = gc ? PyObject_CallMethod(gc, "freeze", NULL) : NULL;
	Py_XDECREF(r);
	Py_XDECREF(gc);
	PyErr_Clear();
	return 0;
}

struct zygote_ready {
	int ok;
	char why[240];
};

/*
 * The heavy tier (the end of this file): its template, the zygote's child; while it retires,
 * its successor, and once the successor serves, the retired one until it has ended.
 */
struct heavy_proc {
	pid_t pid;     /* -1: none */
	int pidfd;     /* readable when it ends */
	int note_fd;   /* its notices: the ready report, then 'R' when its life is up */
	int retire_fd; /* closed by the zygote: the template ends between two requests */
	long long started_ms;
	bool retiring; /* it said 'R': a successor is forked, and it serves until that is ready */
};
#define HEAVY_NONE ((struct heavy_proc){.pid = -1, .pidfd = -1, .note_fd = -1, .retire_fd = -1})
static int heavy_sock = -1;     /* zygote and workers: where the workers send requests */
static int heavy_serve_fd = -1; /* zygote: the templates' end, kept for the next template */
static struct heavy_proc heavy_cur = HEAVY_NONE, heavy_next = HEAVY_NONE, heavy_old = HEAVY_NONE;
static bool heavy_dead; /* worker: the heavy tier failed once; the worker renews after its reply */
static void heavy_start(long long wait_ms);
static void heavy_check(void);
static void heavy_poll_fds(struct pollfd *pfd, int *n);
static void heavy_forget(void);

static noreturn void
zygote_main(int sock)
{
	struct zygote_ready ready = {0};
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	long long t0 = proc_now_ms();
	int devnull;

	log_set_component("zygote");
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	(void)prctl(PR_SET_NAME, "codebox-zygote");
	sigaction(SIGCHLD, &dfl, NULL);
	zygote_scrub_environment();
	/* nothing a run reads comes from the pool's stdin */
	devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull >= 0) {
		dup2(devnull, 0);
		close(devnull);
	}
	if (zygote_python_init(zygote_python, ready.why, sizeof(ready.why)) == 0) {
		int threads = count_threads();
		if (threads != 1) {
			snprintf(ready.why, sizeof(ready.why),
			         "the preloaded modules started threads (%d): a user namespace "
			         "needs a single-threaded process",
			         threads);
		} else {
			/* the heavy tier's template forks from here: light modules only */
			if (warm_settings.n_heavy > 0)
				heavy_start(WARM_ZYGOTE_READY_MS - (proc_now_ms() - t0) - 5000);
			zygote_collapse();
			ready.ok = 1;
			log_msg(LOG_INFO,
			        "zygote ready: %d modules imported in %lld ms (%d of them by the "
			        "heavy template%s)",
			        warm_settings.n_modules, proc_now_ms() - t0, warm_settings.n_heavy,
			        warm_settings.n_heavy > 0 && heavy_sock < 0 ? ", which failed"
			                                                    : "");
		}
	}
	if (util_write_all(sock, &ready, sizeof(ready)) < 0 || !ready.ok)
		_exit(1);
	for (;;) {
		int index;
		ssize_t r;
		pid_t pid;

		if (heavy_serve_fd >= 0) {
			/* a heavy template whose life is up is succeeded, one that ended replaced
			 */
			struct pollfd pfd[8] = {{.fd = sock, .events = POLLIN}};
			int n = 1, w;
			heavy_poll_fds(pfd, &n);
			w = poll(pfd, (nfds_t)n, 1000);
			heavy_check();
			if (w <= 0 || !pfd[0].revents)
				continue;
		}
		r = read(sock, &index, sizeof(index));
		if (r < 0 && errno == EINTR)
			continue;
		if (r != (ssize_t)sizeof(index))
			_exit(0); /* the supervisor is gone or stops us */
		/* the worker becomes the supervisor's child: it supervises it as any other */
		pid = (pid_t)syscall(SYS_clone, CLONE_PARENT | SIGCHLD, 0, 0, 0, 0);
		if (pid == 0) {
			struct sigaction dfl_chld = {.sa_handler = SIG_DFL};
			close(sock);
			heavy_forget();
			sigaction(SIGCHLD, &dfl_chld, NULL);
			(void)prctl(PR_SET_NAME, "codebox-pool");
			log_set_component("pool");
			zygote_fn(zygote_ctx, index);
			_exit(1);
		}
		if (pid < 0)
			pid = -errno;
		if (util_write_all(sock, &pid, sizeof(pid)) < 0)
			_exit(0);
	}
}

int
warm_zygote_start(const struct warm_settings *s, const char *python, warm_worker_fn fn, void *ctx)
{
	struct zygote_ready ready;
	int sv[2];
	pid_t pid;

	warm_settings = *s;
	zygote_fn = fn;
	zygote_ctx = ctx;
	zygote_python = python;
	for (int attempt = 0;; attempt++) {
		ssize_t r = -1;
		int err = 0;

		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
			log_msg(LOG_ERROR, "socketpair() failed while starting the zygote: %s",
			        strerror(errno));
			return -1;
		}
		pid = fork();
		if (pid < 0) {
			log_msg(LOG_ERROR, "fork() failed while starting the zygote: %s",
			        strerror(errno));
			close(sv[0]);
			close(sv[1]);
			return -1;
		}
		if (pid == 0) {
			close(sv[0]);
			zygote_main(sv[1]);
		}
		close(sv[1]);
		memset(&ready, 0, sizeof(ready));
		if (wait_readable(sv[0], WARM_ZYGOTE_READY_MS) == 1) {
			r = read(sv[0], &ready, sizeof(ready));
			err = r < 0 ? errno : 0;
		}
		if (r == (ssize_t)sizeof(ready) && ready.ok)
			break;
		proc_kill(pid, SIGKILL, "the zygote");
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		close(sv[0]);
		if (attempt == 0 && (r == 0 || err == ECONNRESET)) {
			/* it was killed before it was ready (the OOM killer, an operator): that
			 * says nothing of the modules, so one more try */
			log_msg(LOG_WARN, "the zygote died while it imported: starting another");
			continue;
		}
		ready.why[sizeof(ready.why) - 1] = '\0';
		log_msg(LOG_ERROR, "warm interpreters are unavailable, runs are cold: %s",
		        ready.why[0] ? ready.why : "the zygote did not start in time");
		zygote_failed = true;
		return -1;
	}
	zygote_sock = sv[0];
	zygote_pid = pid;
	zygote_started_ms = proc_now_ms();
	return 0;
}

void
warm_zygote_stop(void)
{
	if (zygote_pid > 0) {
		proc_kill(zygote_pid, SIGKILL, "the zygote");
		/* reaped by the supervisor's loop (it reaps every child) */
	}
	if (zygote_sock >= 0)
		close(zygote_sock);
	zygote_sock = -1;
	zygote_pid = -1;
}

pid_t
warm_zygote_spawn(int index)
{
	pid_t pid = -1;
	int w;

	if (zygote_fn == NULL || zygote_failed)
		return -1; /* never started, or cannot: the pool is cold */
	if (zygote_sock >= 0 &&
	    proc_now_ms() - zygote_started_ms >= (long long)warm_settings.max_seconds * 1000) {
		log_msg(LOG_INFO, "the zygote is %lu s old: replacing it",
		        warm_settings.max_seconds);
		warm_zygote_stop();
	}
	if (zygote_sock < 0 &&
	    warm_zygote_start(&warm_settings, zygote_python, zygote_fn, zygote_ctx) < 0)
		return -1;
	for (int attempt = 0;; attempt++) {
		ssize_t r = -1;

		errno = 0;
		w = util_write_all(zygote_sock, &index, sizeof(index));
		if (w == 0 && wait_readable(zygote_sock, WARM_ANSWER_MS) == 1)
			r = read(zygote_sock, &pid, sizeof(pid));
		if (r == (ssize_t)sizeof(pid) && pid > 0)
			return pid;
		/* it died since the last worker (EPIPE), or while it was asked: the kill of a
		 * zygote takes time, and its socket takes the request meanwhile (EOF, or
		 * ECONNRESET when it died with the request unread) */
		if (attempt == 0 &&
		    ((w < 0 && errno == EPIPE) || r == 0 || (r < 0 && errno == ECONNRESET))) {
			log_msg(LOG_WARN, "the zygote is gone: starting a new one");
			warm_zygote_stop();
			if (warm_zygote_start(&warm_settings, zygote_python, zygote_fn,
			                      zygote_ctx) < 0)
				return -1;
			pid = -1;
			continue;
		}
		break;
	}
	log_msg(LOG_ERROR, "the zygote could not start worker %d (%s); it is cold", index,
	        pid < 0 && pid != -1 ? strerror(-pid) : "the zygote is gone");
	warm_zygote_stop();
	return -1;
}

/* ---- the template ---- */

struct template_build {
	unsigned long long disk_bytes;
	char workdir[4096];
};

struct template_answer {
	int pid; /* or -errno */
	unsigned long long as_bytes;
};

static int template_sock = -1;
static pid_t template_pid = -1;
static long long template_started_ms;
static unsigned long template_runs;
static bool template_dead;

/* LeakSanitizer: a run's exit is the interpreter's, whose memory is not ours to account */
static volatile int warm_in_run;
int __lsan_is_turned_off(void);
int
__lsan_is_turned_off(void)
{
	return warm_in_run;
}

#if defined(__SANITIZE_ADDRESS__)
/* A warm run's interpreter allocates with the sanitizer's malloc: out of address space
 * (RLIMIT_AS, no cgroup) it must fail as glibc's does, for Python to raise MemoryError. */
const char *__asan_default_options(void);
const char *
__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}
#endif

static unsigned long long
address_space_bytes(void)
{
	char buf[128];
	unsigned long long pages = 0;
	int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	pages = strtoull(buf, NULL, 10);
	return pages * (unsigned long long)sysconf(_SC_PAGESIZE);
}

/* The fields of the memory map a process cannot change, read once by the template (a
 * fork keeps them); PR_SET_MM_MAP wants them all back. */
static struct prctl_mm_map template_mm;
static bool template_mm_known;

static void
template_read_mm(void)
{
	char buf[2048], *p;
	unsigned long long v[64];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC), n = 0;
	ssize_t r;

	if (fd < 0)
		return;
	r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return;
	buf[r] = '\0';
	p = strrchr(buf, ')'); /* the name may hold anything; the fields follow its ')' */
	if (p == NULL)
		return;
	p += 2;
	while (*p && n < 64) {
		char *end;
		v[n++] = strtoull(p, &end, 10);
		p = *end ? end + 1 : end;
	}
	if (n < 49)
		return;
	/* v[k - 3] is field k of proc(5)'s /proc/pid/stat */
	template_mm.start_code = v[26 - 3];
	template_mm.end_code = v[27 - 3];
	template_mm.start_stack = v[28 - 3];
	template_mm.start_data = v[45 - 3];
	template_mm.end_data = v[46 - 3];
	template_mm.start_brk = v[47 - 3];
	template_mm.exe_fd = (uint32_t)-1;
	template_mm_known = true;
}

/* Packs strings NUL-separated into a fresh anonymous mapping (the only kind /proc reads a
 * command line from). Returns the end, or 0. */
static unsigned long
pack_strings(char *const *strs, char **area)
{
	size_t len = 0, n = 0;

	for (int i = 0; strs[i] != NULL; i++)
		len += strlen(strs[i]) + 1;
	*area = mmap(NULL, len + 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (*area == MAP_FAILED)
		return 0;
	for (int i = 0; strs[i] != NULL; i++) {
		memcpy(*area + n, strs[i], strlen(strs[i]) + 1);
		n += strlen(strs[i]) + 1;
	}
	return (unsigned long)*area + n;
}

/*
 * /proc/self/cmdline and /proc/self/environ show exactly what a cold run's do: the
 * interpreter's argv and the run's environment (PR_SET_MM_MAP needs no privilege when the
 * executable is not changed). Else the name at least.
 */
static void
warm_set_proc_view(const struct sandbox_spec *s)
{
	struct prctl_mm_map m = template_mm;
	char *args, *env;

	m.arg_end = pack_strings(s->argv, &args);
	m.env_end = pack_strings(s->envp, &env);
	m.arg_start = (unsigned long)args;
	m.env_start = (unsigned long)env;
	m.brk = (unsigned long)sbrk(0);
	if (!template_mm_known || m.arg_end == 0 || m.env_end == 0 ||
	    prctl(PR_SET_MM, PR_SET_MM_MAP, &m, sizeof(m), 0) < 0) {
		sandbox_set_title(s->argv);
		return;
	}
	(void)prctl(PR_SET_NAME, "python3");
}

/*
 * The program's entry, after every sandbox step (sandbox.c calls it where it would execve).
 * Returning means falling back to execve: only before any of the run's code ran.
 */
static bool warm_prepared;

/*
 * The interpreter's side of a run's start, once every step that does not need the request is
 * in force: with a pid namespace before the request arrives (sandbox.c's prepare), else from
 * warm_enter(). No code of the run executes here.
 */
static int
warm_prepare(const struct sandbox_spec *s)
{
	PyObject *env = NULL, *orig = NULL, *r = NULL;

	PyOS_AfterFork_Child(); /* the thread state, at-fork hooks (random reseeds itself) */
	/* execve() would make the program dumpable again (init is not: its memory is its own);
	 * its /proc/self files are then its own, as cold */
	(void)prctl(PR_SET_DUMPABLE, 1);
	/* what the interpreter's start-up does; sandbox.c reset every signal */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGXFSZ, SIG_IGN);
	env = PyDict_New();
	orig = PyList_New(0);
	for (int i = 0; env && s->envp[i] != NULL; i++) {
		const char *eq = strchr(s->envp[i], '=');
		PyObject *k, *v;
		if (eq == NULL)
			continue;
		k = PyUnicode_DecodeFSDefaultAndSize(s->envp[i], eq - s->envp[i]);
		v = PyUnicode_DecodeFSDefault(eq + 1);
		if (k == NULL || v == NULL || PyDict_SetItem(env, k, v) < 0)
			Py_CLEAR(env);
		Py_XDECREF(k);
		Py_XDECREF(v);
	}
	for (int i = 0; orig && s->argv[i] != NULL; i++) {
		PyObject *a = PyUnicode_DecodeFSDefault(s->argv[i]);
		if (a == NULL || PyList_Append(orig, a) < 0)
			Py_CLEAR(orig);
		Py_XDECREF(a);
	}
	if (env != NULL && orig != NULL)
		r = PyObject_CallFunctionObjArgs(warm_enter_fn, env, orig, NULL);
	Py_XDECREF(env);
	Py_XDECREF(orig);
	if (r == NULL) {
		PyErr_Clear();
		return -1;
	}
	Py_DECREF(r);
	warm_set_proc_view(s);
	warm_prepared = true;
	return 0;
}

/*
 * The program's entry, after every sandbox step (sandbox.c calls it where it would execve).
 * Returning means falling back to execve: only before any of the run's code ran.
 */
static void
warm_enter(const struct sandbox_spec *s)
{
	PyCompilerFlags cf = _PyCompilerFlags_INIT;
	PyObject *r = NULL, *main_dict, *file;
	char path[4200];
	FILE *fp;
	int code = 0;

	if (!warm_prepared && warm_prepare(s) < 0)
		return;
	snprintf(path, sizeof(path), "%s/main.py", s->workdir);
	fp = fopen(path, "rbe");
	if (fp == NULL)
		return;
	main_dict = PyModule_GetDict(PyImport_AddModule("__main__"));
	file = PyUnicode_DecodeFSDefault(path);
	if (file == NULL || PyDict_SetItemString(main_dict, "__file__", file) < 0 ||
	    PyDict_SetItemString(main_dict, "__cached__", Py_None) < 0) {
		Py_XDECREF(file);
		fclose(fp);
		PyErr_Clear();
		return;
	}
	Py_DECREF(file);
	warm_in_run = 1;
	/* from here on the run's code runs: no fallback. The error pipe's end is closed as
	 * execve would close it. */
	close(s->error_fd);
	/* as `python3 main.py` runs it (pymain_run_file): __main__, __file__, the flags */
	r = PyRun_FileExFlags(fp, path, Py_file_input, main_dict, main_dict, 1, &cf);
	if (r != NULL) {
		code = 0;
	} else if (!_Py_HandleSystemExit(&code)) {
		PyErr_Print(); /* sys.excepthook: the traceback */
		code = 1;
	}
	Py_XDECREF(r);
	if (PyDict_DelItemString(main_dict, "__file__") < 0)
		PyErr_Clear();
	r = PyObject_CallNoArgs(warm_leave_fn);
	if (r == NULL) {
		if (!_Py_HandleSystemExit(&code)) /* sys.exit() in an atexit handler */
			PyErr_Clear();
	} else if (r == Py_False) {
		code = 120; /* as the interpreter: flushing stdout or stderr failed */
	}
	Py_XDECREF(r);
	if (code != 0 && _Py_UnhandledKeyboardInterrupt) {
		/* as the interpreter does: die of SIGINT, so the parent sees it */
		signal(SIGINT, SIG_DFL);
		kill(getpid(), SIGINT);
	}
	_exit(code);
}

/*
 * A template's clone of a run's first process for workdir, with the child's ends of its pipes
 * (stdout, stderr, error, control, report; the last unused in direct mode), into a. The
 * worker's template clones with CLONE_PARENT (pidfd NULL: the child is the worker's); the
 * heavy template (pidfd given) clones its own child, an init without a parent-death signal,
 * and gets its pidfd. Either way the child takes the same sandbox.c steps.
 */
static void
template_clone(const struct run_config *run, const char *workdir, unsigned long long disk_bytes,
               const int fds[5], int *pidfd, struct template_answer *a)
{
	static struct run_child child;
	bool ns_mode = run->clone_flags != 0;
	pid_t pid;

	run_child_prepare(run, workdir, disk_bytes, &child);
	child.sb.stdout_fd = fds[0];
	child.sb.stderr_fd = fds[1];
	child.sb.error_fd = fds[2];
	child.sb.ctl_fd = fds[3];
	child.sb.report_fd = ns_mode ? fds[4] : -1;
	child.sb.enter = warm_enter;
	/* with init, the program is forked and prepared before the request */
	child.sb.prepare = ns_mode ? warm_prepare : NULL;
	child.sb.orphan_init = pidfd != NULL;
	/* direct mode: the program's parent is the worker (CLONE_PARENT) */
	if (!ns_mode)
		child.sb.parent_pid = getppid();
	pid = run_clone_as(run, (pidfd != NULL ? 0 : CLONE_PARENT) | run->clone_flags, pidfd);
	if (pid == 0) {
		if (ns_mode)
			sandbox_init(&child.sb);
		sandbox_run_program(&child.sb);
	}
	a->pid = pid < 0 ? -errno : pid;
	a->as_bytes = address_space_bytes();
}

static noreturn void
template_main(const struct run_config *run, int sock)
{
	bool ns_mode = run->clone_flags != 0;

	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(0);
	{
		/* nothing of the worker: its listen socket, epoll, FastCGI connection */
		int keep[] = {sock, run->landlock_fd};
		(void)util_close_fds_except(keep, 2);
	}
	template_read_mm();
	{
		char *const title[] = {"codebox-warm", NULL};
		sandbox_set_title(title);
	}
	for (;;) {
		struct template_build b;
		struct template_answer a = {0};
		int fds[5] = {-1, -1, -1, -1, -1};
		int n = recv_with_fds(sock, &b, sizeof(b), fds, 5);

		if (n < 0)
			_exit(0); /* the worker is gone or stops us */
		b.workdir[sizeof(b.workdir) - 1] = '\0';
		if (n != (ns_mode ? 5 : 4) || b.workdir[0] != '/') {
			a.pid = -EPROTO;
		} else {
			template_clone(run, b.workdir, b.disk_bytes, fds, NULL, &a);
		}
		for (int i = 0; i < 5; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		if (util_write_all(sock, &a, sizeof(a)) < 0)
			_exit(0);
	}
}

int
warm_template_start(const struct run_config *run)
{
	int sv[2], threads;
	pid_t pid;

	if (!Py_IsInitialized() || warm_enter_fn == NULL)
		return -1; /* a cold worker (forked by the supervisor itself) */
	threads = count_threads();
	if (threads != 1) {
		log_msg(LOG_ERROR, "the worker has %d threads: no warm template", threads);
		return -1;
	}
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_msg(LOG_ERROR, "socketpair() failed while starting the template: %s",
		        strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		log_msg(LOG_ERROR, "fork() failed while starting the template: %s",
		        strerror(errno));
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	if (pid == 0) {
		close(sv[0]);
		template_main(run, sv[1]);
	}
	close(sv[1]);
	template_sock = sv[0];
	template_pid = pid;
	template_started_ms = proc_now_ms();
	template_runs = 0;
	template_dead = false;
	proc_spare(pid); /* not part of any run: the kill sweep leaves it alone */
	return 0;
}

bool
warm_template_usable(void)
{
	return template_sock >= 0 && !template_dead;
}

void
warm_template_stop(void)
{
	if (template_sock >= 0)
		close(template_sock);
	template_sock = -1;
	if (template_pid > 0) {
		proc_spare(0);
		proc_kill(template_pid, SIGKILL, "the warm template");
		/* it may have been reaped by the kill sweep already */
		while (waitpid(template_pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	template_pid = -1;
	template_dead = true;
}

pid_t
warm_template_clone(const char *workdir, unsigned long long disk_bytes, const int fds[5],
                    unsigned long long *as_base_bytes, char *why, size_t why_len)
{
	struct template_build b = {.disk_bytes = disk_bytes};
	struct template_answer a;
	int w;

	*as_base_bytes = 0;
	if (!warm_template_usable()) {
		snprintf(why, why_len, "no template");
		return -1;
	}
	if (strlen(workdir) >= sizeof(b.workdir)) {
		snprintf(why, why_len, "the run's path is too long");
		return -1;
	}
	memcpy(b.workdir, workdir, strlen(workdir) + 1);
	if (send_with_fds(template_sock, &b, sizeof(b), fds, 5) < 0) {
		snprintf(why, why_len, "sending to the template: %s", strerror(errno));
		goto dead;
	}
	w = wait_readable(template_sock, WARM_ANSWER_MS);
	if (w != 1) {
		snprintf(why, why_len, "the template did not answer");
		goto dead;
	}
	if (read(template_sock, &a, sizeof(a)) != (ssize_t)sizeof(a)) {
		snprintf(why, why_len, "the template is gone");
		goto dead;
	}
	if (a.pid <= 0) {
		snprintf(why, why_len, "the template's clone() failed: %s", strerror(-a.pid));
		goto dead;
	}
	template_runs++;
	*as_base_bytes = a.as_bytes;
	return (pid_t)a.pid;
dead:
	warm_template_stop();
	return -1;
}

bool
warm_template_expired(void)
{
	if (template_pid < 0 && !template_dead)
		return false; /* a cold worker stays */
	/* a heavy tier that failed: a new worker gets the zygote's current one (or none) */
	return template_dead || heavy_dead || template_runs >= warm_settings.max_runs ||
	       proc_now_ms() - template_started_ms >= (long long)warm_settings.max_seconds * 1000;
}

/* ---- the heavy tier ---- */

/*
 * The heavy template: a fork of the zygote, before the zygote's heap is collapsed, that
 * imports the heavy tier's modules too, and then clones the init of every worker's heavy
 * runs. It is not the worker's parent, so it cannot clone with CLONE_PARENT: the init is its
 * own child, reaped by the kernel (SIGCHLD ignored), and the worker is handed a pidfd, which
 * is all namespace mode needs (init's report carries the program's status; the pidfd says
 * when init is gone, and kills it). init then keeps no parent-death signal: the worker's death
 * reaches it as the control pipe's end, and the heavy template's must not end its runs.
 *
 * Succession. After CODEBOX_WARM_MAX_RUNS runs or CODEBOX_WARM_MAX_SECONDS the heavy template
 * says 'R' on its notice pipe and goes on serving; the zygote forks its successor, and both
 * read the one socket (without blocking: whoever is first takes a request) until the
 * successor's ready report arrives; the zygote then closes the old one's retirement pipe, and
 * it ends between two requests. Renewal thus costs no run a fallback, and its cost is the
 * successor's imports, off every request's path. heavy_check() keeps the three (serving,
 * successor, retired and ending) and says what happens when one of them dies.
 */
struct heavy_build {
	/* the worker's, by value: its pointers (the interpreter's path, /etc, the seccomp
	 * filter) are into the supervisor's configuration, set before the zygote was forked
	 * and at the same addresses in every process of the pool */
	struct run_config run;
	unsigned long long disk_bytes;
	char workdir[4096];
};

static noreturn void
heavy_main(int sock, int note_fd, int retire_fd, pid_t zygote)
{
	struct zygote_ready ready = {0};
	struct sigaction ign = {.sa_handler = SIG_IGN};
	unsigned long runs = 0;
	long long t0 = proc_now_ms();
	bool retiring = false;

	log_set_component("heavy");
	(void)prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != zygote)
		_exit(0);
	{
		/* nothing of the zygote's: the supervisor's socket (which must see EOF the moment
		 * the zygote dies), the pool's listen socket, the workers' end of ours, the other
		 * heavy templates' pipes */
		int keep[] = {sock, note_fd, retire_fd};
		(void)util_close_fds_except(keep, 3);
	}
	(void)prctl(PR_SET_NAME, "codebox-heavy");
	if (zygote_import(false, ready.why, sizeof(ready.why)) == 0) {
		int threads = count_threads();
		if (threads != 1) {
			snprintf(ready.why, sizeof(ready.why),
			         "the heavy tier's modules started threads (%d)", threads);
		} else {
			zygote_collapse();
			ready.ok = 1;
		}
	}
	/* SIGPIPE is ignored (the interpreter's start-up): a zygote that stopped waiting is
	 * only an error here */
	if (util_write_all(note_fd, &ready, sizeof(ready)) < 0 || !ready.ok)
		_exit(1);
	log_msg(LOG_INFO, "heavy template ready: %d modules imported in %lld ms",
	        warm_settings.n_heavy, proc_now_ms() - t0);
	/* inits are reaped by the kernel: nothing here waits for them */
	sigaction(SIGCHLD, &ign, NULL);
	template_read_mm();
	t0 = proc_now_ms();
	for (;;) {
		struct heavy_build b;
		struct template_answer a = {0};
		int fds[6] = {-1, -1, -1, -1, -1, -1};
		int n, pidfd = -1;
		long long life_ms =
		    (long long)warm_settings.max_seconds * 1000 - (proc_now_ms() - t0);
		struct pollfd pfd[2] = {{.fd = sock, .events = POLLIN},
		                        {.fd = retire_fd, .events = POLLIN}};

		if (!retiring && (runs >= warm_settings.max_runs || life_ms <= 0)) {
			/* the zygote forks the successor; this one serves until that one does */
			retiring = true;
			if (write(note_fd, "R", 1) != 1)
				_exit(0);
		}
		if (poll(pfd, 2, retiring ? -1 : (int)(life_ms < 1000 ? life_ms : 1000) + 1) < 0 &&
		    errno != EINTR)
			_exit(1);
		if (pfd[1].revents)
			_exit(0); /* retired (or the zygote is gone), between two requests */
		if (!pfd[0].revents)
			continue;
		/* the successor reads the same socket: whoever is first takes a request */
		n = recv_with_fds_flags(sock, &b, sizeof(b), fds, 6, MSG_DONTWAIT);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (n < 0 && errno == EPIPE)
			_exit(0);
		if (n < 0)
			continue;
		b.workdir[sizeof(b.workdir) - 1] = '\0';
		if (n == 6) {
			/* a worker that gave up on this request (its end of the reply socket is
			 * closed) has reused its pipes: no init may be cloned onto them */
			struct pollfd hup = {.fd = fds[5], .events = 0};
			if (poll(&hup, 1, 0) == 1 && (hup.revents & (POLLHUP | POLLERR))) {
				log_msg(LOG_WARN, "a request its worker gave up on is skipped");
				n = -1;
			}
		}
		if (n < 0) {
			a.pid = -ECANCELED;
		} else if (n != 6 || b.workdir[0] != '/' || b.run.clone_flags == 0 ||
		           !(b.run.clone_flags & CLONE_NEWPID) || b.run.python != zygote_python ||
		           b.run.landlock_fd >= 0 || b.run.workspace_fd >= 0) {
			a.pid = -EPROTO;
		} else {
			/* nothing of the worker's own: its fds and buffers are not ours */
			b.run.work_parent = NULL;
			b.run.work_parent_fd = -1;
			b.run.cgroup = NULL;
			template_clone(&b.run, b.workdir, b.disk_bytes, fds, &pidfd, &a);
			runs++;
		}
		for (int i = 0; i < 5; i++)
			if (fds[i] >= 0)
				close(fds[i]);
		if (fds[5] >= 0) {
			if (send_with_fds(fds[5], &a, sizeof(a), &pidfd, 1) < 0 && pidfd >= 0)
				/* nobody will watch this init: it must not wait for a 'G' */
				(void)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
			close(fds[5]);
		}
		if (pidfd >= 0)
			close(pidfd);
	}
}

static void
heavy_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Closes a heavy template's pipes in the zygote (its pidfd, its notices, its retirement). */
static void
heavy_proc_close(struct heavy_proc *h)
{
	if (h->pidfd >= 0)
		close(h->pidfd);
	if (h->note_fd >= 0)
		close(h->note_fd);
	if (h->retire_fd >= 0)
		close(h->retire_fd);
	*h = HEAVY_NONE;
}

/* A fork of the zygote, not the zygote: none of the heavy templates' fds stays open. */
static void
heavy_forget(void)
{
	heavy_proc_close(&heavy_cur);
	heavy_proc_close(&heavy_next);
	heavy_proc_close(&heavy_old);
	if (heavy_serve_fd >= 0)
		close(heavy_serve_fd);
	heavy_serve_fd = -1;
}

/* Zygote: kills and reaps a heavy template (it ends at once: SIGKILL). */
static void
heavy_proc_kill(struct heavy_proc *h)
{
	if (h->pid > 0) {
		proc_kill(h->pid, SIGKILL, "a heavy template");
		while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	heavy_proc_close(h);
}

/* Zygote: forks a heavy template into h, serving heavy_serve_fd. Returns 0, or -1 (logged). */
static int
heavy_fork(struct heavy_proc *h)
{
	int np[2], rp[2];
	pid_t pid, self = getpid();

	if (pipe2(np, O_CLOEXEC) < 0) {
		log_msg(LOG_ERROR, "pipe2() for the heavy template failed: %s", strerror(errno));
		return -1;
	}
	if (pipe2(rp, O_CLOEXEC) < 0) {
		log_msg(LOG_ERROR, "pipe2() for the heavy template failed: %s", strerror(errno));
		close(np[0]);
		close(np[1]);
		return -1;
	}
	pid = fork();
	if (pid == 0)
		heavy_main(heavy_serve_fd, np[1], rp[0], self);
	close(np[1]);
	close(rp[0]);
	if (pid < 0) {
		log_msg(LOG_ERROR, "fork() of the heavy template failed: %s", strerror(errno));
		close(np[0]);
		close(rp[1]);
		return -1;
	}
	*h = (struct heavy_proc){.pid = pid,
	                         .pidfd = (int)syscall(SYS_pidfd_open, pid, 0),
	                         .note_fd = np[0],
	                         .retire_fd = rp[1],
	                         .started_ms = proc_now_ms()};
	return 0;
}

/* Zygote: the heavy tier is off (logged by the caller): runs import its modules themselves. */
static void
heavy_off(void)
{
	heavy_proc_kill(&heavy_next);
	heavy_proc_kill(&heavy_cur);
	heavy_proc_kill(&heavy_old); /* nothing would reap it */
	/* workers sending now get EPIPE, and new workers have no heavy tier */
	if (heavy_sock >= 0)
		close(heavy_sock);
	if (heavy_serve_fd >= 0)
		close(heavy_serve_fd);
	heavy_sock = heavy_serve_fd = -1;
}

/* Zygote: forks the first heavy template and waits (bounded) until it is ready. */
static void
heavy_start(long long wait_ms)
{
	struct zygote_ready ready = {0};
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_msg(LOG_ERROR, "socketpair() for the heavy template failed: %s",
		        strerror(errno));
		return;
	}
	heavy_sock = sv[0];
	heavy_serve_fd = sv[1];
	if (heavy_fork(&heavy_cur) < 0) {
		heavy_off();
		return;
	}
	/* within what is left of the supervisor's wait for the zygote: a slow heavy import
	 * must not make the light tier late too */
	if (wait_readable(heavy_cur.note_fd, wait_ms) != 1 ||
	    read(heavy_cur.note_fd, &ready, sizeof(ready)) != (ssize_t)sizeof(ready) || !ready.ok) {
		ready.why[sizeof(ready.why) - 1] = '\0';
		log_msg(LOG_ERROR,
		        "the heavy template failed (%s): runs that need its modules import them",
		        ready.why[0] ? ready.why : "it did not start in time");
		heavy_off();
	}
}

/*
 * Zygote, after every poll: reaps heavy templates that ended; when the serving one's life is
 * up (its 'R'), forks its successor, which both read requests from until the successor is
 * ready, then retires it; replaces one that crashed (at most once a second) or ended. A
 * successor that fails to import turns the tier off; one that is not ready within
 * WARM_ZYGOTE_READY_MS is killed, and the serving one retires without a successor.
 */
static void
heavy_check(void)
{
	static long long last_fork_ms;
	static bool replace_now;
	long long now = proc_now_ms();
	int st;

	if (heavy_old.pid > 0 && waitpid(heavy_old.pid, &st, WNOHANG) == heavy_old.pid)
		heavy_proc_close(&heavy_old);
	if (heavy_cur.pid > 0 && waitpid(heavy_cur.pid, &st, WNOHANG) == heavy_cur.pid) {
		/* it ended without being retired: it crashed, or its successor never came */
		replace_now = WIFEXITED(st) && WEXITSTATUS(st) == 0;
		log_msg(replace_now ? LOG_INFO : LOG_WARN, "the heavy template ended (%s)",
		        replace_now ? "its life is up" : "it crashed");
		heavy_proc_close(&heavy_cur);
	}
	if (heavy_cur.note_fd >= 0 && !heavy_cur.retiring) {
		char c;
		struct pollfd p = {.fd = heavy_cur.note_fd, .events = POLLIN};
		if (poll(&p, 1, 0) == 1) {
			if (read(heavy_cur.note_fd, &c, 1) == 1 && c == 'R')
				heavy_cur.retiring = true;
			else
				heavy_close_fd(
				    &heavy_cur.note_fd); /* it is ending: its pidfd says when */
		}
	}
	if (heavy_next.pid > 0) {
		struct zygote_ready ready = {0};
		struct pollfd p = {.fd = heavy_next.note_fd, .events = POLLIN};

		if (poll(&p, 1, 0) == 1) {
			ssize_t r = read(heavy_next.note_fd, &ready, sizeof(ready));
			if (r != (ssize_t)sizeof(ready)) {
				/* it died before it was ready (killed, or it crashed): another one
				 * is forked, at most once a second */
				log_msg(LOG_WARN,
				        "the next heavy template ended before it was ready");
				heavy_proc_kill(&heavy_next);
				return;
			}
			if (!ready.ok) {
				ready.why[sizeof(ready.why) - 1] = '\0';
				log_msg(LOG_ERROR,
				        "the next heavy template failed (%s): runs that need its "
				        "modules import them",
				        ready.why);
				heavy_off();
				return;
			}
			/* it serves: the one it succeeds ends between two requests */
			if (heavy_cur.pid > 0) {
				heavy_close_fd(&heavy_cur.retire_fd);
				if (heavy_old.pid > 0)
					heavy_proc_kill(&heavy_old);
				heavy_old = heavy_cur;
			}
			heavy_cur = heavy_next;
			heavy_next = HEAVY_NONE;
		} else if (now - heavy_next.started_ms >= WARM_ZYGOTE_READY_MS) {
			log_msg(LOG_ERROR,
			        "the next heavy template was not ready within %d s: "
			        "killed; the serving one retires",
			        WARM_ZYGOTE_READY_MS / 1000);
			heavy_proc_kill(&heavy_next);
			if (heavy_cur.pid > 0)
				heavy_close_fd(&heavy_cur.retire_fd);
			replace_now = true;
			return;
		}
	}
	if (heavy_next.pid < 0 && heavy_serve_fd >= 0 &&
	    ((heavy_cur.pid > 0 && heavy_cur.retiring && heavy_cur.retire_fd >= 0 &&
	      now - last_fork_ms >= 1000) ||
	     (heavy_cur.pid < 0 && (replace_now || now - last_fork_ms >= 1000)))) {
		log_msg(LOG_INFO, "forking the next heavy template (%s)",
		        heavy_cur.pid > 0 ? "the serving one's life is up" : "none serves");
		last_fork_ms = now;
		replace_now = false;
		(void)heavy_fork(&heavy_next);
	}
}

/* Zygote: what heavy_check() waits for (pidfds and notices), appended to pfd (room for 6). */
static void
heavy_poll_fds(struct pollfd *pfd, int *n)
{
	const struct heavy_proc *all[] = {&heavy_cur, &heavy_next, &heavy_old};

	for (int i = 0; i < 3; i++) {
		if (all[i]->pidfd >= 0)
			pfd[(*n)++] = (struct pollfd){.fd = all[i]->pidfd, .events = POLLIN};
		if (all[i]->note_fd >= 0 && all[i] != &heavy_old &&
		    !(all[i] == &heavy_cur && heavy_cur.retiring))
			pfd[(*n)++] = (struct pollfd){.fd = all[i]->note_fd, .events = POLLIN};
	}
}

bool
warm_wants_heavy(const char *code, size_t len)
{
	for (int i = 0; warm_settings.n_heavy > 0 && i < warm_settings.n_modules; i++)
		if (!warm_settings.light[i] && tier_code_names(code, len, warm_settings.modules[i]))
			return true;
	return false;
}

void
warm_settings_one_tier(struct warm_settings *s)
{
	for (int i = 0; i < s->n_modules; i++)
		s->light[i] = true;
	s->n_heavy = 0;
}

bool
warm_heavy_usable(const struct run_config *run)
{
	return heavy_sock >= 0 && !heavy_dead && warm_enter_fn != NULL &&
	       (run->clone_flags & CLONE_NEWPID) && run->landlock_fd < 0 && run->workspace_fd < 0;
}

pid_t
warm_heavy_clone(const struct run_config *run, const char *workdir, unsigned long long disk_bytes,
                 const int fds[5], unsigned long long *as_base_bytes, int *pidfd, char *why,
                 size_t why_len)
{
	static struct heavy_build b;
	struct template_answer a = {0};
	long long deadline = proc_now_ms() + WARM_HEAVY_ANSWER_MS;
	int rp[2], all[6], n, sent = -1;

	*as_base_bytes = 0;
	*pidfd = -1;
	if (!warm_heavy_usable(run)) {
		snprintf(why, why_len, "no heavy template");
		return -1;
	}
	if (strlen(workdir) >= sizeof(b.workdir)) {
		snprintf(why, why_len, "the run's path is too long");
		return -1;
	}
	memset(&b, 0, sizeof(b));
	b.run = *run;
	b.disk_bytes = disk_bytes;
	memcpy(b.workdir, workdir, strlen(workdir) + 1);
	/* the answer comes on a socket of this request's own: a late one cannot be taken for
	 * the next, and the template's end closing means it is gone */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, rp) < 0) {
		snprintf(why, why_len, "socketpair(): %s", strerror(errno));
		return -1;
	}
	for (int i = 0; i < 5; i++)
		all[i] = fds[i];
	all[5] = rp[1];
	/* the socket is shared by every worker: never block in sendmsg(), one deadline for all */
	while ((sent = send_with_fds_flags(heavy_sock, &b, sizeof(b), all, 6, MSG_DONTWAIT)) < 0 &&
	       (errno == EAGAIN || errno == EINTR) && proc_now_ms() < deadline) {
		struct pollfd out = {.fd = heavy_sock, .events = POLLOUT};
		long long left = deadline - proc_now_ms();
		(void)poll(&out, 1, left > 0 ? (int)left : 0);
	}
	if (sent < 0) {
		snprintf(why, why_len, "sending to the heavy template: %s",
		         errno == EAGAIN ? "it takes no requests" : strerror(errno));
		close(rp[0]);
		close(rp[1]);
		goto dead;
	}
	close(rp[1]);
	{
		long long left = deadline - proc_now_ms();
		n = wait_readable(rp[0], left > 0 ? left : 0) == 1
		        ? recv_with_fds(rp[0], &a, sizeof(a), pidfd, 1)
		        : -1;
	}
	/* closing our end tells a heavy template that has not taken the request yet to skip it */
	close(rp[0]);
	if (n != 1 || a.pid <= 0) {
		if (n >= 1)
			close(*pidfd);
		*pidfd = -1;
		snprintf(why, why_len, "the heavy template %s",
		         n < 0 ? "did not answer" : "could not clone the run");
		goto dead;
	}
	*as_base_bytes = a.as_bytes;
	return (pid_t)a.pid;
dead:
	heavy_dead = true;
	return -1;
}
