/*
 * sessioninit.h - a session's init (sessioninit.c), the spec's init_session hook (sandbox.h).
 */
#ifndef CODEBOX_SESSIONINIT_H
#define CODEBOX_SESSIONINIT_H

#include <signal.h>
#include <stdnoreturn.h>
#include <sys/types.h>

#include "box/sandbox.h"

/*
 * A session's init, once its program prog waits for cells on the cell socket (init's end
 * cell_fd): serves executions on s->session_fd, one connection at a time, until it is closed,
 * its program dies, or it has been idle or alive for longer than its bounds; then kills
 * everything of it and ends (the worker that finds it gone removes its directory and cgroup).
 * The creating worker's pipes are not needed: it learns the session is ready from a PING
 * answered here. Never returns.
 */
noreturn void sessioninit_serve(struct sandbox_spec *s, pid_t prog, int cell_fd,
                                const sigset_t *waitmask);

#endif
