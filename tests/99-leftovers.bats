#!/usr/bin/env bats
# Runs last: no suite left a stack of the pool under test running (a stack started inside a
# test must be stopped by that test's own teardown, not only by the file's).

load helpers/stack

@test "leftovers: no suite left a pool or its nginx running" {
	local pool=${CODEBOX_POOL:-$ROOT/build/codebox-pool} left
	left=$(pgrep -af -- "^$pool --socket" || true)
	if [[ -n $left ]]; then
		echo "pools left running by the suites:" >&2
		echo "$left" >&2
		return 1
	fi
}
