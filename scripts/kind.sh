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
	command -v kind >/dev/null || {
		echo "kind is not installed (see README: prerequisites)" >&2
		exit 1
	}
	mkdir -p "$here/.run"
	if ! kind get clusters 2>/dev/null | grep -qx "$cluster"; then
		(cd "$here" && kind create cluster --name "$cluster" --config deploy/kind/kind-config.yaml)
	fi
	make -C "$here" image
	if docker info >/dev/null 2>&1; then
		kind load docker-image --name "$cluster" localhost/codebox:dev
	else
		# podman (KIND_EXPERIMENTAL_PROVIDER=podman): through an archive
		podman save -o "$here/.run/codebox-image.tar" localhost/codebox:dev
		kind load image-archive --name "$cluster" "$here/.run/codebox-image.tar"
		rm -f "$here/.run/codebox-image.tar"
	fi
	k apply -k "$here/deploy/overlays/kind"
	k rollout status deployment/codebox --timeout=300s
	mkdir -p "$here/.run"
	k port-forward service/codebox 8080:8080 --address 127.0.0.1 >"$here/.run/kind-port-forward.log" 2>&1 &
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
	if command -v kind >/dev/null && kind get clusters 2>/dev/null | grep -qx "$cluster"; then
		kind delete cluster --name "$cluster"
	fi
	;;
test)
	CODEBOX_BASE=http://127.0.0.1:8080 bats --print-output-on-failure "$here/tests/10-contract.bats"
	;;
--help | -h)
	usage
	;;
*)
	usage >&2
	exit 2
	;;
esac
