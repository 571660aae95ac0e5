/*
 * landlock.c - Landlock rules for a run.
 *
 * In a mount namespace the run sees only /usr, its /etc, a few devices and its directory, so
 * Landlock there limits writes (and TCP, signals, abstract sockets) and leaves reads to the
 * mount table. Without one, it limits reads too.
 *
 * Landlock rules are tied to inodes, not to paths, and a rule on a directory covers
 * everything beneath it, across mount points. So one ruleset per worker covers every run of
 * that worker: the rule on the worker's directory of runs also covers each run's directory
 * and the tmpfs mounted on it, and the rules on /usr and friends also cover the read-only
 * bind mounts of them inside the mount namespace.
 *
 * Which rights exist depends on the ABI; like the kernel's samples/landlock/sandboxer.c, the
 * handled set is trimmed to what the running kernel knows. glibc has no wrappers and the
 * installed uapi header may be older than the kernel, so the constants are spelled out here.
 */
#include "box/landlock.h"

#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif

#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1

#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_REMOVE_DIR (1ULL << 4)
#define LL_FS_REMOVE_FILE (1ULL << 5)
#define LL_FS_MAKE_CHAR (1ULL << 6)
#define LL_FS_MAKE_DIR (1ULL << 7)
#define LL_FS_MAKE_REG (1ULL << 8)
#define LL_FS_MAKE_SOCK (1ULL << 9)
#define LL_FS_MAKE_FIFO (1ULL << 10)
#define LL_FS_MAKE_BLOCK (1ULL << 11)
#define LL_FS_MAKE_SYM (1ULL << 12)
#define LL_FS_REFER (1ULL << 13)     /* ABI 2 */
#define LL_FS_TRUNCATE (1ULL << 14)  /* ABI 3 */
#define LL_FS_IOCTL_DEV (1ULL << 15) /* ABI 5 */
/* ABI 9: connect() and sendmsg() to a pathname unix socket bound outside the domain */
#ifdef LANDLOCK_ACCESS_FS_RESOLVE_UNIX
#define LL_FS_RESOLVE_UNIX LANDLOCK_ACCESS_FS_RESOLVE_UNIX
#else
#define LL_FS_RESOLVE_UNIX (1ULL << 16)
#endif
#define LL_NET_BIND_TCP (1ULL << 0) /* ABI 4 */
#define LL_NET_CONNECT_TCP (1ULL << 1)
#define LL_SCOPE_ABSTRACT_UNIX (1ULL << 0) /* ABI 6 */
#define LL_SCOPE_SIGNAL (1ULL << 1)

struct ll_ruleset_attr {
	uint64_t handled_access_fs;
	uint64_t handled_access_net;
	uint64_t scoped;
};

struct ll_path_beneath {
	uint64_t allowed_access;
	int32_t parent_fd;
} __attribute__((packed));

#define LL_FS_FILE_RIGHTS                                                                          \
	(LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE | LL_FS_IOCTL_DEV)
#define LL_FS_READ_RIGHTS (LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR)

int
landlock_abi(void)
{
	long abi = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);

	return abi < 0 ? 0 : (int)abi;
}

void
landlock_probe(struct isolation *iso, bool disabled)
{
	iso->landlock_abi = landlock_abi();
	iso->on[ISO_LANDLOCK] = iso->landlock_abi >= 1 && !disabled;
	if (!iso->on[ISO_LANDLOCK])
		snprintf(iso->why_off[ISO_LANDLOCK], sizeof(iso->why_off[0]), "%s",
		         disabled ? "disabled by CODEBOX_DISABLE" : "the kernel has no Landlock");
}

uint64_t
landlock_fs_rights(int abi)
{
	uint64_t fs = (LL_FS_MAKE_SYM << 1) - 1; /* ABI 1: bits 0..12 */

	if (abi < 1)
		return 0;
	if (abi >= 2)
		fs |= LL_FS_REFER;
	if (abi >= 3)
		fs |= LL_FS_TRUNCATE;
	if (abi >= 5)
		fs |= LL_FS_IOCTL_DEV;
	if (abi >= 9)
		fs |= LL_FS_RESOLVE_UNIX;
	return fs;
}

uint64_t
landlock_net_rights(int abi)
{
	return abi >= 4 ? LL_NET_BIND_TCP | LL_NET_CONNECT_TCP : 0;
}

uint64_t
landlock_scopes(int abi)
{
	return abi >= 6 ? LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL : 0;
}

uint64_t
landlock_rw_dir_rights(int abi)
{
	/* everything but device nodes; RESOLVE_UNIX too: sockets there are the run's own */
	return landlock_fs_rights(abi) & ~(LL_FS_MAKE_CHAR | LL_FS_MAKE_BLOCK);
}

static int
landlock_allow(int ruleset, const char *path, uint64_t access, uint64_t handled, bool optional)
{
	struct ll_path_beneath rule;
	struct stat sb;
	int fd = open(path, O_PATH | O_CLOEXEC);

	if (fd < 0) {
		if (optional && errno == ENOENT)
			return 0;
		log_msg(LOG_ERROR, "landlock: open(%s) failed: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &sb) == 0 && !S_ISDIR(sb.st_mode))
		access &= LL_FS_FILE_RIGHTS;
	rule.allowed_access = access & handled;
	rule.parent_fd = fd;
	if (syscall(SYS_landlock_add_rule, ruleset, LL_RULE_PATH_BENEATH, &rule, 0) < 0) {
		log_msg(LOG_ERROR, "landlock: a rule for %s failed: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int
landlock_build(int abi, const char *const *rw_dirs, size_t n_rw_dirs, const char *python,
               bool restrict_reads)
{
	static const char *const system_paths[] = {
	    "/usr",           "/bin",   "/sbin",   "/lib",
	    "/lib32",         "/lib64", "/libx32", "/etc/ld.so.cache",
	    "/etc/localtime",
	};
	static const char *const devices[] = {
	    "/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
	};
	struct ll_ruleset_attr attr = {0};
	size_t attr_size = sizeof(attr);
	uint64_t fs;
	int ruleset;

	if (abi < 1)
		return -1;
	fs = landlock_fs_rights(abi);
	if (!restrict_reads)
		fs &= ~(LL_FS_READ_FILE | LL_FS_READ_DIR | LL_FS_EXECUTE);
	attr.handled_access_fs = fs;
	attr.handled_access_net = landlock_net_rights(abi);
	attr.scoped = landlock_scopes(abi);
	/* an older kernel refuses a larger struct with fields it does not know */
	if (abi < 4)
		attr_size = offsetof(struct ll_ruleset_attr, handled_access_net);
	else if (abi < 6)
		attr_size = offsetof(struct ll_ruleset_attr, scoped);

	ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, attr_size, 0);
	if (ruleset < 0) {
		log_msg(LOG_ERROR, "landlock_create_ruleset() failed: %s", strerror(errno));
		return -1;
	}
	/* the syscall's fd is already close-on-exec */
	for (size_t i = 0; restrict_reads && i < sizeof(system_paths) / sizeof(system_paths[0]);
	     i++)
		if (landlock_allow(ruleset, system_paths[i], LL_FS_READ_RIGHTS, fs, true) < 0)
			goto fail;
	if (restrict_reads && landlock_allow(ruleset, python, LL_FS_READ_RIGHTS, fs, false) < 0)
		goto fail;
	for (size_t i = 0; i < sizeof(devices) / sizeof(devices[0]); i++)
		if (landlock_allow(ruleset, devices[i],
		                   LL_FS_READ_FILE | LL_FS_WRITE_FILE | LL_FS_TRUNCATE, fs,
		                   true) < 0)
			goto fail;
	/* the run's own directories */
	for (size_t i = 0; i < n_rw_dirs; i++)
		if (landlock_allow(ruleset, rw_dirs[i], landlock_rw_dir_rights(abi), fs, false) < 0)
			goto fail;
	return ruleset;
fail:
	close(ruleset);
	return -1;
}

int
landlock_apply(int ruleset_fd)
{
	return (int)syscall(SYS_landlock_restrict_self, ruleset_fd, 0);
}

int
landlock_allow_dir_fd(int abi, bool restrict_reads, int ruleset_fd, int dir_fd)
{
	char path[64];
	uint64_t fs = landlock_fs_rights(abi);

	if (!restrict_reads)
		fs &= ~(LL_FS_READ_FILE | LL_FS_READ_DIR | LL_FS_EXECUTE);
	/* reopening through /proc keeps the same inode, which is what a rule is tied to */
	snprintf(path, sizeof(path), "/proc/self/fd/%d", dir_fd);
	return landlock_allow(ruleset_fd, path, fs & ~(LL_FS_MAKE_CHAR | LL_FS_MAKE_BLOCK), fs,
	                      false);
}
