#!/usr/bin/env bash
# Offline checks of deploy/ (no cluster): yamllint; kubectl kustomize of every overlay; schema
# validation with kubernetes-models and a TypeScript excess-property check of every rendered
# object; codebox's hardening rules; the seccomp profile is current; and fixtures that break
# one rule each must fail.
set -euo pipefail

usage() {
	echo "usage: $0"
	echo "Checks codebox's Kubernetes manifests offline."
}
if [[ ${1:-} == --help || ${1:-} == -h ]]; then
	usage
	exit 0
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
checks="$here/deploy/checks"
out="$checks/.out"
rm -rf "$out"
mkdir -p "$out/fixtures"
tsc() {
	(cd "$checks" && node node_modules/typescript/bin/tsc --strict --noEmit --module es2022 \
		--target es2022 --moduleResolution node --skipLibCheck "$@")
}

[[ -d $checks/node_modules ]] || (cd "$checks" && npm ci --no-audit --no-fund --silent)

(cd "$here/deploy" && yamllint -c .yamllint.yaml .)

overlays=("$here/deploy/base" "$here"/deploy/overlays/*)
for dir in "${overlays[@]}"; do
	name=$(basename "$dir")
	kubectl kustomize "$dir" >"$out/$name.yaml"
	if [[ $name == agent-sandbox ]]; then
		# agent-sandbox's own kinds: checked against their CRD schema, then what the
		# controller derives from them (a Pod, its NetworkPolicy, a Service) goes through the
		# same checks as every other overlay
		node "$checks/agent-sandbox.mjs" "$out/$name.yaml" "$out/$name-derived.yaml"
		mv "$out/$name-derived.yaml" "$out/$name.yaml"
	fi
	node "$checks/validate.mjs" "$out/$name.ts" "$out/$name.yaml"
	tsc ".out/$name.ts"
	node "$checks/hardening.mjs" "$out/$name.yaml"
done
echo "check-deploy: ${#overlays[@]} overlays render, validate and pass the hardening rules"

"$here/scripts/gen-seccomp-profile.sh" --check

failed=0
while IFS=$'\t' read -r name expect; do
	set +e
	if [[ $name == typo ]]; then
		node "$checks/validate.mjs" "$out/fixtures/$name.ts" "$out/fixtures/$name.yaml" >/dev/null &&
			msg=$(tsc ".out/fixtures/$name.ts" 2>&1)
	else
		msg=$(node "$checks/hardening.mjs" "$out/fixtures/$name.yaml" 2>&1)
	fi
	rc=$?
	set -e
	if ((rc == 0)) || [[ $msg != *"$expect"* ]]; then
		echo "check-deploy: the fixture '$name' should fail with '$expect', got: $msg" >&2
		failed=1
	fi
done < <(node "$checks/fixtures.mjs" "$out/kind.yaml" "$out/fixtures")
((failed == 0)) || exit 1
echo "check-deploy: every fixture fails as it should"
