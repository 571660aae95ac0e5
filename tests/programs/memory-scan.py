# Looks through every readable mapping of its own memory for a secret given in two halves
# (so that the secret is never whole in this program's own objects). Mappings over 1 GiB are
# left out: under AddressSanitizer they are its terabytes of (mostly empty) shadow.
import json
import sys

first, second = sys.stdin.read().split("\n")
a, b = first.encode(), second.encode()
found = 0
scanned = 0
with open("/proc/self/maps") as f:
    maps = f.read().splitlines()
with open("/proc/self/mem", "rb", buffering=0) as mem:
    for line in maps:
        fields = line.split()
        lo, hi = (int(x, 16) for x in fields[0].split("-"))
        if not fields[1].startswith("r") or (len(fields) > 5 and fields[5] == "[vvar]"):
            continue
        if hi - lo > 1 << 30:
            continue
        pos = lo
        while pos < hi:
            size = min(1 << 20, hi - pos)
            try:
                mem.seek(pos)
                chunk = mem.read(size + len(a) + len(b) if pos + size < hi else size)
            except OSError:
                break
            scanned += len(chunk)
            i = chunk.find(a)
            while i >= 0:
                if chunk[i + len(a) : i + len(a) + len(b)] == b:
                    found += 1
                i = chunk.find(a, i + 1)
            pos += size
print(json.dumps({"found": found, "scanned_mb": scanned >> 20}))
