# The reference lab's check: print our pid and a child's, then run past the timeout. The
# client then looks for /proc/<pid> in the serving container.
import os
import subprocess
import sys
import time

child = subprocess.Popen(["/bin/sleep", "60"])
print(os.getpid(), child.pid, flush=True)
time.sleep(60)
