/*
 * slots.h - the execution slots, shared by every worker of the pool.
 */
#ifndef CODEBOX_SLOTS_H
#define CODEBOX_SLOTS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct slots;

/*
 * Creates the table of slots for workers 0..workers-1 with at most capacity runs at once,
 * in an anonymous shared mapping named name in /proc/PID/maps (codebox-slots: the execution
 * slots), so that the workers forked afterwards share it. Returns NULL (errno set) on
 * failure. Free with slots_destroy().
 */
struct slots *slots_create(const char *name, int capacity, int workers);

void slots_destroy(struct slots *s);

/*
 * How long a worker waits for the table's lock before it says the pool cannot admit (/readyz
 * 503, /execute 503). The lock is held for a few loads and one store: a wait this long is a
 * holder that is stuck (stopped, or gone wrong while alive), never contention.
 */
#define SLOTS_LOCK_WAIT_MS 1000

enum slots_admit {
	SLOTS_TAKEN, /* the worker holds a slot */
	SLOTS_FULL,  /* min(limit, capacity) runs are in flight: 429 */
	SLOTS_STUCK, /* the lock was not free within SLOTS_LOCK_WAIT_MS: the pool cannot admit */
};

/* "taken", "full", "stuck". */
const char *slots_admit_string(enum slots_admit a);

/*
 * Takes a slot for worker if fewer than min(limit, capacity) runs are in flight, waiting at
 * most SLOTS_LOCK_WAIT_MS for the lock. A worker holds at most one slot; taking it twice is a
 * no-op that succeeds. An out-of-range worker is refused (SLOTS_FULL).
 */
enum slots_admit slots_acquire(struct slots *s, int worker, long limit);

/*
 * Takes a slot for worker as slots_acquire() does, tagged with two tags (tag[0] nonzero; tag[1]
 * 0: none): refused when other workers and loans (slots_lend_tagged()) hold tag_limit[0] slots
 * of tag[0] (*which 1), or
 * tag_limit[1] of tag[1] (*which 2), or when min(limit, capacity) are held in all (*which 0).
 * A tag_limit of 0 is no such bound. What a table of streams counts per session and per token.
 */
enum slots_admit slots_acquire_tagged(struct slots *s, int worker, long limit,
                                      const unsigned tag[2], const long tag_limit[2], int *which);

/* What slots_lend() returns when it lends nothing. */
#define SLOTS_LOAN_FULL (-1)   /* min(limit, capacity) runs are in flight: 429 */
#define SLOTS_LOAN_STUCK (-2)  /* the lock was not free within SLOTS_LOCK_WAIT_MS */
#define SLOTS_LOAN_TENANT (-3) /* tag holds tag_limit slots already (slots_lend_tagged()) */

/*
 * Lends a slot to pid, a process that is not a worker (a session's background execution), if
 * fewer than min(limit, capacity) runs are in flight, counting the workers' slots and the loans.
 * Returns the loan (>= 0), SLOTS_LOAN_FULL or SLOTS_LOAN_STUCK. A loan whose holder no longer
 * exists is taken back by the next count: a holder killed mid-run leaks nothing.
 */
int slots_lend(struct slots *s, long limit, pid_t pid);

/*
 * slots_lend(), for a holder of tag (a tenant's: nonzero; 0: none): refused with
 * SLOTS_LOAN_TENANT when the workers' slots whose first tag is tag (slots_acquire_tagged()) and
 * the loans of tag already number tag_limit (0: no such bound). What a token's share of the
 * execution slots counts its background executions with.
 */
int slots_lend_tagged(struct slots *s, long limit, pid_t pid, unsigned tag, long tag_limit);

/* Passes loan on to pid (the process that runs what it was lent for). */
void slots_lend_to(struct slots *s, int loan, pid_t pid);

/* Gives back loan if pid still holds it (no-op otherwise, or for a negative loan). */
void slots_return(struct slots *s, int loan, pid_t pid);

/*
 * The admission path without admitting: takes the lock and gives it back at once, waiting at
 * most SLOTS_LOCK_WAIT_MS. Returns 0, or -1 with errno (ETIMEDOUT: a holder is stuck). What
 * /readyz and the pool container's probe ask.
 */
int slots_check(struct slots *s);

/* Gives back worker's slot (no-op if it holds none). */
void slots_release(struct slots *s, int worker);

/*
 * For the supervisor, when it reaps worker: gives back the slot a worker that died mid-run
 * still held. Returns true if there was one.
 */
bool slots_reconcile(struct slots *s, int worker);

/* How many slots are held right now; -1 when the lock was not free within SLOTS_LOCK_WAIT_MS. */
int slots_in_flight(struct slots *s);

/* How many loans are held now (a gone holder's taken back first), or -1. */
int slots_loans(struct slots *s);

/* The capacity fixed at creation. */
int slots_capacity(const struct slots *s);

#endif
