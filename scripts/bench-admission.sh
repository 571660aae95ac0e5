#!/usr/bin/env bash
# The figures of admission and stopping (issue 7), measured on this machine, loopback only,
# every loop bounded in count and time:
#   rates   429s among requests when N clients each keep one request in flight (N = 16, 18,
#           19, 20, 22 against 20 slots), with a new connection per request and with
#           keep-alive
#   hangup  time from a client's hang-up to the death of its run (5 trials)
#   drain   time from Ctrl-C (SIGINT to the stack's process group) with 20 runs in flight to
#           the stack's exit, and how many of the 20 were answered
#   latency median and p90 of sequential print(1) requests; with --before DIR, paired: a
#           stack of DIR and one of --root side by side, requests alternating between them
#           so that the machine's drift cancels, and the median of the per-pair difference
# Each uses a private stack of the tree given by --root (its scripts/codebox-run.sh, nginx/
# and build/codebox-pool), so the same script measures another checkout for a before/after.
set -euo pipefail

usage() {
	echo "usage: $0 [--root DIR] [--before DIR] [--runs N] [rates|hangup|drain|latency]..."
	echo "  --root DIR    the checkout to measure (default: this one)"
	echo "  --before DIR  latency paired against this checkout (e.g. main's, built)"
	echo "  --runs N    sequential print(1) requests for latency (default 200)"
	echo "  with no measurement named, all four"
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=scripts/stack-lib.sh
source "$here/scripts/stack-lib.sh"
root=$here
runs=200
before=""
what=()
codebox_bench_options usage --root=root --runs=runs --before=before \
	'@what=rates|hangup|drain|latency' -- "$@"
root=$(cd "$root" && pwd)
[[ -z $before ]] || before=$(cd "$before" && pwd)
((${#what[@]})) || what=(rates hangup drain latency)
PY=/usr/bin/python3
CLIENTS=$here/tests/helpers/clients.py

work=$(mktemp -d /tmp/codebox-bench.XXXXXX)
chmod 0711 "$work" # runs execute as other uids and must reach their directory
stack_pid=""
before_pid=""
cleanup() {
	stack_stop
	codebox_stack_stop "$before_pid"
	rm -rf "$work"
}
trap cleanup EXIT

# stack_start NAME: a private stack of the tree $root on random loopback ports (its port in
# $port, its runtime directory $rundir), in a process group of its own with SIGINT at its
# default, as a terminal starts it
codebox_stack_exec=("$PY" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.setpgid(0, 0)
os.execv(sys.argv[1], sys.argv[1:])')
stack_start() {
	rundir=$work/$1
	codebox_bench_stack "$rundir" "$root/build/codebox-pool" "$root" || {
		echo "bench-admission: the stack did not start" >&2
		exit 1
	}
	stack_pid=$codebox_pid
	base=$codebox_base
	port=${base##*:}
}

stack_stop() {
	codebox_stack_stop "$stack_pid"
	stack_pid=""
}

rates() {
	local n mode out total busy
	stack_start rates
	echo "429 rates, 20 slots; each client sends 10 requests of time.sleep(0.3), one after the other"
	printf '  %-9s %-24s %-24s\n' clients new-connection keep-alive
	for n in 16 18 19 20 22; do
		printf '  %-9s' "$n"
		for mode in close keepalive; do
			out=$("$PY" "$CLIENTS" loop "$port" "$n" 10 '{"code":"import time; time.sleep(0.3)"}' "$mode")
			total=$((n * 10))
			busy=$(tr ' ' '\n' <<<"$out" | awk -F: '$1 == 429 { print $2 }')
			busy=${busy:-0}
			printf ' %-24s' "$busy/$total ($((busy * 100 / total)) %)"
		done
		echo
	done
	stack_stop
}

hangup() {
	stack_start hangup
	echo "client hang-up to the run's death (ms), 5 trials:"
	"$PY" - "$port" <<'PY'
import json, os, socket, sys, time

port = int(sys.argv[1])

def pids_with(marker):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    if marker in f.read():
                        out.append(p)
            except OSError:
                pass
    return out

times = []
for trial in range(5):
    marker = "codebox-bench-hangup-%d-%d" % (os.getpid(), trial)
    code = ("import os, sys\nos.execv(sys.executable, [sys.executable, '-c', "
            "'import time; time.sleep(60)', sys.stdin.read()])")
    body = json.dumps({"code": code, "stdin": marker}).encode()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"POST /execute HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    deadline = time.monotonic() + 20
    while not pids_with(marker.encode()) and time.monotonic() < deadline:
        time.sleep(0.005)
    s.close()
    t0 = time.monotonic()
    while pids_with(marker.encode()) and time.monotonic() < t0 + 20:
        time.sleep(0.002)
    times.append((time.monotonic() - t0) * 1000)
print("  " + " ".join("%.0f" % t for t in times) + "  (max %.0f ms)" % max(times))
PY
	stack_stop
}

drain() {
	local i t0 t1 ok
	stack_start drain
	for ((i = 1; i <= 20; i++)); do
		curl -s --max-time 60 -o /dev/null -w '%{http_code}\n' \
			--data-binary '{"code":"import time; time.sleep(3); print(1)"}' \
			"$base/execute" >>"$work/drain.codes" &
	done
	for ((i = 0; i < 100; i++)); do
		(($(find "$rundir/runs" -mindepth 2 -maxdepth 2 -name 'run-*' | wc -l) >= 20)) && break
		sleep 0.1
	done
	sleep 1
	t0=$EPOCHREALTIME
	kill -INT -- "-$stack_pid"
	wait "$stack_pid" || true
	t1=$EPOCHREALTIME
	stack_pid=""
	wait
	ok=$(grep -c '^200$' "$work/drain.codes" || true)
	echo "Ctrl-C with 20 runs in flight (each had about 2 s left): the stack exited after" \
		"$(((${t1/./} - ${t0/./}) / 1000)) ms; $ok of 20 answered 200"
}

latency() {
	local before_port=0 after_root=$root
	if [[ -n $before ]]; then
		root=$before
		stack_start latency-before
		before_pid=$stack_pid
		before_port=$port
		stack_pid=""
		root=$after_root
	fi
	stack_start latency
	"$PY" - "$port" "$runs" "$before_port" <<'PY'
import socket, statistics, sys, time

port, runs, before_port = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
body = b'{"code":"print(1)"}'
req = b"POST /execute HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body

def one(s):
    t0 = time.monotonic()
    s.sendall(req)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = s.recv(65536)
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
    while len(rest) < length:
        rest += s.recv(65536)
    return (time.monotonic() - t0) * 1000

def summary(name, times):
    times = sorted(times)
    return "%s median %.2f ms, p90 %.2f ms" % (name, statistics.median(times), times[int(len(times) * 0.9)])

s = socket.create_connection(("127.0.0.1", port), timeout=60)
if not before_port:
    times = []
    for i in range(runs + 10):
        if i % 500 == 499:  # nginx ends a keep-alive connection after 1000 requests
            s.close()
            s = socket.create_connection(("127.0.0.1", port), timeout=60)
        times.append(one(s))
    times = times[10:]  # 10 for warm-up
    print("print(1), %d sequential requests on one connection: %s" % (runs, summary("", times)))
    sys.exit(0)
b = socket.create_connection(("127.0.0.1", before_port), timeout=60)
after_t, before_t, diff = [], [], []
for i in range(runs + 10):
    # alternate which goes first, so neither always follows the other
    if i % 500 == 499:  # nginx ends a keep-alive connection after 1000 requests
        s.close()
        b.close()
        s = socket.create_connection(("127.0.0.1", port), timeout=60)
        b = socket.create_connection(("127.0.0.1", before_port), timeout=60)
    if i % 2:
        ta, tb = one(s), one(b)
    else:
        tb, ta = one(b), one(s)
    if i >= 10:
        after_t.append(ta)
        before_t.append(tb)
        diff.append(ta - tb)
print("print(1), %d pairs, alternating: %s; %s; after - before: median %+.2f ms"
      % (runs, summary("before", before_t), summary("after", after_t), statistics.median(diff)))
PY
	stack_stop
	codebox_stack_stop "$before_pid"
	before_pid=""
}

echo "bench-admission: $root ($(git -C "$root" log -1 --format=%h 2>/dev/null || echo unknown))"
for w in "${what[@]}"; do
	"$w"
done
