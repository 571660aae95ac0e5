#!/usr/bin/env bats
# The stack starts, answers on every route, and carries request ids through both logs.

load helpers/stack

setup_file() {
	stack_start
}

teardown_file() {
	stack_stop
}

@test "smoke: /healthz answers from nginx alone" {
	run -0 curl -s -i "$BASE/healthz"
	assert_line --partial "HTTP/1.1 200"
	assert_line --partial "Content-Type: application/json"
	assert_line '{"status":"ok"}'
}

@test "smoke: /readyz answers 200 when a worker answers" {
	run -0 curl -s -o /dev/null -w '%{http_code}' "$BASE/readyz"
	assert_output 200
}

@test "smoke: /capabilities reports measured versions and the enforced limits" {
	run -0 curl -s "$BASE/capabilities"
	reply=$output
	assert_equal "$(field 'keys_unsorted | join(",")')" \
		"pythonVersion,modules,limits,network,persistence,structuredResult"
	assert_equal "$(field .pythonVersion)" "$("$PY" -c 'import platform; print(platform.python_version())')"
	assert_equal "$(field '[.modules[].importName] | join(",")')" "numpy,pandas,scipy,sympy,sklearn"
	assert_equal "$(field '.modules[] | select(.importName == "sklearn") | .distribution')" "scikit-learn"
	assert_equal "$(field '.modules[] | select(.importName == "numpy") | .version')" \
		"$("$PY" -c 'import numpy; print(numpy.__version__)')"
	assert_equal "$(field '.limits | keys_unsorted | join(",")')" \
		"executionTimeoutSeconds,maxCodeBytes,maxStdoutBytes,maxStderrBytes,maxResultBytes,maxConcurrentExecutions"
	assert_equal "$(field '.limits.executionTimeoutSeconds')" 30
	assert_equal "$(field '.limits.maxConcurrentExecutions')" 20
}

@test "smoke: POST /execute runs Python and answers with the outcome" {
	execute 'print(6 * 7)'
	assert_equal "$code" 200
	assert_equal "$(field .status)" succeeded
	assert_equal "$(field .stdout)" 42
}

@test "smoke: every response carries X-Request-Id, nginx's or the client's own" {
	run -0 curl -s -i "$BASE/nope"
	assert_line --regexp '^X-Request-Id: [0-9a-f]{32}'
	run -0 curl -s -i -H 'X-Request-Id: my-trace.42' "$BASE/healthz"
	assert_line --partial 'X-Request-Id: my-trace.42'
	# a malformed one is replaced, not echoed
	run -0 curl -s -i -H 'X-Request-Id: bad id"<>' "$BASE/healthz"
	refute_line --partial 'bad id'
	assert_line --regexp '^X-Request-Id: [0-9a-f]{32}'
}

@test "smoke: the request id joins nginx's access log and the worker's log, both JSON with fields" {
	post '{"code":"print(1)"}' -H 'X-Request-Id: trace-smoke-1'
	assert_equal "$code" 200
	assert_equal "$(header X-Request-Id)" trace-smoke-1
	run -0 grep -c '"requestId":"trace-smoke-1"' "$STACK_DIR/logs/access.log"
	run -0 grep -c '"requestId":"trace-smoke-1"' "$STACK_DIR/logs/pool.log"
	# and the access log is JSON, with the server's port, the upstream's status, the agent
	run -0 jq -e --argjson port "${BASE##*:}" 'select(.requestId == "trace-smoke-1") |
		.status == 200 and .serverPort == $port and .upstreamStatus == 200 and
		(.requestTime | type) == "number" and (.upstreamTime | type) == "number" and
		(.userAgent | startswith("curl/"))' "$STACK_DIR/logs/access.log"
	# the pool's line carries the outcome as fields; its name is not access.log's status
	run -0 jq -e 'select(.requestId == "trace-smoke-1" and .api == "execute") |
		.outcome == "succeeded" and (has("status") | not) and .exitCode == 0 and (.durationMs | type) == "number" and
		(.cpuMs | type) == "number" and .minorFaults > 0 and .maxRssBytes > 0 and
		.stdoutBytes == 2 and .stderrBytes == 0 and
		(.tier | IN("cold", "light", "heavy"))' "$STACK_DIR/logs/pool.log"
}

@test "smoke: every log field has one type: upstream numbers or null, nginx's counters outside the logs" {
	post '{"code":"print(1)"}' -H 'X-Request-Id: trace-smoke-2'
	assert_equal "$code" 200
	run -0 curl -s -o /dev/null -w '%{http_code}' -H 'X-Request-Id: trace-smoke-404' "$BASE/no-such-thing"
	assert_output 404
	# nginx's own answer: no upstream, so null, not "" or "-"
	run -0 jq -e 'select(.requestId == "trace-smoke-404") |
		.status == 404 and .upstreamStatus == null and .upstreamTime == null' "$STACK_DIR/logs/access.log"
	# every line, whoever answered: each field has one type
	run -0 jq -se 'length > 2 and all(.[];
		(.status, .bytes, .requestTime, .serverPort | type) == "number" and
		(.upstreamStatus | type | IN("number", "null")) and (.upstreamTime | type | IN("number", "null")) and
		(.time, .requestId, .remote, .method, .uri, .userAgent | type) == "string")' "$STACK_DIR/logs/access.log"
	run -0 jq -se 'all(.[]; (.time, .level, .component, .msg | type) == "string" and (.pid | type) == "number") and
		all(.[] | select(.api); (.outcome | type) == "string" and (has("status") | not))' "$STACK_DIR/logs/pool.log"
	# nginx's error log is plain text (nginx has no format for it), in the documented form
	run -0 grep -c . "$STACK_DIR/logs/error.log"
	run -1 grep -vE '^[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2} \[(debug|info|notice|warn|error|crit|alert|emerg)\] [0-9]+#[0-9]+: (\*[0-9]+ )?.+$' \
		"$STACK_DIR/logs/error.log"
	# the counters GET /metrics reads are in counters/, none among the logs
	run -0 ls "$STACK_DIR/logs"
	refute_output --partial nginx-
	run -0 ls "$STACK_DIR/counters"
	assert_line nginx-status-200.log
	assert_line nginx-status-404.log
	assert_line nginx-429.log
}

@test "smoke: details.requestId is the request id" {
	execute 'pass' '{details: true}'
	assert_equal "$(field .details.requestId)" "$(header X-Request-Id)"
}

@test "smoke: make run PORT=N serves on N, and says so only once nginx answers there" {
	local port dir out pid i
	# make run serves the plain build, whatever the pass: the plain pass runs this
	[[ -z ${CODEBOX_ASAN:-} ]] || skip "make run serves the plain build (the plain pass runs this)"
	# a port whose next one is free too: PORT alone gives the agent port PORT + 1
	for ((i = 0; i < 50; i++)); do
		port=$(free_port)
		"$PY" -c 'import socket, sys; socket.socket().bind(("127.0.0.1", int(sys.argv[1])))' $((port + 1)) 2>/dev/null && break
	done
	dir=$(mktemp -d /tmp/codebox-test.XXXXXX)
	out="$dir/make-run.out"
	# an nginx that takes a second to start: "serving on" must wait for it
	printf '#!/usr/bin/env bash\nsleep 1\nexec /usr/sbin/nginx "$@"\n' >"$dir/slow-nginx"
	chmod +x "$dir/slow-nginx"
	# PORT alone: its agent port (PORT + 1) and its run uids are its own, so it never collides
	# with a first instance (nor the other lane's stacks)
	NGINX="$dir/slow-nginx" setsid make -s -C "$ROOT" run PORT="$port" >"$out" 2>&1 3>&- &
	pid=$!
	for ((i = 0; i < 1200; i++)); do
		grep -q "serving on" "$out" && break
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	run -0 grep -o "serving on http://127.0.0.1:$port" "$out"
	# the moment it says so, nginx answers
	run -0 command curl -s "http://127.0.0.1:$port/healthz"
	assert_output '{"status":"ok"}'
	run -0 command curl -s "http://127.0.0.1:$((port + 1))/"
	assert_output '{"status": "ok", "message": "Sandbox Runtime is active."}'
	# make run serves the playground (tests/91-playground.bats tests it)
	run -0 command curl -s -o /dev/null -w '%{http_code} %{content_type}' "http://127.0.0.1:$port/"
	assert_output '200 text/html; charset=utf-8'
	run -0 grep -o "the playground: open http://127.0.0.1:$port/ in a browser" "$out"
	run -0 pgrep -f -- "--run-uid-base $(uid_base_for "$port")"
	run -0 grep -o "logs in /tmp/codebox.[A-Za-z0-9]*/logs; Ctrl-C stops" "$out"
	kill -TERM -- "-$pid"
	wait "$pid" || true
	wait_for "make run to stop" 600 marker_gone "$port --pool"
	rm -rf "$dir" "$(grep -o '/tmp/codebox\.[A-Za-z0-9]*' "$out" | head -1)"
}
