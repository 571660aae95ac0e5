# Looks through every readable mapping of its own memory for a secret given in two halves
# (so that the secret is never whole in this program's own objects). Mappings over 1 GiB are
# left out: under AddressSanitizer they are its terabytes of (mostly empty) shadow. In a
# mapping of no file, only the pages that are there (present or swapped, as pagemap says) are
# read: a page never touched holds nothing, and on kernels without the shared zero page a read
# would give it memory of its own (the heavy tier's allocator reserves more than a run may use).
import json
import sys

first, second = sys.stdin.read().split("\n")
a, b = first.encode(), second.encode()
found = 0
scanned = 0
PAGE = 4096
try:
    pagemap = open("/proc/self/pagemap", "rb", buffering=0)
except OSError:
    pagemap = None


def spans(lo, hi, anonymous):
    """The [start, end) runs of the mapping worth reading."""
    if not anonymous or pagemap is None:
        yield lo, hi
        return
    start = None
    for base in range(lo, hi, 1 << 24):
        n = (min(hi, base + (1 << 24)) - base) // PAGE
        pagemap.seek(base // PAGE * 8)
        entries = pagemap.read(n * 8)
        for i in range(n):
            there = entries[i * 8 + 7] & 0xC0  # bit 63 present, bit 62 swapped
            addr = base + i * PAGE
            if there and start is None:
                start = addr
            elif not there and start is not None:
                yield start, addr
                start = None
    if start is not None:
        yield start, hi


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
        for lo2, hi2 in spans(lo, hi, fields[4] == "0"):
            pos = lo2
            while pos < hi2:
                size = min(1 << 20, hi2 - pos)
                try:
                    mem.seek(pos)
                    chunk = mem.read(size + len(a) + len(b) if pos + size < hi2 else size)
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
