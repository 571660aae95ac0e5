#!/usr/bin/env bats
# Deployment tooling that needs no cluster: the offline manifest checks, the pod's limits
# from a ConfigMap, the pool's probe, and the kind targets (they never change the current
# kubectl context, even when a step fails; without kind or its cluster they say what to do).

load helpers/stack

# the pinned kubectl of the offline checks, for machines without one of their own
PATH="$PATH:$ROOT/deploy/tools/bin"

# yq_policy FILE NAME: the `from` peers of the NetworkPolicy NAME's ingress rules, as JSON
yq_policy() {
	node -e '
		const fs = require("fs"), Y = require(process.argv[1]);
		const docs = Y.parseAllDocuments(fs.readFileSync(process.argv[2], "utf8")).map((d) => d.toJS());
		const p = docs.find((d) => d.kind === "NetworkPolicy" && d.metadata.name === process.argv[3]);
		console.log(JSON.stringify(p.spec.ingress.flatMap((r) => r.from ?? [])));' \
		"$ROOT/deploy/checks/node_modules/yaml" "$1" "$2"
}

@test "deploy: the manifests render, validate and pass the hardening rules; broken fixtures fail" {
	local overlays
	overlays=$(($(find "$ROOT/deploy/overlays" -mindepth 1 -maxdepth 1 -type d | wc -l) + 1))
	run -0 "$ROOT/scripts/check-deploy.sh"
	assert_output --partial "$overlays overlays render, validate, pass the hardening rules, and their limits fit"
	assert_output --partial "every fixture fails as it should"
}

@test "deploy: port 8888 (one tenant's workspace) is served and exposed by the agent-sandbox overlay only" {
	local dir name out="$BATS_TEST_TMPDIR"
	for dir in "$ROOT/deploy/base" "$ROOT"/deploy/overlays/*; do
		name=$(basename "$dir")
		kubectl kustomize "$dir" >"$out/$name.yaml"
		if [[ $name == agent-sandbox ]]; then
			# nginx declares 8888 and both containers turn it on
			run -0 grep -A1 'name: CODEBOX_AGENT_PORT$' "$out/$name.yaml"
			assert_equal "$(grep -c 'value: "on"' <<<"$output")" 2
			run -0 grep -E 'containerPort: 8888$' "$out/$name.yaml"
		else
			# neither served (both containers say off) nor named anywhere: no containerPort,
			# probe, Service or NetworkPolicy port
			run -0 grep -A1 'name: CODEBOX_AGENT_PORT$' "$out/$name.yaml"
			assert_equal "$(grep -c 'value: "off"' <<<"$output")" 2
			refute_output --partial '"on"'
			run -1 grep -n 8888 "$out/$name.yaml"
		fi
	done
	# the hardening check says so when the agent-sandbox overlay's pod is checked as any other
	node "$ROOT/deploy/checks/agent-sandbox.mjs" "$out/agent-sandbox.yaml" "$out/derived.yaml"
	run -1 node "$ROOT/deploy/checks/hardening.mjs" "$out/derived.yaml"
	assert_output --partial "containerPort 8888: port 8888 serves one tenant's workspace: only the agent-sandbox overlay may serve or expose it"
	assert_output --partial "NetworkPolicy codebox-network-policy: ingress to port 8888"
	run -0 node "$ROOT/deploy/checks/hardening.mjs" --agent-sandbox "$out/derived.yaml"
	# and an overlay of the base that exposes 8888 is refused (check-deploy's fixtures hold
	# one per way: env, containerPort, Service, NetworkPolicy)
	cat >"$out/exposes.yaml" <<'YAML'
apiVersion: v1
kind: Service
metadata:
  name: codebox-agent
  namespace: codebox
spec:
  selector:
    app.kubernetes.io/name: codebox
  ports:
    - name: agent
      port: 80
      targetPort: 8888
YAML
	run -1 node "$ROOT/deploy/checks/hardening.mjs" "$out/kind.yaml" "$out/exposes.yaml"
	assert_output "hardening: Service codebox-agent: port 80 (target 8888): port 8888 serves one tenant's workspace: only the agent-sandbox overlay may serve or expose it"
}

@test "deploy: every rendered pod names the image with a registry and the release tag, set in deploy/image alone" {
	local dir name out="$BATS_TEST_TMPDIR" version copy="$BATS_TEST_TMPDIR/repo"
	version=$(cat "$ROOT/VERSION")
	# as shipped: localhost/codebox (podman's name for make image's build), never a bare
	# codebox (docker.io/library/codebox:latest), never :dev or :latest
	for dir in "$ROOT/deploy/base" "$ROOT"/deploy/overlays/*; do
		name=$(basename "$dir")
		kubectl kustomize "$dir" >"$out/$name.yaml"
		# (the scale overlay's router is the official nginx image, pinned: not codebox's)
		run -0 grep -E '^ +image: ' "$out/$name.yaml"
		assert_equal "$(sort -u <<<"$output" | sed 's/^ *//' | grep -v '^image: docker.io/library/nginx:1\.28\.0$')" \
			"image: localhost/codebox:$version"
	done
	# one edit of deploy/image names every overlay's image
	mkdir -p "$copy"
	tar -C "$ROOT" --exclude=node_modules --exclude=.out --exclude=bin -c deploy VERSION | tar -x -C "$copy"
	sed -i 's|newName: localhost/codebox|newName: registry.example.com/team/codebox|' \
		"$copy/deploy/image/kustomization.yaml"
	for dir in "$copy/deploy/base" "$copy"/deploy/overlays/*; do
		run -0 kubectl kustomize "$dir"
		assert_equal "$(grep -E '^ +image: ' <<<"$output" | sort -u | sed 's/^ *//' |
			grep -v '^image: docker.io/library/nginx:1\.28\.0$')" \
			"image: registry.example.com/team/codebox:$version"
	done
	# and the check refuses an image without a tag, with latest, or without a registry
	local bad
	for bad in "codebox|has no tag, which pulls :latest" "localhost/codebox:latest|moving tag latest" \
		"codebox:$version|names no registry" "localhost/codebox:dev|must be tagged with the release"; do
		sed "s|image: localhost/codebox:$version|image: ${bad%%|*}|" "$out/base.yaml" >"$out/bad.yaml"
		run -1 node "$ROOT/deploy/checks/podfacts.mjs" "$out/bad.yaml" "$out/limits" "$version"
		assert_output --partial "${bad#*|}"
	done
}

@test "deploy: shipped NetworkPolicies admit chosen clients only, never every pod; the agent sandbox only the router" {
	local out="$BATS_TEST_TMPDIR"
	kubectl kustomize "$ROOT/deploy/base" >"$out/base.yaml"
	# the base: 8080 from the namespaces labelled codebox.dev/client=true, the label alone
	# (kustomize adds no app label to it), and no pod label: a tenant can label its own pods,
	# not its namespace
	run -0 yq_policy "$out/base.yaml" codebox
	assert_output '[{"namespaceSelector":{"matchLabels":{"codebox.dev/client":"true"}}}]'
	# the agent sandbox: only app: sandbox-router, in its own namespace
	kubectl kustomize "$ROOT/deploy/overlays/agent-sandbox" >"$out/as.yaml"
	node "$ROOT/deploy/checks/agent-sandbox.mjs" "$out/as.yaml" "$out/as-derived.yaml"
	run -0 yq_policy "$out/as-derived.yaml" codebox-network-policy
	assert_output '[{"podSelector":{"matchLabels":{"app":"sandbox-router"}}}]'
	run -0 node "$ROOT/deploy/checks/hardening.mjs" "$out/base.yaml"
	run -0 node "$ROOT/deploy/checks/hardening.mjs" --agent-sandbox "$out/as-derived.yaml"
	# the policies as they were (8080 from anyone) are refused, in both
	node -e '
		const fs = require("fs"), Y = require(process.argv[1]);
		for (const [f, name] of [[process.argv[2], "codebox"], [process.argv[3], "codebox-network-policy"]]) {
			const docs = Y.parseAllDocuments(fs.readFileSync(f, "utf8")).map((d) => d.toJS());
			for (const r of docs.find((d) => d.kind === "NetworkPolicy" && d.metadata.name === name).spec.ingress) delete r.from;
			fs.writeFileSync(f + ".open", docs.map((d) => Y.stringify(d)).join("---\n"));
		}' "$ROOT/deploy/checks/node_modules/yaml" "$out/base.yaml" "$out/as-derived.yaml"
	run -1 node "$ROOT/deploy/checks/hardening.mjs" "$out/base.yaml.open"
	assert_output "hardening: NetworkPolicy codebox: ingress rule 1 has no from: it admits every pod and address"
	run -1 node "$ROOT/deploy/checks/hardening.mjs" --agent-sandbox "$out/as-derived.yaml.open"
	assert_output "hardening: NetworkPolicy codebox-network-policy: ingress rule 1 has no from: it admits every pod and address"
	# and the base's policy before issue 28 (a pod label, in any namespace) is refused
	sed 's|^    - namespaceSelector:$|    - namespaceSelector: {}\n      podSelector:|' "$out/base.yaml" >"$out/base.yaml.podlabel"
	run -1 node "$ROOT/deploy/checks/hardening.mjs" "$out/base.yaml.podlabel"
	assert_output --partial "hardening: NetworkPolicy codebox: ingress rule 1 admits a pod label in every namespace"
}

@test "deploy: the agent-sandbox overlay matches the pinned CRDs' storage version and its pod is checked like the Deployment's" {
	local out="$BATS_TEST_TMPDIR" checks="$BATS_TEST_TMPDIR/checks" version
	version=$(cat "$ROOT/VERSION")
	kubectl kustomize "$ROOT/deploy/overlays/agent-sandbox" >"$out/as.yaml"
	run -0 node "$ROOT/deploy/checks/agent-sandbox.mjs" "$out/as.yaml" "$out/derived.yaml"
	assert_output --partial "2 objects match the pinned CRDs' storage versions"
	run -0 grep -c '^apiVersion: extensions.agents.x-k8s.io/v1beta1$' "$out/as.yaml"
	assert_output 2
	# the deprecated v1alpha1 (what the overlay used) is refused with the CRD's own warning
	sed 's|extensions.agents.x-k8s.io/v1beta1|extensions.agents.x-k8s.io/v1alpha1|' "$out/as.yaml" >"$out/old.yaml"
	run -1 node "$ROOT/deploy/checks/agent-sandbox.mjs" "$out/old.yaml" "$out/old-derived.yaml"
	assert_line "agent-sandbox: SandboxTemplate codebox: extensions.agents.x-k8s.io/v1alpha1 is deprecated: extensions.agents.x-k8s.io/v1alpha1 SandboxTemplate is deprecated; use extensions.agents.x-k8s.io/v1beta1 SandboxTemplate instead"
	# fields of the real CRD that the hand-written schema refused are accepted; a typo is not
	sed 's|^  networkPolicyManagement: Managed$|  networkPolicyManagement: Managed\n  envVarsInjectionPolicy: Disallowed|' \
		"$out/as.yaml" >"$out/env.yaml"
	run -0 node "$ROOT/deploy/checks/agent-sandbox.mjs" "$out/env.yaml" "$out/env-derived.yaml"
	sed 's|^  service: true$|  servce: true|' "$out/as.yaml" >"$out/typo.yaml"
	run -1 node "$ROOT/deploy/checks/agent-sandbox.mjs" "$out/typo.yaml" "$out/typo-derived.yaml"
	assert_output "agent-sandbox: SandboxTemplate codebox: spec.servce: is not a field of the CRD's schema (the API server would drop it)"
	# a vendored CRD that is not the pinned one is refused before anything is checked
	# (not make image-test's scratch, which it makes and removes meanwhile in CI)
	mkdir -p "$checks"
	tar -C "$ROOT/deploy/checks" --exclude=./node_modules --exclude=./.image-test -cf - . |
		tar -C "$checks" -xf -
	ln -s "$ROOT/deploy/checks/node_modules" "$checks/node_modules"
	sed -i 's/- Recreate/- Rebuild/' "$checks/crds/agent-sandbox/sandboxwarmpools.yaml"
	run -1 node "$checks/agent-sandbox.mjs" "$out/as.yaml" "$out/x.yaml"
	assert_output --partial "crds/agent-sandbox/sandboxwarmpools.yaml does not match its pinned sha256"
	# the controller's pod: its limits ConfigMap (4 runs), memory, grace and storage, as the
	# Deployment's; without the ConfigMap (the pool then needs the image's 22016 MiB) refused
	run -0 node "$ROOT/deploy/checks/podfacts.mjs" "$out/derived.yaml" "$out/limits" "$version"
	assert_output "$((6 << 30)) 60 0 $((512 << 20)) $((896 << 20)) $((832 << 20)) 268435456 2000"
	run -0 cat "$out/limits/CODEBOX_MAX_CONCURRENT_EXECUTIONS"
	assert_output 4
	grep -v -e 'mountPath: /etc/codebox/limits' "$out/derived.yaml" >"$out/nolimits.yaml"
	run -1 node "$ROOT/deploy/checks/podfacts.mjs" "$out/nolimits.yaml" "$out/limits2" "$version"
	assert_output "podfacts: the pool container mounts no ConfigMap at /etc/codebox/limits"
	run -0 node "$ROOT/deploy/checks/hardening.mjs" --agent-sandbox "$out/derived.yaml"
}

@test "deploy: the image's nginx config listens on 8888 only with CODEBOX_AGENT_PORT=on; 8080 is the same either way" {
	local conf="$BATS_TEST_TMPDIR" lim="$BATS_TEST_TMPDIR/limits" f
	# codebox-config as the image runs it, on this checkout's config and scripts
	cfg() {
		CODEBOX_NGINX_CONF_DIR="$ROOT/nginx" CODEBOX_LIB_DIR="$ROOT/scripts" \
			CODEBOX_LIMITS_DIR="$lim" "$ROOT/image/codebox-config" "$@"
	}
	# port_8080 FILE: the server block of port 8080
	port_8080() {
		awk '/^    server \{/ { s = "" } { s = s $0 "\n" } /listen .*:8080 / { f = 1 }
			f && /^    \}/ { printf "%s", s; exit }' "$1"
	}
	# no limits mounted: off by default (and when said), rendered without the agent server
	for f in "" off; do
		CODEBOX_AGENT_PORT=$f run -0 cfg "$conf/off"
		assert_line "$conf/off/nginx.conf"
		assert_line --partial "the agent port (8888) is off"
		run -1 grep -nE '^ *(listen .*8888|server_name +codebox-agent;|limit_conn codebox_agent)' "$conf/off/nginx.conf"
	done
	run -0 "$ROOT/scripts/check-config.sh" --print-workers "$conf/off/nginx.conf"
	assert_output 28 # 20 execution slots + 4 meta + 4 streams: no agent workers
	# (the image's own config as it is, where nothing is to change: the playground on too)
	CODEBOX_AGENT_PORT=on CODEBOX_PLAYGROUND=on run -0 cfg "$conf/on"
	assert_output "$ROOT/nginx/nginx.conf"
	run -0 "$ROOT/scripts/check-config.sh" --print-workers "$ROOT/nginx/nginx.conf"
	assert_output 32 # and 4 for port 8888
	assert_equal "$(port_8080 "$conf/off/nginx.conf")" "$(port_8080 "$ROOT/nginx/nginx.conf")"
	[[ -n $(port_8080 "$ROOT/nginx/nginx.conf") ]]
	# limits mounted: rendered either way, with or without the agent server
	mkdir -p "$lim"
	printf 8 >"$lim/CODEBOX_MAX_CONCURRENT_EXECUTIONS"
	CODEBOX_AGENT_PORT=on run -0 cfg "$conf/on-limits"
	assert_line "$conf/on-limits/nginx.conf"
	run -0 grep -cE 'listen +127\.0\.0\.1:8888; # codebox-agent-listen' "$conf/on-limits/nginx.conf"
	run -0 cfg "$conf/off-limits"
	assert_line "$conf/off-limits/nginx.conf"
	run -1 grep -n 'codebox-agent-listen' "$conf/off-limits/nginx.conf"
	run -0 "$ROOT/scripts/check-config.sh" --print-workers "$conf/off-limits/nginx.conf"
	assert_output 16
	assert_equal "$(port_8080 "$conf/off-limits/nginx.conf")" "$(port_8080 "$conf/on-limits/nginx.conf")"
	# anything but on or off is refused
	CODEBOX_AGENT_PORT=yes run -1 cfg "$conf/bad"
	assert_output "codebox-config: CODEBOX_AGENT_PORT must be on or off, not 'yes'"
}

@test "deploy: the image's playground is off unless CODEBOX_PLAYGROUND=on (its include file a comment)" {
	local conf="$BATS_TEST_TMPDIR" f
	cfg() {
		CODEBOX_NGINX_CONF_DIR="$ROOT/nginx" CODEBOX_LIB_DIR="$ROOT/scripts" \
			CODEBOX_LIMITS_DIR="$BATS_TEST_TMPDIR/none" "$ROOT/image/codebox-config" "$@"
	}
	for f in "" off; do
		CODEBOX_PLAYGROUND=$f run -0 cfg "$conf/off"
		assert_line "$conf/off/nginx.conf"
		run -0 cat "$conf/off/codebox-playground.conf"
		assert_output '# the playground is off (CODEBOX_PLAYGROUND=on in the nginx container: on)'
	done
	CODEBOX_PLAYGROUND=on run -0 cfg "$conf/on"
	assert_line "$conf/on/nginx.conf"
	assert_line 'codebox: the playground is on at / (CODEBOX_PLAYGROUND=on)'
	cmp "$ROOT/nginx/codebox-playground.conf" "$conf/on/codebox-playground.conf"
	run -0 grep -c '^\s*include codebox-playground.conf;' "$conf/on/nginx.conf"
	assert_output 1
	CODEBOX_PLAYGROUND=yes run -1 cfg "$conf/bad"
	assert_output "codebox-config: CODEBOX_PLAYGROUND must be on or off, not 'yes'"
	# the image serves its own copy of the files (image/Dockerfile rewrites the root)
	run -0 grep -c "^COPY nginx/playground/ /usr/share/codebox/playground/$" "$ROOT/image/Dockerfile"
	run -0 grep -c "root.*playground;|.*/usr/share/codebox/playground;" "$ROOT/image/Dockerfile"
}

@test "deploy: kind-up that fails partway leaves the current kubectl context as it was" {
	local bin="$BATS_TEST_TMPDIR/bin"
	mkdir -p "$bin"
	export KUBECONFIG="$BATS_TEST_TMPDIR/kubeconfig"
	kubectl config set-cluster mine --server=https://127.0.0.1:1 >/dev/null
	kubectl config set-context mine --cluster=mine >/dev/null
	kubectl config use-context mine >/dev/null
	# a kind that, like the real one, switches the context when it creates a cluster, and then
	# fails
	cat >"$bin/kind" <<'KIND'
#!/usr/bin/env bash
case "$1 $2" in
"get clusters") exit 0 ;;
"create cluster")
	kubectl config set-context kind-codebox --cluster=mine >/dev/null
	kubectl config use-context kind-codebox >/dev/null
	echo "fake kind: failing after switching the context" >&2
	exit 1
	;;
esac
exit 1
KIND
	chmod +x "$bin/kind"
	PATH="$bin:$PATH" run "$ROOT/scripts/kind.sh" up
	assert_failure
	assert_output --partial "failing after switching the context"
	assert_equal "$(kubectl config current-context)" mine
}

@test "deploy: kind-down without a cluster changes nothing and succeeds" {
	export KUBECONFIG="$BATS_TEST_TMPDIR/kubeconfig"
	kubectl config set-cluster mine --server=https://127.0.0.1:1 >/dev/null
	kubectl config set-context mine --cluster=mine >/dev/null
	kubectl config use-context mine >/dev/null
	PATH="/usr/bin:/bin" run -0 "$ROOT/scripts/kind.sh" down
	assert_equal "$(kubectl config current-context)" mine
}

@test "deploy: kind-up and kind-test without kind say how to install it" {
	local bin="$BATS_TEST_TMPDIR/bin" target
	mkdir -p "$bin"
	# everything of the PATH but kind
	for target in bash cat tr grep dirname basename mkdir kubectl; do
		ln -s "$(command -v "$target")" "$bin/$target"
	done
	export KUBECONFIG="$BATS_TEST_TMPDIR/kubeconfig"
	for target in up test; do
		PATH="$bin" run -1 "$ROOT/scripts/kind.sh" "$target"
		assert_output --partial "kind-$target: kind is not installed. Install kind v0.24 or later"
		assert_output --partial "quick-start/#installation"
	done
}

@test "deploy: kind-test refuses to run without the kind cluster or kind-up's port-forward, testing nothing" {
	local bin="$BATS_TEST_TMPDIR/bin"
	mkdir -p "$bin"
	# a kind that knows no cluster
	printf '#!/usr/bin/env bash\nexit 0\n' >"$bin/kind"
	chmod +x "$bin/kind"
	export KUBECONFIG="$BATS_TEST_TMPDIR/kubeconfig"
	PATH="$bin:$PATH" run -1 "$ROOT/scripts/kind.sh" test
	assert_output --partial 'there is no kind cluster "codebox": run make kind-up first'
	refute_output --partial "1.."
	# a cluster, but no port-forward of make kind-up's
	printf '#!/usr/bin/env bash\n[[ "$1 $2" == "get clusters" ]] && echo codebox\nexit 0\n' >"$bin/kind"
	PATH="$bin:$PATH" run -1 "$ROOT/scripts/kind.sh" test
	assert_output --partial "port-forward to the cluster is not running"
}

@test "deploy: the pod's limits ConfigMap is rendered into nginx's config and checked; a bad one is refused" {
	local lim="$BATS_TEST_TMPDIR/limits" out
	mkdir -p "$lim"
	printf 8 >"$lim/CODEBOX_MAX_CONCURRENT_EXECUTIONS"
	printf '60\n' >"$lim/CODEBOX_EXECUTION_TIMEOUT_SECONDS"
	printf 536870912 >"$lim/CODEBOX_MEMORY_BYTES"
	out="$BATS_TEST_TMPDIR/conf"
	run -0 "$ROOT/scripts/render-limits.sh" --from "$lim" --conf-dir "$ROOT/nginx" --out "$out"
	run -0 grep -E 'limit_conn codebox_execute 8;' "$out/nginx.conf"
	run -0 grep -E 'fastcgi_read_timeout +75s;' "$out/nginx.conf"
	run -0 grep -E 'CODEBOX_EXECUTION_TIMEOUT_SECONDS +60;' "$out/codebox-limits.conf"
	# 8 runs of 512 MiB + 64 MiB and the pool's 256 MiB: 4864 MiB; 8 + 4 meta + 4 agent + 4
	# streams workers
	run -0 "$ROOT/scripts/check-config.sh" --memory-limit $((4864 << 20)) --print-workers \
		--print-drain-seconds "$out/nginx.conf"
	assert_output $'20\n76'
	run -1 "$ROOT/scripts/check-config.sh" --memory-limit $((4863 << 20)) "$out/nginx.conf"
	assert_output --partial "need 4864 MiB, more than the memory limit of 4863 MiB"
	# a misspelled key, a value that is no number
	printf 1 >"$lim/CODEBOX_MEMORY_BYTE"
	run -1 "$ROOT/scripts/render-limits.sh" --from "$lim" --conf-dir "$ROOT/nginx" --out "$out"
	assert_output --partial "unknown key CODEBOX_MEMORY_BYTE"
	rm "$lim/CODEBOX_MEMORY_BYTE"
	printf 1g >"$lim/CODEBOX_MEMORY_BYTES"
	run -1 "$ROOT/scripts/render-limits.sh" --from "$lim" --conf-dir "$ROOT/nginx" --out "$out"
	assert_output --partial "CODEBOX_MEMORY_BYTES must be a positive integer, not '1g'"
}

@test "deploy: the pool's probe answers 0 when a worker answers on the socket, 1 when none does" {
	stack_start
	run -0 "$ROOT/image/codebox-probe" "$STACK_DIR/fcgi.sock"
	assert_output "codebox-probe: ready"
	run -1 "$ROOT/image/codebox-probe" "$STACK_DIR/no-such.sock"
	assert_output --partial "no worker answered on $STACK_DIR/no-such.sock"
	stack_stop
}

@test "deploy: .ci/run stops at the first failing stage and its last line names it" {
	local repo="$BATS_TEST_TMPDIR/repo" bin="$BATS_TEST_TMPDIR/bin"
	mkdir -p "$repo/.ci" "$repo/scripts" "$bin"
	cp "$ROOT/.ci/run" "$repo/.ci/run"
	printf '#!/usr/bin/env bash\necho "ok 1 deps"\n' >"$repo/scripts/install-deps.sh"
	# make test passes with TAP output; make image fails
	cat >"$bin/make" <<'MAKE'
#!/usr/bin/env bash
case $1 in
test) printf 'ok 1 a\nok 2 b\n' ;;
image) echo "building"; exit 2 ;;
*) echo "image-test must not run" ;;
esac
MAKE
	chmod +x "$bin/make" "$repo/scripts/install-deps.sh"
	PATH="$bin:$PATH" run -2 bash "$repo/.ci/run"
	assert_equal "${lines[-1]}" "ci: FAILED at stage 'make image' (exit 2)"
	refute_output --partial "image-test must not run"
	refute_output --regexp '^tests: '
	# and all passing: the last line is the count
	sed -i 's/exit 2/true/' "$bin/make"
	PATH="$bin:$PATH" run -0 bash "$repo/.ci/run"
	assert_equal "${lines[-1]}" "tests: 3 passed, 0 failed"
	# the pod's test, run once the image is built, failing names it
	sed -i 's/^\*) echo "image-test must not run" ;;$/*) echo "the pod failed"; exit 3 ;;/' "$bin/make"
	PATH="$bin:$PATH" run -3 bash "$repo/.ci/run"
	assert_equal "${lines[-1]}" "ci: FAILED at stage 'make image-test' (exit 3)"
	assert_output --partial "the pod failed"
	# and the stages' shell killed during the pod's test names that stage too
	sed -i 's/^\*) echo "the pod failed"; exit 3 ;;$/*) kill -KILL "$PPID"; sleep 5 ;;/' "$bin/make"
	PATH="$bin:$PATH" run -137 bash "$repo/.ci/run"
	assert_equal "${lines[-1]}" "ci: FAILED at stage 'make image-test' (exit 137)"
	# make test failing names make test, and the image built meanwhile is stopped, not left
	cat >"$bin/make" <<MAKE
#!/usr/bin/env bash
case \$1 in
test) # fails once the image build is under way (bounded: 10 s)
	for ((i = 0; i < 200; i++)); do [[ -s "$BATS_TEST_TMPDIR/image.pid" ]] && break; sleep 0.05; done
	echo "not ok 1 a"; exit 2 ;;
image) echo \$\$ >"$BATS_TEST_TMPDIR/image.pid.new"; mv "$BATS_TEST_TMPDIR/image.pid.new" "$BATS_TEST_TMPDIR/image.pid"; exec sleep 60 ;;
*) echo "image-test must not run" ;;
esac
MAKE
	PATH="$bin:$PATH" run -2 bash "$repo/.ci/run"
	assert_equal "${lines[-1]}" "ci: FAILED at stage 'make test' (exit 2)"
	refute_output --partial "image-test must not run"
	[[ -s $BATS_TEST_TMPDIR/image.pid ]]
	refute kill -0 "$(cat "$BATS_TEST_TMPDIR/image.pid")"
}

@test "deploy: install-deps names a command still missing after installing, and its package, in one line" {
	local bin="$BATS_TEST_TMPDIR/bin" c
	mkdir -p "$bin"
	# every command install-deps and the checks need, but wrk
	for c in bash dirname cat uname dpkg-query sha256sum unzip mkdir chmod mv rm cc make pkg-config \
		curl jq shellcheck clang-format yamllint node npm setpriv nsenter pgrep ps realpath \
		cgi-fcgi promtool ss; do
		ln -s "$(type -P "$c")" "$bin/$c"
	done
	PATH="$bin" run -1 "$ROOT/scripts/install-deps.sh"
	assert_output "install-deps: still missing after installing: wrk (package wrk)"
}

@test "deploy: when npm ci fails, install-deps shows npm's own error and says where" {
	local repo="$BATS_TEST_TMPDIR/repo"
	mkdir -p "$repo"
	tar -C "$ROOT" --exclude=node_modules --exclude=.out --exclude=bin -c scripts deploy VERSION |
		tar -x -C "$repo"
	# a registry that refuses at once, and a cache of its own: npm has to fetch, and fails
	npm_config_registry=http://127.0.0.1:9/ npm_config_cache="$BATS_TEST_TMPDIR/cache" \
		npm_config_fetch_retries=0 run -1 "$repo/scripts/install-deps.sh"
	assert_output --partial "npm error code ECONNREFUSED"
	assert_output --partial "install-deps: npm ci failed in $repo/deploy/checks (npm's error is above)"
}

# docs_js FILE EXPR: EXPR (JavaScript, over `docs`, the rendered documents) as compact JSON
docs_js() {
	node -e '
		const fs = require("fs"), Y = require(process.argv[1]);
		const docs = Y.parseAllDocuments(fs.readFileSync(process.argv[2], "utf8")).map((d) => d.toJS()).filter(Boolean);
		console.log(JSON.stringify(eval(process.argv[3])));' \
		"$ROOT/deploy/checks/node_modules/yaml" "$1" "$2"
}

@test "deploy: /metrics is on its own port: the clients' Service does not expose it; the monitoring overlay scrapes it from the monitoring namespace" {
	local out="$BATS_TEST_TMPDIR"
	kubectl kustomize "$ROOT/deploy/base" >"$out/base.yaml"
	run -0 docs_js "$out/base.yaml" 'docs.filter((d) => d.kind === "Service").flatMap((d) => d.spec.ports.map((p) => p.port))'
	assert_output "[8080]"
	kubectl kustomize "$ROOT/deploy/overlays/monitoring" >"$out/mon.yaml"
	run -0 docs_js "$out/mon.yaml" 'docs.filter((d) => d.kind === "ServiceMonitor").flatMap((d) => d.spec.endpoints.map((e) => e.port))'
	assert_output '["metrics"]'
	run -0 docs_js "$out/mon.yaml" 'docs.filter((d) => d.kind === "Service" && d.metadata.name === "codebox-metrics").flatMap((d) => d.spec.ports.map((p) => [p.port, p.targetPort]))'
	assert_output '[[9090,"metrics"]]'
	run -0 docs_js "$out/mon.yaml" 'docs.filter((d) => d.kind === "NetworkPolicy" && d.metadata.name === "codebox-metrics").flatMap((d) => d.spec.ingress.map((r) => [r.from, r.ports]))'
	assert_output '[[[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}],[{"port":9090,"protocol":"TCP"}]]]'
	run -0 docs_js "$out/mon.yaml" 'docs.filter((d) => d.kind === "Deployment").map((d) => d.spec.template.metadata.annotations["prometheus.io/port"])'
	assert_output '["9090"]'
}

@test "deploy: the monitoring overlay's alerts: an alert without its runbook section or its tests, or a threshold its tests do not expect, fails" {
	local out="$BATS_TEST_TMPDIR" mon="$ROOT/deploy/overlays/monitoring"
	kubectl kustomize "$mon" >"$out/mon.yaml"
	mkdir "$out/ok" "$out/bad"
	run -0 node "$ROOT/deploy/checks/rules.mjs" "$out/mon.yaml" "$mon/rules-test.yaml" "$ROOT/docs/OPERATIONS.md" "$out/ok"
	assert_output --regexp '^rules: [0-9]+ alerts, each with its runbook and tests; a dashboard of [0-9]+ panels$'
	cp "$mon/rules-test.yaml" "$out/ok/"
	run -0 promtool test rules "$out/ok/rules-test.yaml"
	# a runbook that is no section of OPERATIONS.md
	sed 's|OPERATIONS.md#codeboxzygotedying|OPERATIONS.md#codeboxzygotedies|' "$out/mon.yaml" >"$out/bad.yaml"
	run -1 node "$ROOT/deploy/checks/rules.mjs" "$out/bad.yaml" "$mon/rules-test.yaml" "$ROOT/docs/OPERATIONS.md" "$out/bad"
	assert_output --partial "CodeboxZygoteDying: runbook_url: docs/OPERATIONS.md has no section #codeboxzygotedies"
	# an alert the tests never see (renamed: the old name's tests then test no alert)
	sed 's|alert: CodeboxZygoteDying$|alert: CodeboxZygotesDying|' "$out/mon.yaml" >"$out/bad.yaml"
	run -1 node "$ROOT/deploy/checks/rules.mjs" "$out/bad.yaml" "$mon/rules-test.yaml" "$ROOT/docs/OPERATIONS.md" "$out/bad"
	assert_output --partial "CodeboxZygotesDying: $mon/rules-test.yaml never sees it fire"
	assert_output --partial "tests CodeboxZygoteDying, which is no alert"
	# a threshold lowered: the calm pod's 5 sessions of 10 now fire, which the tests say must not
	sed 's|codebox_sessions_open / (codebox_sessions_max > 0) >= 0.9|codebox_sessions_open / (codebox_sessions_max > 0) >= 0.5|' \
		"$out/mon.yaml" >"$out/bad.yaml"
	run -0 node "$ROOT/deploy/checks/rules.mjs" "$out/bad.yaml" "$mon/rules-test.yaml" "$ROOT/docs/OPERATIONS.md" "$out/bad"
	cp "$mon/rules-test.yaml" "$out/bad/"
	run -1 promtool test rules "$out/bad/rules-test.yaml"
	assert_output --partial "alertname: CodeboxSessionsNearBound"
}

@test "deploy: bearer tokens: the auth component mounts the Secret in nginx's container alone, and the image turns them on from it" {
	local out="$BATS_TEST_TMPDIR" d="$BATS_TEST_TMPDIR/deploy/overlays/with-auth"
	# an overlay of the user's: the base with the component
	mkdir -p "$d"
	cp -r "$ROOT/deploy/base" "$ROOT/deploy/auth" "$ROOT/deploy/image" "$BATS_TEST_TMPDIR/deploy/"
	printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../base\ncomponents:\n  - ../../auth\n' >"$d/kustomization.yaml"
	kubectl kustomize "$d" >"$out/auth.yaml"
	run -0 docs_js "$out/auth.yaml" 'docs.filter((d) => d.kind === "Deployment").flatMap((d) => d.spec.template.spec.containers.map((c) => [c.name, (c.env ?? []).filter((e) => e.name === "CODEBOX_AUTH_TOKENS").map((e) => e.value), (c.volumeMounts ?? []).filter((m) => m.name === "tokens").map((m) => m.readOnly)]))'
	assert_output '[["nginx",["/etc/codebox/tokens/tokens"],[true]],["pool",[],[]]]'
	run -0 node "$ROOT/deploy/checks/hardening.mjs" "$out/auth.yaml"
	# the image's config step: the directive from the file; a named file that is missing refuses
	printf '%s\n' codebox-token-0123456789abcdef >"$out/tokens"
	CODEBOX_NGINX_CONF_DIR="$ROOT/nginx" CODEBOX_LIB_DIR="$ROOT/scripts" CODEBOX_LIMITS_DIR="$out/none" \
		CODEBOX_AUTH_TOKENS="$out/tokens" run -0 "$ROOT/image/codebox-config" "$out/conf"
	run -0 cat "$out/conf/codebox-auth.conf"
	assert_output "codebox_auth_tokens $out/tokens;"
	CODEBOX_NGINX_CONF_DIR="$ROOT/nginx" CODEBOX_LIB_DIR="$ROOT/scripts" CODEBOX_LIMITS_DIR="$out/none" \
		CODEBOX_AUTH_TOKENS="$out/missing" run -1 "$ROOT/image/codebox-config" "$out/conf2"
	assert_output --partial "CODEBOX_AUTH_TOKENS names $out/missing, which cannot be read"
}
