# Empty files, until the run's tmpfs refuses one: each costs the host kernel memory whatever
# its size, so the disk budget must bound their number too. Prints how many were made and why
# the next one failed.
import errno
import json
import os

made, why = 0, None
try:
    while made < 1_000_000:
        os.close(os.open(f"f{made}", os.O_CREAT | os.O_WRONLY, 0o600))
        made += 1
except OSError as e:
    why = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps({"files": made, "error": why}))
