/*
 * session.c - the sessions' records in the pool's sessions directory (session.h).
 */
#include "run/session.h"

#include "core/metrics.h"

#include "core/log.h"
#include "core/sessionproto.h"
#include "core/util.h"
#include "run/workdir.h"

#include <openssl/sha.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* How long a reservation may stay not ready before a sweep takes it for dead (its worker
 * died while it built the box). */
#define SESSION_RESERVE_MS (RUN_SESSION_TIER_WAIT_MS + RUN_SESSION_READY_MS + 20000)

static long
parse_bound(const char *v, long max, bool *ok)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	*ok = errno == 0 && end != v && *end == '\0' && n >= 0 && n <= max;
	return n;
}

int
session_limits_parse(struct session_limits *sl, const char *(*get)(const char *, void *), void *ctx,
                     char *why, size_t why_len)
{
	static const struct {
		const char *name;
		size_t off;
		long def, min, max;
	} bounds[] = {
	    {"CODEBOX_MAX_SESSIONS", offsetof(struct session_limits, max_sessions),
	     SESSION_DEFAULT_MAX, 0, 1000},
	    {"CODEBOX_SESSION_IDLE_SECONDS", offsetof(struct session_limits, idle_seconds),
	     SESSION_DEFAULT_IDLE_SECONDS, 1, 86400},
	    {"CODEBOX_SESSION_MAX_SECONDS", offsetof(struct session_limits, max_life_seconds),
	     SESSION_DEFAULT_LIFE_SECONDS, 1, 7 * 86400},
	    {"CODEBOX_SESSION_MAX_EXECUTION_SECONDS",
	     offsetof(struct session_limits, max_execution_seconds),
	     SESSION_DEFAULT_EXECUTION_SECONDS, 1, 86400},
	    {"CODEBOX_MAX_STREAMS", offsetof(struct session_limits, max_streams),
	     SESSION_DEFAULT_STREAMS, 0, 1000},
	    {"CODEBOX_SNAPSHOT_MAX_BYTES", offsetof(struct session_limits, snapshot_max_bytes),
	     SESSION_DEFAULT_SNAPSHOT_BYTES, 4096, SESSION_MAX_SNAPSHOT_BYTES},
	    {"CODEBOX_MAX_EXECUTIONS_PER_TOKEN",
	     offsetof(struct session_limits, max_executions_per_token), 0, 0, 1024},
	};

	for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
		const char *v = get(bounds[i].name, ctx);
		long *field = (long *)((char *)sl + bounds[i].off);
		bool ok = true;

		*field = v == NULL ? bounds[i].def : parse_bound(v, bounds[i].max, &ok);
		if (!ok || *field < bounds[i].min) {
			snprintf(why, why_len, "%s must be an integer from %ld to %ld",
			         bounds[i].name, bounds[i].min, bounds[i].max);
			return -1;
		}
	}
	/* one token's share: by default half of the pod's (at least one) */
	{
		const char *v = get("CODEBOX_MAX_SESSIONS_PER_TOKEN", ctx);
		bool ok = true;

		sl->max_per_token =
		    v == NULL ? (sl->max_sessions + 1) / 2 : parse_bound(v, 1000, &ok);
		if (!ok) {
			snprintf(
			    why, why_len,
			    "CODEBOX_MAX_SESSIONS_PER_TOKEN must be an integer from 0 to 1000");
			return -1;
		}
	}
	return 0;
}

static bool
hex_digits(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* The length of the canonical ordinal s starts with (1 to 3 decimal digits, no leading zero,
 * at most SESSION_ORDINAL_MAX), or 0 when it starts with none. */
static size_t
ordinal_len(const char *s, size_t n)
{
	size_t k = 0;

	while (k < n && k < 4 && s[k] >= '0' && s[k] <= '9')
		k++;
	if (k == 0 || k > 3 || (k > 1 && s[0] == '0'))
		return 0;
	return k;
}

bool
session_id_valid(const char *s, size_t n)
{
	size_t k;

	if (n == SESSION_ID_HEX)
		return hex_digits(s, n);
	k = ordinal_len(s, n);
	return k > 0 && n == k + 1 + SESSION_ID_HEX && s[k] == '-' &&
	       hex_digits(s + k + 1, SESSION_ID_HEX);
}

int
session_ordinal_parse(const char *value, int *ordinal, char *why, size_t why_len)
{
	size_t n = value != NULL ? strlen(value) : 0;
	size_t k = ordinal_len(value != NULL ? value : "", n);

	*ordinal = -1;
	if (n == 0)
		return 0;
	if (k == 0 || k != n) {
		snprintf(why, why_len,
		         "CODEBOX_POD_ORDINAL must be an integer from 0 to %d without leading "
		         "zeros, not '%.16s'",
		         SESSION_ORDINAL_MAX, value);
		return -1;
	}
	*ordinal = atoi(value);
	return 0;
}

int
session_drain_begin(int sdir)
{
	int fd = openat(sdir, ".draining", O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);

	if (fd < 0) {
		log_msg(LOG_ERROR, "marking the sessions as draining failed: %s", strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

bool
session_draining(int sdir)
{
	return sdir >= 0 && faccessat(sdir, ".draining", F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

void
session_sock_path(int sdir, const char *id, char *path, size_t len)
{
	snprintf(path, len, "/proc/self/fd/%d/%s.sock", sdir, id);
}

static void
rec_name(const char *id, const char *ext, char *name, size_t len)
{
	snprintf(name, len, "%s.%s", id, ext);
}

/* FNV-1a over the salt and auth, twice, each from its own basis: 126 bits (each half's low bit
 * is set, so that no hash is zero). auth is CODEBOX_TOKEN_ID, the SHA-1 of the bearer token
 * nginx's module already checked (the pool never sees the token); this only binds a session
 * to it. */
static void
token_hash(const uint8_t salt[16], const char *auth, uint64_t out[2])
{
	static const uint64_t basis[2] = {0xcbf29ce484222325ULL, 0x84222325cbf29ce4ULL};

	out[0] = out[1] = 0;
	if (auth == NULL || *auth == '\0')
		return;
	for (int k = 0; k < 2; k++) {
		uint64_t h = basis[k];
		for (int i = 0; i < 16; i++)
			h = (h ^ salt[(i + k * 7) % 16]) * 0x100000001b3ULL;
		for (const char *p = auth; *p; p++)
			h = (h ^ (uint8_t)*p) * 0x100000001b3ULL;
		out[k] = h | 1; /* never 0: 0 means no token */
	}
}

void
session_log_name(const char *id, char out[SESSION_LOG_NAME_LEN + 1])
{
	unsigned char md[SHA256_DIGEST_LENGTH];

	SHA256((const unsigned char *)id, strlen(id), md);
	snprintf(out, SESSION_LOG_NAME_LEN + 1, "h:%02x%02x%02x%02x", md[0], md[1], md[2], md[3]);
}

static int64_t
realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The record of session id, opened for its lock (a flock of this fd's own), or -1. */
static int
rec_open(int sdir, const char *id)
{
	char name[64];

	rec_name(id, "rec", name, sizeof(name));
	return openat(sdir, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
}

static int
rec_read(int sdir, const char *id, struct session_rec *rec, int *fd_out)
{
	int fd = rec_open(sdir, id);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = pread(fd, rec, sizeof(*rec), 0);
	if (n != (ssize_t)sizeof(*rec) || rec->magic != SESSION_REC_MAGIC ||
	    memchr(rec->id, '\0', sizeof(rec->id)) == NULL || strcmp(rec->id, id) != 0) {
		close(fd);
		errno = ENOENT;
		return -1;
	}
	if (fd_out != NULL)
		*fd_out = fd;
	else
		close(fd);
	return 0;
}

static int
rec_write(int sdir, const struct session_rec *rec)
{
	char name[64], tmp[80];
	int fd, rc;

	rec_name(rec->id, "rec", name, sizeof(name));
	snprintf(tmp, sizeof(tmp), ".%s.tmp", rec->id);
	fd = openat(sdir, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	rc = util_write_all(fd, rec, sizeof(*rec));
	if (close(fd) < 0 || rc < 0 || renameat(sdir, tmp, sdir, name) < 0) {
		(void)unlinkat(sdir, tmp, 0);
		return -1;
	}
	return 0;
}

void
session_file(const char *id, const char *what, char *name, size_t len)
{
	rec_name(id, what, name, len);
}

bool
session_locked(int sdir, const char *id)
{
	int fd = rec_open(sdir, id);
	bool held;

	if (fd < 0)
		return false;
	held = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd); /* a lock taken here goes with it */
	return held;
}

void
session_remove(int sdir, struct session_rec *rec, enum metrics_session_end why)
{
	static const char *const files[] = {"run",    "stdout",     "stderr",
	                                    "result", "result.tmp", "cells"};
	char name[64];

	run_session_remove(sdir, &rec->sb);
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		rec_name(rec->id, files[i], name, sizeof(name));
		(void)unlinkat(sdir, name, 0);
	}
	rec_name(rec->id, "sock", name, sizeof(name));
	(void)unlinkat(sdir, name, 0);
	rec_name(rec->id, "next", name, sizeof(name));
	(void)unlinkat(sdir, name, 0);
	rec_name(rec->id, "rec", name, sizeof(name));
	/* counted by whoever removes its record: once */
	if (unlinkat(sdir, name, 0) == 0) {
		if (why == METRICS_SESSION_IDLE &&
		    realtime_ms() >= rec->created_ms + (int64_t)rec->life_seconds * 1000)
			why = METRICS_SESSION_LIFETIME;
		metrics_session_ended(why);
	}
}

/* Whether the session's init still listens (or, not ready, is young enough to be built). */
static bool
rec_alive(int sdir, const struct session_rec *rec)
{
	char path[128];
	int fd;

	if (!rec->ready)
		return realtime_ms() - rec->created_ms < SESSION_RESERVE_MS;
	session_sock_path(sdir, rec->id, path, sizeof(path));
	fd = run_session_connect(path);
	if (fd >= 0) {
		close(fd);
		return true;
	}
	/* only a socket nobody listens on (or none) is an ended session */
	return !(errno == ECONNREFUSED || errno == ENOENT);
}

/* Calls fn on every record; fn's return: whether to go on. */
static void
rec_each(int sdir, bool (*fn)(int sdir, struct session_rec *rec, void *ctx), void *ctx)
{
	int dfd = openat(sdir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *e;

	if (d == NULL) {
		if (dfd >= 0)
			close(dfd);
		return;
	}
	while ((e = readdir(d)) != NULL) {
		size_t n = strlen(e->d_name);
		char id[SESSION_ID_LEN + 1];
		struct session_rec rec;

		if (n < 4 || n - 4 > SESSION_ID_LEN || strcmp(e->d_name + n - 4, ".rec") != 0 ||
		    !session_id_valid(e->d_name, n - 4))
			continue;
		memcpy(id, e->d_name, n - 4);
		id[n - 4] = '\0';
		if (rec_read(sdir, id, &rec, NULL) < 0)
			continue;
		if (!fn(sdir, &rec, ctx))
			break;
	}
	closedir(d);
}

struct group_owner {
	const char *memory_dir;
	char *id;
	bool found;
};

static bool
owns_group(int sdir, struct session_rec *rec, void *ctx)
{
	struct group_owner *g = ctx;

	(void)sdir;
	if (strcmp(rec->sb.cg.memory, g->memory_dir) != 0)
		return true;
	memcpy(g->id, rec->id, SESSION_ID_LEN + 1);
	g->found = true;
	return false;
}

int
session_of_group(int sdir, const char *memory_dir, char id[SESSION_ID_LEN + 1])
{
	struct group_owner g = {memory_dir, id, false};

	rec_each(sdir, owns_group, &g);
	return g.found ? 0 : -1;
}

static bool
count_open(int sdir, struct session_rec *rec, void *ctx)
{
	struct session_count *c = ctx;

	if (rec_alive(sdir, rec)) {
		c->open++;
		c->memory_bytes += rec->memory_bytes;
	}
	return true;
}

void
session_count(int sdir, struct session_count *out)
{
	memset(out, 0, sizeof(*out));
	if (sdir >= 0)
		rec_each(sdir, count_open, out);
}

/* What count_live() finds for session_reserve(): the live sessions (all of them, the asking
 * token's, the memory their caps hold of the pool's budget), and the uids of every record
 * left. */
struct session_census {
	const char *auth;
	long live;
	long token;
	unsigned long long memory_bytes;
	const struct session_uids *uids;
	bool used[SESSION_UIDS_MAX];
};

static bool
count_live(int sdir, struct session_rec *rec, void *ctx)
{
	struct session_census *c = ctx;
	uint64_t h[2];
	int fd;

	if (rec_alive(sdir, rec)) {
		c->live++;
		c->memory_bytes += rec->memory_bytes;
		token_hash(rec->salt, c->auth, h);
		if (h[0] != 0 && h[0] == rec->token_hash[0] && h[1] == rec->token_hash[1])
			c->token++;
	} else {
		/* ended: removed under its lock (an execution still reporting holds it, and
		 * its worker removes it, or the next look does) */
		fd = rec_open(sdir, rec->id);
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) {
			char name[SESSION_LOG_NAME_LEN + 1];
			session_log_name(rec->id, name);
			log_msg(LOG_INFO, "session %s ended; removing what it left", name);
			/* its uid is free again: its cgroup went, every process in it killed */
			session_remove(sdir, rec, METRICS_SESSION_IDLE);
			close(fd);
			return true;
		}
		if (fd >= 0)
			close(fd);
	}
	/* a record's uid is its session's until the record goes, live or not */
	if (rec->uid >= c->uids->first && rec->uid - c->uids->first < c->uids->count)
		c->used[rec->uid - c->uids->first] = true;
	return true;
}

/*
 * A uid of uids that no record holds, the first free one after the last one given (kept in
 * the directory's lock file, lock_fd), so that a uid just freed is the last to be given
 * again. Returns it, or 0 when every one is held.
 */
static uint32_t
uid_pick(int lock_fd, const struct session_census *c)
{
	uint32_t last = 0, n = c->uids->count;

	if (pread(lock_fd, &last, sizeof(last), 0) != (ssize_t)sizeof(last))
		last = n - 1; /* none given yet: the first comes first */
	for (uint32_t i = 1; i <= n; i++) {
		uint32_t k = (last + i) % n;
		if (!c->used[k]) {
			if (pwrite(lock_fd, &k, sizeof(k), 0) != (ssize_t)sizeof(k))
				log_msg(LOG_WARN, "the sessions' lock file: %s", strerror(errno));
			return c->uids->first + k;
		}
	}
	return 0;
}

/* The sessions directory's lock, for counting and reserving: bounded, never a wait without
 * end. Returns its fd, or -1. */
static int
dir_lock(int sdir)
{
	int fd = openat(sdir, ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	long long deadline = util_now_ms() + 2000;

	if (fd < 0)
		return -1;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		struct timespec ms = {0, 5 * 1000 * 1000};
		if (errno != EWOULDBLOCK || util_now_ms() >= deadline) {
			close(fd);
			return -1;
		}
		nanosleep(&ms, NULL);
	}
	return fd;
}

/* A listening socket bound at path (in the sessions directory sdir), the pool's alone. Returns
 * its fd, or -1 (errno). */
static int
sock_listen(int sdir, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd, e;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	/* the pool's alone, whatever the umask (a connect needs write permission) */
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    fchmodat(sdir, strrchr(path, '/') + 1, 0600, 0) < 0 || listen(fd, 16) < 0) {
		e = errno;
		if (fd >= 0)
			close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int
session_reserve(int sdir, const struct session_ask *ask, struct session_rec *rec, int *listen_fd,
                char *why, size_t why_len)
{
	static struct session_census census;
	uint8_t raw[16];
	uint32_t uid = 0;
	int lock, fd = -1;
	char path[128];

	*listen_fd = -1;
	lock = dir_lock(sdir);
	if (lock < 0) {
		snprintf(why, why_len, "the sessions' lock: %s", strerror(errno));
		return -1;
	}
	memset(&census, 0, sizeof(census));
	census.auth = ask->auth;
	census.uids = ask->uids;
	rec_each(sdir, count_live, &census);
	/* the token's own share first: closing one of its sessions is what it can do */
	if (ask->per_token > 0 && census.token >= ask->per_token) {
		close(lock);
		return SESSION_FULL_TENANT;
	}
	if (census.live >= ask->max) {
		snprintf(why, why_len, "the pod holds its %ld sessions", ask->max);
		close(lock);
		return SESSION_FULL;
	}
	if (ask->budget_bytes > 0 && census.memory_bytes + ask->memory_bytes > ask->budget_bytes) {
		close(lock);
		return SESSION_FULL_MEMORY;
	}
	if (ask->uids->count > 0 && (uid = uid_pick(lock, &census)) == 0) {
		snprintf(why, why_len,
		         "all %u of the pool's session uids are held (CODEBOX_MAX_SESSIONS is %ld: "
		         "start the pool with --max-sessions at least that)",
		         (unsigned)ask->uids->count, ask->max);
		close(lock);
		return SESSION_FULL;
	}
	memset(rec, 0, sizeof(*rec));
	rec->uid = uid;
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw) ||
	    getrandom(rec->salt, sizeof(rec->salt), 0) != (ssize_t)sizeof(rec->salt)) {
		snprintf(why, why_len, "getrandom(): %s", strerror(errno));
		close(lock);
		return -1;
	}
	rec->magic = SESSION_REC_MAGIC;
	{
		/* on a pod of a fleet, the id names it first (the router routes by it) */
		int at =
		    ask->ordinal >= 0 ? snprintf(rec->id, sizeof(rec->id), "%d-", ask->ordinal) : 0;
		for (int i = 0; i < 16; i++)
			snprintf(rec->id + at + 2 * i, 3, "%02x", raw[i]);
	}
	rec->created_ms = realtime_ms();
	rec->memory_bytes = ask->memory_bytes; /* held of the budget from now: counted as live */
	token_hash(rec->salt, ask->auth, rec->token_hash);
	session_sock_path(sdir, rec->id, path, sizeof(path));
	fd = sock_listen(sdir, path);
	if (fd < 0 || rec_write(sdir, rec) < 0) {
		snprintf(why, why_len, "the session's socket or record: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		session_remove(sdir, rec, METRICS_SESSION_NOT_MADE);
		close(lock);
		return -1;
	}
	close(lock);
	*listen_fd = fd;
	return 0;
}

int
session_commit(int sdir, const struct session_rec *rec)
{
	struct session_rec r = *rec;

	r.ready = 1;
	return rec_write(sdir, &r);
}

int
session_find(int sdir, const char *id, const char *auth, struct session_rec *rec, bool lock,
             int *lock_fd)
{
	uint64_t h[2];
	int fd;

	if (lock_fd != NULL)
		*lock_fd = -1;
	if (!session_id_valid(id, strlen(id)) || rec_read(sdir, id, rec, &fd) < 0)
		return -1;
	token_hash(rec->salt, auth, h);
	/* another token's session is as unknown as one that never was */
	if (h[0] != rec->token_hash[0] || h[1] != rec->token_hash[1] || !rec->ready) {
		close(fd);
		return -1;
	}
	if (!rec_alive(sdir, rec)) {
		/* ended: whoever finds it so removes it (under its lock: not twice) */
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			session_remove(sdir, rec, METRICS_SESSION_IDLE);
		close(fd);
		return -1;
	}
	if (lock && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		return 0; /* busy: *lock_fd stays -1 */
	}
	if (lock)
		*lock_fd = fd;
	else
		close(fd);
	return 0;
}

struct session_listing {
	const char *auth;
	struct session_rec *recs;
	size_t n, max;
};

static bool
list_one(int sdir, struct session_rec *rec, void *ctx)
{
	struct session_listing *l = ctx;
	uint64_t h[2];
	int fd;

	token_hash(rec->salt, l->auth, h);
	if (h[0] != rec->token_hash[0] || h[1] != rec->token_hash[1] || !rec->ready)
		return true;
	if (!rec_alive(sdir, rec)) {
		/* ended: removed as session_find() removes it */
		fd = rec_open(sdir, rec->id);
		if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0)
			session_remove(sdir, rec, METRICS_SESSION_IDLE);
		if (fd >= 0)
			close(fd);
		return true;
	}
	l->recs[l->n++] = *rec;
	return l->n < l->max;
}

size_t
session_list(int sdir, const char *auth, struct session_rec *recs, size_t max)
{
	struct session_listing l = {auth, recs, 0, max};

	if (max > 0)
		rec_each(sdir, list_one, &l);
	return l.n;
}

int
session_rebind(int sdir, const char *id, char *path, size_t len)
{
	char name[64];

	rec_name(id, "next", name, sizeof(name));
	(void)unlinkat(sdir, name, 0); /* an earlier restart's, which failed */
	snprintf(path, len, "/proc/self/fd/%d/%s", sdir, name);
	return sock_listen(sdir, path);
}

int
session_switch(int sdir, const struct session_rec *rec)
{
	char next[64], sock[64];

	rec_name(rec->id, "next", next, sizeof(next));
	rec_name(rec->id, "sock", sock, sizeof(sock));
	if (renameat(sdir, next, sdir, sock) < 0)
		return -1;
	return session_commit(sdir, rec);
}

static bool
close_one(int sdir, struct session_rec *rec, void *ctx)
{
	char path[128];
	struct session_answer a;

	(void)ctx;
	if (rec->ready) {
		session_sock_path(sdir, rec->id, path, sizeof(path));
		(void)run_session_ask(path, SESSION_OP_CLOSE, &a);
	}
	session_remove(sdir, rec,
	               rec->ready ? METRICS_SESSION_POOL_STOP : METRICS_SESSION_NOT_MADE);
	return true;
}

void
session_close_all(int sdir)
{
	int lock;

	if (sdir < 0)
		return;
	/* one closer at a time: the workers of a pool that died each call this (worker.c) */
	lock = dir_lock(sdir);
	if (lock < 0 && errno == EWOULDBLOCK)
		return; /* another closes them */
	rec_each(sdir, close_one, NULL);
	if (lock >= 0)
		close(lock);
}

int
session_dir_setup(int runs_dir_fd, const char *runs_dir, const struct run_config *run)
{
	int fd;

	(void)run;
	if (mkdirat(runs_dir_fd, "sessions", 0711) < 0 && errno != EEXIST) {
		log_msg(LOG_ERROR, "mkdir(%s/sessions) failed: %s", runs_dir, strerror(errno));
		return -1;
	}
	if (fchmodat(runs_dir_fd, "sessions", 0711, 0) < 0)
		log_msg(LOG_WARN, "chmod(%s/sessions) failed: %s", runs_dir, strerror(errno));
	fd = openat(runs_dir_fd, "sessions", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		log_msg(LOG_ERROR, "open(%s/sessions) failed: %s", runs_dir, strerror(errno));
		return -1;
	}
	/* an earlier pool's: their inits are gone with it, or are told to end now; and the
	 * directories of sessions whose record never was written (a worker died building one) */
	session_close_all(fd);
	/* a new pool takes sessions again, whatever its predecessor was told */
	if (unlinkat(fd, ".draining", 0) < 0 && errno != ENOENT)
		log_msg(LOG_WARN, "removing %s/sessions/.draining failed: %s", runs_dir,
		        strerror(errno));
	{
		int dfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
		struct dirent *e;
		while (d != NULL && (e = readdir(d)) != NULL)
			if (strncmp(e->d_name, "run-", 4) == 0 &&
			    workdir_remove_tree(fd, e->d_name) < 0)
				log_msg(LOG_WARN, "removing %s/sessions/%s failed: %s", runs_dir,
				        e->d_name, strerror(errno));
		if (d != NULL)
			closedir(d);
		else if (dfd >= 0)
			close(dfd);
	}
	return fd;
}
