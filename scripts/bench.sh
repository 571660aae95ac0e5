#!/usr/bin/env bash
# Latency and throughput of codebox through nginx, next to bare interpreter start-up, all in
# one run on this machine. Loopback only; every loop is bounded in count and time.
#
#   median/p95 of print(1) and of the café program through the service
#   median/p95 of /usr/bin/python3 -I -c pass and -c 'import numpy' started directly
#   throughput of print(1) with wrk at concurrency 4 and 20 (10 s each)
#   print(1) with the isolation layers added one group at a time (CODEBOX_DISABLE)
set -euo pipefail

usage() {
	echo "usage: $0 [--runs N] [--seconds S] [--pool BIN]"
	echo "  --runs N     sequential requests per latency measurement (default 100)"
	echo "  --seconds S  duration of each throughput measurement (default 10)"
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=100
seconds=10
pool="$here/build/codebox-pool"
while (($#)); do
	case $1 in
	--help | -h)
		usage
		exit 0
		;;
	--runs)
		runs=${2:?}
		shift 2
		;;
	--seconds)
		seconds=${2:?}
		shift 2
		;;
	--pool)
		pool=${2:?}
		shift 2
		;;
	*)
		usage >&2
		exit 2
		;;
	esac
done
PY=/usr/bin/python3

work=$(mktemp -d /tmp/codebox-bench.XXXXXX)
chmod 0711 "$work" # runs execute as other uids and must reach their directory
stack=""
cleanup() {
	stack_stop
	rm -rf "$work"
}
trap cleanup EXIT

# stack_start NAME [CODEBOX_DISABLE]: a private stack on a random loopback port
stack_start() {
	local port i
	port=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	CODEBOX_DISABLE=${2:-} "$here/scripts/codebox-run.sh" --port "$port" --rundir "$work/$1" \
		--pool "$pool" --quiet >"$work/$1.out" 2>&1 &
	stack=$!
	base="http://127.0.0.1:$port"
	for ((i = 0; i < 1200; i++)); do
		[[ $(curl -s -o /dev/null -w '%{http_code}' "$base/readyz") == 200 ]] && return 0
		kill -0 "$stack" 2>/dev/null || break
		sleep 0.1
	done
	cat "$work/$1.out" >&2
	exit 1
}

stack_stop() {
	if [[ -n $stack ]]; then
		kill -TERM "$stack" 2>/dev/null || true
		wait "$stack" 2>/dev/null || true
		stack=""
	fi
}

# stats FILE: median and p95 of one number (ms) per line
stats() {
	sort -n "$1" | awk '{ v[NR] = $1 } END {
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		p = v[int(NR * 0.95 + 0.999)]
		printf "%8.2f %8.2f", m, p }'
}

# time_cmd FILE CMD...: runs CMD $runs times, one wall time in ms per line
time_cmd() {
	local out=$1 i t0 t1
	shift
	: >"$out"
	for ((i = 0; i < runs; i++)); do
		t0=${EPOCHREALTIME/./}
		"$@" >/dev/null
		t1=${EPOCHREALTIME/./}
		echo "$(((t1 - t0) / 1000)).$(((t1 - t0) % 1000 / 100))" >>"$out"
	done
}

# time_http FILE BODY: POSTs BODY $runs times; curl's total time in ms per line
time_http() {
	local out=$1 body=$2 i
	: >"$out"
	for ((i = 0; i < runs; i++)); do
		curl -s -o /dev/null --max-time 60 -w '%{time_total}\n' -H 'Content-Type: application/json' \
			--data-binary "$body" "$base/execute" | awk '{ printf "%.2f\n", $1 * 1000 }' >>"$out"
	done
}

# paired FILE BODY: alternates one bare `python3 -I -c pass` and one request, $runs times,
# and records the difference (request - bare) in ms per line, so that drift in the machine's
# speed cancels out.
paired() {
	local out=$1 body=$2 i t0 t1 bare svc
	: >"$out"
	for ((i = 0; i < runs; i++)); do
		t0=${EPOCHREALTIME/./}
		"$PY" -I -c pass
		t1=${EPOCHREALTIME/./}
		bare=$((t1 - t0))
		svc=$(curl -s -o /dev/null --max-time 60 -w '%{time_total}' -H 'Content-Type: application/json' \
			--data-binary "$body" "$base/execute" | awk '{ printf "%d", $1 * 1000000 }')
		awk -v a="$svc" -v b="$bare" 'BEGIN { printf "%.2f\n", (a - b) / 1000 }' >>"$out"
	done
}

cd "$work"
stack_start full
cafe=$(jq -cn --rawfile code "$here/tests/programs/cafe.py" '{code: $code}')
time_http print1.ms '{"code":"print(1)"}'
time_cmd bare-pass.ms "$PY" -I -c pass
time_http cafe.ms "$cafe"
time_cmd bare-numpy.ms "$PY" -I -c 'import numpy'

echo "# codebox bench: $runs sequential runs each; milliseconds"
echo "# isolation: $(curl -s "$base/isolation" | jq -c .layers)"
printf "%-52s %8s %8s\n" "what" "median" "p95"
printf "%-52s %s\n" "service, every layer: print(1)" "$(stats print1.ms)"
printf "%-52s %s\n" "bare: python3 -I -c pass" "$(stats bare-pass.ms)"
printf "%-52s %s\n" "service, every layer: café program (numpy)" "$(stats cafe.ms)"
printf "%-52s %s\n" "bare: python3 -I -c 'import numpy'" "$(stats bare-numpy.ms)"
m1=$(stats print1.ms | awk '{print $1}')
m0=$(stats bare-pass.ms | awk '{print $1}')
echo "added by the service at the median (print(1) - bare pass): $(awk -v a="$m1" -v b="$m0" 'BEGIN { printf "%.2f", a - b }') ms"
paired added.ms '{"code":"print(1)"}'
echo "added by the service, paired (median and p95 of request - bare, alternating): $(stats added.ms) ms"

if command -v wrk >/dev/null; then
	cat >post.lua <<'LUA'
wrk.method = "POST"
wrk.body = '{"code":"print(1)"}'
wrk.headers["Content-Type"] = "application/json"
LUA
	for c in 4 20; do
		wrk -t 2 -c "$c" -d "${seconds}s" --timeout 30s -s post.lua "$base/execute" >"wrk$c.txt"
		rps=$(awk '/Requests\/sec/ { print $2 }' "wrk$c.txt")
		non2xx=$(awk '/Non-2xx/ { print $5 }' "wrk$c.txt")
		echo "throughput print(1) at concurrency $c: $rps requests/s (non-2xx: ${non2xx:-0})"
	done
else
	echo "wrk is not installed: no throughput numbers (scripts/install-deps.sh installs it)"
fi
stack_stop

# Layer by layer: the same print(1) with layers switched off, each paired with bare start-up.
echo "# print(1) layer by layer (CODEBOX_DISABLE): added over bare start-up, paired, in ms"
printf "%-52s %8s %8s\n" "layers on" "median" "p95"
r2=cgroupns,maskedpaths,poolmemory,cpuquota # issue 8's layers
all=userns,pidns,netns,mountns,ipcns,utsns,seccomp,landlock,cgroup,$r2
for variant in "none:$all" "seccomp:userns,pidns,netns,mountns,ipcns,utsns,landlock,cgroup,$r2" \
	"seccomp+landlock:userns,pidns,netns,mountns,ipcns,utsns,cgroup,$r2" \
	"seccomp+landlock+cgroup (direct mode):userns,pidns,netns,mountns,ipcns,utsns,$r2" \
	"+ user and pid namespaces (init):netns,mountns,ipcns,utsns,$r2" \
	"+ net, ipc and uts namespaces:mountns,$r2" "+ mount namespace (round 1 complete):$r2" \
	"+ cgroup namespace:maskedpaths,poolmemory,cpuquota" "+ masked /proc paths:poolmemory,cpuquota" \
	"+ pool memory budget:cpuquota" "every layer (+ CPU quota):"; do
	name=${variant%%:*}
	stack_start "v$RANDOM" "${variant#*:}"
	paired variant.ms '{"code":"print(1)"}'
	stack_stop
	printf "%-52s %s\n" "$name" "$(stats variant.ms)"
done
