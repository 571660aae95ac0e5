/*
 * sessionfiles.c - a live session's files: PUT, GET and DELETE /sessions/{id}/files/{path},
 * and GET /sessions/{id}/files[?path=dir], a listing (API.md, "A session's files").
 *
 * A session's working directory is a tmpfs mounted only in its box's mount namespace: no path
 * of the worker's names it. The worker asks the session's init for it (SESSION_OP_WORKDIR on
 * its socket, answered between cells and during one alike) and gets an O_PATH fd of it. What
 * init sends is untrusted (the program could have tampered with init only by a kernel flaw,
 * but a worker never takes a sandbox's word): the fd must be a directory on a tmpfs of exactly
 * the session's diskBytes, owned by the session's uid (sessionfiles_check_dir()).
 *
 * Every file operation then runs beneath that fd with port 8888's rules (workspace.h): the
 * path, as the client sent it (REQUEST_URI, percent-decoded once), resolved by its letters
 * first (one that climbs out is refused before anything is looked up), then opened with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV), an
 * O_PATH handle first whose type is checked, so that a symlink, a FIFO, a socket or a device a
 * cell left is never followed nor opened. A PUT streams the body through a 64 KiB window into
 * an unnamed file of the session's tmpfs (O_TMPFILE: its size bound is the upload's, and a
 * failed upload leaves nothing), which is named only once whole, replacing a regular file of
 * that name atomically. Under a root pool the worker works with the session's own host uid as
 * its fsuid, so that the files it makes are the program's to change, and it can do nothing in
 * the session's directory that the program could not. No lock of the session is taken: a cell
 * may run meanwhile, and init answers its socket then too.
 *
 * The top level's main.py and result.json are the cell's own (every cell rewrites the one and
 * removes the other): never listed, written or removed here.
 */
#include "http/sessionfiles.h"

#include "http/http.h"
#include "core/jsonw.h"
#include "core/log.h"
#include "run/sessionrun.h"
#include "core/sessionproto.h"
#include "core/utf8.h"
#include "core/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/fsuid.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

/* The longest {path} taken, percent-decoded. */
#define SESSIONFILES_MAX_URI_PATH 8192

bool
sessionfiles_route(const char *sub)
{
	return strcmp(sub, "files") == 0 || strncmp(sub, "files/", 6) == 0;
}

int
sessionfiles_check_dir(int fd, const struct session_rec *rec)
{
	unsigned long long page = (unsigned long long)sysconf(_SC_PAGESIZE);
	uid_t owner = rec->uid != 0 ? (uid_t)rec->uid : geteuid();
	struct statfs sf;
	struct stat sb;

	if (fstat(fd, &sb) < 0 || fstatfs(fd, &sf) < 0)
		return -1;
	/* the tmpfs's size is the session's diskBytes, in pages (tmpfs rounds it up) */
	if (!S_ISDIR(sb.st_mode) || sb.st_uid != owner || sf.f_type != TMPFS_MAGIC ||
	    (unsigned long long)sf.f_blocks * (unsigned long long)sf.f_bsize !=
	        (rec->disk_bytes + page - 1) / page * page) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

/* File operations as the session's own host uid (a root pool's), the worker's again after. */
static void
sessionfiles_as_owner(const struct session_rec *rec, bool on)
{
	if (geteuid() != 0 || rec->uid == 0)
		return;
	(void)setfsgid(on ? rec->uid : 0);
	(void)setfsuid(on ? rec->uid : 0);
}

/* Whether rel (workspace_path_resolve()'s) is one of the cell's own files. */
static bool
sessionfiles_reserved(const char *rel)
{
	return strcmp(rel, "main.py") == 0 || strcmp(rel, "result.json") == 0;
}

/* Where a request's {path} leads: rel beneath the working directory ("." for itself), or 0 with
 * the request answered (400). allow_root: "." (the directory itself) is acceptable. */
static bool
sessionfiles_resolve(FCGX_Request *req, const char *path, size_t len, char *rel, size_t rel_len,
                     bool allow_root)
{
	const char *why = NULL;

	if (len > 0 && path[0] == '/')
		why = "the path must be relative to the session's working directory (no leading "
		      "'/')";
	else if (workspace_path_resolve(path, len, rel, rel_len) != WORKSPACE_INSIDE)
		why = "the path leads out of the session's working directory, or is too long";
	else if (strcmp(rel, ".") == 0 ? !allow_root : !workspace_path_ok(rel, strlen(rel)))
		why = "the path must name a file beneath the session's working directory: no "
		      "empty path, no control character";
	else if (sessionfiles_reserved(rel))
		why = "main.py and result.json at the top of the working directory are the cells' "
		      "own files";
	if (why == NULL)
		return true;
	http_send_message(req, 400, NULL, "invalid_request", why);
	return false;
}

/* An operation's failure on rel (errno e), as the client's answer. */
static void
sessionfiles_failed(FCGX_Request *req, const char *rel, int e)
{
	char msg[4300];

	switch (e) {
	case ENOENT:
		snprintf(msg, sizeof(msg), "no file '%s' in the session", rel);
		http_send_message(req, 404, NULL, "not_found", msg);
		return;
	case ELOOP:
	case EXDEV:
	case ENXIO:
	case EEXIST:
		snprintf(msg, sizeof(msg),
		         "'%s' is, or goes through, a symlink or a special file: not served", rel);
		http_send_message(req, 403, NULL, "forbidden", msg);
		return;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		http_send_message(req, 413, NULL, "request_too_large",
		                  "the session's disk is full: its diskBytes (or its file count) "
		                  "leaves no room for this file");
		return;
	case EISDIR:
	case ENOTDIR:
	case ENOTEMPTY:
		snprintf(msg, sizeof(msg), "'%s': %s", rel, strerror(e));
		http_send_message(req, 409, NULL, "conflict", msg);
		return;
	case ENAMETOOLONG:
		http_send_message(req, 400, NULL, "invalid_request",
		                  "a name in the path is longer than 255 bytes");
		return;
	default:
		log_msg(LOG_ERROR, "a session's file operation failed: %s", strerror(e));
		http_send_message(req, 500, NULL, "sandbox_error",
		                  "the file operation failed; see the service log");
		return;
	}
}

/* The content type of a file by its name's extension; application/octet-stream else. */
static const char *
sessionfiles_type(const char *rel)
{
	static const struct {
		const char *ext, *type;
	} types[] = {
	    {"txt", "text/plain; charset=utf-8"},
	    {"log", "text/plain; charset=utf-8"},
	    {"py", "text/x-python; charset=utf-8"},
	    {"md", "text/markdown; charset=utf-8"},
	    {"csv", "text/csv; charset=utf-8"},
	    {"tsv", "text/tab-separated-values; charset=utf-8"},
	    {"json", "application/json"},
	    {"ipynb", "application/x-ipynb+json"},
	    {"html", "text/html; charset=utf-8"},
	    {"htm", "text/html; charset=utf-8"},
	    {"xml", "application/xml"},
	    {"yaml", "application/yaml"},
	    {"yml", "application/yaml"},
	    {"svg", "image/svg+xml"},
	    {"png", "image/png"},
	    {"jpg", "image/jpeg"},
	    {"jpeg", "image/jpeg"},
	    {"gif", "image/gif"},
	    {"webp", "image/webp"},
	    {"pdf", "application/pdf"},
	    {"zip", "application/zip"},
	    {"gz", "application/gzip"},
	    {"tar", "application/x-tar"},
	    {"parquet", "application/vnd.apache.parquet"},
	};
	const char *dot = strrchr(rel, '.'), *slash = strrchr(rel, '/');

	if (dot != NULL && (slash == NULL || dot > slash))
		for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
			if (strcasecmp(dot + 1, types[i].ext) == 0)
				return types[i].type;
	return "application/octet-stream";
}

/* GET /sessions/{id}/files/{path}: a regular file's bytes. */
static void
sessionfiles_get(FCGX_Request *req, const struct session_rec *rec, int dfd, const char *rel)
{
	struct stat sb;
	int fd, e;

	sessionfiles_as_owner(rec, true);
	fd = workspace_open(dfd, rel, O_RDONLY);
	e = errno;
	sessionfiles_as_owner(rec, false);
	if (fd < 0) {
		sessionfiles_failed(req, rel, e);
		return;
	}
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode)) {
		e = errno;
		close(fd);
		sessionfiles_failed(req, rel, e);
		return;
	}
	/* a browser must not take a session's HTML or SVG for the service's own */
	http_send_file(req, sessionfiles_type(rel),
	               "Content-Disposition: attachment\r\nX-Content-Type-Options: nosniff", fd,
	               (unsigned long long)sb.st_size);
	close(fd);
}

/* The body into fd, through a 64 KiB window: 0, or an errno (ENOSPC: the disk is full;
 * EPIPE: the body ended short). */
static int
sessionfiles_body_to(FCGX_Request *req, int fd, unsigned long long left)
{
	static char buf[65536];

	while (left > 0) {
		int want = left < sizeof(buf) ? (int)left : (int)sizeof(buf);
		int r = FCGX_GetStr(buf, want, req->in);
		if (r <= 0)
			return EPIPE; /* shorter than its CONTENT_LENGTH: nginx gave up on it */
		for (int done = 0; done < r;) {
			ssize_t w = write(fd, buf + done, (size_t)(r - done));
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				return w < 0 ? errno : ENOSPC;
			done += (int)w;
		}
		left -= (unsigned long long)r;
	}
	return 0;
}

/* PUT /sessions/{id}/files/{path}: the body becomes the file (201 made, 200 replaced). */
static void
sessionfiles_put(FCGX_Request *req, const struct session_rec *rec, int dfd, const char *rel)
{
	unsigned long long len;
	struct stat sb;
	bool existed;
	int fd, h, e = 0;

	if (http_content_length(req, &len) < 0) {
		http_send_message(req, 400, NULL, "invalid_request",
		                  "the Content-Length is malformed");
		return;
	}
	if (len > rec->disk_bytes) {
		http_send_message(req, 413, NULL, "request_too_large",
		                  "the file is larger than the session's disk (diskBytes)");
		return;
	}
	sessionfiles_as_owner(rec, true);
	h = workspace_open(dfd, rel, O_PATH);
	existed = h >= 0 && fstat(h, &sb) == 0 && S_ISREG(sb.st_mode);
	if (h >= 0)
		close(h);
	fd = workspace_tmpfile(dfd, 0600);
	if (fd < 0)
		e = errno;
	sessionfiles_as_owner(rec, false);
	if (fd >= 0)
		e = sessionfiles_body_to(req, fd, len);
	if (e == 0) {
		/* whole: named now, replacing a regular file of that name at once */
		sessionfiles_as_owner(rec, true);
		if (workspace_link(dfd, fd, rel) < 0)
			e = errno;
		sessionfiles_as_owner(rec, false);
	}
	if (fd >= 0)
		close(fd); /* unnamed, it is gone with the fd */
	if (e == EPIPE) {
		http_send_message(req, 400, NULL, "invalid_request",
		                  "the body is shorter than its Content-Length");
		return;
	}
	if (e != 0) {
		sessionfiles_failed(req, rel, e);
		return;
	}
	{
		struct jsonw w;
		size_t n;
		char *doc, clean[3 * 4096];

		n = utf8_sanitize((const unsigned char *)rel, strlen(rel), clean);
		jsonw_init(&w);
		jsonw_lit(&w, "{\"path\":");
		jsonw_str(&w, clean, n);
		jsonw_lit(&w, ",\"size\":");
		jsonw_int(&w, (long long)len);
		jsonw_lit(&w, "}");
		doc = jsonw_take(&w, &n);
		if (doc == NULL) {
			http_send_message(req, 500, NULL, "sandbox_error",
			                  "the worker is out of memory");
			return;
		}
		http_send(req, existed ? 200 : 201, NULL, doc, n);
		free(doc);
	}
}

/* DELETE /sessions/{id}/files/{path}: a regular file, or an empty directory (204). */
static void
sessionfiles_delete(FCGX_Request *req, const struct session_rec *rec, int dfd, char *rel)
{
	char *slash = strrchr(rel, '/');
	const char *name = slash != NULL ? slash + 1 : rel;
	struct stat sb;
	int parent, rc = -1, e;

	if (slash != NULL)
		*slash = '\0';
	sessionfiles_as_owner(rec, true);
	parent = workspace_open(dfd, slash != NULL ? rel : ".", O_RDONLY | O_DIRECTORY);
	e = errno;
	if (parent >= 0 && fstatat(parent, name, &sb, AT_SYMLINK_NOFOLLOW) == 0) {
		/* the name itself is removed, never followed: only what the API serves */
		if (S_ISREG(sb.st_mode))
			rc = unlinkat(parent, name, 0);
		else if (S_ISDIR(sb.st_mode))
			rc = unlinkat(parent, name, AT_REMOVEDIR);
		else
			errno = S_ISLNK(sb.st_mode) ? ELOOP : ENXIO;
	}
	if (parent >= 0)
		e = errno;
	sessionfiles_as_owner(rec, false);
	if (parent >= 0)
		close(parent);
	if (slash != NULL)
		*slash = '/';
	if (rc < 0) {
		sessionfiles_failed(req, rel, e == EEXIST ? ENOTEMPTY : e);
		return;
	}
	http_send(req, 204, NULL, "", 0);
}

/* One entry of a listing. */
struct sessionfiles_entry {
	char *path;
	bool dir;
	long long size;
	long long modified_ms;
};

struct sessionfiles_list {
	struct sessionfiles_entry *e;
	size_t n;
	bool truncated;
	bool failed;
};

static int
sessionfiles_cmp(const void *a, const void *b)
{
	return strcmp(((const struct sessionfiles_entry *)a)->path,
	              ((const struct sessionfiles_entry *)b)->path);
}

/* Adds prefix/name to l; false when l is full (or out of memory). */
static bool
sessionfiles_add(struct sessionfiles_list *l, const char *prefix, const char *name,
                 const struct stat *sb)
{
	struct sessionfiles_entry *more;
	char *p;

	if (l->n >= SESSIONFILES_MAX_LIST) {
		l->truncated = true;
		return false;
	}
	if ((l->n & (l->n - 1)) == 0) { /* 0, 1, 2, 4...: doubled */
		more = realloc(l->e, (l->n ? 2 * l->n : 1) * sizeof(*l->e));
		if (more == NULL) {
			l->failed = true;
			return false;
		}
		l->e = more;
	}
	if (asprintf(&p, "%s%s%s", prefix, *prefix ? "/" : "", name) < 0) {
		l->failed = true;
		return false;
	}
	l->e[l->n++] = (struct sessionfiles_entry){
	    .path = p,
	    .dir = S_ISDIR(sb->st_mode),
	    .size = (long long)sb->st_size,
	    .modified_ms = (long long)sb->st_mtim.tv_sec * 1000 + sb->st_mtim.tv_nsec / 1000000,
	};
	return true;
}

/*
 * Lists the regular files and directories beneath dirfd (an fd it owns and closes) into l,
 * their paths after prefix ("" at the top: the working directory's main.py and result.json
 * are left out there), depth levels deep already. Each directory beneath is opened beneath its
 * parent, never through a symlink (workspace_open()).
 */
static void
sessionfiles_walk(int dirfd, const char *prefix, bool top, int depth, struct sessionfiles_list *l)
{
	DIR *d = fdopendir(dirfd);
	struct dirent *de;

	if (d == NULL) {
		close(dirfd);
		return;
	}
	while (!l->truncated && !l->failed && (de = readdir(d)) != NULL) {
		struct stat sb;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    (top && sessionfiles_reserved(de->d_name)) ||
		    fstatat(dirfd, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !(S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode)))
			continue;
		if (!sessionfiles_add(l, prefix, de->d_name, &sb))
			break;
		if (S_ISDIR(sb.st_mode) && depth < SESSIONFILES_MAX_DEPTH) {
			int sub = workspace_open(dirfd, de->d_name, O_RDONLY | O_DIRECTORY);
			if (sub >= 0)
				sessionfiles_walk(sub, l->e[l->n - 1].path, false, depth + 1, l);
		}
	}
	closedir(d);
}

/* A listing's answer: {"path", "files": [{"path", "type", "size", "modifiedMs"}...],
 * "truncated"}; the paths are relative to the working directory. */
static char *
sessionfiles_list_doc(const char *rel, struct sessionfiles_list *l, size_t *len)
{
	static char clean[3 * PATH_MAX];
	struct jsonw w;
	size_t n;

	jsonw_init(&w);
	n = utf8_sanitize((const unsigned char *)rel, strlen(rel), clean);
	jsonw_lit(&w, "{\"path\":");
	jsonw_str(&w, clean, n);
	jsonw_lit(&w, ",\"files\":[");
	for (size_t i = 0; i < l->n; i++) {
		const struct sessionfiles_entry *e = &l->e[i];
		size_t pl = strlen(e->path);
		if (i > 0)
			jsonw_lit(&w, ",");
		jsonw_lit(&w, "{\"path\":");
		if (pl < PATH_MAX) {
			n = utf8_sanitize((const unsigned char *)e->path, pl, clean);
			jsonw_str(&w, clean, n);
		} else {
			jsonw_lit(&w, "null");
		}
		jsonw_lit(&w, e->dir ? ",\"type\":\"directory\",\"size\":"
		                     : ",\"type\":\"file\","
		                       "\"size\":");
		jsonw_int(&w, e->size);
		jsonw_lit(&w, ",\"modifiedMs\":");
		jsonw_int(&w, e->modified_ms);
		jsonw_lit(&w, "}");
	}
	jsonw_lit(&w, l->truncated ? "],\"truncated\":true}" : "],\"truncated\":false}");
	return jsonw_take(&w, len);
}

/* GET /sessions/{id}/files[?path=dir]: every regular file and directory beneath. */
static void
sessionfiles_list(FCGX_Request *req, const struct session_rec *rec, int dfd, const char *rel)
{
	struct sessionfiles_list l = {0};
	size_t len;
	char *doc;
	int fd, e;

	sessionfiles_as_owner(rec, true);
	fd = workspace_open(dfd, rel, O_RDONLY | O_DIRECTORY);
	e = errno;
	if (fd >= 0) {
		/* relative to the working directory: a subdirectory's entries start with it */
		bool top = strcmp(rel, ".") == 0;
		sessionfiles_walk(fd, top ? "" : rel, top, 0, &l);
	}
	sessionfiles_as_owner(rec, false);
	if (fd < 0) {
		sessionfiles_failed(req, rel, e);
		return;
	}
	if (l.truncated)
		log_msg(LOG_WARN, "a session's listing: cut at %d entries", SESSIONFILES_MAX_LIST);
	if (l.n > 0)
		qsort(l.e, l.n, sizeof(*l.e), sessionfiles_cmp);
	doc = l.failed ? NULL : sessionfiles_list_doc(rel, &l, &len);
	for (size_t i = 0; i < l.n; i++)
		free(l.e[i].path);
	free(l.e);
	if (doc == NULL) {
		http_send_message(req, 500, NULL, "sandbox_error", "the worker is out of memory");
		return;
	}
	http_send_doc(req, HTTP_JSON, doc, len);
}

/* Copies the regular file name of from (an fd of a directory) into to, mode and times kept.
 * Returns 0, or -1 (errno). */
static int
sessionfiles_copy_file(int from, int to, const char *name, const struct stat *sb)
{
	int src = workspace_open(from, name, O_RDONLY), dst, e = 0;
	off_t left = sb->st_size;

	if (src < 0)
		return -1;
	dst = workspace_tmpfile(to, sb->st_mode & 07777);
	if (dst < 0) {
		e = errno;
		close(src);
		errno = e;
		return -1;
	}
	/* at most its size at the look: one that grows meanwhile is cut there */
	while (left > 0 && e == 0) {
		ssize_t n = sendfile(dst, src, NULL, (size_t)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			e = n < 0 ? errno : 0;
		if (n <= 0)
			break;
		left -= n;
	}
	if (e == 0) {
		const struct timespec times[2] = {sb->st_atim, sb->st_mtim};
		(void)futimens(dst, times);
		if (workspace_link(to, dst, name) < 0)
			e = errno;
	}
	close(src);
	close(dst);
	errno = e;
	return e == 0 ? 0 : -1;
}

/* sessionfiles_copy()'s walk of from (an fd it owns and closes) into to (an O_PATH fd of a
 * directory, borrowed); *count entries copied so far. */
static int
sessionfiles_copy_dir(int from, int to, bool top, int depth, size_t *count)
{
	DIR *d = fdopendir(from);
	struct dirent *de;
	int rc = 0;

	if (d == NULL) {
		close(from);
		return -1;
	}
	while (rc == 0 && (de = readdir(d)) != NULL) {
		struct stat sb;
		int sf, st;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    (top && sessionfiles_reserved(de->d_name)) ||
		    fstatat(from, de->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
		    !(S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode)))
			continue; /* a symlink, FIFO, socket or device stays behind */
		if (++*count > SESSIONFILES_MAX_LIST) {
			errno = EFBIG;
			rc = -1;
			break;
		}
		if (S_ISREG(sb.st_mode)) {
			/* one the program made unreadable to itself stays behind too */
			if (sessionfiles_copy_file(from, to, de->d_name, &sb) < 0 &&
			    errno != EACCES)
				rc = -1;
			continue;
		}
		if (depth >= SESSIONFILES_MAX_DEPTH ||
		    (mkdirat(to, de->d_name, (sb.st_mode & 07777) | 0700) < 0 && errno != EEXIST))
			continue;
		sf = workspace_open(from, de->d_name, O_RDONLY | O_DIRECTORY);
		st = workspace_open(to, de->d_name, O_PATH);
		if (sf >= 0 && st >= 0)
			rc = sessionfiles_copy_dir(sf, st, false, depth + 1, count);
		else if (sf >= 0)
			close(sf);
		if (st >= 0)
			close(st);
	}
	closedir(d);
	return rc;
}

int
sessionfiles_copy(int from_fd, int to_fd, uint32_t owner_uid)
{
	const struct session_rec owner = {.uid = owner_uid};
	size_t count = 0;
	int from, rc = -1, e;

	sessionfiles_as_owner(&owner, true);
	from = workspace_open(from_fd, ".", O_RDONLY | O_DIRECTORY);
	if (from >= 0)
		rc = sessionfiles_copy_dir(from, to_fd, true, 0, &count);
	e = errno;
	sessionfiles_as_owner(&owner, false);
	errno = e;
	return rc;
}

/* The {path} of a listing's query (?path=dir), percent-decoded into out; "" when absent.
 * Returns its length, or -1 (malformed or too long). */
static long
sessionfiles_query_path(const char *query, char *out, size_t out_len)
{
	out[0] = '\0';
	for (const char *p = query; p != NULL && *p != '\0';) {
		if (strncmp(p, "path=", 5) == 0) {
			char enc[SESSIONFILES_MAX_URI_PATH];
			size_t n = strcspn(p + 5, "&");
			if (n >= sizeof(enc))
				return -1;
			/* '+' is a space in a query */
			for (size_t i = 0; i < n; i++)
				enc[i] = p[5 + i] == '+' ? ' ' : p[5 + i];
			enc[n] = '\0';
			return http_uri_decode(enc, out, out_len);
		}
		p = strchr(p, '&');
		p = p != NULL ? p + 1 : NULL;
	}
	return 0;
}

/* The session's working directory, asked of its init and checked; -1 with the request
 * answered (the session ended meanwhile: 404; init does not answer: 503). */
static int
sessionfiles_dir(FCGX_Request *req, const struct session_rec *rec, const char *sock_path)
{
	struct session_answer a;
	int fd = run_session_workdir(sock_path, &a);

	if (fd >= 0 && sessionfiles_check_dir(fd, rec) == 0)
		return fd;
	if (fd >= 0) {
		char name[SESSION_LOG_NAME_LEN + 1];
		session_log_name(rec->id, name);
		log_msg(LOG_ERROR,
		        "session %s: its init sent a working directory that is not its tmpfs",
		        name);
		close(fd);
		http_send_message(req, 503, NULL, "sandbox_unavailable",
		                  "the session's files cannot be reached; see the service log");
	} else if (errno == EBUSY) {
		http_send_message(req, 503, "Retry-After: 1", "sandbox_unavailable",
		                  "the session did not answer; retry in a moment");
	} else {
		http_send_message(req, 404, NULL, "not_found", "no such session");
	}
	return -1;
}

void
sessionfiles_handle(FCGX_Request *req, const char *method, const struct session_rec *rec,
                    const char *sock_path)
{
	static char path[SESSIONFILES_MAX_URI_PATH], rel[PATH_MAX];
	const char *uri = FCGX_GetParam("REQUEST_URI", req->envp);
	char prefix[64];
	bool list;
	long n;
	int dfd;

	/* the request URI as sent: nginx chose the location by its $uri, whose dot segments are
	 * resolved; one that does not start the same way had some (refused, not reinterpreted) */
	snprintf(prefix, sizeof(prefix), "/sessions/%s/files", rec->id);
	if (uri == NULL || strncmp(uri, prefix, strlen(prefix)) != 0 ||
	    !strchr("/?", uri[strlen(prefix)])) {
		http_send_message(
		    req, 400, NULL, "invalid_request",
		    "the path must be beneath the session's working directory, with no "
		    "'.' or '..' segment");
		return;
	}
	uri += strlen(prefix);
	list = *uri != '/';
	if (list && strcmp(method, "GET") != 0) {
		http_send_message(
		    req, 405, "Allow: GET", "method_not_allowed",
		    "use GET /sessions/{id}/files to list the files; PUT, GET or DELETE "
		    "/sessions/{id}/files/{path} for one");
		return;
	}
	if (!list && strcmp(method, "GET") != 0 && strcmp(method, "PUT") != 0 &&
	    strcmp(method, "DELETE") != 0) {
		http_send_message(req, 405, "Allow: GET, PUT, DELETE", "method_not_allowed",
		                  "use PUT, GET or DELETE /sessions/{id}/files/{path}");
		return;
	}
	n = list ? sessionfiles_query_path(*uri == '?' ? uri + 1 : NULL, path, sizeof(path))
	         : http_uri_decode(uri + 1, path, sizeof(path));
	if (n < 0) {
		http_send_message(req, 400, NULL, "invalid_request",
		                  "the path is too long or not a well-formed percent-encoded path");
		return;
	}
	if (!sessionfiles_resolve(req, path, (size_t)n, rel, sizeof(rel), list))
		return;
	dfd = sessionfiles_dir(req, rec, sock_path);
	if (dfd < 0)
		return;
	if (list)
		sessionfiles_list(req, rec, dfd, rel);
	else if (strcmp(method, "GET") == 0)
		sessionfiles_get(req, rec, dfd, rel);
	else if (strcmp(method, "PUT") == 0)
		sessionfiles_put(req, rec, dfd, rel);
	else
		sessionfiles_delete(req, rec, dfd, rel);
	close(dfd);
}
