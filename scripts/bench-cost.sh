#!/usr/bin/env bash
# The cost of a run (issue 26): the whole host's CPU per request at 20 keep-alive clients,
# everything counted but the client (nginx, the pool, the templates, init, the program, the
# kernel's threads), for print(1), the café program and the five-module program, warm and
# cold, beside the plainest cold-spawning service (../shared/yardstick/cold_peer.py) on the
# same host in the same run. Loopback only; every measurement is bounded in time.
#
#   per program and path: req/s, host CPU per request (the client's own CPU subtracted), the
#   run's details.cpuMs (median of 20), and, with perf, the split of the request's CPU by
#   process role (from `perf record -a`'s samples by command name, scaled to the clean
#   measurement: perf runs in a second round so its own cost is not counted)
#   then the ratios that issue 26's goal is stated in: codebox warm / the peer
#
#   usage: scripts/bench-cost.sh [--seconds S] [--pool BIN] [--peer PATH]
set -euo pipefail

usage() {
	echo "usage: $0 [--seconds S] [--pool BIN] [--peer PATH]"
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/stack-lib.sh disable=SC1091
source "$here/scripts/stack-lib.sh"
seconds=10
pool="$here/build/codebox-pool"
peer="$here/../shared/yardstick/cold_peer.py"
codebox_bench_options usage --seconds=seconds --pool=pool --peer=peer -- "$@"
((seconds >= 2 && seconds <= 120)) || {
	echo "bench-cost: --seconds must be 2..120" >&2
	exit 2
}
PY=/usr/bin/python3

work=$(mktemp -d /tmp/codebox-bench-cost.XXXXXX)
chmod 0711 "$work" # runs execute as other uids and must reach their directory
stack=""
peer_pid=""
cleanup() {
	codebox_stack_stop "$stack"
	codebox_stack_stop "$peer_pid"
	rm -rf "$work"
}
trap cleanup EXIT
cd "$work"

hz=$(getconf CLK_TCK)
have_perf=0
if command -v perf >/dev/null && perf record -q -a -o /dev/null -- true >/dev/null 2>&1; then
	have_perf=1
fi
# busy: the whole host's busy jiffies (user nice system irq softirq steal)
busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }

# host_kind: what the figures depend on
host_kind() {
	local model kernel pvm bare
	model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
	kernel=$(uname -r)
	# software page tables show as pvm_* symbols in the samples of a fork-heavy load (a
	# kernel may have the symbols and not use them)
	pvm="page tables: unknown (no perf)"
	if ((have_perf)); then
		perf record -q -a -o pvm.data -- sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do '"$PY"' -I -c pass; done' >/dev/null 2>&1
		# grep reads it all: -q would end perf with SIGPIPE, and pipefail would say no
		if perf report -q -i pvm.data --sort sym --stdio 2>/dev/null | grep 'pvm_' >/dev/null; then
			pvm="software page tables (pvm_* in perf's samples)"
		else
			pvm="hardware page tables (no pvm_* in perf's samples)"
		fi
		rm -f pvm.data
	fi
	bare=$(for _ in $(seq 11); do
		t0=${EPOCHREALTIME/./}
		"$PY" -I -c pass
		echo $(((${EPOCHREALTIME/./} - t0) / 1000))
	done | sort -n | sed -n 6p)
	echo "# host: $model, $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), kernel $kernel, $pvm; bare python3 -I -c pass: $bare ms (median of 11)"
}

# post_lua BODY: wrk's script
post_lua() {
	printf 'wrk.method = "POST"\nwrk.body = [==[%s]==]\nwrk.headers["Content-Type"] = "application/json"\n' "$1" >post.lua
}

# idle: waits (at most 30 s) until no run is in flight: wrk ends a round by closing its
# connections, and the runs it leaves are killed and torn down, holding their slots for a
# moment; the next round would meet them as 429s
idle() {
	[[ -n ${metrics:-} ]] || return 0
	for _ in $(seq 300); do
		[[ $(curl -s --max-time 2 "$metrics/metrics" | awk '/^codebox_executions_in_flight / { print $2 }') == 0 ]] && return 0
		sleep 0.1
	done
	echo "bench-cost: runs still in flight after 30 s" >&2
}

# wrk_cost URL: one clean round at 20 connections; prints "ANSWERED NON2XX HOST_CPU_MS_PER_REQ":
# the CPU is per 2xx answer (a 429 costs little and would flatter the figure)
wrk_cost() {
	local b0 b1 cl n non
	idle
	b0=$(busy)
	# the subshell's `times` (its second line: its children's) is wrk's CPU: the client's
	# share, subtracted. Not in a pipeline: a pipeline's side is a child with no children
	(
		wrk -t 2 -c 20 -d "${seconds}s" --timeout 30s -s post.lua "$1" >wrk.txt
		times >wrk.times
	)
	b1=$(busy)
	cl=$(tail -1 wrk.times | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); print (u[1] * 60 + u[2] + s[1] * 60 + s[2]) * 1000 }')
	n=$(awk '/requests in/ { print $1 }' wrk.txt)
	non=$(awk '/Non-2xx/ { print $5 }' wrk.txt)
	awk -v n="${n:-0}" -v j=$((b1 - b0)) -v hz="$hz" -v cl="$cl" -v non="${non:-0}" \
		'BEGIN { ok = n - non; printf "%d %d %.2f\n", ok, non, (ok > 0 ? (j * 1000 / hz - cl) / ok : 0) }'
}

# role COMM: the process role a command name belongs to (empty: not counted: the client, idle)
role_of='
function role(c) {
	if (c == "wrk" || c ~ /^swapper/ || c == "perf" || c ~ /^perf-/) return ""
	if (c == "nginx") return "nginx"
	if (c == "codebox-pool") return "pool"
	if (c == "codebox-zygote" || c == "codebox-warm" || c == "codebox-heavy") return "template"
	if (c == "codebox-init") return "init"
	if (c ~ /^(kworker|ksoftirqd|rcu|kdamond|migration|kcompactd|khugepaged|kswapd|cpuhp|irq\/)/) return "kthreads"
	return "program"
}'

# wrk_split URL: a second round under perf record -a; prints "role=percent ..." of the counted
# samples
wrk_split() {
	idle
	perf record -q -a -F 997 -o perf.data -- wrk -t 2 -c 20 -d "${seconds}s" --timeout 30s -s post.lua "$1" >/dev/null 2>&1 || return 1
	perf report -q -i perf.data --no-children --sort comm --stdio -g none 2>/dev/null |
		awk "$role_of"'
		NF >= 2 { p = $1; sub(/%$/, "", p); c = $2; for (i = 3; i <= NF; i++) c = c " " $i
			r = role(c); if (r == "") next; s[r] += p; t += p }
		END { n = split("nginx pool template init program kthreads", o, " ")
			for (i = 1; i <= n; i++) printf "%s=%.3f ", o[i], (t > 0 ? s[o[i]] / t : 0); print "" }'
	rm -f perf.data
}

# cpu_ms BASE BODY: the median details.cpuMs of 20 sequential runs
cpu_ms() {
	local body
	idle
	body=$(jq -c '. + {details: true}' <<<"$2")
	for _ in $(seq 20); do
		curl -s --max-time 60 --data-binary "$body" "$1/execute" | jq -r '.details.cpuMs // empty'
	done | sort -n | awk '{ v[NR] = $1 } END { print (NR ? v[int((NR + 1) / 2)] : "-") }'
}


declare -A body=([print1]='{"code":"print(1)"}'
	[cafe]=$(jq -cn --rawfile code "$here/tests/programs/cafe.py" '{code: $code}')
	[five]=$(jq -cn --rawfile code "$here/tests/programs/five.py" '{code: $code}'))
programs=(print1 cafe five)
declare -A name=([print1]="print(1)" [cafe]="café program" [five]="five-module program")
declare -A rps cost

host_kind
echo "# the cost of a run: wrk, 20 connections, ${seconds} s per figure; host CPU per request is the whole host's busy time minus the client's, over the requests answered"
if ((have_perf)); then
	echo "# split by role (perf record -a, a second round): share of the request's CPU in ms; 'init' is the run's pid 1, 'program' the run's own processes (the interpreter, from its fork)"
else
	echo "# perf is not usable here (not installed, or perf_event_paranoid): no split by role"
fi
# warm: the one-copy start (the default); warm-copy: init a copy of the template, as before
# (CODEBOX_WARM_ONE_COPY=0); cold: every run starts its interpreter
for mode in warm warm-copy cold; do
	CODEBOX_WARM=$([[ $mode == warm* ]] && echo 1 || echo 0) \
		CODEBOX_WARM_ONE_COPY=$([[ $mode == warm-copy ]] && echo 0 || echo 1) \
		codebox_bench_stack "$work/$mode" "$pool" "$here" || exit 1
	stack=$codebox_pid
	base=$codebox_base
	metrics=$codebox_metrics
	echo "# $mode: /isolation says interpreter $(curl -s --max-time 5 "$base/isolation" |
		jq -r '.details | "\(.interpreter), warmStart \(.warmStart)"')"
	for prog in "${programs[@]}"; do
		post_lua "${body[$prog]}"
		# warm-up: both tiers' templates, the workers' boxes built ahead, the page cache
		wrk -t 2 -c 20 -d 2s --timeout 30s -s post.lua "$base/execute" >/dev/null
		read -r n non ms < <(wrk_cost "$base/execute")
		if ((n == 0)); then
			printf "%-34s no answer within %s s at 20 clients (cpuMs %s)\n" "$mode: ${name[$prog]}" "$seconds" \
				"$(cpu_ms "$base" "${body[$prog]}")"
			continue
		fi
		rps[$mode-$prog]=$(awk -v n="$n" -v s="$seconds" 'BEGIN { printf "%.1f", n / s }')
		cost[$mode-$prog]=$ms
		line=$(printf "%-34s %7s req/s  host CPU %6.2f ms/request  cpuMs %s" "$mode: ${name[$prog]}" \
			"${rps[$mode-$prog]}" "$ms" "$(cpu_ms "$base" "${body[$prog]}")")
		((non > 0)) && line+="  (non-2xx: $non)"
		echo "$line"
		if ((have_perf)); then
			split=$(wrk_split "$base/execute") &&
				awk -v ms="$ms" -v s="$split" 'BEGIN { n = split(s, kv, " "); printf "%-34s", "  by role (ms):"
					for (i = 1; i <= n; i++) { split(kv[i], x, "="); printf " %s %.2f", x[1], x[2] * ms }; print "" }'
		fi
	done
	codebox_stack_stop "$stack"
	stack=""
done
metrics=

if [[ -f $peer ]]; then
	port=$(codebox_free_port)
	"$PY" "$peer" "$port" >"$work/peer.out" 2>&1 &
	peer_pid=$!
	for _ in $(seq 100); do
		curl -s --max-time 2 -o /dev/null "http://127.0.0.1:$port/" && break
		sleep 0.1
	done
	for prog in "${programs[@]}"; do
		post_lua "${body[$prog]}"
		wrk -t 2 -c 20 -d 2s --timeout 30s -s post.lua "http://127.0.0.1:$port/execute" >/dev/null
		read -r n non ms < <(wrk_cost "http://127.0.0.1:$port/execute")
		if ((n == 0)); then
			printf "%-34s no answer within %s s at 20 clients\n" "cold_peer.py: ${name[$prog]}" "$seconds"
			continue
		fi
		rps[peer-$prog]=$(awk -v n="$n" -v s="$seconds" 'BEGIN { printf "%.1f", n / s }')
		cost[peer-$prog]=$ms
		printf "%-34s %7s req/s  host CPU %6.2f ms/request\n" "cold_peer.py: ${name[$prog]}" "${rps[peer-$prog]}" "$ms"
	done
	kill -TERM "$peer_pid"
	wait "$peer_pid" 2>/dev/null || true
	peer_pid=""
	echo "# codebox warm against cold_peer.py (issue 26's goal: print(1) CPU <= 0.25x and >= 4x the throughput, café CPU <= 0.1x)"
	for prog in "${programs[@]}"; do
		[[ -n ${cost[peer-$prog]:-} && -n ${cost[warm-$prog]:-} ]] || continue
		awk -v w="${cost[warm-$prog]}" -v p="${cost[peer-$prog]}" -v rw="${rps[warm-$prog]}" -v rp="${rps[peer-$prog]}" \
			-v c="${cost[cold-$prog]:-0}" -v n="${name[$prog]}" \
			'BEGIN { printf "%-34s CPU/request %.2fx the peer (cold: %.2fx), throughput %.2fx\n", "warm: " n, (p > 0 ? w / p : 0), (p > 0 ? c / p : 0), (rp > 0 ? rw / rp : 0) }'
	done
else
	echo "# no cold_peer.py at $peer (--peer PATH): no reference service"
fi
echo "# the one-copy start against the two-copy one (CODEBOX_WARM_ONE_COPY=0), same host, same run"
for prog in "${programs[@]}"; do
	[[ -n ${cost[warm-$prog]:-} && -n ${cost[warm-copy-$prog]:-} ]] || continue
	awk -v w="${cost[warm-$prog]}" -v c="${cost[warm-copy-$prog]}" -v rw="${rps[warm-$prog]}" \
		-v rc="${rps[warm-copy-$prog]}" -v n="${name[$prog]}" \
		'BEGIN { printf "%-34s CPU/request %.2fx the two-copy start, throughput %.2fx\n", "one-copy: " n, (c > 0 ? w / c : 0), (rc > 0 ? rw / rc : 0) }'
done
