/*
 * session.h - the pool's sessions: interpreters that keep their state between executions.
 *
 * A session is a warm box (sessionrun.h, run_session_create()) whose init serves executions on a
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

#include "core/metrics.h"
#include "run/sessionrun.h"

/*
 * A session's id: 128 bits from the kernel as 32 lowercase hex digits, after "<ordinal>-" on a
 * pod of a fleet (CODEBOX_POD_ORDINAL, 0..999, in decimal without leading zeros): the id
 * names the pod that holds it, and the fleet's router routes by it (docs/OPERATIONS.md, "A
 * fleet"). SESSION_ID_LEN is the longest ("999-" and the digits).
 */
#define SESSION_ID_HEX 32
#define SESSION_ORDINAL_MAX 999
#define SESSION_ID_LEN (4 + SESSION_ID_HEX)

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
	int64_t age_before_ms; /* its age when its box was last renewed (a restart); 0: never */
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
	long max_sessions;             /* per pod; 0: sessions are off */
	long max_per_token;            /* per bearer token (without tokens: none); 0: no such cap */
	long max_executions_per_token; /* a token's share of the execution slots; 0: none */
	long max_streams;              /* event streams of background executions, per pod */
	long idle_seconds;             /* an idle session ends after this */
	long max_life_seconds;         /* and any after this */
	long max_execution_seconds;    /* a background execution's longest run */
	long snapshot_max_bytes;       /* a snapshot's state (snapshot.h), before its envelope */
};

#define SESSION_DEFAULT_MAX 8
#define SESSION_DEFAULT_STREAMS 4
/* event streams of one session's background execution at once */
#define SESSION_STREAMS_PER_SESSION 2
#define SESSION_DEFAULT_IDLE_SECONDS 600
#define SESSION_DEFAULT_LIFE_SECONDS 3600
#define SESSION_DEFAULT_EXECUTION_SECONDS 3600
#define SESSION_DEFAULT_SNAPSHOT_BYTES (64L << 20)
#define SESSION_MAX_SNAPSHOT_BYTES (1L << 30)

/*
 * Reads the bounds from get (nginx's parameters): CODEBOX_MAX_SESSIONS,
 * CODEBOX_MAX_SESSIONS_PER_TOKEN (absent: half of CODEBOX_MAX_SESSIONS, at least 1),
 * CODEBOX_MAX_STREAMS,
 * CODEBOX_SESSION_IDLE_SECONDS, CODEBOX_SESSION_MAX_SECONDS, CODEBOX_SESSION_MAX_EXECUTION_SECONDS,
 * CODEBOX_SNAPSHOT_MAX_BYTES; an absent one has its default.
 * Returns 0, or -1 with why for a malformed one.
 */
int session_limits_parse(struct session_limits *sl, const char *(*get)(const char *, void *),
                         void *ctx, char *why, size_t why_len);

/* Makes the sessions directory under the runtime directory (once, by the supervisor) and
 * removes what sessions of an earlier pool left. Returns an O_PATH fd of it, or -1. */
int session_dir_setup(int runs_dir_fd, const char *runs_dir, const struct run_config *run);

/* Whether s (n bytes) is an id's form: SESSION_ID_HEX lowercase hex digits, or an ordinal
 * (0..SESSION_ORDINAL_MAX, no leading zero), '-' and those digits. */
bool session_id_valid(const char *s, size_t n);

/*
 * The pod's ordinal from value (CODEBOX_POD_ORDINAL; NULL or "": none): 0 with *ordinal (-1
 * for none), or -1 with why for a malformed one.
 */
int session_ordinal_parse(const char *value, int *ordinal, char *why, size_t why_len);

/*
 * A pod that is draining (the pool got SIGUSR1: docs/OPERATIONS.md, "A fleet") makes no new
 * session and serves its sessions on. session_drain_begin() marks it so in the sessions
 * directory (a new pool's session_dir_setup() clears the mark); session_draining() tells.
 */
int session_drain_begin(int sdir);
bool session_draining(int sdir);

/* What the pod's sessions hold now, for GET /metrics: the live ones and the memory their caps
 * reserve of the pool's budget (nothing is removed: a read). */
struct session_count {
	long open;
	unsigned long long memory_bytes;
};
void session_count(int sdir, struct session_count *out);

/*
 * How a log line names a session: "h:" and the first 8 hex digits of the SHA-256 of its id
 * (as `printf %s ID | sha256sum | cut -c1-8` prints them), never the id, which is the one
 * credential a session has where tokens are off. nginx's access log names it the same way
 * (the module's $codebox_log_uri), so that an operator finds a session's lines in both.
 */
#define SESSION_LOG_NAME_LEN 10
void session_log_name(const char *id, char out[SESSION_LOG_NAME_LEN + 1]);

/* The path of a session's socket, through the sessions directory's fd (short: within
 * sun_path whatever the runtime directory's length). */
void session_sock_path(int sdir, const char *id, char *path, size_t len);

/* What a new session asks of the pod's bounds (session_reserve()). */
struct session_ask {
	long max;                        /* sessions per pod */
	long per_token;                  /* sessions per token (auth); 0: no such cap */
	const char *auth;                /* the token's id, or NULL (no token: no per-token cap) */
	const struct session_uids *uids; /* the pool's uids for sessions (count 0: none) */
	unsigned long long memory_bytes; /* the session's memory cap */
	unsigned long long budget_bytes; /* the pool's memory budget; 0: none */
	int ordinal;                     /* the pod's (CODEBOX_POD_ORDINAL), or -1: none */
};

/* Why session_reserve() refused (its positive returns). */
enum session_full {
	SESSION_FULL = 1,        /* the pod holds max sessions */
	SESSION_FULL_TENANT = 2, /* the token holds per_token sessions */
	SESSION_FULL_MEMORY =
	    3, /* the live sessions' memory caps and this one's exceed the budget */
};

/*
 * Reserves a session: counts the live ones (removing ended ones) and, when ask fits (fewer
 * than ask->max in all, fewer than ask->per_token of ask->auth's, the memory caps of all of
 * them with this one's within ask->budget_bytes, and a uid of ask->uids that no other record
 * holds), writes rec (a new id, salt and token hash of auth, its memory cap: held of the
 * budget from now on, its uid) as not ready, and binds its socket (*listen_fd). Returns 0, a
 * session_full when it does not fit (SESSION_FULL with why set when no uid is free), -1 on
 * error.
 */
int session_reserve(int sdir, const struct session_ask *ask, struct session_rec *rec,
                    int *listen_fd, char *why, size_t why_len);

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

/* The id of the session whose cgroup's memory directory is memory_dir: 0 with id (NUL-ended),
 * or -1 when no record has it. */
int session_of_group(int sdir, const char *memory_dir, char id[SESSION_ID_LEN + 1]);

/* Whether someone holds session id's lock (an execution, a background one's watcher). */
bool session_locked(int sdir, const char *id);

/*
 * Up to max of auth's sessions (a token's own; every one where tokens are off), ready and
 * alive, into recs (ended ones are removed as session_find() removes them). Returns how many.
 */
size_t session_list(int sdir, const char *auth, struct session_rec *recs, size_t max);

/*
 * A restart's new box (sessionapi.c): binds a listening socket for session id beside its own, at
 * <id>.next (path, as session_sock_path() names it, into path), for the new box's init.
 * Returns its fd, or -1 (errno).
 */
int session_rebind(int sdir, const char *id, char *path, size_t len);

/* Puts the new box in its place: <id>.next becomes <id>.sock (connections go to the new init
 * from now on) and rec (with the new box) is written, ready. Returns 0, or -1 (errno). */
int session_switch(int sdir, const struct session_rec *rec);

/* Removes an ended (or never started) session's record, socket, directory and cgroup; why is
 * how it ended, counted once (by whoever removes the record; METRICS_SESSION_IDLE past its
 * lifetime counts as METRICS_SESSION_LIFETIME). */
void session_remove(int sdir, struct session_rec *rec, enum metrics_session_end why);

/* Ends every session (the pool is stopping, or it died): each one's init is told to close,
 * and what is left removed, under the sessions' lock; nothing when another process holds that
 * lock beyond a bounded wait (it is closing them). */
void session_close_all(int sdir);

#endif
