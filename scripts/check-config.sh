#!/usr/bin/env bash
# Checks codebox's start-up invariants on an nginx config (API.md, "Invariants"):
#   1. nginx -t accepts it;
#   2. fastcgi_read_timeout > CODEBOX_EXECUTION_TIMEOUT_SECONDS + the kill/clean-up grace;
#   3. limit_conn codebox_execute (the outer bound per nginx worker) >=
#      CODEBOX_MAX_CONCURRENT_EXECUTIONS (the pool's execution slots), both zones keyed by the
#      nginx worker's $pid (a crashed worker's counts must not outlive it), and the pool's
#      workers >= CODEBOX_MAX_CONCURRENT_EXECUTIONS + limit_conn codebox_meta +
#      CODEBOX_AGENT_SLOTS (port 8888's slots, at most limit_conn codebox_agent);
#   4. client_max_body_size >= 4 * CODEBOX_MAX_CODE_BYTES + 1024, and a session's files' location's
#      >= CODEBOX_DISK_BYTES (a file may fill a session's disk);
#   5. every location passes the same limits (so /capabilities reports what /execute enforces);
#   6. CODEBOX_POOL_MEMORY_BYTES (0: derived by the pool) is at least CODEBOX_MEMORY_BYTES and,
#      with --memory-limit or --print-pool-memory-bytes (the pool's start), at most the memory
#      available (--memory-limit, else the container's or host's);
#   7. with --memory-limit: the runs fit it (CODEBOX_MAX_CONCURRENT_EXECUTIONS *
#      (CODEBOX_MEMORY_BYTES, or the pool budget when smaller) + CODEBOX_DISK_BYTES, a run's
#      tmpfs is memory, + the pool's own).
# A violated invariant is refused with a message naming both numbers and the file and line of
# the operator's config that sets each (the source directory's, not a rendered copy's); where
# nginx -t refuses a statement left without its ';', the line that lacks it is named too.
# A warning, not a refusal: CPU oversubscription (CODEBOX_MAX_CONCURRENT_EXECUTIONS *
# CODEBOX_CPU_MILLICORES above the pool's CPU: --cpu-limit, else, where the pool is about to
# start, its cgroup's quota or the host's cores).
set -euo pipefail

# The kill-and-clean-up grace, from its one source: the pool's own constants (run.c,
# codebox-pool --print-kill-grace-seconds): the pool under test ($CODEBOX_POOL), this
# checkout's build, or the one on PATH (the image's).
find_pool() {
	local cand
	for cand in "${CODEBOX_POOL:-}" "$(dirname "${BASH_SOURCE[0]}")/../build/codebox-pool" \
		"$(command -v codebox-pool || true)"; do
		if [[ -n $cand && -x $cand ]]; then
			echo "$cand"
			return 0
		fi
	done
	echo "check-config: no codebox-pool to ask for the kill grace and the limits' ranges (make build, or set CODEBOX_POOL)" >&2
	exit 1
}
kill_grace_seconds() {
	local pool g
	pool=$(find_pool)
	g=$("$pool" --print-kill-grace-seconds) || {
		echo "check-config: $pool --print-kill-grace-seconds failed" >&2
		exit 1
	}
	[[ $g =~ ^[0-9]+$ ]] || {
		echo "check-config: $pool printed no kill grace: $g" >&2
		exit 1
	}
	echo "$g"
}
POOL_OWN_BYTES=$((256 * 1024 * 1024)) # the pool, its workers and their idle sandboxes

usage() {
	cat <<USAGE
usage: $0 [--workers N] [--print-workers] [--print-drain-seconds] [--print-ceilings]
          [--print-pool-memory-bytes] [--print-max-sessions] NGINX_CONF
Checks the invariants between nginx's limits, its timeouts and the pool size.
  --workers N      the pool size to check (default: the smallest size that passes)
  --print-workers  print the pool size the config needs, after checking
  --print-drain-seconds
                   print how long a draining pool must wait for in-flight runs (the
                   execution timeout plus the pool's kill and clean-up grace, from
                   codebox-pool --print-kill-grace-seconds, plus 5 s)
  --print-ceilings print the pool's ceilings, NAME=VALUE,...: every limit of
                   codebox-limits.conf and CODEBOX_MAX_BODY_BYTES (client_max_body_size);
                   the pool caps whatever a request brings at these (codebox-pool --ceilings)
  --memory-limit BYTES
                   refuse limits whose concurrent runs cannot fit BYTES of memory (the
                   pool container's limit; default: this process's memory cgroup
                   limit, else the host's MemTotal)
  --print-pool-memory-bytes
                   print CODEBOX_POOL_MEMORY_BYTES (for codebox-pool --pool-memory-bytes)
  --print-max-sessions
                   print CODEBOX_MAX_SESSIONS (for codebox-pool --max-sessions: a root
                   pool gives each session a host uid of its own), after the numbers above
  --cpu-limit MILLICORES
                   warn when the concurrent runs' CPU quotas add up to more than this (the
                   pool container's CPU limit; default, with --print-pool-memory-bytes: this
                   process's cgroup CPU quota, else the host's cores)
  --source-dir DIR the directory the config was rendered from: messages name its files
USAGE
}

workers=""
source_dir=""
print_workers=0
print_drain=0
print_ceilings=0
print_pool_memory=0
print_max_sessions=0
memory_limit=""
cpu_limit=""
conf=""
while (($#)); do
	case $1 in
	--help | -h)
		usage
		exit 0
		;;
	--workers)
		workers=${2:?--workers needs a number}
		shift 2
		;;
	--print-workers)
		print_workers=1
		shift
		;;
	--source-dir)
		source_dir=${2:?--source-dir needs the directory the config was rendered from}
		shift 2
		;;
	--print-drain-seconds)
		print_drain=1
		shift
		;;
	--print-ceilings)
		print_ceilings=1
		shift
		;;
	--print-pool-memory-bytes)
		print_pool_memory=1
		shift
		;;
	--print-max-sessions)
		print_max_sessions=1
		shift
		;;
	--memory-limit)
		memory_limit=${2:?--memory-limit needs a number of bytes}
		[[ $memory_limit =~ ^[0-9]+$ ]] || {
			echo "check-config: --memory-limit must be a number of bytes" >&2
			exit 2
		}
		shift 2
		;;
	--cpu-limit)
		cpu_limit=${2:?--cpu-limit needs a number of millicores}
		[[ $cpu_limit =~ ^[0-9]+$ ]] || {
			echo "check-config: --cpu-limit must be a number of millicores" >&2
			exit 2
		}
		shift 2
		;;
	-*)
		usage >&2
		exit 2
		;;
	*)
		conf=$1
		shift
		;;
	esac
done
[[ -n $conf ]] || {
	usage >&2
	exit 2
}
[[ -f $conf ]] || {
	echo "check-config: no such file: $conf" >&2
	exit 2
}

fail() {
	if [[ -n $source_dir ]]; then
		echo "check-config: refusing $source_dir/nginx.conf: $*" >&2
	else
		echo "check-config: refusing $conf: $*" >&2
	fi
	exit 1
}

# where NAME: the file and line of the user's config that sets fastcgi_param NAME (the
# source when given: what the user edits, not its rendered copy)
where() {
	where_directive fastcgi_param "$1"
}

# where_directive DIRECTIVE [ARGUMENT-REGEX]: "FILE:LINE: " of the first statement of the
# user's config that starts with DIRECTIVE (and ARGUMENT); nothing when none does
where_directive() {
	local dir=${source_dir:-$(dirname "$conf")} hit
	hit=$(grep -nE "^[[:space:]]*$1[[:space:]]+${2:+$2([[:space:];]|$)}" "$dir"/*.conf 2>/dev/null |
		head -1 | cut -d: -f1,2)
	[[ -n $hit ]] && echo "$hit: "
}

# at NAME: ", FILE:LINE" of the user's fastcgi_param NAME, for a number quoted in a message
at() {
	local w
	w=$(where "$1")
	[[ -n $w ]] && echo ", ${w%: }"
}

# unterminated FILE...: "FILE:LINE: ..." for each statement that runs into the next one: a
# line that ends a directive's words without ';', '{' or '}', followed by a line that starts
# with a directive's name (a word, then a space or ';'). nginx reads the two as one statement
# and names the line where it ends, the next one (or a later one). Only asked once nginx -t
# has refused the config: a valid config may wrap a statement over lines.
unterminated() {
	awk '
	function code(l) { sub(/[[:space:]]*#.*$/, "", l); sub(/[[:space:]]+$/, "", l); return l }
	FNR == 1 { prev = ""; prev_line = 0 }
	{
		line = code($0)
		if (line == "") next
		if (prev != "" && line ~ /^[[:space:]]*[a-z_][a-z0-9_]*([[:space:]]|;|$)/ &&
		    prev ~ /^[[:space:]]*[a-z_][a-z0-9_]*[[:space:]]/ && prev !~ /[;{}]$/)
			printf "%s:%d: \"%s\" is not terminated by \";\"\n", FILENAME, prev_line, prev_text
		prev = line; prev_line = FNR
		prev_text = line; sub(/^[[:space:]]+/, "", prev_text)
	}' "$@"
}

# the CODEBOX_* parameters codebox reads; another one is a misspelling (or a stale name)
KNOWN_PARAMS="CODEBOX_EXECUTION_TIMEOUT_SECONDS CODEBOX_MAX_CONCURRENT_EXECUTIONS CODEBOX_MAX_CODE_BYTES
CODEBOX_MAX_STDOUT_BYTES CODEBOX_MAX_STDERR_BYTES CODEBOX_MAX_RESULT_BYTES CODEBOX_MAX_STDIN_BYTES
CODEBOX_MEMORY_BYTES CODEBOX_MAX_PROCESSES CODEBOX_DISK_BYTES CODEBOX_CPU_MILLICORES
CODEBOX_POOL_MEMORY_BYTES CODEBOX_ENDPOINT CODEBOX_REQUEST_ID CODEBOX_AGENT_SLOTS CODEBOX_MCP_ORIGINS
CODEBOX_MAX_SESSIONS CODEBOX_SESSION_IDLE_SECONDS CODEBOX_SESSION_MAX_SECONDS CODEBOX_TOKEN_ID
CODEBOX_SESSION_MAX_EXECUTION_SECONDS CODEBOX_MAX_SESSIONS_PER_TOKEN CODEBOX_MAX_STREAMS
CODEBOX_SNAPSHOT_MAX_BYTES CODEBOX_TRACEPARENT CODEBOX_SPAN_ID CODEBOX_TRACESTATE
CODEBOX_MAX_EXECUTIONS_PER_TOKEN"

# nearest NAME: the known parameter closest to NAME (edit distance)
nearest() {
	awk -v w="$1" -v known="$KNOWN_PARAMS" 'function lev(a, b,   i, j, la, lb, d, c) {
		la = length(a); lb = length(b)
		for (i = 0; i <= la; i++) d[i, 0] = i
		for (j = 0; j <= lb; j++) d[0, j] = j
		for (i = 1; i <= la; i++) for (j = 1; j <= lb; j++) {
			c = substr(a, i, 1) != substr(b, j, 1)
			d[i, j] = d[i - 1, j] + 1
			if (d[i, j - 1] + 1 < d[i, j]) d[i, j] = d[i, j - 1] + 1
			if (d[i - 1, j - 1] + c < d[i, j]) d[i, j] = d[i - 1, j - 1] + c
		}
		return d[la, lb]
	}
	BEGIN { n = split(known, k, /[ \n]+/); best = ""; bd = 1e9
		for (i = 1; i <= n; i++) if (k[i] != "") { v = lev(w, k[i]); if (v < bd) { bd = v; best = k[i] } }
		print best }'
}

NGINX=${NGINX:-/usr/sbin/nginx}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
mkdir -p "$prefix/logs" "$prefix/counters" "$prefix/tmp"
# load_module's relative path (modules/) resolves under the prefix: codebox's nginx module,
# from this checkout's build unless $CODEBOX_NGINX_MODULES names another directory
ln -s "$(realpath -m "${CODEBOX_NGINX_MODULES:-$(dirname "${BASH_SOURCE[0]}")/../build/nginx}")" "$prefix/modules"
conf_abs=$(realpath "$conf")
if ! dump=$("$NGINX" -q -T -p "$prefix/" -e "$prefix/logs/error.log" -c "$conf_abs" 2>"$prefix/err"); then
	# nginx's message names the file it read: the source's, when the config was rendered
	conf_dir=$(dirname "$conf_abs")
	if [[ -n $source_dir ]]; then
		sed "s|$conf_dir/|$(realpath "$source_dir")/|g" "$prefix/err" >&2
	else
		cat "$prefix/err" >&2
	fi
	missing=$(unterminated "${source_dir:-$conf_dir}"/*.conf)
	[[ -z $missing ]] || fail "nginx -t rejects it: $missing"
	fail "nginx -t rejects it"
fi

# Strip comments, then read "directive arg..." statements.
# shellcheck disable=SC2001,SC2020 # comments need a regex; each of ; { } ends a statement
stmts=$(sed -e 's/#.*$//' <<<"$dump" | tr '\n' ' ' | tr ';{}' '\n\n\n' | sed -e 's/^ *//' -e 's/  */ /g')

values_of() { # directive [first-arg]: prints the remaining argument of every match
	awk -v d="$1" -v a="${2:-}" '$1 == d && (a == "" || $2 == a) { print (a == "" ? $2 : $3) }' <<<"$stmts"
}

# every fastcgi_param's distinct values, read in one pass (a start checks some 25 of them; a
# pipeline each cost a start about 2 s of CPU): NAME -> its values, one a line
declare -A param_values=()
while read -r name value; do
	[[ -n $name ]] || continue
	[[ $'\n'${param_values[$name]-}$'\n' == *$'\n'"$value"$'\n'* ]] ||
		param_values[$name]+="${param_values[$name]:+$'\n'}$value"
done < <(awk '$1 == "fastcgi_param" { print $2, $3 }' <<<"$stmts")

one_value() { # name: the single value of fastcgi_param NAME across every location
	local vals=${param_values[$1]-}
	[[ -n $vals ]] || fail "fastcgi_param $1 is not set"
	[[ $vals != *$'\n'* ]] || fail "$(where "$1")fastcgi_param $1 differs between locations: $(sort -u <<<"$vals" | tr '\n' ' ')"
	[[ $vals =~ ^[0-9]+$ ]] || fail "$(where "$1")fastcgi_param $1 must be an integer, not $vals"
	echo "$vals"
}

# 0. every CODEBOX_* parameter is one codebox reads: a misspelled one is named, with the one
# it resembles (which is then not set)
known=" ${KNOWN_PARAMS//$'\n'/ } "
for name in $(printf '%s\n' "${!param_values[@]}" | sort); do
	[[ $name == CODEBOX_* && $known != *" $name "* ]] || continue
	fail "$(where "$name")fastcgi_param $name is not a codebox parameter (a misspelling of $(nearest "$name")?)"
done

seconds() { # nginx time: 45, 45s, 1m, 1h
	local v=$1
	case $v in
	*ms) echo $((${v%ms} / 1000)) ;;
	*s) echo "${v%s}" ;;
	*m) echo $((${v%m} * 60)) ;;
	*h) echo $((${v%h} * 3600)) ;;
	*) echo "$v" ;;
	esac
}

bytes() { # nginx size: 1024, 512k, 1m
	local v=${1,,}
	case $v in
	*k) echo $((${v%k} * 1024)) ;;
	*m) echo $((${v%m} * 1024 * 1024)) ;;
	*g) echo $((${v%g} * 1024 * 1024 * 1024)) ;;
	*) echo "$v" ;;
	esac
}

timeout_s=$(one_value CODEBOX_EXECUTION_TIMEOUT_SECONDS)
max_code=$(one_value CODEBOX_MAX_CODE_BYTES)
max_conc=$(one_value CODEBOX_MAX_CONCURRENT_EXECUTIONS)
ceilings="CODEBOX_EXECUTION_TIMEOUT_SECONDS=$timeout_s,CODEBOX_MAX_CODE_BYTES=$max_code"
ceilings+=",CODEBOX_MAX_CONCURRENT_EXECUTIONS=$max_conc"
run_memory=$(one_value CODEBOX_MEMORY_BYTES)
one_value CODEBOX_CPU_MILLICORES >/dev/null
pool_memory=$(one_value CODEBOX_POOL_MEMORY_BYTES)
for name in CODEBOX_MAX_STDOUT_BYTES CODEBOX_MAX_STDERR_BYTES CODEBOX_MAX_RESULT_BYTES \
	CODEBOX_MAX_STDIN_BYTES CODEBOX_MEMORY_BYTES CODEBOX_MAX_PROCESSES CODEBOX_DISK_BYTES \
	CODEBOX_CPU_MILLICORES; do
	ceilings+=",$name=$(one_value "$name")"
done
memory_b=$(one_value CODEBOX_MEMORY_BYTES)
disk_b=$(one_value CODEBOX_DISK_BYTES)
# sessions: how many, and their idle and life bounds (the pool's ranges, session.h)
max_sessions=$(one_value CODEBOX_MAX_SESSIONS)
session_idle=$(one_value CODEBOX_SESSION_IDLE_SECONDS)
session_life=$(one_value CODEBOX_SESSION_MAX_SECONDS)
session_exec=$(one_value CODEBOX_SESSION_MAX_EXECUTION_SECONDS)
((session_exec >= 1 && session_exec <= 86400)) || fail "$(where CODEBOX_SESSION_MAX_EXECUTION_SECONDS)CODEBOX_SESSION_MAX_EXECUTION_SECONDS ($session_exec) must be from 1 to 86400"
((max_sessions <= 1000)) || fail "$(where CODEBOX_MAX_SESSIONS)CODEBOX_MAX_SESSIONS ($max_sessions) must be at most 1000"
per_token=$(one_value CODEBOX_MAX_SESSIONS_PER_TOKEN)
((per_token <= max_sessions || max_sessions == 0)) || fail "$(where CODEBOX_MAX_SESSIONS_PER_TOKEN)CODEBOX_MAX_SESSIONS_PER_TOKEN ($per_token) must be at most CODEBOX_MAX_SESSIONS ($max_sessions)"
((session_idle >= 1 && session_idle <= 86400)) || fail "$(where CODEBOX_SESSION_IDLE_SECONDS)CODEBOX_SESSION_IDLE_SECONDS ($session_idle) must be from 1 to 86400"
((session_life >= 1 && session_life <= 604800)) || fail "$(where CODEBOX_SESSION_MAX_SECONDS)CODEBOX_SESSION_MAX_SECONDS ($session_life) must be from 1 to 604800"
# a session's snapshot (its state's bound), and POST /sessions' body, which holds one as base64
snapshot_max=$(one_value CODEBOX_SNAPSHOT_MAX_BYTES)
((snapshot_max >= 4096 && snapshot_max <= 1073741824)) || fail "$(where CODEBOX_SNAPSHOT_MAX_BYTES)CODEBOX_SNAPSHOT_MAX_BYTES ($snapshot_max) must be from 4096 to 1073741824"
snapshot_body=$(sed -n 's/^\s*client_max_body_size\s\+\([0-9]\+[kKmMgG]\?\);\s*# codebox-snapshot-body$/\1/p' "$conf" | head -1)
need_body=$((4 * ((snapshot_max + 96 + 2) / 3) + 4096))
if [[ -z $snapshot_body ]]; then
	fail "nginx.conf has no \"location = /sessions\" with client_max_body_size ... # codebox-snapshot-body: a restore's snapshot (CODEBOX_SNAPSHOT_MAX_BYTES as base64, $need_body bytes) would be refused"
elif (($(bytes "$snapshot_body") < need_body)); then
	fail "$(where_directive client_max_body_size "$snapshot_body")POST /sessions' client_max_body_size ($snapshot_body) must be at least 4 * ceil((CODEBOX_SNAPSHOT_MAX_BYTES ($snapshot_max$(at CODEBOX_SNAPSHOT_MAX_BYTES)) + 96) / 3) + 4096 = $need_body bytes: a restore's body holds a snapshot as base64"
fi

# 2. the timeout of the location that carries runs: the longest one declared (/readyz has
# its own short one) before the agent server (port 8888 has its own command timeout,
# SANDBOX_EXEC_TIMEOUT_SECONDS, which codebox-run.sh renders into that server)
read_timeouts=$(awk '$1 == "server_name" && $2 == "codebox-agent" { exit }
	$1 == "fastcgi_read_timeout" { print $2 }' <<<"$stmts")
[[ -n $read_timeouts ]] || read_timeouts=60s # nginx's default
exec_read=""
while read -r t; do
	s=$(seconds "$t")
	if [[ -z $exec_read || $s -gt $exec_read ]]; then
		exec_read=$s
	fi
done <<<"$read_timeouts"
GRACE_SECONDS=$(kill_grace_seconds)
if ((exec_read <= timeout_s + GRACE_SECONDS)); then
	# the statement that sets the longest timeout (none: nginx's default)
	read_where=""
	while read -r t; do
		if (($(seconds "$t") == exec_read)); then
			read_where=$(where_directive fastcgi_read_timeout "$t")
			[[ -z $read_where ]] || break
		fi
	done <<<"$read_timeouts"
	[[ -n $read_where || -n $(values_of fastcgi_read_timeout) ]] || read_where="(not set: nginx's default) "
	fail "${read_where}fastcgi_read_timeout (${exec_read}s) must be longer than CODEBOX_EXECUTION_TIMEOUT_SECONDS (${timeout_s}s$(at CODEBOX_EXECUTION_TIMEOUT_SECONDS)) + ${GRACE_SECONDS}s to kill and clean up"
fi

# 3. admission and pool size
exec_limits=$(values_of limit_conn codebox_execute | sort -u)
[[ -n $exec_limits ]] || fail "no limit_conn codebox_execute: nothing bounds concurrent executions"
[[ $(wc -l <<<"$exec_limits") -eq 1 ]] || fail "limit_conn codebox_execute differs between locations"
if ((exec_limits < max_conc)); then
	fail "$(where_directive limit_conn codebox_execute)limit_conn codebox_execute ($exec_limits) must be at least CODEBOX_MAX_CONCURRENT_EXECUTIONS ($max_conc$(at CODEBOX_MAX_CONCURRENT_EXECUTIONS)), or nginx refuses below the pool's capacity"
fi
# a token's share of the execution slots (the pool's count; absent: none)
if [[ -n ${param_values[CODEBOX_MAX_EXECUTIONS_PER_TOKEN]-} ]]; then
	exec_per_token=$(one_value CODEBOX_MAX_EXECUTIONS_PER_TOKEN)
	((exec_per_token <= max_conc)) || fail "$(where CODEBOX_MAX_EXECUTIONS_PER_TOKEN)CODEBOX_MAX_EXECUTIONS_PER_TOKEN ($exec_per_token) must be at most CODEBOX_MAX_CONCURRENT_EXECUTIONS ($max_conc$(at CODEBOX_MAX_CONCURRENT_EXECUTIONS))"
fi
# a token's request rate: limit_req's zone is keyed by the token's id, never by an address
# (tenants behind one proxy would share one rate) nor by anything a client names freely
key=$(awk '$1 == "limit_req_zone" && index($3, "zone=codebox_tenant:") == 1 { print $2 }' <<<"$stmts")
if [[ -n $key && $key != "\$codebox_token_id" ]]; then
	fail "$(where_directive limit_req_zone "[^[:space:]]+[[:space:]]+zone=codebox_tenant:[^[:space:];]*")limit_req_zone codebox_tenant is keyed by $key; key it by \$codebox_token_id, the bearer token's id, so that each tenant has its own rate"
fi
for zone in codebox_execute codebox_meta codebox_agent codebox_upload; do
	key=$(awk -v z="zone=$zone:" '$1 == "limit_conn_zone" && index($3, z) == 1 { print $2 }' <<<"$stmts")
	if [[ -n $key && $key != "\$pid" ]]; then
		fail "$(where_directive limit_conn_zone "[^[:space:]]+[[:space:]]+zone=$zone:[^[:space:];]*")limit_conn_zone $zone is keyed by $key; key it by \$pid, or a crashed nginx worker's counts shrink capacity for good"
	fi
done
meta_limit=$(values_of limit_conn codebox_meta | sort -n | tail -1)
meta_limit=${meta_limit:-0}
# port 8888's agent protocol has slots of its own, the pool's (the workers' default when
# nginx passes none is 4); a config without the agent server (image/codebox-config's
# CODEBOX_AGENT_PORT=off) has none
agent_slots=4
agent_limit=$(values_of limit_conn codebox_agent | sort -n | head -1)
if [[ -n ${param_values[CODEBOX_AGENT_SLOTS]-} ]]; then
	agent_slots=$(one_value CODEBOX_AGENT_SLOTS)
elif [[ -z $agent_limit ]]; then
	agent_slots=0
fi
if [[ -n $agent_limit ]] && ((agent_limit < agent_slots)); then
	fail "$(where_directive limit_conn codebox_agent)limit_conn codebox_agent ($agent_limit) must be at least CODEBOX_AGENT_SLOTS ($agent_slots$(at CODEBOX_AGENT_SLOTS)), or nginx refuses below the pool's agent slots"
fi
# the event streams of background executions hold workers of their own, never an execution slot
max_streams=$(one_value CODEBOX_MAX_STREAMS)
((max_streams <= 1000)) || fail "$(where CODEBOX_MAX_STREAMS)CODEBOX_MAX_STREAMS ($max_streams) must be at most 1000"
need=$((max_conc + meta_limit + agent_slots + max_streams))
if [[ -n $workers ]] && ((workers < need)); then
	fail "the pool's workers ($workers, --workers) must be at least CODEBOX_MAX_CONCURRENT_EXECUTIONS ($max_conc$(at CODEBOX_MAX_CONCURRENT_EXECUTIONS)) + limit_conn codebox_meta ($meta_limit) + CODEBOX_AGENT_SLOTS ($agent_slots) + CODEBOX_MAX_STREAMS ($max_streams$(at CODEBOX_MAX_STREAMS)) = $need"
fi

# 4. body size
body=$(values_of client_max_body_size | head -1)
body_b=$(bytes "${body:-1m}")
min_body=$((4 * max_code + 1024))
if ((body_b < min_body)); then
	fail "$(where_directive client_max_body_size)client_max_body_size ($body_b bytes) must be at least 4 * CODEBOX_MAX_CODE_BYTES ($max_code$(at CODEBOX_MAX_CODE_BYTES)) + 1024 ($min_body bytes)"
fi
# the 413 names the limit: the map's default ($codebox_body_limit) is that same number
named=$(sed -n 's/^\s*default\s\+\([0-9]\+\);\s*# codebox-body-limit$/\1/p' "$conf" | head -1)
if [[ -n $named && $named != "$body_b" ]]; then
	fail "the 413's \$codebox_body_limit ($named, the map's default in nginx.conf) must equal client_max_body_size ($body_b bytes)"
fi

# a session's file (PUT /sessions/{id}/files/{path}) may fill a session's disk, and its 413
# names its own limit
file_body=$(sed -n 's/^\s*client_max_body_size\s\+\([0-9]\+[kKmMgG]\?\);\s*# codebox-session-file-limit$/\1/p' "$conf" | head -1)
if [[ -n $file_body ]]; then
	file_b=$(bytes "$file_body")
	disk_b=$(one_value CODEBOX_DISK_BYTES)
	if ((file_b < disk_b)); then
		fail "the sessions' files location's client_max_body_size ($file_b bytes, nginx.conf) must be at least CODEBOX_DISK_BYTES ($disk_b$(at CODEBOX_DISK_BYTES)): a file may fill a session's disk"
	fi
	named=$(sed -n 's/^\s*"~^codebox \/sessions[^"]*"\s\+\([0-9]\+\);\s*# codebox-session-file-limit$/\1/p' "$conf" | head -1)
	if [[ -n $named && $named != "$file_b" ]]; then
		fail "the 413's \$codebox_body_limit for a session's files ($named, nginx.conf) must equal that location's client_max_body_size ($file_b bytes)"
	fi
fi

# 6. the pool-wide memory budget against what the container (or host) has
available_memory() {
	local v
	for f in /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes; do
		if [[ -r $f ]] && v=$(<"$f") && [[ $v =~ ^[0-9]+$ ]] && ((v < 1 << 62)); then
			echo "$v"
			return
		fi
	done
	awk '$1 == "MemTotal:" { printf "%.0f\n", $2 * 1024 }' /proc/meminfo
}
# what is available is the pool's own: checked where it is known (--memory-limit) or where
# the pool is about to start (--print-pool-memory-bytes), not in nginx's container, whose
# memory limit says nothing of the pool's
explicit_limit=1
if [[ -z $memory_limit ]]; then
	explicit_limit=0
	memory_limit=$(available_memory)
fi
pool_check=$((explicit_limit || print_pool_memory))
if ((pool_memory != 0 && pool_memory < run_memory)); then
	fail "$(where CODEBOX_POOL_MEMORY_BYTES)CODEBOX_POOL_MEMORY_BYTES ($pool_memory) must be at least CODEBOX_MEMORY_BYTES ($run_memory$(at CODEBOX_MEMORY_BYTES)): one run must fit"
fi
if ((!pool_check)); then
	: # nothing to compare the budget with here
elif ((pool_memory != 0)); then
	if ((pool_memory > memory_limit)); then
		fail "$(where CODEBOX_POOL_MEMORY_BYTES)CODEBOX_POOL_MEMORY_BYTES ($pool_memory) must not exceed the memory available to the pool ($memory_limit bytes)"
	fi
elif ((memory_limit * 3 / 4 < run_memory)); then
	fail "the derived pool memory budget (3/4 of $memory_limit bytes) is smaller than CODEBOX_MEMORY_BYTES ($run_memory$(at CODEBOX_MEMORY_BYTES))"
fi
# 7. the runs fit the container's memory (only when its limit is given): all runs at their
# memory limit, or the pool's budget when one is set and smaller, plus every run's tmpfs
# (its pages are memory) and the pool's own
if ((explicit_limit)); then
	runs_b=$((max_conc * memory_b))
	if ((pool_memory != 0 && pool_memory < runs_b)); then
		runs_b=$pool_memory
	fi
	# sessions are not added: what they hold (memory, and their tmpfs' pages) is charged to
	# the pool's budget (CODEBOX_POOL_MEMORY_BYTES), which the runs share with them
	need_b=$((runs_b + max_conc * disk_b + POOL_OWN_BYTES))
	if ((need_b > memory_limit)); then
		fail "CODEBOX_MAX_CONCURRENT_EXECUTIONS ($max_conc$(at CODEBOX_MAX_CONCURRENT_EXECUTIONS)) runs of CODEBOX_MEMORY_BYTES ($memory_b$(at CODEBOX_MEMORY_BYTES)) (at most CODEBOX_POOL_MEMORY_BYTES when set) + CODEBOX_DISK_BYTES ($disk_b$(at CODEBOX_DISK_BYTES)) and the pool's own $((POOL_OWN_BYTES >> 20)) MiB need $((need_b >> 20)) MiB, more than the memory limit of $((memory_limit >> 20)) MiB"
	fi
fi

# CPU: not a refusal (runs share the CPU they are given; none is ever refused it), but with
# more quota than CPU a CPU-bound run at full load gets less than its CODEBOX_CPU_MILLICORES,
# and may reach its wall-clock timeout where alone it would not. Checked where the pool's
# CPU is known (--cpu-limit) or where it is about to start, like its memory.
available_millicores() {
	local quota period
	if [[ -r /sys/fs/cgroup/cpu.max ]] && read -r quota period </sys/fs/cgroup/cpu.max &&
		[[ $quota =~ ^[0-9]+$ && $period =~ ^[0-9]+$ ]] && ((period > 0)); then
		echo "$((quota * 1000 / period)) the container's CPU limit (cgroup cpu.max)"
	elif [[ -r /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]] && quota=$(</sys/fs/cgroup/cpu/cpu.cfs_quota_us) &&
		period=$(</sys/fs/cgroup/cpu/cpu.cfs_period_us) && [[ $quota =~ ^[0-9]+$ ]] && ((period > 0)); then
		echo "$((quota * 1000 / period)) the container's CPU limit (cgroup cpu.cfs_quota_us)"
	else
		echo "$(($(nproc) * 1000)) the host's $(nproc) cores"
	fi
}
cpu_what="--cpu-limit"
if [[ -z $cpu_limit ]] && ((print_pool_memory)); then
	read -r cpu_limit cpu_what < <(available_millicores)
fi
if [[ -n $cpu_limit ]] && ((cpu_limit > 0)); then
	millicores=$(one_value CODEBOX_CPU_MILLICORES)
	if ((max_conc * millicores > cpu_limit)); then
		echo "check-config: warning: CODEBOX_MAX_CONCURRENT_EXECUTIONS ($max_conc$(at CODEBOX_MAX_CONCURRENT_EXECUTIONS)) runs of CODEBOX_CPU_MILLICORES ($millicores$(at CODEBOX_CPU_MILLICORES)) may use $((max_conc * millicores)) millicores, $(awk -v a=$((max_conc * millicores)) -v b="$cpu_limit" 'BEGIN { printf "%.1f", a / b }') times the pool's $cpu_limit ($cpu_what): at full load a CPU-bound run gets about $((cpu_limit / max_conc)) millicores and may time out where alone it would not" >&2
	fi
fi

if ((print_workers)); then
	echo "${workers:-$need}"
fi
if ((print_drain)); then
	echo $((timeout_s + GRACE_SECONDS + 5))
fi
# the ranges are the pool's own (limits.c): asked here, so that nothing starts to be refused
if ! why=$("$(find_pool)" --check-ceilings "$ceilings,CODEBOX_MAX_BODY_BYTES=$body_b" 2>&1); then
	name=${why%%=*}
	fail "$(where "$name")fastcgi_param $why"
fi
if ((print_ceilings)); then
	echo "$ceilings,CODEBOX_MAX_BODY_BYTES=$body_b"
fi
if ((print_pool_memory)); then
	echo "$pool_memory"
fi
if ((print_max_sessions)); then
	echo "$max_sessions"
fi
