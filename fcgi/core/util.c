/*
 * util.c - helpers shared by several modules.
 */
#include "core/util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int
util_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

ssize_t
util_read_small(const char *path, char *buf, size_t size)
{
	size_t len = 0;
	int fd, saved;

	if (size == 0) {
		errno = EINVAL;
		return -1;
	}
	buf[0] = '\0';
	do
		fd = open(path, O_RDONLY | O_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	if (fd < 0)
		return -1;
	while (len < size - 1) {
		ssize_t r = read(fd, buf + len, size - 1 - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			saved = errno;
			close(fd);
			buf[0] = '\0';
			errno = saved;
			return -1;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	buf[len] = '\0';
	return (ssize_t)len;
}

int
util_write_file(const char *dir, const char *file, const char *text)
{
	char path[700];
	size_t n = strlen(text);
	int fd, rc;

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = write(fd, text, n) == (ssize_t)n ? 0 : -1;
	close(fd);
	return rc;
}

void
util_fault(struct fault *f, int err, const char *fmt, ...)
{
	va_list ap;

	if (f == NULL)
		return;
	f->err = err;
	va_start(ap, fmt);
	vsnprintf(f->what, sizeof(f->what), fmt, ap);
	va_end(ap);
}

const char *
util_fault_string(const struct fault *f, char *buf, size_t len)
{
	if (f->err != 0)
		snprintf(buf, len, "%s: %s", f->what, strerror(f->err));
	else
		snprintf(buf, len, "%s", f->what);
	return buf;
}

void
util_close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

int
util_close_fds_except(const int *keep, int n)
{
	unsigned from = 3;

	for (;;) {
		unsigned next = ~0u; /* the smallest kept fd >= from */
		for (int i = 0; i < n; i++)
			if (keep[i] >= 0 && (unsigned)keep[i] >= from && (unsigned)keep[i] < next)
				next = (unsigned)keep[i];
		if (next == ~0u)
			return (int)syscall(SYS_close_range, from, ~0u, 0u);
		if (next > from && syscall(SYS_close_range, from, next - 1, 0u) < 0)
			return -1;
		from = next + 1;
	}
}

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

int
util_sealed_copy(int src, const char *name, long long max, bool exec)
{
	struct stat st;
	int mfd = -1, err;

	if (fstat(src, &st) < 0)
		return -1;
	if (!S_ISREG(st.st_mode) || st.st_size <= 0 || st.st_size > max) {
		errno = EFBIG;
		return -1;
	}
	if (exec)
		mfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING | MFD_EXEC);
	if (mfd < 0)
		mfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (mfd < 0)
		return -1;
	for (off_t done = 0; done < st.st_size;) {
		ssize_t w = sendfile(mfd, src, NULL, (size_t)(st.st_size - done));
		if (w <= 0) {
			err = w == 0 ? EIO : errno;
			goto fail;
		}
		done += w;
	}
	if (fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) == 0)
		return mfd;
	err = errno;
fail:
	close(mfd);
	errno = err;
	return -1;
}

/* The pool's shared mappings: few, made at start-up by the supervisor. */
#define UTIL_MAX_SHARED 8
static struct {
	void *p;
	size_t len;
} util_shared[UTIL_MAX_SHARED];

void *
util_map_shared(const char *name, size_t len)
{
	int i, fd = -1, saved;
	void *p;

	for (i = 0; i < UTIL_MAX_SHARED && util_shared[i].p != NULL; i++)
		;
	if (i == UTIL_MAX_SHARED) {
		errno = ENOMEM;
		return NULL;
	}
	if (name != NULL) {
		fd = memfd_create(name, MFD_CLOEXEC);
		if (fd < 0)
			return NULL;
		if (ftruncate(fd, (off_t)len) < 0) {
			saved = errno;
			close(fd);
			errno = saved;
			return NULL;
		}
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | (fd < 0 ? MAP_ANONYMOUS : 0), fd,
	         0);
	saved = errno;
	if (fd >= 0)
		close(fd); /* the mapping keeps the memory; no fd to inherit */
	if (p == MAP_FAILED) {
		errno = saved;
		return NULL;
	}
	util_shared[i].p = p;
	util_shared[i].len = len;
	return p;
}

void
util_unmap_shared_one(void *p)
{
	for (int i = 0; p != NULL && i < UTIL_MAX_SHARED; i++)
		if (util_shared[i].p == p) {
			munmap(p, util_shared[i].len);
			util_shared[i].p = NULL;
		}
}

void
util_unmap_shared(void)
{
	for (int i = 0; i < UTIL_MAX_SHARED; i++)
		if (util_shared[i].p != NULL)
			(void)syscall(SYS_munmap, util_shared[i].p, util_shared[i].len);
}

long long
util_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
util_wait_readable(int fd, long long ms)
{
	long long deadline = util_now_ms() + ms;

	for (;;) {
		struct pollfd pfd = {.fd = fd, .events = POLLIN};
		long long left = deadline - util_now_ms();
		int r;

		if (left < 0)
			left = 0;
		r = poll(&pfd, 1, (int)left);
		if (r > 0)
			return 1;
		if (r == 0)
			return 0;
		if (errno != EINTR)
			return -1;
	}
}

int
util_send_fds(int sock, const void *buf, size_t len, const int *fds, int n, int flags)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 8)];
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	int kept[8], k = 0;

	for (int i = 0; i < n; i++) {
		if (fds[i] < 0)
			continue;
		if (k == 8) {
			errno = EINVAL;
			return -1;
		}
		kept[k++] = fds[i];
	}
	if (k > 0) {
		struct cmsghdr *c;
		memset(cbuf, 0, sizeof(cbuf));
		msg.msg_control = cbuf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)k);
		c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)k);
		memcpy(CMSG_DATA(c), kept, sizeof(int) * (size_t)k);
	}
	for (;;) {
		ssize_t w = sendmsg(sock, &msg, MSG_NOSIGNAL | flags);
		if (w == (ssize_t)len)
			return 0;
		if (w < 0 && errno == EINTR)
			continue;
		if (w >= 0)
			errno = EMSGSIZE;
		return -1;
	}
}

int
util_recv_fds(int sock, void *buf, size_t len, int *fds, int max, int flags)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 8)];
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr msg = {
	    .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
	ssize_t r;
	int n = 0;

	do
		r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | flags);
	while (r < 0 && errno == EINTR);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); r >= 0 && c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int got = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int *p = (int *)CMSG_DATA(c);
		for (int i = 0; i < got; i++) {
			if (n < max)
				fds[n++] = p[i];
			else
				close(p[i]);
		}
	}
	if (r != (ssize_t)len || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		for (int i = 0; i < n; i++)
			close(fds[i]);
		errno = r == 0 ? EPIPE : r < 0 ? errno : EPROTO;
		return -1;
	}
	return n;
}

ssize_t
util_read_max(int fd, char *buf, size_t max)
{
	size_t got = 0;

	while (got < max) {
		ssize_t r = read(fd, buf + got, max - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && got == 0)
			return -1;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	return (ssize_t)got;
}
