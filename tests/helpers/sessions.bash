# shellcheck shell=bash
# Helpers for the suites of sessions (86-sessions, 87-session-faults): requests to the sessions
# API, the sessions a test made (closed after it), and their processes. Load after
# helpers/stack.

# sreq METHOD PATH [BODY]: a request to the sessions API; sets $code and $reply
sreq() {
	local args=(-X "$1")
	[[ -n ${3:-} ]] && args+=(-H 'Content-Type: application/json' --data-binary "$3")
	request "${args[@]}" "$BASE$2"
}

# session_new [BODY]: makes a session; its id in $sid
# shellcheck disable=SC2154,SC2034 # code is request's (stack.bash); sid is the caller's
session_new() {
	sreq POST /sessions "${1:-}"
	assert_equal "$code" 201
	sid=$(field .id)
	echo "$sid" >>"$BATS_TEST_TMPDIR/sessions"
}

# run_in SID CODE [JQ-EXTRA]: one execution in session SID
run_in() {
	sreq POST "/sessions/$1/execute" "$(jq -cn --arg code "$2" "{code: \$code} + (${3:-{\}})")"
}

# session_procs: the processes of this stack's sessions (their cgroups)
session_procs() {
	grep -l ":/codebox-$(pool_pid)/s-run-" /proc/[0-9]*/cgroup 2>/dev/null |
		sed -e 's|/proc/||' -e 's|/cgroup||' || true
}

no_session_procs() {
	[[ -z $(session_procs) ]]
}

# session_teardown: a suite's teardown. Each test's sessions are closed after it, passed or
# failed, so that one failure does not leave the next tests a full pod; then stack_teardown.
session_teardown() {
	local s
	if [[ -n ${STACK_PID:-} && -f $BATS_TEST_TMPDIR/sessions ]]; then
		while read -r s; do
			curl -s -o /dev/null --max-time 10 -X DELETE "$BASE/sessions/$s" || true
		done <"$BATS_TEST_TMPDIR/sessions"
	fi
	stack_teardown
}

# Sessions of bearer tokens (87-tenancy, 89-session-files): each line of the test's sessions
# file is "TOKEN ID".

# as TOKEN METHOD PATH [BODY]: a JSON request with TOKEN's bearer; sets $code and $reply
as() {
	local args=(-H "Authorization: Bearer $1" -X "$2")
	[[ -n ${4:-} ]] && args+=(-H 'Content-Type: application/json' --data-binary "$4")
	request "${args[@]}" "$BASE$3"
}

# session_of TOKEN: a new session of TOKEN's; its id in $sid
# shellcheck disable=SC2154,SC2034 # code is request's (stack.bash); sid is the caller's
session_of() {
	as "$1" POST /sessions
	assert_equal "$code" 201
	sid=$(field .id)
	echo "$1 $sid" >>"$BATS_TEST_TMPDIR/sessions"
}

# token_session_teardown: session_teardown for sessions made with session_of
token_session_teardown() {
	local line
	if [[ -n ${STACK_PID:-} && -f $BATS_TEST_TMPDIR/sessions ]]; then
		while read -r line; do
			curl -s -o /dev/null --max-time 10 -X DELETE \
				-H "Authorization: Bearer ${line%% *}" "$BASE/sessions/${line#* }" || true
		done <"$BATS_TEST_TMPDIR/sessions"
	fi
	stack_teardown
}
