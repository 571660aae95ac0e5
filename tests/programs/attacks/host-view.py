# Everything a run can read that might name the host: its paths, the pool, host pids, the
# boot command line, the kernel config, cgroup paths. Prints it all as JSON for the test to
# search, plus whether /proc/sys can be written.
import json
import os

out = {"cwd": os.getcwd(), "env": dict(os.environ), "files": {}}
paths = ["/proc/self/" + n for n in ("cgroup", "mountinfo", "mounts", "status", "stat",
                                     "cmdline", "environ", "maps")]
paths += ["/proc/1/" + n for n in ("cgroup", "mountinfo", "status", "cmdline", "environ")]
paths += ["/proc/" + n for n in ("cmdline", "config.gz", "keys", "timer_list", "sched_debug",
                                 "kcore", "cgroups", "mounts", "latency_stats")]
for p in paths:
    try:
        with open(p, "rb") as f:
            text = f.read(1 << 20).decode("utf-8", "replace")
        if p.endswith("/maps"):
            # only the distinct paths: a warm run maps about a thousand regions, and the
            # whole file would overflow the captured output
            text = "\n".join(sorted({line.split(None, 5)[5] for line in text.splitlines()
                                      if len(line.split(None, 5)) == 6}))
        out["files"][p] = text
    except OSError as e:
        out["files"][p] = "error: " + e.strerror
for p in ("/proc/sys/kernel/ns_last_pid", "/proc/sys/vm/drop_caches", "/proc/sysrq-trigger"):
    try:
        with open(p, "w") as f:
            f.write("1")
        out["files"]["write " + p] = "written"
    except OSError as e:
        out["files"]["write " + p] = "error: " + e.strerror
for d in ("/proc/acpi", "/proc/scsi", "/proc/asound"):
    try:
        out["files"]["ls " + d] = " ".join(os.listdir(d))
    except OSError as e:
        out["files"]["ls " + d] = "error: " + e.strerror
print(json.dumps(out))
