#!/usr/bin/env bats
# The pool under pressure and failure: admission (429), respawn, crashes, readiness, drain.
# A stack with 2 execution slots, so that filling them is cheap.

load helpers/stack

setup_file() {
	local conf
	# /capabilities gets a short upstream timeout here, to see nginx's own 504
	conf=$(conf_variant 's/limit_conn codebox_execute 20;/limit_conn codebox_execute 2;/' \
		's/CODEBOX_MAX_CONCURRENT_EXECUTIONS  20;/CODEBOX_MAX_CONCURRENT_EXECUTIONS  2;/' \
		's/fastcgi_param CODEBOX_ENDPOINT capabilities;/&\n            fastcgi_read_timeout 2s;/')
	stack_start --conf-dir "$conf"
}

teardown_file() {
	stack_stop
}

# run_in_background NAME MARKER PYCODE: POSTs marker_body MARKER PYCODE as a job of this shell
# and waits until its program runs; once the job ends, background_reply NAME reads its answer.
run_in_background() {
	marker_body "$2" "$3" >"$BATS_TEST_TMPDIR/req"
	curl -s --max-time 30 -o "$BATS_TEST_TMPDIR/$1" -w '%{http_code}' \
		--data-binary @"$BATS_TEST_TMPDIR/req" "$BASE/execute" >"$BATS_TEST_TMPDIR/$1_code" 3>&- &
	wait_for "the run to start" 100 pgrep -f -- "$2"
}

# background_reply NAME: sets $code and $reply from the job run_in_background NAME started
background_reply() {
	code=$(cat "$BATS_TEST_TMPDIR/$1_code")
	read_reply "$BATS_TEST_TMPDIR/$1"
}

full_pool() {
	[[ $(worker_pids | wc -l) -eq 14 ]] # 2 slots + 4 meta + 4 agent + 4 streams
}

# respawned PID: the pool is full again and PID is gone
respawned() {
	full_pool && ! kill -0 "$1" 2>/dev/null
}

two_in_flight() {
	[[ $(runs_in_flight) -eq 2 ]]
}

@test "pool: the pool has one worker per slot of both zones (2 + 4 + 4 agent + 4 streams)" {
	run -0 worker_pids
	assert_equal "${#lines[@]}" 14
	run -0 curl -s "$BASE/capabilities"
	assert_equal "$(jq .limits.maxConcurrentExecutions <<<"$output")" 2
}

@test "pool: past the admitted concurrency nginx answers 429 at once, never queues" {
	local i
	for i in 1 2; do
		curl -s --max-time 30 -o "$BATS_TEST_TMPDIR/slow$i" --data-binary \
			'{"code":"import time; time.sleep(3); print(\"slow\")"}' "$BASE/execute" 3>&- &
	done
	wait_for "two runs in flight" 100 two_in_flight
	local t0=$EPOCHREALTIME
	post '{"code":"print(1)"}'
	local ms=$(((${EPOCHREALTIME/./} - ${t0/./}) / 1000))
	assert_equal "$code" 429
	assert_equal "$(header Retry-After)" 1
	assert [ -n "$(header X-Request-Id)" ]
	assert_equal "$reply" '{"error":"sandbox_busy","message":"all execution slots are in use; retry shortly"}'
	((ms < 1000))
	# meta requests have slots of their own
	run -0 curl -s -o /dev/null -w '%{http_code}' "$BASE/capabilities"
	assert_output 200
	wait
	for i in 1 2; do
		assert_equal "$(jq -r .stdout "$BATS_TEST_TMPDIR/slow$i")" slow
	done
	post '{"code":"print(1)"}'
	assert_equal "$code" 200
}

@test "pool: a killed idle worker is logged and respawned" {
	local victim
	victim=$(worker_pids | head -1)
	kill -KILL "$victim"
	wait_for "the respawn" 100 respawned "$victim"
	run -0 grep -c "(pid $victim) was killed by signal 9" "$STACK_DIR/logs/pool.log"
	post '{"code":"print(1)"}'
	assert_equal "$code" 200
}

@test "pool: a worker that crashes mid-request gives 502 sandbox_unavailable, and its run dies too" {
	local m="codebox-crash-$RANDOM$RANDOM"
	run_in_background crash "$m" 'import time; time.sleep(60)'
	local worker prog
	# the run's worker: its init's parent (cold), or the worker holding init's pidfd (warm:
	# init is a template's child)
	prog=$(pgrep -f -- "$m" | head -1)
	worker=$(init_worker "$(ps -o ppid= -p "$prog" | tr -d ' ')")
	[[ -n $worker ]]
	kill -KILL "$worker"
	wait
	background_reply crash
	assert_equal "$code" 502
	assert_equal "$(field .error)" sandbox_unavailable
	# the run got SIGKILL with its worker (PR_SET_PDEATHSIG)
	wait_for "the orphaned run to die" 50 marker_gone "$m"
	wait_for "the respawn" 50 full_pool
	# the respawned worker sweeps what its predecessor left: the run's directory and cgroup
	wait_for "the sweep" 50 no_run_leftovers
	run -0 grep -c "left by a worker that died mid-run" "$STACK_DIR/logs/pool.log"
	post '{"code":"print(1)"}'
	assert_equal "$code" 200
}

@test "pool: a run whose init is killed from outside is the sandbox's fault: 503, never the program's -9" {
	local m="codebox-lost-$RANDOM$RANDOM" prog init
	run -0 curl -s "$BASE/isolation"
	[[ $(jq -r .layers.pidns <<<"$output") == true ]] || skip "no pid namespace: the program is its own init"
	run_in_background lost "$m" 'import time; time.sleep(60)'
	prog=$(pgrep -f -- "$m" | head -1)
	init=$(ps -o ppid= -p "$prog" | tr -d ' ')
	assert_equal "$(cat "/proc/$init/comm")" codebox-init
	kill -KILL "$init"
	wait
	background_reply lost
	assert_equal "$code" 503
	assert_equal "$(field .error)" sandbox_unavailable
	assert_equal "$(field .message)" "the run's sandbox was killed from outside; retry"
	run -0 grep -c "the run's init was killed from outside before it reported" "$STACK_DIR/logs/pool.log"
	# said as it is: no stale errno after it ("Success", "Resource temporarily unavailable")
	run -0 grep -c "the run's init was killed from outside before it reported\"" "$STACK_DIR/logs/pool.log"
	wait_for "the run to die with its init" 50 marker_gone "$m"
	wait_for "no leftovers" 50 no_run_leftovers
	post '{"code":"print(1)"}'
	assert_equal "$code" 200
}

@test "pool: /readyz is 503 and a timed-out upstream 504 (JSON) when no worker answers" {
	local pids
	wait_for "a full pool" 50 full_pool
	pids=$(worker_pids)
	# shellcheck disable=SC2086
	kill -STOP $pids
	request --max-time 20 "$BASE/readyz"
	local code503=$code reply503=$reply
	# and nginx's own upstream timeout is a JSON 504
	request --max-time 20 "$BASE/capabilities"
	# shellcheck disable=SC2086
	kill -CONT $pids
	assert_equal "$code503" 503
	assert_equal "$(jq -r .error <<<"$reply503")" sandbox_unavailable
	assert_equal "$code" 504
	assert_equal "$(field .error)" sandbox_timeout
	wait_for "readiness" 100 bash -c "[[ \$(curl -s -o /dev/null -w '%{http_code}' '$BASE/readyz') == 200 ]]"
}

# idle_inits: each worker's sandbox built ahead (its idle init: cold, a child of the worker;
# warm, of a template).
idle_inits() {
	box_inits
}

# two_idle_inits: both execution slots' workers hold a sandbox built ahead.
two_idle_inits() {
	[[ $(idle_inits | wc -l) -eq 2 ]]
}

# ended PID...: each PID is gone or a zombie (its files closed, its namespace's processes dead).
ended() {
	local p st
	for p in "$@"; do
		st=$(sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | cut -d' ' -f1) || continue
		[[ -z $st || $st == Z ]] || return 1
	done
}

# handed_to_stopped INIT...: the worker of one of the stopped INITs waits in poll() (system
# call 7; an idle worker waits in epoll_pwait): it has sent the request, unread in the pipe.
handed_to_stopped() {
	local i w
	for i in "$@"; do
		w=$(init_worker "$i") || continue
		[[ -n $w && $(cut -d' ' -f1 "/proc/$w/syscall" 2>/dev/null) == 7 ]] && return 0
	done
	return 1
}

@test "pool: a sandbox built ahead that died while waiting is replaced, and the run succeeds" {
	local inits i
	for i in 1 2 3; do
		post '{"code":"print(1)"}'
	done
	# every worker that served has built its next sandbox: kill those idle inits, and wait
	# for them to be gone (a kill is asynchronous; one in progress is the next test's case)
	inits=$(idle_inits)
	[[ -n $inits ]]
	# shellcheck disable=SC2086
	kill -KILL $inits
	# shellcheck disable=SC2086
	wait_for "the killed sandboxes to end" 100 ended $inits
	for i in $(seq 1 8); do
		answers_42
	done
	run -0 grep -c "the sandbox built ahead is gone" "$STACK_DIR/logs/pool.log"
}

@test "pool: a sandbox built ahead that dies after the request was sent runs it in a new one" {
	local inits boxes i
	# two runs at once: both execution slots' workers build their next sandbox
	for i in 1 2; do
		curl -s --max-time 30 -o /dev/null --data-binary \
			'{"code":"import time; time.sleep(0.3)"}' "$BASE/execute" 3>&- &
	done
	wait
	wait_for "both sandboxes built ahead" 100 two_idle_inits
	# stopped (warm: with the program prepared ahead, which reads the request itself), a
	# sandbox takes no request; its pipe does, and the worker waits for the report
	inits=$(idle_inits)
	boxes="$inits $(for i in $inits; do pgrep -P "$i" || true; done)"
	# shellcheck disable=SC2086
	kill -STOP $boxes
	curl -s --max-time 30 -o "$BATS_TEST_TMPDIR/late" -w '%{http_code}' \
		--data-binary '{"code":"print(6 * 7)"}' "$BASE/execute" >"$BATS_TEST_TMPDIR/late_code" 3>&- &
	# shellcheck disable=SC2086
	wait_for "the request to reach a stopped sandbox" 100 handed_to_stopped $inits
	# shellcheck disable=SC2086
	kill -KILL $inits
	wait
	assert_equal "$(cat "$BATS_TEST_TMPDIR/late_code")" 200
	assert_equal "$(jq -r .stdout "$BATS_TEST_TMPDIR/late")" 42
	assert_equal "$(jq -r .exitCode "$BATS_TEST_TMPDIR/late")" 0
	run -0 grep -c "the sandbox built ahead died before it read the program" "$STACK_DIR/logs/pool.log"
	assert_output 1
	# the other slot's sandbox died while it waited: it is replaced on its request
	# shellcheck disable=SC2086
	wait_for "the killed sandboxes to end" 100 ended $inits
	for i in 1 2 3 4; do
		answers_42
	done
	no_run_leftovers
}

@test "pool: SIGTERM drains: the run in flight is answered, then everything stops" {
	local m="codebox-drain-$RANDOM$RANDOM"
	run_in_background drain "$m" 'import time; time.sleep(2); print("finished")'
	kill -TERM "$STACK_PID"
	wait
	background_reply drain
	assert_equal "$code" 200
	assert_equal "$(field .stdout)" finished
	# the stack was started by setup_file, not by this shell: watch it go
	wait_for "the stack to stop" 600 marker_gone "$STACK_DIR"
	assert [ ! -e "$STACK_DIR/fcgi.sock" ]
	STACK_PID=""
}
