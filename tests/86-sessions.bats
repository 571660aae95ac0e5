#!/usr/bin/env bats
# Sessions (API.md "Sessions"): an interpreter that keeps its variables, imports and files
# between executions, isolated per session as a run is, bounded (count, idle time, lifetime,
# per-execution timeout, memory), bound to its bearer token, closed by DELETE, by its bounds,
# by a killed program, and by the pool's stop. Warm only: the cold pass checks the 503.

load helpers/stack
load helpers/sessions

setup_file() {
	# room for 4 sessions: the suite never holds more at once, and its last test fills them
	stack_start --conf-dir "$(conf_variant 's/CODEBOX_MAX_SESSIONS  *8;/CODEBOX_MAX_SESSIONS  4;/')"
}

teardown_file() {
	stack_stop
}

teardown() {
	session_teardown
}

@test "sessions: cold runs have none: POST /sessions is a clear 503" {
	[[ ${CODEBOX_WARM:-1} == 0 ]] || skip "warm stack"
	sreq POST /sessions
	assert_equal "$code" 503
	assert_equal "$(field .error)" sandbox_unavailable
	assert_regex "$(field .message)" "warm interpreters"
}

@test "sessions: state persists: variables, imports, files; a final expression comes back as value" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	session_new
	assert_equal "${#sid}" 32
	assert_equal "$(field .idleTimeoutSeconds)" 600
	run_in "$sid" 'import numpy as np
x = np.arange(5)
open("data.csv", "w").write("a,b\n1,2\n")
print("made")
x.sum()'
	assert_equal "$code" 200
	assert_equal "$(field .status)" succeeded
	assert_equal "$(field .stdout)" made
	assert_equal "$(field .value)" 10
	assert_equal "$(field .session.open)" true
	run_in "$sid" 'x * 2'
	assert_equal "$(field .value)" "array([0, 2, 4, 6, 8])"
	run_in "$sid" 'y = open("data.csv").read().splitlines()[1]
print(y)'
	assert_equal "$(field .stdout)" "1,2"
	assert_equal "$(field .value)" null
	# the contract's keys in their order, then value, the notebook's keys and session
	run -0 jq -c 'keys_unsorted' <<<"$reply"
	assert_output '["status","exitCode","stdout","stderr","result","resultError","durationMs","truncated","value","executionCount","outputs","error","session"]'
	# an exception is the cell's failure, with the cell's traceback only; state survives it
	run_in "$sid" 'z = 1
1/0'
	assert_equal "$(field .status)" failed
	assert_equal "$(field .exitCode)" 1
	assert_regex "$(field .stderr)" '^Traceback \(most recent call last\):
  File "/sandbox/run-[0-9a-f]+/main.py", line 2, in <module>
    1/0
    ~\^~
ZeroDivisionError: division by zero$'
	# a cell that changes directory does not lose the session's own main.py
	run_in "$sid" 'import os; os.makedirs("sub", exist_ok=True); os.chdir("sub")'
	run_in "$sid" 'os.getcwd().endswith("/sub"), z'
	assert_equal "$(field .value)" "(True, 1)"
	run_in "$sid" 'os.chdir("..")'
	run_in "$sid" 'sys_exit = __import__("sys").exit(3)'
	assert_equal "$(field .exitCode)" 3
	run_in "$sid" 'z, x.tolist()' '{stdin: "typed"}'
	assert_equal "$(field .value)" "(1, [0, 1, 2, 3, 4])"
	run_in "$sid" 'input()' '{stdin: "typed\n"}'
	assert_equal "$(field .value)" "'typed'"
	# result.json and files as on /execute: what this execution made, not what earlier ones did
	run_in "$sid" 'import json
json.dump({"n": int(x.sum())}, open("result.json", "w"))
open("new.txt", "w").write("fresh")' '{artifacts: true}'
	assert_equal "$(field .result.n)" 10
	run -0 jq -c '[.artifacts[].path]' <<<"$reply"
	assert_output '["new.txt"]'
	run_in "$sid" 'open("in.txt").read()' '{files: [{path: "in.txt", content: "given"}]}'
	assert_equal "$(field .value)" "'given'"
	sreq GET "/sessions/$sid"
	assert_equal "$code" 200
	assert_equal "$(field .state)" idle
	assert_equal "$(field .executions)" 12
	sreq DELETE "/sessions/$sid"
	assert_equal "$code" 204
	sreq DELETE "/sessions/$sid"
	assert_equal "$code" 404
	run_in "$sid" '1'
	assert_equal "$code" 404
	assert_equal "$(field .error)" not_found
}

@test "sessions: two sessions never see each other, concurrently" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local a b i
	session_new
	a=$sid
	session_new
	b=$sid
	for i in 1 2 3; do
		run_in "$a" "secret = 's3cr3t-$i'; open('secret.txt', 'w').write(secret)" &
		run_in "$b" "import os, glob; print('secret' in globals(), os.path.exists('secret.txt'), glob.glob('/tmp/*'), glob.glob('/sandbox/*'))" &
		wait
	done
	run_in "$b" "import os; ('secret' in globals(), os.path.exists('secret.txt'), os.getcwd())"
	local cwd_b
	cwd_b=$(field .value)
	assert_regex "$cwd_b" "^\(False, False, '/sandbox/run-[0-9a-f]+'\)$"
	run_in "$a" "import os; os.getcwd()"
	[[ $cwd_b != *"$(field .value)"* ]]
	run_in "$a" "secret"
	assert_equal "$(field .value)" "'s3cr3t-3'"
	# each sees its own processes only: its init and its program
	run_in "$b" "import os; sorted(int(p) for p in os.listdir('/proc') if p.isdigit())[:1]"
	assert_equal "$(field .value)" "[1]"
	sreq DELETE "/sessions/$a"
	sreq DELETE "/sessions/$b"
}

@test "sessions: a cell shares no page, no layout, no AT_RANDOM and no runtime path with the pool" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	[[ -n ${STACK_DIR:-} ]] || skip "an external stack: its runtime directory is not this shell's"
	run -0 curl -s --max-time 10 "$BASE/isolation"
	[[ $(jq -r .details.privateProc <<<"$output") == true ]] || skip "no /proc of its own in a session here"
	local nginx guards half=$((${#STACK_DIR} / 2)) mine s
	nginx=$(stack_nginx_pid)
	# the pool's supervisor, every worker, nginx's master and workers
	# shellcheck disable=SC2046
	guards=$("$PY" "$ROOT/tests/programs/layout.py" "$(pool_pid)" $(worker_pids) "$nginx" $(pgrep -P "$nginx"))
	jq -e 'length > 4 and all(.random != null)' <<<"$guards"
	# two sessions (the heavy tier's boxes), the same attacks as a run's (40-attacks)
	for s in 1 2; do
		session_new
		run_in "$sid" "$(cat "$ROOT/tests/programs/attacks/shared-pages.py")"
		assert_equal "$(field .status)" succeeded
		# only the C library's read-only views of system files: no page it could write is
		# shared with the pool or with another session
		jq -e 'all(.perms == "r--s" and (.path | startswith("/usr/")))' <<<"$(field .stdout)"
		run_in "$sid" "$(cat "$ROOT/tests/programs/layout.py")"
		assert_equal "$(field .status)" succeeded
		mine=$(field .stdout)
		jq -e 'length == 1 and .[0].random != null and .[0].libc != null' <<<"$mine"
		jq -e --argjson g "$guards" '.[0] as $r | [$g[] | select(.random == $r.random
			or (.libc != null and .libc == $r.libc) or (.heap != null and .heap == $r.heap)
			or (.libpython != null and .libpython == $r.libpython)
			or (.exe != null and .exe == $r.exe))] | length == 0' <<<"$mine" || {
			echo "the cell: $mine" >&2
			echo "the guards: $guards" >&2
			return 1
		}
		run_in "$sid" "$(cat "$ROOT/tests/programs/memory-scan.py")" \
			"$(jq -cn --arg a "${STACK_DIR:0:half}" --arg b "${STACK_DIR:half}" '{stdin: ($a + "\n" + $b)}')"
		assert_equal "$(field .status)" succeeded
		run -0 jq -e '.found == 0 and .scanned_mb > 5' <<<"$(field .stdout)"
	done
	# and the sessions still serve
	run_in "$sid" '6 * 7'
	assert_equal "$(field .value)" 42
}

@test "sessions: the deadline interrupts a cell (KeyboardInterrupt) and the session lives on" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	session_new
	run_in "$sid" 'n = 41'
	run_in "$sid" 'import time
n += 1
while True: time.sleep(0.05)' '{timeoutSeconds: 1}'
	assert_equal "$(field .status)" timed_out
	assert_equal "$(field .exitCode)" null
	assert_regex "$(field .stderr)" "KeyboardInterrupt"
	assert_equal "$(field .session.open)" true
	run_in "$sid" 'n'
	assert_equal "$(field .value)" 42
	sreq DELETE "/sessions/$sid"
}

@test "sessions: a cell that ignores the interrupt, exits the interpreter or exceeds memory ends its session" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	session_new
	run_in "$sid" 'import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
while True: pass' '{timeoutSeconds: 1}'
	assert_equal "$(field .status)" timed_out
	assert_equal "$(field .session.open)" false
	run_in "$sid" '1'
	assert_equal "$code" 404
	session_new
	run_in "$sid" 'import os; print("bye", flush=True); os._exit(7)'
	assert_equal "$(field .status)" failed
	assert_equal "$(field .exitCode)" 7
	assert_equal "$(field .stdout)" bye
	assert_equal "$(field .session.open)" false
	sreq GET "/sessions/$sid"
	assert_equal "$code" 404
	session_new
	run_in "$sid" 'import os, signal; os.kill(os.getpid(), signal.SIGSEGV)'
	assert_equal "$(field .exitCode)" -11
	assert_equal "$(field .session.open)" false
	session_new
	run_in "$sid" 'a = bytearray(4 * 1024 * 1024 * 1024)' '{details: true}'
	assert_equal "$(field .status)" failed
	assert_equal "$(field .details.limitExceeded)" memory
	assert_equal "$(field .session.open)" false
	# nothing of them is left, and the service serves on
	wait_for "the ended sessions' processes to go" 100 no_session_procs
	execute 'print(1)'
	assert_equal "$(field .stdout)" 1
}

@test "sessions: one execution at a time (409); a client that hangs up interrupts its cell, not the session" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	session_new
	run_in "$sid" 'k = 1'
	curl -s -o /dev/null --max-time 60 -X POST -d '{"code":"import time\ntime.sleep(3)\nk = 99"}' \
		"$BASE/sessions/$sid/execute" &
	wait_for "the execution to start" 50 bash -c "curl -s $BASE/sessions/$sid | grep -q '\"busy\"'"
	run_in "$sid" 'k'
	assert_equal "$code" 409
	assert_equal "$(field .error)" session_busy
	wait
	run_in "$sid" 'k'
	assert_equal "$(field .value)" 99
	# a client that leaves mid-cell: the cell is interrupted before it sets k
	run -28 curl -s --max-time 1 -X POST -d '{"code":"import time\ntime.sleep(5)\nk = 7"}' \
		"$BASE/sessions/$sid/execute"
	wait_for "the cell's interrupt" 50 bash -c "curl -s $BASE/sessions/$sid | grep -q '\"idle\"'"
	run_in "$sid" 'k'
	assert_equal "$(field .value)" 99
	# the same for a client that leaves an event stream
	run -28 curl -sN --max-time 1 -H 'Accept: text/event-stream' -X POST \
		-d '{"code":"import time\nprint(1, flush=True)\ntime.sleep(5)\nk = 8"}' "$BASE/sessions/$sid/execute"
	assert_line --index 0 'event: stdout'
	wait_for "the cell's interrupt" 50 bash -c "curl -s $BASE/sessions/$sid | grep -q '\"idle\"'"
	run_in "$sid" 'k'
	assert_equal "$(field .value)" 99
	sreq DELETE "/sessions/$sid"
}

@test "sessions: Accept: text/event-stream streams the output as it is printed, then the same answer" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	session_new
	run_in "$sid" 'import time, sys'
	# each line is timed as it arrives: the first long before the cell ends
	curl -sN --max-time 60 -X POST -H 'Accept: text/event-stream' \
		-d '{"code":"for i in range(3):\n    print(\"tick\", i, flush=True)\n    time.sleep(1)\nprint(\"é\", file=sys.stderr)\n42"}' \
		"$BASE/sessions/$sid/execute" | while IFS= read -r line; do
		printf '%s %s\n' "${EPOCHREALTIME/./}" "$line"
	done >"$BATS_TEST_TMPDIR/sse"
	run -0 grep -c '^[0-9]* event: stdout$' "$BATS_TEST_TMPDIR/sse"
	((output >= 3))
	run -0 grep -c '^[0-9]* event: outcome$' "$BATS_TEST_TMPDIR/sse"
	assert_output 1
	local first last
	# (print() may write "tick", " " and "0" apart: the first stdout event is the first line's)
	first=$(grep -m1 'event: stdout' "$BATS_TEST_TMPDIR/sse" | cut -d' ' -f1)
	last=$(grep 'event: outcome' "$BATS_TEST_TMPDIR/sse" | cut -d' ' -f1)
	# the cell sleeps 3 s after its first line: that line came well before the end (the
	# contract is about time: a stream buffered to the end gives 0; the margin is for a
	# loaded machine)
	(((last - first) / 1000 >= 1000))
	# the events' texts make the streams; the last event is the answer as JSON
	run -0 bash -c "sed -n 's/^[0-9]* data: //p' '$BATS_TEST_TMPDIR/sse' | jq -rj 'select(.text) | .text'"
	assert_output "$(printf 'tick 0\ntick 1\ntick 2\né\n')"
	reply=$(grep -A1 'event: outcome' "$BATS_TEST_TMPDIR/sse" | sed -n 's/^[0-9]* data: //p')
	assert_equal "$(field .stdout)" "$(printf 'tick 0\ntick 1\ntick 2')"
	assert_equal "$(field .value)" 42
	assert_equal "$(field .session.open)" true
	# /execute streams the same way; without the header the answer is the JSON of the contract
	run -0 curl -sN --max-time 60 -X POST -H 'Accept: text/event-stream' -d '{"code":"print(1)"}' "$BASE/execute"
	assert_line --index 0 'event: stdout'
	# print() writes "1" and its newline apart: one event or two, their texts make "1\n"
	assert_equal "$(sed -n 's/^data: //p' <<<"$output" | head -n -1 | jq -rj .text)" "$(printf '1\n')"
	assert_equal "$(grep '^event:' <<<"$output" | sort -u | tr '\n' ' ')" "event: outcome event: stdout "
	assert_line --index -2 'event: outcome'
	run -0 jq -ec '.stdout == "1\n" and .status == "succeeded" and (keys | length) == 8' \
		<<<"$(sed -n 's/^data: //p' <<<"$output" | tail -1)"
	run -0 curl -s --max-time 60 -X POST -H 'Accept: */*' -d '{"code":"print(1)"}' "$BASE/execute"
	assert_equal "$(jq -r .stdout <<<"$output")" 1
	sreq DELETE "/sessions/$sid"
}

@test "sessions: a background execution outlives its request: poll it, stream it, interrupt it, delete its session" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local eid
	session_new
	run_in "$sid" 'n = 0'
	# longer than the execution timeout a request may have (30 s): 202 at once
	# long enough to be still running at the GET below on a loaded machine
	run_in "$sid" 'import time
for i in range(3):
    print("step", i, flush=True)
    time.sleep(1.5)
n = 99
n' '{background: true, timeoutSeconds: 600}'
	assert_equal "$code" 202
	assert_equal "$(field .state)" running
	assert_equal "$(field .timeoutSeconds)" 600
	eid=$(field .execution)
	# busy meanwhile: another execution is 409; GET says so
	run_in "$sid" 'n'
	assert_equal "$code" 409
	sreq GET "/sessions/$sid"
	assert_equal "$(field .state)" busy
	sreq GET "/sessions/$sid/executions/$eid"
	assert_equal "$code" 200
	# the stream from the start, then the answer as its last event
	run -0 curl -sN --max-time 60 -H 'Accept: text/event-stream' "$BASE/sessions/$sid/executions/$eid"
	reply=$(sed -n 's/^data: //p' <<<"$output" | tail -1)
	assert_equal "$(field .state)" done
	assert_equal "$(field .outcome.stdout)" "$(printf 'step 0\nstep 1\nstep 2')"
	assert_equal "$(field .outcome.value)" 99
	assert_equal "$(sed -n 's/^data: //p' <<<"$output" | head -n -1 | jq -rj .text)" "$(printf 'step 0\nstep 1\nstep 2\n')"
	sreq GET "/sessions/$sid/executions/$eid"
	assert_equal "$(field .outcome.status)" succeeded
	run_in "$sid" 'n'
	assert_equal "$(field .value)" 99
	sreq GET "/sessions/$sid/executions/0123456789abcdef"
	assert_equal "$code" 404
	# interrupt: KeyboardInterrupt into the running cell; the session keeps its state
	run_in "$sid" 'import time
while True:
    n += 1
    time.sleep(0.01)' '{background: true}'
	eid=$(field .execution)
	wait_for "the loop to count" 50 bash -c "curl -s -X POST -d '{\"code\":\"1\"}' $BASE/sessions/$sid/execute | grep -q session_busy"
	sreq POST "/sessions/$sid/interrupt"
	assert_equal "$(field .interrupted)" true
	wait_for "the interrupted cell's answer" 50 bash -c "curl -s $BASE/sessions/$sid/executions/$eid | grep -q '\"state\":\"done\"'"
	sreq GET "/sessions/$sid/executions/$eid"
	assert_equal "$(field .outcome.exitCode)" 1
	assert_regex "$(field .outcome.stderr)" KeyboardInterrupt
	assert_equal "$(field .outcome.session.open)" true
	run_in "$sid" 'n > 99'
	assert_equal "$(field .value)" True
	sreq POST "/sessions/$sid/interrupt"
	assert_equal "$(field .interrupted)" false
	# DELETE while a cell runs kills it and everything of the session
	run_in "$sid" 'import time; time.sleep(300)' '{background: true}'
	assert_equal "$code" 202
	sreq DELETE "/sessions/$sid"
	assert_equal "$code" 204
	sreq GET "/sessions/$sid"
	assert_equal "$code" 404
	wait_for "the session's processes to go" 100 no_session_procs
	run ls "$(stack_runs)/sessions"
	refute_output --partial "$sid"
	# a background timeout beyond the bound is refused
	session_new
	run_in "$sid" '1' '{background: true, timeoutSeconds: 100000}'
	assert_equal "$code" 400
	assert_regex "$(field .message)" "at most 3600"
	run_in "$sid" '1' '{background: "yes"}'
	assert_equal "$code" 400
	sreq DELETE "/sessions/$sid"
}

@test "sessions: an execution's body is read once, as /execute's: a NUL escape in its code is the program's to refuse, in the background too" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local eid
	session_new
	# /execute's reading: "\u0000" is legal JSON, and Python refuses such code
	sreq POST "/sessions/$sid/execute" '{"code": "1\u0000"}'
	assert_equal "$code" 200
	assert_regex "$(field .stderr)" "null"
	# the background's keys are taken out of the same reading, not a stricter one of their
	# own (which once made "background" an unknown key of such a body: 400)
	sreq POST "/sessions/$sid/execute" '{"code": "1\u0000", "background": true}'
	assert_equal "$code" 202
	eid=$(field .execution)
	wait_for "the background execution's answer" 100 bash -c "curl -s $BASE/sessions/$sid/executions/$eid | grep -q '\"state\":\"done\"'"
	sreq GET "/sessions/$sid/executions/$eid"
	assert_regex "$(field .outcome.stderr)" "null"
	assert_equal "$(field .outcome.session.open)" true
	sreq DELETE "/sessions/$sid"
}

@test "sessions: bad requests are 400, 404 or 405 with the error shape" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	sreq POST /sessions '{"idleTimeoutSeconds": 0}'
	assert_equal "$code" 400
	assert_equal "$(field .message)" "idleTimeoutSeconds must be an integer from 1 to 600"
	sreq POST /sessions '{"colour": 1}'
	assert_equal "$code" 400
	sreq POST /sessions '[1]'
	assert_equal "$code" 400
	# GET /sessions lists them (89-session-files); another method is 405
	sreq PATCH /sessions
	assert_equal "$code" 405
	assert_equal "$(header Allow)" "GET, POST"
	sreq GET /sessions/0123456789abcdef0123456789abcdef
	assert_equal "$code" 404
	sreq GET /sessions/not-an-id
	assert_equal "$code" 404
	sreq PUT /sessions/0123456789abcdef0123456789abcdef
	assert_equal "$code" 405
	session_new
	run_in "$sid" ''
	assert_equal "$code" 400
	sreq POST "/sessions/$sid/execute" '{"code": 1}'
	assert_equal "$code" 400
	assert_equal "$(field .error)" invalid_request
	sreq POST "/sessions/$sid/nothing" '{}'
	assert_equal "$code" 404
	sreq DELETE "/sessions/$sid"
}

@test "sessions: an idle session ends after its idle timeout; 1000 executions leak nothing" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	session_new '{"idleTimeoutSeconds": 1}'
	assert_equal "$(field .idleTimeoutSeconds)" 1
	local idle=$sid
	wait_for "the idle session to end" 100 bash -c "[[ \$(curl -s -o /dev/null -w '%{http_code}' $BASE/sessions/$idle) == 404 ]]"
	session_new
	# a first value formatted: IPython's display formatters are imported once, where the
	# pool does not preload them (this suite's pools preload numpy only)
	run_in "$sid" '(1, [2])'
	# 1000 executions (300 under the sanitizers: their build is some 5 times slower) over one
	# keep-alive connection: fds, processes and memory stay flat
	run_in "$sid" 'import os, resource
def use():
    return (len(os.listdir("/proc/self/fd")), sum(p.isdigit() for p in os.listdir("/proc")),
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
before = use()
before'
	local before i data
	before=$(field .value)
	# curl's config quotes the body as a JSON string does
	data=$(jq -cn '{code: "n = globals().get(\"n\", 0) + 1"}' | jq -Rs 'rtrimstr("\n")')
	local count=1000
	[[ -z ${CODEBOX_ASAN:-} ]] || count=300
	for ((i = 0; i < count; i++)); do
		printf '%s\n' "url = \"$BASE/sessions/$sid/execute\"" "data = $data" \
			'header = "Content-Type: application/json"' 'output = /dev/null' 'write-out = "%{http_code}\n"'
		((i < count - 1)) && echo next
	done >"$BATS_TEST_TMPDIR/many.cfg"
	run -0 curl -s --max-time 300 -K "$BATS_TEST_TMPDIR/many.cfg"
	assert_equal "$(grep -c '^200$' <<<"$output")" "$count"
	# (under the sanitizers the interpreter is inside the pool's ASan build, whose allocator
	# keeps freed memory in quarantine: its RSS is not a leak's measure there)
	run_in "$sid" "(n, use()[:2], use()[2] - before[2] < ${CODEBOX_ASAN:+10**9+}20000)"
	# the same fds and processes as before; RSS grown by less than 20 MB
	assert_equal "$(field .value)" "($count, $(jq -rn --arg v "$before" '$v | ltrimstr("(") | split(", ")[:2] | join(", ") | "(" + . + ")"'), True)"
	sreq DELETE "/sessions/$sid"
}

# last: it stops the file's stack
@test "sessions: as many as CODEBOX_MAX_SESSIONS, then 429 with Retry-After; the pool's stop answers, then ends them" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local a i
	session_new
	a=$sid
	for i in 2 3 4; do
		session_new
	done
	sreq POST /sessions
	assert_equal "$code" 429
	assert_equal "$(field .error)" sandbox_busy
	assert_equal "$(header Retry-After)" 1
	sreq DELETE "/sessions/$a"
	session_new
	run_in "$sid" 'print("in flight")'
	assert_equal "$(field .stdout)" "in flight"
	local procs
	procs=$(session_procs)
	[[ -n $procs ]]
	# the pool's stop (SIGTERM) answers the execution in flight first, then ends the sessions
	curl -s -o "$BATS_TEST_TMPDIR/inflight" --max-time 60 -X POST \
		-d '{"code":"import time\ntime.sleep(1.5)\nprint(\"answered\")"}' "$BASE/sessions/$sid/execute" &
	local c=$!
	wait_for "the execution to start" 50 bash -c "curl -s $BASE/sessions/$sid | grep -q '\"busy\"'"
	stack_stop
	wait "$c"
	assert_equal "$(jq -r .stdout "$BATS_TEST_TMPDIR/inflight")" answered
	local p
	for p in $procs; do
		run ! kill -0 "$p"
	done
}
