/*
 * probe.c - measuring what /capabilities promises.
 *
 * The promise is five modules, and those an extended image names in CODEBOX_EXTRA_MODULES;
 * their versions and the interpreter's are read by running the sandbox's own interpreter
 * once, through run_execute(), so the numbers describe exactly what a program will get. A
 * missing module stops the service from starting.
 */
#include "probe.h"

#include "run.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
	const char *import_name;
	const char *distribution;
} probe_promised[] = {
    {"numpy", "numpy"}, {"pandas", "pandas"},        {"scipy", "scipy"},
    {"sympy", "sympy"}, {"sklearn", "scikit-learn"},
};

static const char probe_program[] =
    "import importlib, importlib.metadata, json, platform\n"
    "mods = json.loads(input())\n"
    "out = {'pythonVersion': platform.python_version(), 'modules': [], 'missing': []}\n"
    "for imp, dist in mods:\n"
    "    try:\n"
    "        importlib.import_module(imp)\n"
    "        out['modules'].append({'importName': imp, 'distribution': dist,\n"
    "                               'version': importlib.metadata.version(dist)})\n"
    "    except Exception as e:\n"
    "        out['missing'].append('%s (%s: %s)' % (imp, type(e).__name__, e))\n"
    "with open('result.json', 'w') as f:\n"
    "    json.dump(out, f)\n";

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
 * Appends CODEBOX_EXTRA_MODULES' entries ("import" or "import=distribution") to the JSON list
 * of [import, distribution] pairs in buf. Returns the new length, or -1 with why.
 */
static int
probe_extra(char *buf, size_t len, size_t size, size_t promised, char *why, size_t why_len)
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
			len += (size_t)snprintf(buf + len, size - len, ",[\"%.*s\",\"%.*s\"]",
			                        (int)imp_n, p, (int)dist_n, dist);
		}
		p = end ? end + 1 : p + n;
	}
	return (int)len;
}

static int
copy_field(char *dst, size_t dst_len, json_t *v)
{
	if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) >= dst_len)
		return -1;
	memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

int
probe_measure(const struct run_config *cfg, struct probe_info *info, struct run_outcome *fault,
              char *why, size_t why_len)
{
	struct run_outcome o;
	json_t *doc = NULL, *mods, *missing, *m;
	char stdin_buf[PROBE_MAX_MODULES * 140], run_why[256];
	size_t n = 0, i;
	int rc = -1, len;

	memset(info, 0, sizeof(*info));
	memset(fault, 0, sizeof(*fault));
	n += (size_t)snprintf(stdin_buf + n, sizeof(stdin_buf) - n, "[");
	for (i = 0; i < sizeof(probe_promised) / sizeof(probe_promised[0]); i++)
		n += (size_t)snprintf(stdin_buf + n, sizeof(stdin_buf) - n, "%s[\"%s\",\"%s\"]",
		                      i ? "," : "", probe_promised[i].import_name,
		                      probe_promised[i].distribution);
	len = probe_extra(stdin_buf, n, sizeof(stdin_buf), i, why, why_len);
	if (len < 0)
		return -1;
	n = (size_t)len;
	n += (size_t)snprintf(stdin_buf + n, sizeof(stdin_buf) - n, "]\n");

	struct run_spec spec = {
	    .code = probe_program,
	    .code_len = sizeof(probe_program) - 1,
	    .stdin_data = stdin_buf,
	    .stdin_len = n,
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
	rc = 0;
out:
	json_decref(doc);
	run_outcome_free(&o);
	return rc;
}
