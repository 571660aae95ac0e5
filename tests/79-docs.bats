#!/usr/bin/env bats
# The user's API guide (docs/API.md) keeps in step with the contract (../shared/API.md): every
# endpoint, error code, key, limit and name the contract puts in code quotes is described. The
# operator's manual (docs/OPERATIONS.md) names every limit and every variable the pool reads,
# and the links between README.md and docs/ lead to files that exist.

load helpers/stack

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
	if ((${#missing[@]})); then
		echo "docs/API.md does not mention: ${missing[*]}" >&2
		return 1
	fi
}

@test "docs: docs/OPERATIONS.md names every limit of nginx's config and every variable the pool reads" {
	local manual="$ROOT/docs/OPERATIONS.md" missing=() t
	while read -r t; do
		grep -qF -- "\`$t\`" "$manual" || missing+=("$t")
	done < <(
		awk '$1 == "fastcgi_param" && $2 ~ /^CODEBOX_/ { print $2 }' \
			"$ROOT/nginx/codebox-limits.conf" "$ROOT/nginx/codebox-agent.conf"
		grep -ohE '(getenv|env_number|parse_ulong)\("[A-Z_]+"' "$ROOT"/fcgi/*.c | grep -oE '[A-Z_]{3,}'
	)
	if ((${#missing[@]})); then
		echo "docs/OPERATIONS.md does not mention: ${missing[*]}" >&2
		return 1
	fi
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
	if ((${#broken[@]})); then
		printf 'broken link: %s\n' "${broken[@]}" >&2
		return 1
	fi
}
