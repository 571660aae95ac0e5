#!/usr/bin/env bash
# Runs two test passes side by side: `make test`'s lanes (the warm and cold passes in one, the
# sanitizer pass in the other). The first lane's output is shown as it comes; the second's is
# kept in a file and shown in one piece when both are done, so neither is interleaved. Exits 0
# when both passed; otherwise names the lane(s) that failed and exits 1. Each lane runs in a
# session of its own; Ctrl-C or SIGTERM here interrupts both (SIGINT to each lane's process
# group: bats runs the interrupted test's teardown and stops its stacks) and waits for them.
#   usage: scripts/test-lanes.sh COMMAND1 COMMAND2
set -euo pipefail
(($# == 2)) || {
	echo "usage: $0 COMMAND1 COMMAND2" >&2
	exit 2
}
log=$(mktemp /tmp/codebox-lane.XXXXXX)
pids=()
stop() {
	local p
	for p in "${pids[@]}"; do
		kill -INT -- "-$p" 2>/dev/null || true
	done
	wait
	rm -f "$log"
	exit 130
}
trap stop INT TERM

echo "test-lanes: lane 1: $1"
echo "test-lanes: lane 2: $2 (its output follows lane 1's)"
start=$SECONDS
setsid bash -c "$2" >"$log" 2>&1 </dev/null &
pids+=($!)
setsid bash -c "$1" </dev/null &
pids+=($!)
status1=0 status2=0
wait "${pids[1]}" || status1=$?
t1=$((SECONDS - start))
wait "${pids[0]}" || status2=$?
t2=$((SECONDS - start))
pids=()
echo "test-lanes: lane 2's output:"
cat "$log"
rm -f "$log"
echo "test-lanes: lane 1 ended after ${t1} s (exit $status1), lane 2 after ${t2} s (exit $status2)"
failed=()
((status1 == 0)) || failed+=("lane 1 ($1)")
((status2 == 0)) || failed+=("lane 2 ($2)")
if ((${#failed[@]})); then
	printf 'test-lanes: FAILED: %s\n' "${failed[@]}"
	exit 1
fi
