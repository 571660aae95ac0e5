#!/usr/bin/env bats
# Bearer tokens (codebox's nginx module, nginx/codebox-auth.conf): with a token file, every
# route of ports 8080 and 8888 but the probes needs a valid token, the metrics port none; no
# run sees one; a rewritten file is read again without a reload or restart, a reload reads it
# too. One nginx worker, so that "the worker saw the change" is one event (each worker looks
# on its own, at most once a second, with the same code).

load helpers/stack

TOKEN_A=codebox-token-A-0123456789abcdef
TOKEN_B=codebox-token-B-0123456789abcdef

setup_file() {
	# nginx's workers (nobody, under a root stack) read the file again when it changes: it
	# must be theirs to read, as a Secret mounted for the pod's uid is
	TOKENS_DIR=$(mktemp -d /tmp/codebox-tokens.XXXXXX)
	chmod 0711 "$TOKENS_DIR"
	export TOKENS="$TOKENS_DIR/tokens" TOKENS_DIR
	umask 0022
	printf '# the clients of this stack\n%s\n\n%s\n' "$TOKEN_A" "$TOKEN_B" >"$TOKENS"
	stack_start --auth-tokens "$TOKENS" --conf-dir "$(conf_variant 's/^worker_processes  auto;/worker_processes  1;/')"
}

teardown_file() {
	stack_stop
	rm -rf "$TOKENS_DIR"
}

# status METHOD URL [curl args...]: the HTTP status; the body in $BATS_TEST_TMPDIR/body (where a
# test reads the body too, it calls request, which sets $code and $reply)
status() {
	local m=$1 u=$2
	shift 2
	curl -s -o "$BATS_TEST_TMPDIR/body" -D "$BATS_TEST_TMPDIR/headers" -w '%{http_code}' \
		--max-time 60 -X "$m" "$@" "$u"
}

@test "auth: without a token every route answers 401 JSON with WWW-Authenticate; the probes answer" {
	local r
	for r in "POST $BASE/execute" "GET $BASE/capabilities" "GET $BASE/isolation" "GET $BASE/tool" \
		"POST $BASE/mcp" "GET $BASE/nowhere" "GET $BASE/execute" "POST $AGENT/execute" \
		"GET $AGENT/list/" "GET $AGENT/" "GET $BASE/openapi.json" "GET $AGENT/openapi.json"; do
		# shellcheck disable=SC2086
		request -X $r -d '{"code":"print(1)"}'
		assert_equal "$code" 401
		assert_equal "$(field .error)" unauthorized
		run -0 grep -i '^WWW-Authenticate: Bearer realm="codebox"' "$BATS_TEST_TMPDIR/headers"
	done
	assert_equal "$(status GET "$BASE/healthz")" 200
	assert_equal "$(status GET "$BASE/readyz")" 200
	assert_equal "$(status GET "$AGENT/readyz")" 200
	# the OpenAPI documents are the API's: a token opens them, as it opens /capabilities
	assert_equal "$(status GET "$BASE/openapi.json" -H "Authorization: Bearer $TOKEN_A")" 200
	assert_equal "$(status GET "$AGENT/openapi.json" -H "Authorization: Bearer $TOKEN_B")" 200
}

@test "auth: a wrong token is 401 invalid_token; either listed token runs the program" {
	assert_equal "$(status POST "$BASE/execute" -H 'Authorization: Bearer codebox-token-A-0123456789abcdeX' -d '{"code":"print(1)"}')" 401
	run -0 grep -i 'error="invalid_token"' "$BATS_TEST_TMPDIR/headers"
	assert_equal "$(status POST "$BASE/execute" -H "Authorization: Bearer ${TOKEN_A}x" -d '{"code":"print(1)"}')" 401
	assert_equal "$(status POST "$BASE/execute" -H "Authorization: Basic $TOKEN_A" -d '{"code":"print(1)"}')" 401
	assert_equal "$(status POST "$BASE/execute" -H "Authorization: Bearer ${TOKEN_A:0:20}" -d '{"code":"print(1)"}')" 401
	local t
	for t in "$TOKEN_A" "$TOKEN_B"; do
		request -H "Authorization: Bearer $t" -d '{"code":"print(6 * 7)"}' "$BASE/execute"
		assert_equal "$code" 200
		assert_equal "$(field .stdout)" 42
	done
	assert_equal "$(status POST "$AGENT/execute" -H "authorization: bearer $TOKEN_B" \
		-H 'Content-Type: application/json' -d '{"command":"echo ok"}')" 200
}

@test "auth: no run, log or audit entry ever holds a token" {
	status POST "$BASE/execute" -H "Authorization: Bearer $TOKEN_A" \
		-d '{"code":"import os\nprint(sorted(os.environ.items()))\nfor p in (\"/proc/self/environ\", \"/proc/1/environ\", \"/proc/1/cmdline\"):\n    try:\n        print(open(p, \"rb\").read())\n    except OSError as e:\n        print(p, e)"}' >/dev/null
	run grep -c -- "codebox-token-" "$BATS_TEST_TMPDIR/body"
	assert_output 0
	run grep -rlc -- "codebox-token-" "$STACK_DIR/logs" "$STACK_DIR/runs"
	assert_output ""
}

@test "auth: a session is its token's: another token, or none, meets 404; the pool holds no token" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	assert_equal "$(status POST "$BASE/sessions" -H "Authorization: Bearer $TOKEN_A")" 201
	local sid
	sid=$(jq -r .id "$BATS_TEST_TMPDIR/body")
	assert_equal "$(status POST "$BASE/sessions/$sid/execute" -H "Authorization: Bearer $TOKEN_A" -d '{"code":"mine = 1"}')" 200
	request -H "Authorization: Bearer $TOKEN_B" -d '{"code":"mine"}' "$BASE/sessions/$sid/execute"
	assert_equal "$code" 404
	assert_equal "$(field .error)" not_found
	assert_equal "$(status GET "$BASE/sessions/$sid" -H "Authorization: Bearer $TOKEN_B")" 404
	assert_equal "$(status DELETE "$BASE/sessions/$sid" -H "Authorization: Bearer $TOKEN_B")" 404
	assert_equal "$(status GET "$BASE/sessions/$sid")" 401
	request -H "Authorization: Bearer $TOKEN_A" -d '{"code":"mine"}' "$BASE/sessions/$sid/execute"
	assert_equal "$code" 200
	assert_equal "$(field .value)" 1
	# the records hold a salted hash of the token's hash, never the token
	run grep -rlc -- "codebox-token-" "$STACK_DIR/runs" "$STACK_DIR/logs"
	assert_output ""
	assert_equal "$(status DELETE "$BASE/sessions/$sid" -H "Authorization: Bearer $TOKEN_A")" 204
}

@test "auth: the metrics port needs no token: Prometheus scrapes it, the network decides who reaches it" {
	assert_equal "$(status GET "$METRICS/metrics")" 200
	run -0 grep -q '^codebox_executions_total' "$BATS_TEST_TMPDIR/body"
	run -1 grep -i '^WWW-Authenticate' "$BATS_TEST_TMPDIR/headers"
	# a token, right or wrong, changes nothing there
	assert_equal "$(status GET "$METRICS/metrics" -H 'Authorization: Bearer nonsense')" 200
	assert_equal "$(status GET "$METRICS/nowhere")" 404
	# and port 8080 still wants one
	assert_equal "$(status GET "$BASE/capabilities")" 401
}

# answers TOKEN CODE: GET /capabilities with TOKEN is answered CODE
answers() {
	[[ $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $1" "$BASE/capabilities") == "$2" ]]
}

# nginx_procs: nginx's master and its workers, one pid a line
nginx_procs() {
	local m
	m=$(stack_nginx_pid)
	echo "$m"
	pgrep -P "$m" | sort
}

# tokens_now TOKEN: the file holds TOKEN alone, and nginx has taken it (each test starts from
# a state of its own)
tokens_now() {
	printf '%s\n' "$1" >"$TOKENS.next"
	mv "$TOKENS.next" "$TOKENS"
	wait_for "$1 taken" 100 answers "$1" 200
}

@test "auth: a token file replaced by another is read again without a reload or restart" {
	local new=codebox-token-C-0123456789abcdef procs
	procs=$(nginx_procs)
	printf '%s\n' "$new" >"$TOKENS.next"
	mv "$TOKENS.next" "$TOKENS"
	# within a second of the change (bounded: 10 s)
	wait_for "the old token refused" 100 answers "$TOKEN_A" 401
	answers "$new" 200
	answers "$TOKEN_B" 401
	# the same nginx master and worker: nothing was reloaded or restarted
	assert_equal "$(nginx_procs)" "$procs"
	grep -q "codebox_auth_tokens: \"$TOKENS\" read again: 1 tokens" "$STACK_DIR/logs/error.log"
}

@test "auth: a token file rewritten in place is read again too" {
	local old=codebox-token-C-0123456789abcdef new=codebox-token-D-0123456789abcdef procs
	tokens_now "$old"
	procs=$(nginx_procs)
	printf '# rotated\n%s\n' "$new" >"$TOKENS"
	wait_for "the old token refused" 100 answers "$old" 401
	answers "$new" 200
	assert_equal "$(nginx_procs)" "$procs"
}

# refused_logged: error.log says the malformed file was refused (after a request made the
# worker look)
refused_logged() {
	answers x 401
	grep -q "the token on line 2 of \"$TOKENS\" is shorter than 16 bytes; the tokens read before stay in force" \
		"$STACK_DIR/logs/error.log"
}

@test "auth: a malformed rewrite is logged and the tokens in force stay; a good one is read again" {
	local cur=codebox-token-D-0123456789abcdef next=codebox-token-E-0123456789abcdef
	tokens_now "$cur"
	printf '%s\nshort\n' "$next" >"$TOKENS"
	wait_for "the refusal logged" 100 refused_logged
	answers "$cur" 200
	answers "$next" 401
	printf '%s\n' "$next" >"$TOKENS"
	wait_for "the new token taken" 100 answers "$next" 200
	answers "$cur" 401
}

@test "auth: a reload reads the token file too" {
	local cur=codebox-token-E-0123456789abcdef new=codebox-token-F-0123456789abcdef nginx old_workers
	tokens_now "$cur"
	printf '%s\n' "$new" >"$TOKENS.next"
	mv "$TOKENS.next" "$TOKENS"
	nginx=$(stack_nginx_pid)
	old_workers=$(nginx_procs | tail -n +2)
	kill -HUP "$nginx"
	# the reload is over once every worker is new: until then an old worker, which may not
	# have looked at the file again yet, can take a request beside the new one
	wait_for "the reload's new workers alone" 300 reloaded "$old_workers"
	answers "$cur" 401
	answers "$new" 200
	assert_equal "$(stack_nginx_pid)" "$nginx"
}

# reloaded OLD_WORKERS: nginx's workers are all new (none of OLD_WORKERS), and there is one
reloaded() {
	local now
	now=$(nginx_procs | tail -n +2)
	[[ -n $now ]] && [[ -z $(comm -12 <(echo "$now") <(echo "$1")) ]]
}

@test "auth: a token file with a short token, or none, is refused with its line" {
	local p="$BATS_TEST_TMPDIR/prefix"
	mkdir -p "$p/logs" "$p/counters" "$p/tmp"
	cp -r "$STACK_DIR/conf" "$p/conf"
	ln -s "$(readlink -f "$STACK_DIR/modules")" "$p/modules"
	printf '# ok\n%s\nshort\n' "$TOKEN_A" >"$BATS_TEST_TMPDIR/bad"
	echo "codebox_auth_tokens $BATS_TEST_TMPDIR/bad;" >"$p/conf/codebox-auth.conf"
	run /usr/sbin/nginx -t -p "$p" -c conf/nginx.conf
	assert_failure
	assert_output --partial "the token on line 3 of \"$BATS_TEST_TMPDIR/bad\" is shorter than 16 bytes"
	printf '# none\n\n' >"$BATS_TEST_TMPDIR/bad"
	run /usr/sbin/nginx -t -p "$p" -c conf/nginx.conf
	assert_failure
	assert_output --partial "holds no token"
}
