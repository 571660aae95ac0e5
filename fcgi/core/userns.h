/*
 * userns.h - a user namespace, from the process that made it: the maps of its one id.
 */
#ifndef CODEBOX_USERNS_H
#define CODEBOX_USERNS_H

#include <sys/types.h>

/*
 * Maps inner_id onto host_uid and onto host_gid (one id each) in the new user namespace of
 * pid, which waits for them: /proc/<pid>/uid_map and gid_map, after setgroups "deny" when
 * this process is not root (the kernel lets an unprivileged writer map gids only then).
 * Returns 0, or -1 with errno set.
 */
int userns_write_maps(pid_t pid, unsigned inner_id, uid_t host_uid, gid_t host_gid);

#endif
