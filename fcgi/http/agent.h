/*
 * agent.h - the agent-sandbox "python-runtime" protocol on port 8888 (API.md part 3).
 */
#ifndef CODEBOX_AGENT_H
#define CODEBOX_AGENT_H

#include <fcgiapp.h>
#include <stdbool.h>
#include <sys/types.h>

#include "run/history.h"
#include "core/isolation.h"
#include "core/limits.h"
#include "run/run.h"

/* The default command timeout (SANDBOX_EXEC_TIMEOUT_SECONDS unset or invalid). */
#define AGENT_DEFAULT_TIMEOUT_SECONDS 300

struct agent_config {
	int workspace_fd; /* -1: the protocol is off (off_reason says why) */
	const char *off_reason;
	unsigned long long workspace_bytes;
	uid_t uid; /* who owns the workspace's files, and whom agent runs execute as */
	gid_t gid;
	long timeout_ms; /* SANDBOX_EXEC_TIMEOUT_SECONDS */
	const struct isolation *iso;
	const struct history_config *history; /* the audit trail, or NULL */
};

/*
 * SANDBOX_EXEC_TIMEOUT_SECONDS: a finite number of seconds > 0 (fractions allowed), at most a
 * day. NULL or empty means the default; anything else invalid means the default too, and a
 * sentence for the log in warning (else warning[0] is '\0'). Returns milliseconds.
 */
long agent_timeout_ms(const char *value, char *warning, size_t warning_len);

/*
 * Serves one request of port 8888: endpoint is nginx's CODEBOX_ENDPOINT, one of agent.c's
 * table ("agent_execute", "agent_upload", "agent_download", "agent_list", "agent_exists";
 * another is answered 404). run is the worker's own
 * run configuration, stream the worker's run stream for agent runs (never its port 8080 one: a box
 * built ahead for those has no workspace), lock_fd its handle on the workspace's lock,
 * slots_dir_fd the directory of the pool's agent slot files (the runs directory). Takes an
 * agent slot for the request (fastcgi_param CODEBOX_AGENT_SLOTS, default 4), else answers
 * 429 at once. Always answers, but to a client that left during its command.
 */
void agent_handle(const struct agent_config *ac, const struct run_config *run,
                  struct run_stream *stream, int lock_fd, int slots_dir_fd, FCGX_Request *req,
                  const char *endpoint, const struct limits *l);

#endif
