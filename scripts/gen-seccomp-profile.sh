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
# The names are also taken out of the profile's deny rules: the default denies sethostname
# outright to a container without CAP_SYS_ADMIN, and a deny rule for a call wins over a later
# allow (measured: the UTS namespace stayed off under a profile that only added the allow).
new=$(jq --sort-keys '($codebox) as $names
	| .syscalls |= map(if .action == "SCMP_ACT_ERRNO" then .names -= $names else . end)
	| .syscalls |= map(select((.names | length) > 0))
	| .syscalls += [{
	"names": ["clone", "mount", "umount2", "pivot_root", "sethostname",
		  "landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"],
	"action": "SCMP_ACT_ALLOW",
	"comment": "codebox: build each run'"'"'s user, pid, net, mount, ipc and uts namespaces, its new root and its Landlock domain"
}]' --argjson codebox '["clone", "mount", "umount2", "pivot_root", "sethostname",
	"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self"]' "$src")
if ((check)); then
	if ! diff -q <(echo "$new") "$out" >/dev/null; then
		echo "gen-seccomp-profile: $out is stale; run scripts/gen-seccomp-profile.sh" >&2
		exit 1
	fi
	exit 0
fi
echo "$new" >"$out"
