#!/usr/bin/env bats
# The user's API guide (docs/API.md) keeps in step with the contract (../shared/API.md): every
# endpoint, error code, key, limit and name the contract puts in code quotes is described. The
# operator's manual (docs/OPERATIONS.md) names every limit and every variable the pool reads
# and every field of the JSON logs, and the links between README.md and docs/ lead to files that exist.

load helpers/stack

# none_missing WHAT [ITEM...]: fails, saying WHAT and each item, when there is any item
none_missing() {
	local what=$1
	shift
	(($# == 0)) && return 0
	echo "$what:" >&2
	printf '  %s\n' "$@" >&2
	return 1
}

@test "docs: docs/API.md names every endpoint, error, key and limit of the contract" {
	local contract="${CODEBOX_SHARED_DIR:-$ROOT/../shared}/API.md" guide="$ROOT/docs/API.md" missing=() t
	[[ -f $contract ]] || skip "no $contract (the contract beside this clone; CODEBOX_SHARED_DIR names another)"
	while read -r t; do
		grep -qF -- "$t" "$guide" || missing+=("$t")
	done < <(
		grep -oE '`[^`]+`' "$contract" | tr -d '`' |
			grep -E '^[A-Za-z_/][A-Za-z0-9_/{}.:-]*$' | awk 'length >= 3'
		grep -oE '(GET|POST) /[a-z/{}]*' "$contract"
	)
	none_missing "docs/API.md does not mention" "${missing[@]}"
}

@test "docs: docs/OPERATIONS.md names every limit of nginx's config and every variable the pool reads" {
	local manual="$ROOT/docs/OPERATIONS.md" missing=() t
	while read -r t; do
		grep -qF -- "\`$t\`" "$manual" || missing+=("$t")
	done < <(
		awk '$1 == "fastcgi_param" && $2 ~ /^CODEBOX_/ { print $2 }' \
			"$ROOT/nginx/codebox-limits.conf" "$ROOT/nginx/codebox-agent.conf"
		grep -ohE '(getenv|env_number|parse_ulong)\("[A-Z_]+"' "$ROOT"/fcgi/*/*.c | grep -oE '[A-Z_]{3,}'
	)
	# the extraction found the pool's variables
	grep -qE '(getenv|env_number)\("CODEBOX_' "$ROOT"/fcgi/*/*.c
	none_missing "docs/OPERATIONS.md does not mention" "${missing[@]}"
}

@test "docs: docs/OPERATIONS.md's Logs lists every field of access.log and pool.log" {
	local logs fields missing=() t
	# the Logs part of the manual: from its heading to the metrics
	logs=$(awk '/^## Logs, metrics and the audit trail/ { on = 1 } on && /^\*\*Metrics\.\*\*/ { exit } on' \
		"$ROOT/docs/OPERATIONS.md")
	fields=$(
		# access.log: the keys of nginx's log_format codebox_json
		awk '/log_format codebox_json/ { on = 1 } on { print } on && /;$/ { exit }' "$ROOT/nginx/nginx.conf" |
			grep -oE '"[A-Za-z]+":'
		# pool.log: every line's keys (log.c) and a run's (run.c's run_log_outcome)
		grep -oE '\\"[A-Za-z]+\\":' "$ROOT/fcgi/core/log.c"
		awk '/^run_log_outcome\(/ { on = 1 } on { print } on && /^}/ { exit }' "$ROOT/fcgi/run/run.c" |
			grep -oE '\\"[A-Za-z]+\\":'
	)
	fields=$(tr -d '\\":' <<<"$fields" | sort -u)
	echo "fields: $(tr '\n' ' ' <<<"$fields")"
	# the extraction found the fields (12 of access.log's, 6 of every pool line, 11 of a run's)
	(($(wc -l <<<"$fields") >= 26))
	for t in $fields; do
		grep -qF -- "\`$t\`" <<<"$logs" || missing+=("$t")
	done
	none_missing "docs/OPERATIONS.md's Logs does not list" "${missing[@]}"
}

@test "docs: every relative link in README.md and docs/ leads to a file that exists" {
	local f dir target broken=()
	for f in "$ROOT/README.md" "$ROOT"/docs/*.md; do
		dir=$(dirname "$f")
		while read -r target; do
			target=${target%%#*}
			[[ -z $target || -e "$dir/$target" ]] || broken+=("${f#"$ROOT"/}: $target")
		done < <(grep -oE '\]\([^)[:space:]]+\)' "$f" | sed -E 's/^\]\(//; s/\)$//' | grep -vE '^[a-z]+:')
	done
	none_missing "broken link" "${broken[@]}"
}

@test "docs: every source path README.md and docs/ name (fcgi/..., scripts/..., nginx/...) exists" {
	local f path missing=() n=0
	for f in "$ROOT/README.md" "$ROOT"/docs/*.md; do
		while read -r path; do
			n=$((n + 1))
			[[ -e $ROOT/$path ]] || missing+=("${f#"$ROOT"/}: $path")
		done < <(grep -oE '\b(fcgi|scripts|nginx|image|deploy)/[A-Za-z0-9_./-]*[A-Za-z0-9_]\.(c|h|py|sh|conf|json|yaml)\b' "$f" | sort -u)
	done
	echo "$n paths named"
	((n >= 50))
	none_missing "no such file" "${missing[@]}"
}

@test "docs: README.md's Layout names every script and every folder of fcgi/" {
	local layout f missing=()
	layout=$(awk '/^## Layout/ { on = 1 } on' "$ROOT/README.md")
	for f in "$ROOT"/scripts/* "$ROOT"/fcgi/*/; do
		f=$(basename "$f")
		[[ -d $ROOT/fcgi/$f ]] && f="$f/"
		grep -qF -- "$f" <<<"$layout" || missing+=("$f")
	done
	none_missing "README.md's Layout does not name" "${missing[@]}"
}

@test "structure: fcgi/'s folders are layers: an include of a folder above, or of no folder, fails the lint" {
	local layers
	layers=$(awk -F' *= *' '$1 == "LAYERS" { print $2 }' "$ROOT/Makefile")
	[[ $layers == "pool http run warm box core" ]]
	# shellcheck disable=SC2086 # the folders, one word each
	run -0 "$ROOT/scripts/check-layers.sh" "$ROOT/fcgi" $layers
	cp -r "$ROOT/fcgi" "$BATS_TEST_TMPDIR/"
	# the box (inside the sandbox) reaching up into what parses client input
	sed -i '0,/#include/s//#include "http\/request.h"\n#include/' "$BATS_TEST_TMPDIR/fcgi/box/sandbox.c"
	# a header named from no folder
	echo '#include "log.h"' >>"$BATS_TEST_TMPDIR/fcgi/core/buf.h"
	# shellcheck disable=SC2086
	run -1 "$ROOT/scripts/check-layers.sh" "$BATS_TEST_TMPDIR/fcgi" $layers
	assert_line --partial 'box/sandbox.c:'
	assert_line --partial '"http/request.h": box/ includes http/, a folder above it'
	assert_line --partial 'core/buf.h:'
	assert_line --partial '"log.h" names no folder'
	assert_equal "${#lines[@]}" 2
}
