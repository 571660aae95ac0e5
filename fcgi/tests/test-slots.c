/* Unit tests for slots.c: the shared table of execution slots. */
#include "core/slots.h"
#include "tap.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long
now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* Whether this process maps a file named name (/proc/self/maps). */
static int
maps_name(const char *name)
{
	char line[512];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	if (f == NULL)
		return 0;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, name) != NULL;
	fclose(f);
	return found;
}

int
main(void)
{
	struct slots *s = slots_create("codebox-slots", 3, 5);
	int st;
	pid_t pid;

	ok(s != NULL, "a table for 3 slots and 5 workers is created");
	ok(slots_capacity(s) == 3 && slots_in_flight(s) == 0, "it starts empty");
	ok(slots_acquire(s, 0, 20) == SLOTS_TAKEN && slots_acquire(s, 1, 20) == SLOTS_TAKEN &&
	       slots_acquire(s, 2, 20) == SLOTS_TAKEN,
	   "three workers take the three slots (a larger request limit is capped)");
	ok(slots_acquire(s, 3, 20) == SLOTS_FULL, "a fourth is refused at capacity");
	ok(slots_acquire(s, 2, 20) == SLOTS_TAKEN && slots_in_flight(s) == 3,
	   "taking a held slot again succeeds and counts once");
	slots_release(s, 1);
	ok(slots_in_flight(s) == 2 && slots_acquire(s, 3, 20) == SLOTS_TAKEN,
	   "a released slot is free again");
	slots_release(s, 3);
	ok(slots_acquire(s, 4, 2) == SLOTS_FULL, "a request limit below capacity is honoured");
	ok(!slots_reconcile(s, 4), "reconciling a worker without a slot frees nothing");
	slots_release(s, 0);
	slots_release(s, 2);
	ok(slots_in_flight(s) == 0, "all given back");
	ok(slots_acquire(s, 5, 20) == SLOTS_FULL && slots_acquire(s, -1, 20) == SLOTS_FULL,
	   "an out-of-range worker index is refused");

	/* a worker that dies holding a slot: the supervisor reconciles it on SIGCHLD */
	pid = fork();
	if (pid == 0) {
		if (slots_acquire(s, 4, 20) != SLOTS_TAKEN)
			_exit(1);
		kill(getpid(), SIGKILL);
		_exit(2);
	}
	waitpid(pid, &st, 0);
	ok(WIFSIGNALED(st) && slots_in_flight(s) == 1, "a child's slot is seen by the parent");
	ok(slots_reconcile(s, 4) && slots_in_flight(s) == 0,
	   "reconciling the dead worker frees its slot");

	/* loans: counted with the workers' slots, passed on, given back, taken back when their
	 * holder is gone */
	{
		int a = -1, b = -1;
		ok(slots_acquire(s, 0, 20) == SLOTS_TAKEN &&
		       (a = slots_lend(s, 20, getpid())) >= 0 && slots_in_flight(s) == 2,
		   "a loan counts as a run in flight");
		ok((b = slots_lend(s, 20, getpid())) >= 0 && b != a &&
		       slots_lend(s, 20, getpid()) == SLOTS_LOAN_FULL &&
		       slots_acquire(s, 1, 20) == SLOTS_FULL,
		   "loans and slots share the capacity");
		ok(slots_lend(s, 0, getpid()) == SLOTS_LOAN_FULL &&
		       slots_lend(s, 20, 0) == SLOTS_LOAN_FULL,
		   "a loan is refused past the request's limit, and to no process");
		slots_return(s, b, getpid() + 1);
		ok(slots_in_flight(s) == 3, "a loan is given back by its holder alone");
		slots_return(s, b, getpid());
		ok(slots_in_flight(s) == 2, "its holder gives it back");
		pid = fork();
		if (pid == 0) {
			struct timespec ms = {0, 1000 * 1000};
			nanosleep(&ms, NULL);
			_exit(0);
		}
		slots_lend_to(s, a, pid);
		ok(slots_in_flight(s) == 2, "a loan passed on to a live process still counts");
		waitpid(pid, &st, 0);
		ok(slots_in_flight(s) == 1, "a loan whose holder is gone is taken back");
		slots_return(s, a, pid);
		slots_release(s, 0);
		ok(slots_in_flight(s) == 0, "all given back again");
	}

	/* tagged: per first tag, per second tag, and in all */
	{
		const unsigned a[2] = {7, 100}, b[2] = {8, 100}, c[2] = {9, 200};
		const long lim[2] = {2, 2}, none[2] = {0, 0};
		int which = -1;
		ok(slots_acquire_tagged(s, 0, 20, a, lim, &which) == SLOTS_TAKEN &&
		       slots_acquire_tagged(s, 1, 20, a, lim, &which) == SLOTS_TAKEN,
		   "two slots of one first tag are taken");
		ok(slots_acquire_tagged(s, 2, 20, a, lim, &which) == SLOTS_FULL && which == 1,
		   "a third of that tag is refused, for its first tag");
		ok(slots_acquire_tagged(s, 2, 20, b, lim, &which) == SLOTS_FULL && which == 2,
		   "another first tag with the same second tag is refused, for its second tag");
		ok(slots_acquire_tagged(s, 2, 20, c, lim, &which) == SLOTS_TAKEN &&
		       slots_in_flight(s) == 3,
		   "other tags are taken");
		ok(slots_acquire_tagged(s, 3, 20, c, none, &which) == SLOTS_FULL && which == 0,
		   "the capacity bounds them all");
		slots_release(s, 1);
		ok(slots_acquire_tagged(s, 3, 20, b, lim, &which) == SLOTS_TAKEN,
		   "a slot given back frees its tags");
		ok(slots_reconcile(s, 3) && slots_in_flight(s) == 2, "a tagged slot is reconciled");
		slots_release(s, 0);
		slots_release(s, 2);
		ok(slots_in_flight(s) == 0, "all given back again");
	}

	/* a tenant's share: its workers' slots and its loans together */
	{
		const unsigned t[2] = {11, 0}, u[2] = {12, 0};
		const long lim[2] = {2, 0};
		int which = -1, l1 = -1, l2 = -1;
		ok(slots_acquire_tagged(s, 0, 20, t, lim, &which) == SLOTS_TAKEN &&
		       (l1 = slots_lend_tagged(s, 20, getpid(), 11, 2)) >= 0,
		   "a tenant's slot and loan are taken");
		ok(slots_lend_tagged(s, 20, getpid(), 11, 2) == SLOTS_LOAN_TENANT,
		   "a second loan past the tenant's share is refused, for the tenant");
		ok(slots_acquire_tagged(s, 1, 20, t, lim, &which) == SLOTS_FULL && which == 1,
		   "so is a worker's slot: the loan counts in the share");
		ok((l2 = slots_lend_tagged(s, 20, getpid(), 12, 2)) >= 0,
		   "another tenant is served meanwhile");
		ok(slots_acquire_tagged(s, 1, 20, u, lim, &which) == SLOTS_FULL && which == 0,
		   "and the pod's capacity (3) bounds every tenant");
		slots_return(s, l1, getpid());
		ok(slots_acquire_tagged(s, 2, 20, t, lim, &which) == SLOTS_TAKEN,
		   "a loan given back frees the tenant's share");
		ok(slots_lend_tagged(s, 2, getpid(), 13, 5) == SLOTS_LOAN_FULL,
		   "the capacity bounds tagged loans, as a full pod (not the tenant)");
		slots_return(s, l2, getpid());
		for (int w = 0; w < 3; w++)
			slots_release(s, w);
		ok(slots_in_flight(s) == 0, "all given back again");
	}

	/* racing children: never more than capacity at once */
	for (int round = 0; round < 20; round++) {
		int won = 0;
		for (int w = 0; w < 5; w++) {
			pid = fork();
			if (pid == 0)
				_exit(slots_acquire(s, w, 20) == SLOTS_TAKEN ? 0 : 1);
		}
		for (int w = 0; w < 5; w++) {
			wait(&st);
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
				won++;
		}
		if (won != 3 || slots_in_flight(s) != 3) {
			ok(0, "round %d: %d of 5 racing workers won", round, won);
			break;
		}
		for (int w = 0; w < 5; w++)
			slots_reconcile(s, w);
		if (round == 19)
			ok(1, "20 rounds of 5 racing workers: exactly 3 win each time");
	}

	/* a holder that stays alive (stopped) with the lock: nobody waits for ever. The mutex is
	 * the table's first bytes, as tests/helpers/wedge-slots.py takes it from outside. */
	ok(maps_name("/memfd:codebox-slots"), "the table is named codebox-slots in /proc/PID/maps");
	int pipefd[2];
	char c;
	if (pipe(pipefd) < 0)
		return 1;
	pid = fork();
	if (pid == 0) {
		if (pthread_mutex_lock((pthread_mutex_t *)(void *)s) != 0)
			_exit(1);
		(void)!write(pipefd[1], "x", 1);
		raise(SIGSTOP);
		_exit(0);
	}
	close(pipefd[1]);
	ok(read(pipefd[0], &c, 1) == 1, "a child holds the lock and stops");
	close(pipefd[0]);
	long long t0 = now_ms();
	errno = 0;
	int rc = slots_check(s);
	long long waited = now_ms() - t0;
	ok(rc == -1 && errno == ETIMEDOUT, "slots_check() says the lock is stuck (ETIMEDOUT)");
	ok(waited >= SLOTS_LOCK_WAIT_MS - 50 && waited < SLOTS_LOCK_WAIT_MS + 2000,
	   "after waiting about %d ms (%lld ms)", SLOTS_LOCK_WAIT_MS, waited);
	ok(slots_acquire(s, 0, 20) == SLOTS_STUCK && slots_in_flight(s) == -1,
	   "slots_acquire() answers stuck, slots_in_flight() -1, instead of waiting for ever");
	is_str(slots_admit_string(SLOTS_STUCK), "stuck", "it is called stuck");
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	ok(slots_check(s) == 0 && slots_acquire(s, 0, 20) == SLOTS_TAKEN && slots_in_flight(s) == 1,
	   "once the holder is gone the lock is taken again (EOWNERDEAD) and slots are admitted");
	slots_release(s, 0);
	slots_destroy(s);
	return tap_done();
}
