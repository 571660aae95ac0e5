#!/usr/bin/env bash
# Builds the image's base, debian:bookworm-slim's equivalent, without a registry:
# debootstrap --variant=minbase from the Debian mirror this machine's apt already uses, with
# apt sources for bookworm, bookworm-updates and bookworm-security (the Dockerfile upgrades
# from them), then podman import. Idempotent: an existing image of that name made by this
# version of the script is kept unless --force.
set -euo pipefail

usage() {
	echo "usage: $0 [--force] [--tag NAME]"
	echo "Builds a Debian bookworm minbase image with debootstrap and imports it into podman"
	echo "as NAME (default localhost/codebox-base:bookworm)."
}

tag=localhost/codebox-base:bookworm
force=0
while (($#)); do
	case $1 in
	--help | -h)
		usage
		exit 0
		;;
	--force)
		force=1
		shift
		;;
	--tag)
		tag=${2:?}
		shift 2
		;;
	*)
		usage >&2
		exit 2
		;;
	esac
done

# what the base holds; an older base (bookworm main only) is rebuilt
BASE_VERSION=2
if ((!force)) && podman image exists "$tag" &&
	[[ $(podman image inspect --format '{{index .Labels "org.codebox.base-version"}}' "$tag") == "$BASE_VERSION" ]]; then
	echo "build-base: $tag exists"
	exit 0
fi

# The mirrors apt already uses (deb822 sources or the classic list), never hard-coded ones:
# the archive's, and the security archive's.
# suite_uri SUITE: the URI of the first source that carries SUITE
suite_uri() {
	local f uri=""
	for f in /etc/apt/sources.list.d/*.sources; do
		[[ -f $f ]] || continue
		uri=$(awk -v s="$1" '
			/^$/ { uri = ""; found = 0 }
			/^URIs:/ { uri = $2 }
			/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) found = 1 }
			found && uri != "" { print uri; exit }' "$f")
		[[ -n $uri ]] && break
	done
	if [[ -z $uri ]]; then
		uri=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
			awk -v s="$1" '$1 == "deb" { u = $2; if ($2 ~ /^\[/) u = $3; for (i = 2; i <= NF; i++) if ($i == s) { print u; exit } }')
	fi
	echo "$uri"
}
mirror=$(suite_uri bookworm)
security=$(suite_uri bookworm-security)
[[ -n $mirror ]] || {
	echo "build-base: no source for bookworm in the apt sources" >&2
	exit 1
}
[[ -n $security ]] || {
	echo "build-base: no source for bookworm-security in the apt sources (the base must get security updates)" >&2
	exit 1
}

root=$(mktemp -d /tmp/codebox-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "build-base: debootstrap bookworm from $mirror" >&2
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 || {
	tail -n 20 "$root.log" >&2
	exit 1
}
rm -f "$root.log"
# like debian:bookworm-slim: the release, its updates and the security archive
rm -f "$root/etc/apt/sources.list"
cat >"$root/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
# slim, like debian:bookworm-slim: no apt lists or caches in the base
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
tar -C "$root" --numeric-owner -c . |
	podman import --change 'CMD ["/bin/bash"]' \
		--change "LABEL org.codebox.base-version=$BASE_VERSION" - "$tag"
echo "build-base: imported $tag (sources: $mirror bookworm bookworm-updates, $security bookworm-security)" >&2
