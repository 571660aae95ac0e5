/*
 * isolation.c - probing the host for each isolation layer, and the policy between them.
 *
 * Every layer is probed, not assumed: a pod's seccomp profile may forbid unshare, a kernel
 * may lack Landlock, cgroups are read-only in most containers. What is found is logged at
 * start-up, served on /isolation, and decides the sentences /capabilities may claim. The
 * final word is the start-up probe run (main.c), which goes through the real sandbox and turns
 * off any layer whose set-up step fails.
 */
#include "core/isolation.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *const iso_names[ISO_LAYER_COUNT] = {
    [ISO_USERNS] = "userns",
    [ISO_PIDNS] = "pidns",
    [ISO_NETNS] = "netns",
    [ISO_MOUNTNS] = "mountns",
    [ISO_IPCNS] = "ipcns",
    [ISO_UTSNS] = "utsns",
    [ISO_SECCOMP] = "seccomp",
    [ISO_LANDLOCK] = "landlock",
    [ISO_CGROUP] = "cgroup",
    [ISO_CGROUPNS] = "cgroupns",
    [ISO_MASKEDPATHS] = "maskedpaths",
    [ISO_POOLMEMORY] = "poolmemory",
    [ISO_CPUQUOTA] = "cpuquota",
};

const char *
iso_layer_name(enum iso_layer layer)
{
	return (unsigned)layer < ISO_LAYER_COUNT ? iso_names[layer] : NULL;
}

int
iso_parse_list(const char *list, bool set[ISO_LAYER_COUNT], char *why, size_t why_len)
{
	char word[32];
	const char *p = list;

	memset(set, 0, sizeof(bool) * ISO_LAYER_COUNT);
	while (p && *p) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t)(end - p) : strlen(p);
		int found = -1;

		if (n > 0) {
			if (n >= sizeof(word))
				n = sizeof(word) - 1;
			memcpy(word, p, n);
			word[n] = '\0';
			for (int i = 0; i < ISO_LAYER_COUNT; i++)
				if (strcmp(word, iso_names[i]) == 0)
					found = i;
			if (found < 0) {
				snprintf(
				    why, why_len,
				    "unknown isolation layer \"%s\" (known: userns, pidns, netns, "
				    "mountns, ipcns, utsns, seccomp, landlock, cgroup, cgroupns, "
				    "maskedpaths, poolmemory, cpuquota)",
				    word);
				return -1;
			}
			set[found] = true;
		}
		p = end ? end + 1 : NULL;
	}
	return 0;
}

void
iso_turn_off(struct isolation *iso, enum iso_layer layer, const char *why)
{
	if (!iso->on[layer])
		return;
	iso->on[layer] = false;
	snprintf(iso->why_off[layer], sizeof(iso->why_off[layer]), "%s", why);
	/* the mount namespace's working tmpfs dies with it: only init can read the result */
	if (layer == ISO_PIDNS) {
		iso_turn_off(iso, ISO_MOUNTNS, "needs the pid namespace");
		iso_turn_off(iso, ISO_CGROUPNS, "needs the pid namespace");
	}
	if (layer == ISO_MOUNTNS) {
		iso->proc = false;
		iso->high_pids = false;
		iso_turn_off(iso, ISO_MASKEDPATHS, "needs the mount namespace");
	}
	if (layer == ISO_CGROUP) {
		iso_turn_off(iso, ISO_POOLMEMORY, "needs the cgroup layer");
		iso_turn_off(iso, ISO_CPUQUOTA, "needs the cgroup layer");
	}
	if (layer == ISO_USERNS && !iso->root_pool) {
		for (int l = ISO_PIDNS; l <= ISO_UTSNS; l++)
			iso_turn_off(iso, (enum iso_layer)l,
			             "needs a user namespace (the pool is not root)");
		iso_turn_off(iso, ISO_CGROUPNS, "needs a user namespace (the pool is not root)");
	}
}

/* Whether clone() with these flags works here. */
static bool
try_clone(int flags)
{
	pid_t pid = (pid_t)syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
	int st;

	if (pid < 0)
		return false;
	if (pid == 0)
		_exit(0);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

void
iso_probe_namespaces(struct isolation *iso, const bool disabled[ISO_LAYER_COUNT])
{
	static const struct {
		enum iso_layer layer;
		int flag;
	} ns[] = {
	    {ISO_PIDNS, CLONE_NEWPID}, {ISO_NETNS, CLONE_NEWNET}, {ISO_MOUNTNS, CLONE_NEWNS},
	    {ISO_IPCNS, CLONE_NEWIPC}, {ISO_UTSNS, CLONE_NEWUTS}, {ISO_CGROUPNS, CLONE_NEWCGROUP},
	};
	int base = 0;

	iso->on[ISO_USERNS] = !disabled[ISO_USERNS] && try_clone(CLONE_NEWUSER);
	if (!iso->on[ISO_USERNS])
		snprintf(iso->why_off[ISO_USERNS], sizeof(iso->why_off[0]), "%s",
		         disabled[ISO_USERNS] ? "disabled by CODEBOX_DISABLE"
		                              : "clone(CLONE_NEWUSER) is refused on this host");
	if (iso->on[ISO_USERNS])
		base = CLONE_NEWUSER;
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		enum iso_layer l = ns[i].layer;
		if (disabled[l]) {
			snprintf(iso->why_off[l], sizeof(iso->why_off[0]),
			         "disabled by CODEBOX_DISABLE");
			continue;
		}
		if (!iso->on[ISO_USERNS] && !iso->root_pool) {
			snprintf(iso->why_off[l], sizeof(iso->why_off[0]),
			         "needs a user namespace (the pool is not root)");
			continue;
		}
		iso->on[l] = try_clone(base | ns[i].flag);
		if (!iso->on[l])
			snprintf(iso->why_off[l], sizeof(iso->why_off[0]),
			         "clone() of this namespace is refused on this host");
	}
	iso->proc = iso->on[ISO_MOUNTNS];
	iso->high_pids = iso->on[ISO_MOUNTNS];
	/* the masked paths are mounts: they need the mount namespace and nothing else */
	iso->on[ISO_MASKEDPATHS] = !disabled[ISO_MASKEDPATHS] && iso->on[ISO_MOUNTNS];
	if (!iso->on[ISO_MASKEDPATHS])
		snprintf(iso->why_off[ISO_MASKEDPATHS], sizeof(iso->why_off[0]), "%s",
		         disabled[ISO_MASKEDPATHS] ? "disabled by CODEBOX_DISABLE"
		                                   : "needs the mount namespace");
	if (!iso->on[ISO_PIDNS]) {
		iso_turn_off(iso, ISO_MOUNTNS, "needs the pid namespace");
		iso_turn_off(iso, ISO_CGROUPNS, "needs the pid namespace");
	}
	if (!iso->on[ISO_PIDNS]) {
		/* without init, the other namespaces are not used either: direct mode */
		for (int l = ISO_NETNS; l <= ISO_UTSNS; l++)
			iso_turn_off(iso, (enum iso_layer)l, "needs the pid namespace");
		iso_turn_off(iso, ISO_CGROUPNS, "needs the pid namespace");
		iso_turn_off(iso, ISO_USERNS, "needs the pid namespace");
	}
}

int
iso_clone_flags(const struct isolation *iso)
{
	int f = 0;

	if (!iso->on[ISO_PIDNS])
		return 0;
	f |= CLONE_NEWPID;
	if (iso->on[ISO_USERNS])
		f |= CLONE_NEWUSER;
	if (iso->on[ISO_NETNS])
		f |= CLONE_NEWNET;
	if (iso->on[ISO_MOUNTNS])
		f |= CLONE_NEWNS;
	if (iso->on[ISO_IPCNS])
		f |= CLONE_NEWIPC;
	if (iso->on[ISO_UTSNS])
		f |= CLONE_NEWUTS;
	return f;
}

const char *
iso_process_limit(const struct isolation *iso)
{
	if (iso->on[ISO_CGROUP])
		return "cgroup";
	return iso->on[ISO_USERNS] || iso->root_pool ? "rlimit-nproc" : "none";
}

bool
iso_deny_unix_socket(bool landlock_on, int landlock_abi)
{
	return !landlock_on || landlock_abi < 9;
}

void
iso_summary(const struct isolation *iso, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int l = 0; l < ISO_LAYER_COUNT && n < len; l++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s=%s", l ? " " : "", iso_names[l],
		                      iso->on[l] ? "on" : "off");
	if (n < len)
		snprintf(
		    buf + n, len - n,
		    " proc=%s landlockAbi=%d cgroup=v%d memory=%s pids=%s poolMemoryBytes=%llu "
		    "highPids=%s",
		    iso->proc ? "private" : "none", iso->landlock_abi, iso->cgroup_version,
		    iso->on[ISO_CGROUP] ? "cgroup" : "rlimit",
		    iso->on[ISO_CGROUP] ? "cgroup" : "rlimit",
		    iso->on[ISO_POOLMEMORY] ? iso->pool_memory_bytes : 0ULL,
		    iso->high_pids ? "yes" : "no");
}

int
iso_check_required(const struct isolation *iso, const bool required[ISO_LAYER_COUNT], char *why,
                   size_t why_len)
{
	for (int l = 0; l < ISO_LAYER_COUNT; l++)
		if (required[l] && !iso->on[l]) {
			snprintf(why, why_len, "CODEBOX_REQUIRE demands %s, which is off: %s",
			         iso_names[l], iso->why_off[l]);
			return -1;
		}
	return 0;
}
