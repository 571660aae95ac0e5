/* Unit tests for isolation.c: the layer list syntax and the policy between layers. */
#include "core/isolation.h"
#include "tap.h"

#include <sched.h>

static struct isolation
all_on(bool root_pool)
{
	struct isolation iso;

	memset(&iso, 0, sizeof(iso));
	for (int i = 0; i < ISO_LAYER_COUNT; i++)
		iso.on[i] = true;
	iso.proc = true;
	iso.root_pool = root_pool;
	return iso;
}

int
main(void)
{
	bool set[ISO_LAYER_COUNT];
	char why[256], line[512];
	struct isolation iso;

	ok(iso_parse_list("netns,landlock", set, why, sizeof(why)) == 0 && set[ISO_NETNS] &&
	       set[ISO_LANDLOCK] && !set[ISO_USERNS],
	   "a list sets exactly its layers");
	ok(iso_parse_list(NULL, set, why, sizeof(why)) == 0 && !set[ISO_SECCOMP],
	   "no list, no layer");
	ok(iso_parse_list("seccomp,,", set, why, sizeof(why)) == 0 && set[ISO_SECCOMP],
	   "empty items are ignored");
	ok(iso_parse_list("seccomp,teleport", set, why, sizeof(why)) < 0 && strstr(why, "teleport"),
	   "an unknown layer is refused by name: %s", why);
	is_str(iso_layer_name(ISO_MOUNTNS), "mountns", "layer names");
	ok(iso_layer_name(ISO_LAYER_COUNT) == NULL, "no name past the last layer");

	iso = all_on(false);
	ok(iso_clone_flags(&iso) == (CLONE_NEWPID | CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWNS |
	                             CLONE_NEWIPC | CLONE_NEWUTS),
	   "every namespace in the clone flags");
	iso_turn_off(&iso, ISO_PIDNS, "test");
	ok(!iso.on[ISO_MOUNTNS] && !iso.proc,
	   "without pidns, no mount namespace (init reads the result)");
	ok(iso_clone_flags(&iso) == 0, "without pidns, direct mode");
	is_str(iso.why_off[ISO_PIDNS], "test", "the reason is kept");

	iso = all_on(false);
	iso_turn_off(&iso, ISO_USERNS, "refused");
	ok(!iso.on[ISO_PIDNS] && !iso.on[ISO_NETNS] && !iso.on[ISO_UTSNS],
	   "a pool that is not root has no namespace without userns");
	iso = all_on(true);
	iso_turn_off(&iso, ISO_USERNS, "refused");
	ok(iso.on[ISO_PIDNS] && iso.on[ISO_NETNS] && !(iso_clone_flags(&iso) & CLONE_NEWUSER),
	   "a root pool keeps the other namespaces without userns");

	iso = all_on(false);
	iso_turn_off(&iso, ISO_LANDLOCK, "disabled by CODEBOX_DISABLE");
	bool req[ISO_LAYER_COUNT] = {false};
	req[ISO_SECCOMP] = true;
	ok(iso_check_required(&iso, req, why, sizeof(why)) == 0,
	   "a required layer that is on passes");
	req[ISO_LANDLOCK] = true;
	ok(iso_check_required(&iso, req, why, sizeof(why)) < 0 && strstr(why, "landlock") &&
	       strstr(why, "disabled by CODEBOX_DISABLE"),
	   "a required layer that is off is named with its reason: %s", why);

	iso_summary(&iso, line, sizeof(line));
	ok(strstr(line, "userns=on") && strstr(line, "landlock=off"), "the summary line: %s", line);
	/* the seccomp rule chosen for every Landlock ABI: AF_UNIX sockets only from ABI 9 */
	for (int abi = 0; abi <= 9; abi++) {
		ok(iso_deny_unix_socket(true, abi) == (abi < 9),
		   "Landlock ABI %d: socket(AF_UNIX) %s", abi, abi < 9 ? "denied" : "allowed");
		ok(iso_deny_unix_socket(false, abi), "Landlock off, ABI %d: socket(AF_UNIX) denied",
		   abi);
	}
	ok(iso_parse_list("cgroupns,maskedpaths,poolmemory,cpuquota", set, why, sizeof(why)) == 0 &&
	       set[ISO_CGROUPNS] && set[ISO_MASKEDPATHS] && set[ISO_POOLMEMORY] &&
	       set[ISO_CPUQUOTA],
	   "the round-2 layers are known to CODEBOX_REQUIRE and CODEBOX_DISABLE");
	iso = all_on(true);
	iso_turn_off(&iso, ISO_CGROUP, "test");
	ok(!iso.on[ISO_POOLMEMORY] && !iso.on[ISO_CPUQUOTA],
	   "no cgroup layer: no pool budget, no CPU quota");
	iso = all_on(true);
	iso_turn_off(&iso, ISO_PIDNS, "test");
	ok(!iso.on[ISO_CGROUPNS] && !iso.on[ISO_MASKEDPATHS] && !iso.on[ISO_MOUNTNS],
	   "no pid namespace: no cgroup namespace, no mount namespace, no masked paths");
	return tap_done();
}
