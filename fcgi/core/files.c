/*
 * files.c - files into a run and out of it (files.h says how they travel).
 */
#include "core/files.h"

#include "core/buf.h"
#include "core/jsonw.h"
#include "core/utf8.h"
#include "core/util.h"
#include "core/workspace.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

unsigned long long
files_max_bytes(const struct limits *l)
{
	return l->disk_bytes / 2;
}

/* ---- base64 ---- */

static int
b64_value(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

char *
files_base64_decode(const char *s, size_t n, size_t *out_len)
{
	size_t pad = 0, o = 0;
	char *out;

	if (n % 4 != 0)
		return NULL;
	if (n > 0 && s[n - 1] == '=')
		pad = n > 1 && s[n - 2] == '=' ? 2 : 1;
	out = malloc(n / 4 * 3 + 1);
	if (out == NULL)
		return NULL;
	for (size_t i = 0; i < n; i += 4) {
		int v[4];
		bool last = i + 4 == n;
		for (int k = 0; k < 4; k++) {
			bool padded = last && k >= 4 - (int)pad;
			v[k] = padded ? 0 : b64_value(s[i + (size_t)k]);
			if (v[k] < 0) {
				free(out);
				return NULL;
			}
		}
		unsigned w = (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 |
		             (unsigned)v[3];
		out[o++] = (char)(w >> 16);
		if (!last || pad < 2)
			out[o++] = (char)(w >> 8);
		if (!last || pad < 1)
			out[o++] = (char)w;
		/* the bits a padded end leaves over must be zero (RFC 4648, canonical) */
		if (last && ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff)))) {
			free(out);
			return NULL;
		}
	}
	*out_len = o;
	return out;
}

/* ---- inputs ---- */

/* The rules of files.h for one path: port 8888's, plus lengths and the two reserved names. */
static const char *
path_problem(const char *p, size_t n)
{
	size_t depth = 0, start = 0;

	if (n == 0)
		return "is empty";
	if (n > FILES_MAX_PATH)
		return "is longer than 1024 bytes";
	if (memchr(p, '\0', n) != NULL || !workspace_path_ok(p, n))
		return "must be relative, with no empty, \".\" or \"..\" component and no control "
		       "character";
	for (size_t i = 0; i <= n; i++)
		if (i == n || p[i] == '/') {
			if (i - start > 255)
				return "has a component longer than 255 bytes";
			start = i + 1;
			depth++;
		}
	if (depth > FILES_MAX_DEPTH)
		return "is more than 16 levels deep";
	if ((n == 7 && memcmp(p, "main.py", 7) == 0) ||
	    (n == 11 && memcmp(p, "result.json", 11) == 0))
		return "names main.py or result.json, which the sandbox writes and reads";
	return NULL;
}

/* whether a is b or a directory above it, or the other way round */
static bool
paths_clash(const char *a, size_t an, const char *b, size_t bn)
{
	size_t n = an < bn ? an : bn;

	return memcmp(a, b, n) == 0 && (an == bn || (an < bn ? b[an] : a[bn]) == '/');
}

#define FILES_SHAPE                                                                                \
	"files must be an array of at most 100 objects {\"path\": \"<relative path>\", "           \
	"\"content\": \"<text>\"} or {\"path\", \"contentBase64\"}"

int
files_parse(json_t *v, unsigned long long max_bytes, char **blob, size_t *blob_len, size_t *count,
            char *message, size_t message_len)
{
	struct buf b = BUF_EMPTY;
	unsigned long long total = 0;
	size_t i, n;
	json_t *f;

	*blob = NULL;
	*blob_len = *count = 0;
	if (!json_is_array(v) || json_array_size(v) > FILES_MAX_COUNT) {
		snprintf(message, message_len, "%s (files: %s)", FILES_SHAPE,
		         json_is_array(v) ? "too_long" : "list_type");
		return -1;
	}
	n = json_array_size(v);
	json_array_foreach(v, i, f)
	{
		json_t *path = json_object_get(f, "path"), *text = json_object_get(f, "content"),
		       *b64s = json_object_get(f, "contentBase64"), *x;
		const char *key, *problem;
		char *decoded = NULL;
		size_t plen, dlen;
		struct file_rec rec;

		if (!json_is_object(f)) {
			snprintf(message, message_len, "%s (files[%zu]: dict_type)", FILES_SHAPE,
			         i);
			goto invalid;
		}
		json_object_foreach(f, key, x)
		{
			if (strcmp(key, "path") != 0 && strcmp(key, "content") != 0 &&
			    strcmp(key, "contentBase64") != 0) {
				snprintf(message, message_len,
				         "a file has the keys path and content or contentBase64 "
				         "(files[%zu].%.40s: extra_forbidden)",
				         i, key);
				goto invalid;
			}
		}
		if (!json_is_string(path)) {
			snprintf(message, message_len,
			         "a file's path must be a string (files[%zu].path: %s)", i,
			         path == NULL ? "missing" : "string_type");
			goto invalid;
		}
		plen = json_string_length(path);
		problem = path_problem(json_string_value(path), plen);
		if (problem != NULL) {
			snprintf(message, message_len,
			         "a file's path %s (files[%zu].path: value_error)", problem, i);
			goto invalid;
		}
		if ((text == NULL) == (b64s == NULL)) {
			snprintf(
			    message, message_len,
			    "a file has exactly one of content and contentBase64 (files[%zu]: %s)",
			    i, text == NULL ? "missing" : "extra_forbidden");
			goto invalid;
		}
		if ((text != NULL && !json_is_string(text)) ||
		    (b64s != NULL && !json_is_string(b64s))) {
			snprintf(message, message_len,
			         "a file's %s must be a string (files[%zu].%s: "
			         "string_type)",
			         text ? "content" : "contentBase64", i,
			         text ? "content" : "contentBase64");
			goto invalid;
		}
		if (b64s != NULL) {
			decoded = files_base64_decode(json_string_value(b64s),
			                              json_string_length(b64s), &dlen);
			if (decoded == NULL) {
				snprintf(message, message_len,
				         "a file's contentBase64 must be padded base64 (RFC 4648) "
				         "(files[%zu].contentBase64: value_error)",
				         i);
				goto invalid;
			}
		} else {
			dlen = json_string_length(text);
		}
		total += dlen;
		if (total > max_bytes) {
			free(decoded);
			snprintf(message, message_len,
			         "the files hold more than %llu bytes in all, half the run's disk "
			         "(files[%zu]: too_long)",
			         max_bytes, i);
			goto invalid;
		}
		for (size_t k = 0; k < i; k++) {
			json_t *other = json_object_get(json_array_get(v, k), "path");
			if (paths_clash(json_string_value(other), json_string_length(other),
			                json_string_value(path), plen)) {
				free(decoded);
				snprintf(message, message_len,
				         "a file's path is files[%zu]'s, or a directory of it, or "
				         "below it "
				         "(files[%zu].path: value_error)",
				         k, i);
				goto invalid;
			}
		}
		rec.path_len = (uint32_t)plen;
		rec.data_len = (uint32_t)dlen;
		if (buf_put(&b, &rec, sizeof(rec)) < 0 ||
		    buf_put(&b, json_string_value(path), plen) < 0 ||
		    buf_put(&b, decoded ? decoded : json_string_value(text), dlen) < 0) {
			free(decoded);
			snprintf(message, message_len, "out of memory");
			goto invalid;
		}
		free(decoded);
	}
	*blob = buf_take(&b, blob_len);
	*count = n;
	return 0;
invalid:
	free(b.p);
	return -1;
}

/* Walks a blob of file_recs: the next record's path and data, or false at its end or where it
 * stops being well-formed. */
static bool
next_file(const char *blob, size_t len, size_t *off, const char **path, size_t *plen,
          const char **data, size_t *dlen)
{
	struct file_rec rec;

	if (len - *off < sizeof(rec))
		return false;
	memcpy(&rec, blob + *off, sizeof(rec));
	if (rec.path_len == 0 || rec.path_len > FILES_MAX_PATH ||
	    len - *off - sizeof(rec) < (size_t)rec.path_len + rec.data_len)
		return false;
	*path = blob + *off + sizeof(rec);
	*plen = rec.path_len;
	*data = *path + rec.path_len;
	*dlen = rec.data_len;
	*off += sizeof(rec) + rec.path_len + rec.data_len;
	return true;
}

int
files_write(int dirfd, const char *blob, size_t len)
{
	return files_write_over(dirfd, blob, len, false);
}

int
files_write_over(int dirfd, const char *blob, size_t len, bool replace)
{
	const char *path, *data;
	size_t off = 0, plen, dlen;

	while (next_file(blob, len, &off, &path, &plen, &data, &dlen)) {
		char p[FILES_MAX_PATH + 1], *name = p, *slash;
		int d = dirfd, fd, rc;

		memcpy(p, path, plen);
		p[plen] = '\0';
		/* each directory on the way, created if needed, never through a symlink */
		while ((slash = strchr(name, '/')) != NULL) {
			int next;
			*slash = '\0';
			if (mkdirat(d, name, 0700) < 0 && errno != EEXIST)
				goto fail;
			next = openat(d, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (next < 0)
				goto fail;
			if (d != dirfd)
				close(d);
			d = next;
			name = slash + 1;
		}
		fd = openat(d, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		/* a session's: what an earlier cell left there (a symlink too, never followed) */
		if (fd < 0 && errno == EEXIST && replace && unlinkat(d, name, 0) == 0)
			fd = openat(d, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			            0600);
		if (fd < 0)
			goto fail;
		rc = dlen > 0 ? util_write_all(fd, data, dlen) : 0;
		if (close(fd) < 0 || rc < 0)
			goto fail;
		if (d != dirfd)
			close(d);
		continue;
	fail:
		rc = errno;
		if (d != dirfd)
			close(d);
		errno = rc;
		return -1;
	}
	return off == len ? 0 : (errno = EINVAL, -1);
}

/* ---- what the inputs were ---- */

/*
 * A 64-bit digest of a file's content, to know an input the program left as it was (no
 * adversary to resist: a program that forges a collision only hides its own output). Words of
 * 8 bytes in XXH64's round, the tail padded with its length, the length and an avalanche last.
 * Fed in pieces whose sizes are multiples of 8 but for the last.
 */
#define DIGEST_P1 0x9E3779B185EBCA87ULL
#define DIGEST_P2 0xC2B2AE3D27D4EB4FULL
#define DIGEST_P3 0x165667B19E3779F9ULL

static uint64_t
digest_rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static uint64_t
digest_round(uint64_t h, uint64_t w)
{
	w *= DIGEST_P2;
	w = digest_rotl(w, 31) * DIGEST_P1;
	h ^= w;
	return digest_rotl(h, 27) * DIGEST_P1 + DIGEST_P3;
}

static uint64_t
digest_update(uint64_t h, const char *p, size_t n)
{
	uint64_t w;

	for (; n >= 8; p += 8, n -= 8) {
		memcpy(&w, p, 8);
		h = digest_round(h, w);
	}
	if (n > 0) {
		w = (uint64_t)n << 56;
		memcpy(&w, p, n);
		h = digest_round(h, w);
	}
	return h;
}

static uint64_t
digest_final(uint64_t h, uint64_t bytes)
{
	h ^= bytes * DIGEST_P1;
	h ^= h >> 33;
	h *= DIGEST_P2;
	h ^= h >> 29;
	h *= DIGEST_P3;
	return h ^ (h >> 32);
}

/* one record of a manifest: path and its digest */
static int
manifest_put(struct buf *b, const char *path, size_t plen, const struct file_digest *d)
{
	struct file_rec rec = {(uint32_t)plen, sizeof(*d)};

	return buf_put(b, &rec, sizeof(rec)) < 0 || buf_put(b, path, plen) < 0 ||
	               buf_put(b, d, sizeof(*d)) < 0
	           ? -1
	           : 0;
}

int
files_manifest(const char *inputs, size_t len, char **manifest, size_t *manifest_len)
{
	struct buf b = BUF_EMPTY;
	const char *path, *data;
	size_t off = 0, plen, dlen;

	*manifest = NULL;
	*manifest_len = 0;
	while (next_file(inputs, len, &off, &path, &plen, &data, &dlen)) {
		struct file_digest d = {dlen, digest_final(digest_update(0, data, dlen), dlen)};

		if (manifest_put(&b, path, plen, &d) < 0) {
			free(b.p);
			errno = ENOMEM;
			return -1;
		}
	}
	*manifest = buf_take(&b, manifest_len);
	return 0;
}

/* ---- outputs ---- */

struct found {
	char *path;
	uint64_t bytes;
};

struct walk {
	struct found *v;
	size_t n, cap, visited;
	const struct timespec *since; /* NULL, or only files changed at or after it */
};

/* whether st's inode changed at or after t: its ctime, which every write, truncation, rename,
 * link, chmod or utime sets to now and no program can set otherwise (an mtime can be set to any
 * moment, an earlier cell's into the future as well as this cell's into the past) */
static bool
changed_since(const struct stat *st, const struct timespec *t)
{
	const struct timespec *c = &st->st_ctim;

	return c->tv_sec > t->tv_sec || (c->tv_sec == t->tv_sec && c->tv_nsec >= t->tv_nsec);
}

static int
walk_dir(int dfd, const char *prefix, int depth, struct walk *w)
{
	DIR *dir = fdopendir(dfd);
	struct dirent *e;
	int rc = 0;

	if (dir == NULL) {
		close(dfd);
		return 0;
	}
	while (rc == 0 && w->visited < ARTIFACTS_MAX_VISITED && (e = readdir(dir)) != NULL) {
		struct stat st;
		char path[FILES_MAX_PATH + 1];
		int n;

		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		w->visited++;
		if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		n = snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "/" : "", e->d_name);
		if (n < 0 || (size_t)n >= sizeof(path))
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub;
			if (depth + 1 >= FILES_MAX_DEPTH || strcmp(e->d_name, "__pycache__") == 0)
				continue;
			sub = openat(dirfd(dir), e->d_name,
			             O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				rc = walk_dir(sub, path, depth + 1, w);
		} else if (S_ISREG(st.st_mode)) {
			if (depth == 0 && (strcmp(e->d_name, "main.py") == 0 ||
			                   strcmp(e->d_name, "result.json") == 0))
				continue;
			if (w->since != NULL && !changed_since(&st, w->since))
				continue;
			if (w->n == w->cap) {
				size_t cap = w->cap ? w->cap * 2 : 64;
				struct found *nv = realloc(w->v, cap * sizeof(*nv));
				if (nv == NULL) {
					rc = -1;
					break;
				}
				w->v = nv;
				w->cap = cap;
			}
			w->v[w->n].path = strdup(path);
			if (w->v[w->n].path == NULL) {
				rc = -1;
				break;
			}
			w->v[w->n++].bytes = (uint64_t)st.st_size;
		}
	}
	closedir(dir);
	return rc;
}

static int
by_path(const void *a, const void *b)
{
	return strcmp(((const struct found *)a)->path, ((const struct found *)b)->path);
}

/* Opens path beneath dirfd, through no symlink, only if it is a regular file (a FIFO or a
 * device is never opened for reading: O_NONBLOCK, and the type is checked first). */
static int
open_regular(int dirfd, const char *path)
{
	struct open_how how = {
	    .flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
	};
	struct stat st;
	int fd;

	if (fstatat(dirfd, path, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return -1;
	fd = (int)syscall(SYS_openat2, dirfd, path, &how, sizeof(how));
	if (fd < 0 && errno == ENOSYS)
		fd = openat(dirfd, path, (int)how.flags);
	if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		return -1;
	}
	return fd;
}

/* reads up to n bytes of fd into buf; returns how many */
static size_t
read_upto(int fd, char *buf, size_t n)
{
	ssize_t r = util_read_max(fd, buf, n);

	return r < 0 ? 0 : (size_t)r;
}

/* the digest of path's content beneath dirfd, read up to one byte past limit (a file longer
 * than that has d->bytes > limit); -1 when it cannot be opened */
static int
digest_file(int dirfd, const char *path, uint64_t limit, struct file_digest *d)
{
	char buf[16384]; /* a multiple of 8: the digest's pieces */
	uint64_t h = 0, bytes = 0;
	size_t got;
	int fd = open_regular(dirfd, path);

	if (fd < 0)
		return -1;
	do {
		got = read_upto(fd, buf, sizeof(buf));
		h = digest_update(h, buf, got);
		bytes += got;
	} while (got == sizeof(buf) && bytes <= limit);
	close(fd);
	d->bytes = bytes;
	d->hash = digest_final(h, bytes);
	return 0;
}

/* whether f is a file of the manifest's that the program left as it was: its size, then its
 * content's digest (every process of the run is gone: nothing changes it meanwhile) */
static bool
unchanged_input(int dirfd, const char *manifest, size_t manifest_len, const struct found *f)
{
	const char *ip, *id;
	size_t off = 0, ipl, idl, plen = strlen(f->path);

	while (next_file(manifest, manifest_len, &off, &ip, &ipl, &id, &idl)) {
		struct file_digest d, now;

		if (ipl != plen || memcmp(ip, f->path, plen) != 0)
			continue;
		if (idl != sizeof(d))
			return false;
		memcpy(&d, id, sizeof(d));
		return d.bytes == f->bytes && digest_file(dirfd, f->path, d.bytes, &now) == 0 &&
		       now.bytes == d.bytes && now.hash == d.hash;
	}
	return false;
}

/* whether f's content is a picture (its head's magic): ARTIFACTS_IMAGES keeps only those */
static bool
image_file(int dirfd, const struct found *f)
{
	char head[ARTIFACTS_HEAD_BYTES];
	size_t got;
	int fd = open_regular(dirfd, f->path);

	if (fd < 0)
		return false;
	got = read_upto(fd, head, sizeof(head));
	close(fd);
	return artifacts_is_image(files_sniff(head, got, got < f->bytes));
}

bool
artifacts_is_image(const char *mime)
{
	return mime != NULL && (strcmp(mime, "image/png") == 0 || strcmp(mime, "image/jpeg") == 0 ||
	                        strcmp(mime, "image/gif") == 0);
}

int
artifacts_collect(int dirfd, const char *manifest, size_t manifest_len, enum artifacts_want wanted,
                  char **blob, size_t *len)
{
	return artifacts_collect_since(dirfd, manifest, manifest_len, wanted, NULL, blob, len);
}

static void
walk_free(struct walk *w)
{
	for (size_t i = 0; i < w->n; i++)
		free(w->v[i].path);
	free(w->v);
}

int
artifacts_mark(int dirfd, struct artifacts_mark *m)
{
	struct walk w = {NULL, 0, 0, 0, &m->since};
	struct buf b = BUF_EMPTY;
	int dfd, rc = 0;

	m->recent = NULL;
	m->recent_len = 0;
	/* the clock the kernel stamps inodes with (current_time(): the coarse clock, or a moment
	 * after it where stamps are multigrain), not CLOCK_REALTIME, which runs up to a tick
	 * (4 ms at HZ=250) ahead of it: a file made just after a fine read was stamped before it */
	(void)clock_gettime(CLOCK_REALTIME_COARSE, &m->since);
	dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	/* what changed in the same tick before the mark: its content, to tell it from the cell's */
	rc = walk_dir(dfd, "", 0, &w);
	for (size_t i = 0; rc == 0 && i < w.n; i++) {
		struct file_digest d;

		if (digest_file(dirfd, w.v[i].path, ARTIFACTS_MAX_BYTES, &d) == 0 &&
		    d.bytes <= ARTIFACTS_MAX_BYTES)
			rc = manifest_put(&b, w.v[i].path, strlen(w.v[i].path), &d);
	}
	walk_free(&w);
	if (rc < 0) {
		free(b.p);
		errno = ENOMEM;
		return -1;
	}
	m->recent = buf_take(&b, &m->recent_len);
	return 0;
}

void
artifacts_mark_free(struct artifacts_mark *m)
{
	free(m->recent);
	m->recent = NULL;
	m->recent_len = 0;
}

/* The inputs the program left as they were are neither listed nor counted, nor what changed
 * in the mark's tick before it and is as it was then, nor, when only pictures are wanted,
 * anything else: drops those of w's. */
static void
drop_unlisted(int dirfd, const char *manifest, size_t manifest_len, enum artifacts_want wanted,
              const struct artifacts_mark *mark, struct walk *w)
{
	size_t kept = 0;

	if (manifest == NULL && (mark == NULL || mark->recent == NULL) &&
	    wanted != ARTIFACTS_IMAGES)
		return;
	for (size_t i = 0; i < w->n; i++) {
		if ((manifest != NULL &&
		     unchanged_input(dirfd, manifest, manifest_len, &w->v[i])) ||
		    (mark != NULL &&
		     unchanged_input(dirfd, mark->recent, mark->recent_len, &w->v[i])) ||
		    (wanted == ARTIFACTS_IMAGES && !image_file(dirfd, &w->v[i])))
			free(w->v[i].path);
		else
			w->v[kept++] = w->v[i];
	}
	w->n = kept;
}

int
artifacts_collect_since(int dirfd, const char *manifest, size_t manifest_len,
                        enum artifacts_want wanted, const struct artifacts_mark *mark, char **blob,
                        size_t *len)
{
	struct walk w = {NULL, 0, 0, 0, mark != NULL ? &mark->since : NULL};
	struct buf b = BUF_EMPTY;
	size_t sent = 0, total = 0;
	int dfd, rc = -1;

	*blob = NULL;
	*len = 0;
	if (wanted == ARTIFACTS_NONE)
		return 0;
	/* a description of its own: the walk's reads move no offset of the caller's */
	dfd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return -1;
	if (walk_dir(dfd, "", 0, &w) < 0)
		goto out;
	drop_unlisted(dirfd, manifest, manifest_len, wanted, mark, &w);
	if (w.n > 0)
		qsort(w.v, w.n, sizeof(*w.v), by_path);
	for (size_t i = 0; i < w.n && i < ARTIFACTS_MAX_LISTED; i++) {
		struct artifact_rec rec = {.bytes = w.v[i].bytes};
		size_t want, plen = strlen(w.v[i].path), at;
		int fd;

		if (w.v[i].bytes > ARTIFACTS_MAX_BYTES)
			rec.omitted = ARTIFACT_TOO_LARGE;
		else if (sent == ARTIFACTS_MAX_SENT)
			rec.omitted = ARTIFACT_TOO_MANY;
		else if (total + w.v[i].bytes > ARTIFACTS_MAX_BYTES)
			rec.omitted = ARTIFACT_OVER_TOTAL;
		want = rec.omitted == ARTIFACT_SENT          ? (size_t)w.v[i].bytes
		       : w.v[i].bytes < ARTIFACTS_HEAD_BYTES ? (size_t)w.v[i].bytes
		                                             : ARTIFACTS_HEAD_BYTES;
		rec.path_len = (uint32_t)plen;
		at = b.len;
		/* room for the data too, read straight into it */
		if (buf_put(&b, &rec, sizeof(rec)) < 0 || buf_put(&b, w.v[i].path, plen) < 0 ||
		    buf_reserve(&b, want) < 0)
			goto out;
		fd = open_regular(dirfd, w.v[i].path);
		if (fd < 0) {
			rec.omitted = ARTIFACT_UNREADABLE;
			rec.data_len = 0;
		} else {
			rec.data_len = (uint32_t)read_upto(fd, b.p + b.len, want);
			close(fd);
			b.len += rec.data_len;
			if (rec.omitted == ARTIFACT_SENT) {
				/* what was read is what is sent: a file that shrank in between is
				 * sent as it now is */
				rec.bytes = rec.data_len;
				sent++;
				total += rec.data_len;
			}
		}
		memcpy(b.p + at, &rec, sizeof(rec));
	}
	rc = 0;
out:
	walk_free(&w);
	if (rc < 0) {
		free(b.p);
		errno = ENOMEM;
		return -1;
	}
	*blob = buf_take(&b, len);
	return 0;
}

const char *
artifacts_omit_string(enum artifact_omit o)
{
	switch (o) {
	case ARTIFACT_SENT:
		return NULL;
	case ARTIFACT_TOO_LARGE:
		return "larger than maxArtifactBytes";
	case ARTIFACT_OVER_TOTAL:
		return "the files before it (by path) used up maxArtifactBytes";
	case ARTIFACT_TOO_MANY:
		return "maxArtifacts files were sent before it (by path)";
	case ARTIFACT_UNREADABLE:
		return "it could not be read";
	case ARTIFACT_OMIT_COUNT:
		break;
	}
	return "not sent";
}

bool
artifacts_next(const char *blob, size_t len, const char *const *types, size_t *off, size_t *count,
               struct artifact_view *a)
{
	struct artifact_rec rec;

	if (blob == NULL || *off > len || len - *off < sizeof(rec) ||
	    *count >= ARTIFACTS_MAX_LISTED)
		return false;
	memcpy(&rec, blob + *off, sizeof(rec));
	if (rec.path_len == 0 || rec.path_len > FILES_MAX_PATH ||
	    rec.omitted >= ARTIFACT_OMIT_COUNT ||
	    len - *off - sizeof(rec) < (size_t)rec.path_len + rec.data_len ||
	    (rec.omitted == ARTIFACT_SENT && rec.data_len != rec.bytes) ||
	    (rec.omitted != ARTIFACT_SENT && rec.data_len > ARTIFACTS_HEAD_BYTES))
		return false;
	a->path = blob + *off + sizeof(rec);
	a->path_len = rec.path_len;
	a->data = a->path + rec.path_len;
	a->data_len = rec.data_len;
	a->bytes = rec.bytes;
	a->omitted = (enum artifact_omit)rec.omitted;
	a->type = types != NULL ? types[*count]
	                        : files_sniff(a->data, a->data_len, a->data_len < a->bytes);
	*off += sizeof(rec) + rec.path_len + rec.data_len;
	(*count)++;
	return true;
}

const char **
artifacts_types(const char *blob, size_t len)
{
	struct artifact_view a;
	size_t off = 0, count = 0;
	const char **types = blob ? calloc(ARTIFACTS_MAX_LISTED, sizeof(*types)) : NULL;

	while (types != NULL && artifacts_next(blob, len, NULL, &off, &count, &a))
		types[count - 1] = a.type;
	return types;
}

void
artifacts_put_path(struct jsonw *w, const struct artifact_view *a)
{
	/* a name that is not UTF-8 is shown as Python shows it decoded with "replace" */
	char name[3 * FILES_MAX_PATH + 1];
	size_t name_len = utf8_sanitize((const unsigned char *)a->path, a->path_len, name);

	jsonw_str(w, name, name_len);
}

void
artifacts_write(struct jsonw *w, const char *blob, size_t len, const char *const *types)
{
	struct artifact_view a;
	size_t off = 0, count = 0;

	jsonw_lit(w, "[");
	while (artifacts_next(blob, len, types, &off, &count, &a)) {
		const char *why = artifacts_omit_string(a.omitted);

		jsonw_lit(w, count > 1 ? ",{\"path\":" : "{\"path\":");
		artifacts_put_path(w, &a);
		jsonw_lit(w, ",\"mimeType\":");
		jsonw_cstr(w, a.type);
		jsonw_lit(w, ",\"bytes\":");
		jsonw_int(w, (long long)a.bytes);
		jsonw_lit(w, ",\"contentBase64\":");
		if (a.omitted == ARTIFACT_SENT)
			jsonw_base64(w, a.data, a.data_len);
		else
			jsonw_lit(w, "null");
		jsonw_lit(w, ",\"omitted\":");
		if (why != NULL)
			jsonw_cstr(w, why);
		else
			jsonw_lit(w, "null");
		jsonw_lit(w, "}");
	}
	jsonw_lit(w, "]");
}

/* ---- types ---- */

/* valid UTF-8 without NUL; a head (cut) may end inside a character */
static bool
valid_utf8_text(const unsigned char *s, size_t n, bool cut)
{
	for (size_t i = 0; i < n;) {
		size_t k;

		if (s[i] == 0)
			return false;
		if (s[i] < 0x80) {
			i++;
			continue;
		}
		k = utf8_valid_len(s + i, s + n);
		if (k == 0)
			return cut && n - i < 4; /* a character cut by the end of a head */
		i += k;
	}
	return true;
}

static const char *
skip_space(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
		p++;
	return p;
}

/* whether p starts with s */
static bool
starts(const char *p, const char *end, const char *s)
{
	size_t n = strlen(s);
	return (size_t)(end - p) >= n && memcmp(p, s, n) == 0;
}

/* the first lines have the same number (at least one) of commas, outside quotes */
static bool
looks_csv(const char *p, const char *end)
{
	int lines = 0, want = -1, commas = 0;
	bool quoted = false;

	for (; p < end && lines < 5; p++) {
		if (*p == '"')
			quoted = !quoted;
		else if (*p == ',' && !quoted)
			commas++;
		else if (*p == '\n' && !quoted) {
			if (commas == 0 || (want >= 0 && commas != want))
				return false;
			want = commas;
			commas = 0;
			lines++;
		}
	}
	return lines >= 2 || (lines == 1 && p == end && commas == 0);
}

const char *
files_sniff(const char *data, size_t n, bool cut)
{
	const char *end = data + n, *p;

	if (n >= 8 && memcmp(data, "\x89PNG\r\n\x1a\n", 8) == 0)
		return "image/png";
	if (n >= 3 && memcmp(data, "\xff\xd8\xff", 3) == 0)
		return "image/jpeg";
	if (n >= 6 && (memcmp(data, "GIF87a", 6) == 0 || memcmp(data, "GIF89a", 6) == 0))
		return "image/gif";
	if (n >= 5 && memcmp(data, "%PDF-", 5) == 0)
		return "application/pdf";
	if (n == 0 || !valid_utf8_text((const unsigned char *)data, n, cut))
		return n == 0 ? "text/plain" : "application/octet-stream";
	p = skip_space(data + (starts(data, end, "\xef\xbb\xbf") ? 3 : 0), end);
	/* SVG: an <svg element first, after an XML declaration, comments or a doctype */
	while (p < end &&
	       (starts(p, end, "<?xml") || starts(p, end, "<!--") || starts(p, end, "<!DOCTYPE"))) {
		const char *close = memmem(p, (size_t)(end - p), ">", 1);
		if (close == NULL)
			break;
		p = skip_space(close + 1, end);
	}
	if (starts(p, end, "<svg"))
		return "image/svg+xml";
	if (p < end && (*p == '{' || *p == '[') && !cut) {
		json_t *j = json_loadb(data, n, JSON_DECODE_ANY, NULL);
		if (j != NULL) {
			json_decref(j);
			return "application/json";
		}
	}
	if (looks_csv(data, end))
		return "text/csv";
	return "text/plain";
}
