#!/usr/bin/env bash
# Runs test passes side by side: `make test`'s lanes (the warm pass in one; the sanitizer pass,
# in two halves, and the cold pass in the others). The first lane's output is shown as it
# comes; each other lane's is kept in a file and shown in one piece, in order, when all are
# done, so none is interleaved. Exits 0 when every lane passed; otherwise names the lanes that
# failed and exits 1. Each lane runs in a session of its own; Ctrl-C or SIGTERM here interrupts
# them all (SIGINT to each lane's process group: bats runs the interrupted test's teardown and
# stops its stacks) and waits for them.
#   usage: scripts/test-lanes.sh COMMAND1 COMMAND2 [COMMAND...]
set -euo pipefail
(($# >= 2)) || {
	echo "usage: $0 COMMAND1 COMMAND2 [COMMAND...]" >&2
	exit 2
}
logs=()
pids=()
stop() {
	local p
	for p in "${pids[@]}"; do
		kill -INT -- "-$p" 2>/dev/null || true
	done
	wait
	rm -f "${logs[@]}"
	exit 130
}
trap stop INT TERM

cmds=("$@")
for ((i = 0; i < ${#cmds[@]}; i++)); do
	echo "test-lanes: lane $((i + 1)): ${cmds[i]}$( ((i > 0)) && echo " (its output follows lane $i's)")"
done
for ((i = 1; i < ${#cmds[@]}; i++)); do
	logs+=("$(mktemp /tmp/codebox-lane.XXXXXX)")
done
start=$SECONDS
for ((i = 1; i < ${#cmds[@]}; i++)); do
	setsid bash -c "${cmds[i]}" >"${logs[i - 1]}" 2>&1 </dev/null &
	pids+=($!)
done
setsid bash -c "${cmds[0]}" </dev/null &
pids=("$!" "${pids[@]}")
statuses=()
ended=()
# each lane's own end, in the order they end (wait -n), so that the slowest is seen
left=("${pids[@]}")
while ((${#left[@]} > 0)); do
	s=0
	done_pid=""
	wait -n -p done_pid "${left[@]}" || s=$?
	[[ -n $done_pid ]] || break # nothing left to wait for
	rest=()
	for ((i = 0; i < ${#cmds[@]}; i++)); do
		if [[ ${pids[i]} == "$done_pid" ]]; then
			statuses[i]=$s
			ended[i]=$((SECONDS - start))
		fi
	done
	for p in "${left[@]}"; do
		[[ $p == "$done_pid" ]] || rest+=("$p")
	done
	left=("${rest[@]}")
done
pids=()
for ((i = 1; i < ${#cmds[@]}; i++)); do
	echo "test-lanes: lane $((i + 1))'s output:"
	cat "${logs[i - 1]}"
done
rm -f "${logs[@]}"
failed=()
for ((i = 0; i < ${#cmds[@]}; i++)); do
	echo "test-lanes: lane $((i + 1)) ended after ${ended[i]} s (exit ${statuses[i]})"
	((statuses[i] == 0)) || failed+=("lane $((i + 1)) (${cmds[i]})")
done
if ((${#failed[@]})); then
	printf 'test-lanes: FAILED: %s\n' "${failed[@]}"
	exit 1
fi
