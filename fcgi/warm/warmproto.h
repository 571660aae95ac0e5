/*
 * warmproto.h - what the pool's processes and the warm processes say to each other. Private to
 * warm.c (the supervisor's and the workers' side), zygote.c and template.c, and main.c (the
 * zygote's argument, WARM_ZYGOTE_ARG).
 *
 *   supervisor ──zygote socket (SOCK_SEQPACKET)──▶ zygote
 *       one struct warm_zygote_config with the tiers' serving sockets and the sandbox's /etc
 *       as SCM_RIGHTS; the zygote answers one struct warm_ready. Closing it retires the
 *       zygote: its templates end between two requests, then it ends.
 *   worker ──tier socket (one per tier, SOCK_SEQPACKET, made once by the supervisor)──▶ template
 *       one struct warm_box_request with the child's ends of the run's pipes, the answer's
 *       socket and, without a mount namespace, the worker's Landlock ruleset; the template
 *       answers one struct warm_box_answer with init's pidfd on the answer's socket.
 *
 * Every message is a fixed-size struct without pointers: the two sides are different program
 * images and share no address.
 */
#ifndef CODEBOX_WARMPROTO_H
#define CODEBOX_WARMPROTO_H

#include <linux/filter.h>
#include <stdint.h>

#include "core/runconfig.h"
#include "warm/warmsettings.h"

/* The zygote is the pool's own binary run again as: codebox-pool WARM_ZYGOTE_ARG, with its
 * socket to the supervisor at fd WARM_ZYGOTE_FD. */
#define WARM_ZYGOTE_ARG "--warm-zygote"
#define WARM_ZYGOTE_FD 3

/* How long the zygote may take to import the modules (a cold page cache, sanitizers). */
#define WARM_ZYGOTE_READY_MS 180000

/* How long a template whose zygote died serves on, at most, for the pool's next zygote to
 * serve its tier (the pool ends it as soon as one does). */
#define WARM_ORPHAN_MS 120000

/* A seccomp filter is at most BPF_MAXINSNS instructions. */
#define WARM_SECCOMP_MAX 4096

#define WARM_CONFIG_MAGIC 0x63627a31u
struct warm_zygote_config {
	uint32_t magic;
	struct warm_settings settings;
	char python[256];
	uint32_t seccomp_len; /* instructions; 0: no filter */
	uint32_t seccomp_denies_unix;
	struct sock_filter seccomp[WARM_SECCOMP_MAX];
	uint32_t has_init; /* codebox-init is the last fd: the one-copy start (sandbox.h) */
};
/* its fds, in this order: the light tier's serving socket, the heavy tier's (when it has
 * one), the sandbox's /etc directory (O_PATH), and with has_init codebox-init (a sealed
 * memfd) */
enum { WARM_FD_LIGHT, WARM_FD_HEAVY, WARM_FD_ETC, WARM_FD_INIT, WARM_FD_COUNT };

/* The zygote's ready report, and later, whenever a tier starts or stops serving, the same
 * message with tiers updated (the supervisor tells its workers). */
#define WARM_TIER_LIGHT 1u
#define WARM_TIER_HEAVY 2u
struct warm_ready {
	int32_t ok;
	uint32_t tiers;   /* WARM_TIER_*: the tiers whose template serves now */
	int32_t one_copy; /* its templates start runs with one copy (codebox-init exec'd) */
	char why[240];
};

#define WARM_BOX_MAGIC 0x63627862u
struct warm_box_request {
	uint32_t magic;
	struct run_settings run; /* the run's configuration, whole (runconfig.h) */
	uint8_t seccomp;         /* the filter is applied (the run's configuration has one) */
	uint8_t landlock_fd;     /* fd 6 is the worker's Landlock ruleset */
	uint8_t workspace;       /* the last fd is port 8888's workspace: an agent's command */
	uint8_t session;         /* the last fd is a session's listening socket (session.h) */
	uint64_t disk_bytes;
	char workdir[4096]; /* the run's directory, on the host: wiped once it is mounted */
};
/* its fds: stdout, stderr, error, control, report (the child's ends, in enum child_fd's order:
 * child.h), the answer's socket, and the ruleset when landlock_fd */
enum { WARM_BOX_FD_ANSWER = 5, WARM_BOX_FD_LANDLOCK = 6, WARM_BOX_FDS = 8 };

struct warm_box_answer {
	int32_t pid; /* or -errno */
	uint64_t as_bytes;
};
/* its fd: init's pidfd */

#endif
