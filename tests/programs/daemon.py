# Leaves a double-forked daemon in its own session, then exits at once. The daemon holds
# no pipe of the run, so nothing but the sandbox's sweep can stop it. The marker (stdin) is
# on the daemon's command line so the test can look for it.
import os
import sys

marker = sys.stdin.read().strip()
ready_r, ready_w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(ready_r)
        os.set_inheritable(ready_w, True)
        # the daemon closes ready_w only once it runs with the marker on its command line
        os.execv(sys.executable, [sys.executable, "-c",
                 f"import os, time; os.close({ready_w}); time.sleep(300)", marker])
    os._exit(0)
os.close(ready_w)
os.wait()
os.read(ready_r, 1)  # EOF: the daemon is up
print("daemon started")
