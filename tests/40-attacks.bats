#!/usr/bin/env bats
# Attacks: each program tries an escape; each test checks that the attack failed, that the
# service is healthy afterwards, and that nothing of the run remains (processes, directories,
# cgroups, mounts).

load helpers/stack

# a prefix that has matplotlib draw first (the heavy tier's, with its fonts and hook at work)
draw=$'import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.savefig("/tmp/drawn.png"); plt.close("all")\n'

setup_file() {
	# the default modules preloaded, as in production: the template these suites test
	export STACK_FULL_PRELOAD=1
	export CODEBOX_TEST_SECRET="codebox-secret-$RANDOM$RANDOM"
	stack_start
}

teardown_file() {
	stack_stop
}

# attack NAME [JQ-EXTRA]: runs tests/programs/attacks/NAME
attack() {
	execute "$(cat "$ROOT/tests/programs/attacks/$1")" "${2:-}"
	assert_equal "$code" 200
}

# bg_execute CODE [JQ-EXTRA]: posts CODE in the background; the reply lands in
# $BATS_TEST_TMPDIR/bg.json once $BG_PID ends.
bg_execute() {
	jq -cn --arg code "$1" "{code: \$code} + (${2:-{\}})" >"$BATS_TEST_TMPDIR/bg.req"
	curl -s --max-time 60 -H 'Content-Type: application/json' \
		--data-binary @"$BATS_TEST_TMPDIR/bg.req" "$BASE/execute" >"$BATS_TEST_TMPDIR/bg.json" 3>&- &
	BG_PID=$!
}

# held_pid: the host pid of a run's program that wrote "held" into its directory (seen by
# root through /proc/<pid>/cwd) and descends from this stack's pool, not its init; fails
# while there is none. Of several (a test that failed may have left its run holding until its
# time limit), the newest. Without a fork per process: on a loaded machine each costs tens of
# ms, and a run holds only until its time limit.
held_pid() {
	local pool d p cur k v depth stat start newest="" newest_start=-1
	pool=$(pool_pid)
	[[ -n $pool ]] || return 1
	for d in /proc/[0-9]*; do
		[[ -e $d/cwd/held ]] || continue
		# not the run's init, whose directory is the same (a signal to it is ignored)
		read -r k <"$d/comm" 2>/dev/null || continue
		[[ $k != codebox-init ]] || continue
		p=${d#/proc/}
		cur=$p
		for ((depth = 0; depth < 8; depth++)); do
			v=""
			while read -r k v; do
				[[ $k == PPid: ]] && break
				v=""
			done <"/proc/$cur/status" 2>/dev/null || break
			[[ -n $v && $v != 0 ]] || break
			if [[ $v == "$pool" ]]; then
				# its start time: the 22nd field of stat, the 20th after the command's ")"
				read -r stat <"$d/stat" 2>/dev/null || break
				read -ra stat <<<"${stat##*) }"
				start=${stat[19]:-0}
				if ((start > newest_start)); then
					newest=$p newest_start=$start
				fi
				break
			fi
			cur=$v
		done
	done
	[[ -n $newest ]] || return 1
	echo "$newest"
}

# wait_held WHAT: waits (30 s at most) for held_pid, and sets pid (the caller's local) to it
wait_held() {
	local i
	for ((i = 0; i < 300; i++)); do
		pid=$(held_pid) && return 0
		sleep 0.1
	done
	echo "timed out waiting for $1" >&2
	return 1
}

# release PID: lets the held run finish (SIGUSR1), and waits for its reply.
release() {
	kill -USR1 "$1"
	answered
}

# hand_in PID NAME: stdin becomes the file NAME in the directory of the held run PID, written
# as the directory's owner (root has no uid in the run's file system: EOVERFLOW).
hand_in() {
	"$PY" -c 'import os, sys
data = sys.stdin.buffer.read()
d = os.open("/proc/%s/cwd" % sys.argv[1], os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
st = os.fstat(d)
os.setgroups([])
os.setresgid(st.st_gid, st.st_gid, st.st_gid)
os.setresuid(st.st_uid, st.st_uid, st.st_uid)
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644, dir_fd=d)
os.write(fd, data)
os.close(fd)' "$1" "$2"
}

# held_or_answered: the background run holds (held_pid) or has its reply.
held_or_answered() {
	held_pid >/dev/null || ! kill -0 "$BG_PID" 2>/dev/null
}

# answered: waits for the background run's reply into $reply.
answered() {
	wait "$BG_PID"
	read_reply "$BATS_TEST_TMPDIR/bg.json"
}

# succeeded: the reply's status is succeeded, or the reply is shown (a held run that nobody
# released in time ends as "timeout", one that failed says why in its stderr)
succeeded() {
	[[ $(field .status) == succeeded ]] || {
		echo "the run did not succeed: $reply" >&2
		return 1
	}
}

# healthy_and_clean: the service answers, runs work, and no run left anything behind.
healthy_and_clean() {
	run -0 curl -s -o /dev/null -w '%{http_code}' "$BASE/readyz"
	assert_output 200
	local saved=$reply
	execute 'print(6 * 7)'
	assert_equal "$(field .stdout)" 42
	reply=$saved
	run grep -c -e codebox-work -e codebox-root /proc/self/mountinfo
	assert_output 0
	no_run_leftovers
}

@test "attacks: a fork bomb is capped by the process limit and ends with the run" {
	attack fork-bomb.py '{timeoutSeconds: 3, details: true}'
	assert [ "$(field .status)" != succeeded ]
	run -0 jq -e '.details.limitExceeded == "processes" or .details.limitExceeded == "time"' <<<"$reply"
	healthy_and_clean
}

@test "attacks: a thread bomb is refused a thread past the process limit" {
	attack thread-bomb.py '{details: true}'
	assert_equal "$(field .status)" failed
	run -0 field .stdout
	assert_output --partial "can't start new thread"
	# refused at the process cap, which the run's init and main thread count against too
	local n iso
	n=$(field '.stdout | capture("refused after (?<n>[0-9]+) threads").n')
	iso=$(curl -s "$BASE/isolation")
	((n >= $(jq .limits.maxProcesses <<<"$iso") - 4 && n < $(jq .limits.maxProcesses <<<"$iso")))
	# a pids cgroup records the refusal; RLIMIT_NPROC (a pod's read-only cgroups) leaves no
	# record to attribute it by
	if [[ $(jq -r .details.processLimit <<<"$iso") == rlimit-nproc ]]; then
		run -0 jq -e '.details.limitExceeded == "processes" or .details.limitExceeded == null' <<<"$reply"
	else
		assert_equal "$(field .details.limitExceeded)" processes
	fi
	healthy_and_clean
}

@test "attacks: a memory bomb is stopped at memoryBytes" {
	attack memory-bomb.py '{details: true}'
	assert_equal "$(field .status)" failed
	# an OOM kill under a cgroup, a MemoryError under RLIMIT_AS
	run -0 jq -e '(.exitCode == -9 and .details.limitExceeded == "memory") or
		(.stderr | contains("MemoryError"))' <<<"$reply"
	healthy_and_clean
}

@test "attacks: filling the disk stops at diskBytes" {
	attack disk-fill.py '{details: true}'
	assert_equal "$(field .status)" failed
	run -0 field .stderr
	assert_output --regexp "No space left on device|File too large"
	assert_equal "$(field .details.limitExceeded)" disk
	healthy_and_clean
}

@test "attacks: empty files stop at the run's file bound, and the inodes are freed with the run" {
	local iso inodes
	iso=$(curl -s "$BASE/isolation")
	[[ $(jq -r .details.diskLimit <<<"$iso") == tmpfs ]] || skip "no mount namespace: the disk is bounded by rlimit-fsize alone"
	# one file per 8 KiB of diskBytes
	inodes=$(jq -r '.details.diskInodes // (.limits.diskBytes / 8192)' <<<"$iso")
	attack inode-fill.py
	assert_equal "$(field '.stdout | fromjson | .error')" ENOSPC
	# the directory itself, main.py, tmp, var-tmp and shm take a few
	(($(field '.stdout | fromjson | .files') <= inodes && $(field '.stdout | fromjson | .files') > inodes - 16))
	healthy_and_clean
}

@test "attacks: descriptor exhaustion stops at the rlimit" {
	attack fd-exhaustion.py
	assert_equal "$(field .status)" succeeded
	local count
	count=$(field '.stdout | split(" ")[0]')
	((count > 100 && count <= 1024))
	assert_equal "$(field '.stdout | split(" ")[1] | rtrimstr("\n")')" 24 # EMFILE
	healthy_and_clean
}

@test "attacks: an output flood is truncated and the run still ends" {
	execute $'import sys\nwhile True:\n    sys.stdout.write("y" * 65536)' '{timeoutSeconds: 2, details: true}'
	run -0 jq -e '.status == "timed_out" and .truncated == true and (.stdout|length) == 65536 and
		.details.stdoutBytes > 1000000' <<<"$reply"
	healthy_and_clean
}

@test "attacks: while True with SIGTERM ignored is killed at the deadline" {
	execute $'import signal\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True:\n    pass' \
		'{timeoutSeconds: 1}'
	assert_equal "$(field .status)" timed_out
	healthy_and_clean
}

@test "attacks: /proc shows no other process, no secret, no other run's cwd" {
	attack proc-snoop.py "{stdin: \"$CODEBOX_TEST_SECRET\"}"
	assert_equal "$(field .status)" succeeded
	local seen
	seen=$(field '.stdout | fromjson')
	run -0 jq -e '.found_secret == false' <<<"$seen"
	# nothing of the service is visible: no pool, no worker, no nginx
	run -0 jq -r '.seen | to_entries[] | .value.cmdline // empty' <<<"$seen"
	refute_output --partial codebox-pool
	refute_output --partial nginx
	healthy_and_clean
}

@test "attacks: no run maps a page it shares with the pool: admission, metrics and the audit trail are out of reach" {
	local prefix i restarts pid
	# both tiers when warm (a program naming scipy takes the heavy template)
	for prefix in "" $'# scipy\n' "$draw"; do
		bg_execute "$prefix$(cat "$ROOT/tests/programs/attacks/shared-pages.py")"
		wait_for "the run to hold or answer" 300 held_or_answered
		if pid=$(held_pid); then
			# no /proc in the sandbox: its maps, read from outside
			hand_in "$pid" maps <"/proc/$pid/maps"
			release "$pid"
		else
			answered
		fi
		succeeded
		# only the C library's read-only views of system files (gconv's cache)
		jq -e 'all(.perms == "r--s" and (.path | startswith("/usr/")))' <<<"$(field .stdout)"
	done
	# had it written into the pool's pages, admission would hang, the counters lie and the
	# slots be cleared: everything still works, and counts what it should
	for i in 1 2 3; do
		execute 'print(6 * 7)'
		assert_equal "$(field .stdout)" 42
	done
	run -0 curl -s "$METRICS/metrics"
	restarts=$(awk '/^codebox_worker_restarts_total/ { print $2 }' <<<"$output")
	[[ -n $restarts ]] && ((restarts < 100))
	healthy_and_clean
}

@test "attacks: a run shares no layout and no AT_RANDOM with the processes that read client input" {
	local guards prefix nginx pid mine
	nginx=$(stack_nginx_pid)
	# the pool's supervisor, every worker, nginx's master and workers
	# shellcheck disable=SC2046
	guards=$("$PY" "$ROOT/tests/programs/layout.py" "$(pool_pid)" $(worker_pids) "$nginx" $(pgrep -P "$nginx"))
	jq -e 'length > 4 and all(.random != null)' <<<"$guards"
	for prefix in "" $'# scipy\n' "$draw"; do
		bg_execute "$prefix$(cat "$ROOT/tests/programs/layout.py")"
		wait_for "the run to hold or answer" 300 held_or_answered
		if pid=$(held_pid); then
			# no /proc in the sandbox: the run's layout, read from outside
			mine=$("$PY" "$ROOT/tests/programs/layout.py" "$pid")
			release "$pid"
		else
			answered
			mine=$(field .stdout)
		fi
		succeeded
		jq -e 'length == 1 and .[0].random != null and .[0].libc != null' <<<"$mine"
		jq -e --argjson g "$guards" '.[0] as $r | [$g[] | select(.random == $r.random
			or (.libc != null and .libc == $r.libc) or (.heap != null and .heap == $r.heap)
			or (.libpython != null and .libpython == $r.libpython)
			or (.exe != null and .exe == $r.exe))] | length == 0' <<<"$mine" || {
			echo "the run: $mine" >&2
			echo "the guards: $guards" >&2
			return 1
		}
	done
	healthy_and_clean
}

@test "attacks: no byte of the runtime directory's path is in a run's readable memory, on either tier" {
	[[ -n ${STACK_DIR:-} ]] || skip "an external stack: its runtime directory is not this shell's"
	run -0 curl -s "$BASE/isolation"
	[[ $(jq -r .details.privateProc <<<"$output") == true ]] || skip "no /proc of its own in a run here"
	local half=$((${#STACK_DIR} / 2)) prefix
	# (warm in the warm pass, cold in the cold one; a program naming scipy takes the heavy tier)
	for prefix in "" $'# scipy\n' "$draw"; do
		execute "$prefix$(cat "$ROOT/tests/programs/memory-scan.py")" \
			"$(jq -cn --arg a "${STACK_DIR:0:half}" --arg b "${STACK_DIR:half}" '{stdin: ($a + "\n" + $b)}')"
		assert_equal "$(field .status)" succeeded
		run -0 jq -e '.found == 0 and .scanned_mb > 5' <<<"$(field .stdout)"
	done
	healthy_and_clean
}

@test "attacks: signalling the worker, the pool, nginx or init fails and they live on" {
	local pool worker nginx
	pool=$(pool_pid)
	worker=$(worker_pids | head -1)
	nginx=$(stack_nginx_pid)
	attack signal-others.py "{stdin: \"$pool $worker $nginx\"}"
	run -0 jq -e '.stdout | fromjson | to_entries | all(.value != "sent")' <<<"$reply"
	kill -0 "$pool" "$worker" "$nginx"
	healthy_and_clean
}

@test "attacks: ptrace, process_vm_readv and the kernel's risky calls fail with EPERM" {
	attack ptrace.py
	assert_equal "$(field .status)" succeeded
	run -0 jq -e '.stdout | fromjson | to_entries | all(.value == "Operation not permitted")' <<<"$reply"
	healthy_and_clean
}

@test "attacks: nginx's port, the FastCGI socket and abstract sockets are unreachable" {
	local port=${BASE##*:} listener
	# in the stack's network namespace (a pod's own, under make image-test)
	${CODEBOX_NETNS:+nsenter --net="$CODEBOX_NETNS"} "$PY" -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind("\0codebox-test-abstract"); s.listen(1)
sys.stdout.write("listening\n"); sys.stdout.flush(); time.sleep(30)' >"$BATS_TEST_TMPDIR/listener" 3>&- &
	listener=$!
	wait_for "the abstract listener" 50 grep -q listening "$BATS_TEST_TMPDIR/listener"
	attack network.py "{stdin: \"$port $(stack_socket)\"}"
	kill "$listener"
	wait "$listener" || true
	assert_equal "$(field .status)" succeeded
	run -0 jq -e '.stdout | fromjson | to_entries | all(.value != "connected")' <<<"$reply"
	healthy_and_clean
}

@test "attacks: writing outside the working directory fails everywhere" {
	local m="codebox-attack-$RANDOM$RANDOM" other
	other=$(find "$(stack_runs)" -maxdepth 1 -name 'w*' | head -1)
	other=$(stack_runs_inside)${other#"$(stack_runs)"}
	attack write-outside.py "{stdin: \"$m $other\"}"
	assert_equal "$(field .status)" succeeded
	# /tmp and /dev/shm are the run's own (private, in its disk budget): the find below shows
	# that nothing reached the host's
	run -0 jq -e '.stdout | fromjson | to_entries |
		map(select(.key | (startswith("/tmp/") or startswith("/dev/shm/")) | not)) |
		all(.value != "written")' <<<"$reply"
	# on the host: none of the paths it tried (its directory's parent is its worker's), and
	# nowhere in the directories anyone may write
	local host_other
	host_other=$(find "$(stack_runs)" -maxdepth 1 -name 'w*' | head -1)
	for p in "/tmp/$m" "/etc/$m" "/usr/$m" "/$m" "/dev/shm/$m" "/var/tmp/$m" "$host_other/$m"; do
		[[ ! -e $p ]] || {
			echo "$p exists on the host" >&2
			return 1
		}
	done
	# (other tests' directories come and go while find walks: its complaints are no finding)
	local found
	found=$(find /tmp /var/tmp /dev/shm "$(stack_runs)" -name "$m" 2>/dev/null || true)
	assert_equal "$found" ""
	healthy_and_clean
}

@test "attacks: the capabilities sentences claim only what holds here" {
	run -0 curl -s "$BASE/capabilities"
	reply=$output
	run -0 curl -s "$BASE/isolation"
	if jq -e '.layers.mountns or .layers.landlock' <<<"$output" >/dev/null; then
		assert_equal "$(field .persistence)" "Every execution starts a fresh interpreter in a fresh, empty working directory; no files, variables or imports survive between executions."
	else
		[[ $(field .persistence) == *"files written outside the working directory may"* ]]
	fi
}

# ---- round 2: host-wide tables, what a run can learn, what programs need (issue 8) ----

# bg_attack NAME [JQ-EXTRA]: posts tests/programs/attacks/NAME in the background; the reply
# lands in $BATS_TEST_TMPDIR/bg.json once $BG_PID ends.
bg_attack() {
	bg_execute "$(cat "$ROOT/tests/programs/attacks/$1")" "${2:-}"
}

# hold_host_quotas: (root only: the test looks at the host side meanwhile) runs
# attacks/host-quotas.py in the background until it holds all it could take; sets pid (the
# caller's local) to its program's pid, for release.
hold_host_quotas() {
	[[ $EUID -eq 0 ]] || skip "the host-side check needs root"
	bg_attack host-quotas.py
	wait_held "the run to hold what it took"
}

@test "attacks: a run cannot take the host's AIO contexts; root can still io_setup meanwhile" {
	local pid
	hold_host_quotas
	# the host side, while the run holds everything it could get
	run -0 "$PY" -c 'import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
ctx = ctypes.c_ulong(0)
if libc.syscall(206, 4096, ctypes.byref(ctx)) != 0:
    raise SystemExit("io_setup(4096) failed on the host: " + os.strerror(ctypes.get_errno()))
libc.syscall(207, ctx)
print("io_setup ok")'
	release "$pid"
	run -0 jq -e '.stdout | fromjson | .aio_contexts == 0 and .io_setup == "Operation not permitted"' <<<"$reply"
	healthy_and_clean
}

@test "attacks: inotify, fanotify and dnotify are refused: no root quota used, no other run watched" {
	local pid
	hold_host_quotas
	# root's own per-user inotify quota is untouched
	run -0 "$PY" -c 'import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.syscall(294, 0)
if fd < 0:
    raise SystemExit("inotify_init1 failed for root: " + os.strerror(ctypes.get_errno()))
if libc.inotify_add_watch(fd, b"/usr", 0xFFF) < 0:
    raise SystemExit("inotify_add_watch failed for root: " + os.strerror(ctypes.get_errno()))
print("inotify ok")'
	# the run's user namespace belongs to its own host uid, not to root (NS_GET_OWNER_UID)
	run -0 "$PY" -c 'import fcntl, os, struct, sys
fd = os.open("/proc/%s/ns/user" % sys.argv[1], os.O_RDONLY)
uid = bytearray(4)
fcntl.ioctl(fd, 0xB704, uid)
print(struct.unpack("I", uid)[0])' "$pid"
	local owner=$output
	run -0 curl -s "$BASE/isolation"
	((owner >= $(jq .uid.hostFirst <<<"$output") && owner <= $(jq .uid.hostLast <<<"$output")))
	release "$pid"
	run -0 jq -e '.stdout | fromjson | .inotify_instances == 0 and
		.inotify_init1 == "Operation not permitted" and
		.fanotify_init == "Operation not permitted" and .dnotify == "Operation not permitted"' <<<"$reply"
	healthy_and_clean
}

@test "attacks: allocating past the limit in a loop ends the run at the first OOM (no kernel-log flood)" {
	# the first OOM is caught in the run's memory cgroup; with RLIMIT_AS instead (a pod whose
	# cgroups are read-only) allocations fail as MemoryError and nothing is OOM-killed
	run -0 curl -s "$BASE/isolation"
	[[ $(jq -r .layers.cgroup <<<"$output") == true ]] || skip "no memory cgroup here: $(jq -r .off.cgroup <<<"$output")"
	local pool before after
	pool=$(pool_pid)
	before=$(dmesg | grep -c "codebox-$pool/" || true)
	# the longest timeout: the first allocator must reach the 1 GiB limit first, and on a
	# loaded host with software page tables that alone took more than 8 s
	attack oom-loop.py '{timeoutSeconds: 30, details: true}'
	after=$(dmesg | grep -c "codebox-$pool/" || true)
	assert_equal "$(field .details.limitExceeded)" memory
	assert_equal "$(field .exitCode)" -9
	# each kernel OOM report names the group twice (oom_memcg and task_memcg) on one line
	((after - before <= 1))
	healthy_and_clean
}

@test "attacks: a run gets one CPU: two spinning processes share it" {
	run -0 curl -s "$BASE/isolation"
	if [[ $(jq -r .layers.cpuquota <<<"$output") != true ]]; then
		skip "no CPU quota on this host: $(jq -r .off.cpuquota <<<"$output")"
	fi
	assert_equal "$(jq -r '.details.cpuLimit, .limits.cpuMillicores' <<<"$output" | tr '\n' ' ')" "cfs-quota 1000 "
	execute $'import os, time\nfor i in range(2):\n    if os.fork() == 0:\n        t = time.time()\n        while time.time() - t < 3: pass\n        os._exit(0)\nfor i in range(2): os.wait()' \
		'{details: true}'
	assert_equal "$(field .status)" succeeded
	# unconfined, two processes on two cores use about twice the wall time
	run -0 jq -e '.details.cpuMs <= 1.25 * .durationMs' <<<"$reply"
	healthy_and_clean
}

@test "attacks: a run that meets the pool-wide memory budget is stopped as memory; the others go on" {
	local conf saved_dir saved_pid saved_base pid
	conf=$(conf_variant 's/CODEBOX_POOL_MEMORY_BYTES          0;/CODEBOX_POOL_MEMORY_BYTES          419430400;/' \
		's/CODEBOX_MEMORY_BYTES               1073741824;/CODEBOX_MEMORY_BYTES               314572800;/')
	saved_dir=$STACK_DIR saved_pid=$STACK_PID saved_base=$BASE
	if [[ -n ${CODEBOX_ASAN:-} ]]; then
		# under the sanitizers a warm run is charged for the shadow pages of the template it
		# touches, so "the largest run" is the sanitizer's, not the program's: cold here
		CODEBOX_WARM=0 stack_start --conf-dir "$conf"
	else
		stack_start --conf-dir "$conf"
	fi
	run -0 curl -s "$BASE/isolation"
	if [[ $(jq -r .layers.poolmemory <<<"$output") != true ]]; then
		stack_stop
		STACK_DIR=$saved_dir STACK_PID=$saved_pid BASE=$saved_base
		skip "no pool-wide budget on this host"
	fi
	assert_equal "$(jq -r .details.poolMemoryBytes <<<"$output")" 419430400
	# A holds 150 MiB; B then grows towards its own 300 MiB, and the pool's 400 MiB runs out
	jq -cn '{code: "import signal\nb = bytearray(b\"\\x01\") * (150 << 20)\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])\nopen(\"held\", \"w\").close()\nsignal.sigtimedwait([signal.SIGUSR1], 30)\nprint(\"A done\")"}' \
		>"$BATS_TEST_TMPDIR/a.req"
	curl -s --max-time 60 -H 'Content-Type: application/json' --data-binary @"$BATS_TEST_TMPDIR/a.req" \
		"$BASE/execute" >"$BATS_TEST_TMPDIR/bg.json" 3>&- &
	BG_PID=$!
	wait_held "run A to hold its memory"
	execute $'chunks = []\nfor i in range(28):\n    chunks.append(bytearray(b"\\x01") * (10 << 20))\nprint("B done")' '{details: true}'
	assert_equal "$(field .details.limitExceeded)" memory
	assert_equal "$(field .exitCode)" -9
	release "$pid"
	assert_equal "$(field .status)" succeeded
	assert_equal "$(field .stdout)" "A done"
	healthy_and_clean
	stack_stop
	STACK_DIR=$saved_dir STACK_PID=$saved_pid BASE=$saved_base
}

@test "attacks: nothing a run reads names a host path, a host pid, the pool or the boot line" {
	run -0 curl -s "$BASE/isolation"
	[[ $(jq -r .layers.maskedpaths <<<"$output") == true ]] || skip "no private /proc to mask here: $(jq -r .off.maskedpaths <<<"$output")"
	[[ -n ${STACK_DIR:-} ]] || skip "an external stack: its host paths are not known here"
	local pool
	pool=$(pool_pid)
	attack host-view.py
	assert_equal "$(field .status)" succeeded
	local seen
	seen=$(field .stdout)
	# no host path, no pool, no host pid in a cgroup path
	run -0 jq -r '[.cwd, (.env | tostring), (.files | tostring)] | join("\n")' <<<"$seen"
	refute_output --partial "$STACK_DIR"
	refute_output --partial "codebox-pool"
	refute_output --partial "codebox-$pool"
	refute_output --partial "/tmp/codebox"
	refute_output --partial "runs/w"
	run -0 jq -e '.cwd | startswith("/sandbox/run-")' <<<"$seen"
	# a cgroup namespace: every line of /proc/self/cgroup ends in ":/"
	run -0 jq -e '.files["/proc/self/cgroup"] | split("\n") | map(select(. != "")) |
		all(endswith(":/"))' <<<"$seen"
	# the OCI masked paths and the boot line are empty or absent, /proc/sys is read-only
	run -0 jq -e '.files | ["/proc/cmdline", "/proc/config.gz", "/proc/keys", "/proc/timer_list",
		"/proc/sched_debug", "/proc/kcore", "/proc/cgroups", "/proc/latency_stats"] as $m |
		all($m[]; . as $p | ($p | in($ARGS.named.f) | not) or
		($ARGS.named.f[$p] == "" or ($ARGS.named.f[$p] | startswith("error: "))))' \
		--argjson f "$(jq .files <<<"$seen")" <<<"$seen"
	run -0 jq -e '.files | to_entries | map(select(.key | startswith("write "))) |
		all(.value | startswith("error: "))' <<<"$seen"
	run -0 jq -e '.files["ls /proc/acpi"] | (. == "" or startswith("error: "))' <<<"$seen"
	healthy_and_clean
}

@test "attacks: /tmp, /var/tmp and /dev/shm are private, share the disk budget, and multiprocessing works" {
	attack scratch-dirs.py '{details: true}'
	assert_equal "$(field .status)" succeeded
	local seen
	seen=$(field .stdout)
	run -0 jq -e '.["/tmp"] and .["/var/tmp"] and .["/dev/shm"] and .others == [] and .tempfile' <<<"$seen"
	run -0 jq -e '.pool == [0,1,4,9,16,25,36,49,64,81] and .executor == [0,1,4,9,16]' <<<"$seen"
	# 64 MiB in all: the second 40 MiB file does not fit, wherever it goes
	run -0 jq -e '.fill == "No space left on device" and .filledMiB < 64' <<<"$seen"
	# the next run starts empty, and nothing reached the host's /tmp
	execute 'import os; print(sorted(os.listdir("/tmp") + os.listdir("/dev/shm") + os.listdir("/var/tmp")))'
	assert_equal "$(field .stdout)" "[]"
	assert [ ! -e /tmp/saved.txt ]
	healthy_and_clean
}

@test "attacks: unix sockets: denied below Landlock ABI 9, confined by RESOLVE_UNIX from 9" {
	run -0 curl -s "$BASE/isolation"
	local abi policy
	abi=$(jq -r .details.landlockAbi <<<"$output")
	policy=$(jq -r .details.unixSockets <<<"$output")
	execute "import socket, sys
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[0] and '$STACK_DIR/fcgi.sock')
    print('connected')
except OSError as e:
    print(type(e).__name__, e.errno)"
	refute_output --partial connected
	if ((abi < 9)); then
		assert_equal "$policy" "socket() denied"
		assert_equal "$(field .stdout)" "PermissionError 1"
	else
		assert_equal "$policy" "pathname connect() confined by Landlock"
		[[ $(field .stdout) != connected* ]]
	fi
	healthy_and_clean
}

@test "attacks: a pool refuses a run uid range that a process or another pool already uses" {
	[[ -z ${CODEBOX_BASE:-} ]] || skip "an external stack: its pool's uid range is not this host's"
	[[ $EUID -eq 0 ]] || skip "run uids exist only for a root pool"
	local dir base sleeper
	dir=$(mktemp -d /tmp/codebox-test.XXXXXX)
	chmod 0711 "$dir"
	mkdir -m 0711 "$dir/runs"
	base=$(uid_base_for "$(free_port)")
	setpriv --reuid $((base + 1)) --regid $((base + 1)) --clear-groups sleep 30 3>&- &
	sleeper=$!
	wait_for "the process under the range" 50 pgrep -u $((base + 1)) sleep
	run "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --socket "$dir/s.sock" --runs-dir "$dir/runs" \
		--workers 2 --run-uid-base "$base"
	kill "$sleeper"
	wait "$sleeper" || true
	assert_failure 1
	assert_output --partial "already runs as uid $((base + 1))"
	# this suite's own stack holds its range: a second pool may not take it
	local stack_base
	stack_base=$(tr '\0' '\n' <"/proc/$(pool_pid)/cmdline" | grep -A1 -- --run-uid-base | tail -1)
	run "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --socket "$dir/s.sock" --runs-dir "$dir/runs" \
		--workers 2 --run-uid-base "$stack_base"
	assert_failure 1
	assert_output --partial "is held by another codebox pool"
	assert [ ! -e "$dir/s.sock" ]
	rm -rf "$dir"
	healthy_and_clean
}

@test "attacks: a run's pids do not exist in the serving container or on the host afterwards" {
	run -0 curl -s "$BASE/isolation"
	[[ $(jq -r .details.highPids <<<"$output") == true ]] || skip "no high pids here (they need a private /proc)"
	attack pids.py '{timeoutSeconds: 2}'
	assert_equal "$(field .status)" timed_out
	local pid child
	read -r pid child <<<"$(field .stdout)"
	# under the pid namespace they were 2 and 3, which exist everywhere (kthreadd, a worker)
	((pid > 1000 && child > pid))
	assert [ ! -e "/proc/$pid" ]
	assert [ ! -e "/proc/$child" ]
	healthy_and_clean
}

@test "attacks: a body with a duplicate key is refused, never last-wins" {
	post '{"code": "print(1)", "code": "print(2)"}'
	assert_equal "$code" 400
	run -0 jq -e '.error == "invalid_request" and (.message | contains("twice")) and
		(keys == ["error", "message"])' "$BATS_TEST_TMPDIR/body"
	healthy_and_clean
}

@test "attacks: result.json numbers are classified as Python reads them" {
	execute 'open("result.json", "w").write("[" + "9" * 4301 + "]")'
	assert_equal "$(field .resultError)" "result.json is not valid JSON"
	execute 'open("result.json", "w").write("[" + "9" * 4300 + ", 1." + "5" * 600 + ", 1e400]")'
	assert_equal "$(field .resultError)" null
	# the whole reply stays readable by a Python client
	run -0 "$PY" -c 'import json, sys; r = json.load(sys.stdin); print(len(str(r["result"][0])), r["result"][2])' <<<"$reply"
	assert_output "4300 inf"
	healthy_and_clean
}

@test "attacks: modify_ldt is refused; what a run writes may be executed (by design)" {
	attack ldt-exec.py
	assert_equal "$(field .status)" succeeded
	run -0 jq -e '.stdout | fromjson | .modify_ldt == "Operation not permitted" and
		.exec == "written-and-run"' <<<"$reply"
	healthy_and_clean
}
