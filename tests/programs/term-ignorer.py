# Ignores SIGTERM, spawns children that ignore it too, and spins. The marker (stdin) is on
# the children's command lines.
import os
import signal
import sys

marker = sys.stdin.read().strip()
signal.signal(signal.SIGTERM, signal.SIG_IGN)
for _ in range(3):
    if os.fork() == 0:
        os.execv("/bin/sh", ["sh", "-c", "trap '' TERM; while :; do :; done", marker])
print("spinning", flush=True)
while True:
    pass
