#!/usr/bin/env bats
# Attacks: each program tries an escape; each test checks that the attack failed, that the
# service is healthy afterwards, and that nothing of the run remains (processes, directories,
# cgroups, mounts).

load helpers/stack

setup_file() {
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
	run -0 jq -e '.stdout | fromjson | to_entries | all(.value != "written")' <<<"$reply"
	run find / -xdev -name "$m" -not -path '/proc/*' 2>/dev/null
	assert_output ""
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
