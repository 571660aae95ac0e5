#!/usr/bin/env bash
# Writes deploy/seccomp/codebox.json: a runtime's default seccomp profile (the one Debian's
# containers-common ships for podman and CRI-O) plus one rule naming exactly what the sandbox
# calls to build each run: clone() with namespace flags, mount(), umount2(), pivot_root(),
# sethostname() and the Landlock calls. containerd's default (kind) denies the first five to a
# pod without CAP_SYS_ADMIN; with this profile, runs get their namespaces inside the pod.
# --check compares instead of writing (used by the offline deploy checks).
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
src=/usr/share/containers/seccomp.json
out="$here/deploy/seccomp/codebox.json"
[[ -f $src ]] || {
	echo "gen-seccomp-profile: $src is missing (apt-get install golang-github-containers-common)" >&2
	exit 1
}
new=$(jq --sort-keys '.syscalls += [{
	"names": ["clone", "mount", "umount2", "pivot_root", "sethostname",
		  "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"],
	"action": "SCMP_ACT_ALLOW",
	"comment": "codebox: build each run'"'"'s user, pid, net, mount, ipc and uts namespaces, its new root and its Landlock domain"
}]' "$src")
if ((check)); then
	if ! diff -q <(echo "$new") "$out" >/dev/null; then
		echo "gen-seccomp-profile: $out is stale; run scripts/gen-seccomp-profile.sh" >&2
		exit 1
	fi
	exit 0
fi
echo "$new" >"$out"
