#!/usr/bin/env bats
# Snapshots (API.md "Snapshots"): POST /sessions/{id}/snapshot serializes a session's state
# (variables, functions and classes defined in it, imports by name, the working directory's
# files, the current directory) inside its sandbox, and the worker signs it (HMAC-SHA256 with
# the fleet's key); POST /sessions {"snapshot": ...} checks one whole before anything is made,
# and restores it into a new session. Bounded in size (CODEBOX_SNAPSHOT_MAX_BYTES) and time.
# Warm only (sessions are).

bats_require_minimum_version 1.5.0

load helpers/stack
load helpers/sessions
load helpers/mcp

setup_file() {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || return 0
	# a fleet's key, and a snapshot bound of 24 MiB: above the 10 MB DataFrame's state,
	# below what the bound's test makes
	head -c 48 /dev/urandom | base64 -w0 >"$BATS_FILE_TMPDIR/fleet.key"
	chmod 600 "$BATS_FILE_TMPDIR/fleet.key"
	export CODEBOX_FLEET_KEY_FILE="$BATS_FILE_TMPDIR/fleet.key"
	stack_start --conf-dir "$(conf_variant \
		's/CODEBOX_SNAPSHOT_MAX_BYTES  *67108864;/CODEBOX_SNAPSHOT_MAX_BYTES         25165824;/')"
}

teardown_file() {
	stack_stop
}

setup() {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
}

teardown() {
	session_teardown
}

# snapshot SID: POST /sessions/SID/snapshot; the answer in $reply, the snapshot in $BATS_TEST_TMPDIR/snap
snapshot() {
	sreq POST "/sessions/$1/snapshot"
	if [[ $code == 200 ]]; then
		jq -c '{snapshot}' <<<"$reply" >"$BATS_TEST_TMPDIR/snap.json"
	fi
}

# restore FILE: POST /sessions with FILE as the body; a new session's id in $sid
restore() {
	request -X POST -H 'Content-Type: application/json' --data-binary "@$1" "$BASE/sessions"
	if [[ $code == 201 ]]; then
		sid=$(field .id)
		echo "$sid" >>"$BATS_TEST_TMPDIR/sessions"
	fi
}

# the sessions this stack holds (their records)
session_count() {
	find "$(stack_runs)/sessions" -maxdepth 1 -name '*.rec' | wc -l
}

@test "snapshots: variables, a function and a class defined in the session, an import, files and the cwd come back in a new session" {
	local first
	session_new
	first=$sid
	run_in "$sid" 'import math as m, os
x = [1, 2, 3]
def f(a):
    return a * m.pi + len(x)
class K:
    def __init__(self):
        self.v = 5
    def g(self):
        return self.v + f(1)
k = K()
os.makedirs("sub/deep")
open("sub/deep/a.txt", "w").write("hello")
open("top.bin", "wb").write(bytes(range(256)))
os.chdir("sub")'
	assert_equal "$(field .status)" succeeded
	snapshot "$sid"
	assert_equal "$code" 200
	run -0 jq -e '(.snapshot | type) == "string" and .bytes > 0 and .variables == ["K", "f", "k", "x"] and
		(.modules | index("m")) != null and .files == 2 and .cwd == "sub" and .skipped == []' <<<"$reply"
	# the snapshot leaves its session as it was
	run_in "$first" 'print(os.getcwd().endswith("/sub"), k.g())'
	assert_equal "$(field .stdout)" "True 11.141592653589793"
	restore "$BATS_TEST_TMPDIR/snap.json"
	assert_equal "$code" 201
	assert [ "$sid" != "$first" ]
	run -0 jq -e '.restored.variables == ["K", "f", "k", "x"] and .restored.skipped == [] and .restored.cwd == "sub"' <<<"$reply"
	run_in "$sid" 'import hashlib
print(os.getcwd().endswith("/sub"), open("deep/a.txt").read(), k.g(), f(2), m.sqrt(16), x, isinstance(k, K))
print(hashlib.sha256(open("../top.bin", "rb").read()).hexdigest() == hashlib.sha256(bytes(range(256))).hexdigest())
print(sorted(n for n in os.listdir("..") if n != "main.py"))'
	assert_equal "$(field .status)" succeeded
	assert_equal "$(field .stdout)" "True hello 11.141592653589793 9.283185307179586 4.0 [1, 2, 3] True
True
['sub', 'top.bin']"
}

@test "snapshots: a 10 MB DataFrame, a fitted scikit-learn model and files restore exactly" {
	session_new
	run_in "$sid" 'import numpy as np, pandas as pd
from sklearn.linear_model import LogisticRegression
rng = np.random.default_rng(7)
df = pd.DataFrame(rng.random((125000, 10)), columns=[f"c{i}" for i in range(10)])
df["label"] = (df.c0 + df.c1 > 1).astype(int)
model = LogisticRegression(max_iter=200).fit(df[["c0", "c1", "c2"]], df.label)
df.head(20000).to_csv("data.csv", index=False)
pred = model.predict_proba(df[["c0", "c1", "c2"]].head(1000))
print(df.memory_usage(deep=True).sum() >= 10_000_000)' '{timeoutSeconds: 30}'
	assert_equal "$(field .status)" succeeded
	assert_equal "$(field .stdout)" True
	run_in "$sid" 'import hashlib
print(pd.util.hash_pandas_object(df).sum(), hashlib.sha256(open("data.csv", "rb").read()).hexdigest(), hashlib.sha256(pred.tobytes()).hexdigest())'
	local want=$(field .stdout)
	snapshot "$sid"
	assert_equal "$code" 200
	run -0 jq -e '.bytes > 10000000 and (.variables | index("df")) != null and (.variables | index("model")) != null' <<<"$reply"
	restore "$BATS_TEST_TMPDIR/snap.json"
	assert_equal "$code" 201
	run_in "$sid" 'import hashlib
p2 = model.predict_proba(df[["c0", "c1", "c2"]].head(1000))
print(pd.util.hash_pandas_object(df).sum(), hashlib.sha256(open("data.csv", "rb").read()).hexdigest(), hashlib.sha256(p2.tobytes()).hexdigest())'
	assert_equal "$(field .status)" succeeded
	assert_equal "$(field .stdout)" "$want"
}

@test "snapshots: two restores of one snapshot are independent sessions" {
	local a b
	session_new
	run_in "$sid" 'n = [0]
open("f.txt", "w").write("0")'
	snapshot "$sid"
	assert_equal "$code" 200
	restore "$BATS_TEST_TMPDIR/snap.json"
	assert_equal "$code" 201
	a=$sid
	restore "$BATS_TEST_TMPDIR/snap.json"
	assert_equal "$code" 201
	b=$sid
	assert [ "$a" != "$b" ]
	run_in "$a" 'n.append(1)
open("f.txt", "w").write("a")
len(n)'
	assert_equal "$(field .value)" 2
	run_in "$b" 'print(len(n), open("f.txt").read())'
	assert_equal "$(field .stdout)" "1 0"
}

@test "snapshots: tampered, truncated, garbage and non-string snapshots are refused with 4xx, nothing made" {
	local before
	session_new
	run_in "$sid" 'secret = 42'
	snapshot "$sid"
	assert_equal "$code" 200
	before=$(session_count)
	python3 - "$BATS_TEST_TMPDIR" <<'EOF'
import base64, json, sys
d = sys.argv[1]
s = json.load(open(d + "/snap.json"))["snapshot"]
raw = bytearray(base64.b64decode(s))
raw[len(raw) // 2] ^= 1  # one bit of the state
json.dump({"snapshot": base64.b64encode(bytes(raw)).decode()}, open(d + "/tampered.json", "w"))
i = len(s) // 2
json.dump({"snapshot": s[:i] + ("A" if s[i] != "A" else "B") + s[i + 1:]}, open(d + "/flipped.json", "w"))
json.dump({"snapshot": s[: len(s) // 8 * 4]}, open(d + "/truncated.json", "w"))
json.dump({"snapshot": s[:-5]}, open(d + "/cut.json", "w"))
json.dump({"snapshot": base64.b64encode(b"garbage" * 300).decode()}, open(d + "/garbage.json", "w"))
json.dump({"snapshot": "not base64 at all!"}, open(d + "/text.json", "w"))
json.dump({"snapshot": 12}, open(d + "/number.json", "w"))
EOF
	restore "$BATS_TEST_TMPDIR/tampered.json"
	assert_equal "$code" 422
	assert_equal "$(field .error)" snapshot_rejected
	restore "$BATS_TEST_TMPDIR/flipped.json"
	assert_equal "$code" 422
	for f in truncated cut garbage text number; do
		restore "$BATS_TEST_TMPDIR/$f.json"
		assert_equal "$f: $code" "$f: 400"
		assert_equal "$(field .error)" invalid_snapshot
	done
	assert_equal "$(session_count)" "$before"
	# nothing of them ran: the untouched one still restores
	restore "$BATS_TEST_TMPDIR/snap.json"
	assert_equal "$code" 201
	run_in "$sid" 'secret'
	assert_equal "$(field .value)" 42
}

@test "snapshots: a socket, a generator and a lock are listed as skipped, and the rest restores" {
	session_new
	run_in "$sid" 'import socket, threading
a, b = socket.socketpair()
gen = (i for i in range(3))
lock = threading.Lock()
fh = open("log.txt", "w")
kept = {"k": 1}'
	assert_equal "$(field .status)" succeeded
	snapshot "$sid"
	assert_equal "$code" 200
	run -0 jq -e '.variables == ["kept"] and
		([.skipped[].name] | sort) == ["a", "b", "fh", "gen", "lock"] and
		(.skipped | map(select(.name == "gen"))[0].reason | test("generator")) and
		(.skipped | map(select(.name == "lock"))[0].reason | test("lock")) and
		(.skipped | map(select(.name == "a"))[0].reason | test("socket"))' <<<"$reply"
	restore "$BATS_TEST_TMPDIR/snap.json"
	assert_equal "$code" 201
	run_in "$sid" 'print(kept, "gen" in globals(), "lock" in globals(), threading.Lock is not None)'
	assert_equal "$(field .stdout)" "{'k': 1} False False True"
}

@test "snapshots: a session over CODEBOX_SNAPSHOT_MAX_BYTES answers 413 and lives on" {
	session_new
	run_in "$sid" 'big = b"x" * (30 << 20)
small = 7'
	assert_equal "$(field .status)" succeeded
	snapshot "$sid"
	assert_equal "$code" 413
	assert_equal "$(field .error)" snapshot_too_large
	assert_regex "$(field .message)" "25165824 bytes"
	run_in "$sid" 'del big
small'
	assert_equal "$(field .value)" 7
	# files count too
	run_in "$sid" 'open("big.bin", "wb").write(b"y" * (26 << 20))'
	snapshot "$sid"
	assert_equal "$code" 413
	run_in "$sid" 'import os; os.remove("big.bin"); small + 1'
	assert_equal "$(field .value)" 8
	snapshot "$sid"
	assert_equal "$code" 200
	# /isolation tells the bound and whose key signs
	request "$BASE/isolation"
	run -0 jq -e '.sessions.snapshotMaxBytes == 25165824 and .sessions.snapshotKey == "fleet"' <<<"$reply"
}

@test "snapshots: during a running cell a snapshot is 409, and an unknown or ended session's 404" {
	session_new
	sreq POST "/sessions/$sid/execute" '{"code":"import time; time.sleep(20)","background":true}'
	assert_equal "$code" 202
	snapshot "$sid"
	assert_equal "$code" 409
	assert_equal "$(field .error)" session_busy
	sreq POST "/sessions/$sid/interrupt"
	snapshot 0123456789abcdef0123456789abcdef
	assert_equal "$code" 404
	sreq DELETE "/sessions/$sid"
	snapshot "$sid"
	assert_equal "$code" 404
	sreq GET "/sessions/$sid/snapshot"
	assert_equal "$code" 405
}

@test "snapshots: over MCP, \"snapshot\": true with a session returns it as a resource that restores" {
	local r sid1
	r=$(jq -cn '{jsonrpc: "2.0", id: 1, method: "tools/call",
		params: {name: "code_executor", arguments: {code: "z = 6 * 7", session: "new"}}}')
	mcp "$r"
	assert_equal "$code" 200
	sid1=$(field .result.structuredContent.session.id)
	echo "$sid1" >>"$BATS_TEST_TMPDIR/sessions"
	mcp "$(jq -cn --arg s "$sid1" '{jsonrpc: "2.0", id: 2, method: "tools/call",
		params: {name: "code_executor", arguments: {code: "pass", session: $s, snapshot: true}}}')"
	assert_equal "$code" 200
	run -0 jq -e '.result.content[1].type == "resource" and
		(.result.content[1].resource.uri | startswith("codebox://sessions/")) and
		(.result.content[0].text | test("snapshot: [0-9]+ bytes"))' <<<"$reply"
	jq -c '{snapshot: .result.content[1].resource.blob}' <<<"$reply" >"$BATS_TEST_TMPDIR/m.json"
	restore "$BATS_TEST_TMPDIR/m.json"
	assert_equal "$code" 201
	run_in "$sid" 'z'
	assert_equal "$(field .value)" 42
	# tools/list describes it
	mcp '{"jsonrpc":"2.0","id":3,"method":"tools/list"}'
	run -0 jq -e '.result.tools[0].inputSchema.properties.snapshot.description | test("long pause")' <<<"$reply"
}

@test "snapshots: another key's snapshot (a pool with a random key) is refused, and that pool's own restores" {
	local base1=$BASE pid1=$STACK_PID dir1=$STACK_DIR agent1=$AGENT metrics1=$METRICS
	session_new
	run_in "$sid" 'v = "fleet"'
	snapshot "$sid"
	assert_equal "$code" 200
	cp "$BATS_TEST_TMPDIR/snap.json" "$BATS_TEST_TMPDIR/fleet.json"
	sreq DELETE "/sessions/$sid"
	# a second stack without CODEBOX_FLEET_KEY_FILE: a random key of its own
	CODEBOX_FLEET_KEY_FILE="" stack_start
	request "$BASE/isolation"
	assert_equal "$(field .sessions.snapshotKey)" pod
	restore "$BATS_TEST_TMPDIR/fleet.json"
	assert_equal "$code" 422
	assert_equal "$(field .error)" snapshot_rejected
	assert_equal "$(session_count)" 0
	session_new
	run_in "$sid" 'w = 2'
	snapshot "$sid"
	assert_equal "$code" 200
	restore "$BATS_TEST_TMPDIR/snap.json"
	assert_equal "$code" 201
	run_in "$sid" 'w'
	assert_equal "$(field .value)" 2
	stack_stop
	BASE=$base1 STACK_PID=$pid1 STACK_DIR=$dir1 AGENT=$agent1 METRICS=$metrics1
	export BASE STACK_PID STACK_DIR AGENT METRICS
	: >"$BATS_TEST_TMPDIR/sessions"
	# and back on the fleet's stack, the fleet's snapshot restores
	restore "$BATS_TEST_TMPDIR/fleet.json"
	assert_equal "$code" 201
	run_in "$sid" 'v'
	assert_equal "$(field .value)" "'fleet'"
}

@test "snapshots: a malformed CODEBOX_FLEET_KEY_FILE stops the pool with its reason" {
	local short="$BATS_TEST_TMPDIR/short.key" port rd
	echo "too short" >"$short"
	port=$(free_port)
	rd=$(mktemp -d /tmp/codebox-test.XXXXXX)
	CODEBOX_FLEET_KEY_FILE=$short run -1 timeout 120 "$ROOT/scripts/codebox-run.sh" --port "$port" \
		--agent-port "$(free_port)" --metrics-port "$(free_port)" --rundir "$rd" \
		--pool "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --quiet \
		--run-uid-base "$(uid_base_for "$port")" 3>&-
	assert_output --partial "refusing to start: CODEBOX_FLEET_KEY_FILE $short holds 9 bytes"
	rm -rf "$rd"
}
