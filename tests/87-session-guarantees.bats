#!/usr/bin/env bats
# What a session promises under load and faults (API.md "Sessions"): every file a cell makes
# comes back in its artifacts, and no other cell's; a run that meets the pool's memory budget is
# stopped, never an idle session beside it.

load helpers/stack

setup_file() {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || return 0
	stack_start
}

teardown_file() {
	stack_stop
}

setup() {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
}

@test "session files: every file a cell makes is in its artifacts, no earlier cell's; one session, then three at once" {
	# a cell that begins in the same clock tick as init's reading of the clock made its files
	# with times before that reading: 0.5 to 3% of such cells lost them (serial more than
	# concurrent on this 2-core host); each cell also rewrites, its size kept, a file two cells
	# old, which must come back as it now is, and must list nothing else
	local port=${BASE##*:}
	run -0 "$PY" "$ROOT/tests/helpers/session_files.py" "$port" 1 400
	assert_line --index 0 "cells 400 missing 0 extra 0"
	run -0 "$PY" "$ROOT/tests/helpers/session_files.py" "$port" 3 150
	assert_line --index 0 "cells 450 missing 0 extra 0"
}

@test "session files: times a program sets: a file it dates back is its own; one an earlier cell dated ahead is not the next cell's" {
	local sid
	request -X POST "$BASE/sessions"
	assert_equal "$code" 201
	sid=$(field .id)
	request -X POST -H 'Content-Type: application/json' --data-binary \
		'{"code":"import os, time\nopen(\"ahead.txt\", \"w\").write(\"a\")\nos.utime(\"ahead.txt\", (time.time() + 3600,) * 2)","artifacts":true}' \
		"$BASE/sessions/$sid/execute"
	run -0 jq -c '[.artifacts[].path]' <<<"$reply"
	assert_output '["ahead.txt"]'
	request -X POST -H 'Content-Type: application/json' --data-binary \
		'{"code":"open(\"back.txt\", \"w\").write(\"b\")\nos.utime(\"back.txt\", (1, 1))","artifacts":true}' \
		"$BASE/sessions/$sid/execute"
	run -0 jq -c '[.artifacts[].path]' <<<"$reply"
	assert_output '["back.txt"]'
	request -X DELETE "$BASE/sessions/$sid"
	assert_equal "$code" 204
}

@test "session memory: a run that meets the pool's memory budget beside a larger idle session is stopped; the session lives" {
	local conf saved_dir saved_pid saved_base sid
	[[ -z ${CODEBOX_ASAN:-} ]] || skip "under the sanitizers a warm box is charged for its shadow pages: which group is the largest is theirs"
	conf=$(conf_variant 's/CODEBOX_POOL_MEMORY_BYTES          0;/CODEBOX_POOL_MEMORY_BYTES          419430400;/' \
		's/CODEBOX_MEMORY_BYTES               1073741824;/CODEBOX_MEMORY_BYTES               314572800;/')
	saved_dir=$STACK_DIR saved_pid=$STACK_PID saved_base=$BASE
	stack_start --conf-dir "$conf"
	run -0 curl -s "$BASE/isolation"
	if [[ $(jq -r .layers.poolmemory <<<"$output") != true ]]; then
		stack_stop
		STACK_DIR=$saved_dir STACK_PID=$saved_pid BASE=$saved_base
		skip "no pool-wide budget on this host"
	fi
	# an idle session holds 220 MiB; a run then grows towards its own 300 MiB, and the pool's
	# 400 MiB runs out while the session is the largest group: the run is stopped, not the
	# session (which holds its cap of the budget from its creation)
	request -X POST "$BASE/sessions"
	assert_equal "$code" 201
	sid=$(field .id)
	request -X POST -H 'Content-Type: application/json' --data-binary \
		'{"code":"held = bytearray(b\"\\x01\") * (220 << 20)"}' "$BASE/sessions/$sid/execute"
	assert_equal "$(field .status)" succeeded
	execute $'chunks = []\nfor i in range(26):\n    chunks.append(bytearray(b"\\x01") * (10 << 20))\nprint("run done")' '{details: true}'
	assert_equal "$(field .details.limitExceeded)" memory
	request -X POST -H 'Content-Type: application/json' --data-binary \
		'{"code":"len(held) >> 20"}' "$BASE/sessions/$sid/execute"
	assert_equal "$code" 200
	assert_equal "$(field .value)" 220
	run ! grep -q "killed at the pool's memory budget" "$STACK_DIR/logs/pool.log"
	request -X DELETE "$BASE/sessions/$sid"
	stack_stop
	STACK_DIR=$saved_dir STACK_PID=$saved_pid BASE=$saved_base
}

@test "session tier: a session made while the heavy template is renewed waits for it, never starts on the light one" {
	local old h sid
	old=$(heavy_pids)
	[[ -n $old ]] || skip "no heavy template here"
	# the heavy template is gone: the zygote makes another, which imports its modules anew
	for h in $old; do
		kill -KILL "$h"
	done
	request -X POST "$BASE/sessions"
	assert_equal "$code" 201
	sid=$(field .id)
	# its cells run on the heavy tier (its modules imported already: the pool logs each
	# execution's tier), and import pandas at once
	request -X POST -H 'Content-Type: application/json' --data-binary \
		'{"code":"import time\nt = time.monotonic()\nimport pandas\nround(time.monotonic() - t, 3)", "details": true}' \
		"$BASE/sessions/$sid/execute"
	assert_equal "$code" 200
	local rid
	rid=$(field .details.requestId)
	run -0 grep -F "\"requestId\":\"$rid\"" "$STACK_DIR/logs/pool.log"
	assert_output --partial '"tier":"heavy"'
	request -X DELETE "$BASE/sessions/$sid"
	assert_equal "$code" 204
	wait_for "a new heavy template" 600 new_heavy "$old"
}
