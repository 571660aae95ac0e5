# shellcheck shell=bash
# Helpers for codebox's bats suites: a private stack per file (nginx on a random free loopback
# port, the socket and runs in the file's temp dir), and small HTTP helpers.

bats_require_minimum_version 1.5.0
# bats-support and bats-assert, their files sourced in the order their load.bash files source
# them, without the two processes per file those take (each names its directory with
# "$(dirname ...)"): this file is loaded again for every test, and the 32 processes cost a
# test 0.1 s of CPU on a host with slow forks
codebox_bats_libs() {
	local lib=${BATS_LIB_PATH:-/usr/lib/bats} f
	lib=${lib%%:*}
	if [[ ! -f $lib/bats-assert/src/refute_regex.bash || ! -f $lib/bats-support/src/lang.bash ]]; then
		bats_load_library bats-support
		bats_load_library bats-assert
		return
	fi
	for f in bats-support/src/{output,error,lang} bats-assert/src/{assert,refute,assert_equal} \
		bats-assert/src/{assert_not_equal,assert_success,assert_failure,assert_output} \
		bats-assert/src/{refute_output,assert_line,refute_line,assert_regex,refute_regex}; do
		# shellcheck disable=SC1090
		source "$lib/$f.bash"
	done
}
codebox_bats_libs

# bats names the tests' directory absolute and normalized
ROOT=${BATS_TEST_DIRNAME%/*}
export ROOT
PY=/usr/bin/python3
export PY

# shellcheck source=scripts/stack-lib.sh
source "$ROOT/scripts/stack-lib.sh"

# uid_base_for PORT: the run uid range of a stack listening on PORT (codebox_uid_base)
uid_base_for() {
	codebox_uid_base "$1"
}

# A free loopback port.
free_port() {
	codebox_free_port
}

# preload_env: the CODEBOX_WARM_* settings a test stack starts with (see stack_start), as
# NAME=VALUE words for env
preload_env() {
	if [[ -z ${CODEBOX_WARM_MODULES+set} && ${STACK_FULL_PRELOAD:-} != 1 ]]; then
		echo -n "CODEBOX_WARM_MODULES=numpy"
		[[ -n ${CODEBOX_WARM_LIGHT_MODULES+set} ]] || echo -n " CODEBOX_WARM_LIGHT_MODULES="
	fi
	echo
}

# stack_start [--conf-dir DIR] [--python PATH]: starts the stack and waits until /readyz
# answers 200 (bounded: 120 s, and only while the stack is alive). On three free loopback
# ports, or on STACK_PORTS ("PORT AGENT-PORT METRICS-PORT": a stack's again, with its run uids).
stack_start() {
	local port agent_port metrics_port i
	# an external stack (make image-test, make kind-test): only its HTTP surface is tested
	if [[ -n ${CODEBOX_BASE:-} ]]; then
		BASE=$CODEBOX_BASE
		AGENT=${CODEBOX_AGENT_BASE:-}
		METRICS=${CODEBOX_METRICS_BASE:-}
		STACK_DIR=""
		STACK_PID=""
		export BASE AGENT METRICS STACK_DIR STACK_PID
		return 0
	fi
	# not under bats' private temp dir: a root pool runs programs as other uids, which must
	# be able to reach their working directory (the runtime dir itself is 0711)
	STACK_DIR=$(mktemp -d /tmp/codebox-test.XXXXXX)
	if [[ -n ${STACK_PORTS:-} ]]; then
		read -r port agent_port metrics_port <<<"$STACK_PORTS"
	else
		codebox_stack_ports
	fi
	# concurrent stacks (other suites, other checkouts) never share run uids: each takes a
	# range of 256 derived from its port, which no other live stack holds
	# warm stacks preload numpy alone unless the suite asks for the default five
	# (STACK_FULL_PRELOAD=1: the warm and attacks suites): importing all five costs the
	# zygote 3 to 6 s, paid by each of some 30 stacks in each pass; a run's warm path is the
	# same whatever the template imported. numpy is then the heavy tier's (the light tier
	# imports nothing), so that every suite's programs that name numpy take the heavy
	# template's path (an init that is not the worker's child) and the others the light one
	local preload as_user=()
	read -ra preload <<<"$(preload_env)"
	# STACK_USER=UID: the stack runs as that unprivileged uid, as a pod's pool does
	if [[ -n ${STACK_USER:-} ]]; then
		chown "$STACK_USER:$STACK_USER" "$STACK_DIR"
		as_user=(setpriv --reuid "$STACK_USER" --regid "$STACK_USER" --clear-groups)
	fi
	env "${preload[@]}" "${as_user[@]}" \
		"$ROOT/scripts/codebox-run.sh" --port "$port" --agent-port "$agent_port" \
		--metrics-port "$metrics_port" --rundir "$STACK_DIR" \
		--pool "${CODEBOX_POOL:-$ROOT/build/codebox-pool}" --quiet \
		--run-uid-base "$(uid_base_for "$port")" "$@" \
		>"$STACK_DIR/run.out" 2>&1 3>&- &
	STACK_PID=$!
	BASE="http://127.0.0.1:$port"
	AGENT="http://127.0.0.1:$agent_port"     # port 8888's protocol
	METRICS="http://127.0.0.1:$metrics_port" # GET /metrics
	# started by a test rather than setup_file: the test's teardown stops it (the file's
	# teardown_file only knows the stack setup_file started)
	STACK_IN_TEST=${BATS_TEST_NAME:+1}
	export STACK_DIR STACK_PID BASE AGENT METRICS STACK_IN_TEST
	if codebox_wait_ready "$BASE" "$STACK_PID" "$STACK_DIR"; then
		return 0
	fi
	echo "the stack did not become ready:" >&2
	stack_logs >&2
	return 1
}

# Reaching an external stack in a network namespace of its own (a pod without network, as in
# make image-test): every curl of the suites goes through this function. In a test, each
# answer is also checked against the OpenAPI documents (openapi_check, below).
curl() {
	local doc=main a trace rc=0 big=0
	if [[ -z ${OPENAPI_CHECK_FAILFILE:-} || -n ${OPENAPI_UNCHECKED:-} ]]; then
		curl_plain "$@"
		return
	fi
	for a in "$@"; do
		if [[ -n ${AGENT:-} && $a == "$AGENT"/* ]]; then
			doc=agent
		elif [[ -n ${METRICS:-} && $a == "$METRICS"/* ]] || [[ $a == http://*/metrics ]]; then
			# the metrics port's Prometheus text (a fleet's stacks have ports of their own)
			doc=""
		elif [[ $big == 1 || $a == @* ]]; then
			# an upload from a file: a large one is not traced (a trace is 4 bytes a byte)
			big=0
			[[ $a == *=@* ]] && a=${a#*=@}
			a=${a%%;*}
			a=${a#@}
			[[ -f $a ]] && (($(command stat -L -c %s -- "$a") > 4194304)) && doc=""
		elif [[ $a == -T || $a == --upload-file || $a == -F || $a == --form ]]; then
			big=1
		fi
	done
	if [[ -z $doc ]]; then
		curl_plain "$@"
		return
	fi
	trace=$BATS_TEST_TMPDIR/openapi-$BASHPID-$((++OPENAPI_N)).trace
	curl_plain --trace "$trace" "$@" || rc=$?
	openapi_check "$doc" "$trace"
	return "$rc"
}

curl_plain() {
	if [[ -n ${CODEBOX_NETNS:-} ]]; then
		nsenter --net="$CODEBOX_NETNS" curl "$@"
	else
		command curl "$@"
	fi
}

# The OpenAPI documents (docs/openapi.json, port 8888's docs/openapi-agent.json) are checked
# against every answer a test receives: curl() above traces each request and asks the checker
# (tests/helpers/openapi_check.py, one process for the whole bats run on a loopback port,
# started by the first request and gone after 120 s without one) about it; the Python helpers
# ask it through openapi_check.record(). A mismatch is written to the test's failure file and
# fails the test at its teardown (openapi_teardown). OPENAPI_CHECK=0 turns the checks off;
# OPENAPI_UNCHECKED=1 before one call leaves an attack's answer to its test alone.
OPENAPI_N=0
if [[ -n ${BATS_TEST_TMPDIR:-} && -n ${BATS_RUN_TMPDIR:-} && ${OPENAPI_CHECK:-1} != 0 ]]; then
	OPENAPI_CHECK_FAILFILE=$BATS_TEST_TMPDIR/openapi-failures
	OPENAPI_CHECK_PORTFILE=$BATS_RUN_TMPDIR/openapi-check.port
	export OPENAPI_CHECK_FAILFILE OPENAPI_CHECK_PORTFILE
else
	unset OPENAPI_CHECK_FAILFILE OPENAPI_CHECK_PORTFILE
fi

# openapi_check DOC FILE: the checker's verdict on the exchanges in FILE (a curl trace or a
# helper's record) against DOC (main or agent); a mismatch is appended to the failure file.
# Bounded: the checker is started at most twice, its answer awaited at most 120 s.
openapi_check() {
	local port fd="" verdict="" try i now
	for try in 1 2 3; do
		port=""
		read -r port 2>/dev/null <"$OPENAPI_CHECK_PORTFILE" || true
		if [[ -n $port ]] && { exec {fd}<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null; then
			printf '%s %s\n' "$1" "$2" >&"$fd"
			read -r -t 120 verdict <&"$fd" || verdict="fail the OpenAPI checker did not answer about $2"
			exec {fd}>&-
			break
		fi
		((try < 3)) || break
		"$PY" "$ROOT/tests/helpers/openapi_check.py" serve "$OPENAPI_CHECK_PORTFILE" \
			</dev/null >/dev/null 2>>"$BATS_RUN_TMPDIR/openapi-check.log" 3>&- &
		for ((i = 0; i < 100; i++)); do
			now=""
			read -r now 2>/dev/null <"$OPENAPI_CHECK_PORTFILE" || true
			[[ -n $now && $now != "$port" ]] && break
			sleep 0.1
		done
	done
	[[ -n $verdict ]] || verdict="fail the OpenAPI checker could not be reached about $2"
	if [[ $verdict != ok ]]; then
		printf 'openapi: %s\n' "$verdict" >>"$OPENAPI_CHECK_FAILFILE"
	fi
}

# openapi_teardown: fails (with the mismatches) when an answer of the test did not match the
# OpenAPI documents; every teardown calls it (stack_teardown does)
openapi_teardown() {
	[[ -n ${OPENAPI_CHECK_FAILFILE:-} && -s $OPENAPI_CHECK_FAILFILE ]] || return 0
	echo "answers that do not match the OpenAPI documents (docs/openapi*.json):" >&2
	cat "$OPENAPI_CHECK_FAILFILE" >&2
	return 1
}

# Stops exactly what stack_start started and checks that nothing of it is left running.
stack_stop() {
	[[ -n ${STACK_PID:-} ]] || return 0
	STACK_IN_TEST="" # stopped: a test's teardown has nothing more to stop
	kill -TERM "$STACK_PID" 2>/dev/null || true
	wait "$STACK_PID" 2>/dev/null || true
	# bounded: the drain lets in-flight runs finish, slower under the sanitizers
	wait_for "the stack to stop" 600 marker_gone "$STACK_DIR" || true
	local left
	left=$(pgrep -f -- "$STACK_DIR" || true)
	if [[ -n $left ]]; then
		echo "processes left behind by the stack: $left" >&2
		# shellcheck disable=SC2086
		kill -KILL $left 2>/dev/null || true
		return 1
	fi
	# the sanitizer build reports into the pool's log: any report fails the suite
	if grep -q -e 'ERROR: AddressSanitizer' -e 'ERROR: LeakSanitizer' -e 'runtime error:' \
		"$STACK_DIR/logs/pool.log" 2>/dev/null; then
		echo "the sanitizers reported:" >&2
		grep -A 20 -e 'Sanitizer' -e 'runtime error:' "$STACK_DIR/logs/pool.log" | head -n 60 >&2
		return 1
	fi
	rm -rf "$STACK_DIR"
}

stack_logs() {
	echo "--- codebox-run"
	tail -n 20 "$STACK_DIR/run.out" 2>/dev/null || true
	echo "--- pool.log"
	tail -n 30 "$STACK_DIR/logs/pool.log" 2>/dev/null || true
	echo "--- nginx error.log"
	tail -n 20 "$STACK_DIR/logs/error.log" 2>/dev/null || true
}

# The logs are shown by bats only when a test failed; a stack the test started is stopped,
# pass or fail. (A suite with a teardown of its own calls stack_teardown from it.)
teardown() {
	stack_teardown
}

stack_teardown() {
	if [[ ${BATS_TEST_COMPLETED:-} != 1 && -n ${STACK_DIR:-} ]]; then
		stack_logs
	fi
	if [[ ${STACK_IN_TEST:-} == 1 ]]; then
		stack_stop
	fi
	openapi_teardown
}

# request [curl args...] URL: one HTTP request (bounded: 60 s, unless the args bound it
# otherwise). Sets $code (the HTTP status) and $reply (the body); leaves the body in
# $BATS_TEST_TMPDIR/body and the headers in $BATS_TEST_TMPDIR/headers (see header).
# shellcheck disable=SC2034 # code and reply are read by the tests
request() {
	code=$(curl -s -o "$BATS_TEST_TMPDIR/body" -D "$BATS_TEST_TMPDIR/headers" \
		-w '%{http_code}' --max-time 60 "$@")
	read_reply "$BATS_TEST_TMPDIR/body"
}

# read_reply FILE: $reply is FILE's text as "$(cat FILE)" gives it (the trailing newlines
# dropped), read without a process
read_reply() {
	reply=""
	if [[ -f $1 ]]; then
		IFS= read -r -d '' reply <"$1" || true
	fi
	while [[ ${reply: -1} == $'\n' ]]; do
		reply=${reply:0:-1}
	done
}

# post BODY [curl args...]: POST /execute with a raw JSON body, through request: sets $code
# and $reply.
post() {
	local body=$1
	shift
	request -H 'Content-Type: application/json' --data-binary @- "$@" "$BASE/execute" <<<"$body"
}

# execute CODE [JQ-EXTRA]: runs CODE; JQ-EXTRA is a jq object merged into the body, e.g.
# '{timeoutSeconds: 1}'. Sets $code and $reply (the body).
execute() {
	local body
	body=$(jq -cn --arg code "$1" "{code: \$code} + (${2:-{\}})")
	post "$body"
}

# answers_42 [curl args...]: POSTs print(6 * 7), which must answer 200 with stdout 42.
answers_42() {
	post '{"code":"print(6 * 7)"}' "$@"
	assert_equal "$code" 200
	assert_equal "$(field .stdout)" 42
}

# execute_file NAME [JQ-EXTRA]: runs tests/programs/NAME.
execute_file() {
	execute "$(cat "$ROOT/tests/programs/$1")" "${2:-}"
}

# field JQ: a field of $reply.
field() {
	jq -r "$1" <<<"$reply"
}

header() { # name: the value of a response header of the last post
	grep -i "^$1:" "$BATS_TEST_TMPDIR/headers" | head -1 | cut -d' ' -f2- | tr -d '\r'
}

# conf_variant SED-EXPR...: a copy of nginx/ with each sed expression applied to every file;
# prints its directory.
conf_variant() {
	local dir expr
	dir=$(mktemp -d "$BATS_FILE_TMPDIR/conf.XXXXXX")
	cp "$ROOT"/nginx/*.conf "$dir/"
	for expr in "$@"; do
		sed -i -e "$expr" "$dir"/*.conf
	done
	echo "$dir"
}

# wait_for DESCRIPTION TRIES COMMAND...: retries COMMAND every 0.1 s, at most TRIES times.
wait_for() {
	local what=$1 tries=$2 i
	shift 2
	for ((i = 0; i < tries; i++)); do
		if "$@"; then
			return 0
		fi
		sleep 0.1
	done
	echo "timed out waiting for $what" >&2
	return 1
}

# Where this stack's parts are. A pod (make image-test) says so through CODEBOX_POD_*: the
# runs directory as the host sees it and as the pool sees it, the host pids of the pool and
# of nginx, and the socket's path inside the pod.
# stack_runs: the runs directory, as this shell reaches it
stack_runs() {
	echo "${CODEBOX_POD_RUNS:-$STACK_DIR/runs}"
}
# stack_runs_inside: the same directory as the pool and its runs name it
stack_runs_inside() {
	echo "${CODEBOX_POD_RUNS_INSIDE:-$STACK_DIR/runs}"
}
# stack_socket: the FastCGI socket's path, as the runs would name it
stack_socket() {
	echo "${CODEBOX_POD_SOCKET:-$STACK_DIR/fcgi.sock}"
}
# stack_nginx_pid: nginx's master
stack_nginx_pid() {
	if [[ -n ${CODEBOX_POD_NGINX_PID:-} ]]; then
		echo "$CODEBOX_POD_NGINX_PID"
	else
		cat "$STACK_DIR/nginx.pid"
	fi
}

# runs_in_flight: how many run directories exist right now.
runs_in_flight() {
	find "$(stack_runs)" -mindepth 2 -maxdepth 2 -name 'run-*' | wc -l
}

# pool_pid: the supervisor of this stack.
pool_pid() {
	if [[ -n ${CODEBOX_POD_POOL_PID:-} ]]; then
		echo "$CODEBOX_POD_POOL_PID"
	else
		pgrep -o -f -- "--runs-dir $STACK_DIR/runs"
	fi
}

# worker_pids: the workers of this stack (the pool's children but its warm zygotes, and the
# inits a template that ended left to the pool, a child subreaper).
worker_pids() {
	local p comm
	for p in $(pgrep -P "$(pool_pid)"); do
		comm=$(cat "/proc/$p/comm" 2>/dev/null) || continue
		# (exe: a zygote between its execve and its first instruction's rename; templates
		# whose zygote died are the pool's children until it ends them)
		[[ $comm == codebox-zygote || $comm == codebox-init || $comm == exe ||
			$comm == codebox-warm || $comm == codebox-heavy ]] || echo "$p"
	done
}

# heavy_pids: the zygote's heavy templates, one a line (none with one tier): the serving one, and
# while it retires its successor, or once that serves the retired one, ending; and one whose
# zygote died (the pool's child, until a zygote serves the tier again).
heavy_pids() {
	# shellcheck disable=SC2046 # one pid a word
	children_named codebox-heavy $(zygote_pid) "$(pool_pid)"
}

# new_heavy OLD: a heavy template other than the OLD ones (one a line) is up
new_heavy() {
	local h
	for h in $(heavy_pids); do
		grep -qx "$h" <<<"$1" || return 0
	done
	return 1
}

# children_named COMM PARENT...: the children of the PARENTs whose name is COMM, one a line
children_named() {
	local comm=$1 parent p
	shift
	for parent in "$@"; do
		for p in $(pgrep -P "$parent"); do
			[[ $(cat "/proc/$p/comm" 2>/dev/null) == "$comm" ]] && echo "$p"
		done
	done
	return 0
}

# zygote_pid: the warm zygote of this stack (none when runs are cold).
zygote_pid() {
	children_named codebox-zygote "$(pool_pid)"
}

# template_pids: the zygote's light templates (the serving one, a successor, a retired one), and
# one whose zygote died (the pool's child until a zygote serves the tier again).
template_pids() {
	# shellcheck disable=SC2046 # one pid a word
	children_named codebox-warm $(zygote_pid) "$(pool_pid)"
}

# init_worker INIT: the worker of the run whose init is INIT: its parent (cold), or the worker
# that holds its pidfd (warm: init is a template's child).
init_worker() {
	local w f pp
	pp=$(ps -o ppid= -p "$1" | tr -d ' ')
	for w in $(worker_pids); do
		[[ $w == "$pp" ]] && echo "$w" && return 0
	done
	for w in $(worker_pids); do
		for f in /proc/"$w"/fdinfo/*; do
			grep -qx "Pid:[[:space:]]*$1" "$f" 2>/dev/null && echo "$w" && return 0
		done
	done
	return 1
}

# box_inits: the inits of every sandbox of this stack (the children named codebox-init of its
# workers, of its templates, and of the pool, which inherits those of a template that ended).
box_inits() {
	# shellcheck disable=SC2046 # one pid a word
	children_named codebox-init $(worker_pids) $(template_pids) $(heavy_pids) "$(pool_pid)"
}

# marker_gone MARKER: no process has MARKER on its command line (a function, so that no
# shell carrying the marker in its own arguments is in the way).
marker_gone() {
	! pgrep -f -- "$1" >/dev/null
}

# no_run_leftovers: nothing of any finished run remains. Each worker may hold one sandbox
# built ahead for its next request: an empty directory, a cgroup holding only that box's
# idle init (warm: and its program, prepared and waiting for the request), and that init
# (named codebox-init; without a pid namespace, the box not yet exec'd, still named
# codebox-pool) without other children. Warm, the init is a child of a template of the
# zygote's (codebox-warm, codebox-heavy), or of the pool once that template ended: at most
# one such sandbox per worker. One snapshot of the process table
# per look; a worker building its next sandbox right after a reply is caught mid-way, so the
# verdict is the first clean look within 3 s (a leftover stays; the last look's complaint is
# shown).
no_run_leftovers() {
	local i
	for ((i = 0; i < 30; i++)); do
		run_leftovers_look 2>"$BATS_TEST_TMPDIR/leftovers" && return 0
		sleep 0.1
	done
	cat "$BATS_TEST_TMPDIR/leftovers" >&2
	return 1
}

run_leftovers_look() {
	local pool workers=0 p pp c
	local -A comm=() kids=()
	pool=$(pool_pid)
	while read -r p pp c; do
		comm[$p]=$c
		kids[$pp]+=" $p"
	done < <(ps -e -o pid=,ppid=,comm=)
	local worker_list=() zygotes=() heavies=()
	for p in ${kids[$pool]:-}; do
		case ${comm[$p]:-} in
		codebox-zygote) zygotes+=("$p") ;;
		codebox-init) ;;
		*) worker_list+=("$p") ;;
		esac
	done
	workers=${#worker_list[@]}
	for p in "${zygotes[@]}"; do
		for c in ${kids[$p]:-}; do
			[[ ${comm[$c]:-} == codebox-heavy || ${comm[$c]:-} == codebox-warm ]] && heavies+=("$c")
		done
	done
	if [[ -n $(find "$(stack_runs)" -mindepth 3 -path '*/w*/run-*/*' -print -quit) ]]; then
		echo "a run directory is not empty:" >&2
		find "$(stack_runs)" -mindepth 3 -path '*/w*/run-*/*' >&2
		return 1
	fi
	if (($(find "$(stack_runs)" -mindepth 2 -maxdepth 2 -name 'run-*' | wc -l) > workers)); then
		echo "more run directories than workers" >&2
		return 1
	fi
	local cg
	while read -r cg; do
		[[ -n $cg ]] || continue
		local procs
		# a finished run's group is removed after its reply: it may vanish meanwhile
		procs=$(cat "$cg/cgroup.procs" 2>/dev/null) || continue
		if (($(grep -c . <<<"$procs") > 2)); then
			echo "the cgroup $cg holds more than a waiting init and program" >&2
			return 1
		fi
	done < <(find /sys/fs/cgroup/memory /sys/fs/cgroup/pids /sys/fs/cgroup/unified -maxdepth 6 -type d \
		-path "*/codebox-$pool/w*-run-*" 2>/dev/null)
	# idle PID: an init whose one child, the program prepared for the next request, has none
	_nrl_idle() {
		local w
		w=$(wc -w <<<"${kids[$1]:-}")
		((w == 1)) || return 1
		w=${kids[$1]// /}
		[[ ${comm[$w]:-} == python3 && -z ${kids[$w]:-} ]]
	}
	local worker child
	for worker in "${worker_list[@]}"; do
		for child in ${kids[$worker]:-}; do
			c=${comm[$child]:-}
			[[ $c == codebox-init ]] && _nrl_idle "$child" && continue
			if [[ ($c != codebox-init && $c != codebox-pool) || -n ${kids[$child]:-} ]]; then
				echo "worker $worker has a child that is not an idle sandbox: $child" >&2
				ps -o pid,ppid,comm,args -p "$child" >&2
				return 1
			fi
		done
	done
	local inits=0 h
	for h in "${heavies[@]}" "$pool"; do
		for child in ${kids[$h]:-}; do
			[[ ${comm[$child]:-} == codebox-init ]] || continue
			if ! _nrl_idle "$child"; then
				echo "a template's init is not an idle sandbox: $child" >&2
				ps -o pid,ppid,comm,args --ppid "$child" -p "$child" >&2
				return 1
			fi
			inits=$((inits + 1))
		done
	done
	if ((inits > workers)); then
		echo "more warm sandboxes ($inits) than workers ($workers)" >&2
		return 1
	fi
}

# hang_up_on PORT REQ-FILE MARKER WHAT: a client (tests/helpers/clients.py hangup) sends the
# request in REQ-FILE to PORT and hangs up once the program with MARKER on its command line (the
# WHAT: run, command) runs; waits for that program to die, and sets ms (the caller's local) to
# how long it lived after the hang-up.
hang_up_on() {
	local client t0
	"$PY" "$ROOT/tests/helpers/clients.py" hangup "$1" "@$2" 60 3>&- &
	client=$!
	wait_for "the $4 to start" 100 pgrep -f -- "$3"
	t0=$EPOCHREALTIME
	kill "$client"
	wait "$client" || true
	wait_for "the abandoned $4 to die" 100 marker_gone "$3"
	ms=$(((${EPOCHREALTIME/./} - ${t0/./}) / 1000))
	echo "the $4 died ${ms} ms after its client hung up"
}

# marker_body MARKER PYCODE: a request body whose program becomes `python3 -c PYCODE MARKER`,
# so that the test can find it by its marker on the command line.
marker_body() {
	jq -cn --arg m "$1" --arg py "$2" '{code: ("import os, sys\nos.execv(sys.executable, [sys.executable, \"-c\", " + ($py | tojson) + ", sys.stdin.read()])"), stdin: $m}'
}
