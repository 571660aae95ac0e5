/*
 * initmain.c - codebox-init: a run's init (pid 1 of its namespaces) in the one-copy warm
 * start, exec'd by the stub a template cloned sharing its memory (sandbox.h, template.c). It
 * is a program of its own, with its own address-space layout and randomness, and none of the
 * interpreter's pages: it holds the run's first process and reports its end, as a copy of
 * the template did before (initexec_init(), initexec.c).
 *
 *   codebox-init <the program's pid> <the wire's fd>
 *   codebox-init --check-caps    exits SANDBOX_CAPS_OK if it holds what init needs, exec'd
 *                                as the stub execs it (the zygote's test that it runs here)
 */
#include "box/initexec.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* A non-negative decimal that fits an int, else -1. */
static long
initexec_number(const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	return errno == 0 && end != s && *end == '\0' && v >= 0 && v <= 0x7fffffff ? v : -1;
}

/* Whether this process holds what init's steps need (mounts, ids), as the stub's exec left it. */
static bool
initexec_has_caps(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	const int need[] = {CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID};

	if (syscall(SYS_capget, &hdr, data) < 0)
		return false;
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (!(data[need[i] / 32].effective & (1u << (need[i] % 32))))
			return false;
	return true;
}

int
main(int argc, char **argv)
{
	static struct sandbox_wire wire;
	size_t got = 0;
	long prog, fd;

	/* exec'd from an fd, its name is the fd's number until now */
	(void)prctl(PR_SET_NAME, "codebox-init");
	if (argc == 2 && strcmp(argv[1], "--check-caps") == 0)
		return initexec_has_caps() ? SANDBOX_CAPS_OK : 1;
	if (argc != 3 || (prog = initexec_number(argv[1])) <= 0 ||
	    (fd = initexec_number(argv[2])) < 3)
		return 2;
	/* /proc/1/cmdline shows codebox-init only */
	sandbox_set_title_area(argv[0], (size_t)(argv[2] + strlen(argv[2]) + 1 - argv[0]));
	/* written whole before the stub was cloned */
	while (got < sizeof(wire)) {
		ssize_t r = read((int)fd, (char *)&wire + got, sizeof(wire) - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return 3;
		got += (size_t)r;
	}
	close((int)fd);
	if (wire.magic != SANDBOX_WIRE_MAGIC)
		return 3;
	initexec_init(&wire, (pid_t)prog);
}
