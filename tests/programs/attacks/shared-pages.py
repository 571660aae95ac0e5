# Every shared mapping of this process: what it is, and, where it is writable, garbage written
# over all of it (the attack: a made-up owner for the admission mutex, counters, the audit
# trail's totals). A run must find none it could write, and none the pool uses.
import ctypes
import json

found = []
with open("/proc/self/maps") as f:
    for line in f:
        fields = line.split()
        perms = fields[1]
        if perms[3] != "s":
            continue
        found.append({"perms": perms, "path": fields[5] if len(fields) > 5 else ""})
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        if perms[1] == "w":
            ctypes.memset(lo, 0x41, hi - lo)
print(json.dumps(found))
