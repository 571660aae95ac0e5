# What LLM-written programs do: save to /tmp, /var/tmp and /dev/shm, use multiprocessing.Pool
# and ProcessPoolExecutor. Then fills /tmp and /dev/shm to show they share the run's one disk
# budget. Prints JSON.
import concurrent.futures
import json
import multiprocessing
import os
import tempfile


def square(x):
    return x * x


out = {}
for d in ("/tmp", "/var/tmp", "/dev/shm"):
    with open(os.path.join(d, "saved.txt"), "w") as f:
        f.write(d)
    out[d] = open(os.path.join(d, "saved.txt")).read() == d
out["others"] = sorted(set(os.listdir("/tmp")) - {"saved.txt"})
with tempfile.NamedTemporaryFile() as f:
    out["tempfile"] = f.name.startswith(os.getcwd())
with multiprocessing.Pool(2) as pool:
    out["pool"] = pool.map(square, range(10))
with concurrent.futures.ProcessPoolExecutor(2) as ex:
    out["executor"] = list(ex.map(square, range(5)))
written = 0
try:
    for d in ("/tmp", "/dev/shm", "/var/tmp", "."):
        with open(os.path.join(d, "fill"), "wb") as f:
            for i in range(40):
                f.write(b"x" * (1 << 20))
                written += 1 << 20
except OSError as e:
    out["fill"] = e.strerror
out["filledMiB"] = written >> 20
print(json.dumps(out))
