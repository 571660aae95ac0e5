#!/usr/bin/env bats
# W3C Trace Context (OPERATIONS.md, "Traces"): a request's traceparent is taken on every port,
# its trace id is in that request's access.log line, pool.log lines and audit trail entry,
# and the reply's traceparent carries it with codebox's own span; an invalid header is
# ignored. With CODEBOX_OTLP_ENDPOINT, each traced run is exported as one OTLP/HTTP JSON span
# (to a stand-in collector here: tests/helpers/otlp_sink.py).

load helpers/stack

TID=4bf92f3577b34da6a3ce929d0e0e4736
PARENT=00f067aa0ba902b7

setup_file() {
	TRACES=$(mktemp -d /tmp/codebox-traces.XXXXXX)
	export TRACES
	"$PY" "$ROOT/tests/helpers/otlp_sink.py" "$TRACES/sink.port" "$TRACES/spans.jsonl" 3>&- &
	SINK_PID=$!
	export SINK_PID
	wait_for "the collector to listen" 100 test -s "$TRACES/sink.port"
	CODEBOX_HISTORY_DIR=$TRACES/trail \
		CODEBOX_OTLP_ENDPOINT="http://127.0.0.1:$(cat "$TRACES/sink.port")/v1/traces" stack_start
}

teardown_file() {
	stack_stop
	kill -TERM "$SINK_PID" 2>/dev/null || true
	wait "$SINK_PID" 2>/dev/null || true
	rm -rf "$TRACES"
}

logged() { # logged FILE REQUEST-ID: a line of FILE carries the request id
	grep -q "\"requestId\":\"$2\"" "$STACK_DIR/logs/$1"
}

meta_of() { # meta_of REQUEST-ID: the audit trail's meta of the request's run
	grep -l "\"requestId\":\"$1\"" "$TRACES"/trail/*.meta.json | head -1
}

meta_final() { # the run's meta is its end's (no longer pending)
	local m
	m=$(meta_of "$1") && [[ -n $m ]] && ! grep -q '"status":"pending"' "$m"
}

# traced_everywhere REQUEST-ID TRACE-ID: the id is in the request's access.log line, in every
# pool.log line of it (at least one), and in its audit trail meta
traced_everywhere() {
	wait_for "the access log's line" 100 logged access.log "$1"
	wait_for "the run's meta" 100 meta_final "$1"
	run -0 jq -se --arg r "$1" --arg t "$2" \
		'[.[] | select(.requestId == $r)] | length == 1 and all(.traceId == $t)' \
		"$STACK_DIR/logs/access.log"
	run -0 jq -se --arg r "$1" --arg t "$2" \
		'[.[] | select(.requestId? == $r)] | length >= 1 and all(.traceId == $t)' \
		"$STACK_DIR/logs/pool.log"
	run -0 jq -e --arg t "$2" '.traceId == $t' "$(meta_of "$1")"
}

# untraced REQUEST-ID: no trace id of it anywhere, and no traceparent in the reply
untraced() {
	wait_for "the access log's line" 100 logged access.log "$1"
	run -0 jq -se --arg r "$1" \
		'[.[] | select(.requestId == $r)] | length == 1 and all(.traceId == "")' \
		"$STACK_DIR/logs/access.log"
	run -0 jq -se --arg r "$1" \
		'[.[] | select(.requestId? == $r)] | length >= 1 and all(has("traceId") | not)' \
		"$STACK_DIR/logs/pool.log"
	wait_for "the run's meta" 100 meta_final "$1"
	run -0 jq -e 'has("traceId") | not' "$(meta_of "$1")"
	refute grep -qi '^traceparent:' "$BATS_TEST_TMPDIR/headers"
}

# answered_traced TRACE-ID FLAGS: the reply's traceparent is the trace's, with codebox's span
answered_traced() {
	local tp
	tp=$(header traceparent)
	[[ $tp =~ ^00-$1-([0-9a-f]{16})-$2$ ]]
	[[ ${BASH_REMATCH[1]} != "$PARENT" && ${BASH_REMATCH[1]} != 0000000000000000 ]]
}

@test "traces: a valid traceparent on /execute is in every log of the request and in the reply" {
	post '{"code":"print(6 * 7)"}' -H 'X-Request-Id: tr-8080' \
		-H "traceparent: 00-$TID-$PARENT-01" -H 'tracestate: congo=t61rcWkgMzE,rojo=00f067aa0ba902b7'
	assert_equal "$code" 200
	assert_equal "$(field .stdout)" 42
	answered_traced "$TID" 01
	assert_equal "$(header tracestate)" 'congo=t61rcWkgMzE,rojo=00f067aa0ba902b7'
	traced_everywhere tr-8080 "$TID"
	# each request its own span: a second reply's differs from the first's
	local first
	first=$(header traceparent)
	post '{"code":"print(1)"}' -H 'X-Request-Id: tr-8080-b' -H "traceparent: 00-$TID-$PARENT-00"
	answered_traced "$TID" 00
	[[ $(header traceparent) != "${first%-01}-00" ]]
}

@test "traces: invalid traceparents are ignored, never an error, and nothing of them is logged" {
	local bad=(
		"00-$TID-$PARENT-1"                                   # a short field
		"00-${TID}aa-$PARENT-01"                              # a long trace id
		"00-${TID^^}-$PARENT-01"                              # uppercase
		"00-00000000000000000000000000000000-$PARENT-01"      # an all-zero trace id
		"00-$TID-0000000000000000-01"                         # an all-zero parent id
		"ff-$TID-$PARENT-01"                                  # version ff
		"00-$TID-$PARENT-01-extra"                            # version 00 with more
		"0g-$TID-$PARENT-01"                                  # not hex
		'garbage'
		"00_${TID}_${PARENT}_01"
	) i
	for i in "${!bad[@]}"; do
		post '{"code":"print(1)"}' -H "X-Request-Id: tr-bad-$i" -H "traceparent: ${bad[$i]}"
		assert_equal "$code" 200
		assert_equal "$(field .stdout)" 1
		untraced "tr-bad-$i"
	done
	# two traceparent headers: invalid together, even when each is valid alone
	post '{"code":"print(1)"}' -H 'X-Request-Id: tr-bad-two' \
		-H "traceparent: 00-$TID-$PARENT-01" -H "traceparent: 00-$TID-$PARENT-01"
	assert_equal "$code" 200
	untraced tr-bad-two
	# and none at all
	post '{"code":"print(1)"}' -H 'X-Request-Id: tr-none'
	assert_equal "$code" 200
	untraced tr-none
}

@test "traces: a later version's traceparent is read by its first four fields" {
	local tid=0af7651916cd43dd8448eb211c80319c
	post '{"code":"print(1)"}' -H 'X-Request-Id: tr-v1' -H "traceparent: 01-$tid-b7ad6b7169203331-03-more"
	assert_equal "$code" 200
	answered_traced "$tid" 03
	traced_everywhere tr-v1 "$tid"
}

@test "traces: port 8888, MCP and the metrics port take a traceparent too" {
	local tid=11111111111111111111111111111111
	request -H 'Content-Type: application/json' -H 'X-Request-Id: tr-8888' \
		-H "traceparent: 00-$tid-$PARENT-01" --data-binary '{"command":"echo hi"}' "$AGENT/execute"
	assert_equal "$code" 200
	assert_equal "$(field .stdout)" hi
	answered_traced "$tid" 01
	traced_everywhere tr-8888 "$tid"
	run -0 jq -e '.port == "agent"' "$(meta_of tr-8888)"

	# MCP's tools/call (port 8080), a run like /execute's
	tid=66666666666666666666666666666666
	request -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
		-H 'X-Request-Id: tr-mcp' -H "traceparent: 00-$tid-$PARENT-01" --data-binary \
		'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"code_executor","arguments":{"code":"print(5)"}}}' \
		"$BASE/mcp"
	assert_equal "$code" 200
	answered_traced "$tid" 01
	traced_everywhere tr-mcp "$tid"

	tid=22222222222222222222222222222222
	request -H 'X-Request-Id: tr-9090' -H "traceparent: 00-$tid-$PARENT-01" "$METRICS/metrics"
	assert_equal "$code" 200
	answered_traced "$tid" 01
	wait_for "the access log's line" 100 logged access.log tr-9090
	run -0 jq -se --arg t "$tid" '[.[] | select(.requestId == "tr-9090")] | length == 1 and .[0].traceId == $t' \
		"$STACK_DIR/logs/access.log"
}

bg_done() { # bg_done SESSION EXECUTION: the background execution has its answer
	curl -s --max-time 10 "$BASE/sessions/$1/executions/$2" | jq -e '.state == "done"' >/dev/null
}

@test "traces: a session's executions, in the foreground and in the background, carry the trace" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local sid eid tid=44444444444444444444444444444444
	run -0 curl -s --max-time 60 -X POST "$BASE/sessions"
	sid=$(jq -r .id <<<"$output")
	[[ -n $sid && $sid != null ]]
	request -H 'Content-Type: application/json' -H 'X-Request-Id: tr-ses' -H "traceparent: 00-$tid-$PARENT-01" \
		--data-binary '{"code": "x = 6 * 7\nprint(x)"}' "$BASE/sessions/$sid/execute"
	assert_equal "$code" 200
	answered_traced "$tid" 01
	traced_everywhere tr-ses "$tid"
	# a background execution's run is the watcher's, after the request: still the request's trace
	tid=55555555555555555555555555555555
	request -H 'Content-Type: application/json' -H 'X-Request-Id: tr-ses-bg' -H "traceparent: 00-$tid-$PARENT-01" \
		--data-binary '{"code": "print(x)", "background": true}' "$BASE/sessions/$sid/execute"
	answered_traced "$tid" 01
	eid=$(field .execution)
	wait_for "the background execution to end" 300 bg_done "$sid" "$eid"
	traced_everywhere tr-ses-bg "$tid"
	wait_for "its span" 100 span_of "$tid"
	curl -s -o /dev/null --max-time 10 -X DELETE "$BASE/sessions/$sid"
}

span_of() { # span_of TRACE-ID: the collector got a span of the trace
	[[ -s $TRACES/spans.jsonl ]] && grep -q "\"traceId\":\"$1\"" "$TRACES/spans.jsonl"
}

@test "traces: a traced run is exported as one OTLP/HTTP JSON span; an untraced one is not" {
	local tid=33333333333333333333333333333333 before span
	post '{"code":"print(1)"}' -H 'X-Request-Id: tr-untraced'
	assert_equal "$code" 200
	post '{"code":"import sys; sys.exit(3)"}' -H 'X-Request-Id: tr-otlp' -H "traceparent: 00-$tid-$PARENT-01"
	assert_equal "$code" 200
	answered_traced "$tid" 01
	span=$(header traceparent | cut -d- -f3)
	wait_for "the span" 100 span_of "$tid"
	run -0 jq -ce --arg t "$tid" 'select(.body | tostring | contains($t))' "$TRACES/spans.jsonl"
	assert_equal "${#lines[@]}" 1
	run -0 jq -e --arg t "$tid" --arg p "$PARENT" --arg s "$span" '
		.path == "/v1/traces" and .contentType == "application/json" and
		(.body.resourceSpans | length) == 1 and
		(.body.resourceSpans[0].resource.attributes | any(.key == "service.name" and .value.stringValue == "codebox")) and
		(.body.resourceSpans[0].scopeSpans | length) == 1 and
		(.body.resourceSpans[0].scopeSpans[0].spans | length) == 1 and
		(.body.resourceSpans[0].scopeSpans[0].spans[0] |
			.traceId == $t and .spanId == $s and .parentSpanId == $p and .kind == 2 and
			.name == "execute" and
			((.endTimeUnixNano | tonumber) >= (.startTimeUnixNano | tonumber)) and
			((.startTimeUnixNano | tonumber) > 1.7e18) and
			(.attributes | any(.key == "codebox.status" and .value.stringValue == "failed")) and
			(.attributes | any(.key == "codebox.exit_code" and .value.intValue == "3")) and
			(.attributes | any(.key == "codebox.tier")) and
			([.events[].name] == ["admitted", "ran"]))' <<<"$output"
	# only traced runs: every span the collector got is of a trace some request sent
	run -0 jq -se 'all(.body.resourceSpans[0].scopeSpans[0].spans[0].traceId | IN(
		"4bf92f3577b34da6a3ce929d0e0e4736", "0af7651916cd43dd8448eb211c80319c",
		"11111111111111111111111111111111", "33333333333333333333333333333333",
		"44444444444444444444444444444444", "55555555555555555555555555555555",
		"66666666666666666666666666666666"))' "$TRACES/spans.jsonl"
}

@test "traces: a collector that does not answer within the bound costs the request nothing" {
	# the collector now holds every export for 5 s, past the export's 200 ms bound
	touch "$TRACES/spans.jsonl.hang"
	post '{"code":"print(1)"}' -H 'X-Request-Id: tr-hang' -H "traceparent: 00-$TID-$PARENT-01"
	assert_equal "$code" 200
	assert_equal "$(field .stdout)" 1
	# the worker gave up on it, said so, and serves on
	wait_for "the export's failure" 100 grep -q 'exporting a span failed.*timed out' "$STACK_DIR/logs/pool.log"
	rm -f "$TRACES/spans.jsonl.hang"
	answers_42
}
