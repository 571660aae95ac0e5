/*
 * slots.h - the execution slots, shared by every worker of the pool.
 */
#ifndef CODEBOX_SLOTS_H
#define CODEBOX_SLOTS_H

#include <stdbool.h>
#include <stddef.h>

struct slots;

/*
 * Creates the table of slots for workers 0..workers-1 with at most capacity runs at once,
 * in an anonymous shared mapping, so that the workers forked afterwards share it. Returns
 * NULL (errno set) on failure. Free with slots_destroy().
 */
struct slots *slots_create(int capacity, int workers);

void slots_destroy(struct slots *s);

/*
 * Takes a slot for worker if fewer than min(limit, capacity) runs are in flight. Returns
 * true when taken. A worker holds at most one slot; taking it twice is a no-op that succeeds.
 */
bool slots_acquire(struct slots *s, int worker, long limit);

/* Gives back worker's slot (no-op if it holds none). */
void slots_release(struct slots *s, int worker);

/*
 * For the supervisor, when it reaps worker: gives back the slot a worker that died mid-run
 * still held. Returns true if there was one.
 */
bool slots_reconcile(struct slots *s, int worker);

/* How many slots are held right now. */
int slots_in_flight(struct slots *s);

/* The capacity fixed at creation. */
int slots_capacity(const struct slots *s);

#endif
