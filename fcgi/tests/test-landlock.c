/* Unit tests for landlock.c: the rights and scopes chosen for every Landlock ABI 1-9. */
#include "box/landlock.h"
#include "tap.h"

#include <stdint.h>

#define FS_V1 ((1ULL << 13) - 1) /* execute .. make_sym */
#define REFER (1ULL << 13)
#define TRUNCATE (1ULL << 14)
#define IOCTL_DEV (1ULL << 15)
#define RESOLVE_UNIX (1ULL << 16)
#define MAKE_CHAR (1ULL << 6)
#define MAKE_BLOCK (1ULL << 11)

int
main(void)
{
	/* what each ABI added, as the kernel's Documentation/userspace-api/landlock.rst says */
	static const uint64_t fs_want[10] = {
	    0,
	    FS_V1,
	    FS_V1 | REFER,
	    FS_V1 | REFER | TRUNCATE,
	    FS_V1 | REFER | TRUNCATE,
	    FS_V1 | REFER | TRUNCATE | IOCTL_DEV,
	    FS_V1 | REFER | TRUNCATE | IOCTL_DEV,
	    FS_V1 | REFER | TRUNCATE | IOCTL_DEV,
	    FS_V1 | REFER | TRUNCATE | IOCTL_DEV,
	    FS_V1 | REFER | TRUNCATE | IOCTL_DEV | RESOLVE_UNIX,
	};

	for (int abi = 0; abi <= 9; abi++) {
		ok(landlock_fs_rights(abi) == fs_want[abi], "ABI %d: file-system rights %#llx", abi,
		   (unsigned long long)landlock_fs_rights(abi));
		ok(landlock_net_rights(abi) == (abi >= 4 ? 3u : 0u),
		   "ABI %d: TCP bind and connect %s", abi, abi >= 4 ? "handled" : "not known yet");
		ok(landlock_scopes(abi) == (abi >= 6 ? 3u : 0u),
		   "ABI %d: abstract unix sockets and signals %s", abi,
		   abi >= 6 ? "scoped" : "not scoped");
		ok(landlock_rw_dir_rights(abi) == (fs_want[abi] & ~(MAKE_CHAR | MAKE_BLOCK)),
		   "ABI %d: a run's own directories allow all but device nodes", abi);
	}
	ok((landlock_fs_rights(9) & RESOLVE_UNIX) && (landlock_rw_dir_rights(9) & RESOLVE_UNIX) &&
	       !(landlock_fs_rights(8) & RESOLVE_UNIX),
	   "RESOLVE_UNIX (1 << 16) is handled from ABI 9, and granted only in the run's "
	   "directories");
	ok(landlock_fs_rights(10) == (fs_want[9]), "a newer ABI handles what this code knows");
	return tap_done();
}
