#!/usr/bin/env bash
# Renders codebox's nginx config with the limits of a directory of KEY files (a Kubernetes
# ConfigMap mounted as a volume: one file per key, deploy/base/limits.env), without touching
# the source: copies CONF_DIR/*.conf to OUT_DIR, sets each given fastcgi_param in
# codebox-limits.conf, and the nginx numbers that follow from them (limit_conn
# codebox_execute = CODEBOX_MAX_CONCURRENT_EXECUTIONS; the run timeouts 15 s past the
# execution timeout; client_max_body_size at least 4 * maxCodeBytes + 4 * maxStdinBytes + 1024).
# Refuses an unknown key, a value that is not a positive integer, or a setting it could not
# apply; scripts/check-config.sh then checks the rendered config as a whole.
set -euo pipefail

usage() {
	echo "usage: $0 --from LIMITS_DIR --conf-dir CONF_DIR --out OUT_DIR"
	echo "Writes CONF_DIR's nginx config with LIMITS_DIR's limits into OUT_DIR."
}

KEYS=(CODEBOX_EXECUTION_TIMEOUT_SECONDS CODEBOX_MAX_CODE_BYTES CODEBOX_MAX_STDOUT_BYTES
	CODEBOX_MAX_STDERR_BYTES CODEBOX_MAX_RESULT_BYTES CODEBOX_MAX_STDIN_BYTES
	CODEBOX_MAX_CONCURRENT_EXECUTIONS CODEBOX_MEMORY_BYTES CODEBOX_MAX_PROCESSES
	CODEBOX_DISK_BYTES CODEBOX_MAX_SESSIONS CODEBOX_SESSION_IDLE_SECONDS
	CODEBOX_SESSION_MAX_SECONDS CODEBOX_SESSION_MAX_EXECUTION_SECONDS
	CODEBOX_MAX_SESSIONS_PER_TOKEN CODEBOX_MAX_STREAMS CODEBOX_SNAPSHOT_MAX_BYTES
	CODEBOX_MAX_EXECUTIONS_PER_TOKEN)

from="" conf="" out=""
while (($#)); do
	case $1 in
	--help | -h)
		usage
		exit 0
		;;
	--from | --conf-dir | --out)
		[[ $# -ge 2 ]] || {
			usage >&2
			exit 2
		}
		case $1 in
		--from) from=$2 ;;
		--conf-dir) conf=$2 ;;
		--out) out=$2 ;;
		esac
		shift 2
		;;
	*)
		usage >&2
		exit 2
		;;
	esac
done
[[ -n $from && -n $conf && -n $out ]] || {
	usage >&2
	exit 2
}
fail() {
	echo "render-limits: refusing the limits in $from: $*" >&2
	exit 1
}
[[ -d $from ]] || fail "no such directory"

mkdir -p "$out"
cp "$conf"/*.conf "$out/"
limits="$out/codebox-limits.conf"

# param NAME: the value codebox-limits.conf sets now
param() {
	awk -v k="$1" '$1 == "fastcgi_param" && $2 == k { sub(";", "", $3); print $3 }' "$limits"
}

declare -A given=()
shopt -s nullglob
for f in "$from"/*; do
	key=$(basename "$f")
	[[ -f $f ]] || continue # a ConfigMap volume's ..data and timestamped directories
	known=0
	for k in "${KEYS[@]}"; do [[ $k == "$key" ]] && known=1; done
	((known)) || fail "unknown key $key (known: ${KEYS[*]})"
	value=$(head -c 64 "$f" | tr -d '[:space:]')
	[[ $value =~ ^[1-9][0-9]{0,14}$ ]] || fail "$key must be a positive integer, not '$value'"
	given[$key]=$value
done

old_timeout=$(param CODEBOX_EXECUTION_TIMEOUT_SECONDS)
for key in "${!given[@]}"; do
	sed -i -E "s/^(\s*fastcgi_param\s+$key\s+)[0-9]+;/\1${given[$key]};/" "$limits"
	[[ $(param "$key") == "${given[$key]}" ]] || fail "could not set $key in $limits"
done

if [[ -n ${given[CODEBOX_MAX_CONCURRENT_EXECUTIONS]:-} ]]; then
	sed -i -E "s/^(\s*limit_conn\s+codebox_execute\s+)[0-9]+;/\1${given[CODEBOX_MAX_CONCURRENT_EXECUTIONS]};/" \
		"$out/nginx.conf"
fi
if [[ -n ${given[CODEBOX_EXECUTION_TIMEOUT_SECONDS]:-} && -n $old_timeout ]]; then
	# the timeouts of the locations that carry runs (longer than the old execution
	# timeout), not /readyz's short one
	new=$((given[CODEBOX_EXECUTION_TIMEOUT_SECONDS] + 15))
	awk -v old="$old_timeout" -v new="$new" '
		match($0, /^[ \t]*fastcgi_(read|send)_timeout[ \t]+[0-9]+s?;/) {
			v = $2; sub(/s?;$/, "", v)
			if (v + 0 > old + 0) { sub(/[0-9]+s?;/, new "s;") }
		}
		{ print }' "$out/nginx.conf" >"$out/nginx.conf.new"
	mv "$out/nginx.conf.new" "$out/nginx.conf"
fi
code=$(param CODEBOX_MAX_CODE_BYTES)
stdin=$(param CODEBOX_MAX_STDIN_BYTES)
body=$((4 * code + 4 * stdin + 1024))
if ((body > 1024 * 1024)); then
	sed -i -E -e "s/^(\s*client_max_body_size\s+)[0-9]+[kmgKMG]?;/\1$body;/" \
		-e "s/^(\s*default\s+)[0-9]+;(\s*# codebox-body-limit)$/\1$body;\2/" "$out/nginx.conf"
fi
