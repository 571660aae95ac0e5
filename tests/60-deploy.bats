#!/usr/bin/env bats
# Deployment tooling that needs no cluster: the offline manifest checks, and the promise that
# the kind targets never change the current kubectl context, even when a step fails.

load helpers/stack

@test "deploy: the manifests render, validate and pass the hardening rules; broken fixtures fail" {
	run -0 "$ROOT/scripts/check-deploy.sh"
	assert_output --partial "6 overlays render, validate and pass the hardening rules"
	assert_output --partial "every fixture fails as it should"
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
