/*
 * probe.c - measuring what /capabilities promises.
 *
 * The promise is five modules, and those an extended image names in CODEBOX_EXTRA_MODULES;
 * their versions and the interpreter's are read by running the sandbox's own interpreter
 * once, through run_execute(), so the numbers describe exactly what a program will get. A
 * missing module stops the service from starting.
 *
 * Importing the five is most of a start's CPU (some 2 s of the 5). With a probe cache
 * (--probe-cache), the probe run still runs, through the same sandbox, but imports nothing
 * when the cache's fingerprint is what it measures now: the interpreter (the configured path
 * and its file, the one it runs), every directory of its module path and its library
 * directory, each module's files as found (not imported), its distribution's version, and the
 * list promised. Installing, removing or upgrading a module or a shared library changes one of
 * them, and the next start imports again. The pool alone writes the file: one owned by
 * another uid, or writable by others, is ignored.
 */
#include "run/probe.h"

#include "core/isolation.h"
#include "core/log.h"
#include "box/mounts.h"
#include "run/run.h"
#include "box/sandbox.h"
#include "core/util.h"
#include "warm/warm.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const struct {
	const char *import_name;
	const char *distribution;
} probe_promised[] = {
    {"numpy", "numpy"}, {"pandas", "pandas"},        {"scipy", "scipy"},
    {"sympy", "sympy"}, {"sklearn", "scikit-learn"},
};

/* stdin: {"mods": [[import, distribution], ...], "key": the interpreter's file, "cache":
 * the cache's document or null}; result.json: the measure, with its fingerprint */
static const char probe_program[] =
    "import importlib, importlib.util, importlib.metadata, json, os, platform, sys, sysconfig\n"
    "req = json.loads(input())\n"
    "mods, cache = req['mods'], req['cache']\n"
    "def st(p):\n"
    "    try:\n"
    "        s = os.stat(p)\n"
    "        return [s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns]\n"
    "    except (OSError, TypeError, ValueError):\n"
    "        return None\n"
    "def found(imp, dist):\n"
    "    try:\n"
    "        spec = importlib.util.find_spec(imp)\n"
    "        version = importlib.metadata.version(dist)\n"
    "    except Exception:\n"
    "        return None\n"
    "    if spec is None:\n"
    "        return None\n"
    "    dirs = list(spec.submodule_search_locations or [])\n"
    "    return [spec.origin, st(spec.origin), version, [[d, st(d)] for d in dirs]]\n"
    "fp = {'key': req['key'], 'python': [sys.version, sys.executable, st(sys.executable)],\n"
    "      'path': [[d, st(d)] for d in sys.path],\n"
    "      'libdir': st(sysconfig.get_config_var('LIBDIR') or '/nonexistent'),\n"
    "      'mods': [[imp, dist, found(imp, dist)] for imp, dist in mods]}\n"
    "if (isinstance(cache, dict) and cache.get('fingerprint') == fp and not cache.get('missing')\n"
    "        and all(m[2] for m in fp['mods'])):\n"
    "    out = dict(cache, cached=True)\n"
    "else:\n"
    "    out = {'pythonVersion': platform.python_version(), 'modules': [], 'missing': [],\n"
    "           'cached': False, 'fingerprint': fp}\n"
    "    for imp, dist in mods:\n"
    "        try:\n"
    "            importlib.import_module(imp)\n"
    "            out['modules'].append({'importName': imp, 'distribution': dist,\n"
    "                                   'version': importlib.metadata.version(dist)})\n"
    "        except Exception as e:\n"
    "            out['missing'].append('%s (%s: %s)' % (imp, type(e).__name__, e))\n"
    "with open('result.json', 'w') as f:\n"
    "    json.dump(out, f)\n";

/* the cache's bound: a fingerprint of 16 modules and their directories is some 8 KiB */
#define PROBE_CACHE_MAX (64 * 1024)

/*
 * The probe cache's document, or NULL: none, unreadable, too large, not JSON, or a file this
 * pool did not write (another uid's, or writable by others).
 */
static json_t *
probe_cache_read(const char *path)
{
	struct stat sb;
	char *buf = NULL;
	json_t *doc = NULL;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
	    (sb.st_mode & 022) != 0 || sb.st_size > PROBE_CACHE_MAX)
		goto out;
	buf = malloc(PROBE_CACHE_MAX);
	if (buf == NULL || (n = util_read_max(fd, buf, PROBE_CACHE_MAX)) < 0)
		goto out;
	doc = json_loadb(buf, (size_t)n, 0, NULL);
	if (!json_is_object(doc)) {
		json_decref(doc);
		doc = NULL;
	}
out:
	free(buf);
	close(fd);
	return doc;
}

/* Writes the measure to the cache: a file of its own, renamed over the old one, so that
 * pools starting side by side read one whole document or none. */
static void
probe_cache_write(const char *path, const char *doc, size_t len)
{
	char tmp[4200];
	int fd, rc;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid()) >= sizeof(tmp))
		return;
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		log_msg(LOG_WARN, "the probe cache %s cannot be written: %s", path,
		        strerror(errno));
		return;
	}
	rc = util_write_all(fd, doc, len);
	if (close(fd) < 0 || rc < 0 || rename(tmp, path) < 0) {
		log_msg(LOG_WARN, "the probe cache %s cannot be written: %s", path,
		        strerror(errno));
		(void)unlink(tmp);
	}
}

/* a module or distribution name: letters, digits, '_', '.', '-' (no quote, no separator) */
static int
probe_name_ok(const char *p, size_t n)
{
	if (n == 0 || n >= sizeof(((struct probe_module *)0)->import_name) || *p == '.')
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(p[i] == '_' || p[i] == '.' || p[i] == '-' || (p[i] >= 'a' && p[i] <= 'z') ||
		      (p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9')))
			return 0;
	return 1;
}

/*
 * Appends CODEBOX_EXTRA_MODULES' entries ("import" or "import=distribution") to mods, the JSON
 * list of [import, distribution] pairs that holds the promised ones. Returns 0, or -1 with why.
 */
static int
probe_extra(json_t *mods, size_t promised, char *why, size_t why_len)
{
	const char *extra = getenv("CODEBOX_EXTRA_MODULES");
	size_t count = promised;

	for (const char *p = extra ? extra : ""; *p;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', n);
		size_t imp_n = eq ? (size_t)(eq - p) : n;
		const char *dist = eq ? eq + 1 : p;
		size_t dist_n = eq ? n - imp_n - 1 : n;

		if (n > 0) {
			if (!probe_name_ok(p, imp_n) || !probe_name_ok(dist, dist_n)) {
				snprintf(why, why_len,
				         "CODEBOX_EXTRA_MODULES: \"%.*s\" is not IMPORT or "
				         "IMPORT=DISTRIBUTION (letters, digits, _ . -)",
				         (int)(n > 64 ? 64 : n), p);
				return -1;
			}
			if (++count > PROBE_MAX_MODULES) {
				snprintf(why, why_len, "CODEBOX_EXTRA_MODULES: at most %zu modules",
				         (size_t)PROBE_MAX_MODULES - promised);
				return -1;
			}
			if (json_array_append_new(
			        mods, json_pack("[s#s#]", p, (int)imp_n, dist, (int)dist_n)) < 0) {
				snprintf(why, why_len, "out of memory");
				return -1;
			}
		}
		p = end ? end + 1 : p + n;
	}
	return 0;
}

static int
copy_field(char *dst, size_t dst_len, json_t *v)
{
	if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= dst_len)
		return -1;
	memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

/*
 * The probe run's stdin, one line: the promised list, the configured interpreter's file (a
 * wrapper script is the interpreter too: its path and its file), and the cache's document.
 * Returns a malloc'd string, or NULL with why.
 */
static char *
probe_request(const struct run_config *cfg, const char *cache_path, char *why, size_t why_len)
{
	size_t promised = sizeof(probe_promised) / sizeof(probe_promised[0]);
	json_t *req, *mods = json_array(), *cache = NULL;
	char key[4400], *text;
	struct stat sb;

	for (size_t i = 0; mods && i < promised; i++)
		(void)json_array_append_new(mods, json_pack("[ss]", probe_promised[i].import_name,
		                                            probe_promised[i].distribution));
	if (json_array_size(mods) != promised) {
		snprintf(why, why_len, "out of memory");
		json_decref(mods);
		return NULL;
	}
	if (probe_extra(mods, promised, why, why_len) < 0) {
		json_decref(mods);
		return NULL;
	}
	if (stat(cfg->python, &sb) < 0)
		memset(&sb, 0, sizeof(sb));
	snprintf(key, sizeof(key), "%s %llu %llu %lld %lld.%09ld", cfg->python,
	         (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino,
	         (long long)sb.st_size, (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
	if (cache_path != NULL)
		cache = probe_cache_read(cache_path);
	req = json_pack("{s:o, s:s, s:o}", "mods", mods, "key", key, "cache",
	                cache ? cache : json_null());
	text = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (text == NULL)
		snprintf(why, why_len, "the probe's request cannot be written (out of memory?)");
	return text;
}

int
probe_measure(const struct run_config *cfg, const char *cache_path, struct probe_info *info,
              struct run_outcome *fault, char *why, size_t why_len)
{
	struct run_outcome o;
	json_t *doc = NULL, *mods, *missing, *m;
	char run_why[256], *request;
	size_t i;
	int rc = -1;

	memset(info, 0, sizeof(*info));
	memset(fault, 0, sizeof(*fault));
	request = probe_request(cfg, cache_path, why, why_len);
	if (request == NULL)
		return -1;

	struct run_spec spec = {
	    .code = probe_program,
	    .code_len = sizeof(probe_program) - 1,
	    .stdin_data = request, /* one line without its newline: input() reads it to EOF */
	    .stdin_len = strlen(request),
	    .wall_ms = 120 * 1000, /* importing sklearn on a cold page cache is slow */
	    .max_stdout_bytes = 4096,
	    .max_stderr_bytes = 4096,
	    .max_result_bytes = 65536,
	    .caps =
	        {
	            .memory_bytes = 1ULL << 30,
	            .max_processes = 64,
	            .disk_bytes = 16ULL << 20,
	            /* the CPU quota is set up (and so tested) like a run's */
	            .cpu_millicores = 1000,
	        },
	};
	struct run_stream stream;
	int started;

	memset(fault, 0, sizeof(*fault));
	/* the tier, decided before the run as every port's is */
	spec.caps.heavy = cfg->warm && warm_wants_heavy(spec.code, spec.code_len);
	run_stream_init(&stream);
	started = run_execute(cfg, &spec, &stream, &o, run_why, sizeof(run_why));
	run_stream_finish(cfg, &stream);
	if (started < 0) {
		snprintf(why, why_len, "the interpreter %s could not be run: %s", cfg->python,
		         run_why);
		fault->fault = o.fault;
		fault->fault_step = o.fault_step;
		fault->fault_detail = o.fault_detail;
		run_outcome_free(&o);
		free(request);
		return -1;
	}
	if (o.status != RUN_SUCCEEDED || o.result_status != RESULT_OK) {
		snprintf(why, why_len, "the interpreter %s failed the probe (%s, exit %d): %.*s",
		         cfg->python, run_status_string(o.status), o.exit_code,
		         (int)(o.err.len > 300 ? 300 : o.err.len), o.err.buf);
		goto out;
	}
	doc = json_loadb(o.result_json, o.result_len, 0, NULL);
	mods = json_object_get(doc, "modules");
	missing = json_object_get(doc, "missing");
	if (!json_is_array(mods) || !json_is_array(missing) ||
	    copy_field(info->python_version, sizeof(info->python_version),
	               json_object_get(doc, "pythonVersion")) < 0) {
		snprintf(why, why_len, "the probe's answer is malformed");
		goto out;
	}
	if (json_array_size(missing) > 0) {
		json_t *first = json_array_get(missing, 0);
		snprintf(why, why_len, "a promised module is missing from %s: %s", cfg->python,
		         json_string_value(first) ? json_string_value(first) : "?");
		goto out;
	}
	json_array_foreach(mods, i, m)
	{
		struct probe_module *pm = &info->modules[info->n_modules];
		if (info->n_modules >= PROBE_MAX_MODULES ||
		    copy_field(pm->import_name, sizeof(pm->import_name),
		               json_object_get(m, "importName")) < 0 ||
		    copy_field(pm->distribution, sizeof(pm->distribution),
		               json_object_get(m, "distribution")) < 0 ||
		    copy_field(pm->version, sizeof(pm->version), json_object_get(m, "version")) <
		        0) {
			snprintf(why, why_len, "the probe's module list is malformed");
			goto out;
		}
		info->n_modules++;
	}
	info->cached = json_is_true(json_object_get(doc, "cached"));
	if (cache_path != NULL && !info->cached)
		probe_cache_write(cache_path, o.result_json, o.result_len);
	rc = 0;
out:
	json_decref(doc);
	run_outcome_free(&o);
	free(request);
	return rc;
}

/* ---- the blame: which layer a failed probe run turns off ---- */

/* What a row of the blame turns off: an isolation layer, or one of these. */
enum probe_blame_what {
	PROBE_BLAME_PROC = ISO_LAYER_COUNT, /* the private /proc, and what needs it */
	PROBE_BLAME_HIGH_PIDS,              /* the program's pids high (they start at 2) */
	PROBE_BLAME_NOTHING,                /* the interpreter itself: no layer to blame */
};

/*
 * The blame chain, in one table read from the top: the first row whose fault, step (with
 * RUN_FAULT_STEP; 0: any) and mounts step (with SANDBOX_MOUNTS; 0: any) match the failure,
 * and, for a row marked "while on", whose layer is still on, names what to turn off. A step of
 * no layer of its own, inside the namespaces, falls to the last row: direct mode.
 */
static const struct {
	enum run_fault fault;
	int step;      /* enum sandbox_step */
	int detail;    /* enum mounts_step */
	int what;      /* enum iso_layer, or enum probe_blame_what */
	bool while_on; /* only while what is on; else the next row that matches */
} probe_blames[] = {
    {RUN_FAULT_CLONE, 0, 0, ISO_PIDNS, false},
    {RUN_FAULT_UID_MAP, 0, 0, ISO_USERNS, false},
    {RUN_FAULT_CGROUP, 0, 0, ISO_CGROUP, false},
    {RUN_FAULT_STEP, SANDBOX_MOUNTS, MOUNTS_PROC, PROBE_BLAME_PROC, true},
    {RUN_FAULT_STEP, SANDBOX_MOUNTS, MOUNTS_MASK, ISO_MASKEDPATHS, true},
    {RUN_FAULT_STEP, SANDBOX_MOUNTS, 0, ISO_MOUNTNS, false},
    {RUN_FAULT_STEP, SANDBOX_HOSTNAME, 0, ISO_UTSNS, false},
    {RUN_FAULT_STEP, SANDBOX_CGROUPNS, 0, ISO_CGROUPNS, false},
    {RUN_FAULT_STEP, SANDBOX_PIDS, 0, PROBE_BLAME_HIGH_PIDS, true},
    {RUN_FAULT_STEP, SANDBOX_LANDLOCK, 0, ISO_LANDLOCK, false},
    {RUN_FAULT_STEP, SANDBOX_SECCOMP, 0, ISO_SECCOMP, false},
    {RUN_FAULT_STEP, SANDBOX_EXEC, 0, PROBE_BLAME_NOTHING, false},
    {RUN_FAULT_STEP, 0, 0, ISO_PIDNS, true},
};

/* Whether what a row blames is on. */
static bool
probe_blame_on(const struct isolation *iso, int what)
{
	switch (what) {
	case PROBE_BLAME_PROC:
		return iso->proc;
	case PROBE_BLAME_HIGH_PIDS:
		return iso->high_pids;
	case PROBE_BLAME_NOTHING:
		return true;
	default:
		return iso->on[what];
	}
}

bool
probe_blame(struct isolation *iso, const struct run_outcome *f, const char *why)
{
	for (size_t i = 0; i < sizeof(probe_blames) / sizeof(probe_blames[0]); i++) {
		int what = probe_blames[i].what;
		if (probe_blames[i].fault != f->fault ||
		    (probe_blames[i].step != 0 && probe_blames[i].step != f->fault_step) ||
		    (probe_blames[i].detail != 0 && probe_blames[i].detail != f->fault_detail) ||
		    (probe_blames[i].while_on && !probe_blame_on(iso, what)))
			continue;
		switch (what) {
		case PROBE_BLAME_PROC:
			iso->proc = false; /* the run keeps an empty /proc */
			iso->high_pids = false;
			iso_turn_off(iso, ISO_MASKEDPATHS, "needs a private /proc");
			return true;
		case PROBE_BLAME_HIGH_PIDS:
			iso->high_pids = false; /* pids start at 2, like any namespace */
			return true;
		case PROBE_BLAME_NOTHING:
			return false;
		default:
			iso_turn_off(iso, (enum iso_layer)what, why);
			return true;
		}
	}
	return false;
}
