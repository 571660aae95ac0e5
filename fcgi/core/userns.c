/*
 * userns.c - the maps of a user namespace, written by the process that made it.
 *
 * A process in a new user namespace has no uid or gid inside until its parent writes the maps
 * (once each, for the namespace's life); until then it waits on a pipe. Runs (run.c: a run's
 * init, the worker's child or a template's) and the agent's workspace helper (workspace.c)
 * each map one inner id onto one host uid and gid. What the process does with its id once it
 * is mapped (sandbox.c's ids step) is the same as without a namespace.
 */
#include "core/userns.h"

#include "core/util.h"

#include <stdio.h>
#include <unistd.h>

int
userns_write_maps(pid_t pid, unsigned inner_id, uid_t host_uid, gid_t host_gid)
{
	char proc[32], map[64];

	snprintf(proc, sizeof(proc), "/proc/%d", (int)pid);
	/* an unprivileged writer must give up setgroups before it may write gid_map */
	if (geteuid() != 0 && util_write_file(proc, "setgroups", "deny") < 0)
		return -1;
	snprintf(map, sizeof(map), "%u %u 1\n", inner_id, (unsigned)host_uid);
	if (util_write_file(proc, "uid_map", map) < 0)
		return -1;
	snprintf(map, sizeof(map), "%u %u 1\n", inner_id, (unsigned)host_gid);
	return util_write_file(proc, "gid_map", map);
}
