/*
 * slots.c - the execution slots: the pool's authority on how many runs are in flight.
 *
 * nginx's limit_conn counts connections before their body is read and loses counts when an
 * nginx worker dies; the pool knows exactly which worker runs a program. The table lives in
 * a MAP_SHARED anonymous mapping that the supervisor creates before forking, so every worker
 * (and every respawned one) sees the same page. One flag per worker says whether it holds a
 * slot; the number in flight is the sum of the flags, so there is no separate counter that
 * could drift.
 *
 * A process-shared robust mutex makes "count, compare, take" one step: two workers racing for
 * the last slot cannot both win, and neither loses to the other's attempt. A worker that dies
 * while holding the mutex leaves it EOWNERDEAD; the next locker marks it consistent, which is
 * safe because every update under the lock is a single word. A worker that dies holding a
 * slot (SIGKILL mid-run) is reconciled by the supervisor when it reaps the worker, before the
 * worker's replacement exists.
 */
#include "slots.h"

#include "util.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>

struct slots {
	pthread_mutex_t lock;
	int capacity;
	int workers;
	size_t map_bytes;
	atomic_int held[]; /* one per worker: 1 while it holds a slot */
};

struct slots *
slots_create(int capacity, int workers)
{
	pthread_mutexattr_t attr;
	size_t bytes;
	struct slots *s;

	if (capacity < 1 || workers < 1) {
		errno = EINVAL;
		return NULL;
	}
	bytes = sizeof(*s) + (size_t)workers * sizeof(atomic_int);
	s = util_map_shared(bytes);
	if (s == NULL)
		return NULL;
	s->capacity = capacity;
	s->workers = workers;
	s->map_bytes = bytes;
	for (int i = 0; i < workers; i++)
		atomic_init(&s->held[i], 0);
	if (pthread_mutexattr_init(&attr) != 0 ||
	    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED) != 0 ||
	    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST) != 0 ||
	    pthread_mutex_init(&s->lock, &attr) != 0) {
		util_unmap_shared_one(s);
		errno = EINVAL;
		return NULL;
	}
	pthread_mutexattr_destroy(&attr);
	return s;
}

void
slots_destroy(struct slots *s)
{
	if (s == NULL)
		return;
	pthread_mutex_destroy(&s->lock);
	util_unmap_shared_one(s);
}

static void
slots_lock(struct slots *s)
{
	/* a holder that died held it for one single-word update: the table is consistent */
	if (pthread_mutex_lock(&s->lock) == EOWNERDEAD)
		pthread_mutex_consistent(&s->lock);
}

static int
slots_count_locked(struct slots *s)
{
	int n = 0;

	for (int i = 0; i < s->workers; i++)
		n += atomic_load(&s->held[i]);
	return n;
}

bool
slots_acquire(struct slots *s, int worker, long limit)
{
	bool taken = false;

	if (worker < 0 || worker >= s->workers)
		return false;
	if (limit > s->capacity)
		limit = s->capacity;
	slots_lock(s);
	if (atomic_load(&s->held[worker]) == 1) {
		taken = true;
	} else if (slots_count_locked(s) < limit) {
		atomic_store(&s->held[worker], 1);
		taken = true;
	}
	pthread_mutex_unlock(&s->lock);
	return taken;
}

void
slots_release(struct slots *s, int worker)
{
	if (worker >= 0 && worker < s->workers)
		atomic_store(&s->held[worker], 0);
}

bool
slots_reconcile(struct slots *s, int worker)
{
	if (worker < 0 || worker >= s->workers)
		return false;
	return atomic_exchange(&s->held[worker], 0) == 1;
}

int
slots_in_flight(struct slots *s)
{
	int n;

	slots_lock(s);
	n = slots_count_locked(s);
	pthread_mutex_unlock(&s->lock);
	return n;
}

int
slots_capacity(const struct slots *s)
{
	return s->capacity;
}
