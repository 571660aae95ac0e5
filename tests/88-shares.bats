#!/usr/bin/env bats
# Tenants' shares of a pod (API.md "Sessions", issue 42): one bearer token holds at most its
# share of the pod's sessions (CODEBOX_MAX_SESSIONS_PER_TOKEN), every 429 names the bound that
# refused (Codebox-Busy), a session holds its memory cap of the pool's budget from its
# creation so that no other tenant's load kills it, and a session's lifetime ends a cell that
# runs past it. Three tokens: A and B, the tenants, and C, a third that finds the pod full.
# Warm only (sessions need warm interpreters).

load helpers/stack

TOKEN_A=codebox-share-A-0123456789abcdef
TOKEN_B=codebox-share-B-0123456789abcdef
TOKEN_C=codebox-share-C-0123456789abcdef

setup_file() {
	[[ ${CODEBOX_WARM:-1} != 0 ]] || return 0
	TOKENS_DIR=$(mktemp -d /tmp/codebox-tokens.XXXXXX)
	chmod 0711 "$TOKENS_DIR"
	export TOKENS="$TOKENS_DIR/tokens" TOKENS_DIR
	umask 0022
	printf '%s\n%s\n%s\n' "$TOKEN_A" "$TOKEN_B" "$TOKEN_C" >"$TOKENS"
	# four sessions a pod: two a token by default (half)
	stack_start --auth-tokens "$TOKENS" \
		--conf-dir "$(conf_variant 's/CODEBOX_MAX_SESSIONS  *8;/CODEBOX_MAX_SESSIONS  4;/' \
			's/CODEBOX_MAX_SESSIONS_PER_TOKEN  *4;/CODEBOX_MAX_SESSIONS_PER_TOKEN  2;/')"
}

teardown_file() {
	[[ -z ${STACK_PID:-} ]] || stack_stop
	[[ -z ${TOKENS_DIR:-} ]] || rm -rf "$TOKENS_DIR"
}

setup() {
	[[ ${CODEBOX_WARM:-1} != 0 ]] || skip "sessions need warm interpreters"
}

# every session a test made is closed after it, passed or failed
teardown() {
	local line
	if [[ -n ${STACK_PID:-} && -f $BATS_TEST_TMPDIR/sessions ]]; then
		while read -r line; do
			curl -s -o /dev/null --max-time 10 -X DELETE -H "Authorization: Bearer ${line%% *}" \
				"$BASE/sessions/${line#* }" || true
		done <"$BATS_TEST_TMPDIR/sessions"
	fi
	stack_teardown
}

# as TOKEN METHOD PATH [BODY]: a request as TOKEN; sets $code and $reply
as() {
	local args=(-X "$2" -H "Authorization: Bearer $1")
	[[ -n ${4:-} ]] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	request "${args[@]}" "$BASE$3"
}

# new_as TOKEN [BODY]: POST /sessions as TOKEN; a session made is remembered for the
# teardown, its id in $sid
new_as() {
	as "$1" POST /sessions "${2:-}"
	sid=""
	if [[ $code == 201 ]]; then
		sid=$(field .id)
		echo "$1 $sid" >>"$BATS_TEST_TMPDIR/sessions"
	fi
}

# holder NAME: the host pid of a program that made the file NAME in its working directory
# (root sees it through /proc/<pid>/cwd), not its init's; fails while there is none
holder() {
	local d k
	for d in /proc/[0-9]*; do
		[[ -e $d/cwd/$1 ]] || continue
		read -r k <"$d/comm" 2>/dev/null || continue
		[[ $k != codebox-init ]] || continue
		echo "${d#/proc/}"
		return 0
	done
	return 1
}

# busy_by NAME: the last answer is a 429 sandbox_busy naming NAME, with Retry-After: 1
busy_by() {
	assert_equal "$code" 429
	assert_equal "$(field .error)" sandbox_busy
	assert_equal "$(header Codebox-Busy)" "$1"
	assert_equal "$(header Retry-After)" 1
}

@test "shares: one token holds at most its share of the pod's sessions; the others keep theirs" {
	as "$TOKEN_A" GET /isolation
	assert_equal "$(field .sessions.maxSessions)" 4
	assert_equal "$(field .sessions.maxSessionsPerToken)" 2
	local a1 a2
	new_as "$TOKEN_A" && a1=$sid
	new_as "$TOKEN_A" && a2=$sid
	[[ -n $a1 && -n $a2 ]]
	# A's third: its share is full, the pod is not
	new_as "$TOKEN_A"
	busy_by tenant
	run -0 jq -r .message <<<"$reply"
	assert_output --partial "this token holds as many sessions"
	# B is served as if A were not there
	new_as "$TOKEN_B"
	assert_equal "$code" 201
	new_as "$TOKEN_B"
	assert_equal "$code" 201
	new_as "$TOKEN_B"
	busy_by tenant
	# the pod is full: a third token's 429 names the pod's bound
	new_as "$TOKEN_C"
	busy_by sessions
	# A closes one of its own, and makes one again
	as "$TOKEN_A" DELETE "/sessions/$a1"
	assert_equal "$code" 204
	new_as "$TOKEN_A"
	assert_equal "$code" 201
	# and the sessions serve their own token alone
	as "$TOKEN_A" POST "/sessions/$a2/execute" '{"code": "6 * 7"}'
	assert_equal "$code" 200
	assert_equal "$(field .value)" 42
	as "$TOKEN_B" POST "/sessions/$a2/execute" '{"code": "6 * 7"}'
	assert_equal "$code" 404
}

@test "shares: the per-token share is a knob: 0 lifts it, a bad value is refused by check-config" {
	run -0 grep -E '^fastcgi_param +CODEBOX_MAX_SESSIONS_PER_TOKEN +[0-9]+;' "$ROOT/nginx/codebox-limits.conf"
	local conf
	conf=$(conf_variant 's/CODEBOX_MAX_SESSIONS_PER_TOKEN *[0-9]*;/CODEBOX_MAX_SESSIONS_PER_TOKEN     9;/')
	run "$ROOT/scripts/check-config.sh" "$conf/nginx.conf"
	assert_failure
	assert_output --partial "CODEBOX_MAX_SESSIONS_PER_TOKEN (9) must be at most CODEBOX_MAX_SESSIONS (8)"
	conf=$(conf_variant 's/CODEBOX_MAX_SESSIONS_PER_TOKEN *[0-9]*;/CODEBOX_MAX_SESSIONS_PER_TOKEN     0;/')
	run -0 "$ROOT/scripts/check-config.sh" "$conf/nginx.conf"
}

@test "shares: every 429 of the pool names its bound: the execution slots say pool" {
	# a session's cell holds the one slot of a stack with one
	local conf saved_dir saved_pid saved_base saved_agent saved_metrics
	saved_dir=$STACK_DIR saved_pid=$STACK_PID saved_base=$BASE saved_agent=${AGENT:-} saved_metrics=${METRICS:-}
	conf=$(conf_variant 's/CODEBOX_MAX_CONCURRENT_EXECUTIONS  *[0-9]*;/CODEBOX_MAX_CONCURRENT_EXECUTIONS  1;/')
	stack_start --auth-tokens "$TOKENS" --conf-dir "$conf"
	new_as "$TOKEN_A"
	assert_equal "$code" 201
	local s=$sid
	local mark="held-$$-$RANDOM"
	curl -s --max-time 60 -H "Authorization: Bearer $TOKEN_A" -H 'Content-Type: application/json' \
		-d "{\"code\": \"import time\\nopen('$mark', 'w').close()\\ntime.sleep(20)\"}" \
		"$BASE/sessions/$s/execute" >/dev/null 3>&- &
	local bg=$!
	wait_for "the cell to run" 300 holder "$mark"
	new_as "$TOKEN_B"
	busy_by pool
	as "$TOKEN_A" POST "/sessions/$s/interrupt"
	wait "$bg" || true
	as "$TOKEN_A" DELETE "/sessions/$s"
	stack_stop
	STACK_DIR=$saved_dir STACK_PID=$saved_pid BASE=$saved_base AGENT=$saved_agent METRICS=$saved_metrics
}

@test "shares: a session's lifetime ends a cell that runs past it, foreground or background" {
	new_as "$TOKEN_A" '{"maxLifetimeSeconds": 3}'
	assert_equal "$code" 201
	local s=$sid t0=$SECONDS
	as "$TOKEN_A" POST "/sessions/$s/execute" '{"code": "import time\ntime.sleep(40)", "timeoutSeconds": 30}'
	assert_equal "$code" 200
	assert_equal "$(field .status)" timed_out
	assert_equal "$(field .session.open)" false
	# stopped at its lifetime (3 s), not at the cell's own 30 s: a generous margin
	((SECONDS - t0 < 15))
	as "$TOKEN_A" GET "/sessions/$s"
	assert_equal "$code" 404
	# a background cell: the same bound; the session ends with it (its answer with it)
	new_as "$TOKEN_A" '{"maxLifetimeSeconds": 3}'
	s=$sid t0=$SECONDS
	as "$TOKEN_A" POST "/sessions/$s/execute" '{"code": "import time\ntime.sleep(600)", "background": true}'
	assert_equal "$code" 202
	gone() {
		as "$TOKEN_A" GET "/sessions/$s"
		[[ $code == 404 ]]
	}
	wait_for "the session to end" 200 gone
	((SECONDS - t0 < 25))
	# its watcher logs the outcome once the session's init has ended it
	wait_for "the background execution's outcome" 300 \
		grep -Eq '"component":"background".*"outcome":"timed_out"' "$STACK_DIR/logs/pool.log"
}

@test "shares: a session holds its memory of the pool's budget from its creation, and others' load never kills it" {
	local conf saved_dir saved_pid saved_base saved_agent saved_metrics
	saved_dir=$STACK_DIR saved_pid=$STACK_PID saved_base=$BASE saved_agent=${AGENT:-} saved_metrics=${METRICS:-}
	# a 450 MiB budget; runs and sessions up to 300 MiB each
	conf=$(conf_variant 's/CODEBOX_MAX_SESSIONS  *8;/CODEBOX_MAX_SESSIONS  4;/' \
		's/CODEBOX_POOL_MEMORY_BYTES          0;/CODEBOX_POOL_MEMORY_BYTES          471859200;/' \
		's/CODEBOX_MEMORY_BYTES               1073741824;/CODEBOX_MEMORY_BYTES               314572800;/')
	stack_start --auth-tokens "$TOKENS" --conf-dir "$conf"
	as "$TOKEN_B" GET /isolation
	if [[ $(field .layers.poolmemory) != true ]]; then
		stack_stop
		STACK_DIR=$saved_dir STACK_PID=$saved_pid BASE=$saved_base AGENT=$saved_agent METRICS=$saved_metrics
		skip "no pool-wide budget on this host"
	fi
	# B's session (its cap, 300 MiB, held of the budget) holds 200 MiB of data
	new_as "$TOKEN_B"
	assert_equal "$code" 201
	local b=$sid
	as "$TOKEN_B" POST "/sessions/$b/execute" '{"code": "x = bytearray(b\"\\x01\") * (200 << 20)\nlen(x) >> 20"}'
	assert_equal "$code" 200
	assert_equal "$(field .value)" 200
	# A's load meets the budget: run 1 holds 150 MiB, run 2 grows to 150 MiB; 200 + 150 +
	# 150 > 450. The session is the largest group, but a run is stopped, never the session
	local mark="held-$$-$RANDOM"
	jq -cn --arg mark "$mark" '{code: ("import signal\nb = bytearray(b\"\\x01\") * (150 << 20)\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])\nopen(\"" + $mark + "\", \"w\").close()\nsignal.sigtimedwait([signal.SIGUSR1], 40)\nprint(\"A1 done\")"), details: true}' \
		>"$BATS_TEST_TMPDIR/a1.req"
	curl -s --max-time 60 -H "Authorization: Bearer $TOKEN_A" -H 'Content-Type: application/json' \
		--data-binary @"$BATS_TEST_TMPDIR/a1.req" "$BASE/execute" >"$BATS_TEST_TMPDIR/a1.json" 3>&- &
	local a1=$! pid
	held_or_gone() {
		holder "$mark" >/dev/null || ! kill -0 "$a1" 2>/dev/null
	}
	wait_for "run 1 to hold its memory" 300 held_or_gone
	as "$TOKEN_A" POST /execute "$(jq -cn '{code: "chunks = []\nfor i in range(15):\n    chunks.append(bytearray(b\"\\x01\") * (10 << 20))\nprint(\"A2 done\")", details: true}')"
	local a2=$reply
	# run 1 is let go (if the budget did not stop it)
	if pid=$(holder "$mark"); then
		kill -USR1 "$pid"
	fi
	wait "$a1" || true
	read_reply "$BATS_TEST_TMPDIR/a1.json"
	# one of A's runs met the budget (stopped as memory)...
	if [[ $(jq -r .details.limitExceeded <<<"$a2") != memory &&
		$(field .details.limitExceeded) != memory ]]; then
		fail "neither of A's runs was stopped: $a2 / $reply"
	fi
	# ...and B's session is alive, its data intact
	as "$TOKEN_B" POST "/sessions/$b/execute" '{"code": "sum(x[:: 1 << 20])"}'
	assert_equal "$code" 200
	assert_equal "$(field .value)" 200
	# a second session of 300 MiB would pass the budget (300 + 300 > 450)
	new_as "$TOKEN_A"
	busy_by memory
	run -0 jq -r .message <<<"$reply"
	assert_output --partial "memory budget"
	# bounds of the ask: at most the runs' own cap, at least 16 MiB, an integer
	local bad
	for bad in '{"memoryBytes": 314572801}' '{"memoryBytes": 1024}' '{"memoryBytes": "1g"}'; do
		as "$TOKEN_A" POST /sessions "$bad"
		assert_equal "$code" 400
		assert_equal "$(field .error)" invalid_request
	done
	# one that asks for less fits (300 + 100 <= 450), and its cap is its own: 150 MiB ends it
	new_as "$TOKEN_A" '{"memoryBytes": 104857600}'
	assert_equal "$code" 201
	as "$TOKEN_A" POST "/sessions/$sid/execute" '{"code": "y = bytearray(b\"\\x01\") * (150 << 20)", "details": true}'
	assert_equal "$code" 200
	assert_equal "$(field .details.limitExceeded)" memory
	assert_equal "$(field .session.open)" false
	run -1 grep -q "session at the pool's memory budget" "$STACK_DIR/logs/pool.log"
	as "$TOKEN_B" DELETE "/sessions/$b"
	stack_stop
	STACK_DIR=$saved_dir STACK_PID=$saved_pid BASE=$saved_base AGENT=$saved_agent METRICS=$saved_metrics
}

@test "shares: a background execution holds an execution slot while it runs: spinning sessions get no more CPU than the slots" {
	local conf saved_dir saved_pid saved_base saved_agent saved_metrics
	saved_dir=$STACK_DIR saved_pid=$STACK_PID saved_base=$BASE saved_agent=${AGENT:-} saved_metrics=${METRICS:-}
	conf=$(conf_variant 's/CODEBOX_MAX_CONCURRENT_EXECUTIONS  *[0-9]*;/CODEBOX_MAX_CONCURRENT_EXECUTIONS  2;/' \
		's/CODEBOX_MAX_SESSIONS  *8;/CODEBOX_MAX_SESSIONS  4;/' \
		's/CODEBOX_MAX_SESSIONS_PER_TOKEN  *4;/CODEBOX_MAX_SESSIONS_PER_TOKEN  2;/')
	stack_start --auth-tokens "$TOKENS" --conf-dir "$conf"
	local spin='{"code": "while True:\n    pass", "background": true, "timeoutSeconds": 120}'
	local a1 a2 b1
	new_as "$TOKEN_A" && a1=$sid
	new_as "$TOKEN_A" && a2=$sid
	new_as "$TOKEN_B" && b1=$sid
	[[ -n $a1 && -n $a2 && -n $b1 ]]
	# A's two spinning cells take the two slots
	as "$TOKEN_A" POST "/sessions/$a1/execute" "$spin"
	assert_equal "$code" 202
	as "$TOKEN_A" POST "/sessions/$a2/execute" "$spin"
	assert_equal "$code" 202
	# a third is refused as a run would be, and so is B's run: nothing queues behind them
	as "$TOKEN_B" POST "/sessions/$b1/execute" "$spin"
	busy_by pool
	as "$TOKEN_B" POST /execute '{"code": "print(6 * 7)"}'
	busy_by pool
	# a spinning cell interrupted gives its slot back: B runs
	as "$TOKEN_A" POST "/sessions/$a1/interrupt"
	assert_equal "$code" 200
	served() {
		as "$TOKEN_B" POST /execute '{"code": "print(6 * 7)"}'
		[[ $code == 200 ]]
	}
	wait_for "a slot to be given back" 100 served
	assert_equal "$(field .stdout)" 42
	# a deleted session's spinning cell gives its slot back too
	as "$TOKEN_A" DELETE "/sessions/$a2"
	assert_equal "$code" 204
	wait_for "the other slot" 100 served
	as "$TOKEN_B" POST "/sessions/$b1/execute" "$spin"
	assert_equal "$code" 202
	as "$TOKEN_B" DELETE "/sessions/$b1"
	stack_stop
	STACK_DIR=$saved_dir STACK_PID=$saved_pid BASE=$saved_base AGENT=$saved_agent METRICS=$saved_metrics
}

@test "shares: streams of a background execution hold no execution slot, and are bounded per execution, per token and per pod" {
	local conf saved_dir saved_pid saved_base saved_agent saved_metrics
	saved_dir=$STACK_DIR saved_pid=$STACK_PID saved_base=$BASE saved_agent=${AGENT:-} saved_metrics=${METRICS:-}
	# three background executions and one run fit the slots; 4 streams a pod, 2 a token
	conf=$(conf_variant 's/CODEBOX_MAX_CONCURRENT_EXECUTIONS  *[0-9]*;/CODEBOX_MAX_CONCURRENT_EXECUTIONS  4;/' \
		's/CODEBOX_MAX_SESSIONS  *8;/CODEBOX_MAX_SESSIONS  4;/' \
		's/CODEBOX_MAX_SESSIONS_PER_TOKEN  *4;/CODEBOX_MAX_SESSIONS_PER_TOKEN  2;/')
	stack_start --auth-tokens "$TOKENS" --conf-dir "$conf"
	as "$TOKEN_A" GET /isolation
	assert_equal "$(field .sessions.maxStreams)" 4
	local slow='{"code": "import time\nfor i in range(600):\n    print(i, flush=True)\n    time.sleep(0.1)", "background": true, "timeoutSeconds": 120}'
	local a1 a2 b1 e_a1 e_a2 e_b1 n
	new_as "$TOKEN_A" && a1=$sid
	new_as "$TOKEN_A" && a2=$sid
	new_as "$TOKEN_B" && b1=$sid
	as "$TOKEN_A" POST "/sessions/$a1/execute" "$slow" && e_a1=$(field .execution)
	as "$TOKEN_A" POST "/sessions/$a2/execute" "$slow" && e_a2=$(field .execution)
	as "$TOKEN_B" POST "/sessions/$b1/execute" "$slow" && e_b1=$(field .execution)
	[[ -n $e_a1 && -n $e_a2 && -n $e_b1 ]]
	# stream N TOKEN SESSION EXECUTION: a stream in the background, its headers in s.N
	streams=()
	stream() {
		curl -sN --max-time 60 -D "$BATS_TEST_TMPDIR/s.$1" -o /dev/null -H 'Accept: text/event-stream' \
			-H "Authorization: Bearer $2" "$BASE/sessions/$3/executions/$4" 3>&- &
		streams+=($!)
		wait_for "stream $1's answer" 300 grep -q '^HTTP' "$BATS_TEST_TMPDIR/s.$1"
	}
	# two streams of A's first execution: open; a third of it is refused, for the execution
	stream 1 "$TOKEN_A" "$a1" "$e_a1"
	stream 2 "$TOKEN_A" "$a1" "$e_a1"
	for n in 1 2; do
		run -0 grep -q '^HTTP/1.1 200' "$BATS_TEST_TMPDIR/s.$n"
	done
	request --max-time 5 -H "Authorization: Bearer $TOKEN_A" -H 'Accept: text/event-stream' \
		"$BASE/sessions/$a1/executions/$e_a1"
	busy_by streams
	# A holds its token's share (2 of 4): a stream of its other execution is refused, for A
	request --max-time 5 -H "Authorization: Bearer $TOKEN_A" -H 'Accept: text/event-stream' \
		"$BASE/sessions/$a2/executions/$e_a2"
	busy_by tenant
	# B streams its own
	stream 3 "$TOKEN_B" "$b1" "$e_b1"
	run -0 grep -q '^HTTP/1.1 200' "$BATS_TEST_TMPDIR/s.3"
	# a plain poll always answers, and the streams took no execution slot: a run is served
	as "$TOKEN_A" GET "/sessions/$a2/executions/$e_a2"
	assert_equal "$code" 200
	assert_equal "$(field .state)" running
	as "$TOKEN_B" POST /execute '{"code": "print(6 * 7)"}'
	assert_equal "$code" 200
	assert_equal "$(field .stdout)" 42
	kill "${streams[@]}" 2>/dev/null || true
	wait "${streams[@]}" 2>/dev/null || true
	for n in "$a1" "$a2"; do
		as "$TOKEN_A" DELETE "/sessions/$n"
	done
	as "$TOKEN_B" DELETE "/sessions/$b1"
	stack_stop
	STACK_DIR=$saved_dir STACK_PID=$saved_pid BASE=$saved_base AGENT=$saved_agent METRICS=$saved_metrics
}

# with_stack SED-EXPR...: this test's own stack (the file's is set aside and given back by
# end_stack), with the tokens and nginx/ changed by each sed expression
with_stack() {
	saved=("$STACK_DIR" "$STACK_PID" "$BASE" "${AGENT:-}" "${METRICS:-}")
	stack_start --auth-tokens "$TOKENS" --conf-dir "$(conf_variant "$@")"
}
end_stack() {
	stack_stop
	STACK_DIR=${saved[0]} STACK_PID=${saved[1]} BASE=${saved[2]} AGENT=${saved[3]} METRICS=${saved[4]}
}

# counter SOURCE: codebox_busy_rejections_total{source=SOURCE} of the stack's /metrics
counter() {
	curl -s --max-time 10 "$METRICS/metrics" |
		awk -v k="codebox_busy_rejections_total{source=\"$1\"}" '$1 == k { print $2 }'
}

@test "shares: a token's request rate (nginx's limit_req on its id): past it 429 tenant, while another token is served" {
	run -0 grep -E '^limit_req +zone=codebox_tenant burst=[0-9]+ nodelay;' "$ROOT/nginx/codebox-limits.conf"
	run -0 grep -E '^ +limit_req_zone +\$codebox_token_id zone=codebox_tenant:1m rate=[0-9]+r/s;' "$ROOT/nginx/nginx.conf"
	# one request a minute, a burst of two: A's fourth request in a row is over its rate
	with_stack 's|rate=50r/s;|rate=1r/m;|' 's|zone=codebox_tenant burst=100 nodelay;|zone=codebox_tenant burst=2 nodelay;|'
	local i refused=0
	for ((i = 0; i < 10; i++)); do
		as "$TOKEN_A" GET /capabilities
		[[ $code == 200 ]] || break
	done
	((i >= 3 && i < 10))
	busy_by tenant
	run -0 jq -r .message <<<"$reply"
	assert_output "this token is over its request rate; retry shortly"
	# so is A's run, and nothing of it reached the pool
	as "$TOKEN_A" POST /execute '{"code": "print(6 * 7)"}'
	busy_by tenant
	local rid
	rid=$(header X-Request-Id)
	# B is served as if A were not there
	as "$TOKEN_B" POST /execute '{"code": "print(6 * 7)"}'
	assert_equal "$code" 200
	assert_equal "$(field .stdout)" 42
	as "$TOKEN_B" GET /capabilities
	assert_equal "$code" 200
	# counted as the tenant's, not as nginx's own bound; logged as the 429 it is
	assert_equal "$(counter tenant)" 2
	assert_equal "$(counter nginx)" 0
	run -0 jq -s --arg r "$rid" '[.[] | select(.requestId == $r and .status == 429 and .upstreamStatus == null)] | length' \
		"$STACK_DIR/logs/access.log"
	assert_output 1
	# probes and the metrics port carry no token: never counted
	for ((i = 0; i < 5; i++)); do
		request "$BASE/readyz"
		assert_equal "$code" 200
	done
	end_stack
}

@test "shares: without tokens there is one tenant, and no rate or share is counted" {
	saved=("$STACK_DIR" "$STACK_PID" "$BASE" "${AGENT:-}" "${METRICS:-}")
	stack_start --conf-dir "$(conf_variant 's|rate=50r/s;|rate=1r/m;|' \
		's|zone=codebox_tenant burst=100 nodelay;|zone=codebox_tenant burst=1 nodelay;|' \
		's/CODEBOX_MAX_EXECUTIONS_PER_TOKEN *[0-9]*;/CODEBOX_MAX_EXECUTIONS_PER_TOKEN   1;/')"
	local i
	for ((i = 0; i < 6; i++)); do
		request -X POST -H 'Content-Type: application/json' -d '{"code": "print(1)"}' "$BASE/execute"
		assert_equal "$code" 200
	done
	assert_equal "$(counter tenant)" 0
	end_stack
}
@test "shares: a token's share of the execution slots: its runs, sessions and background executions count; another token is served" {
	run -0 grep -E '^fastcgi_param +CODEBOX_MAX_EXECUTIONS_PER_TOKEN +0;' "$ROOT/nginx/codebox-limits.conf"
	# check-config holds it within the slots
	local conf
	conf=$(conf_variant 's/CODEBOX_MAX_EXECUTIONS_PER_TOKEN *[0-9]*;/CODEBOX_MAX_EXECUTIONS_PER_TOKEN   21;/')
	run "$ROOT/scripts/check-config.sh" "$conf/nginx.conf"
	assert_failure
	assert_output --partial "CODEBOX_MAX_EXECUTIONS_PER_TOKEN (21) must be at most CODEBOX_MAX_CONCURRENT_EXECUTIONS (20"
	# three slots, one a token
	with_stack 's/CODEBOX_MAX_CONCURRENT_EXECUTIONS  *[0-9]*;/CODEBOX_MAX_CONCURRENT_EXECUTIONS  3;/' \
		's/CODEBOX_MAX_EXECUTIONS_PER_TOKEN *[0-9]*;/CODEBOX_MAX_EXECUTIONS_PER_TOKEN   1;/'
	local a1 a2 b1
	new_as "$TOKEN_A" && a1=$sid
	new_as "$TOKEN_A" && a2=$sid
	new_as "$TOKEN_B" && b1=$sid
	[[ -n $a1 && -n $a2 && -n $b1 ]]
	# A's background execution holds A's one slot
	local spin='{"code": "while True:\n    pass", "background": true, "timeoutSeconds": 120}'
	as "$TOKEN_A" POST "/sessions/$a1/execute" "$spin"
	assert_equal "$code" 202
	# A's run, A's foreground cell, A's new session and A's second background execution are refused
	as "$TOKEN_A" POST /execute '{"code": "print(6 * 7)"}'
	busy_by tenant
	run -0 jq -r .message <<<"$reply"
	assert_output "this token runs as many executions at once as its share allows; retry shortly"
	as "$TOKEN_A" POST "/sessions/$a2/execute" '{"code": "6 * 7"}'
	busy_by tenant
	as "$TOKEN_A" POST "/sessions/$a2/execute" "$spin"
	busy_by tenant
	new_as "$TOKEN_A"
	busy_by tenant
	as "$TOKEN_A" POST "/sessions/$a2/restart"
	busy_by tenant
	# MCP's tools/call too
	request -X POST -H "Authorization: Bearer $TOKEN_A" -H 'Content-Type: application/json' \
		-H 'Accept: application/json, text/event-stream' --data-binary \
		'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "code_executor", "arguments": {"code": "print(1)"}}}' \
		"$BASE/mcp"
	assert_equal "$code" 429
	assert_equal "$(header Codebox-Busy)" tenant
	# B is served, foreground and background, while two slots of three are in use
	as "$TOKEN_B" POST /execute '{"code": "print(6 * 7)"}'
	assert_equal "$code" 200
	assert_equal "$(field .stdout)" 42
	as "$TOKEN_B" POST "/sessions/$b1/execute" '{"code": "6 * 7"}'
	assert_equal "$code" 200
	assert_equal "$(field .value)" 42
	as "$TOKEN_B" POST "/sessions/$b1/execute" "$spin"
	assert_equal "$code" 202
	# B too holds its share now
	as "$TOKEN_B" POST /execute '{"code": "print(6 * 7)"}'
	busy_by tenant
	# seven refusals: A's run, cell, background execution, session, restart and tools/call, B's run
	assert_equal "$(counter tenant)" 7
	# A's cell interrupted gives A's share back
	as "$TOKEN_A" POST "/sessions/$a1/interrupt"
	assert_equal "$code" 200
	served_a() {
		as "$TOKEN_A" POST /execute '{"code": "print(6 * 7)"}'
		[[ $code == 200 ]]
	}
	wait_for "A's share to be given back" 100 served_a
	assert_equal "$(field .stdout)" 42
	as "$TOKEN_B" DELETE "/sessions/$b1"
	assert_equal "$code" 204
	end_stack
}
