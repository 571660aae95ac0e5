#!/usr/bin/env bats
# Start-up invariants: a config that breaks one is refused, naming the two numbers; a
# missing module refuses the start.

load helpers/stack

check() {
	run "$ROOT/scripts/check-config.sh" "$@"
}

@test "config: the shipped config passes and needs 32 workers (20 slots + 4 meta + 4 agent + 4 streams)" {
	check --print-workers "$ROOT/nginx/nginx.conf"
	assert_success
	assert_output 32
}

@test "config: the drain time follows the execution timeout" {
	check --print-drain-seconds "$ROOT/nginx/nginx.conf"
	assert_success
	assert_output 46
	local conf
	conf=$(conf_variant 's/CODEBOX_EXECUTION_TIMEOUT_SECONDS  30;/CODEBOX_EXECUTION_TIMEOUT_SECONDS  10;/')
	check --print-drain-seconds "$conf/nginx.conf"
	assert_output 26
}

@test "config: fastcgi_read_timeout not longer than the execution timeout + grace is refused, naming where each is set" {
	local conf read_line timeout_line
	conf=$(conf_variant 's/fastcgi_read_timeout     45s;/fastcgi_read_timeout     35s;/')
	read_line=$(grep -n 'fastcgi_read_timeout     35s;' "$conf/nginx.conf" | cut -d: -f1)
	timeout_line=$(grep -n 'CODEBOX_EXECUTION_TIMEOUT_SECONDS' "$conf/codebox-limits.conf" | grep -v '#' | cut -d: -f1)
	check --source-dir "$conf" "$conf/nginx.conf"
	assert_failure 1
	assert_output --partial "$conf/nginx.conf:$read_line: fastcgi_read_timeout (35s) must be longer than CODEBOX_EXECUTION_TIMEOUT_SECONDS (30s, $conf/codebox-limits.conf:$timeout_line) + "
	conf=$(conf_variant 's/CODEBOX_EXECUTION_TIMEOUT_SECONDS  30;/CODEBOX_EXECUTION_TIMEOUT_SECONDS  40;/')
	read_line=$(grep -n 'fastcgi_read_timeout     45s;' "$conf/nginx.conf" | cut -d: -f1)
	check "$conf/nginx.conf"
	assert_failure 1
	assert_output --partial "$conf/nginx.conf:$read_line: fastcgi_read_timeout (45s) must be longer than CODEBOX_EXECUTION_TIMEOUT_SECONDS (40s, $conf/codebox-limits.conf:$timeout_line) + "
}

@test "config: a statement without its ';' is named at its own file and line, not nginx's" {
	local conf line
	conf=$(conf_variant 's/^\(fastcgi_param  CODEBOX_MAX_PROCESSES .*\);$/\1/')
	line=$(grep -n '^fastcgi_param  CODEBOX_MAX_PROCESSES ' "$conf/codebox-limits.conf" | cut -d: -f1)
	[[ -n $line ]]
	check --source-dir "$conf" "$conf/nginx.conf"
	assert_failure 1
	# nginx names where the statement it read ended, a later line...
	assert_output --regexp "in $conf/codebox-limits.conf:[0-9]+"
	refute_output --partial "in $conf/codebox-limits.conf:$line"
	# ...the check names the line that lacks the ';'
	assert_output --partial "nginx -t rejects it: $conf/codebox-limits.conf:$line: \"fastcgi_param  CODEBOX_MAX_PROCESSES"
	assert_output --partial 'is not terminated by ";"'
	# in nginx.conf itself as well
	conf=$(conf_variant 's/^\(    client_body_timeout .*\);$/\1/')
	line=$(grep -n '^    client_body_timeout ' "$conf/nginx.conf" | cut -d: -f1)
	check "$conf/nginx.conf"
	assert_failure 1
	assert_output --partial "$conf/nginx.conf:$line: \"client_body_timeout"
}

@test "config: CPU oversubscription is a warning with the numbers, not a refusal" {
	local conf
	# the shipped limits: 20 runs of 1000 millicores against a 4-CPU pool
	run --separate-stderr "$ROOT/scripts/check-config.sh" --cpu-limit 4000 --source-dir "$ROOT/nginx" \
		--print-workers "$ROOT/nginx/nginx.conf"
	assert_success
	assert_output 32
	[[ $stderr == "check-config: warning: CODEBOX_MAX_CONCURRENT_EXECUTIONS (20, $ROOT/nginx/codebox-limits.conf:"*") runs of CODEBOX_CPU_MILLICORES (1000, $ROOT/nginx/codebox-limits.conf:"*") may use 20000 millicores, 5.0 times the pool's 4000 (--cpu-limit): at full load a CPU-bound run gets about 200 millicores"* ]]
	# runs that fit: no warning
	conf=$(conf_variant 's/CODEBOX_CPU_MILLICORES             1000;/CODEBOX_CPU_MILLICORES             200;/')
	run --separate-stderr "$ROOT/scripts/check-config.sh" --cpu-limit 4000 "$conf/nginx.conf"
	assert_success
	assert_equal "$stderr" ""
	# where the pool starts (--print-pool-memory-bytes), against this host's cores or cgroup
	run --separate-stderr "$ROOT/scripts/check-config.sh" --print-pool-memory-bytes "$ROOT/nginx/nginx.conf"
	assert_success
	assert_output 0
	if (($(nproc) * 1000 < 20000)); then
		[[ $stderr == *"may use 20000 millicores"*"the pool's "[0-9]*" (the "* ]]
	fi
}

@test "config: an outer limit_conn below maxConcurrentExecutions is refused" {
	local conf
	conf=$(conf_variant 's/limit_conn codebox_execute 100;/limit_conn codebox_execute 19;/')
	check "$conf/nginx.conf"
	assert_failure 1
	assert_output --regexp "$conf/nginx.conf:[0-9]+: limit_conn codebox_execute \(19\) must be at least CODEBOX_MAX_CONCURRENT_EXECUTIONS \(20, $conf/codebox-limits.conf:[0-9]+\)"
}

@test "config: a limit_conn zone not keyed by the nginx worker's pid is refused" {
	local conf
	conf=$(conf_variant 's/limit_conn_zone    $pid zone=codebox_execute/limit_conn_zone    $server_name zone=codebox_execute/')
	check "$conf/nginx.conf"
	assert_failure 1
	assert_output --regexp "$conf/nginx.conf:[0-9]+: limit_conn_zone codebox_execute is keyed by [$]server_name"
}

@test "config: the pool's ceilings are every limit of the config and its body size" {
	check --print-ceilings "$ROOT/nginx/nginx.conf"
	assert_success
	assert_output --partial "CODEBOX_MEMORY_BYTES=1073741824,"
	assert_output --partial "CODEBOX_MAX_PROCESSES=64,"
	assert_output --partial "CODEBOX_EXECUTION_TIMEOUT_SECONDS=30,"
	assert_output --regexp "CODEBOX_MAX_BODY_BYTES=1048576$"
}

@test "config: a pool smaller than the admitted concurrency is refused" {
	check --workers 20 "$ROOT/nginx/nginx.conf"
	assert_failure 1
	assert_output --regexp "the pool's workers \(20, --workers\) must be at least CODEBOX_MAX_CONCURRENT_EXECUTIONS \(20, $ROOT/nginx/codebox-limits.conf:[0-9]+\) \+ limit_conn codebox_meta \(4\) \+ CODEBOX_AGENT_SLOTS \(4\) \+ CODEBOX_MAX_STREAMS \(4, $ROOT/nginx/codebox-limits.conf:[0-9]+\) = 32"
}

@test "config: client_max_body_size below 4 * maxCodeBytes + 1024 is refused" {
	local conf
	conf=$(conf_variant 's/client_max_body_size     1m;/client_max_body_size     256k;/')
	check "$conf/nginx.conf"
	assert_failure 1
	assert_output --regexp "$conf/nginx.conf:[0-9]+: client_max_body_size \(262144 bytes\) must be at least 4 \* CODEBOX_MAX_CODE_BYTES \(65536, $conf/codebox-limits.conf:[0-9]+\) \+ 1024 \(263168 bytes\)"
}

@test "config: POST /sessions' body below a snapshot of CODEBOX_SNAPSHOT_MAX_BYTES as base64 is refused" {
	local conf
	conf=$(conf_variant 's/CODEBOX_SNAPSHOT_MAX_BYTES  *67108864;/CODEBOX_SNAPSHOT_MAX_BYTES  134217728;/')
	check "$conf/nginx.conf"
	assert_failure 1
	assert_output --regexp "$conf/nginx.conf:[0-9]+: POST /sessions' client_max_body_size \(86m\) must be at least 4 \* ceil\(\(CODEBOX_SNAPSHOT_MAX_BYTES \(134217728, $conf/codebox-limits.conf:[0-9]+\) \+ 96\) / 3\) \+ 4096 = 178961196 bytes"
	conf=$(conf_variant 's/CODEBOX_SNAPSHOT_MAX_BYTES  *67108864;/CODEBOX_SNAPSHOT_MAX_BYTES  1024;/')
	check "$conf/nginx.conf"
	assert_failure 1
	assert_output --partial "CODEBOX_SNAPSHOT_MAX_BYTES (1024) must be from 4096 to 1073741824"
}

@test "config: limits that differ between locations are refused" {
	local conf
	conf=$(conf_variant)
	sed -i 's/fastcgi_param CODEBOX_ENDPOINT capabilities;/&\n            fastcgi_param CODEBOX_MAX_CODE_BYTES 1;/' "$conf/nginx.conf"
	# a location that sets its own differing value alongside the include
	sed -i 's/include codebox-limits.conf;//' "$conf/nginx.conf"
	sed -i 's/fastcgi_param CODEBOX_ENDPOINT execute;/&\n            include codebox-limits.conf;/' "$conf/nginx.conf"
	check "$conf/nginx.conf"
	assert_failure 1
	assert_output --partial "fastcgi_param CODEBOX_MAX_CODE_BYTES differs between locations"
}

@test "config: the pool memory budget is checked against one run and the memory available" {
	# (stderr: the CPU warning, checked above)
	run --separate-stderr "$ROOT/scripts/check-config.sh" --print-pool-memory-bytes "$ROOT/nginx/nginx.conf"
	assert_success
	assert_output 0 # derived by the pool: 3/4 of what it may use
	local conf
	conf=$(conf_variant 's/CODEBOX_POOL_MEMORY_BYTES          0;/CODEBOX_POOL_MEMORY_BYTES          8589934592;/')
	check --memory-limit 4294967296 "$conf/nginx.conf"
	assert_failure 1
	assert_output --partial "CODEBOX_POOL_MEMORY_BYTES (8589934592) must not exceed the memory available to the pool (4294967296 bytes)"
	run --separate-stderr "$ROOT/scripts/check-config.sh" --memory-limit 17179869184 --print-pool-memory-bytes \
		"$conf/nginx.conf"
	assert_success
	assert_output 8589934592
	conf=$(conf_variant 's/CODEBOX_POOL_MEMORY_BYTES          0;/CODEBOX_POOL_MEMORY_BYTES          536870912;/')
	check "$conf/nginx.conf"
	assert_failure 1
	assert_output --regexp "$conf/codebox-limits.conf:[0-9]+: CODEBOX_POOL_MEMORY_BYTES \(536870912\) must be at least CODEBOX_MEMORY_BYTES \(1073741824, $conf/codebox-limits.conf:[0-9]+\): one run must fit"
	# a derived budget that cannot hold one run (a 1 GiB pod) is refused too
	check --memory-limit 1073741824 "$ROOT/nginx/nginx.conf"
	assert_failure 1
	assert_output --partial "derived pool memory budget"
}

@test "config: a config nginx rejects is refused" {
	local conf
	conf=$(conf_variant 's/worker_connections  8192;/worker_connections  8192/')
	check "$conf/nginx.conf"
	assert_failure 1
	assert_output --partial "nginx -t rejects it"
}

@test "config: codebox-run refuses to start on a broken invariant, and leaves nothing running" {
	local conf dir
	conf=$(conf_variant 's/limit_conn codebox_execute 100;/limit_conn codebox_execute 5;/')
	dir=$(mktemp -d /tmp/codebox-test.XXXXXX)
	run "$ROOT/scripts/codebox-run.sh" --port "$(free_port)" --agent-port "$(free_port)" \
		--metrics-port "$(free_port)" --rundir "$dir" --conf-dir "$conf" \
		--pool "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --quiet
	assert_failure
	assert_output --partial "must be at least CODEBOX_MAX_CONCURRENT_EXECUTIONS"
	run pgrep -f -- "$dir"
	assert_output ""
	rm -rf "$dir"
}

@test "config: a misspelled key is named with its file, line and the key it resembles" {
	local conf
	conf=$(conf_variant 's/CODEBOX_MAX_PROCESSES /CODEBOX_MAX_PROCESES /')
	check --source-dir "$conf" "$conf/nginx.conf"
	assert_failure
	assert_output --regexp "codebox-limits.conf:[0-9]+: fastcgi_param CODEBOX_MAX_PROCESES is not a codebox parameter \(a misspelling of CODEBOX_MAX_PROCESSES\?\)"
}

@test "config: a limit out of the pool's range is refused before the start, with the range and where" {
	local conf
	conf=$(conf_variant 's/CODEBOX_CPU_MILLICORES             1000;/CODEBOX_CPU_MILLICORES             0;/')
	check --source-dir "$conf" "$conf/nginx.conf"
	assert_failure
	assert_output --regexp "codebox-limits.conf:[0-9]+: fastcgi_param CODEBOX_CPU_MILLICORES=0 is out of range: it must be an integer from 10 to 1024000"
	conf=$(conf_variant 's/CODEBOX_EXECUTION_TIMEOUT_SECONDS  30;/CODEBOX_EXECUTION_TIMEOUT_SECONDS  0;/')
	check "$conf/nginx.conf"
	assert_failure
	assert_output --partial "CODEBOX_EXECUTION_TIMEOUT_SECONDS=0 is out of range: it must be an integer from 1 to 3600"
}

@test "config: codebox-run names the user's file, and a refused start leaves no runtime directory" {
	local conf tmp
	conf=$(conf_variant 's/CODEBOX_MAX_PROCESSES /CODEBOX_MAX_PROCESES /')
	# where codebox-run makes its runtime directory (mktemp under $TMPDIR)
	tmp=$(mktemp -d /tmp/codebox-test.XXXXXX)
	chmod 0711 "$tmp"
	TMPDIR=$tmp run "$ROOT/scripts/codebox-run.sh" --port "$(free_port)" --agent-port "$(free_port)" \
		--metrics-port "$(free_port)" --conf-dir "$conf" \
		--pool "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --quiet
	assert_failure
	assert_output --partial "refusing $conf/nginx.conf: $conf/codebox-limits.conf:"
	refute_output --partial "/conf/codebox-limits.conf"
	run ls -A "$tmp"
	assert_output ""
	rmdir "$tmp"
}

@test "config: a port in use is refused before anything starts: exit 1, nothing left" {
	local dir port holder
	dir=$(mktemp -d /tmp/codebox-test.XXXXXX)
	chmod 0711 "$dir" # runs execute as other uids and must reach their directory
	port=$(free_port)
	# another program holds the port (at most 120 s)
	"$PY" -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(); print("held", flush=True); time.sleep(120)' "$port" \
		>"$dir/holder.out" 3>&- &
	holder=$!
	wait_for "the port to be held" 100 grep -q held "$dir/holder.out"
	local preload
	read -ra preload <<<"$(preload_env)"
	run env "${preload[@]}" "$ROOT/scripts/codebox-run.sh" --port "$port" --agent-port "$(free_port)" \
		--metrics-port "$(free_port)" --rundir "$dir/run" \
		--pool "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --run-uid-base "$(uid_base_for "$port")" --quiet
	kill "$holder" 2>/dev/null || true
	wait "$holder" 2>/dev/null || true
	assert_failure 1
	assert_output --partial "codebox-run: port $port on 127.0.0.1 is in use"
	run pgrep -f -- "$dir/run"
	assert_output ""
	# nothing was started: no pool log
	[[ ! -e $dir/run/logs/pool.log ]]
	rm -rf "$dir"
}

# pool_dir: a new directory for a pool started alone (0711, with runs/); prints its path
pool_dir() {
	local d
	d=$(mktemp -d /tmp/codebox-test.XXXXXX)
	chmod 0711 "$d"
	mkdir -m 0711 "$d/runs"
	echo "$d"
}

# pool_alone DIR [ARG...]: runs the pool alone under bats' run, one worker, on DIR, with ARGs
pool_alone() {
	local d=$1
	shift
	run "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --socket "$d/s.sock" --runs-dir "$d/runs" \
		--workers 1 --run-uid-base "$(uid_base_for "$(free_port)")" "$@"
}

# python_without_sklearn DIR: DIR/python-without-sklearn, an interpreter under which sklearn
# cannot be imported
python_without_sklearn() {
	cat >"$1/python-without-sklearn" <<'PY'
#!/bin/sh
exec /usr/bin/python3 -I -c 'import runpy, sys; sys.modules["sklearn"] = None; runpy.run_path("main.py", run_name="__main__")'
PY
	chmod 0755 "$1/python-without-sklearn"
}

@test "config: the pool refuses to start when a promised module is missing" {
	local dir
	dir=$(pool_dir)
	python_without_sklearn "$dir"
	pool_alone "$dir" --python "$dir/python-without-sklearn"
	assert_failure 1
	assert_output --partial "refusing to start: a promised module is missing"
	assert_output --partial "sklearn"
	assert [ ! -e "$dir/s.sock" ]
	rm -rf "$dir"
}

@test "config: CODEBOX_EXTRA_MODULES adds promised modules: a missing one refuses the start, a malformed list too" {
	local dir
	dir=$(pool_dir)
	CODEBOX_EXTRA_MODULES=matplotlib,codebox_no_such_module=codebox-no-such-dist pool_alone "$dir"
	assert_failure 1
	assert_output --partial "refusing to start: a promised module is missing"
	assert_output --partial "codebox_no_such_module (ModuleNotFoundError"
	CODEBOX_EXTRA_MODULES='tabulate,"x"' pool_alone "$dir"
	assert_failure 1
	assert_output --partial 'codebox-pool: refusing to start: CODEBOX_EXTRA_MODULES: ""x"" is not IMPORT or IMPORT=DISTRIBUTION'
	assert [ ! -e "$dir/s.sock" ]
	rm -rf "$dir"
}

# started_with CACHE: starts the stack with the probe cache CACHE
started_with() {
	CODEBOX_PROBE_CACHE=$1 stack_start
}

# probe_said: how the stack's start-up probe measured the promised modules: "imported" or
# "cached" (its log line)
probe_said() {
	if grep -q '"msg":"python [^"]*, each imported;' "$STACK_DIR/logs/pool.log"; then
		echo imported
	elif grep -q '"msg":"python [^"]*, as the probe cache measured them' "$STACK_DIR/logs/pool.log"; then
		echo cached
	fi
}

@test "config: the probe cache: a second start imports no module and says so; a changed fingerprint, a foreign or a broken file import them again" {
	local cache="$BATS_TEST_TMPDIR/cache/probe.json" first
	mkdir -m 0700 "$BATS_TEST_TMPDIR/cache"
	started_with "$cache"
	assert_equal "$(probe_said)" imported
	first=$(curl -s "$BASE/capabilities" | jq -c '{pythonVersion, modules}')
	stack_stop
	assert_equal "$(stat -c '%a %U' "$cache")" "600 $(id -un)"
	# nothing changed: the same measure, no import (the probe run itself still confirms the
	# layers: /isolation is the same)
	started_with "$cache"
	assert_equal "$(probe_said)" cached
	assert_equal "$(curl -s "$BASE/capabilities" | jq -c '{pythonVersion, modules}')" "$first"
	stack_stop
	# a file the modules' fingerprint no longer matches (as after an upgrade): imported, and
	# the cache written anew
	jq -c '.fingerprint.libdir = [0] | .modules[0].version = "0.0-stale"' "$cache" >"$cache.new"
	mv "$cache.new" "$cache"
	chmod 0600 "$cache"
	started_with "$cache"
	assert_equal "$(probe_said)" imported
	assert_equal "$(curl -s "$BASE/capabilities" | jq -c '{pythonVersion, modules}')" "$first"
	stack_stop
	run -0 jq -e '.fingerprint.libdir != [0] and .cached == false' "$cache"
	# a file others may write is not the pool's: ignored, and replaced
	chmod 0666 "$cache"
	started_with "$cache"
	assert_equal "$(probe_said)" imported
	stack_stop
	assert_equal "$(stat -c '%a' "$cache")" 600
	# a broken one is ignored too
	echo '{"fingerprint": ' >"$cache"
	chmod 0600 "$cache"
	started_with "$cache"
	assert_equal "$(probe_said)" imported
	stack_stop
	# another interpreter's probe does not take this one's measure: one under which sklearn
	# cannot be imported refuses the start, whatever the cache says
	local dir
	dir=$(pool_dir)
	python_without_sklearn "$dir"
	pool_alone "$dir" --python "$dir/python-without-sklearn" --probe-cache "$cache"
	assert_failure 1
	assert_output --partial "refusing to start: a promised module is missing"
	assert_output --partial "sklearn"
	rm -rf "$dir"
	# nor does a promise the cache did not measure
	dir=$(pool_dir)
	CODEBOX_EXTRA_MODULES=codebox_no_such_module pool_alone "$dir" --probe-cache "$cache"
	assert_failure 1
	assert_output --partial "codebox_no_such_module (ModuleNotFoundError"
	rm -rf "$dir"
}
