#!/usr/bin/env bash
# Tests the image (make image) as the podman overlay's pod:
#   0. the image itself: at most 620 MB, no setuid or setgid file, no compiler or header;
#   1. the pod as rendered, under podman's default seccomp profile, with the runs directory
#      on a root-owned 0777 volume (a Kubernetes emptyDir without fsGroup): hardening from
#      outside (uid 10001, read-only root, no capabilities), the limits of the ConfigMap in
#      force, the pool's probe, which isolation layers are on, then the contract, limits and
#      attacks suites against the pod, and a run in flight answered while the pod stops;
#   2. under the kind overlay's Localhost seccomp profile, with the agent port turned on
#      (CODEBOX_AGENT_PORT=on, as the agent-sandbox pod): every namespace on, a command on
#      port 8888 (in stage 1, off as in every other overlay, nothing listens on 8888), the
#      contract;
#   3. the same pod under a profile as strict as a runtime default for a pod without
#      CAP_SYS_ADMIN (no new namespaces, no mounts), with the runs directory root-owned and
#      group-writable only (an emptyDir with the pod's fsGroup): the pool degrades, says so,
#      and passes the contract suite (the attacks suite with --strict-attacks: it fails
#      there today, where the run's process cap and working-directory confinement degrade);
#   4. the agent-sandbox overlay's pod, as its controller makes it from the rendered
#      SandboxTemplate (deploy/checks/agent-sandbox.mjs), with its own limits ConfigMap, under
#      the Localhost profile it names: hardening from outside, its limits in force, and the
#      official client's protocol on port 8888 (tests/helpers/agent_client.py: commands, an
#      upload and download of the same bytes, list, exists, the workspace shared between them);
#   5. a bad limits ConfigMap: both containers refuse to start, saying why;
#   6. the image extended as docs/OPERATIONS.md says (image/Dockerfile.extend: FROM it, one
#      more Debian module, python3-tabulate): /capabilities, /tool, MCP's tools/list and the
#      heavy warm tier have it, and a run imports it;
#   7. the one-command path (deploy/podman/codebox.yaml, make podman-run) on podman's network,
#      published on a free loopback port: a run answered there, and SIGTERM answers the run in
#      flight, then leaves nothing.
# Stage 0 also checks the OCI labels and the SBOM. What it needs (podman, kubectl, the npm
# packages of deploy/checks, bats, jq, nsenter) is installed by scripts/install-deps.sh when
# missing, else named.
# The pod has no network (podman kube play --network none); the suites reach it by entering
# only its network namespace (nsenter --net), and see its processes and runs directory from
# the host (CODEBOX_POD_*: tests/helpers/stack.bash).
set -euo pipefail

usage() {
	echo "usage: $0 [--keep] [--strict-attacks]"
	echo "Tests \$IMAGE (default localhost/codebox:\$(cat VERSION), made by make image) as a pod;"
	echo "--keep leaves the last pod running; --strict-attacks also runs the attacks suite under"
	echo "the strict profile (known to fail there: the degraded layers' gaps)."
}
keep=0
strict_attacks=0
for arg in "$@"; do
	case $arg in
	--help | -h)
		usage
		exit 0
		;;
	--keep) keep=1 ;;
	--strict-attacks) strict_attacks=1 ;;
	*)
		usage >&2
		exit 2
		;;
	esac
done

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CONTAINERS_CONF="$here/image/containers.conf"
image=${IMAGE:-localhost/codebox:$(cat "$here/VERSION")}
# the image's name in the manifests (deploy/image), which render() replaces with $image
named=$(awk '$1 == "newName:" { print $2; exit }' "$here/deploy/image/kustomization.yaml")
kubectl="$here/deploy/tools/bin/kubectl"
bats="$here/tests/tools/node_modules/bats/bin/bats"
max_mb=620
work=$(mktemp -d)
chmod 0711 "$work"
pod=codebox-pod-0
current=""
runner="" # stage 7's scripts/podman-run.sh
cleanup() {
	if ((!keep)) && [[ -n $current ]]; then
		podman kube down "$current" >/dev/null 2>&1 || true
	fi
	if [[ -n $runner ]]; then
		kill -TERM "$runner" 2>/dev/null || true
		wait "$runner" 2>/dev/null || true
	fi
	rm -rf "$work" "$here/deploy/checks/.image-test"
}
trap cleanup EXIT
fail() {
	echo "image-test: $*" >&2
	exit 1
}
say() { echo "image-test: $*"; }

# what this script runs: installed by install-deps.sh (--image: podman and its helpers) when
# one is missing, then named if it still is
needs() {
	local n missing=()
	for n in podman:podman nsenter:util-linux jq:jq node:nodejs curl:curl \
		"$bats:scripts/install-deps.sh (npm ci in tests/tools)" "$kubectl:scripts/install-deps.sh" \
		"$here/deploy/checks/node_modules/yaml:scripts/install-deps.sh (npm ci in deploy/checks)"; do
		if [[ ${n%%:*} == /* ]]; then
			[[ -e ${n%%:*} ]] || missing+=("${n%%:*} (${n#*:})")
		else
			command -v "${n%%:*}" >/dev/null || missing+=("${n%%:*} (${n#*:})")
		fi
	done
	printf '%s\n' "${missing[@]}"
}
if [[ -n $(needs) ]]; then
	say "missing: $(needs | tr '\n' ' '); running scripts/install-deps.sh --image"
	"$here/scripts/install-deps.sh" --image >&2 || fail "scripts/install-deps.sh --image failed"
	[[ -z $(needs) ]] || fail "still missing after scripts/install-deps.sh --image: $(needs | tr '\n' ' ')"
fi

# 0. the image
size=$(podman image inspect --format '{{.Size}}' "$image") || fail "no image $image: run make image"
say "$image is $((size / 1000000)) MB"
((size <= max_mb * 1000000)) || fail "$image is larger than $max_mb MB"
found=$(podman run --rm --network none --user 0 --entrypoint /bin/sh "$image" -c '
	find / -xdev -type f -perm /6000 2>/dev/null
	for c in gcc cc g++ c++ cpp as ld clang tcc; do command -v "$c"; done
	ls -d /usr/include /usr/lib/gcc 2>/dev/null
	true')
[[ -z $found ]] || fail "the image holds setuid/setgid files, compilers or headers: $(tr '\n' ' ' <<<"$found")"
say "no setuid or setgid file, no compiler, no headers in the image"
# the OCI labels, and the SBOM they point to
labels=$(podman image inspect --format '{{json .Labels}}' "$image")
for l in title description version revision created source licenses; do
	[[ -n $(jq -r --arg l "org.opencontainers.image.$l" '.[$l] // empty' <<<"$labels") ]] ||
		fail "the image has no label org.opencontainers.image.$l: $labels"
done
[[ $(jq -r '.["org.opencontainers.image.version"]' <<<"$labels") == "$(cat "$here/VERSION")" ]] ||
	fail "org.opencontainers.image.version is not VERSION's $(cat "$here/VERSION"): $labels"
podman run --rm --network none --entrypoint /bin/cat "$image" /usr/share/codebox/sbom.spdx.json >"$work/sbom.json" ||
	fail "the image has no SBOM at /usr/share/codebox/sbom.spdx.json"
jq -e '.spdxVersion == "SPDX-2.3" and ([.packages[].name] | index("nginx-light") and index("python3-numpy") and index("codebox"))' \
	"$work/sbom.json" >/dev/null || fail "the SBOM does not list nginx-light, python3-numpy and codebox"
say "OCI labels ($(jq -r '[.["org.opencontainers.image.version"], .["org.opencontainers.image.revision"][0:12]] | join(" ")' <<<"$labels")), and an SPDX SBOM of $(jq '.packages | length' "$work/sbom.json") packages at /usr/share/codebox/sbom.spdx.json"

# render OVERLAY-NAME RUNS-HOST-DIR [PATCH...]: deploy/overlays/podman with the image under
# test and the runs volume on a host directory (podman would hand an emptyDir to the
# container's user, which hides what a cluster's root-owned emptyDir does); prints the path
render() {
	local name=$1 runs=$2 dir
	shift 2
	# (beside check-deploy's .out/, which it empties at its start: CI runs both at once)
	dir="$here/deploy/checks/.image-test/$name"
	mkdir -p "$dir"
	{
		cat <<KUST
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../../overlays/podman
images:
  - name: $named
    newName: ${image%:*}
    newTag: "${image##*:}"
patches:
  - target:
      kind: Deployment
      name: codebox
    patch: |-
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: codebox
      spec:
        template:
          spec:
            volumes:
              - name: runs
                emptyDir: null
                hostPath:
                  path: $runs
                  type: Directory
KUST
		local p
		for p in "$@"; do
			printf '%s\n' "$p"
		done
	} >"$dir/kustomization.yaml"
	"$kubectl" kustomize "$dir" >"$work/$name.yaml"
	echo "$work/$name.yaml"
}

# kube_play YAML [PODMAN-ARGS...]: podman kube play without network. Podman turns liveness
# probes into healthchecks run by systemd timers, which a machine without systemd lacks: its
# complaints about that are dropped, anything else it says is shown.
kube_play() {
	local yaml=$1 rc=0
	shift
	# a pod of that name left by an interrupted run
	if podman pod exists "$pod"; then
		podman pod rm -f "$pod" >/dev/null 2>&1 || true
	fi
	current=$yaml
	podman kube play --network none "$@" "$yaml" >/dev/null 2>"$work/play.err" || rc=$?
	grep -v 'unable to get systemd connection' "$work/play.err" >&2 || true
	((rc == 0)) || fail "podman kube play failed (exit $rc)"
}

# kube_down YAML: the pod down, with the same complaints dropped
kube_down() {
	podman kube down "$1" >/dev/null 2>"$work/down.err" || true
	grep -v 'unable to get systemd connection' "$work/down.err" >&2 || true
	current=""
}

# play_pod YAML [PODMAN-ARGS...]: starts the pod without network and waits until it is ready;
# sets netns (the pod's network namespace, entered with nsenter --net by pcurl).
play_pod() {
	local yaml=$1 infra i
	shift
	current=$yaml
	kube_play "$yaml" "$@"
	infra=$(podman pod inspect "$pod" --format '{{.InfraContainerID}}')
	netns="/proc/$(podman inspect "$infra" --format '{{.State.Pid}}')/ns/net"
	for ((i = 0; i < 600; i++)); do
		if [[ $(pcurl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8080/readyz) == 200 ]]; then
			return 0
		fi
		sleep 0.2
	done
	podman logs "$pod-pool" 2>&1 | tail -n 20 >&2
	podman logs "$pod-nginx" 2>&1 | tail -n 20 >&2
	fail "the pod did not become ready"
}
pcurl() { nsenter --net="$netns" curl "$@"; }

# suites RUNS-HOST-DIR SUITE...: the bats suites against the running pod
suites() {
	local runs=$1
	shift
	CODEBOX_BASE=http://127.0.0.1:8080 CODEBOX_METRICS_BASE=http://127.0.0.1:9090 CODEBOX_NETNS="$netns" \
		CODEBOX_POD_RUNS="$runs/codebox-10001" \
		CODEBOX_POD_RUNS_INSIDE=/var/lib/codebox/runs/codebox-10001 \
		CODEBOX_POD_SOCKET=/run/codebox/fcgi.sock \
		CODEBOX_POD_POOL_PID="$(podman inspect "$pod-pool" --format '{{.State.Pid}}')" \
		CODEBOX_POD_NGINX_PID="$(podman inspect "$pod-nginx" --format '{{.State.Pid}}')" \
		"$bats" --print-output-on-failure "${@/#/$here/tests/}"
}

# layers: what /isolation says is on, and why the rest is off
layers() {
	local iso
	iso=$(pcurl -s http://127.0.0.1:8080/isolation)
	say "isolation layers on in the pod ($1): $(jq -r '[.layers | to_entries[] | select(.value) | .key] | join(", ")' <<<"$iso")"
	say "isolation layers off in the pod ($1): $(jq -r '[.off | to_entries[] | "\(.key) (\(.value))"] | join("; ")' <<<"$iso")"
	say "isolation details in the pod ($1): $(jq -c .details <<<"$iso")"
	echo "$iso" >"$work/iso.json"
}

# nginx counts its answers by status next to the socket, where the pool reads them
codebox_answers() {
	pcurl -s http://127.0.0.1:9090/metrics | awk '$1 == "codebox_http_responses_total{code=\"200\"}" { print $2 }'
}

# 1. the podman overlay, podman's default seccomp profile, a root-owned 0777 runs volume
mkdir "$work/runs-emptydir"
chmod 0777 "$work/runs-emptydir"
yaml=$(render default "$work/runs-emptydir")
play_pod "$yaml"
for c in nginx pool; do
	[[ $(podman exec "$pod-$c" id -u) == 10001 ]] || fail "$c does not run as uid 10001"
	if podman exec "$pod-$c" sh -c 'touch /usr/codebox-write-test' 2>/dev/null; then
		fail "$c can write its root file system"
	fi
	[[ $(podman exec "$pod-$c" awk '/^CapEff/ { print $2 }' /proc/1/status) == 0000000000000000 ]] ||
		fail "$c has capabilities"
done
say "both containers run as uid 10001, read-only, without capabilities"
[[ $(stat -c '%u %a' "$work/runs-emptydir/codebox-10001") == "10001 311" ]] ||
	fail "the pool does not run in a directory of its own on the root-owned runs volume"
say "the pool started on a root-owned 0777 runs volume, in codebox-10001/ (its own, 0311)"
# the limits the pod must have: the ConfigMap's own source, deploy/base/limits.env
want_conc=$(sed -n 's/^CODEBOX_MAX_CONCURRENT_EXECUTIONS=//p' "$here/deploy/base/limits.env")
want_mem=$(sed -n 's/^CODEBOX_MEMORY_BYTES=//p' "$here/deploy/base/limits.env")
[[ -n $want_conc && -n $want_mem ]] || fail "deploy/base/limits.env names no concurrency or memory limit"
caps=$(pcurl -s http://127.0.0.1:8080/capabilities)
[[ $(jq .limits.maxConcurrentExecutions <<<"$caps") == "$want_conc" ]] ||
	fail "the ConfigMap's CODEBOX_MAX_CONCURRENT_EXECUTIONS=$want_conc is not in force: $(jq -c .limits <<<"$caps")"
layers "podman's default seccomp profile"
[[ $(jq .limits.memoryBytes "$work/iso.json") == "$want_mem" ]] ||
	fail "the ConfigMap's CODEBOX_MEMORY_BYTES=$want_mem is not in force"
say "the limits of the ConfigMap are in force ($want_conc executions, memoryBytes $want_mem)"
podman exec "$pod-pool" /usr/local/bin/codebox-probe >/dev/null || fail "the pool's probe fails on a ready pod"
say "the pool's probe (codebox-probe) answers"
(($(codebox_answers) > 0)) || fail "GET /metrics counts no 200 of nginx's: its counters are not next to the socket"
say "GET /metrics counts nginx's answers by status ($(codebox_answers) 200s so far)"
# a picture: matplotlib in the hardened pod, whose non-root pool copies the font cache into /tmp
pcurl -s --max-time 60 -o "$work/chart.json" -H 'Content-Type: application/json' \
	--data-binary "$(jq -cn --rawfile c "$here/tests/programs/plot.py" '{code: $c, artifacts: true}')" \
	http://127.0.0.1:8080/execute || fail "the café chart got no answer"
[[ $(jq -r '[.status, .stderr, .artifacts[0].path, .artifacts[0].mimeType] | join(" ")' "$work/chart.json") == "succeeded  figure-1.png image/png" ]] ||
	fail "the café chart did not come back as figure-1.png: $(head -c 600 "$work/chart.json")"
[[ $(jq -r '.artifacts[0].contentBase64' "$work/chart.json" | base64 -d | head -c 8 | od -An -tx1 | tr -d ' \n') == 89504e470d0a1a0a ]] ||
	fail "figure-1.png is not a PNG"
say "the pod draws: plt.show() comes back as figure-1.png ($(jq '.artifacts[0].bytes' "$work/chart.json") bytes)"
# tenancy: a pod of many tenants does not serve port 8888 (one tenant's workspace)
agent_code=$(pcurl -s -o /dev/null -w '%{http_code}' --max-time 5 http://127.0.0.1:8888/ || true)
[[ $agent_code == 000 ]] || fail "the pod serves port 8888 without CODEBOX_AGENT_PORT=on (HTTP $agent_code)"
say "nothing listens on port 8888 (CODEBOX_AGENT_PORT is off)"
suites "$work/runs-emptydir" 10-contract.bats 20-limits.bats 40-attacks.bats
# Stopping the pod as a runtime does (SIGTERM to each container, SIGKILL after the grace)
# answers the run in flight: the nginx container turns SIGTERM into nginx's graceful stop, and
# the pool drains.
pcurl -s --max-time 60 -o "$work/inflight.json" -w '%{http_code}' \
	-d '{"code":"import time; time.sleep(4); print(\"drained\")"}' http://127.0.0.1:8080/execute \
	>"$work/inflight.code" &
client=$!
for ((i = 0; i < 100; i++)); do
	[[ $(pcurl -s http://127.0.0.1:9090/metrics | awk '$1 == "codebox_executions_in_flight" { print $2 }') == 1 ]] &&
		break
	sleep 0.1
done
((i < 100)) || fail "the run to be answered during the pod's stop did not start within 10 s"
podman pod stop -t 60 "$pod" >/dev/null 2>"$work/stop.err" || fail "podman pod stop failed: $(cat "$work/stop.err")"
wait "$client" || true
if [[ $(cat "$work/inflight.code") != 200 ]] || ! grep -q '"stdout":"drained\\n"' "$work/inflight.json"; then
	fail "podman pod stop cut off the run in flight: HTTP $(cat "$work/inflight.code"): $(cat "$work/inflight.json")"
fi
say "podman pod stop with a run in flight: the run was answered (200), then the pod stopped"
kube_down "$yaml"

# 2. the kind overlay's Localhost profile (deploy/seccomp/codebox.json): every namespace on;
# and the agent port on in both containers (CODEBOX_AGENT_PORT=on, as the agent-sandbox pod)
mkdir "$work/runs-kind"
chmod 0777 "$work/runs-kind"
yaml=$(render kind "$work/runs-kind" '  - target:
      kind: Deployment
      name: codebox
    patch: |-
      - op: add
        path: /spec/template/metadata/annotations
        value:
          seccomp.security.alpha.kubernetes.io/pod: localhost/codebox.json
      - op: replace
        path: /spec/template/spec/containers/0/env/0
        value: {name: CODEBOX_AGENT_PORT, value: "on"}
      - op: replace
        path: /spec/template/spec/containers/1/env/0
        value: {name: CODEBOX_AGENT_PORT, value: "on"}')
play_pod "$yaml" --seccomp-profile-root "$here/deploy/seccomp"
layers "the kind overlay's Localhost profile"
# every namespace layer the pool knows (its own report names them: *ns), seccomp and Landlock
jq -e '[.layers | to_entries[] | select((.key | endswith("ns")) or .key == "seccomp" or .key == "landlock") | .value] | all' \
	"$work/iso.json" >/dev/null || fail "the kind overlay's profile does not let the pool build every namespace"
agent_out=$(pcurl -s --max-time 60 -d '{"command":"echo one tenant > t && cat t"}' http://127.0.0.1:8888/execute)
[[ $(jq -r .stdout <<<"$agent_out") == "one tenant" ]] ||
	fail "with CODEBOX_AGENT_PORT=on port 8888 does not run a command in the workspace: $agent_out"
say "with CODEBOX_AGENT_PORT=on in both containers, port 8888 serves the agent protocol"
suites "$work/runs-kind" 10-contract.bats
kube_down "$yaml"

# 3. a profile without namespaces or mounts; the runs volume root-owned, fsGroup-writable
jq '.syscalls |= map(if .action == "SCMP_ACT_ALLOW" then .names -= ["clone", "clone3",
	"unshare", "mount", "umount", "umount2", "pivot_root", "setns", "mount_setattr",
	"move_mount", "open_tree", "fsopen", "fsmount", "fspick", "fsconfig"] else . end)
	| .syscalls |= map(select((.names | length) > 0))
	| .syscalls += [{"names": ["clone"], "action": "SCMP_ACT_ALLOW",
		"args": [{"index": 0, "value": 2114060288, "op": "SCMP_CMP_MASKED_EQ", "valueTwo": 0}]},
		{"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": 38}]' \
	/usr/share/containers/seccomp.json >"$work/strict.json"
mkdir "$work/runs-fsgroup"
chown 0:10001 "$work/runs-fsgroup"
chmod 2770 "$work/runs-fsgroup"
yaml=$(render strict "$work/runs-fsgroup" '  - target:
      kind: Deployment
      name: codebox
    patch: |-
      - op: add
        path: /spec/template/metadata/annotations
        value:
          seccomp.security.alpha.kubernetes.io/pod: localhost/strict.json')
play_pod "$yaml" --seccomp-profile-root "$work"
layers "a runtime-default-like profile: no namespaces, no mounts"
jq -e '.layers.userns == false and .layers.pidns == false and .layers.seccomp == true' "$work/iso.json" >/dev/null ||
	fail "/isolation does not report the strict profile's missing namespaces"
[[ $(stat -c '%u %a' "$work/runs-fsgroup/codebox-10001") == "10001 311" ]] ||
	fail "the pool does not run in a directory of its own on the fsGroup-owned runs volume"
say "the pool started on a root-owned, group-writable (fsGroup) runs volume, in codebox-10001/"
if ((strict_attacks)); then
	suites "$work/runs-fsgroup" 10-contract.bats 40-attacks.bats
else
	suites "$work/runs-fsgroup" 10-contract.bats
fi
kube_down "$yaml"

# 4. the agent-sandbox overlay: the pod the controller makes from the rendered SandboxTemplate
# (agent-sandbox.mjs derives it, as make deploy-check does), with its limits ConfigMap, as
# podman plays it: no containerPorts (podman would publish them), probes by port number, and
# the Localhost profile the pool names (profiles/codebox.json: deploy/seccomp/codebox.json)
# through podman's seccomp annotation
dir="$here/deploy/checks/.image-test/agent-sandbox"
mkdir -p "$dir"
cat >"$dir/kustomization.yaml" <<KUST
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../../../overlays/agent-sandbox
images:
  - name: $named
    newName: ${image%:*}
    newTag: "${image##*:}"
KUST
"$kubectl" kustomize "$dir" >"$work/as-rendered.yaml"
node "$here/deploy/checks/agent-sandbox.mjs" "$work/as-rendered.yaml" "$work/as-derived.yaml" >/dev/null ||
	fail "the agent-sandbox overlay does not pass its CRD check"
node --input-type=module - "$here/deploy/checks/node_modules/yaml/dist/index.js" "$work/as-derived.yaml" \
	"$work/agent-sandbox.yaml" <<'JS'
import { readFileSync, writeFileSync } from "node:fs";
const [yamlLib, input, output] = process.argv.slice(2);
const { parseAllDocuments, stringify } = await import(yamlLib);
const docs = parseAllDocuments(readFileSync(input, "utf8")).map((d) => d.toJS());
const pod = docs.find((d) => d.kind === "Pod");
const ports = {};
for (const c of pod.spec.containers) {
	for (const p of c.ports ?? []) ports[p.name] = p.containerPort;
	delete c.ports;
}
for (const c of pod.spec.containers)
	for (const probe of ["livenessProbe", "readinessProbe", "startupProbe"])
		if (c[probe]?.httpGet && typeof c[probe].httpGet.port === "string") c[probe].httpGet.port = ports[c[probe].httpGet.port];
const pool = pod.spec.containers.find((c) => c.name === "pool");
if (pool.securityContext.seccompProfile.localhostProfile !== "profiles/codebox.json") throw new Error("the pool's profile moved");
pod.metadata.annotations = { ...(pod.metadata.annotations ?? {}), "seccomp.security.alpha.kubernetes.io/pod": "localhost/codebox.json" };
writeFileSync(output, [pod, ...docs.filter((d) => d.kind === "ConfigMap")].map((d) => stringify(d)).join("---\n"));
JS
pod=$(node -e 'const Y = require(process.argv[1]); const fs = require("fs");
	console.log(Y.parseAllDocuments(fs.readFileSync(process.argv[2], "utf8")).map((d) => d.toJS()).find((d) => d.kind === "Pod").metadata.name)' \
	"$here/deploy/checks/node_modules/yaml" "$work/agent-sandbox.yaml")
play_pod "$work/agent-sandbox.yaml" --seccomp-profile-root "$here/deploy/seccomp"
for c in nginx pool; do
	[[ $(podman exec "$pod-$c" id -u) == 10001 ]] || fail "agent-sandbox: $c does not run as uid 10001"
	[[ $(podman exec "$pod-$c" awk '/^CapEff/ { print $2 }' /proc/1/status) == 0000000000000000 ]] ||
		fail "agent-sandbox: $c has capabilities"
done
want_conc=$(sed -n 's/^CODEBOX_MAX_CONCURRENT_EXECUTIONS=//p' "$here/deploy/overlays/agent-sandbox/limits.env")
caps=$(pcurl -s http://127.0.0.1:8080/capabilities)
[[ $(jq .limits.maxConcurrentExecutions <<<"$caps") == "$want_conc" ]] ||
	fail "agent-sandbox: its ConfigMap's CODEBOX_MAX_CONCURRENT_EXECUTIONS=$want_conc is not in force: $(jq -c .limits <<<"$caps")"
layers "the agent-sandbox pod (its Localhost profile)"
say "the agent-sandbox pod ($pod, from the rendered SandboxTemplate) is ready: uid 10001, no capabilities, its ConfigMap's $want_conc executions in force"
# the official client's requests (tests/helpers/agent_client.py) to port 8888, as the sandbox
# router forwards them
client() { nsenter --net="$netns" python3 "$here/tests/helpers/agent_client.py" http://127.0.0.1:8888 "$@"; }
out=$(client run 'echo one tenant > note.txt && cat note.txt && python -c "import numpy; print(numpy.__version__)"') ||
	fail "agent-sandbox: a command through the client failed: $out"
[[ $(jq -r .exit_code <<<"$out") == 0 && $(jq -r .stdout <<<"$out") == "one tenant"$'\n'[0-9]* ]] ||
	fail "agent-sandbox: the command's answer is not what it printed: $out"
head -c 65536 /dev/urandom >"$work/upload.bin"
out=$(client write data/upload.bin "$work/upload.bin") || fail "agent-sandbox: the upload failed: $out"
out=$(client read data/upload.bin "$work/download.bin") || fail "agent-sandbox: the download failed: $out"
cmp -s "$work/upload.bin" "$work/download.bin" || fail "agent-sandbox: the file downloaded is not the one uploaded"
out=$(client run 'sha256sum data/upload.bin') || fail "agent-sandbox: the command on the upload failed: $out"
[[ $(jq -r .stdout <<<"$out") == "$(cd "$work" && sha256sum upload.bin | cut -d' ' -f1)  data/upload.bin" ]] ||
	fail "agent-sandbox: a command does not see the uploaded file's bytes: $out"
out=$(client list data) || fail "agent-sandbox: list failed: $out"
[[ $(jq -c '[.[] | {name, size, type}]' <<<"$out") == '[{"name":"upload.bin","size":65536,"type":"file"}]' ]] ||
	fail "agent-sandbox: list does not show the upload: $out"
[[ $(client exists note.txt) == '{"exists": true}' && $(client exists nothing.txt) == '{"exists": false}' ]] ||
	fail "agent-sandbox: exists does not see the workspace"
say "agent-sandbox pod: the official client's protocol on 8888: commands (shell and python), a 64 KiB upload downloaded byte for byte and seen by a command, list, exists"
kube_down "$work/agent-sandbox.yaml"
pod=codebox-pod-0

# 5. a limits ConfigMap with a bad value: neither container starts
mkdir "$work/runs-bad"
chmod 0777 "$work/runs-bad"
yaml=$(render bad "$work/runs-bad" '  - target:
      kind: ConfigMap
    patch: |-
      - op: replace
        path: /data/CODEBOX_MAX_PROCESSES
        value: "lots"')
current=$yaml
kube_play "$yaml"
for c in pool nginx; do
	for ((i = 0; i < 300; i++)); do
		podman logs "$pod-$c" 2>&1 | grep -q "CODEBOX_MAX_PROCESSES must be a positive integer" && break
		sleep 0.2
	done
	((i < 300)) || fail "the $c container did not refuse a bad limits ConfigMap: $(podman logs "$pod-$c" 2>&1 | tail -n 5)"
done
[[ ! -e $work/runs-bad/codebox-10001 ]] || fail "the pool started with a bad limits ConfigMap"
say "both containers refuse a limits ConfigMap with a bad value, saying why"

kube_down "$yaml"

# 6. the image extended by the documented recipe (image/Dockerfile.extend): one more Debian
# module, picked up with no change to codebox
extended=localhost/codebox-extended-test:$(cat "$here/VERSION")
t0=$SECONDS
podman build --isolation chroot --build-arg CODEBOX_IMAGE="$image" --build-arg PACKAGES=python3-tabulate \
	--build-arg MODULES=tabulate -f "$here/image/Dockerfile.extend" -t "$extended" "$here/image" >"$work/extend.log" 2>&1 ||
	fail "the extended image did not build: $(tail -n 20 "$work/extend.log")"
say "the extended image (FROM $image, + python3-tabulate) built in $((SECONDS - t0)) s"
base_image=$image
image=$extended
mkdir "$work/runs-extended"
chmod 0777 "$work/runs-extended"
yaml=$(render extended "$work/runs-extended")
play_pod "$yaml"
caps=$(pcurl -s http://127.0.0.1:8080/capabilities)
[[ $(jq -r '.modules[] | select(.importName == "tabulate") | .distribution' <<<"$caps") == tabulate ]] ||
	fail "extended: /capabilities does not list tabulate: $(jq -c .modules <<<"$caps")"
pcurl -s http://127.0.0.1:8080/tool | grep -q tabulate || fail "extended: GET /tool does not name tabulate"
pcurl -s -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' \
	-d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' http://127.0.0.1:8080/mcp | grep -q tabulate ||
	fail "extended: MCP's tools/list does not name tabulate"
out=$(pcurl -s -H 'Content-Type: application/json' \
	-d '{"code":"import tabulate\nprint(tabulate.tabulate([[1, 2]], tablefmt=\"plain\"))"}' http://127.0.0.1:8080/execute)
[[ $(jq -r '.status + " " + .stdout' <<<"$out") == "succeeded 1  2" ]] ||
	fail "extended: a run that imports tabulate: $out"
# the warm interpreters import the six default modules and tabulate (numpy alone is light)
for ((i = 0; i < 300; i++)); do
	podman logs "$pod-pool" >"$work/extended-pool.log" 2>&1 || true
	grep -q 'zygote ready: 7 modules imported' "$work/extended-pool.log" &&
		grep -q 'heavy template ready: 6 modules imported' "$work/extended-pool.log" && break
	sleep 0.2
done
((i < 300)) || fail "extended: the heavy tier did not preload tabulate: $(podman logs "$pod-pool" 2>&1 | grep -E 'template|zygote' | tail -n 5)"
say "extended: /capabilities, /tool and MCP name tabulate $(jq -r '.modules[] | select(.importName == "tabulate") | .version' <<<"$caps"), the heavy tier preloads it, a run imports it"
kube_down "$yaml"
image=$base_image
podman rmi "$extended" >/dev/null 2>&1 || true

# 7. the one-command path (README.md): deploy/podman/codebox.yaml as make podman-run plays it,
# on the host's network, published on a free loopback port (never 8080, which a developer may
# be using) and under a pod name of its own; a run answered through that port; SIGTERM answers
# the run in flight, then takes it all down (pod, containers, its emptyDirs and limits volume)
podman_yaml="$here/deploy/podman/codebox.yaml"
if [[ $(awk '$1 == "image:" { print $2; exit }' "$podman_yaml") != "$image" ]]; then
	say "deploy/podman/codebox.yaml names another image than $image: the one-command path is not run"
else
	# shellcheck source=scripts/stack-lib.sh
	source "$here/scripts/stack-lib.sh"
	t0=$SECONDS
	tpod=codebox-image-test
	# a pod of that name left by an interrupted run
	if podman pod exists "$tpod"; then
		podman pod rm -f "$tpod" >/dev/null 2>&1 || true
	fi
	tport=$(codebox_free_port)
	"$here/scripts/podman-run.sh" --port "$tport" --name "$tpod" >"$work/podman-run.log" 2>&1 &
	runner=$!
	for ((i = 0; i < 1200; i++)); do
		grep -q 'codebox is ready at' "$work/podman-run.log" && break
		kill -0 "$runner" 2>/dev/null || break
		sleep 0.2
	done
	grep -q "codebox is ready at http://127.0.0.1:$tport/" "$work/podman-run.log" ||
		fail "make podman-run's pod did not become ready: $(tail -n 20 "$work/podman-run.log")"
	[[ $(podman port "$tpod-nginx") == "8080/tcp -> 127.0.0.1:$tport" ]] ||
		fail "the one-command pod is not published on 127.0.0.1:$tport alone: $(podman port "$tpod-nginx")"
	out=$(curl -s --max-time 60 -H 'Content-Type: application/json' -d '{"code":"print(6*7)"}' \
		"http://127.0.0.1:$tport/execute")
	jq -e '.status == "succeeded" and .stdout == "42\n"' <<<"$out" >/dev/null ||
		fail "the one-command pod: print(6*7) through 127.0.0.1:$tport: $out"
	ready_s=$((SECONDS - t0))
	# SIGTERM with a run in flight: it is answered through the published port, then the pod
	# goes (podman pod stop would take the infra container's network first)
	infra=$(podman pod inspect "$tpod" --format '{{.InfraContainerID}}')
	netns="/proc/$(podman inspect "$infra" --format '{{.State.Pid}}')/ns/net"
	curl -s --max-time 60 -o "$work/podman-run-inflight.json" -w '%{http_code}' \
		-d '{"code":"import time; time.sleep(4); print(\"drained\")"}' "http://127.0.0.1:$tport/execute" \
		>"$work/podman-run-inflight.code" &
	client=$!
	for ((i = 0; i < 100; i++)); do
		[[ $(pcurl -s http://127.0.0.1:9090/metrics | awk '$1 == "codebox_executions_in_flight" { print $2 }') == 1 ]] &&
			break
		sleep 0.1
	done
	((i < 100)) || fail "the one-command pod: the run to be answered during its stop did not start within 10 s"
	kill -TERM "$runner"
	for ((i = 0; i < 900; i++)); do
		kill -0 "$runner" 2>/dev/null || break
		sleep 0.1
	done
	((i < 900)) || fail "make podman-run did not stop within 90 s of SIGTERM"
	rc=0
	wait "$runner" || rc=$?
	runner=""
	((rc == 0)) || fail "make podman-run exited $rc on SIGTERM: $(tail -n 20 "$work/podman-run.log")"
	wait "$client" || true
	if [[ $(cat "$work/podman-run-inflight.code") != 200 ]] || ! grep -q '"stdout":"drained\\n"' "$work/podman-run-inflight.json"; then
		fail "make podman-run's stop cut off the run in flight: HTTP $(cat "$work/podman-run-inflight.code"): $(cat "$work/podman-run-inflight.json" 2>/dev/null)"
	fi
	left=$(podman ps -a --format '{{.Names}}' | grep "^$tpod" || true)
	left+=$(podman volume ls --format '{{.Name}}' | grep "^$tpod-" || true)
	limits=$(awk '$1 == "name:" && $2 ~ /^codebox-limits-/ { print $2; exit }' "$podman_yaml")
	if podman volume exists "$limits" && [[ -z $(podman ps -a --filter "volume=$limits" --format '{{.Names}}') ]]; then
		left+=" volume $limits"
	fi
	! podman pod exists "$tpod" || left+=" pod $tpod"
	[[ -z $left ]] || fail "make podman-run left behind: $left"
	say "the one-command pod (deploy/podman/codebox.yaml, make podman-run): ready on 127.0.0.1:$tport alone, print(6*7) answered 42 (in $ready_s s), SIGTERM answered the run in flight and took it down leaving nothing ($((SECONDS - t0)) s in all)"
fi

if command -v runsc >/dev/null; then
	echo "image-test: runsc found; the single-container gVisor case is not automated yet" >&2
else
	say "no runsc (gVisor) on this host: the gVisor case is not run"
fi
