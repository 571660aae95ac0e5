/*
 * interp.c - the embedded interpreter: how the zygote starts it and imports the preloaded
 * modules, and how a run cloned from a template enters it in place of execve().
 *
 * A run's entry reproduces what `python3 -I -u main.py` does that a program can see: the
 * environment, sys.orig_argv, the signal handlers, __main__ and __file__, the handling of
 * SystemExit and KeyboardInterrupt, the finalisation (threads joined, atexit handlers,
 * __main__'s objects dropped, streams flushed). And what a copy of a template must not
 * share with the other copies: every random generator the preloaded modules keep at module
 * level (found once per template by interp_import(): random's, numpy's global state,
 * sympy's rng, tempfile's name sequence...) is reseeded from the kernel, and
 * multiprocessing's authkey is new. The string-hash seed is the zygote's: it is fixed once
 * an interpreter has started (str hashes are cached in the preloaded objects), so it is
 * shared by the runs of one zygote, for at most CODEBOX_WARM_MAX_SECONDS.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "warm/interp.h"

#include "core/figures.h"
#include "core/log.h"
#include "core/pycmd.h"
#include "box/sandbox.h"
#include "core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

/* set by the interpreter when KeyboardInterrupt ended the program (exported by libpython) */
extern int _Py_UnhandledKeyboardInterrupt;
/* the interpreter's own handling of SystemExit: the exit code, the message printed */
int _Py_HandleSystemExit(int *exitcode_p);

/* The functions every run calls on entry and exit, and the generator census (defined once
 * in the zygote, private here). */
static PyObject *warm_enter_fn;
static PyObject *warm_leave_fn;
static PyObject *warm_collect_fn;
static PyObject *warm_command_fn;
static PyObject *warm_session_fn;
/* a session's program: fcgi/box/cell.py, embedded by the build (scripts/embed-source.sh) */
extern const char cell_source[];
/* what the entry and command() import, imported once by the zygote (into sys.modules only:
 * __main__ holds nothing a cold run's would not) */
static const char *const entry_modules[] = {"io", "os", "random", "signal", "site", "sys"};

static const char warm_enter_source[] =
    "_generators = []\n"
    "\n"
    "def _kinds():\n"
    "    import random, sys\n"
    "    kinds = [random.Random]\n"
    "    r = getattr(sys.modules.get('numpy'), 'random', None)\n"
    "    for k in ('RandomState', 'Generator'):\n"
    "        if isinstance(getattr(r, k, None), type):\n"
    "            kinds.append(getattr(r, k))\n"
    "    return tuple(kinds)\n"
    "\n"
    "def collect():\n"
    "    # every generator reachable from a module: its attributes, and the attributes of\n"
    "    # the plain objects it holds (tempfile's name sequence keeps one that way)\n"
    "    import sys, types\n"
    "    kinds = _kinds()\n"
    "    found = {}\n"
    "    for m in list(sys.modules.values()):\n"
    "        d = getattr(m, '__dict__', None)\n"
    "        if not isinstance(d, dict):\n"
    "            continue\n"
    "        for v in list(d.values()):\n"
    "            if isinstance(v, kinds):\n"
    "                found[id(v)] = v\n"
    "            elif not isinstance(v, (type, types.ModuleType, types.FunctionType)):\n"
    "                try:\n"
    "                    inner = vars(v)\n"
    "                except TypeError:\n"
    "                    continue\n"
    "                if isinstance(inner, dict):\n"
    "                    for w in list(inner.values()):\n"
    "                        if isinstance(w, kinds):\n"
    "                            found[id(w)] = w\n"
    "    _generators[:] = found.values()\n"
    "    return len(_generators)\n"
    "\n"
    "def enter(env, orig_argv):\n"
    "    import os, random, signal, sys\n"
    "    os.environ.clear()\n"
    "    os.environ.update(env)\n"
    "    sys.orig_argv = orig_argv\n"
    "    signal.signal(signal.SIGINT, signal.default_int_handler)\n"
    "    for g in _generators:\n"
    "        if isinstance(g, random.Random):\n"
    "            g.seed()\n"
    "        elif hasattr(g, 'bit_generator'):\n"
    "            g.bit_generator.state = type(g.bit_generator)().state\n"
    "        else:\n"
    "            g.seed()\n"
    "    mp = sys.modules.get('multiprocessing.process')\n"
    "    if mp is not None:\n"
    "        mp.current_process().authkey = os.urandom(32)\n"
    "    tf = sys.modules.get('tempfile')\n"
    "    if tf is not None:\n"
    "        tf.tempdir = None\n"
    "        tf._name_sequence = None\n"
    "\n"
    "def command(argv, orig_argv, executable, path0):\n"
    "    # what a plain `python3 -c CODE` or `python3 SCRIPT` started from a shell has that\n"
    "    # the template's `-I -u` has not: its arguments and executable, the first entry of\n"
    "    # sys.path, the user site settings and buffered stdout and stderr. Returns the\n"
    "    # flags' values as that interpreter has them, or None if its user site exists.\n"
    "    import io, os, site, sys\n"
    "    site.ENABLE_USER_SITE = True\n"
    "    site.USER_BASE = None\n"
    "    site.USER_SITE = None\n"
    "    if os.path.isdir(site.getusersitepackages()):\n"
    "        return None\n"
    "    sys.argv = argv\n"
    "    sys.orig_argv = orig_argv\n"
    "    sys.executable = sys._base_executable = executable\n"
    "    sys.path.insert(0, path0)\n"
    "    for name, line in (('stdout', False), ('stderr', True)):\n"
    "        old = getattr(sys, name)\n"
    "        f = io.TextIOWrapper(io.open(old.fileno(), 'wb', -1, closefd=False),\n"
    "                             old.encoding, old.errors, '\\n', line)\n"
    "        f.mode = 'w'\n"
    "        setattr(sys, name, f)\n"
    "        setattr(sys, '__%s__' % name, f)\n"
    "    names = type(sys.flags).__match_args__\n"
    "    values = list(sys.flags)\n"
    "    for k in ('no_user_site', 'ignore_environment', 'isolated'):\n"
    "        values[names.index(k)] = 0\n"
    "    values[names.index('safe_path')] = False\n"
    "    return values\n"
    "\n"
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
    "        m.predict(x); sklearn.metrics.r2_score(x.ravel(), x.ravel())\n"
    "    if 'matplotlib.pyplot' in wanted or 'matplotlib' in wanted:\n"
    "        import io\n"
    "        import matplotlib.pyplot as plt\n"
    "        fig, ax = plt.subplots()\n"
    "        ax.plot([1, 2, 3], [3.0, 2.0, 5.0], marker='o', label='price'); ax.bar([1], [1])\n"
    "        ax.set_title('t'); ax.set_xlabel('x'); ax.legend(); ax.grid(True)\n"
    "        fig.savefig(io.BytesIO(), format='png'); plt.close('all')\n"
    "        # the fonts drawn with hold their files open: a run's sandbox closes every fd\n"
    "        # it did not open, so none may be kept (a run opens what it draws with)\n"
    "        import gc, matplotlib.font_manager\n"
    "        matplotlib.font_manager._get_font.cache_clear(); gc.collect()\n";

int
interp_threads(void)
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

/* Backs every private anonymous mapping with huge pages where 2 MiB-aligned ranges exist. */
void
interp_collapse(void)
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

int
interp_init(const struct warm_settings *s, const char *python, char *why, size_t why_len)
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
	if (r != NULL) {
		/* a session's program (fcgi/box/cell.py), in the same namespace */
		Py_DECREF(r);
		r = PyRun_String(cell_source, Py_file_input, ns, ns);
	}
	warm_enter_fn = r ? PyDict_GetItemString(ns, "enter") : NULL;
	warm_leave_fn = r ? PyDict_GetItemString(ns, "leave") : NULL;
	warm_collect_fn = r ? PyDict_GetItemString(ns, "collect") : NULL;
	warm_command_fn = r ? PyDict_GetItemString(ns, "command") : NULL;
	warm_session_fn = r ? PyDict_GetItemString(ns, "session") : NULL;
	Py_XDECREF(r);
	if (warm_enter_fn == NULL || warm_leave_fn == NULL || warm_collect_fn == NULL ||
	    warm_command_fn == NULL || warm_session_fn == NULL) {
		PyErr_Print();
		snprintf(why, why_len, "defining the entry function failed");
		return -1;
	}
	Py_INCREF(warm_enter_fn);
	Py_INCREF(warm_leave_fn);
	Py_INCREF(warm_collect_fn);
	Py_INCREF(warm_command_fn);
	Py_INCREF(warm_session_fn);
	/* matplotlib's hook (figures.h), before any module is imported; a run's copy has it */
	{
		PyObject *fns = PyDict_New(), *install;
		r = fns && PyDict_SetItemString(fns, "__builtins__", PyEval_GetBuiltins()) == 0
		        ? PyRun_String(figures_source, Py_file_input, fns, fns)
		        : NULL;
		Py_XDECREF(r);
		install = r ? PyDict_GetItemString(fns, "install") : NULL;
		r = install ? PyObject_CallNoArgs(install) : NULL;
		/* a session's cells show the figures it saves (cell.py's _figures) */
		if (r != NULL && PyDict_SetItemString(ns, "_figures", fns) < 0) {
			Py_DECREF(r);
			r = NULL;
		}
		Py_XDECREF(fns);
		if (r == NULL) {
			PyErr_Print();
			snprintf(why, why_len, "installing matplotlib's hook failed");
			return -1;
		}
		Py_DECREF(r);
	}
	/* what the entry imports, imported now (a run's copy need not) */
	for (size_t i = 0; i < sizeof(entry_modules) / sizeof(entry_modules[0]); i++)
		Py_XDECREF(PyImport_ImportModule(entry_modules[i]));
	PyErr_Clear();
	return interp_import(s, true, why, why_len);
}

/*
 * Imports the modules of one tier (light: the zygote's; else the heavy template's), runs the
 * warm-up exercise for them and freezes the garbage collector. Returns 0, or -1 with why.
 */
int
interp_import(const struct warm_settings *s, bool light, char *why, size_t why_len)
{
	PyObject *ns, *r, *gc;

	for (int i = 0; i < s->n_modules; i++) {
		if (s->light[i] != light)
			continue;
		PyObject *m = PyImport_ImportModule(s->modules[i]);
		if (m == NULL) {
			PyErr_Print();
			snprintf(why, why_len, "importing %s failed (the traceback is above)",
			         s->modules[i]);
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
		for (int i = 0; wanted && i < s->n_modules; i++) {
			if (s->light[i] != light)
				continue;
			PyObject *name = PyUnicode_FromString(s->modules[i]);
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
	/* the generators every run reseeds: those of the modules imported so far */
	r = PyObject_CallNoArgs(warm_collect_fn);
	if (r == NULL) {
		PyErr_Print();
		snprintf(why, why_len, "finding the modules' random generators failed");
		return -1;
	}
	Py_DECREF(r);
	/* objects that exist now are never scanned again: a run's collections do not write to
	 * (and so copy) the template's pages */
	gc = PyImport_ImportModule("gc");
	r = gc ? PyObject_CallMethod(gc, "freeze", NULL) : NULL;
	Py_XDECREF(r);
	Py_XDECREF(gc);
	PyErr_Clear();
	return 0;
}

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
 * (RLIMIT_AS, no cgroup) it must fail as glibc's does, for Python to raise MemoryError. And
 * its frees are Python's, by the million in an import of the five modules: a quarantine of
 * 16 MiB, not the default 256, still holds what the pool's own code freed over many
 * requests, and spares the interpreter 256 MiB of freed pages held unused, each faulted in
 * with its shadow (a fifth of the CPU of a sanitized stack's start with the five modules) */
const char *__asan_default_options(void);
const char *
__asan_default_options(void)
{
	return "allocator_may_return_null=1:quarantine_size_mb=16";
}
#endif

unsigned long long
interp_address_space_bytes(void)
{
	char buf[128];
	unsigned long long pages = 0;

	if (util_read_small("/proc/self/statm", buf, sizeof(buf)) <= 0)
		return 0;
	pages = strtoull(buf, NULL, 10);
	return pages * (unsigned long long)sysconf(_SC_PAGESIZE);
}

/* The fields of the memory map a process cannot change, read once by the template (a
 * fork keeps them); PR_SET_MM_MAP wants them all back. */
static struct prctl_mm_map template_mm;
static bool template_mm_known;

void
interp_read_mm(void)
{
	char buf[2048], *p;
	unsigned long long v[64];
	int n = 0;

	if (util_read_small("/proc/self/stat", buf, sizeof(buf)) <= 0)
		return;
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
warm_set_proc_view(const struct sandbox_spec *s, char *const *argv)
{
	struct prctl_mm_map m = template_mm;
	char *args, *env;

	m.arg_end = pack_strings(argv, &args);
	m.env_end = pack_strings(s->envp, &env);
	m.arg_start = (unsigned long)args;
	m.env_start = (unsigned long)env;
	m.brk = (unsigned long)sbrk(0);
	if (!template_mm_known || m.arg_end == 0 || m.env_end == 0 ||
	    prctl(PR_SET_MM, PR_SET_MM_MAP, &m, sizeof(m), 0) < 0) {
		sandbox_set_title(argv);
		return;
	}
	(void)prctl(PR_SET_NAME, "python3");
}

static bool warm_prepared;

/*
 * The interpreter's side of a run's start, once every step that does not need the request is
 * in force: with a pid namespace before the request arrives (sandbox.c's prepare), else from
 * interp_enter(). No code of the run executes here.
 */
int
interp_prepare(const struct sandbox_spec *s)
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
	if (!s->agent) /* a command's are known with it (interp_enter_command) */
		warm_set_proc_view(s, s->argv);
	warm_prepared = true;
	return 0;
}

/*
 * Runs __main__ from the file at path as pymain_run_file does: __file__, __cached__ and a
 * source loader for the run, then the code; error_fd (if not -1) is closed as execve would,
 * right before. Returns the exit status, or -1 when the file cannot be opened (nothing ran).
 */
static int
interp_run_file(const char *path, int error_fd)
{
	PyCompilerFlags cf = _PyCompilerFlags_INIT;
	PyObject *main_dict, *file, *ext, *loader = NULL, *r;
	FILE *fp = fopen(path, "rbe");
	int code = 0;

	if (fp == NULL)
		return -1;
	main_dict = PyModule_GetDict(PyImport_AddModule("__main__"));
	file = PyUnicode_DecodeFSDefault(path);
	ext = PyImport_ImportModule("_frozen_importlib_external");
	if (ext != NULL && file != NULL)
		loader = PyObject_CallMethod(ext, "SourceFileLoader", "sO", "__main__", file);
	Py_XDECREF(ext);
	if (file == NULL || loader == NULL ||
	    PyDict_SetItemString(main_dict, "__file__", file) < 0 ||
	    PyDict_SetItemString(main_dict, "__cached__", Py_None) < 0 ||
	    PyDict_SetItemString(main_dict, "__loader__", loader) < 0) {
		Py_XDECREF(file);
		Py_XDECREF(loader);
		fclose(fp);
		PyErr_Clear();
		return -1;
	}
	Py_DECREF(file);
	Py_DECREF(loader);
	if (error_fd >= 0)
		close(error_fd);
	warm_in_run = 1;
	r = PyRun_FileExFlags(fp, path, Py_file_input, main_dict, main_dict, 1, &cf);
	if (r != NULL) {
		code = 0;
	} else if (!_Py_HandleSystemExit(&code)) {
		PyErr_Print(); /* sys.excepthook: the traceback */
		code = 1;
	}
	Py_XDECREF(r);
	if (PyDict_DelItemString(main_dict, "__file__") < 0 ||
	    PyDict_DelItemString(main_dict, "__cached__") < 0)
		PyErr_Clear();
	return code;
}

/* What the interpreter does once __main__'s code has ended with code: finalisation, and the
 * exit (or the death by SIGINT a KeyboardInterrupt asks for). */
static noreturn void
interp_exit(int code)
{
	PyObject *r = PyObject_CallNoArgs(warm_leave_fn);

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

/* A list of str from argv's n first strings (file-system encoding, as the interpreter's own). */
static PyObject *
str_list(char *const *argv, int n)
{
	PyObject *l = PyList_New(0);

	for (int i = 0; l != NULL && i < n; i++) {
		PyObject *a = PyUnicode_DecodeFSDefault(argv[i]);
		if (a == NULL || PyList_Append(l, a) < 0)
			Py_CLEAR(l);
		Py_XDECREF(a);
	}
	return l;
}

/*
 * Port 8888: runs the agent's command in this interpreter when it is a plain Python
 * invocation of this interpreter (pycmd.h), as the shell would have started it; returns when
 * it is not, before anything of it ran, and the shell runs it.
 */
static void
interp_enter_command(const struct sandbox_spec *s)
{
	struct pycmd pc;
	char exe[PATH_MAX], real[PATH_MAX], want[PATH_MAX], script[PATH_MAX], dir[PATH_MAX];
	const char *path = NULL, *slash;
	PyObject *argv = NULL, *orig = NULL, *r = NULL, *flags = NULL, *nf = NULL, *nfields;
	int code, skip;

	if (s->command == NULL || pycmd_parse(s->command, strlen(s->command), &pc) < 0)
		return;
	for (int i = 0; s->envp[i] != NULL; i++)
		if (strncmp(s->envp[i], "PATH=", 5) == 0)
			path = s->envp[i] + 5;
	/* the shell's choice must be this very interpreter */
	if (pycmd_which(pc.argv[0], path, exe, sizeof(exe)) < 0 || realpath(exe, real) == NULL ||
	    realpath(s->python, want) == NULL || strcmp(real, want) != 0)
		goto out;
	dir[0] = '\0';
	if (pc.kind == PYCMD_SCRIPT) {
		/* __file__ is the script's path made absolute, sys.path[0] its real directory */
		int n = pc.argv[1][0] == '/'
		            ? snprintf(script, sizeof(script), "%s", pc.argv[1])
		            : snprintf(script, sizeof(script), "/app/%s", pc.argv[1]);
		if (n < 0 || (size_t)n >= sizeof(script) || realpath(script, dir) == NULL)
			goto out;
		slash = strrchr(dir, '/');
		if (slash == dir)
			dir[1] = '\0';
		else if (slash != NULL)
			dir[slash - dir] = '\0';
	}
	skip = pc.kind == PYCMD_CODE ? 3 : 2;
	argv = str_list(pc.argv + skip - 1, pc.argc - skip + 1);
	orig = str_list(pc.argv, pc.argc);
	if (argv == NULL || orig == NULL)
		goto out;
	if (pc.kind == PYCMD_CODE)
		PyList_SetItem(argv, 0, PyUnicode_FromString("-c"));
	r = PyObject_CallFunction(warm_command_fn, "OOss", argv, orig, exe, dir);
	if (r == NULL || r == Py_None)
		goto out;
	/* sys.flags as that interpreter's (subprocess passes them on to child interpreters) */
	flags = PySys_GetObject("flags"); /* borrowed */
	nfields = flags ? PyObject_GetAttrString((PyObject *)Py_TYPE(flags), "n_fields") : NULL;
	if (nfields != NULL && PyList_Check(r) && PyLong_AsLong(nfields) == PyList_GET_SIZE(r)) {
		nf = PyStructSequence_New(Py_TYPE(flags));
		for (Py_ssize_t i = 0; nf != NULL && i < PyList_GET_SIZE(r); i++)
			PyStructSequence_SetItem(nf, i, Py_NewRef(PyList_GET_ITEM(r, i)));
	}
	Py_XDECREF(nfields);
	if (nf == NULL || PySys_SetObject("flags", nf) < 0)
		goto out;
	Py_DECREF(nf);
	nf = NULL;
	warm_set_proc_view(s, pc.argv);
	slash = strrchr(exe, '/');
	(void)prctl(PR_SET_NAME, slash ? slash + 1 : exe);
	/* from here on the command runs: no fallback */
	close(s->error_fd);
	if (pc.kind == PYCMD_CODE) {
		PyCompilerFlags cf = _PyCompilerFlags_INIT;
		PyObject *main_dict = PyModule_GetDict(PyImport_AddModule("__main__"));

		warm_in_run = 1;
		/* as pymain_run_command: the code as a string named <string> */
		Py_XDECREF(r);
		r = PyRun_StringFlags(pc.argv[2], Py_file_input, main_dict, main_dict, &cf);
		if (r != NULL) {
			code = 0;
		} else if (!_Py_HandleSystemExit(&code)) {
			PyErr_Print();
			code = 1;
		}
	} else {
		code = interp_run_file(script, -1);
		if (code < 0) {
			PySys_FormatStderr("%s: can't open file %R: [Errno %d] %s\n", pc.argv[0],
			                   PyUnicode_DecodeFSDefault(script), errno,
			                   strerror(errno));
			code = 2;
		}
	}
	interp_exit(code);
out:
	PyErr_Clear();
	Py_XDECREF(nf);
	Py_XDECREF(r);
	Py_XDECREF(argv);
	Py_XDECREF(orig);
	pycmd_free(&pc);
}

void
interp_enter(const struct sandbox_spec *s)
{
	char path[4200];
	int code;

	if (!warm_prepared && interp_prepare(s) < 0)
		return;
	if (s->agent) {
		interp_enter_command(s);
		return;
	}
	snprintf(path, sizeof(path), "%s/main.py", s->workdir);
	/* as `python3 main.py` runs it (pymain_run_file); once it has begun, no fallback */
	code = interp_run_file(path, s->error_fd);
	if (code < 0)
		return;
	interp_exit(code);
}

void
interp_enter_session(const struct sandbox_spec *s)
{
	PyObject *r;

	if (!warm_prepared && interp_prepare(s) < 0)
		return;
	(void)prctl(PR_SET_NAME, "python3");
	/* from here on the session serves: no fallback */
	close(s->error_fd);
	warm_in_run = 1;
	r = PyObject_CallFunction(warm_session_fn, "is", s->cell_fd, s->workdir);
	if (r == NULL)
		PyErr_Print();
	Py_XDECREF(r);
	_exit(r == NULL ? 1 : 0);
}
