/*
 * mounts.c - a new root for each run, one commented step at a time.
 *
 * Order:
 *   1. make every mount private, so nothing below propagates back to the host;
 *   2. mount the skeleton tmpfs on the run's own (host) directory: it becomes the new root;
 *   3. bind /usr read-only, and /bin, /lib... as symlinks or binds, like the host has them;
 *   4. copy the sandbox's /etc (passwd, group, hostname, ld.so.cache, localtime, matplotlibrc,
 *      python3.11/sitecustomize.py: figures.h) into the skeleton, and bind the host's
 *      /etc/alternatives in it (Debian reaches libblas.so.3 through it). Copied, not bound: a bind
 * would show the host's runtime directory as its root in /proc/self/mountinfo;
 *   5. /dev: binds of the harmless character devices and the /dev/fd links;
 *   6. a fresh /proc, which shows only the run's own pid namespace;
 *   7. the run's one size-limited tmpfs (diskBytes), mounted at a staging point, holding the
 *      working directory, tmp, var-tmp and shm: each is bound where the run sees it
 *      (/sandbox/<run>, /tmp, /var/tmp, /dev/shm), so one budget covers all four, and the
 *      staging mount is detached. /sandbox is 0311 on the read-only skeleton: a run cannot
 *      list the directory above its own. No path names the host's runtime directory.
 *      An agent run (port 8888) also gets a clone of the persistent workspace at /app and
 *      /opt/codebox/bin/python, a link to the interpreter;
 *   8. pivot_root into the skeleton and detach the old root;
 *   9. remount the skeleton read-only.
 * Then, separately (mounts_mask(), after init has used /proc/sys): the OCI runtime spec's
 * masked paths (plus /proc/cmdline, /proc/config.gz and /proc/cgroups) hidden under
 * /dev/null or an empty read-only tmpfs, and its read-only paths remounted read-only.
 * Read-only remounts of binds must keep the flags the kernel locked on the source mount
 * (nosuid, nodev, noexec, atime flags), so they are read with statvfs() and passed back.
 */
#include "box/mounts.h"

#include "core/figures.h"
#include "core/limits.h"
#include "core/workspace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NEWROOT_MAX 4096

const char *
mounts_step_string(enum mounts_step step)
{
	switch (step) {
	case MOUNTS_PRIVATE:
		return "making mounts private";
	case MOUNTS_ROOT:
		return "mounting the new root";
	case MOUNTS_SYSTEM:
		return "binding the system read-only";
	case MOUNTS_ETC:
		return "binding /etc";
	case MOUNTS_DEV:
		return "building /dev";
	case MOUNTS_PROC:
		return "mounting /proc";
	case MOUNTS_WORK:
		return "mounting the working tmpfs";
	case MOUNTS_WORKSPACE:
		return "attaching the agent workspace at /app";
	case MOUNTS_PIVOT:
		return "pivoting into the new root";
	case MOUNTS_READONLY:
		return "making the new root read-only";
	case MOUNTS_MASK:
		return "masking /proc paths";
	}
	return "an unknown mount step";
}

static unsigned long
locked_flags(const char *path)
{
	struct statvfs sv;
	unsigned long f = 0;

	if (statvfs(path, &sv) < 0)
		return 0;
	if (sv.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		f |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

static int
bind_ro(const char *src, const char *dst, bool recursive)
{
	if (mount(src, dst, NULL, MS_BIND | (recursive ? MS_REC : 0), NULL) < 0)
		return -1;
	return mount(NULL, dst, NULL,
	             MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | locked_flags(src),
	             NULL);
}

/* dst = root + path; no allocation */
static int
join(char *dst, size_t len, const char *root, const char *path)
{
	int n = snprintf(dst, len, "%s%s", root, path);

	if (n < 0 || (size_t)n >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* mkdir -p of path (absolute, below root), each component mode 0755 */
static int
mkdirs(const char *root, const char *path)
{
	char p[NEWROOT_MAX];

	if (join(p, sizeof(p), root, path) < 0)
		return -1;
	for (char *s = p + strlen(root) + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return -1;
		*s = '/';
	}
	return mkdir(p, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static int
touch(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

/* /bin, /lib...: the same shape as the host (a symlink into usr/ on merged-/usr systems) */
static int
mirror_top(const char *root, const char *name)
{
	char host[64], dst[NEWROOT_MAX], target[256];
	struct stat sb;
	ssize_t n;

	snprintf(host, sizeof(host), "/%s", name);
	if (lstat(host, &sb) < 0)
		return errno == ENOENT ? 0 : -1;
	if (join(dst, sizeof(dst), root, host) < 0)
		return -1;
	if (S_ISLNK(sb.st_mode)) {
		n = readlink(host, target, sizeof(target) - 1);
		if (n < 0)
			return -1;
		target[n] = '\0';
		return symlink(target, dst);
	}
	if (!S_ISDIR(sb.st_mode))
		return 0;
	if (mkdir(dst, 0755) < 0)
		return -1;
	return bind_ro(host, dst, true);
}

static int
build_dev(const char *root)
{
	static const char *const nodes[] = {"null", "zero", "full", "random", "urandom"};
	static const char *const links[][2] = {
	    {"fd", "/proc/self/fd"},
	    {"stdin", "/proc/self/fd/0"},
	    {"stdout", "/proc/self/fd/1"},
	    {"stderr", "/proc/self/fd/2"},
	};
	char dst[NEWROOT_MAX], src[64];

	if (mkdirs(root, "/dev") < 0)
		return -1;
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++) {
		snprintf(src, sizeof(src), "/dev/%s", nodes[i]);
		if (join(dst, sizeof(dst), root, src) < 0 || touch(dst) < 0)
			return -1;
		/* a plain bind keeps the device usable: the host mount is not nodev */
		if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
			return -1;
	}
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(src, sizeof(src), "/dev/%s", links[i][0]);
		if (join(dst, sizeof(dst), root, src) < 0 || symlink(links[i][1], dst) < 0)
			return -1;
	}
	return 0;
}

/* Copies the sandbox's few /etc files from the directory etc_fd into root/etc (bounded, no
 * allocation). */
static int
copy_etc(const char *root, int etc_fd)
{
	/* each file's name in etc_fd, and where it goes under the sandbox's /etc */
	static const char *const names[][2] = {
	    {"passwd", "passwd"},
	    {"group", "group"},
	    {"hostname", "hostname"},
	    {"ld.so.cache", "ld.so.cache"},
	    {"localtime", "localtime"},
	    {"matplotlibrc", "matplotlibrc"},
	    {"sitecustomize.py", FIGURES_SITE_DIR "/sitecustomize.py"}, /* figures.h */
	};
	char dst[NEWROOT_MAX], buf[16384];

	if (mkdirs(root, "/etc/" FIGURES_SITE_DIR) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		long total = 0;
		ssize_t n;
		int in, out;

		if (snprintf(dst, sizeof(dst), "%s/etc/%s", root, names[i][1]) >=
		    (int)sizeof(dst)) {
			errno = ENAMETOOLONG;
			return -1;
		}
		in = openat(etc_fd, names[i][0], O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (in < 0) {
			if (errno == ENOENT)
				continue; /* no localtime on this host */
			return -1;
		}
		out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
		if (out < 0) {
			close(in);
			return -1;
		}
		/* the skeleton is 4 MiB; the files are a few KiB (ld.so.cache tens of KiB) */
		while ((n = read(in, buf, sizeof(buf))) > 0 && total < (2L << 20)) {
			if (write(out, buf, (size_t)n) != n) {
				n = -1;
				break;
			}
			total += n;
		}
		close(in);
		close(out);
		if (n < 0)
			return -1;
	}
	return 0;
}

/* bind root+from onto root+to (both exist); a plain bind keeps the tmpfs's nosuid, nodev */
static int
bind_at(const char *root, const char *from, const char *to)
{
	char src[NEWROOT_MAX], dst[NEWROOT_MAX];

	if (join(src, sizeof(src), root, from) < 0 || join(dst, sizeof(dst), root, to) < 0)
		return -1;
	return mount(src, dst, NULL, MS_BIND, NULL);
}

/* mkdir root+path with mode and owner (mkdir's mode is masked by the umask) */
static int
mkdir_owned(const char *root, const char *path, mode_t mode, uid_t uid, gid_t gid)
{
	char p[NEWROOT_MAX];

	if (join(p, sizeof(p), root, path) < 0 || mkdir(p, 0700) < 0 || chown(p, uid, gid) < 0 ||
	    chmod(p, mode) < 0)
		return -1;
	return 0;
}

/* Step 7: the run's one tmpfs, and its four directories bound into place. */
static int
build_work(const char *root, const struct mounts_spec *m)
{
	char dst[NEWROOT_MAX], opts[128], parent[NEWROOT_MAX], sub[NEWROOT_MAX];
	const char *slash = strrchr(m->inner_workdir, '/');

	if (slash == NULL || slash == m->inner_workdir ||
	    join(dst, sizeof(dst), root, "/.work") < 0 || mkdir(dst, 0700) < 0)
		return -1;
	/* bounded in files as well as bytes: an inode costs the host kernel memory that no
	 * cgroup of the run's is charged for (limits_inodes()) */
	snprintf(opts, sizeof(opts), "mode=0700,size=%llu,nr_inodes=%llu,uid=%u,gid=%u",
	         m->disk_bytes, limits_inodes(m->disk_bytes), (unsigned)m->owner_uid,
	         (unsigned)m->owner_gid);
	if (mount("codebox-work", dst, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return -1;
	if (snprintf(sub, sizeof(sub), "/.work%s", slash) >= (int)sizeof(sub)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	if (mkdir_owned(root, sub, 0700, m->owner_uid, m->owner_gid) < 0 ||
	    mkdir_owned(root, "/.work/tmp", 01777, m->owner_uid, m->owner_gid) < 0 ||
	    mkdir_owned(root, "/.work/var-tmp", 01777, m->owner_uid, m->owner_gid) < 0 ||
	    mkdir_owned(root, "/.work/shm", 01777, m->owner_uid, m->owner_gid) < 0)
		return -1;
	/* the directory above the run's own: search only, and the skeleton turns read-only */
	snprintf(parent, sizeof(parent), "%.*s", (int)(slash - m->inner_workdir), m->inner_workdir);
	if (mkdirs(root, m->inner_workdir) < 0 || join(dst, sizeof(dst), root, parent) < 0 ||
	    chmod(dst, 0311) < 0)
		return -1;
	if (mkdirs(root, "/tmp") < 0 || mkdirs(root, "/var/tmp") < 0 ||
	    mkdirs(root, "/dev/shm") < 0)
		return -1;
	if (bind_at(root, sub, m->inner_workdir) < 0 || bind_at(root, "/.work/tmp", "/tmp") < 0 ||
	    bind_at(root, "/.work/var-tmp", "/var/tmp") < 0 ||
	    bind_at(root, "/.work/shm", "/dev/shm") < 0)
		return -1;
	if (join(dst, sizeof(dst), root, "/.work") < 0 || umount2(dst, MNT_DETACH) < 0 ||
	    rmdir(dst) < 0)
		return -1;
	return 0;
}

int
mounts_build(const struct mounts_spec *m, enum mounts_step *failed_step)
{
	char root[NEWROOT_MAX], dst[NEWROOT_MAX];
	static const char *const tops[] = {"bin", "sbin", "lib", "lib32", "lib64", "libx32"};

	*failed_step = MOUNTS_PRIVATE;
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -1;

	*failed_step = MOUNTS_ROOT;
	snprintf(root, sizeof(root), "%s", m->workdir);
	/* the skeleton holds directories, symlinks and the small /etc files (ld.so.cache) */
	if (mount("codebox-root", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m") < 0)
		return -1;

	*failed_step = MOUNTS_SYSTEM;
	if (mkdirs(root, "/usr") < 0 || join(dst, sizeof(dst), root, "/usr") < 0 ||
	    bind_ro("/usr", dst, true) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(tops) / sizeof(tops[0]); i++)
		if (mirror_top(root, tops[i]) < 0)
			return -1;

	*failed_step = MOUNTS_ETC;
	if (mkdirs(root, "/etc") < 0 || copy_etc(root, m->etc_fd) < 0)
		return -1;
	/* Debian's alternatives (libblas.so.3 and friends) are symlinks through /etc */
	if (access("/etc/alternatives", F_OK) == 0 &&
	    (mkdirs(root, "/etc/alternatives") < 0 ||
	     join(dst, sizeof(dst), root, "/etc/alternatives") < 0 ||
	     bind_ro("/etc/alternatives", dst, false) < 0))
		return -1;

	*failed_step = MOUNTS_DEV;
	if (build_dev(root) < 0)
		return -1;

	*failed_step = MOUNTS_PROC;
	if (mkdirs(root, "/proc") < 0)
		return -1;
	if (m->mount_proc) {
		if (join(dst, sizeof(dst), root, "/proc") < 0 ||
		    mount("proc", dst, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			return -1;
	}

	*failed_step = MOUNTS_WORK;
	if (build_work(root, m) < 0)
		return -1;
	/* an interpreter outside /usr (--python, tests) is bound read-only at its own path; after
	 * the work mounts, which would hide it under /tmp */
	if (strncmp(m->python, "/usr/", 5) != 0) {
		char parent[NEWROOT_MAX];
		const char *slash = strrchr(m->python, '/');
		if (join(parent, sizeof(parent), "", m->python) < 0)
			return -1;
		parent[slash - m->python] = '\0';
		if ((parent[0] && mkdirs(root, parent) < 0) ||
		    join(dst, sizeof(dst), root, m->python) < 0 || touch(dst) < 0 ||
		    bind_ro(m->python, dst, false) < 0)
			return -1;
	}

	/* an agent run: the persistent workspace at /app, and `python` as agents type it */
	if (m->workspace_fd >= 0) {
		*failed_step = MOUNTS_WORKSPACE;
		if (mkdirs(root, "/app") < 0 || join(dst, sizeof(dst), root, "/app") < 0 ||
		    workspace_attach(m->workspace_fd, dst) < 0)
			return -1;
		if (mkdirs(root, "/opt/codebox/bin") < 0 ||
		    join(dst, sizeof(dst), root, "/opt/codebox/bin/python") < 0 ||
		    symlink(m->python, dst) < 0)
			return -1;
	}

	*failed_step = MOUNTS_PIVOT;
	if (chdir(root) < 0 || mkdir(".oldroot", 0700) < 0 ||
	    syscall(SYS_pivot_root, ".", ".oldroot") < 0 || chdir("/") < 0 ||
	    umount2("/.oldroot", MNT_DETACH) < 0 || rmdir("/.oldroot") < 0)
		return -1;

	*failed_step = MOUNTS_READONLY;
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) <
	    0)
		return -1;
	return 0;
}

/* Hides path under /dev/null (a file) or an empty read-only tmpfs (a directory). */
static int
mask_path(const char *path)
{
	struct stat sb;

	if (lstat(path, &sb) < 0)
		return errno == ENOENT ? 0 : -1;
	if (S_ISDIR(sb.st_mode))
		return mount("codebox-masked", path, "tmpfs",
		             MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=1");
	return mount("/dev/null", path, NULL, MS_BIND, NULL);
}

/* Makes path (and what is mounted below it) read-only. */
static int
readonly_path(const char *path)
{
	if (mount(path, path, NULL, MS_BIND | MS_REC, NULL) < 0)
		return errno == ENOENT ? 0 : -1;
	return mount(NULL, path, NULL,
	             MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | locked_flags(path),
	             NULL);
}

int
mounts_mask(enum mounts_step *failed_step)
{
	/* the OCI runtime spec's defaults, plus what names the host: its boot command line, its
	 * kernel config, its cgroup counts */
	static const char *const masked[] = {
	    "/proc/acpi",          "/proc/asound",     "/proc/kcore",       "/proc/keys",
	    "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug",
	    "/proc/scsi",          "/proc/cmdline",    "/proc/config.gz",   "/proc/cgroups",
	};
	static const char *const readonly[] = {
	    "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
	};

	*failed_step = MOUNTS_MASK;
	for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++)
		if (mask_path(masked[i]) < 0)
			return -1;
	for (size_t i = 0; i < sizeof(readonly) / sizeof(readonly[0]); i++)
		if (readonly_path(readonly[i]) < 0)
			return -1;
	return 0;
}
