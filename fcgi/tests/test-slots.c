/* Unit tests for slots.c: the shared table of execution slots. */
#include "slots.h"
#include "tap.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

int
main(void)
{
	struct slots *s = slots_create(3, 5);
	int st;
	pid_t pid;

	ok(s != NULL, "a table for 3 slots and 5 workers is created");
	ok(slots_capacity(s) == 3 && slots_in_flight(s) == 0, "it starts empty");
	ok(slots_acquire(s, 0, 20) && slots_acquire(s, 1, 20) && slots_acquire(s, 2, 20),
	   "three workers take the three slots (a larger request limit is capped)");
	ok(!slots_acquire(s, 3, 20), "a fourth is refused at capacity");
	ok(slots_acquire(s, 2, 20) && slots_in_flight(s) == 3,
	   "taking a held slot again succeeds and counts once");
	slots_release(s, 1);
	ok(slots_in_flight(s) == 2 && slots_acquire(s, 3, 20), "a released slot is free again");
	slots_release(s, 3);
	ok(!slots_acquire(s, 4, 2), "a request limit below capacity is honoured");
	ok(!slots_reconcile(s, 4), "reconciling a worker without a slot frees nothing");
	slots_release(s, 0);
	slots_release(s, 2);
	ok(slots_in_flight(s) == 0, "all given back");
	ok(!slots_acquire(s, 5, 20) && !slots_acquire(s, -1, 20),
	   "an out-of-range worker index is refused");

	/* a worker that dies holding a slot: the supervisor reconciles it on SIGCHLD */
	pid = fork();
	if (pid == 0) {
		if (!slots_acquire(s, 4, 20))
			_exit(1);
		kill(getpid(), SIGKILL);
		_exit(2);
	}
	waitpid(pid, &st, 0);
	ok(WIFSIGNALED(st) && slots_in_flight(s) == 1, "a child's slot is seen by the parent");
	ok(slots_reconcile(s, 4) && slots_in_flight(s) == 0,
	   "reconciling the dead worker frees its slot");

	/* racing children: never more than capacity at once */
	for (int round = 0; round < 20; round++) {
		int won = 0;
		for (int w = 0; w < 5; w++) {
			pid = fork();
			if (pid == 0)
				_exit(slots_acquire(s, w, 20) ? 0 : 1);
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
	slots_destroy(s);
	return tap_done();
}
