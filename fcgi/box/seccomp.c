/*
 * seccomp.c - the system-call filter of a run.
 *
 * Denied calls fail with EPERM, so Python raises a clear PermissionError instead of dying of
 * SIGSYS. The table below is the whole policy: what is denied and why. Everything else is
 * allowed (an allow-list would break numpy, scipy and friends in ways that are hard to see).
 * Other architectures' entry points (i386 int 0x80, x32) are killed by libseccomp's default
 * bad-architecture action, so the table cannot be bypassed through them.
 */
#include "box/seccomp.h"

#include "core/log.h"

#include <stdio.h>

#include <errno.h>
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

/* clone() flags that create namespaces: a run may not build its own sandbox inside ours */
#define SECCOMP_NS_FLAGS                                                                           \
	(CLONE_NEWNS | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | \
	 CLONE_NEWCGROUP)

static const struct {
	const char *name;
	const char *why;
} seccomp_denied[] = {
    {"ptrace", "reading or steering other processes"},
    {"process_vm_readv", "reading another process's memory"},
    {"process_vm_writev", "writing another process's memory"},
    {"kcmp", "probing other processes' kernel objects"},
    {"keyctl", "the kernel keyrings"},
    {"add_key", "the kernel keyrings"},
    {"request_key", "the kernel keyrings"},
    {"bpf", "loading programs into the kernel"},
    {"perf_event_open", "performance counters (side channels, kernel attack surface)"},
    {"userfaultfd", "stalling the kernel at will (exploit primitive)"},
    {"io_uring_setup", "io_uring (a large kernel attack surface)"},
    {"io_uring_enter", "io_uring"},
    {"io_uring_register", "io_uring"},
    {"mount", "changing the mount table"},
    {"umount2", "changing the mount table"},
    {"pivot_root", "changing the root"},
    {"chroot", "changing the root"},
    {"move_mount", "the new mount API"},
    {"open_tree", "the new mount API"},
    {"fsopen", "the new mount API"},
    {"fsconfig", "the new mount API"},
    {"fsmount", "the new mount API"},
    {"fspick", "the new mount API"},
    {"mount_setattr", "the new mount API"},
    {"unshare", "new namespaces inside the run"},
    {"setns", "joining other namespaces"},
    {"kexec_load", "replacing the kernel"},
    {"kexec_file_load", "replacing the kernel"},
    {"init_module", "loading kernel modules"},
    {"finit_module", "loading kernel modules"},
    {"delete_module", "unloading kernel modules"},
    {"reboot", "rebooting"},
    {"swapon", "swap"},
    {"swapoff", "swap"},
    {"acct", "process accounting"},
    {"quotactl", "quotas"},
    {"syslog", "the kernel log"},
    {"open_by_handle_at", "opening files by handle, around the mount table"},
    {"name_to_handle_at", "file handles"},
    {"lookup_dcookie", "kernel internals"},
    {"personality", "changing the execution domain"},
    {"iopl", "I/O ports"},
    {"ioperm", "I/O ports"},
    {"settimeofday", "the clock"},
    {"clock_settime", "the clock"},
    {"clock_adjtime", "the clock"},
    {"adjtimex", "the clock"},
    /* host-wide tables and per-user quotas (a run must not be able to exhaust any of them),
     * and modify_ldt */
    {"io_setup", "AIO contexts come from the host-wide fs.aio-max-nr (16 calls took it all)"},
    {"inotify_init", "inotify instances and watches count against the namespace owner's quota, "
                     "and watching the shared /usr shows what other runs open"},
    {"inotify_init1", "inotify, as above"},
    {"fanotify_init", "fanotify groups: per-user quota, and other runs' file activity"},
    {"modify_ldt", "16-bit segments (a classic exploit primitive, never needed by Python)"},
};

/* socket() families that reach beyond the run. AF_UNIX is added below Landlock ABI 9. */
static const int seccomp_denied_families[] = {
    AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_BLUETOOTH, AF_VSOCK, AF_KEY,       AF_ALG,
    AF_XDP,  AF_TIPC,  AF_RDS,     AF_CAN,    AF_X25,       AF_AX25,  AF_APPLETALK,
};

int
seccomp_build(struct seccomp_filter *f, bool deny_unix_socket)
{
	scmp_filter_ctx ctx;
	int rc = -1;
	char *bpf = NULL;
	size_t bpf_len = 0;
	int mfd = -1;

	memset(f, 0, sizeof(*f));
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (ctx == NULL) {
		log_msg(LOG_ERROR, "seccomp_init() failed");
		return -1;
	}
	for (size_t i = 0; i < sizeof(seccomp_denied) / sizeof(seccomp_denied[0]); i++) {
		int nr = seccomp_syscall_resolve_name(seccomp_denied[i].name);
		if (nr == __NR_SCMP_ERROR)
			continue; /* not on this architecture */
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0) < 0) {
			log_msg(LOG_ERROR, "seccomp: cannot deny %s", seccomp_denied[i].name);
			goto out;
		}
	}
	for (size_t i = 0; i < sizeof(seccomp_denied_families) / sizeof(int); i++)
		if (seccomp_rule_add(
		        ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
		        SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)seccomp_denied_families[i])) < 0)
			goto out;
	if (deny_unix_socket && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(socket), 1,
	                                         SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)AF_UNIX)) < 0)
		goto out;
	/* clone() with namespace flags; clone3() hides its flags in memory, so it answers ENOSYS
	 * and glibc falls back to clone() */
	for (unsigned long bit = 1; bit != 0; bit <<= 1) {
		if (!(bit & SECCOMP_NS_FLAGS))
			continue;
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
		                     SCMP_A0(SCMP_CMP_MASKED_EQ, bit, bit)) < 0)
			goto out;
	}
	if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) < 0)
		goto out;
	/* dnotify (fcntl F_NOTIFY) reports reads in a watched directory, like inotify does */
	if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(fcntl), 1,
	                     SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)F_NOTIFY)) < 0)
		goto out;

	/* export as classic BPF, through a memfd since libseccomp writes to an fd */
	mfd = memfd_create("codebox-seccomp", MFD_CLOEXEC);
	if (mfd < 0 || seccomp_export_bpf(ctx, mfd) < 0)
		goto out;
	off_t size = lseek(mfd, 0, SEEK_END);
	if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
	    lseek(mfd, 0, SEEK_SET) < 0)
		goto out;
	bpf = malloc((size_t)size);
	if (bpf == NULL || pread(mfd, bpf, (size_t)size, 0) != (ssize_t)size)
		goto out;
	bpf_len = (size_t)size;
	rc = 0;
out:
	if (mfd >= 0)
		close(mfd);
	seccomp_release(ctx);
	if (rc == 0) {
		f->prog.len = (unsigned short)(bpf_len / sizeof(struct sock_filter));
		f->prog.filter = (struct sock_filter *)(void *)bpf;
		f->denies_unix = deny_unix_socket;
	} else {
		free(bpf);
		log_msg(LOG_ERROR, "building the seccomp filter failed");
	}
	return rc;
}

void
seccomp_probe(struct isolation *iso, bool disabled, struct seccomp_filter *f)
{
	/* below Landlock ABI 9 nothing stops connect() to pathname sockets: no AF_UNIX socket() */
	bool deny_unix = iso_deny_unix_socket(iso->on[ISO_LANDLOCK], iso->landlock_abi);

	if (!disabled)
		iso->on[ISO_SECCOMP] = seccomp_build(f, deny_unix) == 0;
	if (!iso->on[ISO_SECCOMP])
		snprintf(iso->why_off[ISO_SECCOMP], sizeof(iso->why_off[0]), "%s",
		         disabled ? "disabled by CODEBOX_DISABLE"
		                  : "the filter could not be built");
}

int
seccomp_reconcile(const struct isolation *iso, struct seccomp_filter *f)
{
	if (!iso->on[ISO_SECCOMP] || f->denies_unix ||
	    !iso_deny_unix_socket(iso->on[ISO_LANDLOCK], iso->landlock_abi))
		return 0;
	seccomp_free(f);
	return seccomp_build(f, true);
}

int
seccomp_apply(const struct seccomp_filter *f)
{
	if (f->prog.filter == NULL) {
		errno = EINVAL;
		return -1;
	}
	return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &f->prog, 0, 0);
}

void
seccomp_free(struct seccomp_filter *f)
{
	free(f->prog.filter);
	memset(f, 0, sizeof(*f));
}
