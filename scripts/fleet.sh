#!/usr/bin/env bash
# A fleet on this machine, in the foreground (make fleet): REPLICAS warm stacks (each
# scripts/codebox-run.sh, with its own ports, run uids and directory; stack i with the pod
# ordinal i, so that its sessions' ids name it) behind the router the cluster runs
# (deploy/overlays/scale/router.conf, rendered by scripts/stack-lib.sh as the tests render it)
# on 127.0.0.1:PORT. All the stacks share one fleet secret, a random key made for this fleet
# (DIR/fleet.key, 0600, removed at the end): CODEBOX_FLEET_KEY_FILE in their pools'
# environment.
#
# Prints "codebox: serving on http://127.0.0.1:PORT" once the router answers through a pod.
# Ctrl-C (SIGINT) or SIGTERM stops the router (gracefully: what is in flight is answered), then
# every stack (each drains as make run's does), and exits 0 with no process left; a second one
# stops them at once. A stack that dies meanwhile is a pod lost: its sessions are gone (404),
# the others serve on. The router ending stops the fleet, with status 1.
set -euo pipefail

usage() {
	echo "usage: $0 [--replicas N] [--port PORT] [--pool BIN] [--dir DIR]"
	echo "  --replicas N  stacks behind the router (default 3; 1 to 1000)"
	echo "  --port PORT   the router's loopback port (default 8080)"
	echo "  --pool BIN    the codebox-pool binary (default build/codebox-pool)"
	echo "  --dir DIR     the fleet's directory: stacks, router, logs, key (default: a new temp dir)"
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
replicas=3
router_port=8080
pool="$here/build/codebox-pool"
dir=""
while (($#)); do
	case $1 in
	--help | -h)
		usage
		exit 0
		;;
	--replicas)
		replicas=${2:?}
		shift 2
		;;
	--port)
		router_port=${2:?}
		shift 2
		;;
	--pool)
		pool=${2:?}
		shift 2
		;;
	--dir)
		dir=${2:?}
		shift 2
		;;
	*)
		usage >&2
		exit 2
		;;
	esac
done
[[ $replicas =~ ^[1-9][0-9]{0,2}$ && $router_port =~ ^[0-9]+$ ]] || {
	echo "codebox-fleet: --replicas must be 1 to 999 and --port a number" >&2
	exit 2
}

# shellcheck source=scripts/stack-lib.sh
source "$here/scripts/stack-lib.sh"
if [[ -z $dir ]]; then
	dir=$(mktemp -d "${TMPDIR:-/tmp}/codebox-fleet.XXXXXX")
fi
mkdir -p "$dir"
dir=$(realpath "$dir")
chmod 0711 "$dir" # runs execute as other uids and must reach their directory
key="$dir/fleet.key"
codebox_fleet_key "$key"

pids=()
addrs=()
router_up=0
signals=0
# shellcheck disable=SC2317 # invoked by the trap
on_signal() { signals=$((signals + 1)); }
trap on_signal INT TERM

# stop: the router first (no new request reaches a stack), then every stack, each drained by
# its own codebox-run.sh; a second signal meanwhile stops them at once. Bounded: each stack's
# drain is its own (codebox-run.sh waits for its pool at most its drain + 5 s).
stop() {
	local p i seen=$signals
	((router_up)) && codebox_router_stop "$dir/router"
	for p in "${pids[@]}"; do
		kill -TERM "$p" 2>/dev/null || true
	done
	for ((i = 0; i < 1200; i++)); do
		local alive=0
		for p in "${pids[@]}"; do
			kill -0 "$p" 2>/dev/null && alive=1
		done
		((alive)) || break
		if ((signals > seen)); then
			seen=$signals
			echo "codebox-fleet: stopping at once" >&2
			for p in "${pids[@]}"; do
				kill -TERM "$p" 2>/dev/null || true
			done
		fi
		sleep 0.1 || true
	done
	for p in "${pids[@]}"; do
		wait "$p" 2>/dev/null || true
	done
	rm -f "$key"
}

# the stacks, started side by side (each measures its interpreter and warms its templates)
for ((i = 0; i < replicas; i++)); do
	codebox_stack_ports # port, agent_port, metrics_port
	read -ra fenv <<<"$(codebox_fleet_env "$i" "$key")"
	env CODEBOX_WARM="${CODEBOX_WARM:-1}" "${fenv[@]}" "$here/scripts/codebox-run.sh" \
		--port "$port" --agent-port "$agent_port" --metrics-port "$metrics_port" \
		--rundir "$dir/stack-$i" --run-uid-base "$(codebox_uid_base "$port")" \
		--pool "$pool" --quiet >"$dir/stack-$i.out" 2>&1 3>&- &
	pids+=($!)
	addrs+=("$i=127.0.0.1:$port")
done
for ((i = 0; i < replicas; i++)); do
	if ((signals)) || ! codebox_wait_ready "http://${addrs[i]#*=}" "${pids[i]}" "$dir/stack-$i"; then
		((signals)) || {
			echo "codebox-fleet: stack $i did not start:" >&2
			tail -n 5 "$dir/stack-$i.out" >&2
		}
		stop
		((signals)) && exit 0
		exit 1
	fi
done
if ! codebox_router_start "$dir/router" "$router_port" "${addrs[@]}" 3>&-; then
	stop
	exit 1
fi
router_up=1
router_pid=$CODEBOX_ROUTER_PID
# ready: a pod answers through the router (bounded: 10 s)
for ((i = 0; i < 100 && !signals; i++)); do
	[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$router_port/capabilities") == 200 ]] && break
	sleep 0.1 || true
done
if ((i == 100)); then
	echo "codebox-fleet: the router does not reach a stack" >&2
	stop
	exit 1
fi
((signals)) || echo "codebox: serving on http://127.0.0.1:$router_port ($replicas stacks behind the router; their logs in $dir/stack-N/logs, the router's in $dir/router; Ctrl-C stops)" >&2

# Supervise: a signal stops everything; a stack that ends is a pod lost (the others serve on);
# the router ending ends the fleet.
status=0
declare -A gone=()
while ((!signals)); do
	if ! kill -0 "$router_pid" 2>/dev/null; then
		echo "codebox-fleet: the router stopped; stopping the fleet" >&2
		router_up=0
		status=1
		break
	fi
	for ((i = 0; i < replicas; i++)); do
		if [[ -z ${gone[$i]:-} ]] && ! kill -0 "${pids[i]}" 2>/dev/null; then
			gone[$i]=1
			echo "codebox-fleet: stack $i stopped (its sessions are gone: 404); the others serve on" >&2
		fi
	done
	# woken by a signal at once (bash runs the trap when wait returns), or by one that ends
	alive=("$router_pid")
	for ((i = 0; i < replicas; i++)); do
		[[ -n ${gone[$i]:-} ]] || alive+=("${pids[i]}")
	done
	wait -n "${alive[@]}" 2>/dev/null || true
done
stop
echo "codebox-fleet: stopped; logs are in $dir" >&2
exit "$status"
