#!/usr/bin/env bats
# Sessions in a fleet: three stacks (pod ordinals 0, 1, 2: CODEBOX_POD_ORDINAL) behind the
# router the cluster runs (deploy/overlays/scale/router.conf). A session's id names its pod
# ("<ordinal>-<32 hex>") and every call on it, MCP's included, reaches that pod and no other;
# an id that names no pod of the fleet is the router's own 404 and it connects nowhere. Then a
# stack drains (it makes no new session, serves its own), one is killed (its sessions are 404,
# the others' go on), and `make fleet` starts and stops. Every loop is bounded in count and time.

load helpers/fleet
load helpers/sessions
load helpers/mcp

setup_file() {
	# the router is nginx's configuration: the plain pass's only (as 85-fleet)
	[[ -z ${CODEBOX_ASAN:-} ]] || return 0
	[[ ${CODEBOX_WARM:-1} == 1 ]] || return 0
	local conf
	# 12 sessions a stack (30 through the router, and room), 4 execution slots each
	conf=$(conf_variant 's/CODEBOX_MAX_CONCURRENT_EXECUTIONS  20;/CODEBOX_MAX_CONCURRENT_EXECUTIONS  4;/' \
		's/CODEBOX_MAX_SESSIONS  *8;/CODEBOX_MAX_SESSIONS  12;/')
	fleet_start 3 --conf-dir "$conf"
}

teardown_file() {
	[[ -z ${CODEBOX_ASAN:-} && ${CODEBOX_WARM:-1} == 1 ]] || return 0
	fleet_stop
}

setup() {
	[[ -z ${CODEBOX_ASAN:-} ]] || skip "the fleet's routing is checked by the plain pass"
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	BASE=$ROUTER # sreq, run_in and session_new (helpers/sessions) go through the router
}

teardown() {
	local s
	# each test's sessions closed after it, through the router
	if [[ -f $BATS_TEST_TMPDIR/sessions ]]; then
		while read -r s; do
			curl -s -o /dev/null --max-time 10 -X DELETE "$ROUTER/sessions/$s" || true
		done <"$BATS_TEST_TMPDIR/sessions"
	fi
	[[ ${BATS_TEST_COMPLETED:-} == 1 ]] || fleet_logs
	openapi_teardown
}

# small: 30 of them fit any stack's memory budget
NEW='{"memoryBytes": 268435456}'

# ordinal_of ID: the pod an id names
ordinal_of() {
	echo "${1%%-*}"
}

# routed_to URI-IN-LOG: the upstreams the router's log gives the requests whose uri is that
# (sessions' ids are logged as "/sessions/<ordinal>-/...")
routed_to() {
	jq -r --arg u "$1" 'select(.uri == $u) | .upstreams' "$ROUTER_DIR/access.log" | sort -u
}

@test "fleet sessions: 30 sessions made through the router and used in a shuffled order each keep their own state on the pod their id names" {
	local i k sid ids=() order
	for ((i = 0; i < 30; i++)); do
		session_new "$NEW"
		[[ $sid =~ ^[0-2]-[0-9a-f]{32}$ ]]
		ids+=("$sid")
	done
	# least_conn spread them over the three pods
	for i in 0 1 2; do
		printf '%s\n' "${ids[@]}" | grep -q "^$i-"
	done
	# each session's own value, set then read in two different shuffled orders
	order=$(shuf -i 0-29)
	for k in $order; do
		run_in "${ids[k]}" "mine = $k * 7"
		assert_equal "$code" 200
	done
	order=$(shuf -i 0-29)
	for k in $order; do
		run_in "${ids[k]}" 'mine'
		assert_equal "$code" 200
		assert_equal "$(field .value)" $((k * 7))
	done
	# every call went to its pod alone: the router's log names one upstream per ordinal
	for i in 0 1 2; do
		run -0 routed_to "/sessions/$i-/execute"
		assert_output "$(fleet_word "$FLEET_BASES" "$i" | sed 's|http://||')"
	done
}

@test "fleet sessions: a background execution's poll, stream, interrupt and DELETE reach its pod through the router" {
	local eid pod
	session_new "$NEW"
	pod=$(ordinal_of "$sid")
	run_in "$sid" 'import time
for i in range(3):
    print("step", i, flush=True)
    time.sleep(0.5)
n = 99
n' '{background: true, timeoutSeconds: 600}'
	assert_equal "$code" 202
	eid=$(field .execution)
	sreq GET "/sessions/$sid/executions/$eid"
	assert_equal "$code" 200
	# the stream, through the router as it is printed, then the answer as its last event
	run -0 curl -sN --max-time 60 -H 'Accept: text/event-stream' "$ROUTER/sessions/$sid/executions/$eid"
	reply=$(sed -n 's/^data: //p' <<<"$output" | tail -1)
	assert_equal "$(field .state)" done
	assert_equal "$(field .outcome.value)" 99
	assert_equal "$(sed -n 's/^data: //p' <<<"$output" | head -n -1 | jq -rj .text)" "$(printf 'step 0\nstep 1\nstep 2\n')"
	# interrupt a loop, through the router
	run_in "$sid" 'import time
while True:
    n += 1
    time.sleep(0.01)' '{background: true}'
	eid=$(field .execution)
	wait_for "the loop to count" 50 bash -c "curl -s -X POST -d '{\"code\":\"1\"}' $ROUTER/sessions/$sid/execute | grep -q session_busy"
	sreq POST "/sessions/$sid/interrupt"
	assert_equal "$(field .interrupted)" true
	wait_for "the interrupted cell's answer" 50 bash -c "curl -s $ROUTER/sessions/$sid/executions/$eid | grep -q '\"state\":\"done\"'"
	run_in "$sid" 'n > 99'
	assert_equal "$(field .value)" True
	sreq DELETE "/sessions/$sid"
	assert_equal "$code" 204
	sreq GET "/sessions/$sid"
	assert_equal "$code" 404
	# all of it on the session's pod
	run -0 jq -r --arg p "$pod-" 'select(.uri | startswith("/sessions/" + $p)) | .upstreams' "$ROUTER_DIR/access.log"
	refute_output --regexp "$(printf '%s|' $(fleet_word "$FLEET_BASES" $(((pod + 1) % 3)) | sed 's|http://||') \
		$(fleet_word "$FLEET_BASES" $(((pod + 2) % 3)) | sed 's|http://||') | sed 's/|$//')"
}

@test "fleet sessions: MCP's tools/call reaches the session's pod through the router, whichever pod took the call that made it" {
	local i sid ords=""
	for i in 1 2 3 4; do
		# made by a plain tools/call (one request), used through the SDK (its own three)
		call "$i" "{\"code\":\"mine = $i\\nmine\",\"session\":\"new\"}"
		assert_equal "$code" 200
		sid=$(field .result.structuredContent.session.id)
		[[ $sid =~ ^[0-2]-[0-9a-f]{32}$ ]]
		echo "$sid" >>"$BATS_TEST_TMPDIR/sessions"
		ords+="$(ordinal_of "$sid") "
		# the next calls, each through the router's hop to the session's pod (a client's own
		# Codebox-Session-Ordinal, naming another pod, is overwritten by the router)
		run -0 mcp_client --header="Codebox-Session-Ordinal: $((($(ordinal_of "$sid") + 1) % 3))" \
			"$ROUTER/mcp" call code_executor "{\"code\":\"mine * 10\",\"session\":\"$sid\"}"
		run -0 jq -e --arg v "$((i * 10))" '.isError == false and .structuredContent.value == $v' <<<"$output"
	done
	echo "ordinals: $ords"
	# made on more than one pod: the calls did not just stay on one
	(($(tr ' ' '\n' <<<"$ords" | sort -u | grep -c .) > 1))
	# an id of a pod the fleet lacks, or of the right form but unknown: the tool's error
	run -0 mcp_client "$ROUTER/mcp" call code_executor '{"code":"1","session":"7-0123456789abcdef0123456789abcdef"}'
	run -0 jq -e '.isError == true and (.content[0].text | contains("no such session"))' <<<"$output"
}

@test "fleet sessions: an id that names no pod of the fleet is the router's 404, and it connects nowhere" {
	local hex=0123456789abcdef0123456789abcdef id before fleet
	before=$(wc -l <"$ROUTER_DIR/access.log")
	for id in "7-$hex" "$hex" "1000-$hex" "01-$hex" "99999999999999999999-$hex" "0-${hex}0" \
		"0-${hex^^}" abc "-$hex" "0-" "0x1-$hex" "%201-$hex" "0-$hex@127.0.0.1:1" \
		"127.0.0.1:1" "%2e%2e%2e"; do
		request --path-as-is "$ROUTER/sessions/$id/execute" -X POST -d '{"code":"print(1)"}'
		echo "$id: $code $reply"
		assert_equal "$code" 404
		assert_equal "$(field .error)" not_found
		request --path-as-is "$ROUTER/sessions/$id"
		assert_equal "$code" 404
	done
	# dot segments leave /sessions/ (nginx normalizes the path, as the pods' nginx does the same
	# path), and nginx refuses a NUL or a path above the root (400): not a session's call, and
	# it goes to a pod of the fleet or nowhere
	for id in ".." "%2e%2e" "..%2f..%2fmetrics" "0-$hex/..%2f..%2f..%2fmetrics" "%2e%2e%2f%2e%2e" \
		"1-$hex%00"; do
		# (attacks: the router's own 400 to a NUL or a climb is not codebox's JSON; not checked)
		OPENAPI_UNCHECKED=1 request --path-as-is "$ROUTER/sessions/$id/execute" -X POST -d '{"code":"print(1)"}'
		echo "$id: $code $reply"
		[[ $code != 5* ]]
	done
	fleet=$(tr ' ' '\n' <<<"$FLEET_BASES" | sed -n 's|^http://||p' | paste -sd'|')
	run -0 bash -c "tail -n +$((before + 1)) '$ROUTER_DIR/access.log' | jq -r '.upstreams' | tr ', ' '\n\n' | sed '/^$/d' | sort -u"
	echo "upstreams: $output"
	for id in $output; do
		[[ $id =~ ^($fleet)$ ]]
	done
	# the same body as a pod's own answer to a session it does not hold
	local pods
	request "$(fleet_word "$FLEET_BASES" 0)/sessions/0-$hex"
	pods=$reply
	request "$ROUTER/sessions/7-$hex"
	assert_equal "$reply" "$pods"
	# none of them went to any upstream: the router answered each itself
	run -0 bash -c "tail -n +$((before + 1)) '$ROUTER_DIR/access.log' | jq -r 'select(.uri | startswith(\"/sessions/\")) | select(.upstreams != \"\") | .uri'"
	echo "routed: $output"
	assert_output ""
	# the fleet is healthy after it
	request "$ROUTER/sessions" -X POST -H 'Content-Type: application/json' --data-binary "$NEW"
	assert_equal "$code" 201
	echo "$(field .id)" >>"$BATS_TEST_TMPDIR/sessions"
}

@test "fleet sessions: a draining stack makes no new session (the router takes it elsewhere) and still serves its own" {
	local sid2="" i pool
	# a session on stack 2
	for ((i = 0; i < 12; i++)); do
		session_new "$NEW"
		if [[ $sid == 2-* ]]; then
			sid2=$sid
			break
		fi
	done
	[[ -n $sid2 ]]
	run_in "$sid2" 'kept = "before the drain"'
	fleet_use 2
	BASE=$ROUTER
	pool=$(pool_pid)
	kill -USR1 "$pool"
	wait_for "stack 2 to drain" 100 bash -c "curl -s '$METRICS/metrics' | grep -qx 'codebox_draining 1'"
	# straight to stack 2: 429, Codebox-Busy: draining
	request -X POST "$(fleet_word "$FLEET_BASES" 2)/sessions" -H 'Content-Type: application/json' \
		--data-binary "$NEW"
	assert_equal "$code" 429
	assert_equal "$(header Codebox-Busy)" draining
	assert_equal "$(header Retry-After)" 1
	# through the router: every new session is made elsewhere (a 429 is retried on another pod)
	for ((i = 0; i < 6; i++)); do
		request -X POST "$ROUTER/sessions" -H 'Content-Type: application/json' --data-binary "$NEW"
		assert_equal "$code" 201
		echo "$(field .id)" >>"$BATS_TEST_TMPDIR/sessions"
		[[ $(field .id) != 2-* ]]
	done
	# its own session goes on, through the router
	run_in "$sid2" 'kept'
	assert_equal "$code" 200
	assert_equal "$(field .value)" "'before the drain'"
	run -0 grep -c '"draining: no new session' "$STACK_DIR/logs/pool.log"
}

@test "fleet sessions: a stack killed: its sessions answer 404 through the router at once, the others' go on" {
	local i sid s ids=() lost=() kept=() ms t0
	for ((i = 0; i < 9; i++)); do
		session_new "$NEW"
		ids+=("$sid")
		run_in "$sid" "mine = $i"
	done
	for s in "${ids[@]}"; do
		if [[ $s == 1-* ]]; then lost+=("$s"); else kept+=("$s"); fi
	done
	((${#lost[@]} > 0 && ${#kept[@]} > 0))
	# a snapshot taken before its pod is lost keeps the state (the fleet's stacks share a key)
	local snap
	run_in "${lost[0]}" 'import pandas as pd
df = pd.DataFrame({"x": range(1000)})
open("notes.txt", "w").write("kept")'
	sreq POST "/sessions/${lost[0]}/snapshot"
	assert_equal "$code" 200
	snap=$(field .snapshot)
	fleet_kill 1
	BASE=$ROUTER
	t0=$EPOCHREALTIME
	for s in "${lost[@]}"; do
		run_in "$s" 'mine'
		assert_equal "$code" 404
		assert_equal "$(field .error)" not_found
		sreq GET "/sessions/$s"
		assert_equal "$code" 404
	done
	ms=$(((${EPOCHREALTIME/./} - ${t0/./}) / 1000))
	echo "the lost sessions' answers took ${ms} ms"
	((ms < 15000))
	for i in "${!ids[@]}"; do
		[[ ${ids[i]} != 1-* ]] || continue
		run_in "${ids[i]}" 'mine'
		assert_equal "$code" 200
		assert_equal "$(field .value)" "$i"
	done
	# and new sessions are made on the others
	session_new "$NEW"
	[[ $sid != 1-* ]]
	# the lost session's snapshot restores on another stack, through the router
	sreq POST /sessions "$(jq -cn --arg s "$snap" '{snapshot: $s}')"
	assert_equal "$code" 201
	sid=$(field .id)
	echo "$sid" >>"$BATS_TEST_TMPDIR/sessions"
	[[ $sid != 1-* ]]
	run_in "$sid" '(int(df.x.sum()), open("notes.txt").read())'
	assert_equal "$(field .value)" "(499500, 'kept')"
}

@test "fleet sessions: make fleet serves through the router and Ctrl-C stops every stack and the router, leaving nothing" {
	local dir port out=$BATS_TEST_TMPDIR/fleet.out pid i
	port=$(free_port)
	# not under bats' temp dir: runs execute as other uids and must reach their directory
	dir=$(mktemp -d /tmp/codebox-fleet-test.XXXXXX)
	echo "$dir" >"$BATS_TEST_TMPDIR/fleet-dir"
	# two stacks keep it short; the fleet's own process group, as a terminal's Ctrl-C reaches it
	# (numpy alone preloaded, as the suites' stacks)
	CODEBOX_WARM_MODULES=numpy CODEBOX_WARM_LIGHT_MODULES="" setsid make -C "$ROOT" \
		--no-print-directory fleet PORT="$port" REPLICAS=2 FLEET_DIR="$dir" >"$out" 2>&1 3>&- &
	pid=$!
	for ((i = 0; i < 1800; i++)); do
		grep -q "codebox: serving on http://127.0.0.1:$port" "$out" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	grep -q "codebox: serving on http://127.0.0.1:$port" "$out" || {
		cat "$out"
		false
	}
	request -X POST "http://127.0.0.1:$port/sessions" -H 'Content-Type: application/json' --data-binary "$NEW"
	assert_equal "$code" 201
	sid=$(field .id)
	[[ $sid =~ ^[01]-[0-9a-f]{32}$ ]]
	request -X POST "http://127.0.0.1:$port/sessions/$sid/execute" -d '{"code":"6 * 7"}'
	assert_equal "$(field .value)" 42
	# the fleet's secret: one file, the owner's alone
	run -0 stat -c %a "$dir/fleet.key"
	assert_output 600
	pgrep -f -- "$dir" >/dev/null
	# Ctrl-C: SIGINT to the whole process group
	kill -INT -- -"$pid"
	for ((i = 0; i < 600; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	# (make's own status is the signal's; the script's is in its last line)
	wait "$pid" || true
	cat "$out"
	run -1 pgrep -f -- "$dir"
	run -0 grep -c "codebox-fleet: stopped" "$out"
	[[ ! -e $dir/fleet.key ]]
	rm -rf "$dir"
}
