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
 *
 * A holder that stays alive but never lets go (stopped, or wrong) is what robustness cannot
 * mend: every locker would wait for ever, and every /execute with it. So nobody waits longer
 * than SLOTS_LOCK_WAIT_MS (a monotonic deadline): /execute answers 503, and /readyz, which
 * takes and gives back the same lock (slots_check()), answers 503 too, so the pod leaves the
 * Service and the pool container's liveness probe restarts the pool, whose new table is free.
 *
 * A slot may also be lent to a process that is not a worker: a session's background execution
 * (session.h) runs in a watcher of its own, for up to an hour, and holds a slot for as long as
 * it runs, so that spinning sessions cannot take the CPU the slots share out. There are as many
 * loans as slots (no more can be held at once); each holds its holder's pid, and a loan whose
 * holder no longer exists is taken back by the next count, so a killed watcher never leaks one.
 *
 * The page is a memfd's, named codebox-slots, so that /proc/PID/maps says which mapping is
 * the table; the mutex is its first bytes. tests/helpers/wedge-slots.py relies on both to hold
 * the lock from outside the pool (as root, through /proc/PID/map_files), which no request can.
 */
#include "core/slots.h"

#include "core/util.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct slots {
	pthread_mutex_t lock; /* first: the mapping's first bytes (wedge-slots.py) */
	int capacity;
	int workers;
	size_t map_bytes;
	atomic_uint *tags;      /* a second tag per worker (slots_acquire_tagged()), after held[] */
	atomic_uint *loan_tags; /* each loan's tag (slots_lend_tagged()), after tags[] */
	/* one per worker: 1 (or its first tag) while it holds a slot; then capacity loans: the
	 * holder's pid, or 0 */
	atomic_int held[];
};

struct slots *
slots_create(const char *name, int capacity, int workers)
{
	pthread_mutexattr_t attr;
	size_t bytes;
	struct slots *s;

	if (capacity < 1 || workers < 1) {
		errno = EINVAL;
		return NULL;
	}
	bytes = sizeof(*s) + (size_t)(workers + capacity) * sizeof(atomic_int) +
	        (size_t)(workers + capacity) * sizeof(atomic_uint);
	/* named in /proc/PID/maps (codebox-slots, codebox-streams), so that root can find it
	 * from outside */
	s = util_map_shared(name, bytes);
	if (s == NULL)
		return NULL;
	s->capacity = capacity;
	s->workers = workers;
	s->map_bytes = bytes;
	s->tags = (atomic_uint *)&s->held[workers + capacity];
	s->loan_tags = &s->tags[workers];
	for (int i = 0; i < workers + capacity; i++)
		atomic_init(&s->held[i], 0);
	for (int i = 0; i < workers + capacity; i++)
		atomic_init(&s->tags[i], 0);
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

const char *
slots_admit_string(enum slots_admit a)
{
	switch (a) {
	case SLOTS_TAKEN:
		return "taken";
	case SLOTS_FULL:
		return "full";
	case SLOTS_STUCK:
		return "stuck";
	}
	return "unknown";
}

/* Takes the lock within SLOTS_LOCK_WAIT_MS. Returns 0, or an errno value (ETIMEDOUT). */
static int
slots_lock(struct slots *s)
{
	struct timespec deadline;
	int rc;

	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_sec += SLOTS_LOCK_WAIT_MS / 1000;
	deadline.tv_nsec += (long)(SLOTS_LOCK_WAIT_MS % 1000) * 1000000L;
	if (deadline.tv_nsec >= 1000000000L) {
		deadline.tv_sec++;
		deadline.tv_nsec -= 1000000000L;
	}
	/* monotonic: a clock step never shortens or stretches the wait */
	rc = pthread_mutex_clocklock(&s->lock, CLOCK_MONOTONIC, &deadline);
	if (rc == EOWNERDEAD) {
		/* a holder that died held it for one single-word update: the table is consistent */
		pthread_mutex_consistent(&s->lock);
		rc = 0;
	}
	return rc;
}

static int
slots_count_locked(struct slots *s)
{
	int n = 0;

	for (int i = 0; i < s->workers; i++)
		n += atomic_load(&s->held[i]) != 0;
	for (int i = s->workers; i < s->workers + s->capacity; i++) {
		pid_t pid = atomic_load(&s->held[i]);
		/* a holder gone without giving its loan back (killed): taken back */
		if (pid > 0 && kill(pid, 0) < 0 && errno == ESRCH)
			atomic_compare_exchange_strong(&s->held[i], &pid, 0);
		n += atomic_load(&s->held[i]) != 0;
	}
	return n;
}

/* How many loans held now are tagged tag (the lock held; gone holders' already taken back). */
static long
slots_loans_of_locked(struct slots *s, unsigned tag)
{
	long n = 0;

	for (int i = 0; i < s->capacity; i++)
		n += atomic_load(&s->held[s->workers + i]) != 0 &&
		     atomic_load(&s->loan_tags[i]) == tag;
	return n;
}

enum slots_admit
slots_acquire(struct slots *s, int worker, long limit)
{
	static const unsigned tag[2] = {1, 0};
	static const long no_limit[2] = {0, 0};
	int which;

	return slots_acquire_tagged(s, worker, limit, tag, no_limit, &which);
}

enum slots_admit
slots_acquire_tagged(struct slots *s, int worker, long limit, const unsigned tag[2],
                     const long tag_limit[2], int *which)
{
	enum slots_admit a = SLOTS_FULL;
	long same[2] = {0, 0};

	*which = 0;
	if (worker < 0 || worker >= s->workers || tag[0] == 0)
		return SLOTS_FULL;
	if (limit > s->capacity)
		limit = s->capacity;
	if (slots_lock(s) != 0)
		return SLOTS_STUCK;
	/* counted only where a tag is bounded: not on the execution slots' path */
	if (tag_limit[0] > 0 || tag_limit[1] > 0) {
		(void)slots_count_locked(s); /* takes back a gone holder's loan first */
		for (int i = 0; i < s->workers; i++) {
			same[0] += i != worker && (unsigned)atomic_load(&s->held[i]) == tag[0];
			same[1] += i != worker && atomic_load(&s->held[i]) != 0 && tag[1] != 0 &&
			           atomic_load(&s->tags[i]) == tag[1];
		}
		same[0] += slots_loans_of_locked(s, tag[0]);
	}
	if (atomic_load(&s->held[worker]) != 0)
		a = SLOTS_TAKEN;
	else if (tag_limit[0] > 0 && same[0] >= tag_limit[0])
		*which = 1;
	else if (tag_limit[1] > 0 && tag[1] != 0 && same[1] >= tag_limit[1])
		*which = 2;
	else if (slots_count_locked(s) < limit)
		a = SLOTS_TAKEN;
	if (a == SLOTS_TAKEN) {
		atomic_store(&s->tags[worker], tag[1]);
		atomic_store(&s->held[worker], (int)tag[0]);
	}
	pthread_mutex_unlock(&s->lock);
	return a;
}

int
slots_lend(struct slots *s, long limit, pid_t pid)
{
	return slots_lend_tagged(s, limit, pid, 0, 0);
}

int
slots_lend_tagged(struct slots *s, long limit, pid_t pid, unsigned tag, long tag_limit)
{
	int loan = SLOTS_LOAN_FULL;
	long same = 0;

	if (pid <= 0)
		return SLOTS_LOAN_FULL;
	if (limit > s->capacity)
		limit = s->capacity;
	if (slots_lock(s) != 0)
		return SLOTS_LOAN_STUCK;
	if (slots_count_locked(s) < limit) {
		if (tag != 0 && tag_limit > 0) {
			for (int i = 0; i < s->workers; i++)
				same += (unsigned)atomic_load(&s->held[i]) == tag;
			same += slots_loans_of_locked(s, tag);
		}
		for (int i = 0; i < s->capacity && (tag_limit <= 0 || same < tag_limit); i++)
			if (atomic_load(&s->held[s->workers + i]) == 0) {
				atomic_store(&s->loan_tags[i], tag);
				atomic_store(&s->held[s->workers + i], pid);
				loan = i;
				break;
			}
		if (tag_limit > 0 && same >= tag_limit)
			loan = SLOTS_LOAN_TENANT;
	}
	pthread_mutex_unlock(&s->lock);
	return loan;
}

void
slots_lend_to(struct slots *s, int loan, pid_t pid)
{
	if (loan >= 0 && loan < s->capacity && pid > 0)
		atomic_store(&s->held[s->workers + loan], pid);
}

void
slots_return(struct slots *s, int loan, pid_t pid)
{
	if (loan >= 0 && loan < s->capacity)
		atomic_compare_exchange_strong(&s->held[s->workers + loan], &pid, 0);
}

int
slots_check(struct slots *s)
{
	int rc = slots_lock(s);

	if (rc != 0) {
		errno = rc;
		return -1;
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

void
slots_release(struct slots *s, int worker)
{
	if (worker >= 0 && worker < s->workers) {
		atomic_store(&s->held[worker], 0);
		atomic_store(&s->tags[worker], 0);
	}
}

bool
slots_reconcile(struct slots *s, int worker)
{
	if (worker < 0 || worker >= s->workers)
		return false;
	atomic_store(&s->tags[worker], 0);
	return atomic_exchange(&s->held[worker], 0) != 0;
}

int
slots_in_flight(struct slots *s)
{
	int n;

	if (slots_lock(s) != 0)
		return -1;
	n = slots_count_locked(s);
	pthread_mutex_unlock(&s->lock);
	return n;
}

int
slots_loans(struct slots *s)
{
	int n = 0;

	if (slots_lock(s) != 0)
		return -1;
	(void)slots_count_locked(s); /* takes back a gone holder's */
	for (int i = s->workers; i < s->workers + s->capacity; i++)
		n += atomic_load(&s->held[i]) != 0;
	pthread_mutex_unlock(&s->lock);
	return n;
}

int
slots_capacity(const struct slots *s)
{
	return s->capacity;
}
