#!/usr/bin/env bash
# Sessions (issue 25) beside /execute, on one warm stack, in one run: making a session, and one
# small execution (print(1)) in a warm session against one on /execute: p50 and p95 of
# sequential calls on a keep-alive connection, then 20 clients (each in its own session) for
# req/s and the whole host's CPU per answered execution (the client's own CPU subtracted).
# Loopback only; every measurement is bounded.
#
#   usage: scripts/bench-sessions.sh [--seconds S] [--pool BIN] [--count N]
set -euo pipefail

usage() {
	echo "usage: $0 [--seconds S] [--pool BIN] [--count N]"
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/stack-lib.sh disable=SC1091
source "$here/scripts/stack-lib.sh"
seconds=10
count=200
pool="$here/build/codebox-pool"
codebox_bench_options usage --seconds=seconds --pool=pool --count=count -- "$@"
((seconds >= 2 && seconds <= 120 && count >= 10 && count <= 5000)) || {
	echo "bench-sessions: --seconds must be 2..120, --count 10..5000" >&2
	exit 2
}
PY=/usr/bin/python3
driver="$here/scripts/bench-sessions.py"

work=$(mktemp -d /tmp/codebox-bench-sessions.XXXXXX)
chmod 0711 "$work" # runs execute as other uids and must reach their directory
stack=""
cleanup() {
	codebox_stack_stop "$stack"
	rm -rf "$work"
}
trap cleanup EXIT

# 20 clients, each with a session of its own: room for them
conf="$work/conf"
mkdir -p "$conf"
cp "$here"/nginx/*.conf "$conf/"
sed -i -E 's/(CODEBOX_MAX_SESSIONS +)[0-9]+;/\124;/' "$conf/codebox-limits.conf"
CODEBOX_WARM=1 codebox_bench_stack "$work/stack" "$pool" "$here" --conf-dir "$conf" || exit 1
stack=$codebox_pid
base=$codebox_base

# stats: "p50 p95" of the numbers on stdin
stats() {
	sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) { print "- -"; exit }
		printf "%.1f %.1f\n", v[int((NR + 1) / 2)], v[int(NR * 0.95 + 0.999)] }'
}

bare=$(for _ in $(seq 11); do
	t0=${EPOCHREALTIME/./}
	"$PY" -I -c pass
	echo $(((${EPOCHREALTIME/./} - t0) / 1000))
done | sort -n | sed -n 6p)
echo "# sessions beside /execute (warm, every layer on, through nginx)"
echo "# host: $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $(nproc) cores, kernel $(uname -r); bare python3 -I -c pass: $bare ms (median of 11); page tables: see bench-cost's line"
printf "%-46s %8s %8s\n" "sequential, one keep-alive connection (ms)" "p50" "p95"
read -r p50 p95 < <("$PY" "$driver" "$base" create 30 | stats)
printf "%-46s %8s %8s\n" "POST /sessions (a new session, 30 made)" "$p50" "$p95"
read -r p50 p95 < <("$PY" "$driver" "$base" latency "$count" session | stats)
printf "%-46s %8s %8s\n" "print(1) in a warm session ($count)" "$p50" "$p95"
read -r p50 p95 < <("$PY" "$driver" "$base" latency "$count" execute | stats)
printf "%-46s %8s %8s\n" "print(1) on /execute ($count)" "$p50" "$p95"
# snapshots of a session holding a 10 MB DataFrame, a fitted model and a file (issue 43)
"$PY" "$driver" "$base" snapshot 10 >"$work/snapshots"
read -r p50 p95 < <(cut -d' ' -f1 "$work/snapshots" | stats)
printf "%-46s %8s %8s\n" "snapshot of a 10 MB DataFrame session (10)" "$p50" "$p95"
read -r p50 p95 < <(cut -d' ' -f2 "$work/snapshots" | stats)
printf "%-46s %8s %8s\n" "restore of it into a new session (10)" "$p50" "$p95"
read -r bytes b64 < <(head -1 "$work/snapshots" | cut -d' ' -f3,4)
printf "%-46s %8s %8s\n" "its size: state, base64 (bytes)" "$bytes" "$b64"

printf "%-46s %8s %8s %12s\n" "20 clients, ${seconds} s" "req/s" "non-200" "host CPU/req"
for path in session execute; do
	out=$("$PY" "$driver" "$base" load 20 "$seconds" "$path")
	jq -r --arg p "$path" '[(if $p == "session" then "print(1) in 20 sessions" else "print(1) on /execute" end),
		(.ok / .seconds | floor), .other,
		(if .ok > 0 then ((.busy_s - .client_cpu_s) * 1000 / .ok * 100 | round / 100 | tostring) + " ms" else "-" end)] |
		@tsv' <<<"$out" | awk -F'\t' '{ printf "%-46s %8s %8s %12s\n", $1, $2, $3, $4 }'
done
