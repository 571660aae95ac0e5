#!/usr/bin/env bash
# Offline checks of deploy/ (no cluster): yamllint; `kubectl kustomize` of every overlay with
# the pinned kubectl (deploy/tools, installed by install-deps.sh); schema validation with
# kubernetes-models and a TypeScript excess-property check of every rendered object;
# codebox's hardening rules, tenancy included (port 8888 is served and exposed by the
# agent-sandbox overlay only), and NetworkPolicies that admit selected clients only; the
# agent-sandbox overlay's objects against the pinned agent-sandbox CRDs (deploy/checks/crds/),
# then the pod its controller makes through every check below; per overlay, the pod's limits
# (its ConfigMap, rendered into the nginx config) pass check-config, fit the pool container's
# memory limit (less port 8888's workspace and runs where it is on), with a warning where
# their CPU quotas exceed its CPU limit, and terminationGracePeriodSeconds covers the drain;
# every image names a registry and carries the release tag (never none or latest); the
# seccomp profile and the pod for podman kube play (deploy/podman) are current; and fixtures
# that break one rule each must fail.
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
kubectl="$here/deploy/tools/bin/kubectl"
version=$(cat "$here/VERSION")
command -v promtool >/dev/null || {
	echo "check-deploy: promtool is missing: run scripts/install-deps.sh (Debian's prometheus package)" >&2
	exit 1
}
for need in "$kubectl" "$checks/node_modules"; do
	[[ -e $need ]] || {
		echo "check-deploy: $need is missing: run scripts/install-deps.sh (make deploy-check does)" >&2
		exit 1
	}
done
rm -rf "$out"
mkdir -p "$out/fixtures"
tsc() {
	(cd "$checks" && node node_modules/typescript/bin/tsc --strict --noEmit --module es2022 \
		--target es2022 --moduleResolution node --skipLibCheck "$@")
}

# param CONF_DIR NAME: the value codebox-limits.conf gives NAME
param() {
	awk -v k="$2" '$1 == "fastcgi_param" && $2 == k { sub(";", "", $3); print $3 }' "$1/codebox-limits.conf"
}

# pod_limits NAME DIR: the pod NAME's limits, from what podfacts.mjs printed of it, the last
# step of its chain (DIR/chain.last), and the ConfigMap it wrote (DIR/limits), rendered as the containers render them at start,
# pass check-config against the pool's memory limit (where port 8888 is on, less its
# workspace's tmpfs and its slots' runs, which check-config does not count); the grace period
# covers the drain, the longest preStop sleep and 5 s for nginx's last answers; the runs volume
# holds every concurrent run's diskBytes (where runs write to it: no mount namespace), and the
# pool's ephemeral-storage limit its emptyDirs.
pod_limits() {
	local dir=$2 memory grace pre_stop runs_b storage_b disk_b workspace drain conc disk slots
	local mem reserve=0 cpu cpu_arg=()
	read -r memory grace pre_stop runs_b storage_b disk_b workspace cpu <"$dir/chain.last"
	# the pool's CPU limit: check-config warns when the runs' CPU quotas add up to more
	((cpu == 0)) || cpu_arg=(--cpu-limit "$cpu")
	"$here/scripts/render-limits.sh" --from "$dir/limits" --conf-dir "$here/nginx" --out "$dir/conf" ||
		return 1
	if ((workspace > 0)); then
		slots=$(awk '$1 == "fastcgi_param" && $2 == "CODEBOX_AGENT_SLOTS" { sub(";", "", $3); print $3 }' \
			"$dir/conf/codebox-agent.conf")
		mem=$(param "$dir/conf" CODEBOX_MEMORY_BYTES)
		disk=$(param "$dir/conf" CODEBOX_DISK_BYTES)
		reserve=$((workspace + ${slots:-4} * (mem + disk)))
		if ((reserve >= memory)); then
			echo "check-deploy: port 8888's workspace ($((workspace >> 20)) MiB) and its ${slots:-4} slots' runs ($((mem >> 20)) + $((disk >> 20)) MiB each) leave nothing of the pool's memory limit ($((memory >> 20)) MiB)" >&2
			return 1
		fi
	fi
	drain=$("$here/scripts/check-config.sh" --memory-limit "$((memory - reserve))" "${cpu_arg[@]}" \
		--print-drain-seconds "$dir/conf/nginx.conf" 2>"$dir/check.err") || {
		cat "$dir/check.err" >&2
		((reserve == 0)) ||
			echo "check-deploy: (the memory limit above is the pool's $((memory >> 20)) MiB less $((reserve >> 20)) MiB for port 8888's workspace and its slots' runs)" >&2
		return 1
	}
	# its warnings (CPU oversubscription), as this pod's: the numbers are its ConfigMap's
	sed -e 's/, [^ ,)]*\.conf:[0-9]*//g' -e "s/^check-config: warning:/check-deploy: $1: warning:/" \
		-e 's/(--cpu-limit)/(the pool container'"'"'s limits.cpu)/' "$dir/check.err" >&2
	if ((grace < drain + pre_stop + 5)); then
		echo "check-deploy: terminationGracePeriodSeconds ($grace) must cover the pool's drain (${drain} s) + preStop (${pre_stop} s) + 5 s for nginx's last answers" >&2
		return 1
	fi
	conc=$(param "$dir/conf" CODEBOX_MAX_CONCURRENT_EXECUTIONS)
	disk=$(param "$dir/conf" CODEBOX_DISK_BYTES)
	if ((runs_b < conc * disk)); then
		echo "check-deploy: the runs emptyDir's sizeLimit ($((runs_b >> 20)) MiB) must hold CODEBOX_MAX_CONCURRENT_EXECUTIONS ($conc) * CODEBOX_DISK_BYTES ($((disk >> 20)) MiB)" >&2
		return 1
	fi
	if ((storage_b < disk_b)); then
		echo "check-deploy: the pool's ephemeral-storage limit ($((storage_b >> 20)) MiB) must cover its emptyDirs' sizeLimits ($((disk_b >> 20)) MiB)" >&2
		return 1
	fi
}

(cd "$here/deploy" && yamllint -c .yamllint.yaml .)

# step WORD...: adds a step (a script of deploy/checks/ and its arguments) to the array steps
step() {
	local IFS=$'\t'
	steps+=("$*")
}

# chain_job PREFIX: the chain of the array steps as one line of chains.mjs's jobs
chain_job() {
	jq -cn --arg out "$1" '{out: $out, steps: [$ARGS.positional[] | split("\t")]}' --args "${steps[@]}"
}

# status PREFIX: the status chains.mjs wrote for the chain PREFIX
status() {
	local s
	read -r s <"$1.status"
	return "$s"
}

overlays=("$here/deploy/base" "$here"/deploy/overlays/*)
typed=() # each overlay's objects as TypeScript, compiled at once after the loop (a compiler start each cost 2 s)
jobs="$out/overlays.jsonl"
: >"$jobs"
for dir in "${overlays[@]}"; do
	name=$(basename "$dir")
	mkdir -p "$out/pod.$name"
	steps=()
	# tenancy: only the agent-sandbox overlay (one tenant per pod) serves port 8888
	tenancy=()
	if [[ $name == agent-sandbox ]]; then
		# agent-sandbox's own kinds: checked against the pinned CRDs, then what the controller
		# derives from them (a Pod, its NetworkPolicy, a Service) goes through the same checks
		# as every other overlay, the pod's limits, grace and storage included
		"$kubectl" kustomize "$dir" >"$out/$name-rendered.yaml"
		step agent-sandbox.mjs "$out/$name-rendered.yaml" "$out/$name.yaml"
		tenancy=(--agent-sandbox)
	else
		"$kubectl" kustomize "$dir" >"$out/$name.yaml"
	fi
	step validate.mjs "$out/$name.ts" "$out/$name.yaml"
	step hardening.mjs "${tenancy[@]}" "$out/$name.yaml"
	step podfacts.mjs "$out/$name.yaml" "$out/pod.$name/limits" "$version"
	chain_job "$out/pod.$name/chain" >>"$jobs"
	typed+=(".out/$name.ts")
done
# the pod for podman kube play (deploy/podman, made from the podman overlay): its schemas
steps=()
step validate.mjs "$out/podman-pod.ts" "$here/deploy/podman/codebox.yaml"
chain_job "$out/podman-pod" >>"$jobs"
typed+=(".out/podman-pod.ts")
# the fixtures that break one rule each, from the kind overlay and the agent-sandbox one
steps=()
step fixtures.mjs "$out/kind.yaml" "$out/fixtures"
chain_job "$out/fixtures" >>"$jobs"
steps=()
step fixtures.mjs --agent-sandbox "$out/agent-sandbox-rendered.yaml" "$out/fixtures"
chain_job "$out/fixtures-as" >>"$jobs"
# every overlay's checks, as a node start each would (chains.mjs), then its limits
node "$checks/chains.mjs" "$jobs"
for dir in "${overlays[@]}"; do
	name=$(basename "$dir")
	chain="$out/pod.$name/chain"
	# what its steps said (podfacts' facts, its last line, are pod_limits')
	if ! status "$chain"; then
		cat "$chain.out"
		cat "$chain.err" >&2
		exit 1
	fi
	sed '$d' "$chain.out"
	cat "$chain.err" >&2
	pod_limits "$name" "$out/pod.$name"
done
cat "$out/podman-pod.err" >&2
status "$out/podman-pod" || exit 1
tsc "${typed[@]}"
echo "check-deploy: ${#overlays[@]} overlays render, validate, pass the hardening rules, and their limits fit"

# the monitoring overlay's alerts and dashboard, as its rendered manifests carry them: each
# alert with a severity, a summary, a description and a runbook that is a section of
# OPERATIONS.md, seen firing and seen silent by rules-test.yaml (rules.mjs); then promtool
# (Debian's prometheus package) checks the rules and the dashboard's queries, and runs the
# rules' unit tests
mkdir -p "$out/rules"
node "$checks/rules.mjs" "$out/monitoring.yaml" "$here/deploy/overlays/monitoring/rules-test.yaml" \
	"$here/docs/OPERATIONS.md" "$out/rules"
cp "$here/deploy/overlays/monitoring/rules-test.yaml" "$out/rules/"
promtool check rules "$out/rules/codebox-rules.yaml" "$out/rules/dashboard-queries.yaml" \
	>"$out/rules/check.out" 2>&1 || {
	cat "$out/rules/check.out" >&2
	exit 1
}
promtool test rules "$out/rules/rules-test.yaml" >"$out/rules/test.out" 2>&1 || {
	cat "$out/rules/test.out" >&2
	echo "check-deploy: the monitoring overlay's alerts fail their unit tests (deploy/overlays/monitoring/rules-test.yaml)" >&2
	exit 1
}
echo "check-deploy: promtool accepts the alerts and the dashboard's queries; the alerts pass their unit tests"

"$here/scripts/gen-seccomp-profile.sh" --check
# deploy/podman/codebox.yaml (podman kube play's pod) is the podman overlay as it renders now
"$here/scripts/gen-podman-pod.sh" --check
echo "check-deploy: deploy/podman/codebox.yaml is the podman overlay's pod as it renders now"

# the scale overlay's router.conf: nginx accepts it, with an upstream of loopback stacks as
# tests/85-fleet.bats renders it (Debian's nginx 1.22 has no `resolve`, which only the
# cluster's router-upstream.conf uses)
# shellcheck source=scripts/stack-lib.sh
source "$here/scripts/stack-lib.sh"
codebox_router_render "$out/router" 8080 127.0.0.1:1 127.0.0.1:2
/usr/sbin/nginx -q -t -p "$out/router/" -c "$out/router/conf/router.conf" -e stderr ||
	{
		echo "check-deploy: nginx refuses deploy/overlays/scale/router.conf" >&2
		exit 1
	}
echo "check-deploy: nginx accepts the fleet's router.conf"

for chain in "$out/fixtures" "$out/fixtures-as"; do
	cat "$chain.err" >&2
	status "$chain" || exit 1
done
cat "$out/fixtures.last" "$out/fixtures-as.last" >"$out/fixtures.tsv"
# every fixture's checks as above, in one node start: the hardening rules' fixtures each
# checked on its own (FIXTURE.yaml.hardening holds what hardening.mjs says of it); an
# agent-sandbox fixture through the overlay's chain; a pod's limits from its facts
jobs="$out/fixtures.jsonl"
: >"$jobs"
hardening=()
while IFS=$'\t' read -r name _; do
	f="$out/fixtures/$name"
	mkdir -p "$out/pod.fixture-$name"
	steps=()
	case $name in
	as-*)
		step agent-sandbox.mjs "$f.yaml" "$f-derived.yaml"
		step validate.mjs "$f.ts" "$f-derived.yaml"
		step hardening.mjs --agent-sandbox "$f-derived.yaml"
		step podfacts.mjs "$f-derived.yaml" "$out/pod.fixture-$name/limits" "$version"
		;;
	typo) step validate.mjs "$f.ts" "$f.yaml" ;;
	pod-*) step podfacts.mjs "$f.yaml" "$out/pod.fixture-$name/limits" "$version" ;;
	*) hardening+=("$f.yaml") ;;
	esac
	((${#steps[@]} == 0)) || chain_job "$out/pod.fixture-$name/chain" >>"$jobs"
done <"$out/fixtures.tsv"
steps=()
step hardening.mjs --each "${hardening[@]}"
chain_job "$out/hardening-each" >>"$jobs"
node "$checks/chains.mjs" "$jobs"
# (the hardening fixtures' own results are in their files: the chain itself must have run)
cat "$out/hardening-each.err" >&2
status "$out/hardening-each" || exit 1
failed=0
while IFS=$'\t' read -r name expect; do
	chain="$out/pod.fixture-$name/chain"
	set +e
	case $name in
	as-* | pod-*)
		# the chain's stderr, then the pod's limits where the chain passed
		msg=$(<"$chain.err")
		if status "$chain"; then
			msg+=$'\n'$(pod_limits "$name" "$out/pod.fixture-$name" 2>&1)
		else
			false
		fi
		;;
	typo)
		msg=$(<"$chain.err")
		status "$chain" && msg=$(tsc ".out/fixtures/$name.ts" 2>&1)
		;;
	*)
		# as its own node start would have: status 1 with something said, 0 with nothing
		msg=$(<"$out/fixtures/$name.yaml.hardening")
		[[ -z $msg ]]
		;;
	esac
	rc=$?
	set -e
	if ((rc == 0)) || [[ $msg != *"$expect"* ]]; then
		echo "check-deploy: the fixture '$name' should fail with '$expect', got: $msg" >&2
		failed=1
	fi
done <"$out/fixtures.tsv"
((failed == 0)) || exit 1
echo "check-deploy: every fixture fails as it should"
