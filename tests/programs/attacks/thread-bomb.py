# Starts threads until the process cap refuses one.
import threading
import time

threads = []
try:
    while True:
        t = threading.Thread(target=time.sleep, args=(30,), daemon=True)
        t.start()
        threads.append(t)
except RuntimeError as e:
    print("refused after", len(threads), "threads:", e)
    raise
