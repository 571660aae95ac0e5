#!/usr/bin/env bash
# Latency, throughput and memory of codebox through nginx, warm and cold side by side, next to
# bare interpreter start-up, all in one run on this machine. Loopback only; every loop is
# bounded in count and time.
#
#   references: /usr/bin/python3 -I -c pass, -c 'import numpy', the five modules, started directly
#   per mode (warm: CODEBOX_WARM=1, cold: CODEBOX_WARM=0), every isolation layer on:
#     median/p95 of print(1), the café program (numpy) and the five-module program
#     throughput of print(1) and of the café program with wrk at 4 and 20 connections
#     the whole stack's PSS (nginx, supervisor, zygote, workers, templates) after warm-up
#   the cost of a run (scripts/bench-cost.sh): the whole host's CPU per request at 20 clients
#     (the client's subtracted) and its split by process role, warm, cold and cold_peer.py
#   the floor (../shared/yardstick/fork_peer.py: a bare fork of a warm interpreter, no
#     isolation): print(1) and the café program, sequential, and warm's latency against it
#   sessions (scripts/bench-sessions.sh): making a session, and print(1) in a warm session
#     beside /execute's: p50/p95, req/s and host CPU per execution at 20 clients
#   the fleet (scripts/bench-fleet.sh): runs/s per core and memory per slot of print(1), the
#     café and the five-module programs, three stacks behind the router, the host kind
#   --layers: print(1) with the isolation layers added one group at a time (cold, CODEBOX_DISABLE),
#     and warm print(1) throughput per layer group (wrk, 20 connections, rounds interleaved)
#   --before REV: the same warm measurements for the pool built from git revision REV (in a
#     worktree of its own), run right after this build's, so the two are compared in one run
#   every latency row also gives the median CPU time of a run (details.cpuMs: the program's
#   processes and init, as the service measures them)
set -euo pipefail

usage() {
	echo "usage: $0 [--runs N] [--seconds S] [--pool BIN] [--layers] [--before REV]"
	echo "  --runs N     sequential requests per latency measurement (default 100)"
	echo "  --seconds S  duration of each throughput measurement (default 10)"
	echo "  --layers     also measure the cost of each isolation layer (cold latency, warm throughput)"
	echo "  --before REV also measure warm runs of the pool built from git revision REV"
	echo "  --faults-only  only the warm path under kills and renewals"
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/stack-lib.sh
source "$here/scripts/stack-lib.sh"
runs=100
seconds=10
layers=0
faults_only=0
before=""
pool="$here/build/codebox-pool"
codebox_bench_options usage --runs=runs --seconds=seconds --pool=pool --layers=layers:1 \
	--before=before --faults-only=faults_only:1 -- "$@"
PY=/usr/bin/python3

work=$(mktemp -d /tmp/codebox-bench.XXXXXX)
chmod 0711 "$work" # runs execute as other uids and must reach their directory
stack=""
before_tree=""
now_stack=""
fork_peer_pid=""
before_stack=""
cleanup() {
	codebox_stack_stop "$fork_peer_pid"
	stack_stop
	for s in $now_stack $before_stack; do
		codebox_stack_stop "$s"
	done
	if [[ -n $before_tree ]]; then
		git -C "$here" worktree remove --force "$before_tree" >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# stack_start NAME [CODEBOX_DISABLE] [CODEBOX_WARM] [POOL] [TREE]: a private stack on a random
# loopback port. A revision's pool starts with that revision's own codebox-run.sh and config
# (TREE): its options and its nginx config may differ from this checkout's
stack_start() {
	CODEBOX_DISABLE=${2:-} CODEBOX_WARM=${3:-0} codebox_bench_stack "$work/$1" "${4:-$pool}" \
		"${5:-$here}" || exit 1
	stack=$codebox_pid
	base=$codebox_base
	agent_base=$codebox_agent
	metrics_base=$codebox_metrics
}

stack_stop() {
	codebox_stack_stop "$stack"
	stack=""
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

# time_http FILE BODY: POSTs BODY (with details) $runs times; curl's total time in ms per line
# of FILE, the run's details.cpuMs per line of FILE.cpu
time_http() {
	local out=$1 body i
	body=$(jq -c '. + {details: true}' <<<"$2")
	: >"$out"
	: >"$out.cpu"
	for ((i = 0; i < runs; i++)); do
		curl -s -o reply.json --max-time 60 -w '%{time_total}\n' -H 'Content-Type: application/json' \
			-H "X-Request-Id: bench-${out//[^A-Za-z0-9.-]/-}-$i" \
			--data-binary "$body" "$base/execute" | awk '{ printf "%.2f\n", $1 * 1000 }' >>"$out"
		jq -r '.details.cpuMs // empty' reply.json >>"$out.cpu"
	done
}

# faults MODE FILE: the median minor faults of the runs time_http made for FILE on MODE's stack
# (each run's page faults: pages it touched, or copied from its template; the pool's log line)
faults() {
	jq -r --arg p "bench-${2//[^A-Za-z0-9.-]/-}-" \
		'select((.requestId // "") | startswith($p)) | .minorFaults // empty' \
		"$work/$1/logs/pool.log" >"$2.faults" 2>/dev/null || true
	[[ -s $2.faults ]] && median "$2.faults" || echo "?"
}

# time_agent FILE COMMAND: runs COMMAND on port 8888 $runs times; curl's total time in ms per
# line (the protocol has no details: no CPU time)
time_agent() {
	local out=$1 body i
	body=$(jq -cn --arg c "$2" '{command: $c}')
	: >"$out"
	for ((i = 0; i < runs; i++)); do
		curl -s -o agent.json --max-time 60 -w '%{time_total}\n' -H 'Content-Type: application/json' \
			--data-binary "$body" "$agent_base/execute" | awk '{ printf "%.2f\n", $1 * 1000 }' >>"$out"
		[[ $(jq -r .exit_code agent.json) == 0 ]] || {
			echo "bench: the command failed on port 8888: $(cat agent.json)" >&2
			exit 1
		}
	done
}

# median FILE: the median of one number per line
median() {
	stats "$1" | awk '{ print $1 }'
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

# pss_mb NAME: the proportional set size of the stack NAME (nginx and the pool with every
# descendant: zygote, workers, templates, sandboxes built ahead), in MiB
pss_mb() {
	local roots pids p kb=0 v
	roots=$(pgrep -f -- "$work/$1" || true)
	pids=$(ps -e -o pid=,ppid= | awk -v roots="$roots" '
		BEGIN { n = split(roots, r, /[ \n]+/); for (i = 1; i <= n; i++) if (r[i] != "") keep[r[i]] = 1 }
		{ parent[$1] = $2 }
		END { for (changed = 1; changed;) { changed = 0
			for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; changed = 1 } }
			for (p in keep) print p }')
	for p in $pids; do
		v=$(awk '/^Pss:/ { print $2 }' "/proc/$p/smaps_rollup" 2>/dev/null || true)
		kb=$((kb + ${v:-0}))
	done
	awk -v kb="$kb" 'BEGIN { printf "%.0f", kb / 1024 }'
}

# idle: waits (at most 30 s) until no run is in flight. wrk ends with every connection's
# request in flight, and those runs are abandoned: until they are torn down they hold their
# execution slots, and the next measurement would meet them as 429s.
idle() {
	local i
	for ((i = 0; i < 300; i++)); do
		[[ $(curl -s "$metrics_base/metrics" | awk '/^codebox_executions_in_flight / { print $2 }') == 0 ]] && return 0
		sleep 0.1
	done
	echo "bench: runs still in flight after 30 s" >&2
}

# wrk_rps BODY CONNECTIONS: requests per second (and non-2xx) with wrk
wrk_rps() {
	idle
	printf 'wrk.method = "POST"\nwrk.body = [==[%s]==]\nwrk.headers["Content-Type"] = "application/json"\n' "$1" >post.lua
	wrk -t 2 -c "$2" -d "${seconds}s" --timeout 30s -s post.lua "$base/execute" >wrk.txt
	awk '/Requests\/sec/ { r = $2 } /Non-2xx/ { n = $5 } END { printf "%.1f", r; if (n) printf " (non-2xx: %s)", n }' wrk.txt
}

cd "$work"
print1='{"code":"print(1)"}'
cafe=$(jq -cn --rawfile code "$here/tests/programs/cafe.py" '{code: $code}')
five=$(jq -cn --rawfile code "$here/tests/programs/five.py" '{code: $code}')
plot=$(jq -cn --rawfile code "$here/tests/programs/plot.py" '{code: $code, artifacts: true}')
if ((!faults_only)); then
time_cmd bare-pass.ms "$PY" -I -c pass
time_cmd bare-numpy.ms "$PY" -I -c 'import numpy'
runs_saved=$runs
runs=$(((runs + 9) / 10))
time_cmd bare-five.ms "$PY" -I -c 'import numpy, pandas, scipy, sympy, sklearn'
# the chart program run directly, with matplotlib's font cache built ahead (as in a run), and
# its figure written as a PNG, as a run's is
MPLCONFIGDIR=/usr/local/share/codebox/matplotlib MPLBACKEND=agg time_cmd bare-plot.ms "$PY" -I -c \
	"import runpy, matplotlib.pyplot as plt; runpy.run_path('$here/tests/programs/plot.py'); plt.savefig('$work/bare-plot.png')"
runs=$runs_saved

echo "# codebox bench: $runs sequential runs each (the cold five-module program: $(((runs + 9) / 10))); milliseconds"
echo "# $(nproc) cores, shared: other processes on this machine add noise"
printf "%-50s %8s %8s   %s\n" "what" "median" "p95" "(cpu: details.cpuMs median, p95; faults: minor faults per run, median)"
printf "%-50s %s\n" "bare: python3 -I -c pass" "$(stats bare-pass.ms)"
printf "%-50s %s\n" "bare: python3 -I -c 'import numpy'" "$(stats bare-numpy.ms)"
printf "%-50s %s\n" "bare: python3 -I -c 'import <the five modules>'" "$(stats bare-five.ms)"
printf "%-50s %s\n" "bare: python3 -I plot.py (matplotlib, cached fonts)" "$(stats bare-plot.ms)"

# the floor of a warm design (../shared/yardstick/fork_peer.py): a fork of an interpreter that
# has imported numpy, as the light tier has, with no isolation at all; sequential requests, as
# the rows below (its children inherit each other's pipes, so under concurrency an answer
# waits on other requests' children: it is measured one request at a time)
fork_peer=$here/../shared/yardstick/fork_peer.py
if [[ -f $fork_peer ]]; then
	port=$(codebox_free_port)
	"$PY" "$fork_peer" "$port" --modules numpy >"$work/fork-peer.out" 2>&1 &
	fork_peer_pid=$!
	base=http://127.0.0.1:$port
	for ((i = 0; i < 300; i++)); do
		curl -s -o /dev/null --max-time 2 --data-binary "$print1" "$base/execute" && break
		sleep 0.1
	done
	for ((i = 0; i < 10; i++)); do
		curl -s -o /dev/null --max-time 60 --data-binary "$print1" "$base/execute"
	done
	time_http floor-print1.ms "$print1"
	time_http floor-cafe.ms "$cafe"
	codebox_stack_stop "$fork_peer_pid"
	fork_peer_pid="" base=""
	printf "%-50s %s\n" "floor (fork_peer.py, no isolation): print(1)" "$(stats floor-print1.ms)"
	printf "%-50s %s\n" "floor (fork_peer.py, no isolation): café" "$(stats floor-cafe.ms)"
else
	echo "# no fork_peer.py at $fork_peer: no floor"
fi

modes=(warm cold)
if [[ -n $before ]]; then
	# the pool of revision REV and its nginx module, built in a worktree of its own (its stack
	# is started by its own codebox-run.sh, with its own config)
	before_tree="$work/before-tree"
	git -C "$here" worktree add --detach "$before_tree" "$before" >/dev/null
	make -C "$before_tree" --no-print-directory build/codebox-pool \
		build/nginx/ngx_http_codebox_module.so >"$work/before-build.log" 2>&1 ||
		{
			cat "$work/before-build.log" >&2
			exit 1
		}
	echo "# before: $(git -C "$here" rev-parse --short "$before") ($before), built in a worktree"
fi

for mode in "${modes[@]}"; do
	stack_start "$mode" "" "$([[ $mode == cold ]] && echo 0 || echo 1)"
	echo "# $mode: interpreter $(curl -s "$base/isolation" | jq -r .details.interpreter), layers $(curl -s "$base/isolation" | jq -c '[.layers | to_entries[] | select(.value) | .key] | join(",")')"
	# warm-up: every worker has served and built its next sandbox
	for ((i = 0; i < 30; i++)); do
		curl -s -o /dev/null --max-time 60 --data-binary "$print1" "$base/execute"
	done
	time_http "$mode-print1.ms" "$print1"
	time_http "$mode-cafe.ms" "$cafe"
	if [[ $mode == cold ]]; then
		runs=$(((runs + 9) / 10))
	fi
	time_http "$mode-five.ms" "$five"
	time_http "$mode-plot.ms" "$plot"
	runs=$runs_saved
	printf "%-50s %s   cpu %s   faults %s\n" "$mode: print(1)" "$(stats "$mode-print1.ms")" "$(stats "$mode-print1.ms.cpu")" "$(faults "$mode" "$mode-print1.ms")"
	printf "%-50s %s   cpu %s   faults %s\n" "$mode: café program (numpy)" "$(stats "$mode-cafe.ms")" "$(stats "$mode-cafe.ms.cpu")" "$(faults "$mode" "$mode-cafe.ms")"
	printf "%-50s %s   cpu %s   faults %s\n" "$mode: five-module program" "$(stats "$mode-five.ms")" "$(stats "$mode-five.ms.cpu")" "$(faults "$mode" "$mode-five.ms")"
	printf "%-50s %s   cpu %s   faults %s\n" "$mode: café chart (plt.show() -> PNG artifact)" "$(stats "$mode-plot.ms")" "$(stats "$mode-plot.ms.cpu")" "$(faults "$mode" "$mode-plot.ms")"
	# port 8888: the same programs as an agent types them, against port 8080's
	curl -s -o /dev/null -F "file=@$here/tests/programs/cafe.py;filename=cafe.py" "$agent_base/upload"
	time_agent "$mode-agent-print1.ms" 'python3 -c "print(1)"'
	time_agent "$mode-agent-cafe.ms" 'python3 cafe.py'
	runs_saved=$runs
	runs=$(((runs + 9) / 10))
	time_agent "$mode-agent-pandas.ms" 'python -c "import pandas; print(pandas.__version__)"'
	time_http "$mode-pandas.ms" '{"code":"import pandas; print(pandas.__version__)"}'
	runs=$runs_saved
	printf "%-50s %s   8080: %s\n" "$mode, port 8888: python3 -c \"print(1)\"" "$(stats "$mode-agent-print1.ms")" "$(median "$mode-print1.ms")"
	printf "%-50s %s   8080: %s\n" "$mode, port 8888: python3 cafe.py" "$(stats "$mode-agent-cafe.ms")" "$(median "$mode-cafe.ms")"
	printf "%-50s %s   8080: %s\n" "$mode, port 8888: python -c \"import pandas\"" "$(stats "$mode-agent-pandas.ms")" "$(median "$mode-pandas.ms")"
	# mixed traffic: each 8080 run after an 8888 command meets the box its worker built ahead
	gone=$(grep -c "the sandbox built ahead is gone" "$work/$mode/logs/pool.log" || true)
	for ((i = 0; i < runs; i++)); do
		curl -s -o /dev/null --max-time 60 --data-binary "$print1" "$base/execute"
		curl -s -o /dev/null --max-time 60 -H 'Content-Type: application/json' \
			--data-binary '{"command":"echo mixed"}' "$agent_base/execute"
	done
	echo "$mode: mixed 8080 + 8888 traffic, $runs of each: $(($(grep -c "the sandbox built ahead is gone" "$work/$mode/logs/pool.log" || true) - gone)) sandboxes built ahead lost"
	echo "$mode: PSS of the whole stack after warm-up: $(pss_mb "$mode") MiB"
	if command -v wrk >/dev/null; then
		for c in 4 20; do
			echo "$mode: throughput at $c connections: print(1) $(wrk_rps "$print1" "$c") req/s, café $(wrk_rps "$cafe" "$c") req/s"
		done
		echo "$mode: PSS of the whole stack after the load: $(pss_mb "$mode") MiB"
	else
		echo "wrk is not installed: no throughput numbers (scripts/install-deps.sh installs it)"
	fi
	stack_stop
done

fi

# ---- the warm path under faults and renewals (issue 18's goals) ----
# metric NAME: the sum of a /metrics series (every label)
metric() {
	curl -s "$metrics_base/metrics" | awk -v n="$1" '$1 == n || index($1, n "{") == 1 { s += $2 } END { print s + 0 }'
}

# cold_fallbacks: runs that could have been warm and were cold (no zygote, a template failed)
cold_fallbacks() {
	echo $(($(metric 'codebox_warm_fallbacks_total{reason="no_zygote"}') + $(metric 'codebox_warm_fallbacks_total{reason="template"}')))
}

# load SECONDS TAG: four clients for SECONDS (at most 2000 requests each), two sending print(1)
# and two a heavy program (scipy: the heavy tier); one line "ms http-status run-status" per
# request in TAG-light.lat and TAG-heavy.lat
load() {
	local until=$((EPOCHSECONDS + $1)) tag=$2 c
	: >"$tag-light.lat"
	: >"$tag-heavy.lat"
	local pids=()
	for c in light light heavy heavy; do
		(
			body=$print1
			[[ $c == heavy ]] && body='{"code":"import scipy.special\nprint(scipy.special.gamma(5))"}'
			me="$tag-$c.$BASHPID"
			for ((n = 0; n < 2000 && EPOCHSECONDS < until; n++)); do
				curl -s -o "$me.json" --max-time 60 -w '%{time_total} %{http_code}\n' \
					--data-binary "$body" "$base/execute" >"$me.w" || true
				read -r t h <"$me.w"
				printf '%.2f %s %s\n' "$(awk -v t="$t" 'BEGIN { print t * 1000 }')" "$h" \
					"$(jq -r .status "$me.json" 2>/dev/null || echo none)" >>"$tag-$c.lat"
			done
			rm -f "$me.json" "$me.w"
		) &
		pids+=($!)
	done
	# these clients only: the stack runs in the background too
	wait "${pids[@]}"
}

# p99 FILE: the 99th percentile of the first column; bad FILE: requests not 200 + succeeded
p99() {
	sort -n "$1" | awk '{ v[NR] = $1 } END { printf "%.1f", v[int(NR * 0.99 + 0.999)] }'
}
bad() {
	awk '$2 != 200 || $3 != "succeeded"' "$1" | wc -l
}

echo "# warm under renewals and kills: 4 clients (2 print(1), 2 heavy: scipy), p99 in ms"
stack_start steady "" 1
for ((i = 0; i < 30; i++)); do
	curl -s -o /dev/null --max-time 60 --data-binary "$print1" "$base/execute"
done
load 20 steady
printf "%-50s light p99 %s, heavy p99 %s, bad %s\n" "steady (no renewal), 20 s:" \
	"$(p99 steady-light.lat)" "$(p99 steady-heavy.lat)" "$(($(bad steady-light.lat) + $(bad steady-heavy.lat)))"
# kills under load: the heavy template, then the zygote (and its templates with it)
for victim in heavy zygote; do
	fb=$(cold_fallbacks)
	hl=$(metric 'codebox_warm_fallbacks_total{reason="heavy_to_light"}')
	load 25 "kill-$victim" &
	loader=$!
	sleep 3
	zygote=$(pgrep -x -P "$(pgrep -o -f -- "--runs-dir $work/steady/runs")" codebox-zygote || true)
	if [[ $victim == heavy ]]; then
		killed_ms=$(date +%s%3N)
		pkill -KILL -x -P "$zygote" codebox-heavy || echo "bench: no heavy template to kill" >&2
	else
		kill -KILL "$zygote" || echo "bench: no zygote to kill" >&2
	fi
	wait "$loader"
	printf "%-50s light max %s, heavy max %s ms; cold fallbacks %s (4 runs in flight at most), heavy on light %s; bad %s\n" \
		"SIGKILL of the $victim under load, 25 s:" \
		"$(sort -n "kill-$victim-light.lat" | tail -1 | cut -d' ' -f1)" \
		"$(sort -n "kill-$victim-heavy.lat" | tail -1 | cut -d' ' -f1)" \
		"$(($(cold_fallbacks) - fb))" "$(($(metric 'codebox_warm_fallbacks_total{reason="heavy_to_light"}') - hl))" \
		"$(($(bad "kill-$victim-light.lat") + $(bad "kill-$victim-heavy.lat")))"
	if [[ $victim == heavy ]]; then
		# the window in which heavy runs go to the light tier (and import their modules as
		# cold): from the kill to its successor's "heavy template ready", one import
		printf "%-50s %s ms\n" "  its unplanned window (kill to successor ready):" "$(jq -r --argjson k "$killed_ms" '
			select(.msg? // "" | startswith("heavy template ready"))
			| (.time | sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601) * 1000 + (.time | capture("\\.(?<ms>[0-9]+)Z$").ms | tonumber)
			| select(. >= $k) | . - $k' "$work/steady/logs/pool.log" 2>/dev/null | head -1)"
	fi
done
stack_stop
CODEBOX_WARM_MAX_SECONDS=8 stack_start renew "" 1
for ((i = 0; i < 30; i++)); do
	curl -s -o /dev/null --max-time 60 --data-binary "$print1" "$base/execute"
done
starts=$(metric codebox_zygote_starts_total)
fb=$(metric codebox_warm_fallbacks_total)
load 40 renew
printf "%-50s light p99 %s, heavy p99 %s, bad %s, fallbacks %s, zygote renewals %s\n" \
	"CODEBOX_WARM_MAX_SECONDS=8, 40 s:" "$(p99 renew-light.lat)" "$(p99 renew-heavy.lat)" \
	"$(($(bad renew-light.lat) + $(bad renew-heavy.lat)))" "$(($(metric codebox_warm_fallbacks_total) - fb))" \
	"$(($(metric codebox_zygote_starts_total) - starts))"
stack_stop

# CPU per run, warm against cold (details.cpuMs medians): what holds where CPU is the limit
((faults_only)) && exit 0
for prog in print1 cafe five plot; do
	awk -v w="$(median "warm-$prog.ms.cpu")" -v c="$(median "cold-$prog.ms.cpu")" -v p="$prog" \
		-v fw="$(median "warm-$prog.ms.faults" 2>/dev/null)" -v fc="$(median "cold-$prog.ms.faults" 2>/dev/null)" \
		'BEGIN { printf "%-50s %8.2f   (%s / %s ms; minor faults %s / %s)\n", "cpu per run, warm/cold: " p, (c > 0 ? w / c : 0), w, c, fw, fc }'
done

# codebox warm against the floor: what isolation and the service add to a bare fork
for prog in print1 cafe; do
	[[ -s floor-$prog.ms && -s warm-$prog.ms ]] || continue
	awk -v w="$(median "warm-$prog.ms")" -v f="$(median "floor-$prog.ms")" -v p="$prog" \
		'BEGIN { printf "%-50s %8.2f   (%s / %s ms, medians)\n", "latency, warm/floor (fork_peer.py): " p, (f > 0 ? w / f : 0), w, f }'
done

if [[ -n $before ]]; then
	# This build's warm stack and REV's, both up at once, measured alternately (one request
	# to each in turn; wrk rounds interleaved), so that the machine's drift falls on both.
	echo "# warm, this build against $before, side by side: alternate requests; wrk rounds interleaved (median of 3)"
	stack_start now "" 1
	now_stack=$stack now_base=$base
	stack_start before "" 1 "$before_tree/build/codebox-pool" "$before_tree"
	before_stack=$stack before_base=$base
	for b in "$now_base" "$before_base"; do
		for ((i = 0; i < 30; i++)); do
			curl -s -o /dev/null --max-time 60 --data-binary "$print1" "$b/execute"
		done
	done
	for prog in print1 cafe five; do
		body=${!prog}
		: >"now-$prog.ms"
		: >"before-$prog.ms"
		: >"now-$prog.ms.cpu"
		: >"before-$prog.ms.cpu"
		runs_saved=$runs
		for ((r = 0; r < runs_saved; r++)); do
			runs=1
			for side in now before; do
				base=$([[ $side == now ]] && echo "$now_base" || echo "$before_base")
				time_http one.ms "$body"
				cat one.ms >>"$side-$prog.ms"
				cat one.ms.cpu >>"$side-$prog.ms.cpu"
			done
		done
		runs=$runs_saved
		for side in now before; do
			printf "%-50s %s   cpu %s\n" "$side: $prog" "$(stats "$side-$prog.ms")" "$(stats "$side-$prog.ms.cpu")"
		done
		awk -v a="$(stats "now-$prog.ms" | awk '{ print $1 }')" -v b="$(stats "before-$prog.ms" | awk '{ print $1 }')" \
			-v p="$prog" 'BEGIN { printf "%-50s %8.2f\n", "ratio now/before (median): " p, a / b }' 
	done
	if command -v wrk >/dev/null; then
		declare -A tput
		for _ in 1 2 3; do
			for side in now before; do
				base=$([[ $side == now ]] && echo "$now_base" || echo "$before_base")
				for prog in print1 cafe; do
					tput[$side-$prog]+=" $(wrk_rps "${!prog}" 20 | cut -d' ' -f1)"
				done
			done
		done
		for side in now before; do
			for prog in print1 cafe; do
				printf "%-50s %8s (%s)\n" "$side: $prog req/s at 20 connections" \
					"$(tr ' ' '\n' <<<"${tput[$side-$prog]}" | grep . | sort -n | sed -n 2p)" "${tput[$side-$prog]# }"
			done
		done
	fi
	# a session's cells: print(1) and the café program, this build's cell layer against
	# REV's (issue 44: within 1 ms p50)
	echo 'print(1)' >"$work/print1.py"
	"$PY" "$here/scripts/bench-cells.py" "$now_base" "$before_base" "$((runs * 4))" \
		"print1=$work/print1.py" "cafe=$here/tests/programs/cafe.py"
	stack=$now_stack
	stack_stop
	stack=$before_stack
	stack_stop
	now_stack="" before_stack=""
fi
# the fleet: runs a second per core, memory per slot, three stacks behind the router
"$here/scripts/bench-fleet.sh" --seconds "$seconds" --pool "$pool"
"$here/scripts/bench-cost.sh" --seconds "$seconds" --pool "$pool"
# sessions beside /execute: making one, an execution in a warm one (issue 25)
"$here/scripts/bench-sessions.sh" --seconds "$seconds" --pool "$pool"
((layers)) || exit 0

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

# Warm throughput per layer group: the CPU each group costs per run, which latency hides (the
# sandboxes are built ahead of the request). Three rounds, the variants interleaved in each,
# so that drift in the machine's speed falls on all of them; the median round is reported.
echo "# warm print(1) throughput per layer group (wrk, 20 connections, ${seconds} s, median of 3 rounds)"
printf "%-52s %8s %s\n" "layers on" "req/s" "(rounds)"
groups=("every layer:" "user and pid namespaces only (init):netns,mountns,ipcns,utsns,seccomp,landlock,cgroup,$r2"
	"+ net, mount, ipc and uts namespaces:seccomp,landlock,cgroup,$r2"
	"+ seccomp, Landlock, cgroup (round 1 complete):$r2")
declare -A rounds
for _ in 1 2 3; do
	for variant in "${groups[@]}"; do
		stack_start "t$RANDOM" "${variant#*:}" 1
		for ((i = 0; i < 30; i++)); do
			curl -s -o /dev/null --max-time 60 --data-binary "$print1" "$base/execute"
		done
		rounds[$variant]+=" $(wrk_rps "$print1" 20 | cut -d' ' -f1)"
		stack_stop
	done
done
for variant in "${groups[@]}"; do
	printf "%-52s %8s (%s)\n" "${variant%%:*}" \
		"$(tr ' ' '\n' <<<"${rounds[$variant]}" | grep . | sort -n | sed -n 2p)" "${rounds[$variant]# }"
done
