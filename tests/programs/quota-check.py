# What a program finds of the per-user kernel counters quota-fill.py fills, and its host uid:
# prints a new pipe's size, the size it could grow it to (0: refused), how many of 8 realtime
# signals it could queue, and the host uid its user namespace maps its uid onto.
import ctypes
import fcntl
import os
import signal

F_SETPIPE_SZ, F_GETPIPE_SZ = 1031, 1032
r, w = os.pipe()
default = fcntl.fcntl(w, F_GETPIPE_SZ)
try:
    grown = fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
except OSError:
    grown = 0
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGRTMIN, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
queued = sum(libc.sigqueue(os.getpid(), signal.SIGRTMIN, 0) == 0 for _ in range(8))
host = open("/proc/self/uid_map").read().split()[1]
print(default, grown, queued, host)
