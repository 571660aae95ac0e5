#!/usr/bin/env bats
# Runs last: no suite left a stack of the pool under test running (a stack started inside a
# test must be stopped by that test's own teardown, not only by the file's). Under `make test`
# the passes run side by side, two of them on one pool binary: each is tagged
# (CODEBOX_TEST_PASS, inherited by every process it starts) and answers for its own pools.

load helpers/stack

# this_pass PID: whether PID carries this pass's tag (every pid does, untagged)
this_pass() {
	[[ -z ${CODEBOX_TEST_PASS:-} ]] ||
		tr '\0' '\n' 2>/dev/null <"/proc/$1/environ" | grep -qx "CODEBOX_TEST_PASS=$CODEBOX_TEST_PASS"
}

@test "leftovers: no suite left a pool or its nginx running" {
	local pool=${CODEBOX_POOL:-$ROOT/build/codebox-pool} p left=""
	for p in $(pgrep -f -- "^$pool --socket" || true); do
		if this_pass "$p"; then
			left+="$(ps -o pid=,args= -p "$p" || true)"$'\n'
		fi
	done
	if [[ -n $left ]]; then
		echo "pools left running by the suites:" >&2
		echo "$left" >&2
		return 1
	fi
}
