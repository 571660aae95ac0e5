#!/usr/bin/env bats
# Tenancy (DESIGN.md "The isolation layers", per-user counters): the kernel counts some
# resources per host uid, not per process or cgroup (pipe buffers, queued realtime signals,
# processes, message queues...). Under a root pool every session runs as a host uid of its own,
# which no run and no other session uses while it lives, so that a tenant's session that fills
# those counters degrades nobody else's work; a pool that is not root (one uid) gives each box
# its share of the queued signals, and says which counters its boxes still share. Two bearer
# tokens, A and B, as two tenants.

load helpers/stack
load helpers/sessions

TOKEN_A=codebox-token-A-0123456789abcdef
TOKEN_B=codebox-token-B-0123456789abcdef

setup_file() {
	TOKENS_DIR=$(mktemp -d /tmp/codebox-tokens.XXXXXX)
	chmod 0711 "$TOKENS_DIR"
	export TOKENS_DIR
	umask 0022
	printf '%s\n%s\n' "$TOKEN_A" "$TOKEN_B" >"$TOKENS_DIR/tokens"
	# 4 execution slots: 12 workers, which a few dozen runs in a row all serve
	stack_start --auth-tokens "$TOKENS_DIR/tokens" --conf-dir \
		"$(conf_variant 's/CODEBOX_MAX_CONCURRENT_EXECUTIONS  *20;/CODEBOX_MAX_CONCURRENT_EXECUTIONS  4;/')"
}

teardown_file() {
	stack_stop
	rm -rf "$TOKENS_DIR"
}

# each test's sessions are closed after it, passed or failed
teardown() {
	token_session_teardown
}

# body_of FILE: an execution's body running tests/programs/FILE
body_of() {
	jq -cn --rawfile code "$ROOT/tests/programs/$1" '{code: $code}'
}

# check_unharmed: $reply's stdout (quota-check.py's line) says a default 64 KiB pipe, grown to
# 1 MiB, 8 of 8 realtime signals queued; $host is the host uid it printed
check_unharmed() {
	assert_equal "$code" 200
	local out
	out=$(field .stdout)
	host=${out##* }
	assert_equal "${out% *}" "65536 1048576 8"
}

# host_uids_of PIDS: the real host uids of the processes PIDS (those still alive), one a line
host_uids_of() {
	local p
	for p in "$@"; do
		awk '$1 == "Uid:" { print $2 }' "/proc/$p/status" 2>/dev/null || true
	done | sort -u
}

# maker_uid ID: the host uid of the worker that made session ID (the pool's log names the
# maker's pid; each worker logs its index when it starts)
maker_uid() {
	local pid index first
	pid=$(grep -F "session ${1:0:8}... made" "$STACK_DIR/logs/pool.log" | jq -r .pid)
	index=$(sed -n "s/.*\"pid\":$pid,.*\"msg\":\"worker \([0-9]*\) ready\".*/\1/p" \
		"$STACK_DIR/logs/pool.log" | tail -1)
	first=$(curl -s -H "Authorization: Bearer $TOKEN_A" "$BASE/isolation" | jq .uid.hostFirst)
	[[ $index =~ ^[0-9]+$ && $first =~ ^[0-9]+$ ]]
	echo $((first + index))
}

# session_pids: the processes of this stack's sessions (their cgroups)
session_pids() {
	grep -l ":/codebox-$(pool_pid)/s-run-" /proc/[0-9]*/cgroup 2>/dev/null |
		sed -e 's|/proc/||' -e 's|/cgroup||' || true
}

@test "tenancy: a session that fills its uid's pipe buffers and signal queue degrades no run or session of another tenant" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local a fill uids=" " i maker check
	session_of "$TOKEN_A"
	a=$sid
	fill=$(body_of quota-fill.py)
	as "$TOKEN_A" POST "/sessions/$a/execute" "$fill"
	assert_equal "$code" 200
	# (grown, errno, queued, errno, size): some pipes grown, then EPERM; signals queued until
	# EAGAIN; a new pipe of A's own is then the kernel's 8 KiB minimum
	run -0 jq -r '.value' <<<"$reply"
	assert_regex "$output" '^\([1-9][0-9]*, 1, [1-9][0-9]*, 11, 8192\)$'
	# the worker that made A's session, whose uid was the session's before each session had
	# its own, and so every later run's on that worker
	maker=$(maker_uid "$a")
	# B's runs: 15 one after another (here the worker that answered last takes the next
	# request: the maker first), then waves of 4 at once (the 4 execution slots) so that
	# other workers serve some too: each finds a default pipe grown to 1 MiB, and 8 realtime
	# signals queued
	check=$(body_of quota-check.py)
	for ((i = 0; i < 15; i++)); do
		as "$TOKEN_B" POST /execute "$check"
		check_unharmed
		uids+="$host "
	done
	local k body
	body=$(jq -cn --rawfile code "$ROOT/tests/programs/quota-check.py" \
		'{code: ("import time\ntime.sleep(0.5)\n" + $code)}')
	for ((i = 0; i < 5; i++)); do
		for k in 1 2 3 4; do
			curl -s -o "$BATS_TEST_TMPDIR/wave.$k" -w '%{http_code}' --max-time 60 \
				-H "Authorization: Bearer $TOKEN_B" -H 'Content-Type: application/json' \
				--data-binary "$body" "$BASE/execute" >"$BATS_TEST_TMPDIR/wave.$k.code" 3>&- &
		done
		wait
		for k in 1 2 3 4; do
			code=$(<"$BATS_TEST_TMPDIR/wave.$k.code")
			read_reply "$BATS_TEST_TMPDIR/wave.$k"
			check_unharmed
			uids+="$host "
		done
	done
	[[ $uids == *" $maker "* ]]
	(($(tr ' ' '\n' <<<"$uids" | sort -u | grep -c .) >= 2))
	# and a session of B's
	session_of "$TOKEN_B"
	as "$TOKEN_B" POST "/sessions/$sid/execute" "$(body_of quota-check.py)"
	check_unharmed
	[[ $uids != *" $host "* && $host != "$maker" ]]
	# A's session lives on, holding what it took
	as "$TOKEN_A" POST "/sessions/$a/execute" '{"code":"len(held)"}'
	assert_equal "$code" 200
	run -0 jq -r '.value' <<<"$reply"
	((output > 2))
	as "$TOKEN_A" DELETE "/sessions/$a"
	assert_equal "$code" 204
	answers_42 -H "Authorization: Bearer $TOKEN_B"
	no_run_leftovers
}

@test "tenancy: two sessions and a run have three different host uids, each the only one of its processes" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local s1 s2 u1 u2 ur first last iso
	as "$TOKEN_A" GET /isolation
	iso=$(field .uid)
	first=$(jq .hostFirst <<<"$iso")
	last=$(jq .hostLast <<<"$iso")
	[[ $(jq .rootPool <<<"$iso") == true ]] || skip "the pool is not root: runs and sessions share its uid"
	session_of "$TOKEN_A"
	s1=$sid
	session_of "$TOKEN_B"
	s2=$sid
	as "$TOKEN_A" POST "/sessions/$s1/execute" '{"code":"open(\"/proc/self/uid_map\").read().split()[1]"}'
	u1=$(field .value | tr -d "'")
	as "$TOKEN_B" POST "/sessions/$s2/execute" '{"code":"open(\"/proc/self/uid_map\").read().split()[1]"}'
	u2=$(field .value | tr -d "'")
	as "$TOKEN_B" POST /execute '{"code":"print(open(\"/proc/self/uid_map\").read().split()[1])"}'
	ur=$(field .stdout)
	[[ $u1 =~ ^[0-9]+$ && $u2 =~ ^[0-9]+$ && $ur =~ ^[0-9]+$ ]]
	[[ $u1 != "$u2" && $u1 != "$ur" && $u2 != "$ur" ]]
	# all three in the pool's range, the sessions' in its session range
	((u1 >= first && u1 <= last && u2 >= first && u2 <= last && ur >= first && ur <= last))
	((u1 >= $(jq .sessionsFirst <<<"$iso") && u2 >= $(jq .sessionsFirst <<<"$iso")))
	# seen from the host: the sessions' processes run as exactly those two uids
	# shellcheck disable=SC2046 # one pid a word
	run -0 host_uids_of $(session_pids)
	assert_equal "$output" "$(printf '%s\n' "$u1" "$u2" | sort -u)"
	# /isolation says so
	assert_equal "$(jq .perSession <<<"$iso")" true
	assert_equal "$(jq -c .sharedCounters <<<"$iso")" "[]"
}

@test "tenancy: a pool refuses to start when a process runs under one of its session uids" {
	[[ $EUID -eq 0 ]] || skip "run uids exist only for a root pool"
	local dir base sleeper uid
	dir=$(mktemp -d /tmp/codebox-test.XXXXXX)
	chmod 0711 "$dir"
	mkdir -m 0711 "$dir/runs"
	base=$(uid_base_for "$(free_port)")
	# 2 workers (base, base + 1), the probe (base + 2), port 8888 (base + 3), then 8 sessions
	uid=$((base + 4 + 5))
	setpriv --reuid "$uid" --regid "$uid" --clear-groups sleep 60 3>&- &
	sleeper=$!
	wait_for "the process under the range" 50 pgrep -u "$uid" sleep
	run timeout 30 "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --socket "$dir/s.sock" \
		--runs-dir "$dir/runs" --workers 2 --run-uid-base "$base" --max-sessions 8
	kill "$sleeper"
	wait "$sleeper" || true
	assert_failure 1
	assert_output --partial "already runs as uid $uid"
	assert [ ! -e "$dir/s.sock" ]
	rm -rf "$dir"
}

@test "tenancy: a pool that is not root gives each box its share of its uid's queued signals, and says what its boxes share" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	[[ $EUID -eq 0 ]] || skip "needs root to switch to an unprivileged uid"
	[[ -z ${CODEBOX_BASE:-} ]] || skip "an external stack"
	local a i out queued conf
	# the config where uid 65534 can read it (bats' own directories are root's alone)
	conf="$TOKENS_DIR/conf"
	cp -r "$(conf_variant 's/CODEBOX_MAX_CONCURRENT_EXECUTIONS  *20;/CODEBOX_MAX_CONCURRENT_EXECUTIONS  4;/')" "$conf"
	chmod -R a+rX "$conf"
	STACK_USER=65534 stack_start --auth-tokens "$TOKENS_DIR/tokens" --conf-dir "$conf"
	session_of "$TOKEN_A"
	a=$sid
	as "$TOKEN_A" POST "/sessions/$a/execute" "$(body_of quota-fill.py)"
	assert_equal "$code" 200
	run -0 jq -r '.value' <<<"$reply"
	queued=$(tr -d '()' <<<"$output" | cut -d, -f3 | tr -d ' ')
	((queued > 0))
	# B's runs and session each queue their 8 signals (the pipe buffers stay the uid's: not
	# checked, and said below)
	for ((i = 0; i < 15; i++)); do
		as "$TOKEN_B" POST /execute "$(body_of quota-check.py)"
		assert_equal "$code" 200
		out=$(field .stdout)
		assert_equal "$(cut -d' ' -f3 <<<"$out")" 8
	done
	session_of "$TOKEN_B"
	as "$TOKEN_B" POST "/sessions/$sid/execute" "$(body_of quota-check.py)"
	assert_equal "$(field .stdout | cut -d' ' -f3)" 8
	# A's session lives on
	as "$TOKEN_A" POST "/sessions/$a/execute" '{"code":"len(held)"}'
	assert_equal "$code" 200
	# /isolation: A's session queued exactly its share; what the boxes share is named
	as "$TOKEN_A" GET /isolation
	assert_equal "$(field .uid.rootPool)" false
	assert_equal "$(field .uid.perSession)" false
	assert_equal "$(field .uid.pendingSignalsPerBox)" "$queued"
	assert_equal "$(jq -c .uid.sharedCounters <<<"$reply")" '["pipeBuffers","processes","messageQueues","lockedMemory"]'
	answers_42 -H "Authorization: Bearer $TOKEN_B"
}
