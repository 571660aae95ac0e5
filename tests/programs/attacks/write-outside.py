# Tries to write outside its working directory: /tmp, /etc, /usr, /, the parent directory,
# and a path given on stdin (another run's directory on the host).
import json
import os
import sys

marker, other = sys.stdin.read().split()
out = {}
for path in (f"/tmp/{marker}", f"/etc/{marker}", f"/usr/{marker}", f"/{marker}",
             f"../{marker}", f"{other}/{marker}", f"/dev/shm/{marker}"):
    try:
        with open(path, "w") as f:
            f.write("x")
        out[path] = "written"
    except OSError as e:
        out[path] = type(e).__name__
print(json.dumps(out))
