#!/usr/bin/env bash
# Runs the image as the podman overlay's pod with no network at all (podman kube play
# --network none), checks the pod's hardening from outside (uid 10001, read-only root, no
# capabilities), prints what /isolation says the pod allows, and runs the bats contract suite
# against it inside the pod's own network namespace (nsenter --net). Then removes the pod.
set -euo pipefail

usage() {
	echo "usage: $0 [--keep]"
	echo "Tests localhost/codebox:dev (make image) as a pod; --keep leaves the pod running."
}
keep=0
case ${1:-} in
--help | -h)
	usage
	exit 0
	;;
--keep) keep=1 ;;
esac

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CONTAINERS_CONF="$here/image/containers.conf"
work=$(mktemp -d)
pod=codebox-pod-0
cleanup() {
	if ((!keep)); then
		podman kube down "$work/pod.yaml" >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

# play_pod YAML [PODMAN-ARGS...]: starts the pod without network and waits until it is ready;
# sets netns (the pod's network namespace, entered with nsenter --net by pcurl).
play_pod() {
	local yaml=$1 infra i
	shift
	podman kube down "$yaml" >/dev/null 2>&1 || true
	podman kube play --network none "$@" "$yaml" >/dev/null
	# The pod has no network but its own loopback: reach nginx there, from the host, by
	# entering only the pod's network namespace (the infra container's).
	infra=$(podman pod inspect "$pod" --format '{{.InfraContainerID}}')
	netns="/proc/$(podman inspect "$infra" --format '{{.State.Pid}}')/ns/net"
	for ((i = 0; i < 600; i++)); do
		if [[ $(pcurl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/readyz) == 200 ]]; then
			return 0
		fi
		sleep 0.2
	done
	echo "image-test: the pod did not become ready" >&2
	podman logs "$pod-pool" 2>&1 | tail -n 20 >&2
	podman logs "$pod-nginx" 2>&1 | tail -n 20 >&2
	exit 1
}
pcurl() { nsenter --net="$netns" curl "$@"; }
fail() {
	echo "image-test: $*" >&2
	exit 1
}

# 1. the podman overlay as it is, under podman's default seccomp profile
kubectl kustomize "$here/deploy/overlays/podman" >"$work/pod.yaml"
play_pod "$work/pod.yaml"
for c in nginx pool; do
	[[ $(podman exec "$pod-$c" id -u) == 10001 ]] || fail "$c does not run as uid 10001"
	if podman exec "$pod-$c" sh -c 'touch /usr/codebox-write-test' 2>/dev/null; then
		fail "$c can write its root file system"
	fi
	[[ $(podman exec "$pod-$c" awk '/^CapEff/ { print $2 }' /proc/1/status) == 0000000000000000 ]] ||
		fail "$c has capabilities"
done
echo "image-test: both containers run as uid 10001, read-only, without capabilities"
echo "image-test: isolation in the pod: $(pcurl -s http://127.0.0.1:8080/isolation | jq -c .layers)"
CODEBOX_BASE=http://127.0.0.1:8080 CODEBOX_NETNS="$netns" \
	bats --print-output-on-failure "$here/tests/10-contract.bats"
podman kube down "$work/pod.yaml" >/dev/null

# 2. the same pod under a profile as strict as a runtime default for a pod without
# CAP_SYS_ADMIN: no new namespaces, no mounts. The pool must degrade, say so, and still serve.
jq '.syscalls |= map(if .action == "SCMP_ACT_ALLOW" then .names -= ["clone", "clone3",
	"unshare", "mount", "umount", "umount2", "pivot_root", "setns", "mount_setattr",
	"move_mount", "open_tree", "fsopen", "fsmount", "fspick", "fsconfig"] else . end)
	| .syscalls |= map(select((.names | length) > 0))
	| .syscalls += [{"names": ["clone"], "action": "SCMP_ACT_ALLOW",
		"args": [{"index": 0, "value": 2114060288, "op": "SCMP_CMP_MASKED_EQ", "valueTwo": 0}]},
		{"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}]' \
	/usr/share/containers/seccomp.json >"$work/strict.json"
mkdir -p "$here/deploy/checks/.out/strict"
cat >"$here/deploy/checks/.out/strict/kustomization.yaml" <<'KUST'
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../../overlays/podman
patches:
  - target:
      kind: Deployment
      name: codebox
    patch: |-
      - op: add
        path: /spec/template/metadata/annotations
        value:
          seccomp.security.alpha.kubernetes.io/pod: localhost/strict.json
KUST
kubectl kustomize "$here/deploy/checks/.out/strict" >"$work/strict.yaml"
cp "$work/strict.yaml" "$work/pod.yaml" # what cleanup takes down
play_pod "$work/strict.yaml" --seccomp-profile-root "$work"
iso=$(pcurl -s http://127.0.0.1:8080/isolation)
echo "image-test: isolation under a strict profile: $(jq -c .layers <<<"$iso")"
jq -e '.layers.userns == false and .layers.pidns == false and .layers.seccomp == true' <<<"$iso" >/dev/null ||
	fail "/isolation does not report the strict profile's missing namespaces"
CODEBOX_BASE=http://127.0.0.1:8080 CODEBOX_NETNS="$netns" \
	bats --print-output-on-failure "$here/tests/10-contract.bats"

if command -v runsc >/dev/null; then
	echo "image-test: runsc found; the single-container gVisor case is not automated yet" >&2
else
	echo "image-test: no runsc (gVisor) on this host: the gVisor case is not run"
fi
