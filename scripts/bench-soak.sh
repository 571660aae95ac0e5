#!/usr/bin/env bash
# A mixed soak against a private stack, and the workers' memory over it (issue 24): CLIENTS
# clients each send, in turn, print(1), a run that writes an 8 MiB artifact (artifacts: true),
# an MCP tools/call that draws a chart, and a run given 100 input files, for SECONDS seconds
# (bounded in time, and in count: at most 100000 requests). Every INTERVAL seconds it pauses
# the clients, waits until no run is in flight, and prints the workers' summed PSS (what they
# keep between requests) and the requests so far; at the end, the PSS after the first minute
# against its last value and its largest, and whether it stayed within 10%. Loopback only.
set -euo pipefail

usage() {
	echo "usage: $0 [--seconds S] [--clients N] [--interval S] [--pool BIN]"
	echo "  --seconds S   how long the load runs (default 900)"
	echo "  --clients N   concurrent clients (default 6)"
	echo "  --interval S  seconds between two samples of the workers' PSS (default 30)"
	echo "  --pool BIN    the pool binary (default build/codebox-pool)"
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/stack-lib.sh
source "$here/scripts/stack-lib.sh"
seconds=900
clients=6
interval=30
pool="$here/build/codebox-pool"
codebox_bench_options usage --seconds=seconds --clients=clients --interval=interval \
	--pool=pool -- "$@"

work=$(mktemp -d /tmp/codebox-soak.XXXXXX)
chmod 0711 "$work"
stack=""
loaders=()
cleanup() {
	local p
	for p in "${loaders[@]}"; do
		kill "$p" 2>/dev/null || true
	done
	codebox_stack_stop "$stack"
	rm -rf "$work"
}
trap cleanup EXIT

CODEBOX_WARM=1 codebox_bench_stack "$work/stack" "$pool" "$here" || exit 1
stack=$codebox_pid
base=$codebox_base
metrics="$codebox_metrics/metrics"

# the four requests, as files
jq -cn '{code: "print(1)"}' >"$work/print.json"
jq -cn '{code: "open(\"big.bin\", \"wb\").write(bytes(8 << 20))\nprint(1)", artifacts: true}' >"$work/artifact.json"
jq -cn --arg code "$(cat "$here/tests/programs/plot.py")" \
	'{jsonrpc: "2.0", id: 1, method: "tools/call", params: {name: "code_executor", arguments: {code: $code}}}' >"$work/mcp.json"
jq -cn '{code: "import os\nprint(len(os.listdir(\"in\")))", artifacts: true,
	files: [range(100) | {path: ("in/f-" + tostring + ".txt"), content: ("x" * 100)}]}' >"$work/files.json"

# the workers' PSS in KiB: the supervisor's children but its zygote, templates and inits
workers_pss_kb() {
	local pp p comm v kb=0
	pp=$(pgrep -o -f -- "--runs-dir $work/stack/runs" || true)
	for p in $(pgrep -P "${pp:-1}" || true); do
		comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
		[[ $comm == codebox-zygote || $comm == codebox-init || $comm == exe ||
			$comm == codebox-warm || $comm == codebox-heavy ]] && continue
		v=$(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null || true)
		kb=$((kb + ${v:-0}))
	done
	echo "$kb"
}

load() { # N: one client's loop, bounded by the deadline and 100000 requests in all
	local deadline=$1 i=0 f w
	while ((SECONDS < deadline && i < 100000 / clients)); do
		for f in print artifact mcp files; do
			# the sampler measures what workers keep between requests: it pauses the load
			for ((w = 0; w < 600; w++)); do
				[[ -e $work/pause ]] || break
				sleep 0.1
			done
			if [[ $f == mcp ]]; then
				curl -s -o /dev/null --max-time 60 -H 'Content-Type: application/json' \
					-H 'Accept: application/json, text/event-stream' \
					--data-binary "@$work/$f.json" "$base/mcp" || true
			else
				curl -s -o /dev/null --max-time 60 -H 'Content-Type: application/json' \
					--data-binary "@$work/$f.json" "$base/execute" || true
			fi
			echo x >>"$work/count.$BASHPID"
		done
		i=$((i + 4))
	done
}

deadline=$((SECONDS + seconds))
for ((c = 0; c < clients; c++)); do
	load "$deadline" &
	loaders+=($!)
done
echo "soak: $clients clients for $seconds s against $base (host: $(nproc) cores)"
printf '%8s %10s %12s\n' seconds requests workers_pss_mib
first=""
max=0
last=0
start=$SECONDS
# quiet: every client paused between two requests, no run in flight (bounded: 30 s)
quiet() {
	local w
	: >"$work/pause"
	for ((w = 0; w < 300; w++)); do
		[[ $(curl -s "$metrics" | awk '/^codebox_executions_in_flight / { print $2 }') == 0 ]] && break
		sleep 0.1
	done
	sleep 1 # the replies' last bytes, the workers' clean-up after them
}
while ((SECONDS < deadline)); do
	sleep "$interval"
	quiet
	kb=$(workers_pss_kb)
	rm -f "$work/pause"
	n=$(cat "$work"/count.* 2>/dev/null | wc -l)
	printf '%8d %10d %12.1f\n' $((SECONDS - start)) "$n" "$(awk -v k="$kb" 'BEGIN { print k / 1024 }')"
	if ((SECONDS - start >= 60)); then
		[[ -n $first ]] || first=$kb
		((kb > max)) && max=$kb
		last=$kb
	fi
done
wait "${loaders[@]}" 2>/dev/null || true
loaders=()
if [[ -n $first ]]; then
	awk -v f="$first" -v m="$max" -v l="$last" 'BEGIN {
		printf "soak: workers PSS after the first minute %.1f MiB, last %.1f, largest %.1f (%+.1f%%): %s\n",
			f / 1024, l / 1024, m / 1024, (m - f) * 100 / f, (m <= f * 1.1) ? "flat within 10%" : "NOT flat" }'
fi
