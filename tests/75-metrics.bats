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
	curl -s --max-time 10 "$BASE/metrics"
}

value() { # value SERIES: the sample of exactly that series (name and labels), or 0
	metrics | awk -v s="$1" '$1 == s { v = $2 } END { print v + 0 }'
}

@test "metrics: the exposition passes promtool check metrics" {
	run -0 curl -s -D "$BATS_TEST_TMPDIR/h" "$BASE/metrics"
	grep -qi '^content-type: text/plain; version=0.0.4' "$BATS_TEST_TMPDIR/h"
	run -0 promtool check metrics <<<"$output"
	run -0 metrics
	assert_output --regexp 'codebox_build_info\{version="[^"]+",python="3\.[0-9.]+"\} 1'
}

@test "metrics: executions are counted by status and limit, with their durations" {
	local ok failed timed count
	ok=$(value 'codebox_executions_total{port="execute",status="succeeded"}')
	failed=$(value 'codebox_executions_total{port="execute",status="failed"}')
	timed=$(value 'codebox_limit_exceeded_total{port="execute",limit="time"}')
	count=$(value 'codebox_execution_duration_seconds_count{port="execute"}')
	execute 'print(1)'
	execute 'import sys; sys.exit(2)'
	execute 'import time; time.sleep(5)' '{timeoutSeconds: 1}'
	assert_equal "$(value 'codebox_executions_total{port="execute",status="succeeded"}')" $((ok + 1))
	assert_equal "$(value 'codebox_executions_total{port="execute",status="failed"}')" $((failed + 1))
	assert_equal "$(value 'codebox_limit_exceeded_total{port="execute",limit="time"}')" $((timed + 1))
	assert_equal "$(value 'codebox_execution_duration_seconds_count{port="execute"}')" $((count + 3))
	# the timed-out run took at least a second
	(($(value 'codebox_execution_duration_seconds_bucket{port="execute",le="0.5"}') <= count + 2))
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
	light=$(value 'codebox_executions_by_tier_total{port="execute",tier="light"}')
	heavy=$(value 'codebox_executions_by_tier_total{port="execute",tier="heavy"}')
	cold=$(value 'codebox_executions_by_tier_total{port="execute",tier="cold"}')
	execute 'print(1)'
	# (test stacks preload numpy alone, as the heavy tier)
	execute 'import numpy; print(2)'
	if [[ ${CODEBOX_WARM:-1} == 1 ]]; then
		assert_equal "$(value 'codebox_executions_by_tier_total{port="execute",tier="light"}')" $((light + 1))
		assert_equal "$(value 'codebox_executions_by_tier_total{port="execute",tier="heavy"}')" $((heavy + 1))
	else
		assert_equal "$(value 'codebox_executions_by_tier_total{port="execute",tier="cold"}')" $((cold + 2))
	fi
	# every reason is exported, at 0 until it happens; so are the zygote's starts
	run -0 metrics
	for r in no_zygote template heavy_to_light; do
		grep -q "^codebox_warm_fallbacks_total{reason=\"$r\"} " <<<"$output"
	done
	grep -q '^codebox_zygote_starts_total{reason="renewal"} ' <<<"$output"
	grep -q '^codebox_execution_duration_seconds_bucket{port="execute",le="0.005"} ' <<<"$output"
}
