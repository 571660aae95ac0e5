#!/usr/bin/env bash
# The fleet's figures (make bench runs it last; docs/OPERATIONS.md's capacity model is made
# of them): for print(1), the café program and the five-module program, the runs a second one
# warm stack serves on this machine's cores (wrk, 20 connections) and so per core, and a run's
# memory (the pool's maxRssBytes, median: what one busy slot holds); then three stacks behind
# the fleet's router (deploy/overlays/scale/router.conf) against one stack alone: latency and
# throughput through the router, and a session's creation and execution (routed by the ordinal
# its id names) through the router against direct; and the host kind (cores, CPU, kernel, whether page tables
# are virtualized in software: pvm_* symbols in perf samples under load). Loopback only;
# every loop is bounded in count and time.
set -euo pipefail

usage() {
	echo "usage: $0 [--seconds S] [--pool BIN]"
	echo "  --seconds S  duration of each throughput measurement (default 10)"
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/stack-lib.sh
source "$here/scripts/stack-lib.sh"
seconds=10
pool="$here/build/codebox-pool"
codebox_bench_options usage --seconds=seconds --pool=pool -- "$@"
command -v wrk >/dev/null || {
	echo "bench-fleet: wrk is not installed (scripts/install-deps.sh installs it)" >&2
	exit 1
}

work=$(mktemp -d /tmp/codebox-bench-fleet.XXXXXX)
chmod 0711 "$work" # runs execute as other uids and must reach their directory
pids=()
cleanup() {
	[[ -d $work/router ]] && codebox_router_stop "$work/router"
	local p
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
cd "$work"

# start_stack NAME ORDINAL: a warm stack with the default limits (20 slots), the fleet's pod
# ORDINAL; its base URL in $base, metrics URL in $metrics
codebox_fleet_key "$work/fleet.key"
start_stack() {
	local fenv
	read -ra fenv <<<"$(codebox_fleet_env "$2" "$work/fleet.key")"
	codebox_stack_exec=(env CODEBOX_WARM=1 "${fenv[@]}")
	codebox_bench_stack "$work/$1" "$pool" "$here" || exit 1
	pids+=("$codebox_pid")
	base=$codebox_base
	metrics=$codebox_metrics
}

# idle METRICS: waits (30 s at most) until no run is in flight there
idle() {
	local i
	for ((i = 0; i < 300; i++)); do
		[[ $(curl -s "$1/metrics" | awk '/^codebox_executions_in_flight / { print $2 }') == 0 ]] && return 0
		sleep 0.1
	done
}

# wrk_rps URL BODY CONNECTIONS: requests per second, and non-2xx answers
wrk_rps() {
	printf 'wrk.method = "POST"\nwrk.body = [==[%s]==]\nwrk.headers["Content-Type"] = "application/json"\n' "$2" >post.lua
	wrk -t 2 -c "$3" -d "${seconds}s" --timeout 30s -s post.lua "$1/execute" >wrk.txt
	awk '/Requests\/sec/ { r = $2 } /Non-2xx/ { n = $5 } END { printf "%.1f", r; if (n) printf " (non-2xx: %s)", n }' wrk.txt
}

# latency URL BODY N: median and p95 of N sequential requests (curl's total time, ms)
latency() {
	local i
	for ((i = 0; i < $3; i++)); do
		curl -s -o /dev/null -w '%{time_total}\n' --max-time 60 --data-binary "$2" "$1/execute"
	done | awk '{ print $1 * 1000 }' | sort -n | awk '{ v[NR] = $1 } END { p = int(NR * 0.95); if (p < 1) p = 1
		printf "%8.2f %8.2f", v[int((NR + 1) / 2)], v[p] }'
}

# session_latency URL N: for N sessions made one after another (each closed after): the median
# and p95 of POST /sessions, then of one execution in it (curl's total time, ms)
session_latency() {
	local i id times
	for ((i = 0; i < $2; i++)); do
		times=$(curl -s -o "$work/session.json" -w '%{time_total}' --max-time 60 -X POST \
			-H 'Content-Type: application/json' --data-binary '{"memoryBytes": 268435456}' "$1/sessions")
		id=$(jq -r .id "$work/session.json")
		times+=" $(curl -s -o /dev/null -w '%{time_total}' --max-time 60 -H 'Content-Type: application/json' \
			--data-binary '{"code":"x = 6 * 7\nx"}' "$1/sessions/$id/execute")"
		curl -s -o /dev/null --max-time 60 -X DELETE "$1/sessions/$id"
		echo "$times"
	done >"$work/session-times"
	local col
	for col in 1 2; do
		awk -v c="$col" '{ print $c * 1000 }' "$work/session-times" | sort -n | awk '{ v[NR] = $1 } END { p = int(NR * 0.95); if (p < 1) p = 1
			printf "%8.2f %8.2f ", v[int((NR + 1) / 2)], v[p] }'
	done
}

# rss_mib NAME FROM: median maxRssBytes of the runs the pool of NAME logged since line
# FROM (MiB)
rss_mib() {
	tail -n +"$2" "$work/$1/logs/pool.log" | jq -r 'select(.maxRssBytes != null) | .maxRssBytes' |
		sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%.1f", v[int((NR + 1) / 2)] / 1048576; else printf "-" }'
}

print1='{"code":"print(1)"}'
# shellcheck disable=SC2034 # read through ${!name}
cafe=$(jq -cn --rawfile code "$here/tests/programs/cafe.py" '{code: $code}')
# shellcheck disable=SC2034
five=$(jq -cn --rawfile code "$here/tests/programs/five.py" '{code: $code}')
cores=$(nproc)

echo "# fleet: one warm stack (20 slots, the five modules preloaded), then three behind the router"
start_stack one 0
one_base=$base one_metrics=$metrics
for ((i = 0; i < 30; i++)); do
	curl -s -o /dev/null --max-time 60 --data-binary "$print1" "$one_base/execute"
done
printf "%-44s %10s %12s %14s\n" "program (one stack, wrk, 20 connections)" "runs/s" "runs/s/core" "MiB per slot"
declare -A rps
for name in print1 cafe five; do
	body=${!name}
	idle "$one_metrics"
	from=$(($(wc -l <"$work/one/logs/pool.log") + 1))
	r=$(wrk_rps "$one_base" "$body" 20)
	rps[$name]=${r%% *}
	printf "%-44s %10s %12s %14s\n" "$name" "$r" "$(awk -v r="${r%% *}" -v c="$cores" 'BEGIN { printf "%.1f", r / c }')" \
		"$(rss_mib one "$from")"
done
# the host kind: pvm_* symbols among the samples of the whole machine under load
pvm="unknown (no perf)"
if command -v perf >/dev/null; then
	idle "$one_metrics"
	printf 'wrk.method = "POST"\nwrk.body = [==[%s]==]\nwrk.headers["Content-Type"] = "application/json"\n' "$print1" >post.lua
	wrk -t 2 -c 20 -d 4s --timeout 30s -s post.lua "$one_base/execute" >/dev/null &
	wrkpid=$!
	if perf record -a -q -o perf.data -- sleep 3 >/dev/null 2>&1; then
		n=$(perf report -i perf.data --stdio --sort sym 2>/dev/null | grep -c 'pvm_' || true)
		pvm=$([[ $n -gt 0 ]] && echo "yes ($n pvm_* symbols in perf samples)" || echo "no (no pvm_* symbol in perf samples)")
	fi
	wait "$wrkpid" || true
fi
echo "host: $cores cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), kernel $(uname -r), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo); page tables virtualized in software: $pvm"

start_stack two 1
two_base=$base
start_stack three 2
three_base=$base
codebox_router_start "$work/router" "$(codebox_free_port)" "${one_base#http://}" "${two_base#http://}" \
	"${three_base#http://}"
router=$(awk '/codebox-router-listen/ { sub(";", "", $2); print "http://" $2 }' "$work/router/conf/router.conf")
for ((i = 0; i < 30; i++)); do
	curl -s -o /dev/null --max-time 60 --data-binary "$print1" "$router/execute"
done
printf "%-44s %8s %8s\n" "print(1), 50 sequential (ms)" "median" "p95"
printf "%-44s %s\n" "one stack, direct" "$(latency "$one_base" "$print1" 50)"
printf "%-44s %s\n" "three stacks behind the router" "$(latency "$router" "$print1" 50)"
printf "%-44s %8s %8s %8s %8s\n" "sessions, 30 one after another (ms)" "create" "p95" "execute" "p95"
printf "%-44s %s\n" "one stack, direct" "$(session_latency "$one_base" 30)"
printf "%-44s %s\n" "three stacks behind the router" "$(session_latency "$router" 30)"
for name in print1 cafe; do
	body=${!name}
	idle "$one_metrics"
	echo "fleet: $name at 60 connections through the router (3 x 20 slots): $(wrk_rps "$router" "$body" 60) req/s; one stack at 20: ${rps[$name]} req/s"
done
echo "fleet: the router's 429 retries during that load: $(grep -c '"upstreamStatus":"429, ' "$work/router/access.log" || true); answers that were not 200 (499: wrk's connections cut at its end): $(jq -r 'select(.uri == "/execute" and .status != 200) | .status' "$work/router/access.log" | sort | uniq -c | awk '{ printf "%s x %s ", $2, $1 }')"
