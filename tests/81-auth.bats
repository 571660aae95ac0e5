#!/usr/bin/env bats
# Bearer tokens (codebox's nginx module, nginx/codebox-auth.conf): with a token file, every
# route of both ports but the probes needs a valid token; no run sees one; a reload rotates.

load helpers/stack

TOKEN_A=codebox-token-A-0123456789abcdef
TOKEN_B=codebox-token-B-0123456789abcdef

setup_file() {
	export TOKENS="$BATS_FILE_TMPDIR/tokens"
	printf '# the clients of this stack\n%s\n\n%s\n' "$TOKEN_A" "$TOKEN_B" >"$TOKENS"
	stack_start --auth-tokens "$TOKENS"
}

teardown_file() {
	stack_stop
}

# status METHOD URL [curl args...]: the HTTP status; the body in $BATS_TEST_TMPDIR/body
status() {
	local m=$1 u=$2
	shift 2
	curl -s -o "$BATS_TEST_TMPDIR/body" -D "$BATS_TEST_TMPDIR/headers" -w '%{http_code}' \
		--max-time 60 -X "$m" "$@" "$u"
}

@test "auth: without a token every route answers 401 JSON with WWW-Authenticate; the probes answer" {
	local r
	for r in "POST $BASE/execute" "GET $BASE/capabilities" "GET $BASE/isolation" "GET $BASE/tool" \
		"GET $METRICS/metrics" "POST $BASE/mcp" "GET $BASE/nowhere" "GET $BASE/execute" "POST $AGENT/execute" \
		"GET $AGENT/list/" "GET $AGENT/"; do
		# shellcheck disable=SC2086
		assert_equal "$(status $r -d '{"code":"print(1)"}')" 401
		reply=$(cat "$BATS_TEST_TMPDIR/body")
		assert_equal "$(field .error)" unauthorized
		run -0 grep -i '^WWW-Authenticate: Bearer realm="codebox"' "$BATS_TEST_TMPDIR/headers"
	done
	assert_equal "$(status GET "$BASE/healthz")" 200
	assert_equal "$(status GET "$BASE/readyz")" 200
	assert_equal "$(status GET "$AGENT/readyz")" 200
}

@test "auth: a wrong token is 401 invalid_token; either listed token runs the program" {
	assert_equal "$(status POST "$BASE/execute" -H 'Authorization: Bearer codebox-token-A-0123456789abcdeX' -d '{"code":"print(1)"}')" 401
	run -0 grep -i 'error="invalid_token"' "$BATS_TEST_TMPDIR/headers"
	assert_equal "$(status POST "$BASE/execute" -H "Authorization: Bearer ${TOKEN_A}x" -d '{"code":"print(1)"}')" 401
	assert_equal "$(status POST "$BASE/execute" -H "Authorization: Basic $TOKEN_A" -d '{"code":"print(1)"}')" 401
	assert_equal "$(status POST "$BASE/execute" -H "Authorization: Bearer ${TOKEN_A:0:20}" -d '{"code":"print(1)"}')" 401
	local t
	for t in "$TOKEN_A" "$TOKEN_B"; do
		assert_equal "$(status POST "$BASE/execute" -H "Authorization: Bearer $t" -d '{"code":"print(6 * 7)"}')" 200
		reply=$(cat "$BATS_TEST_TMPDIR/body")
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

@test "auth: a reload rotates the tokens" {
	local new=codebox-token-C-0123456789abcdef nginx
	printf '%s\n' "$new" >"$TOKENS.next"
	mv "$TOKENS.next" "$TOKENS"
	nginx=$(stack_nginx_pid)
	kill -HUP "$nginx"
	wait_for "the old token refused" 100 bash -c "[[ \$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer $TOKEN_A' '$BASE/capabilities') == 401 ]]"
	assert_equal "$(status GET "$BASE/capabilities" -H "Authorization: Bearer $new")" 200
	assert_equal "$(status GET "$BASE/capabilities" -H "Authorization: Bearer $TOKEN_B")" 401
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
