#!/usr/bin/env bats
# The OpenAPI documents (docs/openapi.json for port 8080, docs/openapi-agent.json for port 8888):
# served by nginx alone at /openapi.json with validators; covering every endpoint nginx routes
# to the pool and every sub-route of a session; and the checker every suite's answers go
# through (tests/helpers/openapi_check.py) refusing what does not match them.

load helpers/stack

CHECK="$ROOT/tests/helpers/openapi_check.py"

setup_file() {
	stack_start
}

teardown_file() {
	stack_stop
}

# served_as PORT-BASE FILE: GET PORT-BASE/openapi.json is FILE, byte for byte, as nginx serves a
# static file (JSON, ETag, Last-Modified), and revalidates (304, no body) on either validator
served_as() {
	local etag modified
	request "$1/openapi.json"
	assert_equal "$code" 200
	run -0 cmp "$BATS_TEST_TMPDIR/body" "$2"
	assert_equal "$(header Content-Type)" application/json
	[[ -n $(header X-Request-Id) ]]
	etag=$(header ETag)
	modified=$(header Last-Modified)
	[[ $etag == '"'*'"' && -n $modified ]]
	# (curl leaves -o's file as it was when no body comes)
	rm "$BATS_TEST_TMPDIR/body"
	request -H "If-None-Match: $etag" "$1/openapi.json"
	assert_equal "$code" 304
	[[ ! -e $BATS_TEST_TMPDIR/body ]]
	assert_equal "$(header ETag)" "$etag"
	request -H "If-Modified-Since: $modified" "$1/openapi.json"
	assert_equal "$code" 304
	request -H 'If-None-Match: "stale"' "$1/openapi.json"
	assert_equal "$code" 200
	# GET alone, as every GET endpoint
	request -X POST "$1/openapi.json"
	assert_equal "$code" 405
	assert_equal "$(header Allow)" GET
	assert_equal "$(field .error)" method_not_allowed
}

@test "openapi: /openapi.json on both ports is nginx's static file, revalidated with 304 on ETag or date" {
	served_as "$BASE" "$ROOT/docs/openapi.json"
	served_as "$AGENT" "$ROOT/docs/openapi-agent.json"
	# both are OpenAPI 3.1, each with its own port's /execute
	run -0 jq -e '.openapi == "3.1.0" and (.paths["/execute"].post.requestBody.content["application/json"].schema["$ref"] | endswith("/ExecuteRequest"))' "$ROOT/docs/openapi.json"
	run -0 jq -e '.openapi == "3.1.0" and (.paths["/execute"].post.requestBody.content["application/json"].schema.required == ["command"])' "$ROOT/docs/openapi-agent.json"
	# no worker saw them (no upstream), and the access log counts every one
	wait_for "the access log" 50 grep -q '"uri":"/openapi.json","status":304' "$STACK_DIR/logs/access.log"
	run -0 jq -s '[.[] | select(.uri == "/openapi.json")] | [length >= 10, ([.[] | .upstreamStatus] | unique), ([.[] | .serverPort] | unique | length)]' -c "$STACK_DIR/logs/access.log"
	assert_output '[true,[null],2]'
}

# a record of one exchange, as the Python helpers write them: record FILE METHOD TARGET STATUS
# HEADERS-JSON BODY
record() {
	jq -cn --arg m "$2" --arg t "$3" --argjson s "$4" --argjson h "$5" --arg b "$6" \
		'{method: $m, target: $t, status: $s, headers: $h, body: ($b | @base64)}' >"$1"
}

# refused WHY DOC METHOD TARGET STATUS HEADERS-JSON BODY: the checker refuses this exchange
refused() {
	local why=$1 f="$BATS_TEST_TMPDIR/rec.json"
	shift
	record "$f" "${@:2}"
	run -1 "$PY" "$CHECK" check "$1" "$f"
	[[ $output == *"$why"* ]] || {
		echo "expected a complaint about: $why" >&2
		return 1
	}
}

@test "openapi: the checker takes the answers the service gives, and refuses what does not match the documents" {
	local caps h='[["Content-Type","application/json"],["X-Request-Id","r1"]]'
	# real answers, traced as every suite's curl traces them, pass
	curl_plain -s -o /dev/null --trace "$BATS_TEST_TMPDIR/ok.trace" "$BASE/capabilities"
	curl_plain -s -o /dev/null --trace "$BATS_TEST_TMPDIR/ok2.trace" -H 'Accept: text/event-stream' \
		-d '{"code":"print(1)"}' "$BASE/execute"
	curl_plain -s -o /dev/null --trace "$BATS_TEST_TMPDIR/ok3.trace" -d '{"command":"echo"}' "$AGENT/execute"
	run -0 "$PY" "$CHECK" check main "$BATS_TEST_TMPDIR/ok.trace" "$BATS_TEST_TMPDIR/ok2.trace"
	run -0 "$PY" "$CHECK" check agent "$BATS_TEST_TMPDIR/ok3.trace"
	caps=$(curl -s "$BASE/capabilities")
	record "$BATS_TEST_TMPDIR/caps.json" GET /capabilities 200 "$h" "$caps"
	run -0 "$PY" "$CHECK" check main "$BATS_TEST_TMPDIR/caps.json"
	# each of these is caught
	refused "Additional properties are not allowed ('extra' was unexpected)" \
		main GET /capabilities 200 "$h" "$(jq -c '.extra = 1' <<<"$caps")"
	refused "'maxCodeBytes' is a required property" \
		main GET /capabilities 200 "$h" "$(jq -c 'del(.limits.maxCodeBytes)' <<<"$caps")"
	refused "status 418 is not documented" main GET /capabilities 418 "$h" '{}'
	refused "no X-Request-Id header" main GET /capabilities 200 '[["Content-Type","application/json"]]' "$caps"
	refused "Content-Type 'text/html'" main GET /capabilities 200 \
		'[["Content-Type","text/html"],["X-Request-Id","r1"]]' "$caps"
	refused "the body is not JSON" main GET /capabilities 200 "$h" '{"pythonVersion":'
	refused "no Retry-After header" main POST /execute 429 '[["Content-Type","application/json"],["X-Request-Id","r"],["Codebox-Busy","pool"]]' \
		'{"error":"sandbox_busy","message":"all execution slots are in use; retry shortly"}'
	refused "header Codebox-Busy" main POST /execute 429 '[["Content-Type","application/json"],["X-Request-Id","r"],["Retry-After","1"],["Codebox-Busy","lunch"]]' \
		'{"error":"sandbox_busy","message":"all execution slots are in use; retry shortly"}'
	refused "'sandbox_busy' was expected" main POST /execute 429 '[["Content-Type","application/json"],["X-Request-Id","r"],["Retry-After","1"],["Codebox-Busy","pool"]]' \
		'{"error":"busy","message":"m"}'
	# the lab contract's eight keys, in their order
	refused "keys in the order" main POST /execute 200 "$h" \
		'{"exitCode":0,"status":"succeeded","stdout":"","stderr":"","result":null,"resultError":null,"durationMs":1,"truncated":false}'
	refused "event 0 is 'progress'" main POST /execute 200 '[["Content-Type","text/event-stream"],["X-Request-Id","r"]]' \
		$'event: progress\ndata: {"text":"x"}\n\n'
	refused "event 0 (stdout)" main POST /execute 200 '[["Content-Type","text/event-stream"],["X-Request-Id","r"]]' \
		$'event: stdout\ndata: {"text":1}\n\n'
	refused "the path is not documented" main GET /secret 200 "$h" '{}'
	refused "the path is not documented" agent GET /capabilities 200 "$h" "$caps"
	refused "a body (2 bytes) where the document says none" main DELETE /sessions/0123456789abcdef0123456789abcdef 204 \
		'[["X-Request-Id","r"]]' '{}'
	refused "'Access denied' was expected" agent GET /download/x 403 "$h" '{"message":"Forbidden"}'
}

@test "openapi: a mismatch fails the test that got it, through curl() and the Python helpers" {
	# the checker of this run, asked about a wrong answer, writes the test's failure file
	record "$BATS_TEST_TMPDIR/bad.json" GET /capabilities 200 '[["Content-Type","application/json"],["X-Request-Id","r"]]' '{}'
	openapi_check main "$BATS_TEST_TMPDIR/bad.json"
	run -0 grep -q "'pythonVersion' is a required property" "$OPENAPI_CHECK_FAILFILE"
	run -1 openapi_teardown
	[[ $output == *"do not match the OpenAPI documents"* ]]
	rm "$OPENAPI_CHECK_FAILFILE"
	# curl() and the Python helpers' record() go through it: a good answer leaves nothing
	curl -s -o /dev/null "$BASE/capabilities"
	"$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import openapi_check
openapi_check.record("GET", sys.argv[2] + "/readyz", 200, [("Content-Type", "application/json"), ("X-Request-Id", "r")], b"{\"status\":\"ready\"}")' \
		"$ROOT/tests/helpers" "$BASE"
	[[ ! -e $OPENAPI_CHECK_FAILFILE ]]
	run -0 openapi_teardown
	# ...and a wrong one is written there (port 8888's / is not port 8080's)
	"$PY" -c 'import sys; sys.path.insert(0, sys.argv[1]); import openapi_check
openapi_check.record("GET", sys.argv[2] + "/", 200, [("Content-Type", "application/json"), ("X-Request-Id", "r")], b"{\"status\":\"ready\"}")' \
		"$ROOT/tests/helpers" "$AGENT"
	run -0 grep -q "GET / -> 200" "$OPENAPI_CHECK_FAILFILE"
	rm "$OPENAPI_CHECK_FAILFILE"
}

# nginx_locations SERVER-NAME: the locations of that server block of nginx/nginx.conf, one a
# line as "MODIFIER PATH METHOD" (METHOD: GET or POST where the location takes one alone, else -)
nginx_locations() {
	awk -v name="$1" '
		/^    server \{/ { inserver = 1; mine = 0 }
		inserver && /server_name/ { mine = ($2 == name ";") }
		inserver && mine && /^ *location / {
			n++
			if ($2 == "=" || $2 == "^~" || $2 == "~") { mod[n] = $2; path[n] = $3 } else { mod[n] = "prefix"; path[n] = $2 }
			method[n] = "-"
		}
		inserver && mine && n && /codebox-405-get.conf/ { method[n] = "GET" }
		inserver && mine && n && /codebox-405-post.conf/ { method[n] = "POST" }
		/^    \}/ { inserver = 0 }
		END { for (i = 1; i <= n; i++) print mod[i], path[i], method[i] }
	' "$ROOT/nginx/nginx.conf"
}

# documented DOC: the document's "METHOD PATH" pairs, one a line
documented() {
	jq -r '.paths | to_entries[] | .key as $p | .value | keys[] | select(. != "parameters") | "\(ascii_upcase) \($p)"' "$1"
}

# covers LOCATIONS DOC: every location (but nginx's internal ones and the catch-all) has a
# documented path, with its one method where it takes one alone; and every documented path
# is served by one of them
covers() {
	local mod path method doc=$2 paths
	paths=$(documented "$doc")
	while read -r mod path method; do
		[[ $path == /.codebox-* || $path == / && $mod == prefix ]] && continue
		case $mod in
		=)
			if [[ $method == - ]]; then
				grep -q " $path\$" <<<"$paths" || {
					echo "nginx serves $path, which $doc does not document" >&2
					return 1
				}
			else
				grep -qx "$method $path" <<<"$paths" || {
					echo "nginx serves $method $path, which $doc does not document" >&2
					return 1
				}
			fi
			;;
		prefix | ^~)
			grep -q " ${path%/}\(/\|\$\)" <<<"$paths" || {
				echo "nginx serves $path..., which $doc does not document" >&2
				return 1
			}
			;;
		~)
			# a regular location of /sessions (its files): a sub-path of the sessions' documented
			[[ $path == *'/files/'* ]] && grep -q ' /sessions/{id}/files/{path}$' <<<"$paths" || {
				echo "nginx serves $path, which $doc does not document" >&2
				return 1
			}
			;;
		esac
	done <<<"$1"
	# the other way: a documented path nginx does not route is a mistake of the document
	while read -r method path; do
		local ok=0 p
		while read -r mod p _; do
			case $mod in
			=) [[ $path == "$p" ]] && ok=1 ;;
			prefix | ^~) [[ $p != / && ($path == "$p" || $path == "${p%/}"/*) ]] && ok=1 ;;
			*) ;;
			esac
		done <<<"$1"
		((ok)) || {
			echo "$doc documents $method $path, which nginx does not route" >&2
			return 1
		}
	done <<<"$paths"
}

@test "openapi: the documents cover every endpoint nginx routes and every sub-route of a session, and no other" {
	local loc sub
	loc=$(nginx_locations codebox)
	[[ $(grep -c . <<<"$loc") -ge 10 ]]
	covers "$loc" "$ROOT/docs/openapi.json"
	loc=$(nginx_locations codebox-agent)
	[[ $(grep -c . <<<"$loc") -ge 8 ]]
	covers "$loc" "$ROOT/docs/openapi-agent.json"
	# a session's sub-routes, as the pool's tables name them (sessionapi.c), and its files
	run -0 grep -oE '^ *\{"[a-z/*]+", ' "$ROOT/fcgi/http/sessionapi.c"
	[[ $(grep -c . <<<"$output") -ge 6 ]]
	for sub in $(sed -E 's/^ *\{"([a-z/*]+)", /\1/; s|/\*$||' <<<"$output" | sort -u); do
		run -0 jq -e --arg s "/sessions/{id}/${sub%/}" '.paths | keys | any(. == $s or startswith($s + "/"))' "$ROOT/docs/openapi.json"
	done
	# every endpoint of the pool's tables is reached through a documented location
	run -0 grep -oE '^ *\{"[a-z_*]+", ' "$ROOT/fcgi/http/worker.c"
	for sub in $(sed -E 's/^ *\{"([a-z_*]+)", /\1/' <<<"$output"); do
		case $sub in
		metrics) continue ;; # the metrics port's, Prometheus text
		agent_*) run -0 grep -c 'CODEBOX_ENDPOINT agent_' "$ROOT/nginx/nginx.conf" ;;
		*) run -0 grep -q "CODEBOX_ENDPOINT $sub;" "$ROOT/nginx/nginx.conf" ;;
		esac
	done
	# the checker's own view: an unlisted path of either port is refused
	run -0 "$PY" "$CHECK" paths main
	assert_line /sessions/{id}/files/{path}
	run -0 "$PY" "$CHECK" paths agent
	assert_line /exists/{path}
}
