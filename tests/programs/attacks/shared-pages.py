# Every shared mapping of this process: what it is, and, where it is writable, garbage written
# over all of it (the attack: a made-up owner for the admission mutex, counters, the audit
# trail's totals). A run must find none it could write, and none the pool uses.
# Without /proc in the sandbox (a pod without a private /proc), the test reads this process's
# maps from outside: the run says "held" in its directory, and the test leaves the maps there
# as "maps" before it sends SIGUSR1.
import ctypes
import json
import signal


def own_maps():
    try:
        with open("/proc/self/maps") as f:
            return f.read()
    except FileNotFoundError:
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
        open("held", "w").close()
        # until the run's own time limit: on a loaded machine the test's hand-in can be slow,
        # and a run nobody hands anything ends as "timeout", which says so
        signal.sigwait([signal.SIGUSR1])
        with open("maps") as f:
            return f.read()


found = []
for line in own_maps().splitlines():
    fields = line.split()
    perms = fields[1]
    if perms[3] != "s":
        continue
    found.append({"perms": perms, "path": fields[5] if len(fields) > 5 else ""})
    lo, hi = (int(x, 16) for x in fields[0].split("-"))
    if perms[1] == "w":
        ctypes.memset(lo, 0x41, hi - lo)
print(json.dumps(found))
