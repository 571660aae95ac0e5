/*
 * sessionfiles.h - a live session's files over HTTP: PUT, GET and DELETE
 * /sessions/{id}/files/{path}, and GET /sessions/{id}/files (a listing).
 */
#ifndef CODEBOX_SESSIONFILES_H
#define CODEBOX_SESSIONFILES_H

#include <fcgiapp.h>
#include <stdbool.h>

#include "run/session.h"

/* The most entries a listing holds; more are cut ("truncated": true). */
#define SESSIONFILES_MAX_LIST 10000
/* How deep a listing goes beneath the directory it lists. */
#define SESSIONFILES_MAX_DEPTH 32

/* Whether sub (what follows /sessions/{id}/ in nginx's $uri) names the files surface. */
bool sessionfiles_route(const char *sub);

/*
 * Answers a request to session rec's files (its init's socket at sock_path), method being
 * GET, PUT or DELETE (another is answered 405). The path is taken from the request URI as the
 * client sent it (REQUEST_URI), never from nginx's $uri. The session was found for the
 * request's token; no lock of it is held (a cell may run meanwhile).
 */
void sessionfiles_handle(FCGX_Request *req, const char *method, const struct session_rec *rec,
                         const char *sock_path);

/*
 * Copies the regular files and directories beneath from_fd into to_fd (both O_PATH fds of
 * sessions' working directories, checked), as owner uid (0: the worker's own), but the top
 * level's main.py and result.json; symlinks and special files are left behind. Bounded by
 * SESSIONFILES_MAX_LIST entries and SESSIONFILES_MAX_DEPTH. Returns 0, or -1 (errno).
 */
int sessionfiles_copy(int from_fd, int to_fd, uint32_t owner_uid);

/*
 * Checks an fd a session's init sent for its working directory (untrusted): a directory, the
 * root of nothing but a tmpfs of rec's diskBytes, owned by rec's uid. Returns 0, or -1
 * (errno EPERM) when it is something else.
 */
int sessionfiles_check_dir(int fd, const struct session_rec *rec);

#endif
