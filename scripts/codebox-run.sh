#!/usr/bin/env bash
# Runs codebox in the foreground: the worker pool and nginx, under one runtime directory.
# Ctrl-C or SIGTERM stops both (nginx first stops taking requests, in-flight runs finish),
# and nothing is left running. If either dies, the other is stopped too.
set -euo pipefail

usage() {
	cat <<USAGE
usage: $0 [--port PORT] [--agent-port PORT] [--rundir DIR] [--pool BIN] [--python PATH]
          [--conf-dir DIR] [--agent-workspace-bytes N] [--quiet]
  --port PORT     loopback port nginx listens on (default 8080)
  --agent-port PORT
                  loopback port of the agent-sandbox protocol (default 8888)
  --agent-workspace-bytes N
                  size of the agent protocol's workspace at /app (default 268435456; 0: off)
  --rundir DIR    runtime directory: config, socket, logs, runs (default: a new temp dir)
  --pool BIN      the codebox-pool binary (default build/codebox-pool)
  --python PATH   the sandbox's interpreter (default /usr/bin/python3)
  --conf-dir DIR  the nginx config to render (default nginx/)
  --quiet         do not copy the logs to the terminal
USAGE
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
port=8080
agent_port=8888
agent_bytes=268435456
rundir=""
pool="$here/build/codebox-pool"
python=/usr/bin/python3
confdir="$here/nginx"
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
[[ $port =~ ^[0-9]+$ && $agent_port =~ ^[0-9]+$ && $agent_bytes =~ ^[0-9]+$ ]] || {
	echo "codebox-run: --port, --agent-port and --agent-workspace-bytes must be numbers" >&2
	exit 2
}
if [[ -z $rundir ]]; then
	rundir=$(mktemp -d /tmp/codebox.XXXXXX)
fi
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

# Layout: conf/ (rendered config), logs/, tmp/ (nginx's bodies), runs/ (one dir per run).
# Runs must be able to reach runs/ (search permission) but nothing else here.
rm -rf "$rundir/conf" "$rundir/runs"
mkdir -p "$rundir/conf" "$rundir/logs" "$rundir/tmp" "$rundir/runs"
chmod 0711 "$rundir"
chmod 0700 "$rundir/conf" "$rundir/logs"
socket="$rundir/fcgi.sock"

# Render: the checked-in config with this listen address and socket path; nothing else changes.
cp "$confdir"/*.conf "$rundir/conf/"
# the agent protocol's read timeout: the command timeout the pool will enforce, + 30 s
agent_ms=$("$pool" --print-agent-timeout-ms 2>>"$rundir/logs/pool.log")
agent_read=$(((agent_ms + 999) / 1000 + 30))
sed -i -e "s|^\(\s*listen\s\+\)127\.0\.0\.1:[0-9]\+; # codebox-agent-listen|\1127.0.0.1:$agent_port; # codebox-agent-listen|" \
	-e "/codebox-agent-listen/!s|^\(\s*listen\s\+\)127\.0\.0\.1:[0-9]\+;|\1127.0.0.1:$port;|" \
	-e "s|^\(\s*fastcgi_[a-z]*_timeout\s\+\)[0-9]\+s; # codebox-agent-read-timeout|\1${agent_read}s; # codebox-agent-read-timeout|" \
	-e "s|unix:/run/codebox/fcgi.sock|unix:$socket|" "$rundir/conf/nginx.conf"

# one check gives both numbers: the pool size, then how long a drain may take
{
	read -r workers
	read -r drain
} < <("$here/scripts/check-config.sh" --print-workers --print-drain-seconds "$rundir/conf/nginx.conf")
[[ -n ${drain:-} ]] || exit 1 # the check refused the config, and said why

pool_args=(--socket "$socket" --runs-dir "$rundir/runs" --workers "$workers" --python "$python"
	--drain-seconds "$drain" --agent-workspace-bytes "$agent_bytes"
	--nginx-busy-log "$rundir/logs/nginx-429.log")
if ((EUID == 0)); then
	# nginx's workers run as nobody:nogroup; the socket is theirs and root's only
	pool_args+=(--socket-group nogroup)
fi

pool_pid=""
nginx_pid=""
tail_pid=""
stop() {
	trap - INT TERM
	# nginx first: it stops taking requests and finishes those in flight; the pool drains
	if [[ -n $nginx_pid ]]; then kill -QUIT "$nginx_pid" 2>/dev/null || true; fi
	if [[ -n $pool_pid ]]; then kill -TERM "$pool_pid" 2>/dev/null || true; fi
	if [[ -n $nginx_pid ]]; then wait "$nginx_pid" 2>/dev/null || true; fi
	if [[ -n $pool_pid ]]; then wait "$pool_pid" 2>/dev/null || true; fi
	if [[ -n $tail_pid ]]; then
		kill "$tail_pid" 2>/dev/null || true
		wait "$tail_pid" 2>/dev/null || true
	fi
	# the runs are over and nginx's temp files are of no use; the logs stay for reading
	rm -rf "$rundir/runs" "$rundir/tmp"
	if ((!quiet)); then
		echo "codebox: stopped; logs are in $rundir/logs" >&2
	fi
}
trap 'stop; exit 0' INT TERM

"$pool" "${pool_args[@]}" 2>>"$rundir/logs/pool.log" 3>&- &
pool_pid=$!

# Ready when the socket exists; the pool measures the interpreter first (a second or two,
# longer on a cold cache). Bounded: 120 s, and only while the pool is alive.
for ((i = 0; i < 1200; i++)); do
	[[ -S $socket ]] && break
	if ! kill -0 "$pool_pid" 2>/dev/null; then
		wait "$pool_pid" || true
		echo "codebox-run: the worker pool failed to start:" >&2
		tail -n 5 "$rundir/logs/pool.log" >&2
		exit 1
	fi
	sleep 0.1
done
[[ -S $socket ]] || {
	echo "codebox-run: the worker pool did not open $socket within 120 s" >&2
	stop
	exit 1
}

"$NGINX" -p "$rundir/" -e "$rundir/logs/error.log" -c "$rundir/conf/nginx.conf" 3>&- &
nginx_pid=$!

if ((!quiet)); then
	tail -n 0 -F "$rundir/logs/pool.log" "$rundir/logs/error.log" "$rundir/logs/access.log" 2>/dev/null 3>&- &
	tail_pid=$!
	echo "codebox: serving on http://127.0.0.1:$port ($workers workers; runtime dir $rundir)" >&2
fi

# Whichever ends first, the other is stopped: a half service is not a service.
set +e
wait -n "$pool_pid" "$nginx_pid"
status=$?
set -e
echo "codebox-run: a component exited (status $status); stopping" >&2
stop
exit 1
