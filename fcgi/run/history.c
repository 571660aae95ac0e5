/*
 * history.c - an audit trail of every run, in the layout agent systems read:
 *
 *   <UTC %Y%m%dT%H%M%S>_<8 hex>.py           exactly what ran (program, or shell command)
 *   <UTC %Y%m%dT%H%M%S>_<8 hex>.meta.json    "status": "pending" before the run, then final
 *   <UTC %Y%m%dT%H%M%S>_<8 hex>.result.json  path, code_path, exit_code, stdout, stderr,
 *                                            status, durationMs, requestId
 *
 * Only the first two are written before the run (two small files); the result, the final
 * meta and the pruning wait until the reply has been sent (history_flush(), called by the
 * worker after FCGX_Finish_r, and by a session's watcher when a background execution ends). The
 * directory is the pool's own (0700, files 0600), outside every run's mount namespace and Landlock
 * rules, so no run can read it. Bounded by entries and bytes: the oldest entries (names sort by
 * time) go first. Concurrent workers may prune at once; a file already gone is not an error, and an
 * entry pruned while its run was in flight (it was among the oldest) keeps no end. Every file is
 * written to a temporary name and renamed, so a reader never sees half a file; the pruning removes
 * the temporary files of a worker that died in a write.
 */
#include "run/history.h"

#include "core/capture.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "core/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define HISTORY_DEFAULT_RUNS 1000UL
#define HISTORY_DEFAULT_BYTES (64ULL << 20)
#define HISTORY_STEM_LEN 24 /* 20261201T061428_1a2b3c4d */
#define HISTORY_TMP_FMT ".%s.tmp"
/* a temporary file lives for one write (milliseconds): one this old is left over (its writer
 * died in the write, or could not remove it) */
#define HISTORY_TMP_STALE_SEC 60

/* The run in hand: set by history_begin(), completed by history_end(). */
static struct {
	bool active;
	char stem[HISTORY_STEM_LEN + 1];
	char started[48];
	char port[16];
	char request_id[129];
	char trace_id[33]; /* "" for none */
	size_t code_len;
	char *result; /* the .result.json text, owned */
	size_t result_len;
	char *meta; /* the final .meta.json text, owned */
	size_t meta_len;
} history_run;

/*
 * What the directory holds, roughly, shared by every worker (mapped before the fork): the
 * directory is scanned only when these say a bound is passed, not after every run. Each
 * scan sets them to what it found.
 */
static struct history_totals {
	unsigned long long entries;
	unsigned long long bytes;
} * history_totals;

static void history_prune(const struct history_config *hc);

static unsigned long long
env_number(const char *name, unsigned long long dflt, bool *bad)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long n;

	if (v == NULL || *v == '\0')
		return dflt;
	errno = 0;
	n = strtoull(v, &end, 10);
	if (errno || *end || n == 0 || v[0] == '-') {
		*bad = true;
		return dflt;
	}
	return n;
}

int
history_setup(struct history_config *hc, char *why, size_t why_len)
{
	const char *dir = getenv("CODEBOX_HISTORY_DIR");
	bool bad = false;

	hc->dir_fd = -1;
	hc->dir = NULL;
	if (dir == NULL || *dir == '\0')
		return 0;
	hc->max_runs =
	    (unsigned long)env_number("CODEBOX_HISTORY_MAX_RUNS", HISTORY_DEFAULT_RUNS, &bad);
	hc->max_bytes = env_number("CODEBOX_HISTORY_MAX_BYTES", HISTORY_DEFAULT_BYTES, &bad);
	if (bad) {
		snprintf(
		    why, why_len,
		    "CODEBOX_HISTORY_MAX_RUNS and CODEBOX_HISTORY_MAX_BYTES must be integers > 0");
		return -1;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
		snprintf(why, why_len, "mkdir(%s) failed: %s", dir, strerror(errno));
		return -1;
	}
	hc->dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (hc->dir_fd < 0) {
		snprintf(why, why_len, "open(%s) failed: %s", dir, strerror(errno));
		return -1;
	}
	/* runs must never read it, whoever they run as */
	if (fchmod(hc->dir_fd, 0700) < 0) {
		snprintf(why, why_len, "chmod(%s) failed: %s", dir, strerror(errno));
		close(hc->dir_fd);
		hc->dir_fd = -1;
		return -1;
	}
	/* a copy: the environment's strings are not ours to keep */
	hc->dir = strdup(dir);
	if (hc->dir == NULL) {
		snprintf(why, why_len, "out of memory");
		return -1;
	}
	history_totals =
	    util_map_shared(NULL, sizeof(*history_totals)); /* NULL: every flush scans */
	history_prune(hc); /* what an earlier pool left, within the bounds and counted */
	return 0;
}

/* Writes name (in the history directory) through a temporary file (HISTORY_TMP_FMT) and a
 * rename, so a reader never sees half of it: a new file (the stem is fresh) is never put
 * over an existing one (RENAME_NOREPLACE), a replaced one is. A temporary file outlives its
 * write only when its writer died in it (or its removal failed); history_prune() removes it. */
static int
history_write(const struct history_config *hc, const char *name, const char *data, size_t len,
              bool replace)
{
	char tmp[64];
	int fd, err = 0;
	size_t done = 0;

	snprintf(tmp, sizeof(tmp), HISTORY_TMP_FMT, name);
	fd = openat(hc->dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		err = errno;
		goto out;
	}
	while (done < len) {
		ssize_t w = write(fd, data + done, len - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			err = w < 0 ? errno : EIO;
			break;
		}
		done += (size_t)w;
	}
	if (close(fd) < 0 && err == 0)
		err = errno; /* NFS and the like report a deferred write's error here */
	if (err == 0 &&
	    renameat2(hc->dir_fd, tmp, hc->dir_fd, name, replace ? 0 : RENAME_NOREPLACE) == 0)
		return 0;
	if (err == 0) {
		err = errno;
		/* no RENAME_NOREPLACE here: a link fails as well on an existing name */
		if (err == EINVAL && !replace)
			err = linkat(hc->dir_fd, tmp, hc->dir_fd, name, 0) == 0 ? 0 : errno;
	}
	(void)unlinkat(hc->dir_fd, tmp, 0);
out:
	if (err == 0)
		return 0;
	log_msg(LOG_WARN, "history: writing %s/%s failed: %s", hc->dir, name, strerror(err));
	return -1;
}

static char *
history_meta(const char *status, long long duration_ms, const int *exit_code, size_t *len)
{
	struct jsonw w;

	jsonw_init(&w);
	jsonw_lit(&w, "{\"id\":");
	jsonw_cstr(&w, history_run.stem);
	jsonw_lit(&w, ",\"status\":");
	jsonw_cstr(&w, status);
	jsonw_lit(&w, ",\"port\":");
	jsonw_cstr(&w, history_run.port);
	jsonw_lit(&w, ",\"language\":");
	jsonw_cstr(&w, strcmp(history_run.port, "agent") == 0 ? "shell" : "python");
	jsonw_lit(&w, ",\"startedAt\":");
	jsonw_cstr(&w, history_run.started);
	jsonw_lit(&w, ",\"requestId\":");
	jsonw_cstr(&w, history_run.request_id);
	if (history_run.trace_id[0]) {
		jsonw_lit(&w, ",\"traceId\":");
		jsonw_cstr(&w, history_run.trace_id);
	}
	jsonw_lit(&w, ",\"codeBytes\":");
	jsonw_int(&w, (long long)history_run.code_len);
	if (duration_ms >= 0) {
		jsonw_lit(&w, ",\"durationMs\":");
		jsonw_int(&w, duration_ms);
		jsonw_lit(&w, ",\"exitCode\":");
		if (exit_code)
			jsonw_int(&w, *exit_code);
		else
			jsonw_lit(&w, "null");
	}
	jsonw_lit(&w, "}\n");
	return jsonw_take(&w, len);
}

/* Forgets the run's entry (what history_end kept for the flush). */
static void
history_run_clear(void)
{
	free(history_run.result);
	free(history_run.meta);
	memset(&history_run, 0, sizeof(history_run));
}

/* Whether the entry's program is still there: a pruning that took the entry removed it
 * first. An error other than ENOENT says nothing of a pruning: kept. */
static bool
history_entry_kept(const struct history_config *hc)
{
	char name[64];
	struct stat sb;

	snprintf(name, sizeof(name), "%s.py", history_run.stem);
	return fstatat(hc->dir_fd, name, &sb, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
}

void
history_begin(const struct history_config *hc, const char *port, const char *code, size_t code_len,
              const char *request_id, const char *trace_id)
{
	struct timespec ts;
	struct tm tm;
	unsigned char rnd[4] = {0};
	char name[64], day[20], *meta;
	size_t meta_len;

	history_run_clear();
	if (hc == NULL || hc->dir_fd < 0)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(day, sizeof(day), "%Y%m%dT%H%M%S", &tm);
	if (getrandom(rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
		/* the stem must still be unique among workers: fall back to pid and clock */
		unsigned v = (unsigned)getpid() * 2654435761u ^ (unsigned)ts.tv_nsec;
		memcpy(rnd, &v, sizeof(rnd));
	}
	snprintf(history_run.stem, sizeof(history_run.stem), "%.15s_%02x%02x%02x%02x", day, rnd[0],
	         rnd[1], rnd[2], rnd[3]);
	snprintf(history_run.started, sizeof(history_run.started),
	         "%.4s-%.2s-%.2sT%.2s:%.2s:%.2s.%03dZ", day, day + 4, day + 6, day + 9, day + 11,
	         day + 13, (int)(ts.tv_nsec / 1000000));
	snprintf(history_run.port, sizeof(history_run.port), "%s", port);
	snprintf(history_run.request_id, sizeof(history_run.request_id), "%s",
	         request_id ? request_id : "");
	snprintf(history_run.trace_id, sizeof(history_run.trace_id), "%s",
	         trace_id ? trace_id : "");
	history_run.code_len = code_len;
	history_run.active = true;

	snprintf(name, sizeof(name), "%s.py", history_run.stem);
	if (history_write(hc, name, code, code_len, false) < 0) {
		history_run.active = false; /* logged: no entry for this run */
		return;
	}
	meta = history_meta("pending", -1, NULL, &meta_len);
	if (meta != NULL) {
		snprintf(name, sizeof(name), "%s.meta.json", history_run.stem);
		(void)history_write(hc, name, meta, meta_len, false);
		free(meta);
	}
}

static void
history_str_capture(struct jsonw *w, const struct capture *c)
{
	size_t n;
	char *s = capture_utf8(c, &n);

	if (s == NULL) {
		jsonw_lit(w, "null");
		return;
	}
	jsonw_str(w, s, n);
	free(s);
}

void
history_end(const struct history_config *hc, const struct run_outcome *o, int exit_code,
            bool has_exit_code)
{
	struct jsonw w;
	char path[4200];
	const char *status = o ? run_status_string(o->status) : "error";
	long long duration = o ? o->duration_ms : 0;

	if (hc == NULL || hc->dir_fd < 0 || !history_run.active)
		return;
	jsonw_init(&w);
	snprintf(path, sizeof(path), "%s/%s.result.json", hc->dir, history_run.stem);
	jsonw_lit(&w, "{\"path\":");
	jsonw_cstr(&w, path);
	snprintf(path, sizeof(path), "%s/%s.py", hc->dir, history_run.stem);
	jsonw_lit(&w, ",\"code_path\":");
	jsonw_cstr(&w, path);
	jsonw_lit(&w, ",\"exit_code\":");
	if (has_exit_code)
		jsonw_int(&w, exit_code);
	else
		jsonw_lit(&w, "null");
	jsonw_lit(&w, ",\"stdout\":");
	if (o)
		history_str_capture(&w, &o->out);
	else
		jsonw_lit(&w, "\"\"");
	jsonw_lit(&w, ",\"stderr\":");
	if (o)
		history_str_capture(&w, &o->err);
	else
		jsonw_lit(&w, "\"\"");
	jsonw_lit(&w, ",\"status\":");
	jsonw_cstr(&w, status);
	jsonw_lit(&w, ",\"durationMs\":");
	jsonw_int(&w, duration);
	jsonw_lit(&w, ",\"requestId\":");
	jsonw_cstr(&w, history_run.request_id);
	jsonw_lit(&w, "}\n");
	history_run.result = jsonw_take(&w, &history_run.result_len);
	history_run.meta = history_meta(status, duration, has_exit_code ? &exit_code : NULL,
	                                &history_run.meta_len);
}

struct history_entry {
	char stem[HISTORY_STEM_LEN + 1];
	unsigned long long bytes;
	long long first_ns; /* the oldest modification time of its files: the run's start */
};

/* Oldest first: by the stem's second, then (the hex part is random) by the files' times. */
static int
history_cmp(const void *a, const void *b)
{
	const struct history_entry *x = a, *y = b;
	int c = strncmp(x->stem, y->stem, 15);

	if (c != 0)
		return c;
	return x->first_ns < y->first_ns ? -1 : x->first_ns > y->first_ns;
}

/* One file of the directory. */
struct history_file {
	char stem[HISTORY_STEM_LEN + 1];
	unsigned long long bytes;
	long long mtime_ns;
};

static int
history_cmp_file(const void *a, const void *b)
{
	return strcmp(((const struct history_file *)a)->stem,
	              ((const struct history_file *)b)->stem);
}

/* Removes the entry stem's files, the .py first: history_flush() reads its absence as the
 * entry's removal. A file already gone is not an error. */
static void
history_remove(int dir_fd, const char *stem)
{
	static const char *const ext[] = {".py", ".meta.json", ".result.json"};
	char name[64];

	for (size_t k = 0; k < 3; k++) {
		snprintf(name, sizeof(name), "%s%s", stem, ext[k]);
		if (unlinkat(dir_fd, name, 0) < 0 && errno != ENOENT)
			log_msg(LOG_WARN, "history: removing %s failed: %s", name, strerror(errno));
	}
}

/*
 * Lists the directory's entries (files grouped by stem: sort the files by name, then merge
 * neighbours), and removes the oldest entries past the bounds, and the temporary files of
 * writes whose worker died. O(n log n) in the files.
 */
static void
history_prune(const struct history_config *hc)
{
	struct history_file *f = NULL;
	struct history_entry *e = NULL;
	size_t nf = 0, cap = 0, n = 0, first = 0;
	unsigned long long total = 0;
	struct timespec now;
	int fd = openat(hc->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;

	if (d == NULL) {
		if (fd >= 0)
			close(fd);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	while ((de = readdir(d)) != NULL) {
		struct stat sb;
		size_t len = strlen(de->d_name);
		/* ours: "." + a stem + "." + an extension + ".tmp" */
		if (de->d_name[0] == '.' && len > HISTORY_STEM_LEN + 6 &&
		    de->d_name[1 + HISTORY_STEM_LEN] == '.' &&
		    strcmp(de->d_name + len - 4, ".tmp") == 0) {
			if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) == 0 &&
			    sb.st_mtim.tv_sec < now.tv_sec - HISTORY_TMP_STALE_SEC)
				(void)unlinkat(dirfd(d), de->d_name, 0);
			continue;
		}
		if (len <= HISTORY_STEM_LEN || de->d_name[HISTORY_STEM_LEN] != '.' ||
		    fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (nf == cap) {
			size_t ncap = cap ? 2 * cap : 256;
			struct history_file *m = realloc(f, ncap * sizeof(*f));
			if (m == NULL)
				goto out;
			f = m;
			cap = ncap;
		}
		memcpy(f[nf].stem, de->d_name, HISTORY_STEM_LEN);
		f[nf].stem[HISTORY_STEM_LEN] = '\0';
		f[nf].bytes = (unsigned long long)sb.st_size;
		f[nf].mtime_ns = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
		total += f[nf].bytes;
		nf++;
	}
	if (nf == 0)
		goto out;
	qsort(f, nf, sizeof(*f), history_cmp_file);
	e = malloc(nf * sizeof(*e));
	if (e == NULL)
		goto out;
	for (size_t i = 0; i < nf; i++) {
		if (n == 0 || strcmp(e[n - 1].stem, f[i].stem) != 0) {
			memcpy(e[n].stem, f[i].stem, sizeof(e[n].stem));
			e[n].bytes = 0;
			e[n].first_ns = f[i].mtime_ns;
			n++;
		}
		e[n - 1].bytes += f[i].bytes;
		if (f[i].mtime_ns < e[n - 1].first_ns)
			e[n - 1].first_ns = f[i].mtime_ns;
	}
	if (n <= hc->max_runs && total <= hc->max_bytes)
		goto counted;
	qsort(e, n, sizeof(*e), history_cmp);
	/* past a bound, prune to 90% of both, so the next runs need no scan */
	while (first < n && (n - first > hc->max_runs - hc->max_runs / 10 ||
	                     total > hc->max_bytes - hc->max_bytes / 10)) {
		history_remove(dirfd(d), e[first].stem);
		total -= e[first].bytes;
		first++;
	}
counted:
	if (history_totals != NULL) {
		__atomic_store_n(&history_totals->entries, (unsigned long long)(n - first),
		                 __ATOMIC_RELAXED);
		__atomic_store_n(&history_totals->bytes, total, __ATOMIC_RELAXED);
	}
out:
	closedir(d);
	free(f);
	free(e);
}

/* Writes the entry's end, the result and the final meta; false when a pruning took the entry
 * meanwhile (its unlinks may have run before the renames: what they put back is left). */
static bool
history_write_end(const struct history_config *hc)
{
	char name[64];

	if (history_run.result != NULL) {
		snprintf(name, sizeof(name), "%s.result.json", history_run.stem);
		(void)history_write(hc, name, history_run.result, history_run.result_len, false);
	}
	if (history_run.meta != NULL) {
		snprintf(name, sizeof(name), "%s.meta.json", history_run.stem);
		(void)history_write(hc, name, history_run.meta, history_run.meta_len, true);
	}
	return history_entry_kept(hc); /* if so, a pruning from now on removes all three files */
}

void
history_flush(const struct history_config *hc)
{
	unsigned long long bytes;
	bool scan = history_totals == NULL;

	if (hc == NULL || hc->dir_fd < 0 || !history_run.active)
		return;
	/* another worker's pruning took the entry while it ran (it was among the oldest): its
	 * end alone (or a pending meta written after the pruning's unlinks) would be an entry
	 * without its program, so none is left (checked before the writes too, not to write a
	 * result for nothing); the pruning counted it gone */
	if (!history_entry_kept(hc) || !history_write_end(hc)) {
		history_remove(hc->dir_fd, history_run.stem);
		log_msg(LOG_INFO, "history: entry %s was pruned while it ran; its end is not kept",
		        history_run.stem);
		history_run_clear();
		return;
	}
	bytes = history_run.code_len + history_run.result_len + history_run.meta_len;
	if (!scan) {
		unsigned long long entries =
		    __atomic_add_fetch(&history_totals->entries, 1, __ATOMIC_RELAXED);
		unsigned long long total =
		    __atomic_add_fetch(&history_totals->bytes, bytes, __ATOMIC_RELAXED);
		scan = entries > hc->max_runs || total > hc->max_bytes;
	}
	history_run_clear();
	if (scan)
		history_prune(hc);
}
