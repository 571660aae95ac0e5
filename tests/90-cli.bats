#!/usr/bin/env bats
# scripts/codebox, the command-line client, and scripts/codebox.py, the module it runs
# (`from codebox import Client`), against a private stack: runs streamed as they print, exit
# codes, files in and artifacts out, sessions (state, files, notebook, background, Ctrl-C),
# bearer tokens, busy answers retried after Retry-After, a service that is down. Debian's
# Python (the client promises 3.8+; make lint parses it with 3.8's grammar).

load helpers/stack

setup_file() {
	# two execution slots: the busy test fills them with two sessions' cells
	stack_start --conf-dir "$(conf_variant 's/CODEBOX_MAX_CONCURRENT_EXECUTIONS  20;/CODEBOX_MAX_CONCURRENT_EXECUTIONS  2;/')"
}

teardown_file() {
	stack_stop
}

teardown() {
	local s
	# the sessions a test made, closed passed or failed (the busy test's hold both slots)
	if [[ -n ${STACK_PID:-} && -f $BATS_TEST_TMPDIR/sessions ]]; then
		while read -r s; do
			curl -s -o /dev/null --max-time 10 -X DELETE "$BASE/sessions/$s" || true
		done <"$BATS_TEST_TMPDIR/sessions"
	fi
	if [[ -f $BATS_TEST_TMPDIR/tokens-dir ]]; then
		rm -rf "$(cat "$BATS_TEST_TMPDIR/tokens-dir")"
	fi
	# a client a test left in the background
	if [[ -f $BATS_TEST_TMPDIR/cli.pid ]]; then
		kill "$(cat "$BATS_TEST_TMPDIR/cli.pid")" 2>/dev/null || true
	fi
	stack_teardown
}

# cli ARGS...: the client, with Debian's Python, against this file's stack
cli() {
	CODEBOX_URL=${CODEBOX_URL:-$BASE} "$PY" "$ROOT/scripts/codebox" "$@"
}

# cli_bg OUT ARGS...: the client in the background, stdout in OUT, stderr in OUT.err, stdin
# from $BATS_TEST_TMPDIR/stdin; SIGINT at its default (a script's background job ignores it,
# and Python then keeps it ignored), as a terminal's Ctrl-C finds it. Its pid in $cli_pid.
cli_bg() {
	local out=$1
	shift
	CODEBOX_URL=${CODEBOX_URL:-$BASE} env --default-signal=INT "$PY" "$ROOT/scripts/codebox" "$@" \
		<"$BATS_TEST_TMPDIR/stdin" >"$out" 2>"$out.err" 3>&- &
	cli_pid=$!
	echo "$cli_pid" >"$BATS_TEST_TMPDIR/cli.pid"
}

# new_session: a session made by the client; its id in $sid, closed after the test
new_session() {
	sid=$(cli session new)
	[[ $sid =~ ^[0-9a-f-]{32,}$ ]]
	echo "$sid" >>"$BATS_TEST_TMPDIR/sessions"
}

# has_line FILE TEXT: FILE has the line TEXT
has_line() {
	grep -qxF -- "$2" "$1" 2>/dev/null
}

# in_flight_zero: the stack's gauge of runs in progress is 0
in_flight_zero() {
	curl -s --max-time 5 "$METRICS/metrics" | grep -qx 'codebox_executions_in_flight 0'
}

# exit_of PID: waits for a background client; its exit status in $rc
exit_of() {
	rc=0
	wait "$1" || rc=$?
	rm -f "$BATS_TEST_TMPDIR/cli.pid"
}

needs_sessions() {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
}

@test "cli: --help answers for every verb; bad usage is exit 2" {
	local v
	for v in "" run session "session new" "session list" "session run" "session attach" \
		"session files" "session notebook" "session snapshot" "session info" \
		"session interrupt" "session restart" "session rm"; do
		# shellcheck disable=SC2086 # the verb's words
		run -0 cli $v --help
		assert_output --partial "usage: codebox $v"
	done
	run -2 cli frobnicate
	run -2 cli run
	run -2 cli run /nonexistent.py
	assert_output "codebox: cannot read /nonexistent.py: No such file or directory"
}

@test "cli: run prints the café program's prices and exits 0; --json prints the service's answer" {
	run -0 cli run "$ROOT/tests/programs/cafe.py"
	assert_output "[3.0, 2.0, 5.0]"
	run -0 cli run --json - <"$ROOT/tests/programs/cafe.py"
	assert_equal "$(jq -c .result <<<"$output")" '{"coffee":3,"tea":2,"cake":5}'
	assert_equal "$(jq -r .stdout <<<"$output")" "[3.0, 2.0, 5.0]"
}

@test "cli: run exits with the program's exit code, its stdout on stdout and its stderr on stderr; 124 for a timeout, 128+N for a signal" {
	local out=$BATS_TEST_TMPDIR/out rc=0
	printf 'import sys\nprint("to stdout")\nprint("to stderr", file=sys.stderr)\nsys.exit(3)\n' >"$BATS_TEST_TMPDIR/p.py"
	cli run "$BATS_TEST_TMPDIR/p.py" >"$out" 2>"$out.err" || rc=$?
	assert_equal "$rc" 3
	assert_equal "$(cat "$out")" "to stdout"
	assert_equal "$(cat "$out.err")" "to stderr"
	# --json keeps the exit code
	run -3 cli run --json "$BATS_TEST_TMPDIR/p.py"
	run -1 cli run - <<<'raise SystemExit("no")'
	run -124 cli run --timeout 1 - <<<'import time; time.sleep(20)'
	assert_output --partial "codebox: the program timed out"
	run -137 cli run - <<<'import os, signal; os.kill(os.getpid(), signal.SIGKILL)'
}

@test "cli: run streams its output as the program prints it; Ctrl-C closes the connection and the service kills the run at once" {
	local out=$BATS_TEST_TMPDIR/out rc left_before t0
	left_before=$(grep -c 'the client left during the run; killed it' "$STACK_DIR/logs/pool.log" || true)
	# the program prints, then sleeps past anything this test waits for
	printf 'import time\nprint("first", flush=True)\ntime.sleep(28)\nprint("never")\n' >"$BATS_TEST_TMPDIR/stdin"
	cli_bg "$out" run -
	wait_for "the first line" 600 has_line "$out" first
	# the line came while the program runs: the client is still waiting for the rest
	kill -0 "$cli_pid"
	t0=$SECONDS
	kill -INT "$cli_pid"
	exit_of "$cli_pid"
	assert_equal "$rc" 130
	run -0 cat "$out.err"
	assert_output "codebox: interrupted: the connection is closed, and the service kills the run"
	# the service killed it: nothing runs, long before the program's sleep would have ended
	wait_for "the run to end" 150 in_flight_zero
	((SECONDS - t0 < 20))
	wait_for "the pool to log the hang-up" 100 eval \
		'(($(grep -c "the client left during the run; killed it" "$STACK_DIR/logs/pool.log") > left_before))'
	run -1 grep never "$out"
}

@test "cli: --files sends files (a directory's beneath its name) and --artifacts saves result.json, the files made and the figures" {
	cd "$BATS_TEST_TMPDIR"
	mkdir -p data/more art
	printf 'item,price\ncoffee,3\ntea,2\n' >data/prices.csv
	printf 'x' >data/more/deep.txt
	printf '\x00\xffbinary' >blob.bin
	cat >prog.py <<'EOF'
import csv, json, os
import matplotlib.pyplot as plt
rows = list(csv.DictReader(open("data/prices.csv")))
total = sum(float(r["price"]) for r in rows)
os.makedirs("out", exist_ok=True)
open("out/total.txt", "w").write(str(total))
assert open("blob.bin", "rb").read() == b"\x00\xffbinary"
assert open("data/more/deep.txt").read() == "x"
plt.plot([3, 2, 5])
json.dump({"total": total}, open("result.json", "w"))
print("ok")
EOF
	run -0 cli run prog.py --files data blob.bin --artifacts art/run1
	assert_output ok
	assert_equal "$(cat art/run1/result.json)" '{"total": 5.0}'
	assert_equal "$(cat art/run1/out/total.txt)" 5.0
	assert_equal "$(head -c 8 art/run1/figure-1.png | od -An -tx1 | tr -d ' ')" 89504e470d0a1a0a
	# the inputs came back unchanged: not artifacts
	[[ ! -e art/run1/blob.bin && ! -e art/run1/data ]]
}

@test "cli: a session keeps its state across two session runs; files put, listed and got; the notebook is valid nbformat; rm ends it" {
	needs_sessions
	new_session
	run -0 cli session run "$sid" - <<<'import numpy as np
x = np.arange(10)
print("made")'
	assert_output made
	# the final expression's value is printed, as a REPL does
	run -0 cli session run "$sid" - <<<'x.sum() + 0'
	assert_output 45
	printf 'a,b\n1,2\n' >"$BATS_TEST_TMPDIR/in.csv"
	run -0 cli session files "$sid" --put "$BATS_TEST_TMPDIR/in.csv=data/in.csv"
	run -0 cli session run "$sid" - <<<'open("data/in.csv").read().splitlines()[1]'
	assert_output "'1,2'"
	run -0 cli session files "$sid"
	assert_line "data/in.csv  8"
	run -0 cli session files "$sid" --get data/in.csv=-
	assert_output "$(cat "$BATS_TEST_TMPDIR/in.csv")"
	mkdir "$BATS_TEST_TMPDIR/got"
	(cd "$BATS_TEST_TMPDIR/got" && cli session files "$sid" --get data/in.csv)
	cmp "$BATS_TEST_TMPDIR/in.csv" "$BATS_TEST_TMPDIR/got/in.csv"
	run -0 cli session files "$sid" --rm data/in.csv
	run -0 cli session files "$sid" --json
	assert_equal "$(jq -c '[.[].path]' <<<"$output")" '["data"]'
	run -0 cli session list
	assert_output --partial "$sid  idle  3 executions"
	# the notebook: nbformat reads and validates it, with the cells in order
	cli session notebook "$sid" >"$BATS_TEST_TMPDIR/s.ipynb"
	run -0 "$PY" -c 'import nbformat, sys
nb = nbformat.read(sys.argv[1], as_version=4)
nbformat.validate(nb)
print(len(nb.cells), nb.cells[1].outputs[0]["data"]["text/plain"])' "$BATS_TEST_TMPDIR/s.ipynb"
	assert_output "3 45"
	run -0 cli session rm "$sid"
	run -125 cli session run "$sid" - <<<'x'
	assert_output --partial "codebox: no such session"
	assert_output --partial "(HTTP 404, not_found)"
}

@test "cli: session run streams: the cell's first line shows while it waits on a file the test then uploads" {
	needs_sessions
	local out=$BATS_TEST_TMPDIR/out rc
	new_session
	cat >"$BATS_TEST_TMPDIR/stdin" <<'EOF'
import os, time
print("first", flush=True)
for _ in range(600):
    if os.path.exists("go"):
        break
    time.sleep(0.1)
print("second")
EOF
	cli_bg "$out" session run "$sid" -
	wait_for "the first line" 600 has_line "$out" first
	run -1 grep second "$out"
	kill -0 "$cli_pid"
	: >"$BATS_TEST_TMPDIR/go"
	cli session files "$sid" --put "$BATS_TEST_TMPDIR/go"
	exit_of "$cli_pid"
	assert_equal "$rc" 0
	assert_equal "$(cat "$out")" $'first\nsecond'
}

@test "cli: Ctrl-C in session run interrupts the cell (KeyboardInterrupt), the session keeps its state; a second one hangs up" {
	needs_sessions
	local out=$BATS_TEST_TMPDIR/out rc
	new_session
	printf 'import time\nx = 5\nprint("start", flush=True)\ntime.sleep(25)\n' >"$BATS_TEST_TMPDIR/stdin"
	cli_bg "$out" session run "$sid" -
	wait_for "the cell to start" 600 has_line "$out" start
	kill -INT "$cli_pid"
	exit_of "$cli_pid"
	assert_equal "$rc" 130
	run -0 cat "$out.err"
	assert_line "codebox: interrupted: the cell gets KeyboardInterrupt; the session keeps its state"
	assert_line KeyboardInterrupt
	run -0 cli session run "$sid" - <<<'x'
	assert_output 5
	# a cell that swallows the interrupt: the second Ctrl-C closes the connection
	cat >"$BATS_TEST_TMPDIR/stdin" <<'EOF'
import time
print("start", flush=True)
for _ in range(2):
    try:
        time.sleep(25)
    except KeyboardInterrupt:
        print("swallowed", flush=True)
EOF
	cli_bg "$out" session run "$sid" -
	wait_for "the cell to start" 600 has_line "$out" start
	kill -INT "$cli_pid"
	wait_for "the cell to swallow it" 600 has_line "$out" swallowed
	kill -INT "$cli_pid"
	exit_of "$cli_pid"
	assert_equal "$rc" 130
	run -0 cat "$out.err"
	assert_line "codebox: interrupted: the connection is closed (which interrupts the cell)"
	refute_output --partial Traceback
}

@test "cli: session run --background starts a cell; attach prints its output from the start and its value, with its exit code" {
	needs_sessions
	local eid
	new_session
	eid=$(cli session run "$sid" --background - <<<'for i in range(3):
    print(i)
import sys
sys.stdout.flush()
"done"')
	[[ $eid =~ ^[0-9a-f]+$ ]]
	run -0 cli session attach "$sid" "$eid"
	assert_output $'0\n1\n2\n\'done\''
	eid=$(cli session run "$sid" --background - <<<'raise SystemExit(4)')
	run -4 cli session attach "$sid" "$eid"
}

@test "cli: the module: from codebox import Client streams a run's events and a session's, and a session closes with its block" {
	needs_sessions
	run -0 env PYTHONPATH="$ROOT/scripts" CODEBOX_URL="$BASE" "$PY" - <<'EOF'
from codebox import Client, CodeboxError

client = Client()
answer = client.run("print(6 * 7)")
assert answer["stdout"] == "42\n" and answer["status"] == "succeeded", answer
# (print() may write its text and its newline apart: two events)
events = list(client.stream("import sys\nprint('a', flush=True)\nprint('b', file=sys.stderr)"))
text = {n: "".join(e.data["text"] for e in events if e.event == n) for n in ("stdout", "stderr")}
assert text == {"stdout": "a\n", "stderr": "b\n"} and events[0].event == "stdout", events
assert [e.event for e in events].count("outcome") == 1 and events[-1].event == "outcome", events
seen = []
out = client.run("print('x')", on_output=lambda name, text: seen.append((name, text)))
assert out["exitCode"] == 0 and "".join(t for n, t in seen if n == "stdout") == "x\n", (out, seen)
with client.session() as s:
    s.run("import numpy as np\nx = np.arange(10)")
    assert s.run("int(x.sum())")["value"] == "45"
    # streaming, really: the cell's first line arrives while it still waits for a file
    stream = s.stream("import os, time\nprint('first', flush=True)\n"
                      "for _ in range(600):\n    if os.path.exists('go'): break\n    time.sleep(0.1)\n"
                      "print('second')")
    first = ""
    while first != "first\n":  # print() may write its line and its newline apart
        event = next(stream)
        assert event.event == "stdout", event
        first += event.data["text"]
    assert s.info()["state"] == "busy"
    s.upload("go", b"")
    rest = [e for e in stream]
    assert rest[-1].event == "outcome" and stream.outcome["stdout"] == "first\nsecond\n", rest
    s.upload("d/f.bin", b"\x00\x01")
    assert s.download("d/f.bin") == b"\x00\x01"
    assert [f["path"] for f in s.files()] == ["d", "d/f.bin", "go"], s.files()
    nb = s.notebook()
    assert nb["nbformat"] == 4 and len(nb["cells"]) == 3, nb
    sid = s.id
assert sid not in [x["id"] for x in client.sessions()]
try:
    client.session(sid).run("1")
except CodeboxError as e:
    assert e.status == 404 and e.error == "not_found", e
else:
    raise AssertionError("an ended session ran")
print("module ok")
EOF
	assert_output "module ok"
}

@test "cli: busy: a 429 is a clear error with --retries 0; with retries the client waits out Retry-After and runs" {
	needs_sessions
	local s1 s2 out=$BATS_TEST_TMPDIR/out rc hold
	hold='import os, time
for _ in range(1200):
    if os.path.exists("go"):
        break
    time.sleep(0.1)'
	# both execution slots held by two sessions' background cells, each until its "go" file
	new_session
	s1=$sid
	new_session
	s2=$sid
	cli session run "$s1" --background - <<<"$hold"
	cli session run "$s2" --background - <<<"$hold"
	run -125 cli run --retries 0 - <<<'print(1)'
	assert_output --partial "codebox: "
	assert_output --partial "(HTTP 429, sandbox_busy, Codebox-Busy: pool)"
	refute_output --partial Traceback
	# with retries: it waits, a slot frees, it runs
	echo 'print("ran")' >"$BATS_TEST_TMPDIR/stdin"
	cli_bg "$out" run --retries 200 -
	wait_for "a retry" 600 grep -q 'busy (.*HTTP 429.*); retrying in 1 s' "$out.err"
	: >"$BATS_TEST_TMPDIR/go"
	cli session files "$s1" --put "$BATS_TEST_TMPDIR/go"
	exit_of "$cli_pid"
	assert_equal "$rc" 0
	assert_equal "$(cat "$out")" ran
	cli session files "$s2" --put "$BATS_TEST_TMPDIR/go"
}

@test "cli: a service that is down is a one-line error and exit 125" {
	local port
	port=$(free_port)
	run -125 env CODEBOX_URL="http://127.0.0.1:$port" "$PY" "$ROOT/scripts/codebox" run - <<<'print(1)'
	assert_output "codebox: cannot reach http://127.0.0.1:$port (Connection refused): is the service running? CODEBOX_URL or --url names it"
	run -125 cli --url "http://127.0.0.1:$port" session list
	assert_equal "${#lines[@]}" 1
	run -2 cli --url "ftp://127.0.0.1:$port" session list
}

@test "cli: with bearer tokens: none is a clear 401 (exit 125); CODEBOX_TOKEN or --token runs; a session is its token's" {
	local dir ta=codebox-token-A-0123456789abcdef tb=codebox-token-B-0123456789abcdef
	dir=$(mktemp -d /tmp/codebox-tokens.XXXXXX)
	chmod 0711 "$dir"
	(umask 0022 && printf '%s\n%s\n' "$ta" "$tb" >"$dir/tokens")
	echo "$dir" >"$BATS_TEST_TMPDIR/tokens-dir"
	stack_start --auth-tokens "$dir/tokens"
	run -125 cli run - <<<'print(1)'
	assert_output --partial "(HTTP 401, unauthorized)"
	assert_output --partial "set CODEBOX_TOKEN (or --token)"
	run -125 env CODEBOX_TOKEN="${ta}x" CODEBOX_URL="$BASE" "$PY" "$ROOT/scripts/codebox" run - <<<'print(1)'
	assert_output --partial "(HTTP 401, unauthorized)"
	run -0 env CODEBOX_TOKEN="$ta" CODEBOX_URL="$BASE" "$PY" "$ROOT/scripts/codebox" run - <<<'print(1)'
	assert_output 1
	run -0 cli --token "$tb" run - <<<'print(2)'
	assert_output 2
	if [[ ${CODEBOX_WARM:-1} == 1 ]]; then
		sid=$(cli --token "$ta" session new)
		run -0 cli --token "$ta" session run "$sid" - <<<'6 * 7'
		assert_output 42
		run -125 cli --token "$tb" session run "$sid" - <<<'6 * 7'
		assert_output --partial "(HTTP 404, not_found)"
		run -0 env PYTHONPATH="$ROOT/scripts" "$PY" -c '
import sys
from codebox import Client
print(Client(sys.argv[1], sys.argv[2]).session(sys.argv[3]).run("7 * 6")["value"])' "$BASE" "$ta" "$sid"
		assert_output 42
		run -0 cli --token "$ta" session rm "$sid"
	fi
}
