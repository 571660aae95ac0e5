#!/usr/bin/env bats
# Port 8888 under attack (issue 17, items 6 and 7): what a command leaves in /app (FIFOs,
# sockets, symlinks, a flood of empty files, names too long) never blocks or balloons the
# worker that serves the files; uploads stream; slow uploads and clients that hang up take
# nothing from anyone else. Every test ends by checking that both ports still serve.

load helpers/stack

CLIENTS="$BATS_TEST_DIRNAME/helpers/clients.py"
# a workspace big enough for an upload that would show in a worker's memory; a command
# timeout long enough that only a hang-up can explain a command's quick death
WORKSPACE_BYTES=$((32 * 1024 * 1024))

setup_file() {
	SANDBOX_EXEC_TIMEOUT_SECONDS=60 stack_start --agent-workspace-bytes "$WORKSPACE_BYTES"
}

teardown_file() {
	stack_stop
}

agent_run() { # agent_run COMMAND: POST /execute on port 8888; sets $reply (bounded: 30 s)
	reply=$(curl -s --max-time 30 -d "$(jq -cn --arg c "$1" '{command: $c}')" "$AGENT/execute")
}

still_serving() { # both ports answer, each within 10 s
	agent_run 'echo alive'
	assert_equal "$(field .stdout)" alive
	assert_equal "$(field .exit_code)" 0
	run -0 curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$AGENT/readyz"
	assert_output 200
	reply=$(curl -s --max-time 10 -H 'Content-Type: application/json' \
		-d '{"code":"print(6*7)"}' "$BASE/execute")
	assert_equal "$(field .stdout)" 42
}

agent_port() {
	echo "${AGENT##*:}"
}

@test "agent files: a FIFO in /app is refused at once; clients that hang up on it pin no worker" {
	agent_run 'rm -rf fifo-dir && mkdir fifo-dir && mkfifo fifo fifo-dir/f && echo made'
	assert_equal "$(field .stdout)" made
	# the attack: 32 downloads of the FIFO from clients that give up after a second
	local i pids=()
	for ((i = 0; i < 32; i++)); do
		curl -s -o /dev/null --max-time 1 "$AGENT/download/fifo" 3>&- &
		pids+=($!)
	done
	wait "${pids[@]}" || true
	# each one is a 404 at once, not a worker stuck in open()
	run -0 curl -s --max-time 5 -w ' %{http_code}' "$AGENT/download/fifo"
	assert_output '{"message":"File not found"} 404'
	run -0 curl -s --max-time 5 -w ' %{http_code}' "$AGENT/download/fifo-dir%2Ff"
	assert_output '{"message":"File not found"} 404'
	run -0 curl -s --max-time 5 -w ' %{http_code}' "$AGENT/list/fifo"
	assert_output '{"message":"Path is not a directory"} 404'
	run -0 curl -s --max-time 5 "$AGENT/exists/fifo"
	assert_output '{"path":"fifo","exists":true}'
	still_serving
}

@test "agent files: an upload onto a FIFO is a 400 at once and leaves the workspace free" {
	agent_run 'rm -f up-fifo && mkfifo up-fifo && echo made'
	assert_equal "$(field .stdout)" made
	echo data >"$BATS_TEST_TMPDIR/data"
	run -0 curl -s --max-time 10 -w ' %{http_code}' -F "file=@$BATS_TEST_TMPDIR/data;filename=up-fifo" \
		"$AGENT/upload"
	assert_output --regexp '"error":"invalid_request".*special file is in the way.* 400$'
	# the FIFO is untouched, and the next command is not refused as busy
	agent_run 'test -p up-fifo && echo still-a-fifo'
	assert_equal "$(field .stdout)" still-a-fifo
	still_serving
}

@test "agent files: /list names only files and directories, never a symlink or FIFO a file" {
	# (a command cannot make a socket: the sandbox denies it AF_UNIX)
	agent_run 'rm -rf kinds && mkdir -p kinds/d && cd kinds && printf 123 > reg && ln -s reg link &&
		ln -s d dlink && ln -s /etc/passwd out && mkfifo fifo && ls | wc -l'
	assert_equal "$(field .stdout)" 6
	run -0 curl -s --max-time 5 "$AGENT/list/kinds"
	assert_equal "$(jq -c '[.[] | [.name, .type]]' <<<"$output")" '[["d","directory"],["reg","file"]]'
	assert_equal "$(jq -c '.[1].size' <<<"$output")" 3
	# what the official client parses (its FileEntry knows only "file" and "directory")
	run -0 "$ROOT/tests/helpers/agent_client.py" "$AGENT" list kinds
	assert_equal "$(jq -c '[.[] | .name]' <<<"$output")" '["d","reg"]'
	still_serving
}

@test "agent files: the workspace is bounded in files as well as in bytes, and says so in /isolation" {
	local inodes=$((WORKSPACE_BYTES / 8192))
	run -0 curl -s --max-time 5 "$BASE/isolation"
	assert_equal "$(jq -c .workspace <<<"$output")" "{\"bytes\":$WORKSPACE_BYTES,\"inodes\":$inodes}"
	# empty files until the workspace refuses one (bounded: 100000 tries)
	agent_run 'rm -rf many && mkdir many && python -c "
import os
n = 0
try:
    while n < 100000:
        open(\"many/e%d\" % n, \"w\").close()
        n += 1
except OSError as e:
    print(n, e.strerror)
else:
    print(n, \"no limit\")
"; df --output=itotal /app | tail -1'
	echo "$reply"
	local made
	made=$(field .stdout | head -1 | cut -d' ' -f1)
	assert_equal "$(field .stdout | head -1 | cut -d' ' -f2-)" 'No space left on device'
	((made < inodes))
	assert_equal "$(field .stdout | sed -n 2p | tr -d ' ')" "$inodes"
	# an upload meets the same bound: 413, not a 500 the client would retry
	echo data >"$BATS_TEST_TMPDIR/data"
	run -0 curl -s --max-time 10 -w ' %{http_code}' -F "file=@$BATS_TEST_TMPDIR/data;filename=one-more" \
		"$AGENT/upload"
	assert_output --regexp '"error":"request_too_large".* 413$'
	agent_run 'rm -rf many; echo cleaned'
	assert_equal "$(field .stdout)" cleaned
	still_serving
}

@test "agent files: a name over 255 bytes, or a path over 4095, is a 4xx JSON answer everywhere" {
	local long path
	long=$(printf 'a%.0s' {1..300})
	echo data >"$BATS_TEST_TMPDIR/data"
	for path in "$long" "dir/$long" "$long/file"; do
		run -0 curl -s --max-time 10 -w ' %{http_code}' -F "file=@$BATS_TEST_TMPDIR/data;filename=$path" \
			"$AGENT/upload"
		assert_output --regexp '"error":"invalid_request".*longer than 255 bytes.* 400$'
		run -0 curl -s --max-time 10 -w ' %{http_code}' "$AGENT/download/$path"
		assert_output '{"message":"File not found"} 404'
		run -0 curl -s --max-time 10 -w ' %{http_code}' "$AGENT/list/$path"
		assert_output '{"message":"Path is not a directory"} 404'
		run -0 curl -s --max-time 10 -w ' %{http_code}' "$AGENT/exists/$path"
		assert_output "{\"path\":\"$path\",\"exists\":false} 200"
	done
	path=$(printf 'abcdefg/%.0s' {1..600})x
	run -0 curl -s --max-time 10 -w ' %{http_code}' -F "file=@$BATS_TEST_TMPDIR/data;filename=$path" \
		"$AGENT/upload"
	assert_output --regexp '"error":"invalid_request".* 400$'
	# the official client gets an answer it does not retry
	run -1 env CODEBOX_UNSAFE=1 "$ROOT/tests/helpers/agent_client.py" "$AGENT" write "$long" "$BATS_TEST_TMPDIR/data"
	assert_equal "$(jq -r .status <<<"$output")" 400
	still_serving
}

# workers_hwm: "pid peak-RSS-KiB" (VmHWM) of each of the stack's workers, one a line
workers_hwm() {
	local p
	for p in $(worker_pids); do
		echo "$p $(awk '$1 == "VmHWM:" { print $2 }' "/proc/$p/status" 2>/dev/null)"
	done
}

@test "agent files: an upload streams into the workspace: no worker holds the file in memory" {
	local grew
	head -c $((24 * 1024 * 1024)) /dev/urandom >"$BATS_TEST_TMPDIR/big"
	# warm every worker's upload path with a small one first
	echo small >"$BATS_TEST_TMPDIR/small"
	run -0 curl -s --max-time 10 -F "file=@$BATS_TEST_TMPDIR/small;filename=small" "$AGENT/upload"
	workers_hwm >"$BATS_TEST_TMPDIR/before"
	run -0 curl -s --max-time 60 -w ' %{http_code}' -F "file=@$BATS_TEST_TMPDIR/big;filename=up/big.bin" \
		"$AGENT/upload"
	assert_output "{\"message\":\"File 'up/big.bin' uploaded successfully.\"} 200"
	workers_hwm >"$BATS_TEST_TMPDIR/after"
	# what the workers' peak resident sizes grew by, together
	grew=$(awk 'NR == FNR { b[$1] = $2; next } ($1 in b) && $2 > b[$1] { g += $2 - b[$1] }
		END { print g + 0 }' "$BATS_TEST_TMPDIR/before" "$BATS_TEST_TMPDIR/after")
	echo "the workers' peak RSS grew by $grew KiB in all for a 24 MiB upload"
	((grew < 4096))
	agent_run 'sha256sum up/big.bin | cut -d" " -f1; rm -rf up'
	assert_equal "$(field .stdout)" "$(sha256sum "$BATS_TEST_TMPDIR/big" | cut -d' ' -f1)"
	# a failed upload leaves nothing behind, and the file it would replace is kept
	agent_run 'echo old > keep.txt'
	printf -- '--XX\r\nContent-Disposition: form-data; name="file"; filename="keep.txt"\r\n\r\nnew, but never closed' \
		>"$BATS_TEST_TMPDIR/cut"
	run -0 curl -s --max-time 10 -w ' %{http_code}' -H 'Content-Type: multipart/form-data; boundary=XX' \
		--data-binary "@$BATS_TEST_TMPDIR/cut" "$AGENT/upload"
	assert_output '{"error":"invalid_request","message":"the multipart body is not closed"} 400'
	agent_run 'cat keep.txt; ls -A | grep -c codebox-upload || true'
	assert_equal "$(field .stdout)" $'old\n0'
	still_serving
}

# nginx_read_all N: nginx has read everything N client connections to port 8888 sent (their
# Recv-Q on nginx's side is empty), so it has their headers in hand
nginx_read_all() {
	local n
	n=$(ss -Htn state established "( sport = :$(agent_port) )" | awk '$1 == 0' | wc -l)
	((n >= $1))
}

@test "agent admission: slow uploads take no agent slot; commands run and /readyz stays ready" {
	local slow out
	"$PY" "$CLIENTS" slowupload "$(agent_port)" 4 60 >"$BATS_TEST_TMPDIR/slow" 3>&- &
	slow=$!
	wait_for "the slow uploads to send their headers" 100 grep -q '^sent 4$' "$BATS_TEST_TMPDIR/slow"
	wait_for "nginx to read them" 100 nginx_read_all 4
	# what 4 stalled uploads held before: every agent slot, and /readyz with them
	run -0 curl -s --max-time 5 -o /dev/null -w '%{http_code}' "$AGENT/readyz"
	assert_output 200
	for out in 1 2 3; do
		agent_run "echo run-$out"
		assert_equal "$(field .stdout)" "run-$out"
	done
	run -0 curl -s --max-time 5 "$AGENT/exists/nothing-here"
	assert_output '{"path":"nothing-here","exists":false}'
	# the stalled uploads never reached the pool
	run -1 grep -q 'agent slots are in use' "$STACK_DIR/logs/pool.log"
	kill -TERM "$slow"
	wait "$slow" || true
	still_serving
}

@test "agent admission: a client that hangs up on a command has it killed at once, the workspace freed" {
	local m="codebox-agent-abandon-$RANDOM$RANDOM" ms
	jq -cn --arg c "echo started > hangup-started; exec python -c 'import time; time.sleep(50)' $m" \
		'{command: $c}' >"$BATS_TEST_TMPDIR/req"
	agent_run 'rm -f hangup-started'
	hang_up_on "$(agent_port)" "$BATS_TEST_TMPDIR/req" "$m" command
	((ms < 1000))
	wait_for "the worker to log it" 100 grep -q "agent: the client left during the run" \
		"$STACK_DIR/logs/pool.log"
	# the workspace is free at once: the next command runs, it is not a 429
	agent_run 'cat hangup-started'
	assert_equal "$(field .stdout)" started
	still_serving
}

list_answers() {
	[[ $(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "$AGENT/list/") == 200 ]]
}

@test "agent admission: with every agent slot held, the pool answers 429 at once" {
	local conf m="codebox-agent-slot-$RANDOM$RANDOM" first
	stack_stop
	conf=$(conf_variant 's/CODEBOX_AGENT_SLOTS  4;/CODEBOX_AGENT_SLOTS  1;/')
	SANDBOX_EXEC_TIMEOUT_SECONDS=60 stack_start --conf-dir "$conf" --agent-workspace-bytes "$WORKSPACE_BYTES"
	jq -cn --arg c "exec python -c 'import time; time.sleep(50)' $m" '{command: $c}' >"$BATS_TEST_TMPDIR/req"
	"$PY" "$CLIENTS" hangup "$(agent_port)" "@$BATS_TEST_TMPDIR/req" 60 3>&- &
	first=$!
	wait_for "the command to start" 100 pgrep -f -- "$m"
	# the one slot is the command's: a listing is refused at once, by the pool
	run -0 curl -s --max-time 5 -D - -w '%{http_code}' "$AGENT/list/"
	assert_output --partial 'Retry-After: 1'
	assert_output --partial 'Codebox-Busy: pool'
	assert_output --partial '"message":"all agent slots are in use; retry shortly"'
	assert_output --regexp '429$'
	# its client hangs up: the command is killed, and its slot is free
	kill "$first"
	wait "$first" || true
	wait_for "the command to die" 100 marker_gone "$m"
	wait_for "the slot to be free" 100 list_answers
	still_serving
}
