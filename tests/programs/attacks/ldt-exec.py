# modify_ldt (a classic exploit primitive) and executing what the run wrote.
import ctypes
import json
import os
import subprocess

libc = ctypes.CDLL(None, use_errno=True)
out = {}
buf = ctypes.create_string_buffer(16)
r = libc.syscall(154, 0, buf, 16)  # modify_ldt(read)
out["modify_ldt"] = os.strerror(ctypes.get_errno()) if r < 0 else "allowed"
with open("/tmp/hello.sh", "w") as f:
    f.write("#!/bin/sh\necho written-and-run\n")
os.chmod("/tmp/hello.sh", 0o755)
out["exec"] = subprocess.run(["/tmp/hello.sh"], capture_output=True, text=True).stdout.strip()
print(json.dumps(out))
