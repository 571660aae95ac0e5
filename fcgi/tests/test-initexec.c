/*
 * Unit tests for the run's configuration on the wire (runconfig.h, initexec.c): the record
 * crosses to codebox-init whole, every field of it, and codebox-init derives from it the spec
 * the template derived (child_prepare()), but for what the one-copy start gives the stub and
 * the program instead of init.
 */
#include "box/initexec.h"
#include "tap.h"

#include <sched.h>
#include <string.h>
#include <unistd.h>

static struct child_spec tmpl, init;
static struct sandbox_wire sent, got;

/* Every byte of cfg's record set, each one different: a field that did not cross shows. */
static void
fill_settings(struct run_config *cfg)
{
	unsigned char *p = (unsigned char *)&cfg->set;

	for (size_t i = 0; i < sizeof(cfg->set); i++)
		p[i] = (unsigned char)(0x41 + i);
	cfg->clone_flags |= CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS;
}

/* The wire through a pipe, as the template writes it and codebox-init reads it. */
static int
cross(const struct sandbox_wire *w, struct sandbox_wire *out)
{
	int p[2];
	ssize_t n;

	if (pipe(p) < 0 || write(p[1], w, sizeof(*w)) != (ssize_t)sizeof(*w))
		return -1;
	n = read(p[0], out, sizeof(*out));
	close(p[0]);
	close(p[1]);
	return n == (ssize_t)sizeof(*out) ? 0 : -1;
}

static bool
same_settings(const struct run_settings *a, const struct run_settings *b)
{
	return a->sigpending == b->sigpending && a->run_uid == b->run_uid &&
	       a->run_gid == b->run_gid && a->clone_flags == b->clone_flags &&
	       a->landlock_abi == b->landlock_abi && a->drop_privileges == b->drop_privileges &&
	       a->userns == b->userns && a->mount_proc == b->mount_proc &&
	       a->cgroupns == b->cgroupns && a->mask_proc == b->mask_proc &&
	       a->high_pids == b->high_pids && a->nproc_rlimit == b->nproc_rlimit &&
	       a->warm == b->warm && memcmp(a, b, sizeof(*a)) == 0;
}

/* init's spec is the template's but for its own fds and what the stub and program take. */
static void
check_spec(const char *what)
{
	const struct sandbox_spec *t = &tmpl.sb, *i = &init.sb;

	ok(i->set_ids == t->set_ids && i->uid == t->uid && i->gid == t->gid &&
	       i->parent_pid == t->parent_pid,
	   "%s: ids and parent as the template's", what);
	ok(i->uts == t->uts && i->cgroupns == t->cgroupns && i->mask_proc == t->mask_proc &&
	       i->ids_before_mounts == t->ids_before_mounts && i->agent == t->agent,
	   "%s: namespaces and steps as the template's", what);
	ok(i->workspace_fd == t->workspace_fd && i->session_fd == t->session_fd &&
	       i->error_fd == t->error_fd && i->ctl_fd == t->ctl_fd && i->report_fd == t->report_fd,
	   "%s: the fds init inherits", what);
	is_str(i->workdir, t->workdir, "%s: the run's directory as init sees it", what);
	is_str(i->python, t->python, "%s: the interpreter", what);
	ok((i->mounts == NULL) == (t->mounts == NULL), "%s: mounts or not, as the template", what);
	if (i->mounts != NULL && t->mounts != NULL) {
		const struct mounts_spec *a = i->mounts, *b = t->mounts;
		ok(strcmp(a->workdir, b->workdir) == 0 &&
		       strcmp(a->inner_workdir, b->inner_workdir) == 0 && a->etc_fd == b->etc_fd &&
		       strcmp(a->python, b->python) == 0 && a->disk_bytes == b->disk_bytes &&
		       a->owner_uid == b->owner_uid && a->owner_gid == b->owner_gid &&
		       a->mount_proc == b->mount_proc && a->workspace_fd == b->workspace_fd,
		   "%s: every mount parameter", what);
	}
	ok(i->orphan_init && !i->high_pids && i->landlock_abi == 0 && i->landlock_fd == -1 &&
	       i->seccomp == NULL && i->cell_fd == -1,
	   "%s: the stub's high pids and the program's Landlock and seccomp are not init's", what);
}

static void
run_case(const char *what, struct run_config *cfg, int session_fd)
{
	const char *dir = "/run/codebox/runs/w3/r-0123abcd";
	struct sandbox_stub st = {
	    .ready_fd = {20, 21}, .handoff_fd = {22, 23}, .cell_fd = {24, 25}};

	child_prepare(cfg, session_fd, dir, 64ULL << 20, &tmpl);
	child_set_fds(&tmpl, (int[CHILD_FD_COUNT]){3, 4, 5, 6, 8});
	ok(initexec_wire_pack(cfg, dir, 64ULL << 20, &tmpl.sb, &st, &sent) == 0, "%s: packed",
	   what);
	ok(cross(&sent, &got) == 0 && got.magic == SANDBOX_WIRE_MAGIC, "%s: crossed a pipe", what);
	ok(same_settings(&got.run, &cfg->set), "%s: every field of the record crossed", what);
	ok(got.disk_bytes == 64ULL << 20 && got.ready_fd == 21 && got.handoff_fd == 22 &&
	       got.cell_fd == 24,
	   "%s: the disk and the stub's fds crossed", what);
	initexec_wire_spec(&got, &init);
	check_spec(what);
}

int
main(void)
{
	struct run_config cfg = {.python = "/usr/bin/python3",
	                         .work_parent_fd = -1,
	                         .etc_fd = 7,
	                         .landlock_fd = 9,
	                         .workspace_fd = -1};
	char long_dir[5000];

	fill_settings(&cfg);
	run_case("a session", &cfg, 11);
	cfg.workspace_fd = 13;
	run_case("an agent's run", &cfg, -1);
	cfg.clone_flags &= ~CLONE_NEWNS;
	cfg.workspace_fd = -1;
	run_case("no mount namespace", &cfg, -1);

	memset(long_dir, 'a', sizeof(long_dir) - 1);
	long_dir[0] = '/';
	long_dir[sizeof(long_dir) - 1] = '\0';
	ok(initexec_wire_pack(&cfg, long_dir, 1, &tmpl.sb,
	                      &(struct sandbox_stub){.ready_fd = {-1, -1},
	                                             .handoff_fd = {-1, -1},
	                                             .cell_fd = {-1, -1}},
	                      &sent) < 0 &&
	       sent.magic == 0,
	   "a path that does not fit is refused, and nothing is left of the wire");
	return tap_done();
}
