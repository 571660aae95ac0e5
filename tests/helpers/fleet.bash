# shellcheck shell=bash
# A local fleet for the bats suites: N stacks (stack_start's, each with its own ports, run uids,
# cgroups and directory) behind the router the cluster runs (deploy/overlays/scale/router.conf,
# rendered by codebox_router_start with the stacks' ports). Exported as words, so that the tests
# of a file see what its setup_file started: FLEET_DIRS, FLEET_PIDS, FLEET_BASES,
# FLEET_METRICS (stack i is word i), ROUTER_DIR, ROUTER (the router's URL).

load helpers/stack

# fleet_start N [stack_start args...]: N stacks, stack i with the pod ordinal i and the fleet's
# one secret (codebox_fleet_env: ROUTER_DIR/fleet.key), then the router in front of them
fleet_start() {
	local n=$1 i port
	local -a fenv
	shift
	FLEET_DIRS="" FLEET_PIDS="" FLEET_BASES="" FLEET_METRICS=""
	ROUTER_DIR=$(mktemp -d /tmp/codebox-router.XXXXXX)
	export ROUTER_DIR
	codebox_fleet_key "$ROUTER_DIR/fleet.key"
	local addrs=()
	for ((i = 0; i < n; i++)); do
		read -ra fenv <<<"$(codebox_fleet_env "$i" "$ROUTER_DIR/fleet.key")"
		# shellcheck disable=SC2163 # NAME=VALUE words
		export "${fenv[@]}"
		stack_start "$@" || return 1
		FLEET_DIRS+="$STACK_DIR " FLEET_PIDS+="$STACK_PID " FLEET_BASES+="$BASE " FLEET_METRICS+="$METRICS "
		addrs+=("${BASE#http://}")
		export FLEET_DIRS FLEET_PIDS FLEET_BASES FLEET_METRICS
	done
	unset CODEBOX_POD_ORDINAL CODEBOX_FLEET_KEY_FILE
	port=$(free_port)
	ROUTER="http://127.0.0.1:$port"
	export ROUTER
	codebox_router_start "$ROUTER_DIR" "$port" "${addrs[@]}"
}

# fleet_word LIST I: word I of LIST
fleet_word() {
	local -a w
	read -ra w <<<"$1"
	echo "${w[$2]}"
}

# fleet_use I: points stack.bash's variables (STACK_DIR, STACK_PID, BASE, METRICS) at stack I
fleet_use() {
	STACK_DIR=$(fleet_word "$FLEET_DIRS" "$1")
	STACK_PID=$(fleet_word "$FLEET_PIDS" "$1")
	BASE=$(fleet_word "$FLEET_BASES" "$1")
	METRICS=$(fleet_word "$FLEET_METRICS" "$1")
}

# fleet_in_flight I: stack I's runs in flight (its /metrics)
fleet_in_flight() {
	curl -s --max-time 5 "$(fleet_word "$FLEET_METRICS" "$1")/metrics" |
		awk '/^codebox_executions_in_flight / { print $2 }'
}

# fleet_router_set ADDR...: the router's stacks from now on (a graceful reload: requests in
# flight finish on the old workers)
fleet_router_set() {
	local port
	port=${ROUTER##*:}
	codebox_router_render "$ROUTER_DIR" "$port" "$@"
	/usr/sbin/nginx -p "$ROUTER_DIR/" -c "$ROUTER_DIR/conf/router.conf" -e stderr -s reload
}

# fleet_kill I: stack I is lost at once, as a pod whose node died: every process of it (its
# script, nginx, the pool, workers, zygote, templates, sandboxes and programs) stopped first,
# so that nothing respawns, then killed. Its runs' cgroups, which only the next pool would
# sweep, are removed.
fleet_kill() {
	local dir pool roots tree
	fleet_use "$1"
	dir=$STACK_DIR
	pool=$(pool_pid)
	roots=$(pgrep -f -- "$dir" | tr '\n' ' ')
	roots+=" $(cat "$dir/nginx.pid" 2>/dev/null)"
	tree=$(ps -e -o pid=,ppid= | awk -v roots="$roots" '
		BEGIN { n = split(roots, r, /[ \n]+/); for (i = 1; i <= n; i++) if (r[i] != "") keep[r[i]] = 1 }
		{ parent[$1] = $2 }
		END { for (changed = 1; changed;) { changed = 0
			for (p in parent) if (!(p in keep) && (parent[p] in keep)) { keep[p] = 1; changed = 1 } }
			for (p in keep) if (p in parent) print p }')
	# shellcheck disable=SC2086 # pids, one word each
	kill -STOP $tree 2>/dev/null || true
	# shellcheck disable=SC2086
	kill -KILL $tree 2>/dev/null || true
	wait "$STACK_PID" 2>/dev/null || true
	wait_for "the killed stack's processes to be gone" 100 marker_gone "$dir" || return 1
	[[ -n $pool ]] && { find /sys/fs/cgroup -depth -type d -path "*/codebox-$pool*" -exec rmdir {} + 2>/dev/null || true; }
	return 0
}

# fleet_stop: stops the router and every stack that is still up, each exactly as started
fleet_stop() {
	local i rc=0
	local -a n=()
	if [[ -n ${ROUTER_DIR:-} ]]; then
		codebox_router_stop "$ROUTER_DIR"
		rm -rf "$ROUTER_DIR"
	fi
	read -ra n <<<"${FLEET_DIRS:-}" || true # none started: read meets EOF
	for ((i = 0; i < ${#n[@]}; i++)); do
		fleet_use "$i"
		[[ -d $STACK_DIR ]] || continue
		stack_stop || rc=1
	done
	return $rc
}

# fleet_logs: the router's errors and each stack's logs (shown when a test failed)
fleet_logs() {
	local i n
	echo "--- router error.log"
	tail -n 20 "$ROUTER_DIR/error.log" 2>/dev/null || true
	read -ra n <<<"${FLEET_DIRS:-}" || true # none started: read meets EOF
	for ((i = 0; i < ${#n[@]}; i++)); do
		fleet_use "$i"
		echo "=== stack $i ($BASE, $STACK_DIR)"
		stack_logs
	done
}
