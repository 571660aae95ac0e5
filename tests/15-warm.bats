#!/usr/bin/env bats
# Warm interpreters: runs forked from a template that has imported the five modules, seeing
# what a cold `python3 -I -u main.py` sees, with fresh random state, nothing of the pool's
# environment anywhere in their memory, charged only for the pages they write, and a warm
# path that heals itself (a dead template or zygote replaced) without a failed request. A
# template renewed after CODEBOX_WARM_MAX_RUNS runs: tests/17-succession.bats (its stack's
# templates live 3 runs; this file's live the default 1000, so that its other tests pay for
# no successor's import: a heavy one is 4 s of CPU, 13 s under the sanitizers).

load helpers/stack

setup_file() {
	# the default five preloaded, as in production: the template these suites test
	export STACK_FULL_PRELOAD=1
	export CODEBOX_WARM=1
	export CODEBOX_TEST_SECRET="codebox-warm-secret-$RANDOM$RANDOM$RANDOM"
	stack_start
}

teardown_file() {
	stack_stop
}

# cold_local PROGRAM [STDIN]: runs PROGRAM as the sandbox would, without it: a fresh directory,
# the runs' environment, /usr/bin/python3 -I -u main.py. Prints exit code, stdout, stderr as
# JSON, the directory's path replaced by CWD.
cold_local() {
	local dir rc=0
	dir=$(mktemp -d "$BATS_TEST_TMPDIR/cold.XXXXXX")
	printf '%s' "$1" >"$dir/main.py"
	(cd "$dir" && printf '%s' "${2:-}" | env -i PATH=/usr/local/bin:/usr/bin:/bin HOME="$dir" TMPDIR="$dir" \
		LANG=C.UTF-8 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 \
		/usr/bin/python3 -I -u main.py >"$dir.out" 2>"$dir.err") || rc=$?
	((rc > 128)) && rc=$((128 - rc))
	jq -cn --arg d "$dir" --argjson rc "$rc" --rawfile o "$dir.out" --rawfile e "$dir.err" \
		'{exitCode: $rc, stdout: ($o | gsub($d; "CWD")), stderr: ($e | gsub($d; "CWD"))}'
}

# warm_remote PROGRAM [STDIN]: the same through the service, in the same shape.
warm_remote() {
	execute "$1" "$(jq -cn --arg s "${2:-}" '{stdin: $s}')"
	jq -c '(.stdout | capture("(?<d>/[^ \"\\n]*/run-[0-9a-f]+)") // {d: "\u0000"}) as $m
		| {exitCode, stdout: (.stdout | gsub($m.d; "CWD")),
		   stderr: (.stderr | gsub("\"/[^\"]*/run-[0-9a-f]+/main.py\""; "\"CWD/main.py\""))}' <<<"$reply"
}

@test "warm: /isolation says warm" {
	run -0 curl -s "$BASE/isolation"
	assert_equal "$(jq -r .details.interpreter <<<"$output")" warm
	run -0 grep -c "zygote ready: 7 modules imported" "$STACK_DIR/logs/pool.log"
}

# box_exes: each box's init and program as "INIT-EXE|PROGRAM-EXE|INIT-RSS-KB" lines (the boxes
# built ahead on both tiers: an init and its one child)
box_exes() {
	local i p
	for i in $(box_inits); do
		p=$(pgrep -P "$i" | head -1)
		[[ -n $p ]] || continue
		echo "$(readlink "/proc/$i/exe")|$(readlink "/proc/$p/exe")|$(awk '/^VmRSS/ { print $2 }' "/proc/$i/status")"
	done
}

@test "warm: a run starts with one copy of the interpreter: its init is codebox-init, exec'd" {
	local line init prog rss n=0
	run -0 curl -s "$BASE/isolation"
	assert_equal "$(jq -r .details.warmStart <<<"$output")" one-copy
	# a box built ahead on each tier: its init and program exist before the request
	execute 'print(1)'
	execute 'import numpy; print(2)'
	assert_equal "$(field .stdout)" 2
	while read -r line; do
		[[ -n $line ]] || continue
		IFS='|' read -r init prog rss <<<"$line"
		# init is a program of its own, a few hundred kB resident; the program is the one
		# copy of the template (the pool's sealed image)
		[[ $init == "/memfd:codebox-init (deleted)" && $prog == "/memfd:codebox (deleted)" ]] ||
			fail "a box's init runs $init, its program $prog"
		((rss < 16384)) || fail "a box's init is resident for $rss kB: a copy of the template?"
		n=$((n + 1))
	done < <(box_exes)
	((n >= 1)) || fail "no box built ahead"
	# the program is the fork of a CLONE_VM child: glibc's rseq area is registered again, so
	# the cpu it reads is the kernel's
	execute 'import ctypes, os
libc = ctypes.CDLL(None)
cpus = sorted(os.sched_getaffinity(0))
bad = 0
for i in range(100):
    os.sched_setaffinity(0, {cpus[i % len(cpus)]})
    bad += libc.sched_getcpu() != int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[36])
print(bad)'
	assert_equal "$(field .stdout)" 0
}

@test "warm: the program sees what python3 -I -u main.py sees cold" {
	local programs=(
		$'import os, sys\nprint(__name__, __file__ == os.path.join(os.getcwd(), "main.py"), sys.argv, sys.orig_argv)'
		$'import sys\nprint(sys.path, tuple(sys.flags), sys.executable, sys.stdout.write_through, sys.stdin.encoding)'
		$'import os\nprint(sorted(os.environ), open("/proc/self/cmdline").read().split("\\0"))'
		$'import sys\nprint(repr(sys.stdin.read()))'
		$'raise ValueError("boom")'
		$'import sys\nsys.exit("bye")'
		$'import sys\nprint("out")\nsys.exit(3)'
		$'import atexit\natexit.register(print, "atexit ran")\nprint("main")'
		$'import os\nprint("x", flush=True)\nos._exit(7)'
		$'import os, signal\nos.kill(os.getpid(), signal.SIGTERM)'
		$'import threading, time\ndef late():\n    time.sleep(0.3)\n    print("thread done")\nthreading.Thread(target=late).start()\nprint("main done")'
		$'raise KeyboardInterrupt'
		$'class A:\n    def __del__(self):\n        print("del ran")\na = A()\nprint("end")'
		$'import sys\nsys.stdout.write("no newline")'
		$'print(sorted(globals()), type(__loader__).__name__, __cached__, __spec__)'
		$'print(sys)'
	)
	local p want got
	for p in "${programs[@]}"; do
		want=$(cold_local "$p" "some input")
		got=$(warm_remote "$p" "some input")
		if [[ $want != "$got" ]]; then
			echo "program: $p" >&2
			echo "cold: $want" >&2
			echo "warm: $got" >&2
			return 1
		fi
	done
}

@test "warm: a result.json left open is flushed at exit, as cold" {
	execute $'import json\nf = open("result.json", "w")\njson.dump({"a": 1}, f)'
	assert_equal "$(field .result.a)" 1
}

@test "warm: random state differs per run (random, numpy's RandomState, default_rng)" {
	local prog=$'import random, numpy\nprint(random.random(), numpy.random.rand(), numpy.random.default_rng().random())'
	execute "$prog"
	local first=$reply
	execute "$prog"
	local a b i
	for i in 1 2 3; do
		a=$(jq -r '.stdout | split(" ")['$((i - 1))']' <<<"$first")
		b=$(field '.stdout | split(" ")['$((i - 1))']')
		[[ -n $a && $a != "$b" ]] || {
			echo "value $i is the same in two runs: $a" >&2
			return 1
		}
	done
}

@test "warm: nothing of the pool is anywhere in a run's memory: its environment, its paths" {
	# the zygote is exec'd with the runs' environment alone, so even the sanitizers' copy of
	# its environment holds nothing of the pool's; the needles: a secret in the pool's
	# environment, and the stack's directory (the runtime dir, the socket, the runs and the
	# audit trail are all below it)
	local needle halves="" prefix min
	# each looked for in two halves, so the program itself never holds one whole, all in one
	# scan of the run's memory; the last is there (a name in the scanner's own code), so a
	# scan that cannot see fails too
	for needle in "$CODEBOX_TEST_SECRET" "$STACK_DIR" scanned_mb; do
		halves+="${needle:0:${#needle}/2}"$'\n'"${needle:${#needle}/2}"$'\n'
	done
	# both tiers: the light one (numpy) and the heavy one (a program naming scipy)
	for prefix in "" $'# scipy\n'; do
		execute "$prefix$(cat "$ROOT/tests/programs/memory-scan.py")" "$(jq -cn --arg s "$halves" '{stdin: $s}')"
		assert_equal "$(field .status)" succeeded
		assert_equal "$(field '.stdout | fromjson | .each[0:2] == [0, 0]')" true
		(($(field '.stdout | fromjson | .each[2]') > 0))
		min=$([[ -n $prefix ]] && echo 150 || echo 30)
		(($(field '.stdout | fromjson | .scanned_mb') > min))
	done
}

@test "warm: every generator the preloaded modules keep draws anew in each run, on both tiers" {
	local prefix first second same
	for prefix in "" $'import sympy, scipy, pandas, sklearn\n'; do
		execute "$prefix$(cat "$ROOT/tests/programs/generators.py")"
		assert_equal "$(field .status)" succeeded
		first=$(field .stdout)
		execute "$prefix$(cat "$ROOT/tests/programs/generators.py")"
		second=$(field .stdout)
		# the census found what the modules keep: random's, numpy's global state, and on
		# the heavy tier sympy's
		jq -e 'has("random._inst") and has("numpy.random.mtrand._rand") and has("multiprocessing.authkey")' <<<"$first"
		[[ -z $prefix ]] || jq -e 'has("sympy.core.random.rng") and has("sympy.ntheory.qs.rgen")' <<<"$first"
		same=$(jq -n --argjson a "$first" --argjson b "$second" '[$a | keys[] | select($a[.] != null and $a[.] == $b[.])]')
		assert_equal "$same" "[]"
	done
}

@test "warm: a run is charged for the pages it writes, not for the template's" {
	# cold, importing the five modules costs some 150 MB; warm, they are the template's
	execute 'import numpy, pandas, scipy, sympy, sklearn; print(len(numpy.arange(1000)))' '{details: true}'
	assert_equal "$(field .stdout)" 1000
	(($(field .details.maxRssBytes) < 64 * 1024 * 1024))
	# and what it writes counts: past memoryBytes (1 GiB here) the run is stopped
	execute 'b = bytearray(1536 * 1024 * 1024); print("allocated")' '{details: true}'
	assert_equal "$(field .details.limitExceeded)" memory
}

# The heavy tier: with the defaults preloaded, numpy is the light tier's (the zygote, the
# workers and their templates have it) and the rest (pandas, scipy, sympy, sklearn, pyplot and
# IPython's formatters) the heavy template's, a child of the zygote whose runs' inits are not
# their worker's children.

# heavy_worker INIT: the worker holding INIT's pidfd
heavy_worker() {
	init_worker "$1"
}

# run_init MARKER: the init of the run whose program carries MARKER
run_init() {
	ps -o ppid= -p "$(pgrep -f -- "$1" | head -1)" | tr -d ' '
}

@test "warm: a program that names a heavy module runs on the heavy template, others on the light one" {
	execute 'import sys; print("sci" + "py" in sys.modules, "nu" + "mpy" in sys.modules)'
	assert_equal "$(field .stdout)" "False True"
	execute $'import sys\nimport scipy\nprint("sk" + "learn" in sys.modules, __name__)'
	assert_equal "$(field .stdout)" "True __main__"
	run -0 grep -c "heavy template ready: 6 modules imported" "$STACK_DIR/logs/pool.log"
	[[ -n $(heavy_pids) ]]
	# a wrong guess costs speed only: a module the template lacks is imported as cold
	execute 'import importlib; m = importlib.import_module("sci" + "py.special"); print(m.gamma(5))'
	assert_equal "$(field .stdout)" 24.0
}

@test "warm: a heavy run is stopped at its deadline with what it started, nothing left at the reply" {
	local m="codebox-heavy-$RANDOM$RANDOM"
	execute "import scipy, subprocess, sys, time
subprocess.Popen([sys.executable, '-c', 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)', '$m'])
print('partial', flush=True)
time.sleep(300)" '{timeoutSeconds: 1}'
	assert_equal "$(field .status)" timed_out
	assert_equal "$(field .stdout)" partial
	marker_gone "$m"
	wait_for "a healthy pool" 50 no_run_leftovers
}

@test "warm: a heavy run whose client hangs up is killed at once" {
	local m="codebox-heavy-gone-$RANDOM$RANDOM" client
	marker_body "$m" 'import time; time.sleep(60)  # scipy' >"$BATS_TEST_TMPDIR/req"
	"$PY" "$BATS_TEST_DIRNAME/helpers/clients.py" hangup "${BASE##*:}" "@$BATS_TEST_TMPDIR/req" 60 3>&- &
	client=$!
	wait_for "the run to start" 100 pgrep -f -- "$m"
	# its init is the heavy template's child (or the pool's, once the template that cloned it
	# ended), not its worker's
	local init parent
	init=$(run_init "$m")
	parent=$(ps -o ppid= -p "$init" | tr -d ' ')
	# (or, when the heavy template was busy renewing past the 2 s bound, the worker's own
	# template's: that fallback is logged)
	[[ $(cat "/proc/$parent/comm") == codebox-heavy || $parent == "$(pool_pid)" ]] ||
		grep -q "the heavy template failed" "$STACK_DIR/logs/pool.log" || {
		ps -o pid,ppid,comm,args -p "$parent,$init,$(heavy_pids)" >&2
		return 1
	}
	kill "$client"
	wait "$client" || true
	wait_for "the abandoned run to die" 30 marker_gone "$m"
	wait_for "a healthy pool" 50 no_run_leftovers
}

@test "warm: a worker killed during a heavy run takes the run with it" {
	local m="codebox-heavy-crash-$RANDOM$RANDOM" worker
	marker_body "$m" 'import time; time.sleep(60)  # scipy' >"$BATS_TEST_TMPDIR/req"
	curl -s --max-time 30 -o /dev/null -w '%{http_code}' --data-binary @"$BATS_TEST_TMPDIR/req" \
		"$BASE/execute" >"$BATS_TEST_TMPDIR/crash_code" 3>&- &
	wait_for "the run to start" 100 pgrep -f -- "$m"
	worker=$(heavy_worker "$(run_init "$m")")
	[[ -n $worker ]]
	kill -KILL "$worker"
	wait
	assert_equal "$(cat "$BATS_TEST_TMPDIR/crash_code")" 502
	wait_for "the run to die" 50 marker_gone "$m"
	wait_for "a healthy pool" 100 no_run_leftovers
}

@test "warm: a heavy template that stops answering costs a fallback, never a stray init" {
	local h i
	h=$(heavy_pids)
	[[ -n $h ]]
	# shellcheck disable=SC2086
	kill -STOP $h
	# each worker without a heavy box gives up on it within 2 s and uses its own template
	for i in 1 2 3; do
		execute 'import scipy.special; print(int(scipy.special.gamma(4)))'
		assert_equal "$(field .stdout)" 6
	done
	# shellcheck disable=SC2086
	kill -CONT $h
	run -0 grep -c "the heavy template failed (the heavy template did not answer)" "$STACK_DIR/logs/pool.log"
	# the requests it finds queued were given up: it clones no init onto their pipes
	wait_for "the queued requests skipped" 100 grep -q "a request its worker gave up on is skipped" "$STACK_DIR/logs/pool.log"
	wait_for "a healthy pool" 100 no_run_leftovers
	execute 'import scipy; print(6 * 7)'
	assert_equal "$(field .stdout)" 42
}

@test "warm: a killed heavy template is replaced: the run in flight is answered, none fails" {
	local m="codebox-heavy-kept-$RANDOM$RANDOM" h i
	execute 'import scipy; print("warm")'
	h=$(heavy_pids)
	[[ -n $h ]]
	marker_body "$m" 'import time; time.sleep(2); print("survived")  # scipy' >"$BATS_TEST_TMPDIR/req"
	curl -s --max-time 30 -o "$BATS_TEST_TMPDIR/kept" --data-binary @"$BATS_TEST_TMPDIR/req" \
		"$BASE/execute" 3>&- &
	wait_for "the run to start" 100 pgrep -f -- "$m"
	# shellcheck disable=SC2086
	kill -KILL $h
	wait
	assert_equal "$(jq -r .status "$BATS_TEST_TMPDIR/kept")" succeeded
	assert_equal "$(jq -r .stdout "$BATS_TEST_TMPDIR/kept")" survived
	for i in $(seq 1 8); do
		execute 'import scipy; print(6 * 7)'
		assert_equal "$(field .stdout)" 42
	done
	wait_for "a new heavy template" 300 new_heavy "$h"
	run -0 grep -c "the heavy template ended (it crashed)" "$STACK_DIR/logs/pool.log"
	run -0 grep -c "forking the next heavy template (none serves)" "$STACK_DIR/logs/pool.log"
	wait_for "a healthy pool" 100 no_run_leftovers
}

# light_template_up: this stack has a light template
light_template_up() {
	[[ -n $(template_pids) ]]
}

# kill_light_templates: SIGKILLs every light template; true when one was killed
kill_light_templates() {
	local t killed=1
	for t in $(template_pids); do
		kill -KILL "$t" 2>/dev/null && killed=0
	done
	return $killed
}

# light_crashed: kills the light templates until the zygote has seen one crash
light_crashed() {
	kill_light_templates || true
	grep -q "the light template ended (it crashed)" "$STACK_DIR/logs/pool.log"
}

# forked_after_crash: the zygote forked a light template after the first crash it saw
forked_after_crash() {
	awk '/the light template ended \(it crashed\)/ { c = 1 } c && /forking the next light template/ { f = 1 }
		END { exit !f }' "$STACK_DIR/logs/pool.log"
}

@test "warm: a killed light template is replaced; the runs meanwhile are answered, none fails" {
	local i
	# (a template killed just before may still be ending, or its successor between its fork
	# and its name; so the kill is repeated until the zygote sees a crash)
	wait_for "a light template to crash" 100 light_crashed
	for i in $(seq 1 12); do
		answers_42
	done
	wait_for "a new light template" 100 forked_after_crash
	wait_for "healthy pool" 100 no_run_leftovers
}

pool_says_warm() {
	[[ $(curl -s "$BASE/isolation" | jq -r .details.interpreter) == warm ]]
}

# log_count PATTERN: how many lines of the pool's log match PATTERN (grep -E)
log_count() {
	grep -cE "$1" "$STACK_DIR/logs/pool.log" || true
}

more_lines() { # PATTERN BEFORE
	(($(log_count "$1") > $2))
}

# zygote_settled: no zygote is importing (every one the pool started since BEFORE serves)
zygote_settled() {
	(($(log_count "zygote ready") >= $(log_count "starting a new zygote") + 1))
}

# no_orphans: no template is the pool's own child (every one is a zygote's)
no_orphans() {
	local p
	for p in $(pgrep -P "$(pool_pid)"); do
		[[ $(cat "/proc/$p/comm" 2>/dev/null) == codebox-warm || $(cat "/proc/$p/comm" 2>/dev/null) == codebox-heavy ]] && return 1
	done
	return 0
}

@test "warm: a zygote that dies is replaced; its templates serve meanwhile, and the pool is warm again" {
	local z new i readies
	wait_for "no zygote importing" 1200 zygote_settled
	z=$(zygote_pid)
	[[ -n $z ]]
	readies=$(log_count "zygote ready")
	# the earlier tests' cold boxes built ahead are used up first: a worker builds its next
	# box after each reply, warm only while a light template serves
	wait_for "a warm pool" 600 pool_says_warm
	wait_for "a light template" 100 light_template_up
	for i in 1 2; do
		post '{"code":"print(6 * 7)"}'
	done
	kill -KILL "$z"
	wait_for "the zygote reaped" 100 more_lines "a zygote \\(pid $z\\) was killed by signal 9" 0
	# its templates serve on, orphans of the pool's: runs meanwhile are answered, none fails
	run -0 grep -c "of a zygote that died serves on" "$STACK_DIR/logs/pool.log"
	for i in $(seq 1 6); do
		answers_42 -H "X-Request-Id: orphan-run-$i"
	done
	# the heavy template, never between two lives here, serves a heavy program warm
	post $'{"code":"# scipy\\nprint(6 * 7)"}' -H "X-Request-Id: orphan-heavy"
	assert_equal "$(jq -r .stdout "$BATS_TEST_TMPDIR/body")" 42
	run -0 jq -s '[.[] | select(.requestId == "orphan-heavy") | .tier] | join(",")' "$STACK_DIR/logs/pool.log"
	assert_output '"heavy"' || {
		grep -E "orphan-|serves on|template|zygote" "$STACK_DIR/logs/pool.log" | tail -30
		false
	}
	wait_for "a new zygote" 300 more_lines "starting a new zygote \\(none serves\\)" 0
	# the new zygote imports first (seconds under the sanitizers)
	wait_for "the new zygote to be ready" 1200 more_lines "zygote ready" "$readies"
	new=$(zygote_pid)
	[[ -n $new && $new != "$z" ]]
	wait_for "a warm pool again" 600 pool_says_warm
	execute 'import scipy, sys; print(6 * 7)'
	assert_equal "$(field .stdout)" 42
	# /metrics counts the replacement
	run -0 curl -s "$METRICS/metrics"
	(($(awk '/^codebox_zygote_starts_total\{reason="replacement"\}/ { print $2 }' <<<"$output") >= 1))
	# the orphans end once the new zygote serves their tiers
	wait_for "the orphaned templates ended" 1200 no_orphans
	wait_for "healthy pool" 100 no_run_leftovers
}

# old_worker: a worker that has lived 2 s or more (the pool respawns it at once when it dies)
old_worker() {
	ps -o pid=,etimes= -p "$(worker_pids | paste -sd,)" | awk '$2 >= 2 { print $1; exit }'
}

have_old_worker() {
	[[ -n $(old_worker) ]]
}

# importing_zygote OLD BEFORE: a zygote that is not OLD and has not said it is ready
importing_zygote() {
	local z
	for z in $(zygote_pid); do
		[[ $z != "$1" ]] && ! more_lines "zygote ready" "$2" && return 0
	done
	return 1
}

@test "warm: the pool never waits for a zygote: workers killed while one imports are respawned at once" {
	local z z2 w readies started
	wait_for "no zygote importing" 1200 zygote_settled
	z=$(zygote_pid)
	readies=$(log_count "zygote ready")
	kill -KILL "$z"
	wait_for "a new zygote importing" 100 importing_zygote "$z" "$readies"
	z2=$(zygote_pid)
	# stopped while it imports: the pool goes on reaping and respawning
	kill -STOP "$z2"
	wait_for "a worker older than 2 s" 100 have_old_worker
	w=$(old_worker)
	started=$(log_count "worker .* ready")
	kill -KILL "$w"
	# respawned within a second (the 1 s respawn delay applies only to a worker that died
	# within its first second)
	wait_for "the worker respawned" 15 more_lines "worker .* ready" "$started"
	answers_42
	# killed while it imports: another is started, and the pool is warm again
	kill -KILL "$z2"
	kill -CONT "$z2" 2>/dev/null || true
	wait_for "another zygote, ready" 1200 more_lines "zygote ready" "$readies"
	run -0 grep -cE "a zygote \\(pid $z2\\) (was killed by signal 9|failed: it died before it was ready)" "$STACK_DIR/logs/pool.log"
	run grep -c "warm interpreters are unavailable" "$STACK_DIR/logs/pool.log"
	assert_output 0
	wait_for "a warm pool" 600 pool_says_warm
}

@test "warm: the preloaded modules are configurable, and bad settings refuse the start" {
	local dir
	dir=$(mktemp -d /tmp/codebox-test.XXXXXX)
	chmod 0711 "$dir"
	mkdir "$dir/runs"
	run env CODEBOX_WARM=yes "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --socket "$dir/s.sock" \
		--runs-dir "$dir/runs" --workers 1
	assert_failure 1
	assert_output --partial 'CODEBOX_WARM must be 0 or 1, not "yes"'
	run env CODEBOX_WARM_MODULES='numpy,os;rm' "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" \
		--socket "$dir/s.sock" --runs-dir "$dir/runs" --workers 1
	assert_failure 1
	assert_output --partial '"os;rm" is not a module name'
	rm -rf "$dir"
	stack_stop
	CODEBOX_WARM_MODULES=json stack_start
	execute 'import sys; print("numpy" in sys.modules, "json" in sys.modules); import numpy; print(numpy.eye(2).sum())'
	assert_equal "$(field .stdout)" $'False True\n2.0'
	run -0 curl -s "$BASE/isolation"
	assert_equal "$(jq -r .details.interpreter <<<"$output")" warm
}

@test "warm: a zygote that cannot import its modules leaves the pool cold, once, never restarted" {
	stack_stop
	CODEBOX_WARM_MODULES=codebox_no_such_module CODEBOX_WARM_LIGHT_MODULES=codebox_no_such_module stack_start
	execute 'print(6 * 7)'
	assert_equal "$(field .stdout)" 42
	run -0 curl -s "$BASE/isolation"
	assert_equal "$(jq -r .details.interpreter <<<"$output")" cold
	run -0 grep -c "warm interpreters are unavailable, runs are cold" "$STACK_DIR/logs/pool.log"
	assert_output 1
	# the supervisor's loop looks once a second: a few seconds, and no zygote was started again
	sleep 3
	run grep -c "starting a new zygote" "$STACK_DIR/logs/pool.log"
	assert_output 0
	[[ -z $(zygote_pid) ]]
}

@test "warm: without codebox-init beside the pool, or with CODEBOX_WARM_ONE_COPY=0, runs start with two copies and say so" {
	local dir line
	stack_stop
	CODEBOX_WARM_MODULES=json CODEBOX_WARM_ONE_COPY=0 stack_start
	run -0 curl -s "$BASE/isolation"
	assert_equal "$(jq -r .details.warmStart <<<"$output")" copy
	run -0 grep -c "two copies of the interpreter: CODEBOX_WARM_ONE_COPY=0" "$STACK_DIR/logs/pool.log"
	execute 'import json; print(json.dumps([1]))'
	assert_equal "$(field .stdout)" '[1]'
	while read -r line; do
		[[ -z $line || $line == "/memfd:codebox (deleted)|/memfd:codebox (deleted)|"* ]] ||
			fail "a box of a two-copy start: $line"
	done < <(box_exes)
	stack_stop
	dir=$(mktemp -d /tmp/codebox-test.XXXXXX)
	cp "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" "$dir/codebox-pool"
	CODEBOX_WARM_MODULES=json CODEBOX_POOL="$dir/codebox-pool" stack_start
	run -0 curl -s "$BASE/isolation"
	assert_equal "$(jq -r .details.warmStart <<<"$output")" copy
	run -0 grep -c "two copies of the interpreter: codebox-init is not beside codebox-pool" "$STACK_DIR/logs/pool.log"
	execute 'print(3)'
	assert_equal "$(field .stdout)" 3
	stack_stop
	rm -rf "$dir"
}
