/*
 * session.h - the pool's sessions: interpreters that keep their state between executions.
 *
 * A session is a warm box (run.h, run_session_create()) whose init serves executions on a
 * listening socket (sessionproto.h) for as long as it is used, within its bounds. What the
 * workers share of it is a directory of the runtime directory that no run sees, "sessions",
 * holding for each session <id>.rec (its record: owner, bounds, what to remove once it has
 * ended), <id>.sock (its init's socket) and, as any run's, its working directory's mount
 * point and a cgroup. Any worker serves any session: a record's flock says an execution
 * (or a close) is in progress, and an init that no longer listens means the session ended
 * (closed, idle, too old, killed): its record and leftovers are removed by whoever finds it so.
 */
#ifndef CODEBOX_SESSION_H
#define CODEBOX_SESSION_H

#include <stdbool.h>
#include <stdint.h>

#include "run.h"

/* 128 bits from the kernel, as 32 lowercase hex digits */
#define SESSION_ID_LEN 32

#define SESSION_REC_MAGIC 0x63627372u
struct session_rec {
	uint32_t magic;
	char id[SESSION_ID_LEN + 1];
	int64_t created_ms; /* CLOCK_REALTIME */
	uint8_t salt[16];
	uint64_t token_hash[2]; /* the Authorization header's, salted; both 0 without one */
	uint32_t idle_seconds;
	uint32_t life_seconds;
	uint64_t memory_bytes;
	uint64_t disk_bytes;
	uint32_t ready; /* 0 while its box is being built */
	uint32_t uid;   /* its own host uid (and gid) under a root pool; 0: the worker's */
	struct run_session_box sb;
};

/*
 * A root pool's host uids for sessions: first..first+count-1, each given to one session at a
 * time (session_reserve()) and free again once its record is removed, so that the kernel's
 * per-user counters (pipe buffers, queued signals, processes, message queues...) are the
 * session's own. count 0 (a pool that is not root): sessions run as their worker's uid.
 */
struct session_uids {
	uint32_t first;
	uint32_t count;
};

/* the most uids a pool gives its sessions (CODEBOX_MAX_SESSIONS' own bound) */
#define SESSION_UIDS_MAX 1000

/* The pool's bounds on sessions, from nginx's parameters (codebox-limits.conf). */
struct session_limits {
	long max_sessions;          /* per pod; 0: sessions are off */
	long idle_seconds;          /* an idle session ends after this */
	long max_life_seconds;      /* and any after this */
	long max_execution_seconds; /* a background execution's longest run */
};

#define SESSION_DEFAULT_MAX 8
#define SESSION_DEFAULT_IDLE_SECONDS 600
#define SESSION_DEFAULT_LIFE_SECONDS 3600
#define SESSION_DEFAULT_EXECUTION_SECONDS 3600

/*
 * Reads the bounds from get (nginx's parameters): CODEBOX_MAX_SESSIONS,
 * CODEBOX_SESSION_IDLE_SECONDS, CODEBOX_SESSION_MAX_SECONDS, CODEBOX_SESSION_MAX_EXECUTION_SECONDS;
 * an absent one has its default.
 * Returns 0, or -1 with why for a malformed one.
 */
int session_limits_parse(struct session_limits *sl, const char *(*get)(const char *, void *),
                         void *ctx, char *why, size_t why_len);

/* Makes the sessions directory under the runtime directory (once, by the supervisor) and
 * removes what sessions of an earlier pool left. Returns an O_PATH fd of it, or -1. */
int session_dir_setup(int runs_dir_fd, const char *runs_dir, const struct run_config *run);

/* Whether s is an id's form (SESSION_ID_LEN lowercase hex digits). */
bool session_id_valid(const char *s, size_t n);

/* The path of a session's socket, through the sessions directory's fd (short: within
 * sun_path whatever the runtime directory's length). */
void session_sock_path(int sdir, const char *id, char *path, size_t len);

/*
 * Reserves a session: counts the live ones (removing ended ones) and, when fewer than max,
 * writes rec (a new id, salt and token hash of auth, which may be NULL, and a uid of uids that
 * no other record holds) as not ready, and binds its socket (*listen_fd). Returns 0, 1 when
 * the pod has max sessions or no free uid (why says which), -1 on error.
 */
int session_reserve(int sdir, long max, const struct session_uids *uids, const char *auth,
                    struct session_rec *rec, int *listen_fd, char *why, size_t why_len);

/* Writes rec (ready, with its box) over its reservation. Returns 0 or -1. */
int session_commit(int sdir, const struct session_rec *rec);

/*
 * Finds session id for auth: 0 with rec and, when lock, an fd holding its record's flock
 * (*lock_fd; -1 when it is held by another worker: busy); -1 when there is no such session
 * for auth (unknown, another token's, ended: never told apart).
 */
int session_find(int sdir, const char *id, const char *auth, struct session_rec *rec, bool lock,
                 int *lock_fd);

/*
 * A background execution's files, beside the record: <id>.run (its execution id), <id>.stdout
 * and <id>.stderr (its output so far) and, once it has ended, <id>.result (its answer).
 * session_file() names one ("run", "stdout", "stderr", "result").
 */
void session_file(const char *id, const char *what, char *name, size_t len);

/* Whether someone holds session id's lock (an execution, a background one's watcher). */
bool session_locked(int sdir, const char *id);

/* Removes an ended (or never started) session's record, socket, directory and cgroup. */
void session_remove(int sdir, struct session_rec *rec);

/* Ends every session (the pool is stopping): each one's init is told to close, and what is
 * left removed. */
void session_close_all(int sdir);

#endif
