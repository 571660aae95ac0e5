#!/usr/bin/env bats
# A fleet on this machine: three stacks of 4 execution slots each behind the router the
# cluster runs (deploy/overlays/scale/router.conf), loaded at twice one stack's slots with a
# mix of print(1), the café program and time.sleep(2); then one stack busy behind the router's
# back, one killed mid-load, one drained. Every load is bounded in count and time.

load helpers/fleet

SLOTS=4

setup_file() {
	# the router is nginx's configuration, and what it drives of the pool (admission, a
	# killed stack, a drain) the sanitizer pass checks in 50-pool and 55-admission: this
	# file's 30-odd seconds are the plain pass's only
	[[ -z ${CODEBOX_ASAN:-} ]] || return 0
	local conf
	conf=$(conf_variant "s/CODEBOX_MAX_CONCURRENT_EXECUTIONS  20;/CODEBOX_MAX_CONCURRENT_EXECUTIONS  $SLOTS;/")
	fleet_start 3 --conf-dir "$conf"
	local d=$BATS_FILE_TMPDIR
	jq -cn '{code: "print(1)"}' >"$d/print1.json"
	jq -cn --rawfile code "$ROOT/tests/programs/cafe.py" '{code: $code}' >"$d/cafe.json"
	jq -cn '{code: "import time\ntime.sleep(2)\nprint(\"slept\")"}' >"$d/sleep2.json"
	jq -cn '{code: "import time\ntime.sleep(4)\nprint(\"slept\")"}' >"$d/sleep4.json"
}

teardown_file() {
	[[ -z ${CODEBOX_ASAN:-} ]] || return 0
	fleet_stop
}

setup() {
	[[ -z ${CODEBOX_ASAN:-} ]] || skip "the fleet's routing is checked by the plain pass"
}

teardown() {
	if [[ ${BATS_TEST_COMPLETED:-} != 1 ]]; then
		fleet_logs
	fi
	openapi_teardown
}

# load OUT CONCURRENCY COUNT BODY...: fleet_load.py against the router, its lines in OUT
load_router() {
	local out=$1
	shift
	"$PY" "$ROOT/tests/helpers/fleet_load.py" "$ROUTER/execute" "$@" >"$out"
}

# count OUT JQ-FILTER: how many lines of OUT match
count() {
	jq -s "[.[] | select($2)] | length" "$1"
}

# p99 OUT JQ-FILTER: the 99th percentile of the ms of the lines that match (the largest, below
# 100 lines)
p99() {
	jq -s "[.[] | select($2) | .ms] | sort | .[((length * 99 / 100) | floor)] // 0" "$1"
}

@test "fleet: a burst at twice one stack's slots gets no 429, and every stack serves part of it" {
	local d=$BATS_FILE_TMPDIR out=$BATS_TEST_TMPDIR/burst
	# 8 clients (2 x 4 slots), 24 requests: sleep(2), the café program and print(1) in turn
	load_router "$out" $((2 * SLOTS)) 24 "$d/sleep2.json" "$d/cafe.json" "$d/print1.json"
	run -0 count "$out" '.status != 200'
	assert_output 0
	run -0 count "$out" '.outcome != "succeeded"'
	assert_output 0
	run -0 count "$out" '.body == 0 and .stdout != "slept\n"'
	assert_output 0
	run -0 count "$out" '.body == 2 and .stdout != "1\n"'
	assert_output 0
	# least_conn spread it: each stack ran some of the sleeps
	local i ran
	for i in 0 1 2; do
		fleet_use "$i"
		ran=$(grep -c '"outcome":"succeeded"' "$STACK_DIR/logs/pool.log" || true)
		echo "stack $i ran $ran"
		((ran > 0))
	done
}

@test "fleet: a stack whose slots are taken behind the router's back is routed around: no 429, at most a round trip more" {
	local d=$BATS_FILE_TMPDIR out=$BATS_TEST_TMPDIR/around busy=$BATS_TEST_TMPDIR/busy
	# stack 0's slots all taken by clients of its own (another router's, for this one)
	"$PY" "$ROOT/tests/helpers/fleet_load.py" "$(fleet_word "$FLEET_BASES" 0)/execute" "$SLOTS" "$SLOTS" \
		"$d/sleep4.json" >"$busy" 3>&- &
	local filler=$!
	wait_for "stack 0's slots to be taken" 200 eval '[[ $(fleet_in_flight 0) == '"$SLOTS"' ]]'
	# what a 429 costs, straight from the busy stack: the round trip the router adds
	"$PY" "$ROOT/tests/helpers/fleet_load.py" "$(fleet_word "$FLEET_BASES" 0)/execute" 1 10 \
		"$d/print1.json" >"$BATS_TEST_TMPDIR/direct429"
	run -0 count "$BATS_TEST_TMPDIR/direct429" '.status == 429'
	assert_output 10
	# print(1) through the router, one at a time, while stack 0 is full (bounded: 40 requests)
	load_router "$out" 1 40 "$d/print1.json"
	wait "$filler"
	run -0 count "$busy" '.status == 200'
	assert_output "$SLOTS"
	run -0 count "$out" '.status != 200 or .outcome != "succeeded"'
	assert_output 0
	# the router met stack 0's 429 and went on: its log says "429, 200" for those requests
	local around
	around=$(grep -c '"upstreamStatus":"429, 200"' "$ROUTER_DIR/access.log" || true)
	echo "routed around stack 0: $around of 40"
	((around >= 1))
	# p99 through the router, against p99 of a plain run plus one 429 round trip (200 ms of
	# margin for a loaded machine)
	local all extra
	all=$(p99 "$out" 'true')
	extra=$(p99 "$BATS_TEST_TMPDIR/direct429" 'true')
	echo "router p99 ${all} ms; a 429 round trip p99 ${extra} ms"
	jq -ne --argjson a "$all" --argjson x "$extra" '$a <= 1000 + $x'
}

@test "fleet: a stack killed mid-load: its runs get a JSON 502 at once, the others' answer, new requests go elsewhere" {
	local d=$BATS_FILE_TMPDIR out=$BATS_TEST_TMPDIR/kill after=$BATS_TEST_TMPDIR/after
	# 6 runs of 4 s, spread over the stacks (least_conn; a stack that answered 429 in the test
	# before gets one request a second until one succeeds: fail_timeout)
	load_router "$out" 6 6 "$d/sleep4.json" 3>&- &
	local loadpid=$!
	wait_for "six runs in flight, some on stack 1" 200 \
		eval '(($(fleet_in_flight 0) + $(fleet_in_flight 1) + $(fleet_in_flight 2) == 6 && $(fleet_in_flight 1) > 0))'
	local lost t0=$EPOCHREALTIME
	lost=$(fleet_in_flight 1)
	fleet_kill 1
	# new requests right after the loss: the first that meets the dead port is sent elsewhere
	load_router "$after" 2 10 "$d/print1.json"
	wait "$loadpid"
	local ms=$(((${EPOCHREALTIME/./} - ${t0/./}) / 1000))
	cat "$out"
	run -0 count "$out" '.status == 502 and .outcome == "sandbox_unavailable"'
	assert_output "$lost"
	# the two lost ones answered at once (their stack's connections closed), not at a timeout
	run -0 count "$out" '.status == 502 and .start + .ms / 1000 > 8'
	assert_output 0
	run -0 count "$out" '.status == 200 and .stdout == "slept\n"'
	assert_output $((6 - lost))
	run -0 count "$out" '.status == null'
	assert_output 0
	cat "$after"
	# every one answered, and nothing was lost: a 200, or (when, on a loaded host, one meets
	# the lost stack again before the router has marked it down, after a 429 elsewhere) the
	# router's retryable 503 that says nothing ran; most are 200s
	run -0 count "$after" '.status != 200 and (.status != 503 or .retryAfter != "1")'
	assert_output 0
	run -0 count "$after" '.status == 200'
	((output >= 8))
	echo "the load ended ${ms} ms after the kill"
	((ms < 20000))
}

@test "fleet: a stack taken out of the router and drained loses no admitted run" {
	local d=$BATS_FILE_TMPDIR out=$BATS_TEST_TMPDIR/drain during=$BATS_TEST_TMPDIR/during
	# the survivors of the kill: stacks 0 and 2, three runs of 4 s over both (stack 0 then
	# takes the load below alone: 3 runs and 1 at a time, within its 4 slots)
	fleet_router_set "0=$(fleet_word "$FLEET_BASES" 0 | sed 's|http://||')" \
		"2=$(fleet_word "$FLEET_BASES" 2 | sed 's|http://||')"
	load_router "$out" 3 3 "$d/sleep4.json" 3>&- &
	local loadpid=$!
	wait_for "three runs in flight, some on stack 2" 200 \
		eval '(($(fleet_in_flight 0) + $(fleet_in_flight 2) == 3 && $(fleet_in_flight 2) > 0))'
	# readiness off first (the pod leaves the router's list), then SIGTERM: the drain
	fleet_router_set "0=$(fleet_word "$FLEET_BASES" 0 | sed 's|http://||')" \
		"2=$(fleet_word "$FLEET_BASES" 2 | sed 's|http://||') down"
	fleet_use 2
	kill -TERM "$STACK_PID"
	# requests during the drain all go to stack 0
	load_router "$during" 1 8 "$d/print1.json"
	wait "$loadpid"
	cat "$out" "$during"
	run -0 count "$out" '.status == 200 and .stdout == "slept\n"'
	assert_output 3
	run -0 count "$during" '.status != 200'
	assert_output 0
	# the drained stack stopped by itself once its runs were answered, and said nothing died
	wait_for "the drained stack to exit" 600 marker_gone "$STACK_DIR"
	run -1 grep -e 'died' -e 'did not stop' -e 'killing them' "$STACK_DIR/run.out"
	run -0 grep -c 'shutting down: draining' "$STACK_DIR/logs/pool.log"
}
