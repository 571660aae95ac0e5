#!/usr/bin/env bash
# Writes deploy/podman/codebox.yaml: the pod `podman kube play` runs on one machine, served on
# 127.0.0.1:8080 (deploy/checks/podman-pod.mjs says how it is made from the podman overlay).
# --check compares instead of writing (used by the offline deploy checks, so it cannot drift
# from the overlay it is made from). Needs the pinned kubectl and deploy/checks' npm packages
# (scripts/install-deps.sh).
set -euo pipefail

usage() {
	echo "usage: $0 [--check]"
}
check=0
case ${1:-} in
--help | -h)
	usage
	exit 0
	;;
--check) check=1 ;;
"") ;;
*)
	usage >&2
	exit 2
	;;
esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$here/deploy/podman/codebox.yaml"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$here/deploy/tools/bin/kubectl" kustomize "$here/deploy/overlays/podman" >"$work/rendered.yaml"
node "$here/deploy/checks/podman-pod.mjs" "$work/rendered.yaml" "$work/codebox.yaml"
if ((check)); then
	if ! diff -q "$work/codebox.yaml" "$out" >/dev/null 2>&1; then
		echo "gen-podman-pod: $out is stale; run scripts/gen-podman-pod.sh" >&2
		exit 1
	fi
	exit 0
fi
mkdir -p "$(dirname "$out")"
cp "$work/codebox.yaml" "$out"
