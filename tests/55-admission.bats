#!/usr/bin/env bats
# Admission, stopping and supervision under real clients: clients that hang up, trickle their
# body, reconnect for every request, floods of connections, malformed request lines, forged
# requests on the FastCGI socket; killed nginx workers, a killed pool, Ctrl-C and SIGTERM to
# the stack and its process group. A stack with 2 execution slots and short client timeouts.

load helpers/stack

CLIENTS="$BATS_TEST_DIRNAME/helpers/clients.py"
# every limit, as nginx passes them, for requests sent straight to the pool's socket
LIMIT_PARAMS=(CODEBOX_EXECUTION_TIMEOUT_SECONDS=30 CODEBOX_MAX_CONCURRENT_EXECUTIONS=2
	CODEBOX_MAX_CODE_BYTES=65536 CODEBOX_MAX_STDOUT_BYTES=65536 CODEBOX_MAX_STDERR_BYTES=65536
	CODEBOX_MAX_RESULT_BYTES=65536 CODEBOX_MAX_STDIN_BYTES=65536 CODEBOX_MEMORY_BYTES=1073741824
	CODEBOX_MAX_PROCESSES=64 CODEBOX_DISK_BYTES=67108864 CODEBOX_CPU_MILLICORES=1000)

admission_conf() {
	conf_variant 's/CODEBOX_MAX_CONCURRENT_EXECUTIONS  20;/CODEBOX_MAX_CONCURRENT_EXECUTIONS  2;/' \
		's/client_header_timeout    10s;/client_header_timeout    3s;/' \
		's/client_body_timeout      10s;/client_body_timeout      3s;/' \
		's/codebox_body_deadline    20s;/codebox_body_deadline    5s;/'
}

setup_file() {
	ADMISSION_CONF=$(admission_conf)
	export ADMISSION_CONF
	stack_start --conf-dir "$ADMISSION_CONF"
}

teardown_file() {
	stack_stop
}

# after each test: resume workers a failed test left stopped, stop a stack of the test's own
# that a failure left running, and show the logs when it failed
teardown() {
	if [[ -s $BATS_TEST_TMPDIR/wedger ]]; then
		kill "$(cat "$BATS_TEST_TMPDIR/wedger")" 2>/dev/null || true
	fi
	if [[ -s $BATS_TEST_TMPDIR/stopped ]]; then
		# shellcheck disable=SC2046
		kill -CONT $(cat "$BATS_TEST_TMPDIR/stopped") 2>/dev/null || true
	fi
	if [[ ${BATS_TEST_COMPLETED:-} != 1 && -n ${STACK_DIR:-} ]]; then
		stack_logs
	fi
	if [[ -n ${OWN_STACK:-} ]] && kill -0 "$STACK_PID" 2>/dev/null; then
		kill -INT -- "-$STACK_PID" 2>/dev/null || kill -TERM "$STACK_PID" 2>/dev/null || true
		kill -INT -- "-$STACK_PID" 2>/dev/null || true
		wait "$STACK_PID" 2>/dev/null || true
		wait_for "the test's own stack to stop" 300 marker_gone "$STACK_DIR" || true
	fi
	if [[ -n ${OWN_STACK_TMP:-} ]]; then
		rm -rf "$OWN_STACK_TMP"
	fi
	if [[ -n ${SMALL_DISK:-} ]]; then
		! mountpoint -q "$SMALL_DISK" || umount "$SMALL_DISK" || true
		rmdir "$SMALL_DISK" 2>/dev/null || true
	fi
	openapi_teardown
}

port() {
	echo "${BASE##*:}"
}

clients() {
	"$PY" "$CLIENTS" "$@"
}

# ready BASE: /readyz answers 200
ready() {
	[[ $(curl -s -o /dev/null -w '%{http_code}' "$1/readyz") == 200 ]]
}

# own_stack_start: a stack of this test's own, started as a terminal starts `make run`: in a
# process group of its own, with SIGINT at its default (a script's background job would
# ignore it), so that the test can signal the group as Ctrl-C does. Replaces STACK_DIR,
# STACK_PID and BASE for this test only (each test runs in a subshell).
own_stack_start() { # [DIR]: its runtime directory (default: a new one under /tmp)
	local port agent_port metrics_port
	if [[ -n ${1:-} ]]; then
		STACK_DIR=$1
	else
		STACK_DIR=$(mktemp -d /tmp/codebox-test.XXXXXX)
		OWN_STACK_TMP=$STACK_DIR # teardown removes it
	fi
	# never codebox-run.sh's defaults: another pass (test-lanes.sh runs two) may hold them
	codebox_stack_ports
	local preload
	read -ra preload <<<"$(preload_env)"
	env "${preload[@]}" "$PY" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.setpgid(0, 0)
os.execv(sys.argv[1], sys.argv[1:])' "$ROOT/scripts/codebox-run.sh" --port "$port" \
		--agent-port "$agent_port" --metrics-port "$metrics_port" --rundir "$STACK_DIR" \
		--pool "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --quiet \
		--conf-dir "$ADMISSION_CONF" --run-uid-base "$(uid_base_for "$port")" \
		>"$BATS_TEST_TMPDIR/run.out" 2>&1 3>&- &
	STACK_PID=$!
	OWN_STACK=1
	BASE="http://127.0.0.1:$port"
	AGENT_BASE="http://127.0.0.1:$agent_port"
	AGENT=$AGENT_BASE # its answers are checked against port 8888's document
	METRICS="http://127.0.0.1:$metrics_port"
	wait_for "the stack" 1200 ready "$BASE"
}

# own_stack_wait: waits for the own stack's script to exit; sets $own_status. Bounded by the
# drain; nothing of the stack may be left.
own_stack_wait() {
	local i
	for ((i = 0; i < 900; i++)); do
		kill -0 "$STACK_PID" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$STACK_PID" 2>/dev/null; then
		# bounded: a stack that does not end is a failure, never a hung suite
		echo "the stack did not exit within 90 s" >&2
		kill -KILL -- "-$STACK_PID" 2>/dev/null || kill -KILL "$STACK_PID" 2>/dev/null || true
		wait "$STACK_PID" 2>/dev/null || true
		return 1
	fi
	own_status=0
	wait "$STACK_PID" || own_status=$?
	wait_for "nothing of the stack left" 100 marker_gone "$STACK_DIR"
}

# sleepers N SECONDS TAG: N background POSTs of a program that sleeps, then prints TAG;
# their status and body land in $BATS_TEST_TMPDIR/TAG.N.{code,body}
sleepers() {
	local i
	for ((i = 1; i <= $1; i++)); do
		curl -s --max-time 90 -o "$BATS_TEST_TMPDIR/$3.$i.body" -w '%{http_code}' \
			--data-binary "{\"code\":\"import time; time.sleep($2); print('$3')\"}" \
			"$BASE/execute" >"$BATS_TEST_TMPDIR/$3.$i.code" 3>&- &
	done
}

# backlog_holds_one: a connection waits in the pool socket's listen backlog
backlog_holds_one() {
	ss -xlH | awk -v s="$STACK_DIR/fcgi.sock" '$5 == s && $3 > 0 { f = 1 } END { exit !f }'
}

backlog_empty() {
	ss -xlH | awk -v s="$STACK_DIR/fcgi.sock" '$5 == s && $3 == 0 { f = 1 } END { exit !f }'
}

# runs_at_least N: N runs hold execution slots (the pool's in-flight gauge: a run directory
# may also be a sandbox built ahead, which holds none)
runs_at_least() {
	(($(curl -s --max-time 5 "$METRICS/metrics" | awk '/^codebox_executions_in_flight / { print $2 }') >= $1))
}

# both_slots_work: two runs at once are both admitted and answered
both_slots_work() {
	local out
	out=$(clients loop "$(port)" 2 1 '{"code":"import time; time.sleep(0.5); print(1)"}' close)
	[[ $out == "200:2" ]] || {
		echo "two runs at once got: $out" >&2
		return 1
	}
}

@test "admission: a run whose client hangs up is killed at once, and its slot is free again" {
	local m="codebox-abandon-$RANDOM$RANDOM" ms
	marker_body "$m" 'import time; time.sleep(60)' >"$BATS_TEST_TMPDIR/req"
	hang_up_on "$(port)" "$BATS_TEST_TMPDIR/req" "$m" run
	((ms < 3000))
	wait_for "the worker to log it" 100 grep -q "the client left during the run" \
		"$STACK_DIR/logs/pool.log"
	# both slots are free: two runs at once are admitted
	both_slots_work
}

@test "admission: a request whose client left while it waited for a worker is not run" {
	local m="codebox-queued-$RANDOM$RANDOM" pids client runs_before
	marker_body "$m" 'print("should not run")' >"$BATS_TEST_TMPDIR/req"
	runs_before=$(grep -c "execute outcome=" "$STACK_DIR/logs/pool.log" || true)
	pids=$(worker_pids)
	echo "$pids" >"$BATS_TEST_TMPDIR/stopped"
	# shellcheck disable=SC2086
	kill -STOP $pids
	"$PY" "$CLIENTS" hangup "$(port)" "@$BATS_TEST_TMPDIR/req" 60 3>&- &
	client=$!
	# nginx has passed it to the pool's socket, where it waits in the backlog
	wait_for "nginx to pass the request on" 100 backlog_holds_one
	kill "$client"
	wait "$client" || true
	wait_for "nginx to log the hang-up" 100 grep -q '"status":499' "$STACK_DIR/logs/access.log"
	# shellcheck disable=SC2086
	kill -CONT $pids
	wait_for "a worker to take it off the socket's backlog" 100 backlog_empty
	# a worker that reads the whole request sees its client gone and says so; when nginx
	# closed the connection before it had written all of it (a loaded machine), libfcgi
	# drops it without a word: not run either way
	wait_for "a worker to say so" 30 grep -q "the client left before the run started" \
		"$STACK_DIR/logs/pool.log" || echo "no worker read the whole request: dropped" >&2
	assert_equal "$(grep -c "execute outcome=" "$STACK_DIR/logs/pool.log" || true)" "$runs_before"
	both_slots_work
	# the count above counts runs: the two just made are in it
	assert_equal "$(grep -c "execute outcome=" "$STACK_DIR/logs/pool.log")" $((runs_before + 2))
}

@test "admission: slow uploads hold connections, never execution slots; a stalled body is dropped" {
	# four clients trickle a byte every 2 s (under client_body_timeout, 3 s) for 4 s (under
	# codebox_body_deadline, 5 s): more than there are slots
	clients slowbody "$(port)" 4 4 >"$BATS_TEST_TMPDIR/slow" 3>&- &
	local slow=$! t0
	sleep 1 # let them connect; their count is what matters, not the moment
	both_slots_work
	both_slots_work
	wait "$slow"
	# a body that stalls longer than client_body_timeout is dropped (nginx closes it)
	t0=$EPOCHREALTIME
	run -0 "$PY" -c 'import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=30)
s.sendall(b"POST /execute HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
t = time.monotonic()
while s.recv(4096):
    pass
print(round(time.monotonic() - t))' "$(port)"
	echo "a stalled body was dropped after ${output} s"
	((output >= 2 && output <= 10))
	both_slots_work
}

@test "admission: a body still trickling in at codebox_body_deadline gets a JSON 408, and never runs" {
	local runs_before framing
	runs_before=$(grep -c "execute outcome=" "$STACK_DIR/logs/pool.log" || true)
	for framing in length chunked; do
		# a byte every 0.5 s never stalls past client_body_timeout (3 s); 40 bytes would take
		# 20 s, and the deadline (5 s) ends it
		run -0 clients trickle "$(port)" '{"code":"print(\"never run: too late\")"}' 0.5 "$framing"
		echo "$framing: $output"
		[[ ${lines[0]} =~ ^status\ 408\ after\ ([0-9.]+)\ s$ ]]
		assert_equal "${lines[1]}" '{"error":"invalid_request","message":"the request was not received in time"}'
		# at the deadline, not at client_body_timeout's pace or the body's end
		(($(printf '%.0f' "${BASH_REMATCH[1]}") >= 4 && $(printf '%.0f' "${BASH_REMATCH[1]}") <= 8))
	done
	run -0 grep -c '"status":408,' "$STACK_DIR/logs/access.log"
	((output >= 2))
	assert_equal "$(grep -c "execute outcome=" "$STACK_DIR/logs/pool.log" || true)" "$runs_before"
	refute grep -q "never run" "$STACK_DIR/logs/pool.log"
	both_slots_work
	# the count above counts runs: the two just made are in it
	assert_equal "$(grep -c "execute outcome=" "$STACK_DIR/logs/pool.log")" $((runs_before + 2))
}

@test "admission: the body deadline bounds the upload only: a slow body in time, and a run past it, succeed" {
	# 22 bytes at 0.1 s: whole in about 2 s, inside the 5 s deadline
	run -0 clients trickle "$(port)" '{"code":"print(6*7)"}' 0.1 chunked
	assert_line --index 0 --regexp '^status 200 after '
	assert_line --index 1 --partial '"stdout":"42\n"'
	# the body is whole at once; the run then outlasts the deadline
	run -0 curl -s --max-time 30 -d '{"code":"import time; time.sleep(6); print(\"late\")"}' "$BASE/execute"
	assert_output --partial '"status":"succeeded"'
	assert_output --partial '"stdout":"late\n"'
}

@test "admission: below capacity nobody gets a 429, whatever the client's connection habits" {
	# exactly as many clients as slots, each sending its next request the moment it has the
	# reply: on a new connection each time, then on one kept-alive connection
	run -0 clients loop "$(port)" 2 15 '{"code":"print(1)"}' close
	assert_output "200:30"
	run -0 clients loop "$(port)" 2 15 '{"code":"print(1)"}' keepalive
	assert_output "200:30"
}

@test "admission: above capacity the pool answers nginx's own 429 at once" {
	sleepers 2 3 busy
	wait_for "two runs in flight" 100 runs_at_least 2
	local t0=$EPOCHREALTIME ms
	post '{"code":"print(1)"}'
	ms=$(((${EPOCHREALTIME/./} - ${t0/./}) / 1000))
	assert_equal "$code" 429
	assert_equal "$(header Retry-After)" 1
	assert_equal "$(header Codebox-Busy)" pool
	assert [ -n "$(header X-Request-Id)" ]
	assert_equal "$reply" \
		'{"error":"sandbox_busy","message":"all execution slots are in use; retry shortly"}'
	((ms < 1000))
	run -0 grep -c "all 2 execution slots are in use: 429" "$STACK_DIR/logs/pool.log"
	wait
	assert_equal "$(cat "$BATS_TEST_TMPDIR/busy.1.code") $(cat "$BATS_TEST_TMPDIR/busy.2.code")" "200 200"
}

@test "admission: killed nginx workers cost no capacity" {
	local master round w
	master=$(cat "$STACK_DIR/nginx.pid")
	for round in 1 2 3; do
		sleepers 2 30 "round$round"
		wait_for "two runs in flight" 100 runs_at_least 2
		for w in $(pgrep -P "$master"); do
			kill -KILL "$w"
		done
		wait
		wait_for "nginx's workers to be back" 100 ready "$BASE"
	done
	# the runs of the dropped requests were killed with their connections, and nginx's new
	# workers count from zero: full capacity, at once
	wait_for "the abandoned runs to end" 100 no_run_leftovers
	both_slots_work
	run -0 curl -s -o /dev/null -w '%{http_code}' "$BASE/readyz"
	assert_output 200
}

@test "admission: a worker killed mid-run gives its execution slot back" {
	local m="codebox-slot-$RANDOM$RANDOM" worker prog
	marker_body "$m" 'import time; time.sleep(60)' >"$BATS_TEST_TMPDIR/req"
	curl -s --max-time 30 -o /dev/null --data-binary @"$BATS_TEST_TMPDIR/req" "$BASE/execute" 3>&- &
	wait_for "the run to start" 100 pgrep -f -- "$m"
	# the run's worker (warm: the one holding its init's pidfd)
	prog=$(pgrep -f -- "$m" | head -1)
	worker=$(init_worker "$(ps -o ppid= -p "$prog" | tr -d ' ')")
	[[ -n $worker ]]
	kill -KILL "$worker"
	wait
	wait_for "the supervisor to notice" 100 grep -q "died holding an execution slot" \
		"$STACK_DIR/logs/pool.log"
	wait_for "the orphaned run to die" 50 marker_gone "$m"
	both_slots_work
}

# ms_since T0: milliseconds since $EPOCHREALTIME was T0
ms_since() {
	echo $(((${EPOCHREALTIME/./} - ${1/./}) / 1000))
}

@test "admission: a stuck admission lock makes /readyz and the pool's probe 503 within a second, /execute 503, not a hang" {
	[[ -z ${CODEBOX_BASE:-} ]] || skip "holds the lock from the pool's host, as root"
	local wedger t0 ms
	# a process of the test's own holds the execution slots' lock and stays alive: what a
	# holder that is stuck looks like to the workers (tests/helpers/wedge-slots.py says why
	# this way, and why no request can do it)
	"$PY" "$BATS_TEST_DIRNAME/helpers/wedge-slots.py" "$(pool_pid)" \
		>"$BATS_TEST_TMPDIR/wedge.out" 2>&1 3>&- &
	wedger=$!
	echo "$wedger" >"$BATS_TEST_TMPDIR/wedger"
	wait_for "the lock to be held" 100 grep -qsx locked "$BATS_TEST_TMPDIR/wedge.out"
	# readiness goes through the lock: 503 JSON, in about SLOTS_LOCK_WAIT_MS (1 s)
	t0=$EPOCHREALTIME
	request --max-time 20 "$BASE/readyz"
	ms=$(ms_since "$t0")
	assert_equal "$code" 503
	assert_equal "$(field .error)" sandbox_unavailable
	assert_equal "$(field .message)" "the sandbox cannot admit runs: its admission lock is stuck; see the service log"
	((ms >= 900 && ms < 4000)) || fail "/readyz took $ms ms"
	# so does the pool container's liveness probe, on the socket
	run -1 "$ROOT/image/codebox-probe" "$STACK_DIR/fcgi.sock"
	assert_output --partial "codebox-probe: the pool on $STACK_DIR/fcgi.sock cannot admit runs:"
	assert_output --partial '"error":"sandbox_unavailable"'
	# a run is refused with the same error after the same bound, not held until nginx's 504
	t0=$EPOCHREALTIME
	post '{"code":"print(1)"}'
	ms=$(ms_since "$t0")
	assert_equal "$code" 503
	assert_equal "$(field .error)" sandbox_unavailable
	((ms < 4000)) || fail "/execute took $ms ms"
	# nginx's own liveness keeps its meaning: nginx answers
	run -0 curl -s --max-time 10 "$BASE/healthz"
	assert_output '{"status":"ok"}'
	run -0 grep -c "readyz: the execution slots' lock was not free within 1000 ms" \
		"$STACK_DIR/logs/pool.log"
	run -0 grep -c "the pool cannot admit runs (503)" "$STACK_DIR/logs/pool.log"
	# the holder dies holding it: the next locker takes it (robust), and the pool admits
	kill "$wedger"
	wait "$wedger" || true
	wait_for "readiness" 100 ready "$BASE"
	run -0 "$ROOT/image/codebox-probe" "$STACK_DIR/fcgi.sock"
	both_slots_work
}

@test "flood: 4,000 idle connections are held without affecting others, then dropped by the header timeout" {
	clients flood "$(port)" 4000 8 >"$BATS_TEST_TMPDIR/flood" 2>&1 3>&- &
	local flood=$!
	wait_for "4,000 connections" 300 grep -q "opened 4000" "$BATS_TEST_TMPDIR/flood"
	# others are served while they are held
	run -0 curl -s --max-time 10 "$BASE/healthz"
	assert_output '{"status":"ok"}'
	post '{"code":"print(6 * 7)"}'
	assert_equal "$code" 200
	wait "$flood"
	# held 8 s against client_header_timeout 3 s: nginx closed every one of them
	assert_equal "$(tail -n 1 "$BATS_TEST_TMPDIR/flood")" 0
	# a burst of 2,000 new connections at once: every one is answered
	run -0 clients burst "$(port)" 2000
	assert_output "answered 2000 of 2000"
	both_slots_work
}

@test "errors: malformed request lines get a JSON error body, never HTML" {
	local req
	for req in 'GET /%zz HTTP/1.1\r\nHost: x\r\n\r\n' 'GET /%00 HTTP/1.1\r\nHost: x\r\n\r\n' \
		'GET /../.. HTTP/1.1\r\nHost: x\r\n\r\n' 'GET /\x01\x7f HTTP/1.1\r\nHost: x\r\n\r\n' \
		'garbage\r\n\r\n' '\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n' \
		'GET / HTTP/9.9\r\nHost: x\r\n\r\n' 'GET /%zz\r\n' 'GET /{} HTTP/1.1\r\nHost: x\r\n\r\n' \
		'GET /healthz HTTP/1.1\r\nHost: x\r\nX: {}\r\n\r\n' 'GET /healthz HTTP/1.1\r\n\r\n' \
		'POST /execute HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n'; do
		run -0 clients raw "$(port)" "$req" 20000
		echo "$req -> ${lines[0]} ${lines[1]}"
		[[ ${lines[0]} =~ ^(400|404|405|414|501|505|None)$ ]]
		jq -e '(.error | type == "string") and (.message | type == "string") and (keys | length == 2)' \
			<<<"${lines[1]}" >/dev/null
	done
	run -0 curl -s "$BASE/healthz"
	assert_output '{"status":"ok"}'
}

@test "socket: only nginx's user can connect, and forged limits are capped at the pool's ceilings" {
	local sock="$STACK_DIR/fcgi.sock"
	if ((EUID != 0)); then
		# a non-root pool: the socket is its own user's alone
		run -0 stat -c '%a %U' "$sock"
		assert_output "600 $(id -un)"
		skip "the attack as another user needs root"
	fi
	run -0 stat -c '%a %U' "$sock"
	assert_output "600 nobody"
	# a local user in nginx's group (nogroup) cannot connect
	run -1 setpriv --reuid 12345 --regid 65534 --clear-groups "$PY" "$CLIENTS" fcgi "$sock" isolation ''
	assert_output --partial "PermissionError"
	# whoever does reach the socket: 64 GiB, 4,096 processes, an hour are capped
	run -0 clients fcgi "$sock" isolation '' CODEBOX_MEMORY_BYTES=68719476736 \
		CODEBOX_MAX_PROCESSES=4096 CODEBOX_EXECUTION_TIMEOUT_SECONDS=3600 \
		CODEBOX_DISK_BYTES=68719476736 CODEBOX_MAX_CONCURRENT_EXECUTIONS=1024 \
		CODEBOX_MAX_CODE_BYTES=65536 CODEBOX_MAX_STDOUT_BYTES=65536 CODEBOX_MAX_STDERR_BYTES=65536 \
		CODEBOX_MAX_RESULT_BYTES=65536 CODEBOX_MAX_STDIN_BYTES=65536 CODEBOX_CPU_MILLICORES=64000
	reply=$(sed -n '/^{/,$p' <<<"$output")
	assert_equal "$(jq -c '.limits | [.memoryBytes, .maxProcesses, .diskBytes]' <<<"$reply")" \
		"[1073741824,64,67108864]"
	run -0 grep -c "a request's limits were capped" "$STACK_DIR/logs/pool.log"
	# and a forged run is held to them: 64 MiB of stdout asked for, 64 KiB kept
	run -0 clients fcgi "$sock" execute '{"code":"print(\"x\" * 100000)"}' "${LIMIT_PARAMS[@]}" \
		CODEBOX_MAX_STDOUT_BYTES=67108864
	reply=$(sed -n '/^{/,$p' <<<"$output")
	assert_equal "$(jq -c '[.status, .truncated, (.stdout | length)]' <<<"$reply")" \
		'["succeeded",true,65536]'
	run -0 curl -s "$BASE/healthz"
	assert_output '{"status":"ok"}'
}

@test "body: one limit and one message, from nginx and from the pool alike" {
	local want='{"error":"request_too_large","message":"the request body is larger than this server accepts (at most 1048576 bytes)"}'
	head -c 1048577 /dev/zero | tr '\0' ' ' >"$BATS_TEST_TMPDIR/big"
	request --data-binary @"$BATS_TEST_TMPDIR/big" -H 'Content-Type: application/json' "$BASE/execute"
	assert_equal "$code" 413
	assert_equal "$reply" "$want"
	if ((EUID != 0)) || [[ ! -w $STACK_DIR/fcgi.sock ]]; then
		skip "the socket is not ours to reach"
	fi
	# straight to the pool's socket, past nginx: the same bound, the same answer
	run -0 clients fcgi "$STACK_DIR/fcgi.sock" execute "@$BATS_TEST_TMPDIR/big" "${LIMIT_PARAMS[@]}"
	assert_output --partial "Status: 413"
	assert_output --partial "$want"
	# one byte less is not too large (it is merely not JSON)
	head -c 1048576 /dev/zero | tr '\0' ' ' >"$BATS_TEST_TMPDIR/max"
	request --data-binary @"$BATS_TEST_TMPDIR/max" -H 'Content-Type: application/json' "$BASE/execute"
	assert_equal "$code" 400
}

@test "stop: Ctrl-C answers every run in flight, then the stack exits 0 with nothing left" {
	own_stack_start
	sleepers 2 2 ctrlc
	wait_for "two runs in flight" 100 runs_at_least 2
	kill -INT -- "-$STACK_PID"
	# new requests are refused or answered with a JSON error while it drains (bounded
	# generously: the other lane loads the machine)
	wait_for "the drain to start" 300 grep -q "shutting down: draining" "$STACK_DIR/logs/pool.log" || {
		cat "$BATS_TEST_TMPDIR/run.out" >&2
		return 1
	}
	code=$(curl -s -o "$BATS_TEST_TMPDIR/late" -w '%{http_code}' --max-time 10 \
		--data-binary '{"code":"print(1)"}' "$BASE/execute" || true)
	[[ $code == 000 || $code == 502 || $code == 503 ]]
	[[ $code == 000 ]] || jq -e .error "$BATS_TEST_TMPDIR/late"
	own_stack_wait
	assert_equal "$own_status" 0
	wait
	local i
	for i in 1 2; do
		assert_equal "$(cat "$BATS_TEST_TMPDIR/ctrlc.$i.code")" 200
		assert_equal "$(jq -r .stdout "$BATS_TEST_TMPDIR/ctrlc.$i.body")" ctrlc
	done
	assert [ ! -e "$STACK_DIR/fcgi.sock" ]
	assert [ ! -e "$STACK_DIR/runs" ]
	rm -rf "$STACK_DIR"
}

@test "stop: a second Ctrl-C stops at once" {
	own_stack_start
	sleepers 2 60 twice
	wait_for "two runs in flight" 100 runs_at_least 2
	kill -INT -- "-$STACK_PID"
	wait_for "the drain to start" 50 grep -q "shutting down: draining" "$STACK_DIR/logs/pool.log"
	local t0=$EPOCHREALTIME
	kill -INT -- "-$STACK_PID"
	own_stack_wait
	(((${EPOCHREALTIME/./} - ${t0/./}) / 1000000 < 15))
	wait
	rm -rf "$STACK_DIR"
}

@test "stop: SIGTERM to the stack's process group, or to the pool alone, drains too" {
	own_stack_start
	sleepers 2 2 group
	wait_for "two runs in flight" 100 runs_at_least 2
	kill -TERM -- "-$STACK_PID"
	own_stack_wait
	assert_equal "$own_status" 0
	wait
	assert_equal "$(cat "$BATS_TEST_TMPDIR/group.1.code") $(cat "$BATS_TEST_TMPDIR/group.2.code")" "200 200"
	rm -rf "$STACK_DIR"

	own_stack_start
	sleepers 1 2 pool
	wait_for "a run in flight" 100 runs_at_least 1
	kill -TERM "$(pool_pid)"
	own_stack_wait
	assert_equal "$own_status" 0
	wait
	assert_equal "$(cat "$BATS_TEST_TMPDIR/pool.1.code")" 200
	run -0 grep -c "the worker pool was stopped" "$BATS_TEST_TMPDIR/run.out"
	rm -rf "$STACK_DIR"
}

@test "supervision: a SIGKILLed pool stops the stack with status 1, and the next start sweeps what it left" {
	own_stack_start
	local dead left
	sleepers 2 2 killed
	wait_for "two runs in flight" 100 runs_at_least 2
	dead=$(pool_pid)
	kill -KILL "$dead"
	own_stack_wait
	assert_equal "$own_status" 1
	run -0 grep "the worker pool died (killed by signal 9)" "$BATS_TEST_TMPDIR/run.out"
	wait
	# the runs in flight finished and were answered: the workers outlive their master for that
	assert_equal "$(cat "$BATS_TEST_TMPDIR/killed.1.code") $(cat "$BATS_TEST_TMPDIR/killed.2.code")" "200 200"
	# the stack removed the socket the dead pool could not (issue 24)
	assert [ ! -e "$STACK_DIR/fcgi.sock" ]
	# the next start on the same directory: a stale socket (as a killed stack leaves one),
	# and the dead pool's cgroups, swept
	/usr/bin/python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' \
		"$STACK_DIR/fcgi.sock"
	assert [ -S "$STACK_DIR/fcgi.sock" ]
	local dir=$STACK_DIR port preload
	port=$(free_port)
	read -ra preload <<<"$(preload_env)"
	env "${preload[@]}" "$ROOT/scripts/codebox-run.sh" --port "$port" --rundir "$dir" \
		--agent-port "$(free_port)" --metrics-port "$(free_port)" \
		--pool "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --quiet --conf-dir "$ADMISSION_CONF" \
		--run-uid-base "$(uid_base_for "$port")" >"$BATS_TEST_TMPDIR/run2.out" 2>&1 3>&- &
	STACK_PID=$!
	BASE="http://127.0.0.1:$port"
	wait_for "the new stack" 1200 ready "$BASE"
	post '{"code":"print(1)"}'
	assert_equal "$code" 200
	# memory, pids and cpu (the cgroup2 tree's), wherever this host mounts them
	# (find fails when another stack removes a group of its own during the walk)
	left=$(find /sys/fs/cgroup -maxdepth 5 -type d -name "codebox-$dead" 2>/dev/null || true)
	if [[ -n $left ]]; then
		echo "the dead pool's cgroups are still there: $left" >&2
		return 1
	fi
	kill -TERM "$STACK_PID"
	own_stack_wait
	rm -rf "$dir"
}

# small_disk OPTIONS: a tmpfs of its own (mount OPTIONS) at $SMALL_DISK, unmounted by teardown
small_disk() {
	SMALL_DISK=$(mktemp -d /tmp/codebox-small.XXXXXX)
	mount -t tmpfs -o "mode=0711,$1" codebox-small "$SMALL_DISK"
}

# whole_lines FILE: every line of FILE is a JSON object (none torn)
whole_lines() {
	"$PY" -c 'import json, sys
for n, line in enumerate(open(sys.argv[1], errors="replace"), 1):
    try:
        assert isinstance(json.loads(line), dict)
    except Exception:
        sys.exit("line %d is not whole: %r" % (n, line[:200]))' "$1"
}

@test "faults: a runtime directory whose disk is full: every line of pool.log is whole, and runs still answer" {
	small_disk size=16m
	own_stack_start "$SMALL_DISK/stack"
	# every block taken
	dd if=/dev/zero of="$SMALL_DISK/fill" bs=4k 2>/dev/null || true
	run -0 df --output=avail "$SMALL_DISK"
	assert_equal "$(tail -1 <<<"$output" | tr -d ' ')" 0
	local round
	for ((round = 0; round < 20; round++)); do
		execute 'print(1)'
		assert_equal "$code" 200
		run -0 curl -s --max-time 60 -H 'Content-Type: application/json' \
			-d '{"command": "echo hi"}' "$AGENT_BASE/execute"
		assert_equal "$(jq -r .exit_code <<<"$output")" 0
	done
	rm -f "$SMALL_DISK/fill"
	kill -TERM "$STACK_PID"
	own_stack_wait
	run -0 whole_lines "$SMALL_DISK/stack/logs/pool.log"
}

@test "faults: a runtime directory out of inodes: port 8888 says the service cannot admit (503), never that its slots are busy (429)" {
	small_disk size=64m,nr_inodes=4000
	own_stack_start "$SMALL_DISK/stack"
	local n=0
	mkdir "$SMALL_DISK/fill"
	while ((n < 10000)) && : >"$SMALL_DISK/fill/$n" 2>/dev/null; do n=$((n + 1)); done
	request -H 'Content-Type: application/json' -d '{"command": "echo hi"}' "$AGENT_BASE/execute"
	assert_equal "$code" 503
	assert_equal "$(field .error)" sandbox_unavailable
	assert_equal "$(field .message)" "the service cannot admit commands right now (its runtime directory could not be written); retry shortly"
	# room again: the next command runs
	rm -rf "$SMALL_DISK/fill"
	run -0 curl -s --max-time 60 -H 'Content-Type: application/json' \
		-d '{"command": "echo hi"}' "$AGENT_BASE/execute"
	assert_equal "$(jq -r .exit_code <<<"$output")" 0
	kill -TERM "$STACK_PID"
	own_stack_wait
	run -0 whole_lines "$SMALL_DISK/stack/logs/pool.log"
}

# nginx_busy: nginx's own 429s as GET /metrics counts them; nginx_busy_above N: more than N
nginx_busy() {
	curl -s "$METRICS/metrics" | awk '$1 == "codebox_busy_rejections_total{source=\"nginx\"}" { print $2 }'
}
nginx_busy_above() {
	(($(nginx_busy) > $1))
}

@test "admission: nginx's own 429 (limit_conn, before any worker) says so: Codebox-Busy: nginx" {
	# one nginx worker, whose outer bound is the pool's two slots: a third request is nginx's
	local conf
	conf=$(conf_variant 's/CODEBOX_MAX_CONCURRENT_EXECUTIONS  20;/CODEBOX_MAX_CONCURRENT_EXECUTIONS  2;/' \
		's/limit_conn codebox_execute 100;/limit_conn codebox_execute 2;/' \
		's/^worker_processes  auto;/worker_processes  1;/')
	ADMISSION_CONF=$conf own_stack_start
	sleepers 2 3 outer
	wait_for "two runs in flight" 100 runs_at_least 2
	local busy_before
	busy_before=$(nginx_busy)
	post '{"code":"print(1)"}'
	assert_equal "$code" 429
	assert_equal "$(header Retry-After)" 1
	assert_equal "$(header Codebox-Busy)" nginx
	assert_equal "$reply" \
		'{"error":"sandbox_busy","message":"all execution slots are in use; retry shortly"}'
	run -1 grep -c "execution slots are in use: 429" "$STACK_DIR/logs/pool.log"
	wait_for "nginx's 429 counted" 50 nginx_busy_above "$busy_before"
	# the stack drains: both runs admitted are answered
	kill -TERM "$STACK_PID"
	own_stack_wait
	wait
	assert_equal "$(cat "$BATS_TEST_TMPDIR/outer.1.code") $(cat "$BATS_TEST_TMPDIR/outer.2.code")" "200 200"
}
