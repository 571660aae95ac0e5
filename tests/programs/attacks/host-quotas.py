# Takes everything it can of the host-wide and per-user kernel tables: AIO contexts
# (fs.aio-max-nr), inotify instances and watches, fanotify groups, dnotify. Then says "held"
# (a file in its directory, which the test sees through /proc/<pid>/cwd) and holds them until
# the test sends SIGUSR1 (or the run's time limit ends it). Prints what each call gave.
import ctypes
import fcntl
import json
import os
import signal

libc = ctypes.CDLL(None, use_errno=True)
out = {}
ctxs = []
for i in range(16):
    ctx = ctypes.c_ulong(0)
    if libc.syscall(206, 4096, ctypes.byref(ctx)) == 0:  # io_setup
        ctxs.append(ctx)
    else:
        out["io_setup"] = os.strerror(ctypes.get_errno())
        break
out["aio_contexts"] = len(ctxs)
fds = []
for i in range(200):
    fd = libc.syscall(294, 0)  # inotify_init1
    if fd < 0:
        out["inotify_init1"] = os.strerror(ctypes.get_errno())
        break
    fds.append(fd)
    libc.inotify_add_watch(fd, b"/usr/lib", 0xFFF)
out["inotify_instances"] = len(fds)
r = libc.syscall(300, 0, 0)  # fanotify_init
out["fanotify_init"] = os.strerror(ctypes.get_errno()) if r < 0 else "allowed"
signal.signal(signal.SIGIO, signal.SIG_IGN)  # dnotify's default signal would end the run
try:
    d = os.open("/usr/lib", os.O_RDONLY)
    fcntl.fcntl(d, fcntl.F_NOTIFY, fcntl.DN_ACCESS | fcntl.DN_MULTISHOT)
    out["dnotify"] = "allowed"
except OSError as e:
    out["dnotify"] = e.strerror
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGUSR1])
open("held", "w").close()
signal.sigwait([signal.SIGUSR1])  # until the test has tried the host side, or the time limit
print(json.dumps(out))
