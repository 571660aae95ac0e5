#!/usr/bin/env bats
# GET /metrics: Prometheus text that promtool accepts, counting what really happened.

load helpers/stack

setup_file() {
	# one execution slot, so that a second concurrent run is refused (by the pool, the
	# authority on execution slots; nginx's limit_conn is only the outer bound)
	local conf
	conf=$(conf_variant 's/CODEBOX_MAX_CONCURRENT_EXECUTIONS  20;/CODEBOX_MAX_CONCURRENT_EXECUTIONS  1;/')
	stack_start --conf-dir "$conf"
}

teardown_file() {
	stack_stop
}

metrics() {
	curl -s --max-time 10 "$METRICS/metrics"
}

value() { # value SERIES: the sample of exactly that series (name and labels), or 0
	metrics | awk -v s="$1" '$1 == s { v = $2 } END { print v + 0 }'
}

@test "metrics: the exposition passes promtool check metrics" {
	run -0 curl -s -D "$BATS_TEST_TMPDIR/h" "$METRICS/metrics"
	grep -qi '^content-type: text/plain; version=0.0.4' "$BATS_TEST_TMPDIR/h"
	run -0 promtool check metrics <<<"$output"
	run -0 metrics
	# the release and the commit: VERSION+<git describe>
	assert_output --regexp "codebox_build_info\\{version=\"$(cat "$ROOT/VERSION")\\+[0-9a-f]{7,}(-dirty)?\",python=\"3\\.[0-9.]+\"\\} 1"
}

@test "metrics: executions are counted by status and limit, with their durations" {
	local ok failed timed count
	ok=$(value 'codebox_executions_total{api="execute",status="succeeded"}')
	failed=$(value 'codebox_executions_total{api="execute",status="failed"}')
	timed=$(value 'codebox_limit_exceeded_total{api="execute",limit="time"}')
	count=$(value 'codebox_execution_duration_seconds_count{api="execute"}')
	execute 'print(1)'
	execute 'import sys; sys.exit(2)'
	execute 'import time; time.sleep(5)' '{timeoutSeconds: 1}'
	assert_equal "$(value 'codebox_executions_total{api="execute",status="succeeded"}')" $((ok + 1))
	assert_equal "$(value 'codebox_executions_total{api="execute",status="failed"}')" $((failed + 1))
	assert_equal "$(value 'codebox_limit_exceeded_total{api="execute",limit="time"}')" $((timed + 1))
	assert_equal "$(value 'codebox_execution_duration_seconds_count{api="execute"}')" $((count + 3))
	# the timed-out run took at least a second
	(($(value 'codebox_execution_duration_seconds_bucket{api="execute",le="0.5"}') <= count + 2))
	run -0 promtool check metrics <<<"$(metrics)"
}

@test "metrics: a run in flight shows, and the pool's 429s are counted" {
	local before nginx_before
	before=$(value 'codebox_busy_rejections_total{source="pool"}')
	nginx_before=$(value 'codebox_busy_rejections_total{source="nginx"}')
	execute 'print(0)' # warm
	post "$(jq -cn '{code: "import time; time.sleep(3)"}')" >/dev/null &
	local slow=$!
	wait_for "the run to be in flight" 50 in_flight_is 1
	post '{"code":"print(2)"}'
	assert_equal "$code" 429
	wait "$slow"
	assert_equal "$(value 'codebox_busy_rejections_total{source="pool"}')" $((before + 1))
	assert_equal "$(value 'codebox_busy_rejections_total{source="nginx"}')" "$nginx_before"
	assert_equal "$(value codebox_executions_in_flight)" 0
}

in_flight_is() {
	[[ $(value codebox_executions_in_flight) == "$1" ]]
}

@test "metrics: a worker that dies is counted as restarted" {
	local before victim
	before=$(value codebox_worker_restarts_total)
	victim=$(worker_pids | head -1)
	kill -KILL "$victim"
	wait_for "the restart to be counted" 100 restarts_are $((before + 1))
}

restarts_are() {
	[[ $(value codebox_worker_restarts_total) == "$1" ]]
}

@test "metrics: port 8888 serves no /metrics" {
	run -0 curl -s -o /dev/null -w '%{http_code}' "$AGENT/metrics"
	assert_output 404
}

@test "metrics: runs are counted by the interpreter that ran them, with a bucket below a warm run" {
	local light heavy cold
	light=$(value 'codebox_executions_by_tier_total{api="execute",tier="light"}')
	heavy=$(value 'codebox_executions_by_tier_total{api="execute",tier="heavy"}')
	cold=$(value 'codebox_executions_by_tier_total{api="execute",tier="cold"}')
	execute 'print(1)'
	# (test stacks preload numpy alone, as the heavy tier)
	execute 'import numpy; print(2)'
	if [[ ${CODEBOX_WARM:-1} == 1 ]]; then
		assert_equal "$(value 'codebox_executions_by_tier_total{api="execute",tier="light"}')" $((light + 1))
		assert_equal "$(value 'codebox_executions_by_tier_total{api="execute",tier="heavy"}')" $((heavy + 1))
	else
		assert_equal "$(value 'codebox_executions_by_tier_total{api="execute",tier="cold"}')" $((cold + 2))
	fi
	# every reason is exported, at 0 until it happens; so are the zygote's starts
	run -0 metrics
	for r in no_zygote template heavy_to_light; do
		grep -q "^codebox_warm_fallbacks_total{reason=\"$r\"} " <<<"$output"
	done
	grep -q '^codebox_zygote_starts_total{reason="renewal"} ' <<<"$output"
	grep -q '^codebox_execution_duration_seconds_bucket{api="execute",le="0.005"} ' <<<"$output"
}

@test "metrics: capacity beside the gauge in flight, answers by HTTP status, the pool's process_*" {
	local ok404 ok200
	assert_equal "$(value codebox_execution_slots)" 1
	ok404=$(value 'codebox_http_responses_total{code="404"}')
	ok200=$(value 'codebox_http_responses_total{code="200"}')
	# nginx's own 404 and a 405, and one of the pool's 200s
	curl -s -o /dev/null "$BASE/no-such-route"
	curl -s -o /dev/null "$BASE/execute"
	execute 'print(1)'
	assert_equal "$(value 'codebox_http_responses_total{code="404"}')" $((ok404 + 1))
	(($(value 'codebox_http_responses_total{code="405"}') >= 1))
	# (the scrapes themselves are 200s too)
	(($(value 'codebox_http_responses_total{code="200"}') > ok200))
	run -0 metrics
	assert_output --regexp $'\nprocess_cpu_seconds_total [0-9.]+\n'
	assert_output --regexp $'\nprocess_resident_memory_bytes [1-9][0-9]+\n'
	assert_output --regexp $'\nprocess_open_fds [1-9][0-9]*\n'
	local start
	start=$(metrics | awk '$1 == "process_start_time_seconds" { printf "%d", $2 }')
	# the supervisor started within the last hour, not in 1970
	awk -v s="$start" -v now="$(date +%s)" 'BEGIN { exit !(s > now - 3600 && s <= now + 1) }'
}

@test "metrics: GET /metrics is served on its own port only, not on port 8080" {
	run -0 curl -s -o /dev/null -w '%{http_code}' "$BASE/metrics"
	assert_output 404
	run -0 curl -s -o /dev/null -w '%{http_code}' "$METRICS/execute"
	assert_output 404
	run -0 curl -s -o /dev/null -w '%{http_code}' "$METRICS/metrics"
	assert_output 200
}

@test "metrics: the sessions' gauges count the open sessions, their bound, the memory their caps reserve and the pool's budget" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local open mem ids=() i
	# raw SERIES: its sample as printed (value's awk would print large ones as 1.2e+10)
	raw() { metrics | awk -v s="$1" '$1 == s { v = $2 } END { print v == "" ? 0 : v }'; }
	open=$(raw codebox_sessions_open)
	mem=$(raw codebox_sessions_memory_bytes)
	assert_equal "$(value codebox_sessions_max)" 8
	# the pool's budget: known (the stack's memory), and more than a session's cap
	(($(raw codebox_memory_budget_bytes) > 104857600))
	assert_equal "$(value codebox_draining)" 0
	for i in 1 2; do
		request -X POST -H 'Content-Type: application/json' --data-binary '{"memoryBytes": 104857600}' "$BASE/sessions"
		assert_equal "$code" 201
		ids+=("$(field .id)")
	done
	assert_equal "$(value codebox_sessions_open)" $((open + 2))
	assert_equal "$(raw codebox_sessions_memory_bytes)" $((mem + 2 * 104857600))
	run -0 promtool check metrics <<<"$(metrics)"
	for i in "${ids[@]}"; do
		curl -s -o /dev/null -X DELETE "$BASE/sessions/$i"
	done
	assert_equal "$(value codebox_sessions_open)" "$open"
	assert_equal "$(raw codebox_sessions_memory_bytes)" "$mem"
}

@test "metrics: sessions made and ended by reason, snapshots, restores and background executions running are counted" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local made deleted idle killed snaps restores id snap eid
	made=$(value codebox_sessions_made_total)
	deleted=$(value 'codebox_sessions_ended_total{reason="deleted"}')
	idle=$(value 'codebox_sessions_ended_total{reason="idle"}')
	killed=$(value 'codebox_sessions_ended_total{reason="killed"}')
	snaps=$(value codebox_session_snapshots_total)
	restores=$(value codebox_session_restores_total)
	# made, snapshotted, then deleted
	request -X POST "$BASE/sessions"
	id=$(field .id)
	request -X POST "$BASE/sessions/$id/snapshot"
	assert_equal "$code" 200
	snap=$(field .snapshot)
	request -X DELETE "$BASE/sessions/$id"
	assert_equal "$code" 204
	# restored: made too; its program killed by its own cell
	request -X POST -H 'Content-Type: application/json' --data-binary "$(jq -cn --arg s "$snap" '{snapshot: $s}')" "$BASE/sessions"
	assert_equal "$code" 201
	id=$(field .id)
	request -X POST -H 'Content-Type: application/json' --data-binary '{"code": "import os\nos._exit(3)"}' "$BASE/sessions/$id/execute"
	assert_equal "$(field .session.open)" false
	# an idle one, ended by its bound and found so by the next look
	request -X POST -H 'Content-Type: application/json' --data-binary '{"idleTimeoutSeconds": 1}' "$BASE/sessions"
	id=$(field .id)
	wait_for "the idle session to end" 100 bash -c "[[ \$(curl -s -o /dev/null -w '%{http_code}' $BASE/sessions/$id) == 404 ]]"
	assert_equal "$(value codebox_sessions_made_total)" $((made + 3))
	assert_equal "$(value 'codebox_sessions_ended_total{reason="deleted"}')" $((deleted + 1))
	assert_equal "$(value 'codebox_sessions_ended_total{reason="killed"}')" $((killed + 1))
	assert_equal "$(value 'codebox_sessions_ended_total{reason="idle"}')" $((idle + 1))
	assert_equal "$(value codebox_session_snapshots_total)" $((snaps + 1))
	assert_equal "$(value codebox_session_restores_total)" $((restores + 1))
	# a background execution running shows in the gauge while it runs
	request -X POST "$BASE/sessions"
	id=$(field .id)
	request -X POST -H 'Content-Type: application/json' --data-binary '{"code": "import time\ntime.sleep(30)", "background": true}' "$BASE/sessions/$id/execute"
	assert_equal "$code" 202
	eid=$(field .execution)
	assert_equal "$(value codebox_background_executions)" 1
	request -X DELETE "$BASE/sessions/$id"
	wait_for "the background execution to end" 100 bash -c "[[ \$(curl -s $METRICS/metrics | awk '\$1 == \"codebox_background_executions\" { print \$2 }') == 0 ]]"
	run -0 promtool check metrics <<<"$(metrics)"
	: "$eid"
}
