# Looks for other processes and their secrets through /proc.
import json
import os
import sys

secret = sys.stdin.read().strip()
seen = {}
found_secret = secret in json.dumps(dict(os.environ))
try:
    entries = [e for e in os.listdir("/proc") if e.isdigit()]
except OSError as e:
    entries = []
    seen["listdir"] = type(e).__name__
for pid in entries:
    info = {}
    for what in ("cmdline", "environ"):
        try:
            with open(f"/proc/{pid}/{what}", "rb") as f:
                data = f.read()
            info[what] = data.replace(b"\0", b" ").decode(errors="replace")
            if secret.encode() in data:
                found_secret = True
        except OSError as e:
            info[what] = type(e).__name__
    try:
        info["cwd"] = os.readlink(f"/proc/{pid}/cwd")
    except OSError as e:
        info["cwd"] = type(e).__name__
    seen[pid] = info
print(json.dumps({"found_secret": found_secret, "seen": seen}))
