"""Holds a pool's admission lock from outside the pool, for the tests.

  wedge-slots.py [--on-usr1] PID

PID is any process of the pool that maps the execution slots (the supervisor, a worker).
With --on-usr1 it maps the table, prints "armed" and locks only when it gets SIGUSR1: a test
that must wedge the lock at one moment (a worker mid-way between two admissions) pays for
python's start and the mapping beforehand.
The table is a memfd named codebox-slots whose first bytes are its process-shared robust
mutex (fcgi/core/slots.c). This process maps the same memory through /proc/PID/map_files (root
only: CAP_SYS_ADMIN), locks the mutex, prints "locked" and then holds it, alive, until it is
killed (SIGTERM), or 120 s have passed; it never unlocks, so the next locker finds the
mutex EOWNERDEAD, as after a holder that died.

Why this way: a worker stopped while it holds the lock would need the lock's few
instructions to be caught (a race), and gdb would need the pool's symbols and the table's
address. This needs neither, and nothing a request can send reaches it: only root on the
pool's host (or in its pod's PID namespace with CAP_SYS_ADMIN) can open map_files.
"""

import ctypes
import errno
import mmap
import os
import signal
import sys


def main():
    args = sys.argv[1:]
    on_usr1 = args[:1] == ["--on-usr1"]
    pid = int(args[-1])
    with open(f"/proc/{pid}/maps") as f:
        lines = [line for line in f if line.rstrip().endswith("/memfd:codebox-slots (deleted)")]
    if len(lines) != 1:
        sys.exit(f"wedge-slots: pid {pid} maps {len(lines)} codebox-slots tables, not one")
    span = lines[0].split()[0]
    fd = os.open(f"/proc/{pid}/map_files/{span}", os.O_RDWR)
    # the whole memfd (the table's size, less than the page the pool maps)
    table = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    os.close(fd)
    libc = ctypes.CDLL(None, use_errno=True)
    lock = ctypes.addressof(ctypes.c_char.from_buffer(table))
    # bounded: a test that fails before it kills this process does not leave the pool stuck
    signal.alarm(120)
    if on_usr1:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
        print("armed", flush=True)
        signal.sigwait({signal.SIGUSR1})
    rc = libc.pthread_mutex_lock(ctypes.c_void_p(lock))
    if rc == errno.EOWNERDEAD:  # held, after a holder that died
        libc.pthread_mutex_consistent(ctypes.c_void_p(lock))
    elif rc != 0:
        sys.exit(f"wedge-slots: pthread_mutex_lock failed: {os.strerror(rc)}")
    print("locked", flush=True)
    while True:
        signal.pause()


if __name__ == "__main__":
    main()
