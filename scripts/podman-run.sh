#!/usr/bin/env bash
# Runs codebox's image as the pod of deploy/podman/codebox.yaml (`podman kube play`), in the
# foreground, served on 127.0.0.1:PORT only: waits until GET /readyz answers through that port,
# prints the URL, then shows the pod's logs. It builds nothing (make image, or README.md's
# podman build). Ctrl-C, SIGINT or SIGTERM takes the pod down (`podman stop -t 60` of its two
# containers: the runs in flight are answered first; then `podman kube down`) and removes the
# volume podman made of its limits ConfigMap, which podman 4.3's kube down leaves: nothing of it
# is left. Exits 1 if the pod does not become ready
# or stops by itself, after taking it down.
# The file is played as committed but for the host port and, with --name, the pod's name and
# its emptyDirs' (two pods' emptyDirs of one name are one volume under podman 4.3).
set -euo pipefail

usage() {
	cat <<USAGE
usage: $0 [--port PORT] [--name NAME] [--ready-timeout SECONDS]
  --port PORT      loopback port to publish nginx's 8080 on (default 8080)
  --name NAME      the pod's name (default codebox; its containers are NAME-nginx, NAME-pool)
  --ready-timeout SECONDS
                   how long the pod may take to answer /readyz (default 180: the pool
                   measures the interpreter and probes its layers first)
USAGE
}
port=8080
name=codebox
ready_timeout=180
while (($#)); do
	case $1 in
	--help | -h)
		usage
		exit 0
		;;
	--port | --name | --ready-timeout)
		(($# >= 2)) || {
			usage >&2
			exit 2
		}
		case $1 in
		--port) port=$2 ;;
		--name) name=$2 ;;
		--ready-timeout) ready_timeout=$2 ;;
		esac
		shift 2
		;;
	*)
		usage >&2
		exit 2
		;;
	esac
done
if ! [[ $port =~ ^[0-9]+$ ]] || ((port == 0 || port > 65535)); then
	echo "podman-run: --port must be a port number, not '$port'" >&2
	exit 2
fi
[[ $name =~ ^[a-z0-9]([-a-z0-9]*[a-z0-9])?$ ]] || {
	echo "podman-run: --name must be a DNS label (lower case letters, digits, '-'), not '$name'" >&2
	exit 2
}
if ! [[ $ready_timeout =~ ^[0-9]+$ ]] || ((ready_timeout == 0)); then
	echo "podman-run: --ready-timeout must be a positive number of seconds" >&2
	exit 2
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src="$here/deploy/podman/codebox.yaml"
say() { echo "podman-run: $*"; }
fail() {
	echo "podman-run: $*" >&2
	exit 1
}
command -v podman >/dev/null || fail "podman is missing (scripts/install-deps.sh --image installs it)"
command -v curl >/dev/null || fail "curl is missing"
image=$(awk '$1 == "image:" { print $2; exit }' "$src")
limits=$(awk '$1 == "name:" && $2 ~ /^codebox-limits-/ { print $2; exit }' "$src")
[[ -n $image && -n $limits ]] || fail "$src names no image or no limits ConfigMap"
podman image exists "$image" || fail "no image $image: build it first (make image)"
if podman pod exists "$name"; then
	fail "a pod named $name exists already (podman pod ps): take it down, or --name another"
fi

work=$(mktemp -d)
yaml="$work/$name.yaml"
# the host port, the pod's name and its emptyDirs' names (codebox-*: podman-pod.mjs)
sed -e "s/^\( *hostPort:\) 8080\$/\1 $port/" -e "s/^  name: codebox\$/  name: $name/" \
	-e "s/\(name: \)codebox-\(nginx-tmp\|pool-tmp\|socket\|runs\)\$/\1$name-\2/" "$src" >"$yaml"
[[ $(grep -c "^ *hostPort: $port\$" "$yaml") == 1 && $(grep -c "^  name: $name\$" "$yaml") == 1 ]] ||
	fail "$src has not one hostPort 8080 and one pod named codebox: regenerate it (scripts/gen-podman-pod.sh)"

played=0
logs=""
# down: the pod down and its limits volume removed (if no other pod uses it), once; what
# podman says about the systemd timers of healthchecks on a machine without systemd is dropped
# shellcheck disable=SC2317 # invoked by the trap
down() {
	trap - INT TERM
	if [[ -n $logs ]]; then
		kill "$logs" 2>/dev/null || true
		wait "$logs" 2>/dev/null || true
		logs=""
	fi
	if ((played)); then
		played=0
		say "taking the pod $name down"
		# nginx and the pool stopped first, with the pod's grace period: podman before 4.7
		# ignores terminationGracePeriodSeconds (kube down killed a 15 s run after 8 s:
		# measured, 4.3), and `podman pod stop -t 60` stops the infra container at once, whose
		# network takes the published port's answers with it (the run finished, nginx
		# answered 200, the client got nothing: measured). Stopped so, the runs in flight
		# are answered.
		podman stop -t 60 "$name-nginx" "$name-pool" >/dev/null 2>>"$work/down.err" || true
		podman kube down "$yaml" >/dev/null 2>>"$work/down.err" || true
		grep -v 'unable to get systemd connection' "$work/down.err" >&2 || true
		podman volume rm "$limits" >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap down EXIT
trap 'exit 0' INT TERM

played=1
rc=0
podman kube play "$yaml" >/dev/null 2>"$work/play.err" || rc=$?
grep -v 'unable to get systemd connection' "$work/play.err" >&2 || true
((rc == 0)) || fail "podman kube play failed (exit $rc)"
base="http://127.0.0.1:$port"
for ((i = 0; i < ready_timeout * 5; i++)); do
	[[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$base/readyz" || true) == 200 ]] && break
	sleep 0.2
done
if ((i == ready_timeout * 5)); then
	podman pod logs --names --tail 20 "$name" >&2 || true
	fail "the pod did not answer $base/readyz within $ready_timeout s"
fi
say "codebox is ready at $base/ (pod $name; Ctrl-C takes it down)"
# the runs' own network namespace: the pod has podman's network, a run must not
if ! curl -s --max-time 5 "$base/isolation" | grep -q '"netns": *true'; then
	echo "podman-run: warning: /isolation does not report a network namespace per run: runs may reach the pod's network" >&2
fi
podman pod logs --names --follow "$name" &
logs=$!
wait "$logs" || true
logs=""
if [[ $(podman pod inspect "$name" --format '{{.State}}' 2>/dev/null) == Running ]]; then
	echo "podman-run: podman pod logs stopped following the pod $name" >&2
else
	echo "podman-run: the pod $name stopped by itself" >&2
fi
exit 1
