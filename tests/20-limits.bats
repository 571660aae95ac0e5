#!/usr/bin/env bats
# The deadline and the clean-up: every process a run started is gone when the reply is sent.

load helpers/stack

setup_file() {
	stack_start
}

teardown_file() {
	stack_stop
}

# survivors MARKER: processes whose command line carries MARKER (none expected)
survivors() {
	pgrep -f -- "$1" || true
}

marker() {
	echo "codebox-marker-$BATS_TEST_NUMBER-$RANDOM$RANDOM"
}

@test "limits: a timeout reports timed_out with the partial output" {
	execute $'import sys, time\nprint("partial", flush=True)\nsys.stderr.write("err\\n")\ntime.sleep(60)' \
		'{timeoutSeconds: 1}'
	run -0 jq -e '.status == "timed_out" and .exitCode == null and .stdout == "partial\n" and
		.stderr == "err\n" and .durationMs >= 1000 and .durationMs < 6000' <<<"$reply"
}

@test "limits: a timeout kills the whole process group and SIGTERM-ignoring children" {
	local m
	m=$(marker)
	execute_file term-ignorer.py "{timeoutSeconds: 1, stdin: \"$m\"}"
	assert_equal "$(field .status)" timed_out
	assert_equal "$(field .stdout)" spinning
	assert_equal "$(survivors "$m")" ""
}

@test "limits: a double-forked setsid daemon does not outlive its run" {
	local m
	m=$(marker)
	execute_file daemon.py "{stdin: \"$m\"}"
	assert_equal "$(field .status)" succeeded
	assert_equal "$(field .stdout)" "daemon started"
	assert_equal "$(survivors "$m")" ""
}

@test "limits: a program that exits while children hold its pipes is answered at once" {
	local m start=$SECONDS
	m=$(marker)
	execute_file pipe-holder.py "{stdin: \"$m\"}"
	assert_equal "$(field .status)" succeeded
	assert_equal "$(field .stdout)" "main exits"
	((SECONDS - start < 5))
	assert_equal "$(survivors "$m")" ""
}

@test "limits: no zombie is left in the pool after runs that fork" {
	local m
	m=$(marker)
	execute_file daemon.py "{stdin: \"$m\"}"
	execute 'import os; [os.fork() == 0 and os._exit(0) for _ in range(20)]; print("forked")'
	assert_equal "$(field .stdout)" forked
	# no zombies (state Z) under the pool, and nothing of the runs
	local pool
	pool=$(pool_pid)
	run -0 ps --ppid "$pool" -o stat=
	refute_line --regexp '^Z'
	run -0 ps -e -o stat=,cmd=
	refute_line --partial "$m"
	no_run_leftovers
}

@test "limits: the working directory is gone when the reply is sent" {
	execute 'import os; print(os.getcwd())'
	local dir
	dir=$(field .stdout)
	# its host path, or (in a mount namespace) a path naming nothing of the host
	[[ $dir == "$(stack_runs_inside)/w"*"/run-"* || $dir == /sandbox/run-* ]]
	assert [ ! -e "$(stack_runs)${dir#"$(stack_runs_inside)"}" ]
	run find "$(stack_runs)" -name "$(basename "$dir")"
	assert_output ""
	# and runs leave nothing behind
	no_run_leftovers
}

@test "limits: a run that fills its directory with a deep tree is cleaned up" {
	execute $'import os\nfor i in range(2000):\n    os.mkdir("d"); os.chdir("d")\n    open("f", "w").write("x")\nos.chmod(".", 0o500)\nprint("deep")'
	assert_equal "$(field .stdout)" deep
	no_run_leftovers
}
