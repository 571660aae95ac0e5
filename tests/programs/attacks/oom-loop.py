# The kernel-log flood: forks allocators past the memory limit in a loop, each one OOM-killed
# in turn (11 to 21 OOM kills in 8 s before), for at most 6 s. Prints how many it forked.
import os
import time

t = time.time()
n = 0
while time.time() - t < 6:
    pid = os.fork()
    if pid == 0:
        chunks = []
        while True:
            chunks.append(bytearray(32 << 20))
    os.waitpid(pid, 0)
    n += 1
print(n)
