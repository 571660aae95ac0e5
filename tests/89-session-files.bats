#!/usr/bin/env bats
# A live session's files, its restart, and the list of one's sessions (API.md "Sessions"):
# PUT, GET and DELETE /sessions/{id}/files/{path} and GET /sessions/{id}/files, beneath the
# session's working directory with port 8888's path rules (no escape, no symlink, no special
# file), under its disk bound, bound to its token; POST /sessions/{id}/restart (a fresh
# interpreter, the same id, bounds and files); GET /sessions (the token's own). Two bearer
# tokens, A and B, as two tenants; an 8 MiB session disk, so that the disk bound is cheap to
# meet.

load helpers/stack
load helpers/sessions

TOKEN_A=codebox-token-A-0123456789abcdef
TOKEN_B=codebox-token-B-0123456789abcdef

setup_file() {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || return 0
	TOKENS_DIR=$(mktemp -d /tmp/codebox-tokens.XXXXXX)
	chmod 0711 "$TOKENS_DIR"
	export TOKENS_DIR
	printf '%s\n%s\n' "$TOKEN_A" "$TOKEN_B" >"$TOKENS_DIR/tokens"
	chmod 0644 "$TOKENS_DIR/tokens"
	# the config where a pool of uid 65534 can read it too (the last test's)
	CONF="$TOKENS_DIR/conf"
	cp -r "$(conf_variant 's/CODEBOX_DISK_BYTES  *67108864;/CODEBOX_DISK_BYTES  8388608;/')" "$CONF"
	chmod -R a+rX "$CONF"
	export CONF
	stack_start --auth-tokens "$TOKENS_DIR/tokens" --conf-dir "$CONF"
}

teardown_file() {
	stack_stop
	rm -rf "${TOKENS_DIR:-/nonexistent}"
}

# each test's sessions are closed after it, passed or failed
teardown() {
	token_session_teardown
}

setup() {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
}

# cell TOKEN SID CODE [JQ-EXTRA]: one execution in session SID
cell() {
	as "$1" POST "/sessions/$2/execute" "$(jq -cn --arg code "$3" "{code: \$code} + (${4:-{\}})")"
}

# put TOKEN SID PATH FILE: PUT FILE's bytes at PATH (as sent: --path-as-is)
put() {
	request --path-as-is -H "Authorization: Bearer $1" -X PUT --data-binary "@$4" \
		"$BASE/sessions/$2/files/$3"
}

# fetch TOKEN SID PATH: GET PATH into $BATS_TEST_TMPDIR/body ($code; $reply is its text)
fetch() {
	request --path-as-is -H "Authorization: Bearer $1" "$BASE/sessions/$2/files/$3"
}

# listing TOKEN SID [QUERY]: GET /sessions/SID/files[?QUERY]; the paths, one a line, in $paths
listing() {
	request -H "Authorization: Bearer $1" "$BASE/sessions/$2/files${3:+?$3}"
	paths=$(jq -r '.files[].path' <<<"$reply" 2>/dev/null || true)
}

# healthy TOKEN SID: the service and the session still answer
healthy() {
	answers_42 -H "Authorization: Bearer $1"
	cell "$1" "$2" '6 * 7'
	assert_equal "$code" 200
	assert_equal "$(field .value)" 42
}

@test "session files: PUT, GET, list and DELETE round-trip binary bytes" {
	local f="$BATS_TEST_TMPDIR/blob.bin" g="$BATS_TEST_TMPDIR/got.bin"
	session_of "$TOKEN_A"
	# every byte value, NULs and invalid UTF-8 among them
	{
		for ((i = 0; i < 256; i++)); do printf "\\x$(printf %02x "$i")"; done
		head -c 200000 /dev/urandom
	} >"$f"
	put "$TOKEN_A" "$sid" data/blob.bin "$f"
	assert_equal "$code" 201
	assert_equal "$(field .path)" data/blob.bin
	assert_equal "$(field .size)" "$(stat -c %s "$f")"
	put "$TOKEN_A" "$sid" data/blob.bin "$f"
	assert_equal "$code" 200
	fetch "$TOKEN_A" "$sid" data/blob.bin
	assert_equal "$code" 200
	cp "$BATS_TEST_TMPDIR/body" "$g"
	cmp "$f" "$g"
	assert_equal "$(header Content-Type)" application/octet-stream
	assert_equal "$(header X-Content-Type-Options)" nosniff
	printf 'a,b\n1,2\n' >"$BATS_TEST_TMPDIR/t.csv"
	put "$TOKEN_A" "$sid" t.csv "$BATS_TEST_TMPDIR/t.csv"
	assert_equal "$code" 201
	fetch "$TOKEN_A" "$sid" t.csv
	assert_equal "$reply" "$(printf 'a,b\n1,2')"
	assert_regex "$(header Content-Type)" '^text/csv'
	# a cell has run: its main.py is not one of the session's files
	cell "$TOKEN_A" "$sid" 'print(1)'
	listing "$TOKEN_A" "$sid"
	assert_equal "$code" 200
	assert_equal "$paths" "$(printf 'data\ndata/blob.bin\nt.csv')"
	assert_equal "$(jq -c '.files[] | select(.path == "data/blob.bin") | [.type, .size]' <<<"$reply")" "[\"file\",$(stat -c %s "$f")]"
	assert_equal "$(jq -r '.files[] | select(.path == "data") | .type' <<<"$reply")" directory
	assert_equal "$(field .truncated)" false
	listing "$TOKEN_A" "$sid" path=data
	assert_equal "$paths" data/blob.bin
	# DELETE: the file (204), then its directory once empty; then nothing is there
	request -H "Authorization: Bearer $TOKEN_A" -X DELETE "$BASE/sessions/$sid/files/data"
	assert_equal "$code" 409
	request -H "Authorization: Bearer $TOKEN_A" -X DELETE "$BASE/sessions/$sid/files/data/blob.bin"
	assert_equal "$code" 204
	fetch "$TOKEN_A" "$sid" data/blob.bin
	assert_equal "$code" 404
	assert_equal "$(field .error)" not_found
	request -H "Authorization: Bearer $TOKEN_A" -X DELETE "$BASE/sessions/$sid/files/data"
	assert_equal "$code" 204
	request -H "Authorization: Bearer $TOKEN_A" -X DELETE "$BASE/sessions/$sid/files/data"
	assert_equal "$code" 404
	listing "$TOKEN_A" "$sid"
	assert_equal "$paths" t.csv
	# the list is GET only; a file takes GET, PUT and DELETE
	request -H "Authorization: Bearer $TOKEN_A" -X POST "$BASE/sessions/$sid/files/t.csv"
	assert_equal "$code" 405
	request -H "Authorization: Bearer $TOKEN_A" -X DELETE "$BASE/sessions/$sid/files"
	assert_equal "$code" 405
}

@test "session files: a file PUT is the program's to read and change; a file a cell made is served" {
	session_of "$TOKEN_A"
	printf 'hello' >"$BATS_TEST_TMPDIR/in.txt"
	put "$TOKEN_A" "$sid" sub/in.txt "$BATS_TEST_TMPDIR/in.txt"
	assert_equal "$code" 201
	cell "$TOKEN_A" "$sid" 'import os
s = open("sub/in.txt").read()
open("sub/in.txt", "a").write(" world")
os.rename("sub/in.txt", "sub/moved.txt")
st = os.stat("sub/moved.txt")
s, st.st_uid == os.getuid(), oct(st.st_mode & 0o777)'
	assert_equal "$code" 200
	assert_equal "$(field .value)" "('hello', True, '0o600')"
	fetch "$TOKEN_A" "$sid" sub/moved.txt
	assert_equal "$reply" "hello world"
	cell "$TOKEN_A" "$sid" 'open("out.bin", "wb").write(bytes(range(256)) * 4)'
	fetch "$TOKEN_A" "$sid" out.bin
	assert_equal "$code" 200
	assert_equal "$(sha256sum <"$BATS_TEST_TMPDIR/body")" "$(python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 4)' | sha256sum)"
	# main.py and result.json are the cells' own: never served, written or listed
	cell "$TOKEN_A" "$sid" 'import json; json.dump({"a": 1}, open("result.json", "w"))'
	for verb in GET PUT DELETE; do
		request -H "Authorization: Bearer $TOKEN_A" -X "$verb" --data-binary x "$BASE/sessions/$sid/files/main.py"
		assert_equal "$code" 400
		request -H "Authorization: Bearer $TOKEN_A" -X "$verb" --data-binary x "$BASE/sessions/$sid/files/result.json"
		assert_equal "$code" 400
	done
	listing "$TOKEN_A" "$sid"
	refute_regex "$paths" 'main\.py|result\.json'
	# ...at the top only: a subdirectory's main.py is a file like another
	put "$TOKEN_A" "$sid" sub/main.py "$BATS_TEST_TMPDIR/in.txt"
	assert_equal "$code" 201
}

@test "session files: escapes, symlinks, FIFOs and directories are refused; the service stays healthy" {
	local p
	session_of "$TOKEN_A"
	printf 'evil' >"$BATS_TEST_TMPDIR/evil"
	cell "$TOKEN_A" "$sid" 'import os
os.symlink("/etc/passwd", "passwd")
os.symlink("..", "up")
os.symlink("/tmp", "tmpdir")
os.mkfifo("fifo")
os.mkdir("d")
open("/tmp/outside", "w").write("secret-tmp")'
	assert_equal "$(field .status)" succeeded
	# dot segments, plain and encoded, and absolute paths: refused, never another file
	for p in ../../../etc/passwd %2e%2e/%2e%2e/etc/passwd a/..%2f..%2f..%2fetc%2fpasswd \
		..%2F..%2Fx //etc/passwd %2Fetc%2Fpasswd a/../../x; do
		fetch "$TOKEN_A" "$sid" "$p"
		assert [ "$code" -ge 400 ] && assert [ "$code" -lt 500 ]
		refute_regex "$reply" 'root:'
		put "$TOKEN_A" "$sid" "$p" "$BATS_TEST_TMPDIR/evil"
		assert [ "$code" -ge 400 ] && assert [ "$code" -lt 500 ]
	done
	for p in 'path=..' 'path=../..' 'path=%2Fetc' 'path=/etc' 'path=up' 'path=tmpdir'; do
		listing "$TOKEN_A" "$sid" "$p"
		assert [ "$code" -ge 400 ] && assert [ "$code" -lt 500 ]
	done
	# a symlink a cell made is never followed, read or written through, nor one on the way
	for p in passwd up/x tmpdir/outside; do
		fetch "$TOKEN_A" "$sid" "$p"
		assert_equal "$code" 403
		refute_regex "$reply" 'root:|secret-tmp'
		put "$TOKEN_A" "$sid" "$p" "$BATS_TEST_TMPDIR/evil"
		assert_equal "$code" 403
	done
	request -H "Authorization: Bearer $TOKEN_A" -X DELETE "$BASE/sessions/$sid/files/passwd"
	assert_equal "$code" 403
	# a FIFO is never opened (a read would block the worker): refused at once
	request --max-time 10 -H "Authorization: Bearer $TOKEN_A" "$BASE/sessions/$sid/files/fifo"
	assert_equal "$code" 403
	put "$TOKEN_A" "$sid" fifo "$BATS_TEST_TMPDIR/evil"
	assert_equal "$code" 403
	# a directory is not a file
	fetch "$TOKEN_A" "$sid" d
	assert_equal "$code" 409
	put "$TOKEN_A" "$sid" d "$BATS_TEST_TMPDIR/evil"
	assert_equal "$code" 409
	# the listing shows regular files and directories only
	listing "$TOKEN_A" "$sid"
	assert_equal "$paths" d
	# nothing leaked out: the box's /etc/passwd and /tmp are as they were
	cell "$TOKEN_A" "$sid" 'open("/etc/passwd").read().count("evil"), open("/tmp/outside").read(), sorted(os.listdir("/tmp"))'
	assert_equal "$(field .value)" "(0, 'secret-tmp', ['outside'])"
	healthy "$TOKEN_A" "$sid"
}

@test "session files: the session's disk bounds a PUT; one that does not fit fails cleanly and leaves nothing" {
	local big="$BATS_TEST_TMPDIR/big" mid="$BATS_TEST_TMPDIR/mid" used
	session_of "$TOKEN_A"
	assert_equal "$(field .diskBytes)" 8388608
	# larger than the disk: refused before a byte is written
	head -c 9000000 /dev/zero >"$big"
	put "$TOKEN_A" "$sid" big "$big"
	assert_equal "$code" 413
	assert_equal "$(field .error)" request_too_large
	# smaller than the disk, larger than the room left: refused when the disk is full
	cell "$TOKEN_A" "$sid" 'import shutil
open("fill", "wb").write(b"x" * (5 << 20))
shutil.disk_usage(".").used'
	used=$(field .value)
	head -c 4000000 /dev/urandom >"$mid"
	put "$TOKEN_A" "$sid" sub/mid "$mid"
	assert_equal "$code" 413
	assert_regex "$(field .message)" "disk is full"
	# no partial file, nothing unnamed holding the disk
	listing "$TOKEN_A" "$sid"
	assert_equal "$paths" fill
	cell "$TOKEN_A" "$sid" 'import os, shutil
shutil.disk_usage(".").used, sorted(os.listdir("."))'
	assert_equal "$(field .value)" "($used, ['fill', 'main.py'])"
	# with room again it fits
	request -H "Authorization: Bearer $TOKEN_A" -X DELETE "$BASE/sessions/$sid/files/fill"
	assert_equal "$code" 204
	put "$TOKEN_A" "$sid" sub/mid "$mid"
	assert_equal "$code" 201
	healthy "$TOKEN_A" "$sid"
}

@test "session files: another token's request is the 404 of an unknown id, on every verb" {
	local a unknown=0123456789abcdef0123456789abcdef verb p
	session_of "$TOKEN_A"
	a=$sid
	printf 'mine' >"$BATS_TEST_TMPDIR/mine"
	put "$TOKEN_A" "$a" mine.txt "$BATS_TEST_TMPDIR/mine"
	assert_equal "$code" 201
	for p in files/mine.txt files/other.txt files files?path=. restart; do
		for verb in GET PUT DELETE POST; do
			request -H "Authorization: Bearer $TOKEN_B" -X "$verb" --data-binary x "$BASE/sessions/$a/$p"
			local theirs="$code $reply"
			request -H "Authorization: Bearer $TOKEN_B" -X "$verb" --data-binary x "$BASE/sessions/$unknown/$p"
			assert_equal "$theirs" "$code $reply"
			[[ $code == 404 || $code == 405 ]]
		done
	done
	# A's file is as A left it, and A's session was not restarted
	fetch "$TOKEN_A" "$a" mine.txt
	assert_equal "$reply" mine
	listing "$TOKEN_A" "$a"
	assert_equal "$paths" mine.txt
}

@test "session files: they are served while a cell runs" {
	local eid t0
	session_of "$TOKEN_A"
	cell "$TOKEN_A" "$sid" 'import time
open("ran", "w").write("yes")
time.sleep(60)' '{background: true, timeoutSeconds: 120}'
	assert_equal "$code" 202
	eid=$(field .execution)
	wait_for "the cell to write its file" 100 bash -c "curl -s -H 'Authorization: Bearer $TOKEN_A' $BASE/sessions/$sid/files | grep -q '\"ran\"'"
	t0=$(date +%s)
	printf 'during' >"$BATS_TEST_TMPDIR/during"
	put "$TOKEN_A" "$sid" during.txt "$BATS_TEST_TMPDIR/during"
	assert_equal "$code" 201
	fetch "$TOKEN_A" "$sid" ran
	assert_equal "$reply" yes
	request -H "Authorization: Bearer $TOKEN_A" -X DELETE "$BASE/sessions/$sid/files/ran"
	assert_equal "$code" 204
	listing "$TOKEN_A" "$sid"
	assert_equal "$paths" during.txt
	# not held up by the cell (60 s): a generous bound on a loaded machine
	(($(date +%s) - t0 < 30))
	as "$TOKEN_A" GET "/sessions/$sid"
	assert_equal "$(field .state)" busy
	as "$TOKEN_A" POST "/sessions/$sid/interrupt"
	wait_for "the interrupted cell's answer" 100 bash -c "curl -s -H 'Authorization: Bearer $TOKEN_A' $BASE/sessions/$sid/executions/$eid | grep -q '\"state\":\"done\"'"
	cell "$TOKEN_A" "$sid" 'open("during.txt").read()'
	assert_equal "$(field .value)" "'during'"
}

@test "session restart: a fresh interpreter, the same id, bounds and files; what the old one ran is gone" {
	local before after
	session_of "$TOKEN_A"
	cell "$TOKEN_A" "$sid" 'import subprocess, sys
x = 41
sys.modules["codebox_marker"] = sys
open("kept.txt", "w").write("kept")
import os; os.makedirs("dir/sub"); open("dir/sub/deep.bin", "wb").write(bytes(range(256)))
os.symlink("/etc/passwd", "link")
p = subprocess.Popen(["sleep", "1234.5"])
x + 1'
	assert_equal "$(field .value)" 42
	wait_for "the program's child" 50 pgrep -f "sleep 1234.5"
	as "$TOKEN_A" GET "/sessions/$sid"
	before=$(jq -c 'del(.executions, .ageSeconds, .idleSeconds, .state)' <<<"$reply")
	as "$TOKEN_A" POST "/sessions/$sid/restart"
	assert_equal "$code" 200
	assert_equal "$(field .id)" "$sid"
	assert_equal "$(field .executions)" 0
	assert_equal "$(field .state)" idle
	after=$(jq -c 'del(.executions, .ageSeconds, .idleSeconds, .state)' <<<"$reply")
	assert_equal "$after" "$before"
	# nothing of the old interpreter: its variables, its modules, its processes
	cell "$TOKEN_A" "$sid" 'import sys
"x" in globals(), "codebox_marker" in sys.modules'
	assert_equal "$(field .value)" "(False, False)"
	wait_for "the old program's child to be gone" 100 bash -c '! pgrep -f "sleep 1234[.]5"'
	# its files: regular files and directories, not its symlink
	cell "$TOKEN_A" "$sid" 'import os
open("kept.txt").read(), open("dir/sub/deep.bin", "rb").read() == bytes(range(256)), os.path.lexists("link")'
	assert_equal "$(field .value)" "('kept', True, False)"
	# executions go on, and it restarts again
	cell "$TOKEN_A" "$sid" 'y = 2; y'
	assert_equal "$(field .value)" 2
	as "$TOKEN_A" POST "/sessions/$sid/restart"
	assert_equal "$code" 200
	cell "$TOKEN_A" "$sid" '"y" in globals(), open("kept.txt").read()'
	assert_equal "$(field .value)" "(False, 'kept')"
	grep -q "session h:[0-9a-f]* restarted" "$STACK_DIR/logs/pool.log"
	# nothing of the old boxes is left: one session, one box
	run -0 bash -c "ls -d '$(stack_runs)'/sessions/run-* | wc -l"
	assert_output 1
	healthy "$TOKEN_A" "$sid"
}

@test "session restart: a running cell is interrupted first; the restart then goes on" {
	local eid
	session_of "$TOKEN_A"
	cell "$TOKEN_A" "$sid" 'import time
z = 1
time.sleep(120)' '{background: true, timeoutSeconds: 300}'
	assert_equal "$code" 202
	eid=$(field .execution)
	wait_for "the cell to run" 100 bash -c "curl -s -H 'Authorization: Bearer $TOKEN_A' $BASE/sessions/$sid | grep -q '\"state\":\"busy\"'"
	as "$TOKEN_A" POST "/sessions/$sid/restart"
	assert_equal "$code" 200
	assert_equal "$(field .id)" "$sid"
	as "$TOKEN_A" GET "/sessions/$sid/executions/$eid"
	assert_equal "$(field .state)" done
	assert_regex "$(field .outcome.stderr)" KeyboardInterrupt
	cell "$TOKEN_A" "$sid" '"z" in globals()'
	assert_equal "$(field .value)" False
	healthy "$TOKEN_A" "$sid"
}

@test "sessions list: GET /sessions lists the token's own sessions, never another's" {
	local a1 a2 b1
	as "$TOKEN_A" GET /sessions
	assert_equal "$code" 200
	assert_equal "$(jq -c .sessions <<<"$reply")" "[]"
	session_of "$TOKEN_A"
	a1=$sid
	session_of "$TOKEN_A"
	a2=$sid
	session_of "$TOKEN_B"
	b1=$sid
	as "$TOKEN_A" GET /sessions
	assert_equal "$code" 200
	assert_equal "$(jq -r '.sessions[].id' <<<"$reply" | sort)" "$(printf '%s\n%s\n' "$a1" "$a2" | sort)"
	# each as GET /sessions/{id} answers it
	local one
	one=$(jq -c --arg id "$a1" '.sessions[] | select(.id == $id) | del(.ageSeconds, .idleSeconds)' <<<"$reply")
	as "$TOKEN_A" GET "/sessions/$a1"
	assert_equal "$one" "$(jq -c 'del(.ageSeconds, .idleSeconds)' <<<"$reply")"
	as "$TOKEN_B" GET /sessions
	assert_equal "$(jq -r '.sessions[].id' <<<"$reply")" "$b1"
	# a closed one is gone from it
	as "$TOKEN_A" DELETE "/sessions/$a2"
	as "$TOKEN_A" GET /sessions
	assert_equal "$(jq -r '.sessions[].id' <<<"$reply")" "$a1"
	# without a token, nothing (nginx's 401)
	request "$BASE/sessions"
	assert_equal "$code" 401
	request -X PATCH -H "Authorization: Bearer $TOKEN_A" "$BASE/sessions"
	assert_equal "$code" 405
}

@test "sessions without tokens, under a pool that is not root: all are listed; files and restart work" {
	[[ $EUID -eq 0 ]] || skip "needs root to switch to an unprivileged uid"
	[[ -z ${CODEBOX_BASE:-} ]] || skip "an external stack"
	local s1 s2
	STACK_USER=65534 stack_start --conf-dir "$CONF"
	sreq POST /sessions
	assert_equal "$code" 201
	s1=$(field .id)
	sreq POST /sessions
	s2=$(field .id)
	sreq GET /sessions
	assert_equal "$(jq -r '.sessions[].id' <<<"$reply" | sort)" "$(printf '%s\n%s\n' "$s1" "$s2" | sort)"
	printf 'one uid' >"$BATS_TEST_TMPDIR/f"
	request -X PUT --data-binary "@$BATS_TEST_TMPDIR/f" "$BASE/sessions/$s1/files/f.txt"
	assert_equal "$code" 201
	run_in "$s1" 'v = 1; open("f.txt", "a").write("!"); open("f.txt").read()'
	assert_equal "$(field .value)" "'one uid!'"
	sreq POST "/sessions/$s1/restart"
	assert_equal "$code" 200
	run_in "$s1" '"v" in globals(), open("f.txt").read()'
	assert_equal "$(field .value)" "(False, 'one uid!')"
	request "$BASE/sessions/$s1/files/f.txt"
	assert_equal "$reply" "one uid!"
	sreq DELETE "/sessions/$s1"
	sreq DELETE "/sessions/$s2"
	sreq GET /sessions
	assert_equal "$(jq -c .sessions <<<"$reply")" "[]"
}
