#!/usr/bin/env bash
# Builds the image's base, debian:bookworm-slim's equivalent, without a registry:
# debootstrap --variant=minbase from the Debian mirror this machine's apt already uses, then
# podman import. Idempotent: an existing image of that name is kept unless --force.
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

if ((!force)) && podman image exists "$tag"; then
	echo "build-base: $tag exists"
	exit 0
fi

# The mirror apt already uses (deb822 sources or the classic list), never a hard-coded one.
mirror=""
if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
	mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources)
fi
if [[ -z $mirror && -f /etc/apt/sources.list ]]; then
	mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm/ { print $2; exit }' /etc/apt/sources.list)
fi
[[ -n $mirror ]] || {
	echo "build-base: no Debian mirror found in the apt sources" >&2
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
# slim, like debian:bookworm-slim: no apt lists or caches in the base
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
tar -C "$root" --numeric-owner -c . | podman import --change 'CMD ["/bin/bash"]' - "$tag"
echo "build-base: imported $tag" >&2
