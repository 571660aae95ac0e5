#!/usr/bin/env bash
# codebox on kind: up (create cluster "codebox", build and load the image, apply the kind
# overlay, wait, port-forward to 127.0.0.1:8080), down (delete only that cluster, stop the
# port-forward), test (the bats contract suite through the port-forward).
# The current kubectl context is saved first and restored on every exit, failures included.
set -euo pipefail

usage() {
	echo "usage: $0 up|down|test"
}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cluster=codebox
context="kind-$cluster"
pidfile="$here/.run/kind-port-forward.pid"
image="localhost/codebox:$(cat "$here/VERSION")"
case ${1:-} in
up | down | test) ;;
--help | -h)
	usage
	exit 0
	;;
*)
	usage >&2
	exit 2
	;;
esac

# kubectl: the machine's own, else the pinned one of the offline checks (install-deps.sh)
if ! command -v kubectl >/dev/null && [[ -x $here/deploy/tools/bin/kubectl ]]; then
	PATH="$here/deploy/tools/bin:$PATH"
fi
have_kind() {
	command -v kind >/dev/null && return 0
	echo "kind-$1: kind is not installed. Install kind v0.24 or later (a single binary: see" \
		"https://kind.sigs.k8s.io/docs/user/quick-start/#installation) with docker or podman," \
		"then run make kind-up. docs/OPERATIONS.md: \"kind\"." >&2
	return 1
}

saved=$(kubectl config current-context 2>/dev/null || true)
restore() {
	if [[ -n $saved ]]; then
		kubectl config use-context "$saved" >/dev/null 2>&1 || true
	else
		kubectl config unset current-context >/dev/null 2>&1 || true
	fi
}
trap restore EXIT

k() { kubectl --context "$context" "$@"; }

case ${1:-} in
up)
	have_kind up || exit 1
	mkdir -p "$here/.run"
	if ! kind get clusters 2>/dev/null | grep -qx "$cluster"; then
		(cd "$here" && kind create cluster --name "$cluster" --config deploy/kind/kind-config.yaml)
	fi
	make -C "$here" image
	# rendered by the pinned kubectl (kustomize v5): an older client's kustomize cannot
	"$here/deploy/tools/bin/kubectl" kustomize "$here/deploy/overlays/kind" >"$here/.run/kind.yaml"
	# the image under the name the manifests give it (deploy/image: your registry's, or
	# localhost/codebox), loaded into the node, never pulled (imagePullPolicy: Never)
	named=$(awk '$1 == "image:" { print $2; exit }' "$here/.run/kind.yaml")
	if docker info >/dev/null 2>&1; then
		[[ $named == "$image" ]] || docker tag "$image" "$named"
		kind load docker-image --name "$cluster" "$named"
	else
		# podman (KIND_EXPERIMENTAL_PROVIDER=podman): through an archive
		[[ $named == "$image" ]] || podman tag "$image" "$named"
		podman save -o "$here/.run/codebox-image.tar" "$named"
		kind load image-archive --name "$cluster" "$here/.run/codebox-image.tar"
		rm -f "$here/.run/codebox-image.tar"
	fi
	k apply -f "$here/.run/kind.yaml"
	k -n codebox rollout status deployment/codebox --timeout=300s
	mkdir -p "$here/.run"
	k -n codebox port-forward service/codebox 8080:8080 --address 127.0.0.1 >"$here/.run/kind-port-forward.log" 2>&1 &
	echo $! >"$pidfile"
	for ((i = 0; i < 100; i++)); do
		curl -sf http://127.0.0.1:8080/readyz >/dev/null && break
		sleep 0.2
	done
	curl -s http://127.0.0.1:8080/isolation | jq -c .layers
	;;
down)
	if [[ -f $pidfile ]]; then
		kill "$(cat "$pidfile")" 2>/dev/null || true
		rm -f "$pidfile"
	fi
	if ! command -v kind >/dev/null; then
		echo "kind-down: kind is not installed: there is no codebox cluster to delete" >&2
	elif kind get clusters 2>/dev/null | grep -qx "$cluster"; then
		kind delete cluster --name "$cluster"
	fi
	;;
test)
	# only codebox's own cluster, through make kind-up's own port-forward: never whatever
	# else answers on 127.0.0.1:8080
	have_kind test || exit 1
	if ! kind get clusters 2>/dev/null | grep -qx "$cluster"; then
		echo "kind-test: there is no kind cluster \"$cluster\": run make kind-up first" >&2
		exit 1
	fi
	pf=$(cat "$pidfile" 2>/dev/null || true)
	if [[ -z $pf ]] || ! tr '\0' ' ' <"/proc/$pf/cmdline" 2>/dev/null | grep -q "port-forward service/codebox"; then
		echo "kind-test: make kind-up's port-forward to the cluster is not running: run make kind-up again" >&2
		exit 1
	fi
	k -n codebox get deployment/codebox >/dev/null
	CODEBOX_BASE=http://127.0.0.1:8080 "$here/tests/tools/node_modules/bats/bin/bats" --print-output-on-failure \
		"$here/tests/10-contract.bats"
	;;
esac
