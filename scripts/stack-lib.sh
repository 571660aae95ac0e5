# shellcheck shell=bash
# What starting a private codebox stack takes, sourced by the bats helpers
# (tests/helpers/stack.bash) and the benchmarks (scripts/bench.sh, scripts/bench-admission.sh),
# so that they agree on what "ready" means: a free loopback port, and the bounded wait.

# codebox_free_port: a free loopback port (bind port 0 and report what the kernel chose).
codebox_free_port() {
	/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# codebox_uid_base PORT: the run uid range of a stack listening on PORT (256 uids per port, far
# above the default 20000 and below 2^30), so that stacks side by side never share run uids
codebox_uid_base() {
	echo $((1048576 + $1 * 256))
}

# codebox_wait_ready BASE PID RUNDIR: waits until BASE/readyz answers 200 (a worker answers)
# and the pool logging into RUNDIR/logs has started every worker (the first answers while the
# zygote still clones the rest). Bounded: 120 s, and only while PID (the stack) is alive.
# Returns 0 when ready, 1 otherwise.
codebox_wait_ready() {
	local base=$1 pid=$2 rundir=$3 i
	for ((i = 0; i < 1200; i++)); do
		if [[ $(curl -s -o /dev/null -w '%{http_code}' "$base/readyz") == 200 ]] &&
			grep -q '"pool started [0-9]* workers"' "$rundir/logs/pool.log" 2>/dev/null; then
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
