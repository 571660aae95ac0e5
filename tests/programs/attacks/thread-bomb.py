# Starts threads until the process cap refuses one.
import threading
import time

# small stacks: the process cap must be what stops it, not an address-space cap (RLIMIT_AS,
# where memory is capped that way) that default 8 MiB stacks exhaust after a few threads
threading.stack_size(256 * 1024)
threads = []
try:
    while True:
        t = threading.Thread(target=time.sleep, args=(30,), daemon=True)
        t.start()
        threads.append(t)
except RuntimeError as e:
    print("refused after", len(threads), "threads:", e)
    raise
