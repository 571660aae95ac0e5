# Exits at once while a child keeps stdout and stderr open for five minutes. The marker
# (stdin) is on the child's command line.
import os
import sys

marker = sys.stdin.read().strip()
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.close(ready_r)
    os.set_inheritable(ready_w, True)
    os.execv(sys.executable, [sys.executable, "-c",
             f"import os, time; os.close({ready_w}); time.sleep(300)", marker])
os.close(ready_w)
os.read(ready_r, 1)  # EOF: the child is up, holding our stdout and stderr
print("main exits", flush=True)
