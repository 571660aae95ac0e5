#!/usr/bin/env bats
# The monitoring overlay's alerts (prometheusrule.yaml) and Grafana dashboard
# (codebox-dashboard.json) query only series that a live GET /metrics has: every codebox_* and
# process_* name in their PromQL is one the pool exports today (make deploy-check runs the
# alerts' unit tests offline; this is the check against the real exposition).

load helpers/stack

MON="$ROOT/deploy/overlays/monitoring"

setup_file() {
	stack_start
}

teardown_file() {
	stack_stop
}

# names_in: the codebox_* and process_* metric names in the PromQL on stdin, one a line
names_in() {
	grep -oE '\b(codebox|process)_[a-z_]+' | sort -u
}

# live_names: every metric name of a live /metrics (its samples' and its HELP/TYPE lines')
live_names() {
	curl -s --max-time 10 "$METRICS/metrics" |
		awk '/^# (HELP|TYPE) / { print $3; next } /^[a-z]/ { sub(/[{ ].*/, ""); print }' | sort -u
}

# missing LIST_FILE: the names of LIST_FILE a live /metrics lacks (none: nothing printed)
missing() {
	live_names >"$BATS_TEST_TMPDIR/live"
	[[ $(wc -l <"$BATS_TEST_TMPDIR/live") -gt 10 ]] || {
		echo "the live /metrics has too few names"
		return 0
	}
	comm -23 "$1" "$BATS_TEST_TMPDIR/live"
}

@test "dashboard: every series the dashboard's panels query is in a live /metrics" {
	execute 'print(1)' # a run, so that every series has moved once
	jq -r '[.. | .expr? // empty] | .[]' "$MON/codebox-dashboard.json" | names_in >"$BATS_TEST_TMPDIR/names"
	# the dashboard covers its rows: traffic, latency, slots, sessions, budget, refusals, warm path
	(($(wc -l <"$BATS_TEST_TMPDIR/names") >= 15))
	run -0 missing "$BATS_TEST_TMPDIR/names"
	assert_output ""
}

@test "dashboard: every series the alerts' expressions use is in a live /metrics" {
	python3 -c '
import sys, yaml
for g in yaml.safe_load(open(sys.argv[1]))["spec"]["groups"]:
    for r in g["rules"]:
        print(r["expr"])' "$MON/prometheusrule.yaml" | names_in >"$BATS_TEST_TMPDIR/names"
	(($(wc -l <"$BATS_TEST_TMPDIR/names") >= 10))
	run -0 missing "$BATS_TEST_TMPDIR/names"
	assert_output ""
}
