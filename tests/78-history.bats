#!/usr/bin/env bats
# The audit trail (CODEBOX_HISTORY_DIR): every run on either port, in the .py / .meta.json /
# .result.json layout, bounded by count and bytes, unreadable by runs.

load helpers/stack

MAX_RUNS=6

setup_file() {
	HISTORY=$(mktemp -d /tmp/codebox-history.XXXXXX)
	export HISTORY
	CODEBOX_HISTORY_DIR=$HISTORY/trail CODEBOX_HISTORY_MAX_RUNS=$MAX_RUNS \
		CODEBOX_HISTORY_MAX_BYTES=60000 stack_start
}

teardown_file() {
	stack_stop
	rm -rf "$HISTORY"
}

stems() { # the entries, oldest first (by their .py's time)
	# shellcheck disable=SC2012 # names are ours: timestamp_hex.py
	ls -1tr "$HISTORY/trail" | sed -n 's/\.py$//p'
}

entry_of() { # entry_of REQUEST_ID: the stem whose meta carries that request id
	grep -l "\"requestId\":\"$1\"" "$HISTORY"/trail/*.meta.json | head -1 | xargs -r basename | sed 's/\.meta\.json$//'
}

result_written() { [[ -s $HISTORY/trail/$1.result.json ]]; }

@test "history: a run on port 8080 leaves exactly what ran, its meta and its result" {
	local prog=$'import sys\nprint("out")\nsys.stderr.write("err\\n")\nsys.exit(3)\n' stem
	post "$(jq -cn --arg c "$prog" '{code: $c}')" -H 'X-Request-Id: hist-8080-1'
	assert_equal "$code" 200
	stem=$(entry_of hist-8080-1)
	[[ $stem =~ ^[0-9]{8}T[0-9]{6}_[0-9a-f]{8}$ ]]
	# the name is the run's UTC start time
	[[ ${stem:0:8} == "$(date -u +%Y%m%d)" ]]
	run -0 cat "$HISTORY/trail/$stem.py"
	assert_output "$(printf '%s' "$prog")"
	wait_for "the result to be written" 50 result_written "$stem"
	run -0 jq -e --arg d "$HISTORY/trail" --arg s "$stem" '
		keys == ["code_path", "durationMs", "exit_code", "path", "requestId", "status", "stderr", "stdout"] and
		.path == "\($d)/\($s).result.json" and .code_path == "\($d)/\($s).py" and
		.exit_code == 3 and .stdout == "out\n" and .stderr == "err\n" and .status == "failed" and
		.requestId == "hist-8080-1" and (.durationMs | type) == "number"' "$HISTORY/trail/$stem.result.json"
	# the worker writes the meta's end just after the result
	wait_for "the final meta" 50 meta_final "$stem" failed
	run -0 jq -e '.status == "failed" and .port == "execute" and .exitCode == 3' "$HISTORY/trail/$stem.meta.json"
	# nothing of it is readable by anyone but the pool
	[[ $(stat -c %a "$HISTORY/trail") == 700 && $(stat -c %a "$HISTORY/trail/$stem.py") == 600 ]]
}

@test "history: the meta says pending while the run is in flight" {
	local stem
	post "$(jq -cn '{code: "import time; time.sleep(3)"}')" -H 'X-Request-Id: hist-pending' >/dev/null 3>&- &
	local bg=$!
	wait_for "the entry to appear" 50 entry_exists hist-pending
	stem=$(entry_of hist-pending)
	run -0 jq -r .status "$HISTORY/trail/$stem.meta.json"
	assert_output pending
	[[ ! -e $HISTORY/trail/$stem.result.json ]]
	wait "$bg"
	wait_for "the final meta" 50 meta_final "$stem"
}

entry_exists() { [[ -n $(entry_of "$1") ]]; }
meta_final() { [[ $(jq -r .status "$HISTORY/trail/$1.meta.json") == "${2:-succeeded}" ]]; }

@test "history: a command on port 8888 is recorded too, timeouts included" {
	local stem
	run -0 curl -s -H 'X-Request-Id: hist-agent' -d '{"command":"echo agent-ran"}' "$AGENT/execute"
	stem=$(entry_of hist-agent)
	run -0 cat "$HISTORY/trail/$stem.py"
	assert_output 'echo agent-ran'
	wait_for "the result" 50 result_written "$stem"
	run -0 jq -e '.stdout == "agent-ran\n" and .exit_code == 0 and .status == "succeeded"' "$HISTORY/trail/$stem.result.json"
	run -0 jq -e '.port == "agent" and .language == "shell"' "$HISTORY/trail/$stem.meta.json"
	execute 'import time; time.sleep(10)' '{timeoutSeconds: 1}'
	stem=$(entry_of "$(header X-Request-Id)")
	wait_for "the result" 50 result_written "$stem"
	run -0 jq -e '.status == "timed_out" and .exit_code == null' "$HISTORY/trail/$stem.result.json"
}

@test "history: runs cannot read the trail" {
	execute "import os
for p in ['$HISTORY/trail', '$HISTORY']:
    try:
        print(p, os.listdir(p))
    except OSError as e:
        print(p, type(e).__name__)"
	[[ $(field .stdout) != *.py* ]]
	assert_equal "$(field .stdout | grep -c Error)" 2
	run -0 curl -s -d "{\"command\":\"ls $HISTORY/trail; cat $HISTORY/trail/*.py\"}" "$AGENT/execute"
	run -0 jq -e '.exit_code != 0 and .stdout == ""' <<<"$output"
}

@test "history: the trail is bounded by count and bytes, the oldest pruned first" {
	local i big1 big2 stale=$HISTORY/trail/.20260101T000000_0000dead.result.json.tmp
	local fresh=$HISTORY/trail/.20260101T000000_0000beef.result.json.tmp
	# what a worker that died in a write leaves: a pruning removes it once it is stale
	touch -d '-2 min' "$stale"
	touch "$fresh"
	for ((i = 0; i < MAX_RUNS + 3; i++)); do
		execute "print($i)"
	done
	# at most MAX_RUNS entries, each of its three files, and the newest kept
	wait_for "the pruning" 50 at_most_runs "$MAX_RUNS"
	run -0 cat "$HISTORY/trail/$(stems | tail -1).py"
	assert_output "print($((MAX_RUNS + 2)))"
	# bytes: two runs of 30000 bytes of output pass the 60000-byte bound together, where the
	# count bound alone would keep both: the pruning (to 90 % of the bound) removes the small
	# entries, then the first big one, oldest first, and keeps only the newest. A worker writes
	# its entry's result and prunes after its reply, so wait for what only that pruning makes
	# true, never for a bound the trail met before the results were written.
	execute 'print("x" * 30000)'
	big1=$(entry_of "$(header X-Request-Id)")
	[[ -n $big1 ]]
	wait_for "the first big result" 100 result_written "$big1"
	touch "$fresh" # younger than a minute at the last pruning, however slow the runs above
	execute 'print("y" * 30000)'
	big2=$(entry_of "$(header X-Request-Id)")
	[[ -n $big2 ]]
	wait_for "the pruning by bytes" 100 pruned "$big1"
	assert_equal "$(stems)" "$big2"
	at_most_bytes 60000
	run -0 jq -e '.stdout | length == 30001' "$HISTORY/trail/$big2.result.json"
	[[ ! -e $stale && -e $fresh ]]
	rm "$fresh"
}

@test "history: an entry pruned while its run is in flight gets no end written after it" {
	local m="codebox-hist-inflight-$RANDOM$RANDOM" stem i bg
	# held until the test ends it (or the 30 s execution timeout)
	marker_body "$m" 'import time; time.sleep(60)' >"$BATS_TEST_TMPDIR/req"
	curl -s -o /dev/null --max-time 60 -H 'Content-Type: application/json' \
		-H 'X-Request-Id: hist-inflight' --data-binary @"$BATS_TEST_TMPDIR/req" "$BASE/execute" 3>&- &
	bg=$!
	wait_for "the run to start" 100 pgrep -f -- "$m"
	wait_for "its entry" 50 entry_exists hist-inflight
	stem=$(entry_of hist-inflight)
	[[ -n $stem ]]
	# MAX_RUNS + 1 newer runs: the pruning keeps MAX_RUNS of them, the oldest in flight goes
	for ((i = 0; i <= MAX_RUNS; i++)); do
		execute "print($i)"
	done
	wait_for "the in-flight entry pruned" 100 pruned "$stem"
	pkill -f -- "$m" || fail "the run ended before its entry was pruned (the execution timeout?)"
	wait "$bg" || true
	wait_for "the worker to say so" 100 grep -q "entry $stem was pruned while it ran" \
		"$STACK_DIR/logs/pool.log"
	# no half entry (a result and a meta without the program), no temporary file left
	run -0 find "$HISTORY/trail" -name "*$stem*"
	assert_output ""
	wait_for "the bound" 50 at_most_runs "$MAX_RUNS"
}

@test "history: runs in parallel, pruned as they go, leave no entry without its program" {
	local i pids=()
	# twice the bound, at once, of unequal lengths: the pruning takes entries in flight
	for ((i = 0; i < 2 * MAX_RUNS; i++)); do
		curl -s -o /dev/null --max-time 60 -H 'Content-Type: application/json' \
			--data-binary "{\"code\": \"import time; time.sleep($((i % 4)) / 10)\"}" "$BASE/execute" 3>&- &
		pids+=($!)
	done
	wait "${pids[@]}"
	wait_for "every end written" 100 no_pending
	wait_for "the bound" 50 at_most_runs "$MAX_RUNS"
	run -0 orphans
	assert_output ""
}

no_pending() { ! grep -l '"status":"pending"' "$HISTORY"/trail/*.meta.json >/dev/null 2>&1; }

orphans() { # the ends (results, metas) whose .py is gone
	local f stem
	for f in "$HISTORY"/trail/*.json; do
		stem=${f##*/}
		stem=${stem%%.*}
		[[ -e $f && ! -e $HISTORY/trail/$stem.py ]] && echo "$f"
	done
	return 0
}

pruned() { # pruned STEM: none of the entry's three files is left
	[[ ! -e $HISTORY/trail/$1.py && ! -e $HISTORY/trail/$1.meta.json && ! -e $HISTORY/trail/$1.result.json ]]
}

at_most_runs() {
	(($(stems | wc -l) <= $1)) && (($(find "$HISTORY/trail" -name '*.json' | wc -l) <= 2 * $1))
}

at_most_bytes() {
	(($(du -b --apparent-size -s "$HISTORY/trail" | cut -f1) <= $1 + 4096))
}

bg_done() { # bg_done SESSION EXECUTION: the background execution has its answer
	curl -s --max-time 10 "$BASE/sessions/$1/executions/$2" | jq -e '.state == "done"' >/dev/null
}

@test "history: a session's background execution is recorded whole, never left pending" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local sid eid stem
	run -0 curl -s --max-time 60 -X POST "$BASE/sessions"
	sid=$(jq -r .id <<<"$output")
	[[ -n $sid && $sid != null ]]
	run -0 curl -s --max-time 60 -H 'Content-Type: application/json' -H 'X-Request-Id: hist-bg-1' \
		--data-binary '{"code": "print(7)", "background": true}' "$BASE/sessions/$sid/execute"
	eid=$(jq -r .execution <<<"$output")
	wait_for "the background execution to end" 300 bg_done "$sid" "$eid"
	stem=$(entry_of hist-bg-1)
	[[ -n $stem ]]
	# the watcher writes its entry's end as a worker does after its reply
	wait_for "the entry's end" 50 meta_final "$stem"
	run -0 jq -e '.port == "execute" and .exitCode == 0' "$HISTORY/trail/$stem.meta.json"
	wait_for "its result" 50 result_written "$stem"
	run -0 jq -e '.stdout == "7\n"' "$HISTORY/trail/$stem.result.json"
	curl -s -o /dev/null --max-time 10 -X DELETE "$BASE/sessions/$sid"
}

@test "history: no log and no entry holds a session's id; nginx's lines and the pool's name it by one hash" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local sid eid hash f
	run -0 curl -s --max-time 60 -X POST "$BASE/sessions"
	sid=$(jq -r .id <<<"$output")
	[[ $sid =~ ^[0-9a-f]{32}$ ]]
	# the id is the credential (tokens are off here): its calls go through every path
	run -0 curl -s --max-time 60 -H 'Content-Type: application/json' -H 'X-Request-Id: hist-ids-1' \
		--data-binary '{"code": "print(6 * 7)"}' "$BASE/sessions/$sid/execute"
	run -0 jq -e '.stdout == "42\n"' <<<"$output"
	run -0 curl -s --max-time 60 -H 'Content-Type: application/json' \
		--data-binary '{"code": "print(7)", "background": true}' "$BASE/sessions/$sid/execute"
	eid=$(jq -r .execution <<<"$output")
	wait_for "the background execution to end" 300 bg_done "$sid" "$eid"
	run -0 curl -s --max-time 60 "$BASE/sessions/$sid"
	# a body past client_max_body_size: nginx's error log has a line about the request
	head -c 1200000 /dev/zero | tr '\0' ' ' >"$BATS_TEST_TMPDIR/big"
	run -0 curl -s -o /dev/null -w '%{http_code}' --max-time 60 -H 'Content-Type: application/json' \
		--data-binary @"$BATS_TEST_TMPDIR/big" "$BASE/sessions/$sid/execute"
	assert_output 413
	run -0 curl -s -o /dev/null -w '%{http_code}' --max-time 60 -X DELETE "$BASE/sessions/$sid"
	assert_output 204
	wait_for "the close's log line" 50 grep -q "session .* closed" "$STACK_DIR/logs/pool.log"
	wait_for "the request in error.log" 50 grep -q "client intended to send too large body" \
		"$STACK_DIR/logs/error.log"
	# nowhere whole, nor its first 8 digits (what the pool's lines used to print)
	for f in "$STACK_DIR"/logs/* "$HISTORY"/trail/*; do
		run grep -c -e "$sid" -e "${sid:0:8}" "$f"
		assert_output 0
	done
	# the same name in both: "h:" and the first 8 hex digits of the id's SHA-256
	hash=h:$(printf %s "$sid" | sha256sum | cut -c1-8)
	run -0 jq -r 'select(.requestId == "hist-ids-1") | .uri' "$STACK_DIR/logs/access.log"
	assert_output "/sessions/$hash/execute"
	run -0 grep -c "\"uri\":\"/sessions/$hash\"" "$STACK_DIR/logs/access.log"
	run -0 grep -c "\"uri\":\"/sessions/$hash/executions/$eid\"" "$STACK_DIR/logs/access.log"
	run -0 grep -c "session $hash made" "$STACK_DIR/logs/pool.log"
	run -0 grep -c "session $hash closed" "$STACK_DIR/logs/pool.log"
	run -0 grep -c "request: \"POST /sessions/$hash/execute HTTP/1.1\"" "$STACK_DIR/logs/error.log"
}
