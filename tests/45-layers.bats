#!/usr/bin/env bats
# Each isolation layer switched off on purpose (CODEBOX_DISABLE, for tests): /isolation tells
# the truth, the remaining layers still stop what they can, and CODEBOX_REQUIRE refuses to
# start without a demanded layer. Each test runs its own stack.

load helpers/stack

teardown() {
	if [[ ${BATS_TEST_COMPLETED:-} != 1 && -n ${STACK_DIR:-} ]]; then
		stack_logs
	fi
	stack_stop
	unset CODEBOX_DISABLE CODEBOX_REQUIRE
	openapi_teardown
}

isolation() {
	run -0 curl -s "$BASE/isolation"
	iso=$output
}

attack() {
	execute "$(cat "$ROOT/tests/programs/attacks/$1")" "${2:-}"
	assert_equal "$code" 200
}

# What this host can do, probed independently of codebox.
host_can() {
	case $1 in
	userns) unshare -U true 2>/dev/null ;;
	pidns) unshare -Up --fork true 2>/dev/null ;;
	landlock) [[ $("$PY" -c 'import ctypes; print(ctypes.CDLL(None).syscall(444, None, 0, 1))') -ge 1 ]] ;;
	cgroup) [[ $EUID -eq 0 && -w /sys/fs/cgroup/memory ]] || [[ -w /sys/fs/cgroup/cgroup.subtree_control ]] ;;
	cpuquota) [[ $EUID -eq 0 && -w /sys/fs/cgroup/cpu ]] || grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null ;;
	esac
}

@test "layers: /isolation reports the layers in force, and the start-up log lists them" {
	stack_start
	isolation
	assert_equal "$(jq -r '.layers | keys_unsorted | join(",")' <<<"$iso")" \
		"userns,pidns,netns,mountns,ipcns,utsns,seccomp,landlock,cgroup,cgroupns,maskedpaths,poolmemory,cpuquota"
	local layer
	for layer in userns pidns landlock cgroup; do
		if host_can "$layer"; then
			assert_equal "$(jq -r ".layers.$layer" <<<"$iso")" true
		else
			assert_equal "$(jq -r ".layers.$layer" <<<"$iso")" false
		fi
	done
	assert_equal "$(jq -r .layers.seccomp <<<"$iso")" true
	run -0 jq -e '.limits == {"memoryBytes": 1073741824, "maxProcesses": 64,
		"diskBytes": 67108864, "maxStdinBytes": 65536, "cpuMillicores": 1000,
		"maxInputFiles": 100, "maxInputBytes": 33554432, "maxArtifacts": 32,
		"maxArtifactBytes": 8388608}' <<<"$iso"
	# the pool-wide budget defaults to 3/4 of the memory the pool may use
	if [[ $(jq -r .layers.poolmemory <<<"$iso") == true ]]; then
		run -0 jq -e '.details.poolMemoryBytes > 1073741824' <<<"$iso"
	fi
	run -0 grep -c '"msg":"isolation: userns=' "$STACK_DIR/logs/pool.log"
	# the claims match what a run sees
	execute $'import os, socket\nprint(os.getuid(), os.getpid(), socket.gethostname())'
	if [[ $(jq -r .layers.userns <<<"$iso") == true ]]; then
		assert_equal "$(field '.stdout | split(" ")[0]')" 1000
	fi
	if [[ $(jq -r .details.highPids <<<"$iso") == true ]]; then
		(($(field '.stdout | split(" ")[1]') > 1000))
	elif [[ $(jq -r .layers.pidns <<<"$iso") == true ]]; then
		assert_equal "$(field '.stdout | split(" ")[1]')" 2
	fi
}

@test "layers: without the round-2 layers, /isolation says so and runs see what they hid" {
	host_can pidns || skip "no pid namespace here"
	export CODEBOX_DISABLE=cgroupns,maskedpaths,poolmemory,cpuquota
	stack_start
	isolation
	run -0 jq -e '[.layers.cgroupns, .layers.maskedpaths, .layers.poolmemory, .layers.cpuquota] ==
		[false, false, false, false] and .details.poolMemoryBytes == null and
		.details.cpuLimit == "none" and (.off | [.cgroupns, .maskedpaths, .poolmemory, .cpuquota] |
		all(. == "disabled by CODEBOX_DISABLE"))' <<<"$iso"
	execute 'print(len(open("/proc/cmdline").read()) > 0, open("/proc/self/cgroup").read().replace(chr(10), " "))'
	# the boot line shows again, and so does the run's cgroup path
	[[ $(field .stdout) == "True "* ]]
	if host_can cgroup; then
		[[ $(field .stdout) == *codebox-* ]]
	fi
}

@test "layers: without the network namespace, seccomp and Landlock still keep the network shut" {
	export CODEBOX_DISABLE=netns
	stack_start
	isolation
	assert_equal "$(jq -r .layers.netns <<<"$iso")" false
	assert_equal "$(jq -r .off.netns <<<"$iso")" "disabled by CODEBOX_DISABLE"
	attack network.py "{stdin: \"${BASE##*:} $STACK_DIR/fcgi.sock\"}"
	run -0 jq -e '.stdout | fromjson | to_entries | all(.value | startswith("PermissionError"))' <<<"$reply"
	run -0 curl -s -o /dev/null -w '%{http_code}' "$BASE/readyz"
	assert_output 200
}

@test "layers: without netns and seccomp, Landlock still denies TCP and abstract sockets" {
	host_can landlock || skip "no Landlock on this host"
	export CODEBOX_DISABLE=netns,seccomp
	stack_start
	isolation
	assert_equal "$(jq -r '.layers.netns, .layers.seccomp' <<<"$iso" | tr '\n' ' ')" "false false "
	"$PY" -c 'import socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind("\0codebox-test-abstract"); s.listen(1)
sys.stdout.write("listening\n"); sys.stdout.flush(); time.sleep(30)' >"$BATS_TEST_TMPDIR/listener" 3>&- &
	local listener=$!
	wait_for "the abstract listener" 50 grep -q listening "$BATS_TEST_TMPDIR/listener"
	attack network.py "{stdin: \"${BASE##*:} $STACK_DIR/fcgi.sock\"}"
	kill "$listener"
	wait "$listener" || true
	run -0 jq -e '.stdout | fromjson | .["tcp-nginx"] | startswith("PermissionError")' <<<"$reply"
	run -0 jq -e '.stdout | fromjson | .["unix-abstract"] != "connected"' <<<"$reply"
	# the socket's path is not in the run's mount namespace
	run -0 jq -e '.stdout | fromjson | .["unix-fastcgi"] != "connected"' <<<"$reply"
	# known gap (see /isolation): UDP to loopback is not covered by Landlock
}

@test "layers: without the mount namespace, Landlock keeps writes in the run's directory" {
	host_can landlock || skip "no Landlock on this host"
	export CODEBOX_DISABLE=mountns
	stack_start
	isolation
	run -0 jq -e '.layers.mountns == false and .details.readOnlySystem == false and
		.details.diskLimit != "tmpfs"' <<<"$iso"
	local m="codebox-attack-$RANDOM$RANDOM" other
	other=$(find "$STACK_DIR/runs" -maxdepth 1 -name 'w*' | head -1)
	attack write-outside.py "{stdin: \"$m $other\"}"
	run -0 jq -e '.stdout | fromjson | to_entries | all(.value != "written")' <<<"$reply"
	assert [ ! -e "/tmp/$m" ]
	# and the claim stays the strong one, because Landlock holds it
	run -0 curl -s "$BASE/capabilities"
	[[ $(jq -r .persistence <<<"$output") == *"no files, variables or imports survive"* ]]
}

@test "layers: without the pid namespace, the daemon sweep and signal scoping still hold" {
	export CODEBOX_DISABLE=pidns
	stack_start
	isolation
	run -0 jq -e '.layers.pidns == false and .layers.mountns == false and .layers.userns == false' <<<"$iso"
	local m="codebox-marker-$RANDOM$RANDOM"
	execute_file daemon.py "{stdin: \"$m\"}"
	assert_equal "$(field .stdout)" "daemon started"
	marker_gone "$m"
	local pool nginx
	pool=$(pool_pid)
	nginx=$(cat "$STACK_DIR/nginx.pid")
	attack signal-others.py "{stdin: \"$pool $nginx\"}"
	run -0 jq -e '.stdout | fromjson | to_entries | all(.value != "sent")' <<<"$reply"
	kill -0 "$pool" "$nginx"
}

@test "layers: on the weakest host, /isolation says so and the claims shrink" {
	export CODEBOX_DISABLE=userns,pidns,netns,mountns,ipcns,utsns,seccomp,landlock,cgroup,cgroupns,maskedpaths,poolmemory,cpuquota
	stack_start
	isolation
	run -0 jq -e '.layers | to_entries | all(.value == false)' <<<"$iso"
	run -0 jq -e '.details.memoryLimit == "rlimit-as"' <<<"$iso"
	run -0 curl -s "$BASE/capabilities"
	[[ $(jq -r .persistence <<<"$output") == *"files written outside the working directory may"* ]]
	# runs still work, and the rlimit fallback still stops a memory bomb
	execute 'print(1)'
	assert_equal "$(field .stdout)" 1
	attack memory-bomb.py
	assert_equal "$(field .status)" failed
	run -0 field .stderr
	assert_output --partial MemoryError
}

@test "layers: CODEBOX_REQUIRE refuses to start without a demanded layer" {
	local dir
	dir=$(mktemp -d /tmp/codebox-test.XXXXXX)
	chmod 0711 "$dir"
	mkdir "$dir/runs"
	run env CODEBOX_DISABLE=landlock CODEBOX_REQUIRE=seccomp,landlock \
		"${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --socket "$dir/s.sock" --runs-dir "$dir/runs" --workers 1 \
		--run-uid-base "$(uid_base_for "$(free_port)")"
	assert_failure 1
	assert_output --partial "CODEBOX_REQUIRE demands landlock, which is off: disabled by CODEBOX_DISABLE"
	assert [ ! -e "$dir/s.sock" ]
	run env CODEBOX_REQUIRE=seccomp,teleport \
		"${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --socket "$dir/s.sock" --runs-dir "$dir/runs" --workers 1 \
		--run-uid-base "$(uid_base_for "$(free_port)")"
	assert_failure 1
	assert_output --partial 'unknown isolation layer "teleport"'
	rm -rf "$dir"
}

@test "layers: CODEBOX_REQUIRE with every layer this host has starts" {
	host_can userns && host_can landlock && host_can cgroup || skip "this host lacks a layer"
	host_can cpuquota || skip "this host has no cpu cgroup controller"
	export CODEBOX_REQUIRE=userns,pidns,netns,mountns,ipcns,utsns,seccomp,landlock,cgroup,cgroupns,maskedpaths,poolmemory,cpuquota
	stack_start
	isolation
	run -0 jq -e '.layers | to_entries | all(.value == true)' <<<"$iso"
}

@test "layers: a pool that is not root builds the same namespaces, unprivileged" {
	[[ $EUID -eq 0 ]] || skip "needs root to switch to an unprivileged uid"
	host_can userns || skip "no unprivileged user namespaces here"
	local dir pid
	dir=$(mktemp -d /tmp/codebox-test.XXXXXX)
	mkdir "$dir/runs"
	chown -R 65534:65534 "$dir"
	chmod 0711 "$dir"
	local preload
	read -ra preload <<<"$(preload_env)"
	env "${preload[@]}" setpriv --reuid 65534 --regid 65534 --clear-groups \
		"${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --socket "$dir/s.sock" --runs-dir "$dir/runs" \
		--workers 2 2>"$dir/pool.log" 3>&- &
	pid=$!
	wait_for "the pool's socket" 600 test -S "$dir/s.sock"
	kill -TERM "$pid"
	wait "$pid"
	# the start-up probe ran Python through the whole sandbox as uid 65534
	run -0 grep -o '"msg":"isolation: [^"]*"' "$dir/pool.log"
	assert_output --partial "userns=on pidns=on netns=on mountns=on"
	assert_output --partial "cgroup=off"
	run -0 grep -c "runs as the pool's uid" "$dir/pool.log"
	rm -rf "$dir"
}

# pool_on_runs_dir DIR: starts an unprivileged pool (uid and gid 65534) on DIR/runs, as a pod's
# pool on its emptyDir; waits for its socket or its exit. Sets $pid; the log is DIR/pool.log.
pool_on_runs_dir() {
	local dir=$1
	local preload
	read -ra preload <<<"$(preload_env)"
	env "${preload[@]}" setpriv --reuid 65534 --regid 65534 --clear-groups \
		"${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --socket "$dir/sock/s.sock" \
		--runs-dir "$dir/runs" --workers 2 2>"$dir/pool.log" 3>&- &
	pid=$!
	wait_for "the pool's socket or its exit" 600 eval "test -S '$dir/sock/s.sock' || ! kill -0 $pid 2>/dev/null"
}

@test "layers: a non-root pool starts on a root-owned emptyDir (0777, or the fsGroup's g+rwxs)" {
	[[ $EUID -eq 0 ]] || skip "needs root to make root-owned directories and switch uids"
	local dir pid mode
	for mode in 0777:0 2770:65534; do
		dir=$(mktemp -d /tmp/codebox-test.XXXXXX)
		chmod 0711 "$dir"
		mkdir "$dir/sock" "$dir/runs"
		chown 65534:65534 "$dir/sock"
		# as the kubelet leaves an emptyDir: root's, and the fsGroup's where the pod has one
		chown "0:${mode#*:}" "$dir/runs"
		chmod "${mode%:*}" "$dir/runs"
		pool_on_runs_dir "$dir"
		run -0 test -S "$dir/sock/s.sock"
		run -0 stat -c '%u %a' "$dir/runs/codebox-65534"
		assert_output "65534 311"
		run -0 grep -c "runs live in $dir/runs/codebox-65534" "$dir/pool.log"
		kill -TERM "$pid"
		wait "$pid"
		# a restarted container reuses the directory its predecessor made
		pool_on_runs_dir "$dir"
		run -0 test -S "$dir/sock/s.sock"
		kill -TERM "$pid"
		wait "$pid"
		rm -rf "$dir"
	done
}

@test "layers: a non-root pool on a root-owned directory it cannot write refuses, saying why" {
	[[ $EUID -eq 0 ]] || skip "needs root to make root-owned directories and switch uids"
	local dir pid
	dir=$(mktemp -d /tmp/codebox-test.XXXXXX)
	chmod 0711 "$dir"
	mkdir "$dir/sock" "$dir/runs"
	chown 65534:65534 "$dir/sock"
	chmod 0755 "$dir/runs"
	local rc=0
	pool_on_runs_dir "$dir"
	wait "$pid" || rc=$?
	assert_equal "$rc" 1
	run -0 cat "$dir/pool.log"
	assert_output --partial "belongs to uid 0 (mode 0755) and the pool, uid 65534, can neither chmod it nor create"
	assert [ ! -e "$dir/sock/s.sock" ]
	rm -rf "$dir"
}
