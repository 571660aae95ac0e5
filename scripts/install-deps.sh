#!/usr/bin/env bash
# Install the Debian packages codebox needs to build, run and test.
# Idempotent: when everything is present it only runs dpkg-query and exits.
set -euo pipefail

usage() {
	echo "usage: $0 [--image] [--help]"
	echo "Installs codebox's build, runtime and test dependencies from Debian's archive, and"
	echo "the npm packages of the offline deploy checks. --image adds what building and"
	echo "running the container image without a Docker engine takes (podman, buildah, ...)."
}
image=0
case ${1:-} in
--help | -h)
	usage
	exit 0
	;;
--image) image=1 ;;
esac

packages=(
	# build
	gcc make pkg-config libfcgi-dev libjansson-dev libseccomp-dev libpython3.11-dev
	# runtime: HTTP front end and the sandbox's interpreter with its modules
	nginx-light python3 python3-numpy python3-pandas python3-scipy python3-sympy python3-sklearn
	# tests and checks
	bats bats-assert bats-support curl jq shellcheck clang-format
	# the agent protocol suite speaks through requests, as the agent-sandbox client does;
	# promtool (package prometheus) parses /metrics
	python3-requests prometheus
	# benchmarks
	wrk
	# offline deploy checks: yamllint; the runtime default seccomp profile codebox extends
	yamllint golang-github-containers-common
)
# node and npm for the deploy checks, where the machine has none of its own
command -v node >/dev/null || packages+=(nodejs)
command -v npm >/dev/null || packages+=(npm)
# kubectl (for kustomize), where the machine has none of its own
command -v kubectl >/dev/null || packages+=(kubernetes-client)
if ((image)); then
	packages+=(podman buildah runc debootstrap uidmap)
fi

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[[ $status == "install ok installed" ]] || missing+=("$p")
done

npm_checks() {
	local dir
	dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/deploy/checks"
	if [[ ! -d $dir/node_modules ]]; then
		(cd "$dir" && npm ci --no-audit --no-fund --silent)
	fi
}

if ((${#missing[@]} == 0)); then
	npm_checks
	exit 0
fi

if ((EUID != 0)); then
	echo "install-deps: missing packages: ${missing[*]}" >&2
	echo "install-deps: run as root (or install them) and retry" >&2
	exit 1
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
npm_checks
