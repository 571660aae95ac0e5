#!/usr/bin/env bats
# Port 8888: the agent-sandbox "python-runtime" protocol (API.md part 3), driven by the
# requests Kubernetes agent-sandbox's client sends (tests/helpers/agent_client.py rebuilds
# them from its sources), with every command in a fresh sandbox and the workspace at /app.

load helpers/stack

# a small workspace, so that filling it is quick; a short command timeout
WORKSPACE_BYTES=$((8 * 1024 * 1024))

setup_file() {
	SANDBOX_EXEC_TIMEOUT_SECONDS=3 stack_start --agent-workspace-bytes "$WORKSPACE_BYTES"
}

teardown_file() {
	stack_stop
}

client() { # client OP ARGS...: the agent-sandbox client's call; sets $output
	"$ROOT/tests/helpers/agent_client.py" "$AGENT" "$@"
}

agent_run() { # agent_run COMMAND: sets $reply to the parsed ExecutionResult
	reply=$(client run "$1")
}

still_serving() { # the service is healthy after an attack
	agent_run 'echo alive'
	assert_equal "$(field .stdout)" $'alive'
	assert_equal "$(field .exit_code)" 0
}

@test "agent: GET / answers the runtime's health document" {
	run -0 curl -s -w '\n%{http_code}' "$AGENT/"
	assert_output $'{"status": "ok", "message": "Sandbox Runtime is active."}\n200'
}

@test "agent: execute runs a shell command (tester.py's echo)" {
	agent_run "echo 'hello world'"
	assert_equal "$(field .stdout)" "hello world"
	assert_equal "$(jq -r .stdout <<<"$reply" | od -c | head -1 | grep -c '\\n')" 1
	assert_equal "$(field .exit_code)" 0
}

@test "agent: a failing command is a 200 with its exit code and stderr" {
	agent_run 'echo oops >&2; exit 3'
	assert_equal "$(field .exit_code)" 3
	assert_equal "$(field .stderr)" oops
	agent_run 'no-such-command-xyz'
	assert_equal "$(field .exit_code)" 127
	agent_run 'kill -9 $$'
	assert_equal "$(field .exit_code)" -9
}

@test "agent: python runs the sandbox's interpreter, cwd /app, as the sandbox user" {
	agent_run 'python -c "import sys, os, numpy; print(sys.version.split()[0], os.getcwd(), os.getuid())"'
	assert_equal "$(field .stdout)" "$("$PY" -c 'import sys; print(sys.version.split()[0])') /app 1000"
	agent_run 'python3 -c "print(6*7)"'
	assert_equal "$(field .stdout)" 42
}

@test "agent: the workspace persists between commands; their processes do not" {
	local m=codebox-marker-$RANDOM$RANDOM
	agent_run "echo kept > notes.txt; mkdir -p dir/sub; (python -c 'import time; time.sleep(300)' $m &); echo started"
	assert_equal "$(field .stdout)" started
	agent_run 'cat notes.txt; ls dir; ps -e -o args= | grep -c "[t]ime.sleep" || true'
	assert_equal "$(field .stdout)" $'kept\nsub\n0'
	# on the host too, nothing of the command is left (it was killed with its run)
	run -1 pgrep -f -- "$m"
}

@test "agent: each command is isolated: no network, not the host's processes" {
	agent_run "python -c \"import socket; socket.create_connection(('127.0.0.1', ${AGENT##*:}), 2)\""
	[[ $(field .exit_code) != 0 ]]
	assert_regex "$(field .stderr)" 'OSError|Network is unreachable|PermissionError|ConnectionRefused'
	agent_run 'ls /proc | grep -c "^[0-9]"'
	(($(field .stdout) < 10))
}

@test "agent: port 8080's runs never see the workspace" {
	agent_run 'echo agent-secret-42 > secret.txt'
	execute 'import os
print(os.path.exists("/app"), any("/app" in l for l in open("/proc/self/mounts")))'
	assert_equal "$(field .stdout)" "False False"
	# nor is it anywhere on the host's file system: it is a tmpfs mounted nowhere
	run -1 grep -rqs agent-secret-42 "$STACK_DIR"
}

@test "agent: a timeout kills the command and everything it started, exit code 124" {
	local start end
	start=$(date +%s)
	local m=codebox-marker-$RANDOM$RANDOM
	agent_run "echo before; (python -c 'import time; time.sleep(1000)' $m &); python -c 'import time; time.sleep(1000)' $m"
	end=$(date +%s)
	assert_equal "$(field .exit_code)" 124
	assert_equal "$(field .stdout)" before
	assert_regex "$(field .stderr)" 'codebox: the command timed out after 3 seconds'
	(((end - start) >= 3 && (end - start) < 30))
	run -1 pgrep -f -- "$m"
	still_serving
}

@test "agent: SANDBOX_EXEC_TIMEOUT_SECONDS must be a finite number > 0, else the default" {
	local v pool=${CODEBOX_POOL:-$ROOT/build/codebox-pool}
	for v in 0 -1 abc nan inf 1e999 '' 5s '5 '; do
		run -0 --separate-stderr env SANDBOX_EXEC_TIMEOUT_SECONDS="$v" "$pool" --print-agent-timeout-ms
		assert_output 300000
		if [[ -n $v ]]; then
			[[ $stderr == *'is not a finite number of seconds > 0'*'using the default 300'* ]]
		else
			[[ -z $stderr ]]
		fi
	done
	run -0 env SANDBOX_EXEC_TIMEOUT_SECONDS=2.5 "$pool" --print-agent-timeout-ms
	assert_output 2500
	run -0 env -u SANDBOX_EXEC_TIMEOUT_SECONDS "$pool" --print-agent-timeout-ms
	assert_output 300000
}

@test "agent: output is bounded like /execute, and the truncation is said on stderr" {
	agent_run 'head -c 200000 /dev/zero | tr "\0" a'
	assert_equal "$(jq -r '.stdout | length' <<<"$reply")" 65536
	assert_regex "$(field .stderr)" 'codebox: stdout was truncated to its first 65536 bytes \(of 200000\)'
}

@test "agent: a 1 MiB binary file round-trips through upload and download" {
	head -c 1048576 /dev/urandom >"$BATS_TEST_TMPDIR/blob"
	run -0 client write data/nested/blob.bin "$BATS_TEST_TMPDIR/blob"
	assert_output '{"message": "File '"'"'data/nested/blob.bin'"'"' uploaded successfully."}'
	run -0 client read data/nested/blob.bin "$BATS_TEST_TMPDIR/back"
	assert_output '{"bytes": 1048576, "content_type": "application/octet-stream"}'
	cmp "$BATS_TEST_TMPDIR/blob" "$BATS_TEST_TMPDIR/back"
	# named as the example runtime's FileResponse names it
	run -0 curl -s -o /dev/null -D - "$AGENT/download/data%2Fnested%2Fblob.bin"
	assert_output --partial 'Content-Disposition: attachment; filename="data/nested/blob.bin"'
	assert_output --partial 'Content-Length: 1048576'
	# the command sees the same bytes
	agent_run 'sha256sum data/nested/blob.bin | cut -d" " -f1'
	assert_equal "$(field .stdout)" "$(sha256sum "$BATS_TEST_TMPDIR/blob" | cut -d' ' -f1)"
}

@test "agent: list and exists answer what the client parses" {
	agent_run 'rm -rf l && mkdir -p l/d && printf 12345 > l/f.txt'
	run -0 client list l
	assert_equal "$(jq -r '[.[] | "\(.name):\(.type)"] | join(",")' <<<"$output")" "d:directory,f.txt:file"
	assert_equal "$(jq -r '.[1].size' <<<"$output")" 5
	run -0 curl -s "$AGENT/list/l"
	run -0 jq -e '.[1].mod_time | type == "number"' <<<"$output"
	run -0 client exists l/f.txt
	assert_output '{"exists": true}'
	run -0 client exists l/nope
	assert_output '{"exists": false}'
	run -0 curl -s -w ' %{http_code}' "$AGENT/download/l/nope"
	assert_output '{"message":"File not found"} 404'
	run -0 curl -s -w ' %{http_code}' "$AGENT/download/l/d"
	assert_output '{"message":"File not found"} 404'
}

@test "agent: agent-sandbox's tester.py passes its protocol sections, as its assertions state them" {
	# health, execute, upload/download, list, exists (its "path" too), and both traversals
	run -0 "$ROOT/tests/helpers/agent_tester.py" "$AGENT" all
	assert_output --partial "exists: {'path': '', 'exists': True}"
	assert_output --partial "exists (negative): {'path': 'does_not_exist', 'exists': False}"
}

@test "agent: /exists answers the example runtime's {path, exists}, the path as it was sent" {
	agent_run 'rm -rf e && mkdir -p e/d && printf 1 > e/f.txt'
	# what tester.py's "/exists/." becomes on the wire (urllib3 drops the trailing ".")
	run -0 curl -s -w ' %{http_code}' "$AGENT/exists/"
	assert_output '{"path":"","exists":true} 200'
	run -0 curl -s --path-as-is "$AGENT/exists/."
	assert_output '{"path":".","exists":true}'
	# decoded once, as sent: the client quotes "/" as %2F
	run -0 curl -s "$AGENT/exists/e%2Ff.txt"
	assert_output '{"path":"e/f.txt","exists":true}'
	run -0 curl -s "$AGENT/exists/e%2Fd%2F..%2Ff.txt"
	assert_output '{"path":"e/d/../f.txt","exists":true}'
	run -0 curl -s "$AGENT/exists/%2Fe%2F%2Fd"
	assert_output '{"path":"/e//d","exists":true}'
	run -0 curl -s "$AGENT/exists/e%2Fnope%20x"
	assert_output '{"path":"e/nope x","exists":false}'
	# bytes that are not UTF-8 become U+FFFD, as the runtime's decoding makes them
	run -0 curl -s "$AGENT/exists/%C3%A9%FF"
	assert_equal "$(jq -r .path <<<"$output")" $'\xc3\xa9\xef\xbf\xbd'
	# what the client makes of it
	run -0 client exists e/f.txt
	assert_output '{"exists": true}'
	run -0 client exists .
	assert_output '{"exists": true}'
}

@test "agent: a path that climbs out of /app is 403 Access denied on /download, /list and /exists, however it is spelled" {
	local ep p
	for ep in download list exists; do
		# nginx resolves dot segments first: some climb above "/" (a 400 before any
		# location), some leave their prefix for another endpoint or "/" itself, some stay
		# in it; the example runtime answers each 403
		for p in ..%2F..%2Fetc%2Fpasswd %2F..%2Fetc%2Fpasswd ..%2Fetc ..%2F ..%2Fexecute \
			..%2Freadyz "..%2F$ep%2Fx" "x%2F..%2F..%2F$ep%2Fx" %2E%2E%2Fx .%2e%2Fx..; do
			run -0 curl -s -w ' %{http_code}' "$AGENT/$ep/$p"
			assert_output '{"message":"Access denied"} 403'
		done
		run -0 curl -s --path-as-is -w ' %{http_code}' "$AGENT/$ep/.."
		assert_output '{"message":"Access denied"} 403'
		run -0 curl -s --path-as-is -w ' %{http_code}' "$AGENT/$ep/x/../../../etc"
		assert_output '{"message":"Access denied"} 403'
	done
	# what the client raises: a 403 (it does not check these paths itself)
	run -1 client exists ../../etc/passwd
	assert_equal "$(jq -r .status <<<"$output")" 403
	run -1 client list ../
	assert_equal "$(jq -r .status <<<"$output")" 403
	CODEBOX_UNSAFE=1 run -1 client read ../etc/passwd "$BATS_TEST_TMPDIR/passwd"
	assert_equal "$(jq -r .status <<<"$output")" 403
	[[ ! -s $BATS_TEST_TMPDIR/passwd ]]
	# a malformed URI is still nginx's JSON 400, and port 8080 knows no such 403
	run -0 curl -s -w ' %{http_code}' "$AGENT/exists/%zz"
	assert_output '{"error":"invalid_request","message":"the HTTP request is malformed"} 400'
	run -0 curl -s -w ' %{http_code}' "$BASE/exists/..%2F..%2Fx"
	assert_output '{"error":"invalid_request","message":"the HTTP request is malformed"} 400'
	still_serving
}

@test "agent: /list of what is not a directory is 404 Path is not a directory" {
	local p
	agent_run 'rm -rf nd && mkdir nd && printf 1 > nd/f'
	for p in nd%2Ff nd%2Fmissing missing "$(printf 'a%.0s' {1..300})"; do
		run -0 curl -s -w ' %{http_code}' "$AGENT/list/$p"
		assert_output '{"message":"Path is not a directory"} 404'
	done
	run -1 client list nd/f
	assert_equal "$(jq -r .status <<<"$output")" 404
	run -0 client list nd
	assert_equal "$(jq -c '[.[] | .name]' <<<"$output")" '["f"]'
}

@test "agent: a command that cannot run is a failed execution (200, exit_code 1), not a 400" {
	# as the example runtime answers what its shlex.split() or subprocess refuses
	agent_run ''
	assert_equal "$(field .exit_code)" 1
	assert_equal "$(field .stdout)" ''
	assert_equal "$(field .stderr)" 'codebox: the command is empty; nothing ran'
	run -0 curl -s -w ' %{http_code}' -d '{"command":"echo a\u0000b"}' "$AGENT/execute"
	assert_output '{"stdout":"","stderr":"codebox: the command contains a NUL byte; it did not run\n","exit_code":1} 200'
	run -0 curl -s -w ' %{http_code}' -d "$(jq -cn '{command: ("#" * 70000)}')" "$AGENT/execute"
	assert_output --regexp '"stderr":"codebox: the command is longer than [0-9]+ bytes; it did not run\\n","exit_code":1\} 200$'
	# a body without a command string is still a request error
	run -0 curl -s -w ' %{http_code}' -d '{"command":5}' "$AGENT/execute"
	assert_output --partial '"error":"invalid_request"'
	assert_output --partial ' 400'
}

@test "agent: unsafe upload paths are refused (403 when they climb out of /app, else 400); nothing is written outside" {
	local p
	echo pwned >"$BATS_TEST_TMPDIR/evil"
	# what climbs out is the example runtime's 403 (its tester's answer for traversal)
	for p in ../evil-up a/../../evil-mid /../evil-abs-up; do
		CODEBOX_UNSAFE=1 run -1 client write "$p" "$BATS_TEST_TMPDIR/evil"
		assert_equal "$(jq -r .status <<<"$output")" 403
		assert_equal "$(jq -r .body <<<"$output")" '{"message":"Access denied"}'
	done
	# refused as well, though they stay inside (the client never sends them)
	for p in /tmp/evil-abs ./evil-dot 'a//b' $'evil\x7fdel' ''; do
		CODEBOX_UNSAFE=1 run -1 client write "$p" "$BATS_TEST_TMPDIR/evil"
		assert_equal "$(jq -r .status <<<"$output")" 400
		run -0 jq -e '.body | fromjson | .error == "invalid_request"' <<<"$output"
	done
	# control characters and NUL, raw in the multipart header (the client would refuse them,
	# and urllib3 would percent-encode them)
	for p in $'evil\x01ctl' $'evil\nnl' 'evil\x00nul'; do
		printf -- '--XX\r\nContent-Disposition: form-data; name="file"; filename="%b"\r\n\r\nv\r\n--XX--\r\n' \
			"$p" >"$BATS_TEST_TMPDIR/raw"
		run -0 curl -s -w ' %{http_code}' -H 'Content-Type: multipart/form-data; boundary=XX' \
			--data-binary "@$BATS_TEST_TMPDIR/raw" "$AGENT/upload"
		assert_output --regexp '"error":"invalid_request".* 400$'
	done
	[[ ! -e /tmp/evil-abs && ! -e "$STACK_DIR/evil-up" && ! -e /evil-up && ! -e /evil-mid ]]
	agent_run 'ls -a | tr "\n" " "'
	refute_output --partial evil
	still_serving
}

@test "agent: a symlink on the way is refused (403 Access denied) on upload, download, list and exists" {
	agent_run 'ln -sfn /etc etc-link && ln -sf /etc/passwd pw-link && ln -sfn / root-link'
	echo pwned >"$BATS_TEST_TMPDIR/evil"
	CODEBOX_UNSAFE=1 run -1 client write etc-link/evil-through-link "$BATS_TEST_TMPDIR/evil"
	assert_equal "$(jq -r .status <<<"$output")" 403
	assert_equal "$(jq -r .body <<<"$output")" '{"message":"Access denied"}'
	[[ ! -e /etc/evil-through-link ]]
	CODEBOX_UNSAFE=1 run -1 client write root-link/tmp/evil-root "$BATS_TEST_TMPDIR/evil"
	assert_equal "$(jq -r .status <<<"$output")" 403
	[[ ! -e /tmp/evil-root ]]
	CODEBOX_UNSAFE=1 run -1 client write pw-link "$BATS_TEST_TMPDIR/evil"
	assert_equal "$(jq -r .status <<<"$output")" 403
	# downloads through or of a link: refused, never the host's file
	run -0 curl -s -w ' %{http_code}' "$AGENT/download/pw-link"
	assert_output '{"message":"Access denied"} 403'
	run -0 curl -s -w ' %{http_code}' "$AGENT/download/etc-link%2Fpasswd"
	assert_output '{"message":"Access denied"} 403'
	run -0 curl -s -w ' %{http_code}' "$AGENT/list/etc-link"
	assert_output '{"message":"Access denied"} 403'
	run -1 client exists etc-link/passwd
	assert_equal "$(jq -r .status <<<"$output")" 403
	# a link itself exists (it is there); what it points to is not looked at
	run -0 curl -s "$AGENT/exists/pw-link"
	assert_output '{"path":"pw-link","exists":true}'
	# traversal spelled in the URL: refused in the example runtime's JSON
	run -0 curl -s -w ' %{http_code}' "$AGENT/download/..%2F..%2F..%2Fetc%2Fpasswd"
	assert_output '{"message":"Access denied"} 403'
	run -0 curl -s --path-as-is -w ' %{http_code}' "$AGENT/download/a/../../../etc/passwd"
	assert_output '{"message":"Access denied"} 403'
	still_serving
}

@test "agent: a malformed multipart body is a JSON 400" {
	run -0 curl -s -w ' %{http_code}' -H 'Content-Type: multipart/form-data; boundary=XX' \
		--data-binary $'--XX\r\nContent-Disposition: form-data; name="file"; filename="x"\r\n\r\nno end' \
		"$AGENT/upload"
	assert_output '{"error":"invalid_request","message":"the multipart body is not closed"} 400'
	run -0 curl -s -w ' %{http_code}' -H 'Content-Type: application/json' -d '{}' "$AGENT/upload"
	assert_output --partial '"error":"invalid_request"'
	assert_output --partial ' 400'
	run -0 curl -s -w ' %{http_code}' -F 'other=@/dev/null' "$AGENT/upload"
	assert_output --partial ' 400'
	run -0 curl -s -w ' %{http_code}' -d '{"cmd":"ls"}' "$AGENT/execute"
	assert_output --partial ' 400'
}

@test "agent: the workspace is bounded by its own size" {
	agent_run 'head -c 20000000 /dev/zero > fill; df -B1 --output=size /app | tail -1; rm -f fill'
	assert_regex "$(field .stderr)" 'No space left on device'
	assert_equal "$(field .stdout | tr -d ' ')" "$WORKSPACE_BYTES"
	head -c $((WORKSPACE_BYTES + 4096)) /dev/zero >"$BATS_TEST_TMPDIR/huge"
	run -1 client write huge.bin "$BATS_TEST_TMPDIR/huge"
	assert_equal "$(jq -r .status <<<"$output")" 413
	run -0 client exists huge.bin
	assert_output '{"exists": false}'
	still_serving
}

count_exists() {
	[[ $(curl -s "$AGENT/exists/count") == '{"path":"count","exists":true}' ]]
}

@test "agent: a second command while one runs is answered 429 at once, never run twice" {
	local busy
	busy=$(pool_busy)
	agent_run 'rm -f count'
	client run 'echo x >> count; sleep 2' >"$BATS_TEST_TMPDIR/first" &
	local first=$!
	wait_for "the first command to start" 100 count_exists
	run -0 curl -s -D - -w '%{http_code}' -d '{"command":"echo x >> count"}' "$AGENT/execute"
	assert_output --partial 'Retry-After: 1'
	assert_output --partial 'Codebox-Busy: workspace'
	assert_output --partial '"error":"sandbox_busy"'
	assert_output --regexp '429$'
	wait "$first"
	agent_run 'wc -l < count'
	assert_equal "$(field .stdout)" 1
	# counted on port 8080's /metrics as the pool's own 429
	assert_equal "$(pool_busy)" $((busy + 1))
}

pool_busy() {
	curl -s "$METRICS/metrics" | awk '$1 == "codebox_busy_rejections_total{source=\"pool\"}" { print $2 }'
}

@test "agent: the agent-sandbox overlay's offline check refuses a misspelled or missing field" {
	local dir=$BATS_TEST_TMPDIR/deploy/overlays/agent-sandbox
	# the overlay and the component it names (../../image), where it expects them
	mkdir -p "$BATS_TEST_TMPDIR/deploy/overlays"
	cp -r "$ROOT/deploy/overlays/agent-sandbox" "$dir"
	cp -r "$ROOT/deploy/image" "$BATS_TEST_TMPDIR/deploy/image"
	kubectl kustomize "$dir" >"$BATS_TEST_TMPDIR/good.yaml"
	run -0 node "$ROOT/deploy/checks/agent-sandbox.mjs" "$BATS_TEST_TMPDIR/good.yaml" "$BATS_TEST_TMPDIR/derived.yaml"
	run -0 grep -c '^kind: Pod$' "$BATS_TEST_TMPDIR/derived.yaml"
	sed -i 's/sandboxTemplateRef:/sandboxTemplateRefs:/' "$dir/sandboxwarmpool.yaml"
	sed -i 's/  podTemplate:/  podTemplates:/' "$dir/sandboxtemplate.yaml"
	kubectl kustomize "$dir" >"$BATS_TEST_TMPDIR/bad.yaml"
	run -1 node "$ROOT/deploy/checks/agent-sandbox.mjs" "$BATS_TEST_TMPDIR/bad.yaml" "$BATS_TEST_TMPDIR/derived.yaml"
	assert_output --partial "SandboxWarmPool codebox: spec.sandboxTemplateRefs: is not a field of the CRD's schema"
	assert_output --partial 'SandboxWarmPool codebox: spec: sandboxTemplateRef is required'
	assert_output --partial 'SandboxTemplate codebox: spec: podTemplate is required'
}

@test "agent: commands never cost port 8080 its sandboxes built ahead" {
	local i before
	before=$(grep -c "the sandbox built ahead is gone" "$STACK_DIR/logs/pool.log" || true)
	# the same few workers serve both ports: each /execute meets the box its worker built
	# after its previous reply, whatever command the worker ran meanwhile
	for i in $(seq 1 12); do
		execute 'print(6 * 7)'
		assert_equal "$(field .stdout)" 42
		agent_run 'echo agent'
		assert_equal "$(field .stdout)" agent
	done
	assert_equal "$(grep -c "the sandbox built ahead is gone" "$STACK_DIR/logs/pool.log" || true)" "$before"
}

# tier_runs PORT: runs finished from a warm template (light and heavy) on PORT (execute, agent)
tier_runs() {
	curl -s "$METRICS/metrics" | awk -v p="api=\"$1\"" '/^codebox_executions_by_tier_total/ &&
		index($0, p) && !/tier="cold"/ { n += $2 } END { print n + 0 }'
}

@test "agent: a plain python command runs warm, with exactly the shell's outputs and exit codes" {
	local before cmd warm n=0
	run -0 curl -s "$BASE/isolation"
	warm=$(jq -r .details.interpreter <<<"$output")
	agent_run "mkdir -p lib && printf '%s\\n' 'import sys' 'print(__file__, sys.argv, sys.path[0], type(__loader__).__name__, sorted(globals()))' 'raise SystemExit(5)' > lib/s.py"
	before=$(tier_runs agent)
	# each as a plain invocation (warm), then behind the shell's exec (cold): byte for byte
	for cmd in \
		"python3 -c 'import sys, os, site; print(sys.argv, sys.orig_argv, sys.executable, sys.path, sys.flags, os.getcwd(), sorted(globals()), __name__, type(__loader__).__name__, site.ENABLE_USER_SITE, site.USER_SITE)' a 'b c'" \
		"python -c 'import sys; print(sys.executable, sys.orig_argv, open(\"/proc/self/cmdline\").read(), open(\"/proc/self/comm\").read())'" \
		"python3 -c 'import sys; print(sys.stdout.line_buffering, sys.stderr.line_buffering, type(sys.stdout.buffer).__name__, sys.stdout.mode, sys.stdout.encoding, sys.stderr.errors)'" \
		"python3 lib/s.py x 'y z'" \
		"python3 /app/lib/s.py" \
		"python3 -c 'import numpy; print(numpy.arange(4).sum())'" \
		"python3 -c 'raise ValueError(\"no\")'" \
		"python3 -c 'import sys; print(\"partial\"); sys.exit(3)'" \
		"python3 -c 'import os; print(\"lost in the buffer\"); os._exit(4)'" \
		"python3 -c 'import subprocess, sys; print(subprocess._args_from_interpreter_flags())'" \
		"python3 -c 'import time; print(\"lost at the timeout\"); time.sleep(30)'"; do
		agent_run "$cmd"
		local w=$reply
		agent_run "exec $cmd"
		assert_equal "$w" "$reply"
		n=$((n + 1))
	done
	echo "# interpreter: $warm, warm runs $(($(tier_runs agent) - before)) of $n" >&3
	if [[ $warm == warm ]]; then
		assert_equal "$(($(tier_runs agent) - before))" "$n"
	fi
	still_serving
}

# command_init MARKER: the init of the sandbox whose command has MARKER in its arguments
command_init() {
	local p pp
	for p in $(pgrep -f -- "$1"); do
		pp=$(ps -o ppid= -p "$p" | tr -d ' ')
		[[ -n $pp && $(cat "/proc/$pp/comm" 2>/dev/null) == codebox-init ]] && echo "$pp" && return 0
	done
	return 1
}

@test "agent: a command whose init is killed from outside is the sandbox's fault: exit code 125" {
	local m="codebox-lost-$RANDOM$RANDOM" init
	client run "python3 -c 'import time; time.sleep(60)' $m" >"$BATS_TEST_TMPDIR/lost" 3>&- &
	wait_for "the command to start" 100 command_init "$m"
	init=$(command_init "$m")
	kill -KILL "$init"
	wait
	read_reply "$BATS_TEST_TMPDIR/lost"
	assert_equal "$(field .exit_code)" 125
	assert_equal "$(field .stderr)" "codebox: the command's sandbox was killed from outside while it ran; see the service log"
	wait_for "the command to die with its init" 50 marker_gone "$m"
	still_serving
}

@test "agent: a warm command shares no page, no layout, no AT_RANDOM and no path with the pool" {
	run -0 curl -s "$BASE/isolation"
	[[ $(jq -r .details.interpreter <<<"$output") == warm ]] || skip "runs are cold here: the cold suites check them"
	[[ $(jq -r .details.privateProc <<<"$output") == true ]] || skip "no /proc of its own in a run here"
	local before guards nginx half imp
	before=$(tier_runs agent)
	client write shared-pages.py "$ROOT/tests/programs/attacks/shared-pages.py"
	client write layout.py "$ROOT/tests/programs/layout.py"
	client write memory-scan.py "$ROOT/tests/programs/memory-scan.py"
	# the runtime directory's path, in two halves (the program never holds it whole)
	half=$((${#STACK_DIR} / 2))
	printf '%s\n%s' "${STACK_DIR:0:half}" "${STACK_DIR:half}" >"$BATS_TEST_TMPDIR/needle"
	client write needle "$BATS_TEST_TMPDIR/needle"
	nginx=$(stack_nginx_pid)
	# shellcheck disable=SC2046
	guards=$("$PY" "$ROOT/tests/programs/layout.py" "$(pool_pid)" $(worker_pids) "$nginx" $(pgrep -P "$nginx"))
	# both tiers: a command naming numpy takes the heavy template here
	for imp in "" "import numpy; "; do
		# every shared mapping written over: only the C library's read-only views of files
		agent_run "python3 -c '${imp}import runpy; runpy.run_path(\"shared-pages.py\")'"
		assert_equal "$(field .exit_code)" 0
		run -0 jq -e 'all(.perms == "r--s" and (.path | startswith("/usr/")))' <<<"$(field .stdout)"
		# AT_RANDOM and the bases of libc, the heap, the executable: none the pool's, a
		# worker's or nginx's
		agent_run "python3 -c '${imp}import runpy; runpy.run_path(\"layout.py\")'"
		run -0 jq -e --argjson g "$guards" 'length == 1 and .[0].random != null and .[0].libc != null and
			(.[0] as $r | [$g[] | select(.random == $r.random or (.libc != null and .libc == $r.libc) or
			(.heap != null and .heap == $r.heap) or (.exe != null and .exe == $r.exe))] | length == 0)' \
			<<<"$(field .stdout)"
		# no byte of the runtime directory's path in any readable page
		agent_run "python3 -c '${imp}import io, runpy, sys; sys.stdin = io.StringIO(open(\"needle\").read()); runpy.run_path(\"memory-scan.py\")'"
		run -0 jq -e '.found == 0 and .scanned_mb > 10' <<<"$(field .stdout)"
	done
	# all six ran warm
	assert_equal "$(($(tier_runs agent) - before))" 6
	still_serving
}
