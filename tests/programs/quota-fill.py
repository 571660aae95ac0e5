# Fills the two per-user kernel counters a program can fill without privilege, and keeps what it
# took (in globals(): a session's cell leaves it held): pipe buffers (pipe-user-pages-soft), by
# growing pipes to 1 MiB until the kernel refuses, and queued realtime signals
# (RLIMIT_SIGPENDING), by queueing a blocked SIGRTMIN to itself until EAGAIN. The final
# expression: (pipes grown, the refusal's errno, signals queued, the last errno, a new pipe's
# size).
import ctypes
import fcntl
import os
import signal

F_SETPIPE_SZ, F_GETPIPE_SZ = 1031, 1032
held = globals().setdefault("held", [])
grown = pipe_errno = 0
for _ in range(2000):
    r, w = os.pipe()
    held.append((r, w))
    try:
        fcntl.fcntl(w, F_SETPIPE_SZ, 1 << 20)
        grown += 1
    except OSError as e:
        pipe_errno = e.errno
        break
libc = ctypes.CDLL(None, use_errno=True)
# blocked and ignored: queued while blocked, and harmless should the mask ever be lifted
signal.signal(signal.SIGRTMIN, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
queued = sig_errno = 0
while queued < 4_000_000:
    if libc.sigqueue(os.getpid(), signal.SIGRTMIN, 0) != 0:
        sig_errno = ctypes.get_errno()
        break
    queued += 1
r, w = os.pipe()
held.append((r, w))
(grown, pipe_errno, queued, sig_errno, fcntl.fcntl(w, F_GETPIPE_SZ))
