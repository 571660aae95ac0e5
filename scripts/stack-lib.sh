# shellcheck shell=bash
# What starting a private codebox stack takes, sourced by the bats helpers
# (tests/helpers/stack.bash) and the benchmarks (scripts/bench*.sh), so that they agree on what
# "ready" means: a free loopback port, and the bounded wait; and the benchmarks' option loop,
# stack start and stop (codebox_bench_options, codebox_bench_stack, codebox_stack_stop).

# The waits below look every 0.1 s: with Debian's bash-builtins, sleep is the shell's own, not
# a process per look (a fork and an exec cost milliseconds of CPU on a host with slow forks).
enable -f /usr/lib/bash/sleep sleep 2>/dev/null || true

# codebox_free_ports N: N free loopback ports, all different, one per line (each bound to port 0
# at once, so the kernel chose N different ones, then released)
codebox_free_ports() {
	/usr/bin/python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# codebox_free_port: one free loopback port
codebox_free_port() {
	codebox_free_ports 1
}

# codebox_stack_ports: sets port, agent_port and metrics_port (the caller's locals) to three
# free loopback ports, all different: a stack's
codebox_stack_ports() {
	# shellcheck disable=SC2034 # the caller's
	{
		read -r port
		read -r agent_port
		read -r metrics_port
	} < <(codebox_free_ports 3)
}

# codebox_uid_base PORT: the run uid range of a stack listening on PORT (CODEBOX_UIDS_PER_PORT
# uids per port, far above the default 20000 and below 2^30), so that stacks side by side never
# share run uids. A root pool takes workers + 2 + CODEBOX_MAX_SESSIONS of them (the workers',
# the probe's, port 8888's, one per session): codebox-run.sh refuses a stack that needs more
CODEBOX_UIDS_PER_PORT=256
codebox_uid_base() {
	echo $((1048576 + $1 * CODEBOX_UIDS_PER_PORT))
}

# codebox_wait_ready BASE PID RUNDIR: waits until BASE/readyz answers 200 (a worker answers)
# and the pool logging into RUNDIR/logs has started every worker (the first answers while the
# zygote still clones the rest). Bounded: 120 s, and only while PID (the stack) is alive.
# Returns 0 when ready, 1 otherwise.
codebox_wait_ready() {
	local base=$1 pid=$2 rundir=$3 i log
	for ((i = 0; i < 1200; i++)); do
		# the log first, read by the shell itself: a curl and a grep at each look cost a
		# start half a second of CPU on a host with slow forks
		log=""
		IFS= read -r -d '' log 2>/dev/null <"$rundir/logs/pool.log" || true
		if [[ $log =~ \"pool\ started\ [0-9]*\ workers\" ]] &&
			[[ $(curl -s -o /dev/null -w '%{http_code}' "$base/readyz") == 200 ]]; then
			return 0
		fi
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# codebox_fleet_key FILE: a new fleet secret, 32 random bytes as hex, in FILE (0600). Every
# stack of one fleet is given the same one as CODEBOX_FLEET_KEY_FILE in its pool's environment
# (codebox_fleet_env), as the cluster's pods mount the Secret codebox-fleet-key.
codebox_fleet_key() {
	(
		umask 077
		od -An -N32 -tx1 /dev/urandom | tr -d ' \n' >"$1"
	)
}

# codebox_fleet_env ORDINAL KEYFILE: what a fleet's stack number ORDINAL is started with, as
# NAME=VALUE words for env (the pool reads its environment; codebox-run.sh passes it on):
# its pod ordinal (new sessions' ids name it: the router routes by it) and the fleet's secret
codebox_fleet_env() {
	echo "CODEBOX_POD_ORDINAL=$1 CODEBOX_FLEET_KEY_FILE=$2"
}

# codebox_router_render RUNDIR PORT ADDR...: the fleet's router (deploy/overlays/scale/router.conf,
# the file the cluster's router runs) in RUNDIR/conf, listening on 127.0.0.1:PORT, with an
# upstream of the stacks at ADDR ("[ORDINAL=]127.0.0.1:PORT", with " down" for one taken out of
# the least busy pod's choice, as a pod that is not ready leaves the cluster's codebox-pods
# Service), and each stack on its own for the sessions whose ids name its ordinal (its
# CODEBOX_POD_ORDINAL: ORDINAL, else its place in the list from 0), as the cluster's per-pod
# names are; a stack taken out still serves its sessions, as a draining pod does. Rendering
# again and `nginx -s reload` changes the list without dropping a request.
codebox_router_render() {
	local rundir=$1 port=$2 addr root n ordinal
	shift 2
	root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	mkdir -p "$rundir/conf" "$rundir/tmp"
	sed "s|^\( *listen  *\)8080\(.*# codebox-router-listen\)$|\1127.0.0.1:$port\2|" \
		"$root/deploy/overlays/scale/router.conf" >"$rundir/conf/router.conf"
	grep -q "listen  *127.0.0.1:$port " "$rundir/conf/router.conf" || {
		echo "codebox_router_render: no codebox-router-listen line in router.conf" >&2
		return 1
	}
	{
		echo "# the local stacks, as the cluster's router-upstream.conf names the pods"
		echo "upstream codebox_fleet {"
		echo "    zone codebox_fleet 64k;"
		echo "    least_conn;"
		for addr in "$@"; do
			echo "    server ${addr#*=} max_fails=1 fail_timeout=1s;"
		done
		# the same stacks again as backups, never left out: asked when every one above is
		for addr in "$@"; do
			[[ $addr == *" down" ]] || echo "    server ${addr#*=} backup max_fails=0;"
		done
		echo "}"
		n=0
		for addr in "$@"; do
			ordinal=$n
			[[ $addr != *=* ]] || ordinal=${addr%%=*}
			addr=${addr#*=}
			echo "upstream codebox_pod_$ordinal { zone codebox_pod_$ordinal 64k; server ${addr% down} max_fails=0; }"
			n=$((n + 1))
		done
		echo "map \$codebox_ordinal \$codebox_pod {"
		echo "    default \"\";"
		n=0
		for addr in "$@"; do
			ordinal=$n
			[[ $addr != *=* ]] || ordinal=${addr%%=*}
			echo "    $ordinal codebox_pod_$ordinal;"
			n=$((n + 1))
		done
		echo "}"
	} >"$rundir/conf/router-upstream.conf"
}

# codebox_router_start RUNDIR PORT ADDR...: renders the router and starts its nginx in the
# background (its access log, JSON lines, in RUNDIR/access.log; its errors in RUNDIR/error.log),
# then waits until it answers (10 s at most). Sets CODEBOX_ROUTER_PID (nginx's master).
codebox_router_start() {
	local rundir=$1 port=$2 i
	codebox_router_render "$@" || return 1
	/usr/sbin/nginx -p "$rundir/" -c "$rundir/conf/router.conf" -e stderr \
		>"$rundir/access.log" 2>"$rundir/error.log" 3>&- &
	CODEBOX_ROUTER_PID=$!
	for ((i = 0; i < 100; i++)); do
		[[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/healthz") == 200 ]] && return 0
		kill -0 "$CODEBOX_ROUTER_PID" 2>/dev/null || break
		sleep 0.1
	done
	echo "codebox_router_start: the router did not answer:" >&2
	cat "$rundir/error.log" >&2
	return 1
}

# codebox_router_stop RUNDIR: stops the router gracefully (SIGQUIT: it finishes what is in
# flight) and waits for it (60 s at most)
codebox_router_stop() {
	local pid i
	pid=$(cat "$1/router.pid" 2>/dev/null) || return 0
	kill -QUIT "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 600; i++)); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

# codebox_bench_options USAGE SPEC... -- ARG...: a benchmark's option loop over ARG. Each SPEC
# is --NAME=VAR (the option takes a value, set in VAR), --NAME=VAR:VALUE (a flag: VAR set to
# VALUE) or @VAR=WORD|WORD... (one of those words, appended to the array VAR). --help and -h
# print USAGE's output (USAGE: a command) and exit 0; anything else, or an option without its
# value, prints it on stderr and exits 2.
codebox_bench_options() {
	local usage=$1 spec opt var matched specs=()
	shift
	while (($#)) && [[ $1 != -- ]]; do
		specs+=("$1")
		shift
	done
	shift
	while (($#)); do
		if [[ $1 == --help || $1 == -h ]]; then
			"$usage"
			exit 0
		fi
		matched=0
		for spec in "${specs[@]}"; do
			opt=${spec%%=*} var=${spec#*=}
			if [[ $opt == @* ]]; then
				[[ "|$var|" == *"|$1|"* ]] || continue
				eval "${opt#@}+=(\"\$1\")"
				matched=1
			elif [[ $1 != "$opt" ]]; then
				continue
			elif [[ $var == *:* ]]; then
				printf -v "${var%%:*}" '%s' "${var#*:}"
				matched=1
			elif (($# >= 2)); then
				printf -v "$var" '%s' "$2"
				shift
				matched=1
			fi
			break
		done
		if ((!matched)); then
			"$usage" >&2
			exit 2
		fi
		shift
	done
}

# codebox_bench_stack RUNDIR POOL TREE [ARG...]: a benchmark's private stack: TREE's
# scripts/codebox-run.sh (TREE: a checkout, its own config and options) with the pool binary
# POOL, in the background, on three free loopback ports with the run uids of its port, its
# runtime directory RUNDIR and its output in RUNDIR.out; ARGs go to codebox-run.sh (e.g.
# --conf-dir), the caller's environment to the pool (CODEBOX_WARM=1 codebox_bench_stack ...),
# and it is started through the command in the array codebox_stack_exec when one is set (env
# NAME=VALUE..., a wrapper). Sets codebox_pid, codebox_base, codebox_agent and codebox_metrics
# (its URLs), then waits until it is ready (codebox_wait_ready): when it is not, stops it,
# prints its output on stderr and returns 1.
codebox_stack_exec=()
codebox_bench_stack() {
	local rundir=$1 pool=$2 tree=$3 port agent_port metrics_port
	shift 3
	codebox_stack_ports
	"${codebox_stack_exec[@]}" "$tree/scripts/codebox-run.sh" --port "$port" --rundir "$rundir" \
		--agent-port "$agent_port" --metrics-port "$metrics_port" \
		--run-uid-base "$(codebox_uid_base "$port")" --pool "$pool" --quiet "$@" \
		>"$rundir.out" 2>&1 3>&- &
	codebox_pid=$!
	codebox_base="http://127.0.0.1:$port"
	# shellcheck disable=SC2034 # the caller's
	{
		codebox_agent="http://127.0.0.1:$agent_port"
		codebox_metrics="http://127.0.0.1:$metrics_port"
	}
	codebox_wait_ready "$codebox_base" "$codebox_pid" "$rundir" && return 0
	codebox_stack_stop "$codebox_pid"
	cat "$rundir.out" >&2
	return 1
}

# codebox_stack_stop PID: stops a stack codebox_bench_stack started (SIGTERM: it drains) and
# waits for it; nothing when PID is empty
codebox_stack_stop() {
	[[ -n $1 ]] || return 0
	kill -TERM "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}
