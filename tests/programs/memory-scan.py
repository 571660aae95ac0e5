# Looks through every readable mapping of its own memory for secrets, each given in two halves
# on two lines of stdin (so that no secret is ever whole in this program's own objects), all
# in one pass; "each" counts the places each of them is whole, "found" all of them. Mappings over 1 GiB are
# left out: under AddressSanitizer they are its terabytes of (mostly empty) shadow. In a
# mapping of no file, only the pages that are there (present or swapped, as pagemap says) are
# read: a page never touched holds nothing, and on kernels without the shared zero page a read
# would give it memory of its own (the heavy tier's allocator reserves more than a run may use).
import json
import sys

lines = sys.stdin.read().split("\n")
needles = [(lines[i].encode(), lines[i + 1].encode()) for i in range(0, len(lines) - 1, 2)]
longest = max(len(a) + len(b) for a, b in needles)
each = [0] * len(needles)
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
                    chunk = mem.read(size + longest if pos + size < hi2 else size)
                except OSError:
                    break
                scanned += len(chunk)
                for n, (a, b) in enumerate(needles):
                    # a whole secret starting in this chunk's own bytes (the overlap is the next's)
                    i = chunk.find(a, 0, size + len(a))
                    while i >= 0:
                        if i < size and chunk[i + len(a) : i + len(a) + len(b)] == b:
                            each[n] += 1
                        i = chunk.find(a, i + 1, size + len(a))
                pos += size
print(json.dumps({"found": sum(each), "each": each, "scanned_mb": scanned >> 20}))
