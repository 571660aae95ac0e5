/*
 * isolation.h - which isolation layers are in force on this host, probed at start-up.
 */
#ifndef CODEBOX_ISOLATION_H
#define CODEBOX_ISOLATION_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* The one uid and gid a run has inside its user namespace (sandbox.h: SANDBOX_INNER_ID), as
 * /isolation reports it. */
#define ISO_INNER_ID 1000

enum iso_layer {
	ISO_USERNS,
	ISO_PIDNS,
	ISO_NETNS,
	ISO_MOUNTNS,
	ISO_IPCNS,
	ISO_UTSNS,
	ISO_SECCOMP,
	ISO_LANDLOCK,
	ISO_CGROUP,
	ISO_CGROUPNS,    /* a cgroup namespace: /proc/self/cgroup names nothing of the host */
	ISO_MASKEDPATHS, /* the OCI masked and read-only /proc paths, /proc/cmdline... */
	ISO_POOLMEMORY,  /* one memory budget for all runs together */
	ISO_CPUQUOTA,    /* a CFS quota per run */
	ISO_LAYER_COUNT,
};

struct isolation {
	bool on[ISO_LAYER_COUNT];
	char why_off[ISO_LAYER_COUNT][160];   /* why a layer is off */
	bool proc;                            /* a private /proc inside the mount namespace */
	bool high_pids;                       /* the program's pids start near pid_max */
	unsigned long long pool_memory_bytes; /* the budget in force (ISO_POOLMEMORY) */
	int landlock_abi;                     /* the kernel's, even when Landlock is disabled */
	int cgroup_version;
	bool root_pool;  /* runs get per-worker host uids */
	uid_t uid_first; /* host uids runs execute as */
	uid_t uid_last;
	uid_t session_uid_first;        /* a root pool's: each session one of its own from here */
	unsigned session_uid_count;     /* 0: sessions run as their worker's uid */
	unsigned long sigpending_share; /* a non-root pool's RLIMIT_SIGPENDING per box; 0: none */
};

/* "userns", "pidns", ... ; NULL for an unknown value. */
const char *iso_layer_name(enum iso_layer layer);

/*
 * Parses a comma-separated list of layer names (CODEBOX_DISABLE, CODEBOX_REQUIRE) into set.
 * Returns 0, or -1 naming the unknown word in why.
 */
int iso_parse_list(const char *list, bool set[ISO_LAYER_COUNT], char *why, size_t why_len);

/*
 * Tries to create each namespace with a throw-away clone() and fills the namespace layers;
 * layers in disabled stay off. Without a user namespace, the others need a root pool.
 * A mount namespace also needs the pid namespace (its init reads result.json); so do the
 * cgroup namespace (init enters it) and the masked /proc paths (in the mount namespace).
 */
void iso_probe_namespaces(struct isolation *iso, const bool disabled[ISO_LAYER_COUNT]);

/* Turns a layer off with a reason (and the layers that depend on it). */
void iso_turn_off(struct isolation *iso, enum iso_layer layer, const char *why);

/* clone() flags for the layers in force; 0 means direct mode (no pid namespace). */
int iso_clone_flags(const struct isolation *iso);

/* How a run's processes are capped: "cgroup", "rlimit-nproc" (RLIMIT_NPROC counts the run
 * alone: in its own user namespace, or under its own host uid with a root pool) or "none". */
const char *iso_process_limit(const struct isolation *iso);

/*
 * Whether the seccomp filter must deny socket(AF_UNIX): yes unless Landlock is in force with
 * ABI >= 9, which confines connect() to pathname sockets (LANDLOCK_ACCESS_FS_RESOLVE_UNIX;
 * ABI 6 already scopes abstract ones). Pure.
 */
bool iso_deny_unix_socket(bool landlock_on, int landlock_abi);

/* Writes one line listing the layers in force into buf. */
void iso_summary(const struct isolation *iso, char *buf, size_t len);

/* Names the first required layer that is off, in why; returns -1 then, else 0. */
int iso_check_required(const struct isolation *iso, const bool required[ISO_LAYER_COUNT], char *why,
                       size_t why_len);

#endif
