#!/usr/bin/env bats
# Sessions under faults (API.md "Sessions", OPERATIONS.md "When something dies"): background
# executions leave no zombie; a stream of one ends with an event as soon as its execution
# cannot answer (its watcher killed, its session deleted, the pool stopping); an init killed
# mid-cell is answered as /execute answers it; a crashed pool's sessions end with it, and the
# next start on its port sweeps what it left. Warm only (sessions need warm interpreters).

load helpers/stack
load helpers/sessions

setup_file() {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || return 0
	stack_start
}

teardown_file() {
	stack_stop
}

teardown() {
	session_teardown
}

# pool_zombies: the zombies among the pool's descendants, one pid a line
pool_zombies() {
	ps -e -o pid=,ppid=,stat= | awk -v pool="$(pool_pid)" '
		{ parent[$1] = $2; state[$1] = $3 }
		END {
			for (p in state) {
				if (state[p] !~ /^Z/)
					continue
				for (q = parent[p]; q > 1 && q != pool; q = parent[q])
					;
				if (q == pool)
					print p
			}
		}'
}

no_pool_zombies() {
	[[ -z $(pool_zombies) ]]
}

# done_in SID EID: the background execution EID of session SID has its answer
done_in() {
	[[ $(curl -s --max-time 10 "$BASE/sessions/$1/executions/$2" | jq -r .state) == "done" ]]
}

# background_in SID CODE: starts CODE as a background execution of SID; its id in $eid
background_in() {
	run_in "$1" "$2" '{background: true, timeoutSeconds: 600}'
	assert_equal "$code" 202
	eid=$(field .execution)
}

# stream_from SID EID: streams the execution into $BATS_TEST_TMPDIR/sse (bounded: 60 s, its
# curl's status appended as "curl: N"), as a job of this shell whose pid is $stream; returns
# once the stream has its first event
stream_from() {
	{
		curl -sN --max-time 60 -H 'Accept: text/event-stream' "$BASE/sessions/$1/executions/$2"
		echo "curl: $?"
	} >"$BATS_TEST_TMPDIR/sse" 3>&- &
	stream=$!
	wait_for "the stream's first event" 100 grep -q '^event: ' "$BATS_TEST_TMPDIR/sse"
}

# stream_ended: the job stream_from started has ended
stream_ended() {
	! kill -0 "$stream" 2>/dev/null
}

# last_event: the stream's last event and its data, "EVENT DATA"
last_event() {
	local ev
	ev=$(grep '^event: ' "$BATS_TEST_TMPDIR/sse" | tail -1)
	echo "${ev#event: } $(grep '^data: ' "$BATS_TEST_TMPDIR/sse" | tail -1 | cut -c7-)"
}

# watcher_of SID: the process that holds session SID's record open (its background
# execution's watcher, a copy of a worker)
watcher_of() {
	local p
	for p in $(pgrep -f -- "--runs-dir $(stack_runs_inside)" || true); do
		if find "/proc/$p/fd" -lname "*/sessions/$1.rec" 2>/dev/null | grep -q .; then
			echo "$p"
		fi
	done
}

# not_busy SID: the session takes an execution again
not_busy() {
	[[ $(curl -s --max-time 10 -X POST -d '{"code":"1"}' "$BASE/sessions/$1/execute" | jq -r .error) != session_busy ]]
}

@test "session faults: background executions leave no zombie behind" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local a b i
	session_new
	a=$sid
	session_new
	b=$sid
	for i in 1 2 3; do
		for sid in "$a" "$b"; do
			background_in "$sid" "print($i)"
			wait_for "the execution's answer" 100 done_in "$sid" "$eid"
		done
	done
	# a watcher that ended is reaped at once (not one zombie each, kept by its worker)
	wait_for "no zombie under the pool" 50 no_pool_zombies || {
		ps -o pid,ppid,stat,args -p "$(pool_zombies | paste -sd,)" >&2
		return 1
	}
	run_in "$a" '6 * 7'
	assert_equal "$(field .value)" 42
	answers_42
}

@test "session faults: a stream whose watcher is killed ends at once with event: error, and a poll says lost" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local watcher
	session_new
	run_in "$sid" 'n = 1'
	background_in "$sid" 'import time
print("started", flush=True)
time.sleep(300)'
	stream_from "$sid" "$eid"
	watcher=$(watcher_of "$sid")
	[[ -n $watcher ]]
	kill -KILL "$watcher"
	# at once: not keep-alives until the stream's 10 minutes are up
	wait_for "the stream to end" 50 stream_ended
	run -0 last_event
	assert_output 'error {"error":"execution_lost","message":"the execution'"'"'s watcher ended without an answer"}'
	run -0 grep -c '^curl: 0$' "$BATS_TEST_TMPDIR/sse"
	sreq GET "/sessions/$sid/executions/$eid"
	assert_equal "$code" 200
	assert_equal "$(field .state)" lost
	assert_equal "$(field .stdout)" started
	# the session lives on (its cell was interrupted when the watcher hung up); so does the pool
	wait_for "the session to take an execution" 100 not_busy "$sid"
	run_in "$sid" 'n'
	assert_equal "$(field .value)" 1
	answers_42
}

@test "session faults: a stream whose session is deleted ends at once, with the answer or event: error" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	session_new
	background_in "$sid" 'import time
print("started", flush=True)
time.sleep(300)'
	stream_from "$sid" "$eid"
	sreq DELETE "/sessions/$sid"
	assert_equal "$code" 204
	wait_for "the stream to end" 50 stream_ended
	run -0 grep -c '^curl: 0$' "$BATS_TEST_TMPDIR/sse"
	# the watcher's answer if the stream saw it before the session's files went, else the
	# session's 404 as an event
	run -0 last_event
	if [[ $output == outcome* ]]; then
		reply=${output#outcome }
		assert_equal "$(field .state)" done
		# the execution's answer with the session closed, or none: the session went while
		# the cell ran (the watcher's error says so)
		if [[ $(field .outcome) == null ]]; then
			[[ $(field .error) == *session* ]]
		else
			assert_equal "$(field .outcome.session.open)" false
		fi
	else
		assert_equal "$(jq -r .error <<<"${output#error }")" not_found
	fi
	sreq GET "/sessions/$sid/executions/$eid"
	assert_equal "$code" 404
	wait_for "the session's processes to go" 100 no_session_procs
	answers_42
}

@test "session faults: a session's init killed mid-cell answers 503 sandbox_unavailable, as /execute's does" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	run -0 curl -s "$BASE/isolation"
	[[ $(jq -r .layers.pidns <<<"$output") == true ]] || skip "no pid namespace"
	local p init="" job
	# this test's session alone: its init is the one codebox-init of the stack's sessions
	wait_for "the other tests' sessions to go" 100 no_session_procs
	session_new
	curl -s --max-time 60 -o "$BATS_TEST_TMPDIR/cell" -w '%{http_code}' -X POST \
		-d '{"code":"import time\ntime.sleep(60)"}' "$BASE/sessions/$sid/execute" \
		>"$BATS_TEST_TMPDIR/cell_code" 3>&- &
	job=$!
	wait_for "the cell to run" 100 bash -c "curl -s $BASE/sessions/$sid | grep -q '\"busy\"'"
	for p in $(session_procs); do
		[[ $(cat "/proc/$p/comm" 2>/dev/null) == codebox-init ]] && init=$p
	done
	[[ -n $init ]]
	kill -KILL "$init"
	wait "$job"
	code=$(cat "$BATS_TEST_TMPDIR/cell_code")
	read_reply "$BATS_TEST_TMPDIR/cell"
	# not the 404 of a session that never was: the client learns its cell may have run
	assert_equal "$code" 503
	assert_equal "$(field .error)" sandbox_unavailable
	assert_regex "$(field .message)" "killed from outside while the execution ran; the session has ended"
	sreq GET "/sessions/$sid"
	assert_equal "$code" 404
	wait_for "the session's processes to go" 100 no_session_procs
	session_new
	run_in "$sid" '6 * 7'
	assert_equal "$(field .value)" 42
}

# stops the file's stack
@test "session faults: the pool's stop ends a stream at once with event: error, and does not wait its drain" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	local t0 ms
	session_new
	background_in "$sid" 'import time
print("started", flush=True)
time.sleep(300)'
	stream_from "$sid" "$eid"
	t0=$EPOCHREALTIME
	kill -TERM "$STACK_PID"
	wait_for "the stream to end" 50 stream_ended
	run -0 last_event
	assert_output 'error {"error":"sandbox_unavailable","message":"the service is stopping, and its sessions end with it; retry shortly"}'
	# the stack was started by setup_file, not by this shell: watch it go. The drain is 46 s:
	# a stop that waited for the stream's worker would take all of it
	wait_for "the stack to stop" 600 marker_gone "$STACK_DIR"
	ms=$(((${EPOCHREALTIME/./} - ${t0/./}) / 1000))
	echo "the stack stopped in $ms ms"
	((ms < 30000))
	STACK_PID=""
}

# uid_procs BASE: the processes running as a uid of the range from BASE (a stack's, 256 uids),
# live ones (a zombie runs nothing), one "pid uid comm" a line
uid_procs() {
	ps -e -o pid=,uid=,stat=,comm= | awk -v b="$1" '$2 >= b && $2 < b + 256 && $3 !~ /^Z/ { print $1, $2, $4 }'
}

# dead PID: no such process, or a zombie
dead() {
	local state
	state=$(ps -o stat= -p "$1" 2>/dev/null) || return 0
	[[ -z $state || $state == Z* ]]
}

no_uid_procs() {
	[[ -z $(uid_procs "$1") ]]
}

# stack_exited: the stack's codebox-run.sh (a job of this shell) has exited
stack_exited() {
	! kill -0 "$STACK_PID" 2>/dev/null
}

# dead_pool_groups POOL: the cgroups the pool whose pid was POOL left
dead_pool_groups() {
	find /sys/fs/cgroup/memory /sys/fs/cgroup/pids /sys/fs/cgroup/cpu /sys/fs/cgroup/unified \
		-maxdepth 6 -type d -name "codebox-$1" 2>/dev/null || true
}

# crashed_stack_start: a stack of this test's own with two sessions, one running a background
# execution; sets pool, ports (STACK_PORTS' form), base (its run uids) and first (its dir)
crashed_stack_start() {
	stack_start
	pool=$(pool_pid)
	ports="${BASE##*:} ${AGENT##*:} ${METRICS##*:}"
	base=$(uid_base_for "${BASE##*:}")
	first=$STACK_DIR
	session_new
	run_in "$sid" 'kept = 1'
	session_new
	background_in "$sid" 'import time; time.sleep(300)'
	[[ -n $(uid_procs "$base") ]]
}

# the stack again on the crashed one's ports (so its run uids): it serves, sessions too, and
# nothing of the dead pool is left
restart_on_same_ports() {
	local rundir=$1 dead=$2
	STACK_PORTS=$ports stack_start
	rm -rf "$rundir"
	answers_42
	session_new
	run_in "$sid" '6 * 7'
	assert_equal "$(field .value)" 42
	run dead_pool_groups "$dead"
	assert_output ""
}

@test "session faults: a crashed pool's sessions end with it, codebox-run exits, and the next start on its port serves" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	[[ -z ${CODEBOX_BASE:-} && $EUID == 0 ]] || skip "a root pool's run uids (its own stack)"
	local pool ports base first t0 ms
	crashed_stack_start
	t0=$EPOCHREALTIME
	kill -KILL "$pool"
	# its workers (their parent-death signal) end its sessions; its watchers die with it
	wait_for "no process of the stack's run uids" 150 no_uid_procs "$base" || {
		uid_procs "$base" >&2
		return 1
	}
	# codebox-run.sh waits for the pool's processes, then exits 1: not for the drain
	wait_for "codebox-run to exit" 600 stack_exited
	ms=$(((${EPOCHREALTIME/./} - ${t0/./}) / 1000))
	echo "codebox-run exited ${ms} ms after the pool's SIGKILL"
	((ms < 30000))
	run -0 grep -c "the pool died; ending its sessions" "$first/logs/pool.log"
	restart_on_same_ports "$first" "$pool"
}

@test "session faults: a pool killed with its workers leaves its sessions to the next start, which kills them" {
	[[ ${CODEBOX_WARM:-1} == 1 ]] || skip "sessions are warm only"
	[[ -z ${CODEBOX_BASE:-} && $EUID == 0 ]] || skip "a root pool's run uids (its own stack)"
	[[ -w /sys/fs/cgroup/memory ]] || skip "no writable v1 cgroups: the sweep finds a dead pool's processes there"
	local pool ports base first left all g
	crashed_stack_start
	# every process of the pool's at once (stopped first, so that none acts on another's
	# death): its sessions' inits and programs are left, as after an OOM kill of the pool
	all=$(pgrep -f -- "--runs-dir $first/runs")
	# shellcheck disable=SC2086
	kill -STOP $all
	# shellcheck disable=SC2086
	kill -KILL $all
	wait_for "codebox-run to exit" 600 stack_exited
	# what the dead pool left: its sessions' inits and programs, in its cgroups. Any pool that
	# starts on this host sweeps a dead pool's groups (cgroup.c): where other stacks run at
	# once (make test's lanes), one of them may get there first, so the sweep's log line is
	# this restart's only when something of the dead pool is still alive when it starts
	left=$(uid_procs "$base")
	no_dead_groups() { [[ -z $(dead_pool_groups "$pool") ]]; }
	[[ -n $left ]] || wait_for "another pool's sweep to remove the dead pool's groups" 100 no_dead_groups
	restart_on_same_ports "$first" "$pool"
	if ! grep -q "killing the processes of .*, left by a pool that died (pid $pool)" "$STACK_DIR/logs/pool.log"; then
		if [[ -n $left ]] && kill -0 "$pool" 2>/dev/null; then
			# the dead pool's pid is another process's now (pids wrap at pid_max on a busy
			# host): no start can tell that pool died, and its sessions' processes are left to
			# their own bounds. A known limit (the sweep asks kill(pid, 0)): end them here
			# shellcheck disable=SC2046
			kill -KILL $(uid_procs "$base" | cut -d' ' -f1) 2>/dev/null || true
			wait_for "the dead pool's processes to end" 100 no_uid_procs "$base" || true
			for g in $(dead_pool_groups "$pool"); do
				find "$g" -depth -type d -exec rmdir {} + 2>/dev/null || true
			done
			skip "the dead pool's pid $pool was taken by another process: its groups are not swept"
		fi
		# swept by another pool's start: then nothing of the dead pool is left for this one
		# once that sweep's kills have landed
		wait_for "another pool's sweep to end the dead pool's processes" 100 no_uid_procs "$base" || {
			uid_procs "$base" >&2
			return 1
		}
		echo "# the dead pool's groups were swept by another pool's start" >&3
	fi
	local p
	# killed: gone, or a zombie until its new parent (this host's pid 1) reaps it
	for p in $(cut -d' ' -f1 <<<"$left"); do
		dead "$p" || fail "process $p of the dead pool's sessions is alive: $(ps -o pid=,stat=,args= -p "$p")"
	done
}
