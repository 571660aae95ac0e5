#!/usr/bin/env bats
# Succession by runs: a template whose life is up (CODEBOX_WARM_MAX_RUNS, 3 here) serves on
# while its successor imports the modules, and no run notices: none fails, none falls back to
# a cold start. The default five preloaded, as in production, so that a successor's import
# takes the seconds it takes there. (tests/15-warm.bats: the warm path itself, and templates
# and zygotes replaced when they die; tests/16-renewal.bats: succession by time, under load.)

load helpers/stack

setup_file() {
	export STACK_FULL_PRELOAD=1
	export CODEBOX_WARM=1 CODEBOX_WARM_MAX_RUNS=3
	stack_start
}

teardown_file() {
	stack_stop
}

# one_heavy: one heavy template, and the zygote says it serves (a replacement still importing
# is one heavy template too, but serves nothing yet)
one_heavy() {
	[[ $(heavy_pids | wc -l) -eq 1 ]] || return 1
	local last
	last=$(grep "tiers now serving" "$STACK_DIR/logs/pool.log" | tail -1)
	[[ -z $last || $last == *"heavy yes"* ]]
}

fallbacks() {
	grep -c "the heavy template failed" "$STACK_DIR/logs/pool.log" || true
}

@test "warm: a heavy template whose life is up serves until its successor is ready: no run falls back" {
	local before h0 i
	execute 'import scipy; print("warm")'
	wait_for "one heavy template, serving" 300 one_heavy
	h0=$(heavy_pids)
	before=$(fallbacks)
	# CODEBOX_WARM_MAX_RUNS=3: its life is up within these, and it serves them all while its
	# successor imports the modules
	for i in $(seq 1 6); do
		execute 'import scipy; print(6 * 7)'
		assert_equal "$(field .stdout)" 42
	done
	run -0 grep -c "forking the next heavy template (the serving one's life is up)" "$STACK_DIR/logs/pool.log"
	wait_for "its successor to serve" 300 new_heavy "$h0"
	# the retired one ends between two requests, once its successor has imported the modules
	# (new_heavy holds from the successor's fork on; an import under load can take 15 s, and
	# the zygote gives it WARM_ZYGOTE_READY_MS, 180 s)
	wait_for "the retired one to end" 1800 bash -c "! kill -0 $h0 2>/dev/null"
	for i in 1 2; do
		execute 'import scipy; print(6 * 7)'
		assert_equal "$(field .stdout)" 42
	done
	assert_equal "$(fallbacks)" "$before"
	wait_for "a healthy pool" 100 no_run_leftovers
}

two_heavy() {
	[[ $(heavy_pids | wc -l) -eq 2 ]]
}

# heavy_ends: how many heavy templates the zygote saw end unretired, or die before they were ready
heavy_ends() {
	grep -cE "the next heavy template ended before it was ready|the heavy template ended \(it crashed\)" \
		"$STACK_DIR/logs/pool.log" || true
}

more_heavy_ends() {
	(($(heavy_ends) > $1))
}

@test "warm: a successor killed while it imports is forked again, and the tier stays on" {
	local h1 h2 i ends
	wait_for "one heavy template, serving" 300 one_heavy
	h1=$(heavy_pids)
	for i in 1 2 3 4; do
		execute 'import scipy; print(6 * 7)'
		assert_equal "$(field .stdout)" 42
	done
	wait_for "a successor" 100 two_heavy
	h2=$(heavy_pids | grep -vx "$h1")
	ends=$(heavy_ends)
	kill -KILL "$h2"
	# (were it ready already, it was the serving one: then that one crashed)
	wait_for "the kill seen" 100 more_heavy_ends "$ends"
	wait_for "another successor to serve" 300 new_heavy "$h1"$'\n'"$h2"
	for i in 1 2; do
		execute 'import scipy; print(6 * 7)'
		assert_equal "$(field .stdout)" 42
	done
	run grep -c "runs that need its modules import them" "$STACK_DIR/logs/pool.log"
	assert_output 0
	wait_for "a healthy pool" 100 no_run_leftovers
}

@test "warm: the light template is renewed after CODEBOX_WARM_MAX_RUNS runs, and no request fails" {
	local i
	for i in $(seq 1 40); do
		answers_42
	done
	run -0 grep -c "forking the next light template (the serving one's life is up)" "$STACK_DIR/logs/pool.log"
	run grep -c "this run is cold" "$STACK_DIR/logs/pool.log"
	assert_output 0
}
