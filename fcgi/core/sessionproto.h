/*
 * sessionproto.h - what a session's init, its program and the workers say to each other.
 *
 * A session (session.h) is a warm box whose init serves executions one after another on a
 * listening SOCK_SEQPACKET socket the creating worker made (in the pool's sessions
 * directory, which no run sees). Any worker connects to it and sends one fixed-size message,
 * with, for an execution, the init's ends of four fresh pipes: stdout, stderr, control (the
 * request, as for any run, then 'S' to stop) and report. Init answers with its own pidfd,
 * through which the worker watches it and can kill the whole session. While a cell runs, init
 * still answers PING (busy), INTERRUPT, CLOSE and WORKDIR on the socket; another execution is
 * refused. WORKDIR answers an O_PATH fd of the session's working directory, which lives in a
 * tmpfs mounted only in the box's mount namespace: the worker reads and writes the session's
 * files through it (sessionfiles.c), beneath it, never by a path.
 *
 * Init and the program talk over a socket pair made before the program's fork: init sends a
 * cell (the value's bound, with stdin and the two output pipes as fds), and the program, once
 * the cell's code has run, sends back its exit code and its final expression's repr. What the
 * program sends is untrusted: init reads one bounded message, and the worker checks the report
 * like any other.
 *
 * A snapshot (SESSION_OP_SNAPSHOT) is a cell of another kind: init asks the program to write
 * its state (dill, inside the sandbox) into a memfd the worker made, under the cell's deadline;
 * the value is a JSON summary of what it kept and skipped. The worker reads at most its bound
 * plus one byte of the memfd, whatever the program claims. A restore (SESSION_OP_RESTORE)
 * hands the program a memfd the worker filled with a checked snapshot and sealed.
 */
#ifndef CODEBOX_SESSIONPROTO_H
#define CODEBOX_SESSIONPROTO_H

#include <stdint.h>

#define SESSION_MSG_MAGIC 0x63627331u

enum session_op {
	SESSION_OP_PING = 1,  /* is it serving: the answer says its age and use */
	SESSION_OP_EXECUTE,   /* one execution; fds: stdout, stderr, control, report */
	SESSION_OP_CLOSE,     /* kill everything of it and end (during a cell too) */
	SESSION_OP_INTERRUPT, /* SIGINT into the program (KeyboardInterrupt) if a cell runs */
	SESSION_OP_WORKDIR,   /* an O_PATH fd of its working directory (the answer's one fd), for
	                       * the worker's file operations (during a cell too); untrusted */
	SESSION_OP_SNAPSHOT,  /* the program serializes its state into a memfd: fds as EXECUTE's,
	                       * then the memfd (SESSION_FD_BLOB) */
	SESSION_OP_RESTORE,   /* the program loads a snapshot from a sealed memfd: the same fds */
};

/* the execution's fds, in this order */
enum { SESSION_FD_STDOUT, SESSION_FD_STDERR, SESSION_FD_CONTROL, SESSION_FD_REPORT, SESSION_FDS };
/* a snapshot's or a restore's memfd, after the execution's fds */
#define SESSION_FD_BLOB SESSION_FDS

struct session_msg {
	uint32_t magic;
	uint32_t op;
	uint32_t blob_max; /* SESSION_OP_SNAPSHOT: the snapshot's bound, in bytes; else 0 */
	uint32_t reserved;
};

/* init's answer; with SESSION_OP_EXECUTE, its pidfd as the one fd */
struct session_answer {
	uint32_t magic;
	int32_t ok;
	uint64_t executions;   /* cells run so far */
	int64_t idle_ms;       /* since the last execution ended (or the start) */
	int64_t age_ms;        /* since the session began */
	int64_t idle_limit_ms; /* its bounds */
	int64_t life_limit_ms;
	uint32_t busy;        /* a cell is running (init answers PING, INTERRUPT and CLOSE then) */
	uint32_t interrupted; /* INTERRUPT reached a running cell */
};

/* what init asks of the program */
enum session_cell_kind {
	SESSION_CELL_CODE = 1,     /* run main.py; fds: stdin, stdout, stderr */
	SESSION_CELL_SNAPSHOT = 2, /* write the state into fd 0 (a memfd), at most blob_max
	                            * bytes; fds: memfd, stdout, stderr */
	SESSION_CELL_RESTORE = 3,  /* load the state from fd 0 (a sealed memfd); the same fds */
};

/* init to program: one request of a kind */
struct session_cell {
	uint32_t magic;
	uint32_t value_max; /* the repr's bound, in bytes */
	uint32_t kind;      /* enum session_cell_kind */
	uint32_t blob_max;  /* a snapshot's bound, in bytes (SESSION_CELL_SNAPSHOT; else 0) */
};

/* program to init, followed by value_len bytes of the value's repr (UTF-8); with it, as its
 * one fd, a memfd holding the cell as JSON (fcgi/box/cell.py: executionCount, outputs, error) */
struct session_cell_done {
	int32_t exit_code;
	uint32_t has_value;
	uint32_t value_len;
};

/* the largest cell JSON init passes on (a larger one is dropped: the worker says so) */
#define SESSION_CELL_MAX (8u * 1024 * 1024 + 64 * 1024)

/* the largest value a cell reports (its repr is cut there, on a character's boundary) */
#define SESSION_VALUE_MAX (64u * 1024)

/* how long init waits for a cell to end after its interrupt (the deadline's SIGINT), before it
 * kills the session */
#define SESSION_INTERRUPT_MS 1500

#endif
