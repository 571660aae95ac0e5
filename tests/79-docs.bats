#!/usr/bin/env bats
# The user's API guide (docs/API.md) keeps in step with the contract (../shared/API.md): every
# endpoint, error code, key, limit and name the contract puts in code quotes is described.

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
