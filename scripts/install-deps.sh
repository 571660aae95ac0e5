#!/usr/bin/env bash
# Install the Debian packages codebox needs to build, run and test.
# Idempotent: when everything is present it only runs dpkg-query and exits.
set -euo pipefail

usage() {
	echo "usage: $0 [--help]"
	echo "Installs codebox's build, runtime and test dependencies from Debian's archive."
}
if [[ ${1:-} == --help || ${1:-} == -h ]]; then
	usage
	exit 0
fi

packages=(
	# build
	gcc make pkg-config libfcgi-dev libjansson-dev libseccomp-dev
	# runtime: HTTP front end and the sandbox's interpreter with its modules
	nginx-light python3 python3-numpy python3-pandas python3-scipy python3-sympy python3-sklearn
	# tests and checks
	bats bats-assert bats-support curl jq shellcheck clang-format
	# benchmarks
	wrk
)

missing=()
for p in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[[ $status == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]} == 0)); then
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
