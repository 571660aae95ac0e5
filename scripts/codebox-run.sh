#!/usr/bin/env bash
# Runs codebox in the foreground: the worker pool and nginx, under one runtime directory.
#
# Stopping. Ctrl-C, or SIGINT/SIGTERM to this script or its whole process group, stops the
# stack gracefully: nginx stops accepting (SIGQUIT) and the pool stops admitting (its socket
# disappears), the runs in flight finish within their deadline and are answered, then both
# exit and this script exits 0 with nothing left. A second Ctrl-C stops at once. nginx and the
# pool run in sessions of their own, so a signal to the terminal's process group reaches only
# this script, which turns it into the graceful stop. SIGTERM to the pool itself also drains
# and stops the stack with status 0. SIGTERM or SIGINT to the nginx master is nginx's fast
# shutdown (it drops its connections; nginx offers no other meaning): use SIGQUIT for nginx.
#
# If either dies (the pool SIGKILLed, nginx crashed), the other is stopped gracefully, the
# crashed pool's workers finish their runs, and this script exits 1 saying what died. The
# next start sweeps what a crashed pool left (its socket, run directories, cgroups).
set -euo pipefail

usage() {
	cat <<USAGE
usage: $0 [--port PORT] [--agent-port PORT] [--metrics-port PORT] [--rundir DIR] [--pool BIN] [--python PATH]
          [--conf-dir DIR] [--agent-workspace-bytes N] [--run-uid-base UID]
          [--auth-tokens FILE] [--playground] [--quiet]
  --port PORT     loopback port nginx listens on (default 8080)
  --agent-port PORT
                  loopback port of the agent-sandbox protocol (default 8888 with port
                  8080, else PORT + 1)
  --metrics-port PORT
                  loopback port of GET /metrics (default 9090 with port 8080, else PORT + 2)
  --agent-workspace-bytes N
                  size of the agent protocol's workspace at /app (default 268435456; 0: off)
  --rundir DIR    runtime directory: config, socket, logs, runs (default: a new temp dir)
  --pool BIN      the codebox-pool binary (default build/codebox-pool)
  --python PATH   the sandbox's interpreter (default /usr/bin/python3)
  --conf-dir DIR  the nginx config to render (default nginx/)
  --run-uid-base UID
                  a root pool's runs use host uids UID.. UID+workers (default 20000 with
                  port 8080, else one derived from PORT); two pools on one host need ranges
                  of their own (the pool refuses a used one)
  --auth-tokens FILE
                  require a bearer token from FILE (one a line, >= 16 bytes) on every
                  request but the probes (nginx/codebox-auth.conf)
  --playground    serve the playground at / (nginx/playground/; make run does; off: / is a 404)
  --quiet         do not copy the logs to the terminal
USAGE
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
port=8080
agent_port=""
metrics_port=""
agent_bytes=268435456
rundir=""
pool="$here/build/codebox-pool"
python=/usr/bin/python3
confdir="$here/nginx"
uid_base=""
auth_tokens=""
playground=0
quiet=0
while (($#)); do
	case $1 in
	--help | -h)
		usage
		exit 0
		;;
	--port)
		port=${2:?}
		shift 2
		;;
	--rundir)
		rundir=${2:?}
		shift 2
		;;
	--agent-port)
		agent_port=${2:?}
		shift 2
		;;
	--metrics-port)
		metrics_port=${2:?}
		shift 2
		;;
	--agent-workspace-bytes)
		agent_bytes=${2:?}
		shift 2
		;;
	--pool)
		pool=${2:?}
		shift 2
		;;
	--python)
		python=${2:?}
		shift 2
		;;
	--conf-dir)
		confdir=${2:?}
		shift 2
		;;
	--run-uid-base)
		uid_base=${2:?}
		shift 2
		;;
	--auth-tokens)
		auth_tokens=$(realpath -e "${2:?}") || {
			echo "codebox-run: no token file ${2}" >&2
			exit 1
		}
		shift 2
		;;
	--playground)
		playground=1
		shift
		;;
	--quiet)
		quiet=1
		shift
		;;
	*)
		usage >&2
		exit 2
		;;
	esac
done
# shellcheck source=scripts/stack-lib.sh
source "$here/scripts/stack-lib.sh"
# a second instance given only its port takes the agent port after it and run uids of its
# own, so that it never collides with a first one on the defaults
if [[ -z $agent_port ]]; then
	agent_port=$([[ $port == 8080 ]] && echo 8888 || echo $((port + 1)))
fi
if [[ -z $metrics_port ]]; then
	metrics_port=$([[ $port == 8080 ]] && echo 9090 || echo $((port + 2)))
fi
if [[ -z $uid_base && $port != 8080 && $port =~ ^[0-9]+$ ]]; then
	uid_base=$(codebox_uid_base "$port")
fi
[[ $port =~ ^[0-9]+$ && $agent_port =~ ^[0-9]+$ && $metrics_port =~ ^[0-9]+$ && $agent_bytes =~ ^[0-9]+$ ]] || {
	echo "codebox-run: --port, --agent-port, --metrics-port and --agent-workspace-bytes must be numbers" >&2
	exit 2
}
# every port free, before anything starts (a busy one would be found by nginx, after the pool);
# one interpreter checks all three, and names the first that is busy
if ! busy=$(/usr/bin/python3 -c 'import socket, sys
for p in sys.argv[1:]:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", int(p)))
    except OSError:
        print(p)
        sys.exit(1)
    s.close()' "$port" "$agent_port" "$metrics_port" 2>/dev/null); then
	echo "codebox-run: port ${busy:-$port} on 127.0.0.1 is in use (another codebox? make run PORT=..." \
		"gives a second instance its own ports and run uids)" >&2
	exit 1
fi
created_rundir=0
if [[ -z $rundir ]]; then
	rundir=$(mktemp -d "${TMPDIR:-/tmp}/codebox.XXXXXX")
	created_rundir=1
fi
# a start that is refused leaves nothing behind (the reason is on stderr)
serving=0
# shellcheck disable=SC2317 # invoked by the trap
refused_cleanup() {
	if ((!serving && created_rundir)); then
		rm -rf "$rundir"
	fi
}
trap refused_cleanup EXIT
mkdir -p "$rundir"
rundir=$(realpath "$rundir")
NGINX=${NGINX:-/usr/sbin/nginx}

# A root pool runs programs as unprivileged uids: they must be able to reach their directory.
if ((EUID == 0)); then
	d=$(dirname "$rundir")
	while [[ $d != / ]]; do
		if (((0$(stat -c %a "$d") & 1) == 0)); then
			echo "codebox-run: $d is not searchable by other users; runs execute as unprivileged" \
				"uids and could not reach their directory under $rundir (chmod o+x, or pick" \
				"another --rundir)" >&2
			exit 1
		fi
		d=$(dirname "$d")
	done
fi

# Layout: conf/ (rendered config), logs/, counters/ (nginx's answers counted by status, read
# for GET /metrics), tmp/ (nginx's bodies), runs/ (one dir per run), playground/ (the page at
# /, with --playground).
# Runs must be able to reach runs/ (search permission) but nothing else here.
rm -rf "$rundir/conf" "$rundir/runs"
mkdir -p "$rundir/conf" "$rundir/logs" "$rundir/counters" "$rundir/tmp" "$rundir/runs"
chmod 0711 "$rundir"
chmod 0700 "$rundir/conf" "$rundir/logs" "$rundir/counters"
socket="$rundir/fcgi.sock"

# nginx's load_module modules/... resolves under the prefix: codebox's module, as built here
ln -sfn "$(realpath -m "${CODEBOX_NGINX_MODULES:-$here/build/nginx}")" "$rundir/modules"

# Render: the checked-in config with this listen address and socket path; nothing else changes.
cp "$confdir"/*.conf "$rundir/conf/"
# the OpenAPI documents nginx serves at /openapi.json (alias openapi/..., under the prefix)
rm -rf "$rundir/openapi"
mkdir -p "$rundir/openapi"
cp "$here/docs/openapi.json" "$here/docs/openapi-agent.json" "$rundir/openapi/"
# the agent protocol's read timeout: the command timeout the pool will enforce, + 30 s
agent_ms=$("$pool" --print-agent-timeout-ms 2>>"$rundir/logs/pool.log")
agent_read=$(((agent_ms + 999) / 1000 + 30))
sed -i -e "s|^\(\s*listen\s\+\)127\.0\.0\.1:[0-9]\+; # codebox-agent-listen|\1127.0.0.1:$agent_port; # codebox-agent-listen|" \
	-e "s|^\(\s*listen\s\+\)127\.0\.0\.1:[0-9]\+; # codebox-metrics-listen|\1127.0.0.1:$metrics_port; # codebox-metrics-listen|" \
	-e "/codebox-agent-listen\|codebox-metrics-listen/!s|^\(\s*listen\s\+\)127\.0\.0\.1:[0-9]\+|\1127.0.0.1:$port|" \
	-e "s|^\(\s*fastcgi_[a-z]*_timeout\s\+\)[0-9]\+s; # codebox-agent-read-timeout|\1${agent_read}s; # codebox-agent-read-timeout|" \
	-e "s|unix:/run/codebox/fcgi.sock|unix:$socket|" "$rundir/conf/nginx.conf"
if [[ -n $auth_tokens ]]; then
	echo "codebox_auth_tokens $auth_tokens;" >"$rundir/conf/codebox-auth.conf"
fi
# the playground (nginx/codebox-playground.conf): its files under the prefix, readable by
# nginx's workers (nobody, under a root stack); off, the file is a comment and / a 404
rm -rf "$rundir/playground"
if ((playground)); then
	cp -rp "$here/nginx/playground" "$rundir/playground"
	chmod -R a+rX "$rundir/playground"
else
	echo "# the playground is off (codebox-run.sh --playground, make run: on)" >"$rundir/conf/codebox-playground.conf"
fi

# one check gives every number: the pool size, how long a drain may take, the ceilings, the
# memory budget of all runs, how many sessions (a root pool's host uid each)
{
	read -r workers
	read -r drain
	read -r ceilings
	read -r pool_memory
	read -r max_sessions
} < <(CODEBOX_POOL=$pool "$here/scripts/check-config.sh" --print-workers --print-drain-seconds --print-ceilings \
	--print-pool-memory-bytes --print-max-sessions --source-dir "$confdir" "$rundir/conf/nginx.conf")
[[ -n ${max_sessions:-} ]] || exit 1 # the check refused the config, and said why
# a stack's uids (the workers', the probe's, port 8888's, one per session) must stay in the
# range its port was given (codebox_uid_base), or they meet the next port's
if [[ -n $uid_base && $uid_base == "$(codebox_uid_base "$port")" ]] &&
	((workers + 2 + max_sessions > CODEBOX_UIDS_PER_PORT)); then
	echo "codebox-run: $workers workers, the probe, port 8888 and $max_sessions sessions need $((workers + 2 + max_sessions)) run uids, more than the $CODEBOX_UIDS_PER_PORT of port $port's range (scripts/stack-lib.sh); give --run-uid-base" >&2
	exit 1
fi

pool_args=(--socket "$socket" --runs-dir "$rundir/runs" --workers "$workers" --python "$python"
	--drain-seconds "$drain" --agent-workspace-bytes "$agent_bytes"
	--nginx-busy-log "$rundir/counters/nginx-429.log" --ceilings "$ceilings"
	--pool-memory-bytes "$pool_memory" --max-sessions "$max_sessions")
if [[ -n $uid_base ]]; then
	pool_args+=(--run-uid-base "$uid_base")
fi
# the start-up probe's measure of the promised modules, kept between starts: a start that
# finds their files and the interpreter's unchanged imports none of them (some 2 s of CPU).
# CODEBOX_PROBE_CACHE names the file; empty: no cache, every start imports them
probe_cache=${CODEBOX_PROBE_CACHE-${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/codebox/probe.json}
if [[ -n $probe_cache ]]; then
	if [[ $probe_cache == /* ]] && mkdir -p "$(dirname "$probe_cache")" 2>/dev/null; then
		pool_args+=(--probe-cache "$probe_cache")
	else
		echo "codebox-run: no probe cache at $probe_cache (not an absolute path, or its directory cannot be made); every start imports the promised modules" >&2
	fi
fi
if ((EUID == 0)); then
	# nginx's workers run as nobody (nginx's default user): only they may connect
	pool_args+=(--socket-user nobody)
fi

pool_pid=""
nginx_pid=""
tail_pid=""
signals=0
# shellcheck disable=SC2317 # invoked by the trap
on_signal() { signals=$((signals + 1)); }
trap on_signal INT TERM

# the pool's workers outlive a SIGKILLed pool while they finish their runs: wait for them
# (bounded by the drain) so that nothing is left when this script exits
pool_leftovers() { pgrep -f -- "--runs-dir $rundir/runs" >/dev/null; }
wait_pool_leftovers() {
	local i
	for ((i = 0; i < (drain + 5) * 10; i++)); do
		pool_leftovers || return 0
		sleep 0.1 || true
	done
	echo "codebox-run: the pool's processes did not stop within $((drain + 5)) s; killing them" >&2
	local left
	left=$(pgrep -f -- "--runs-dir $rundir/runs" || true)
	# shellcheck disable=SC2086 # a list of pids
	[[ -z $left ]] || kill -KILL $left 2>/dev/null || true
}

cleanup() {
	if [[ -n $tail_pid ]]; then
		kill "$tail_pid" 2>/dev/null || true
		wait "$tail_pid" 2>/dev/null || true
	fi
	# the runs are over and nginx's temp files are of no use; the logs stay for reading. A
	# pool that was killed could not remove its socket: nobody listens there any more
	rm -rf "$rundir/runs" "$rundir/tmp"
	rm -f "$socket"
	if ((!quiet)); then
		echo "codebox: stopped; logs are in $rundir/logs" >&2
	fi
}

setsid "$pool" "${pool_args[@]}" 2>>"$rundir/logs/pool.log" 3>&- &
pool_pid=$!

# Ready when the socket exists; the pool measures the interpreter first (a second or two,
# longer on a cold cache). Bounded: 120 s, and only while the pool is alive.
for ((i = 0; i < 1200; i++)); do
	[[ -S $socket ]] && break
	if ((signals)) || ! kill -0 "$pool_pid" 2>/dev/null; then
		break
	fi
	sleep 0.1 || true # a Ctrl-C ends sleep too: the loop checks $signals, set -e must not end the script
done
if [[ ! -S $socket ]]; then
	if ((signals)); then
		kill -TERM "$pool_pid" 2>/dev/null || true
		wait "$pool_pid" 2>/dev/null || true
		cleanup
		exit 0
	fi
	if kill -0 "$pool_pid" 2>/dev/null; then
		echo "codebox-run: the worker pool did not open $socket within 120 s" >&2
		kill -TERM "$pool_pid" 2>/dev/null || true
	else
		echo "codebox-run: the worker pool failed to start:" >&2
		tail -n 5 "$rundir/logs/pool.log" >&2
	fi
	wait "$pool_pid" 2>/dev/null || true
	cleanup
	exit 1
fi

# nginx did not come up: stop it (if it lingers) and the pool, and wait until nothing is left
stop_at_start() {
	kill -TERM "$nginx_pid" 2>/dev/null || true
	kill -TERM "$pool_pid" 2>/dev/null || true
	wait "$nginx_pid" 2>/dev/null || true
	wait "$pool_pid" 2>/dev/null || true
	wait_pool_leftovers
	cleanup
}

setsid "$NGINX" -p "$rundir/" -e "$rundir/logs/error.log" -c "$rundir/conf/nginx.conf" 3>&- &
nginx_pid=$!

# Serving once nginx answers on its port (bounded: 30 s, and only while nginx is alive).
for ((i = 0; i < 300; i++)); do
	curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$port/healthz" && break
	if ! kill -0 "$nginx_pid" 2>/dev/null; then
		echo "codebox-run: nginx failed to start:" >&2
		tail -n 5 "$rundir/logs/error.log" >&2
		stop_at_start
		exit 1
	fi
	sleep 0.1 || true
done
((i < 300)) || {
	echo "codebox-run: nginx does not answer on 127.0.0.1:$port within 30 s" >&2
	stop_at_start
	exit 1
}

serving=1 # from here on the runtime directory and its logs stay
if ((!quiet)); then
	tail -n 0 -F "$rundir/logs/pool.log" "$rundir/logs/error.log" "$rundir/logs/access.log" 2>/dev/null 3>&- &
	tail_pid=$!
	echo "codebox: serving on http://127.0.0.1:$port ($workers workers; metrics on http://127.0.0.1:$metrics_port/metrics; logs in $rundir/logs; Ctrl-C stops)" >&2
	if ((playground)); then
		echo "codebox: the playground: open http://127.0.0.1:$port/ in a browser" >&2
	fi
fi

# Supervise: a signal here starts the graceful stop, a second one the immediate one; a
# component that ends on its own stops the other. A half service is not a service.
status=0
stopping=0
pool_alive=1
nginx_alive=1
graceful() {
	((stopping)) && return 0
	stopping=1
	if ((nginx_alive)); then kill -QUIT "$nginx_pid" 2>/dev/null || true; fi
	if ((pool_alive)); then kill -TERM "$pool_pid" 2>/dev/null || true; fi
}
set +e
while ((pool_alive || nginx_alive)); do
	if ((signals >= 1)); then graceful; fi
	if ((signals >= 2 && stopping < 2)); then
		stopping=2
		echo "codebox-run: stopping at once" >&2
		if ((nginx_alive)); then kill -TERM "$nginx_pid" 2>/dev/null; fi
		if ((pool_alive)); then kill -TERM "$pool_pid" 2>/dev/null; fi
	fi
	done_pid=""
	pids=()
	((pool_alive)) && pids+=("$pool_pid")
	((nginx_alive)) && pids+=("$nginx_pid")
	# A component that ended before this wait (bash reaps children as they end, in the
	# start-up loops too) is not always reported by wait -n: one that kill -0 no longer
	# finds has ended (its status from wait PID)
	for p in "${pids[@]}"; do
		if ! kill -0 "$p" 2>/dev/null; then
			done_pid=$p
			break
		fi
	done
	if [[ -n $done_pid ]]; then
		wait "$done_pid"
		st=$?
	else
		wait -n -p done_pid "${pids[@]}"
		st=$?
		[[ -n ${done_pid:-} ]] || continue # a signal: handled at the top
	fi
	if [[ $done_pid == "$pool_pid" ]]; then
		pool_alive=0
		if ((!stopping)); then
			if ((st == 0)); then
				echo "codebox-run: the worker pool was stopped; stopping nginx" >&2
			else
				echo "codebox-run: the worker pool died ($( ((st > 128)) && echo "killed by signal $((st - 128))" || echo "status $st")); stopping" >&2
				status=1
			fi
			graceful
		fi
	else
		nginx_alive=0
		if ((!stopping)); then
			if ((st == 0)); then
				echo "codebox-run: nginx was stopped; stopping the pool" >&2
			else
				echo "codebox-run: nginx died (status $st); stopping the pool" >&2
				status=1
			fi
			graceful
		fi
	fi
done
set -e
wait_pool_leftovers
cleanup
exit "$status"
