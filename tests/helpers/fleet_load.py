#!/usr/bin/python3
"""A bounded load for the fleet's suite and bench (127.0.0.1 only).

usage: fleet_load.py URL CONCURRENCY COUNT BODYFILE...
  CONCURRENCY threads send COUNT POSTs to URL in all (request i carries BODYFILE number
  i % len(BODYFILES), one new connection each, X-Request-Id fleet-<i>), each bounded to 30 s,
  and print one JSON line per request, in the order they ended:
  {"i": 0, "body": 0, "status": 200, "ms": 12.3, "start": 0.001, "error": null,
   "outcome": "succeeded", "stdout": "1\\n", "retryAfter": null}
  ("status": null when no answer came: a reset, a close or the 30 s bound; "start": seconds
  after the load began; "outcome": the body's "status", or its "error" for an error body)
"""
import http.client
import json
import sys
import threading
import time
import urllib.parse


def main(argv):
    if len(argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    url = urllib.parse.urlsplit(argv[1])
    concurrency, count = int(argv[2]), int(argv[3])
    bodies = []
    for name in argv[4:]:
        with open(name, "rb") as f:
            bodies.append(f.read())
    lock = threading.Lock()
    state = {"next": 0}
    t0 = time.monotonic()

    def worker():
        while True:
            with lock:
                i = state["next"]
                if i >= count:
                    return
                state["next"] += 1
            k = i % len(bodies)
            start = time.monotonic()
            line = {"i": i, "body": k, "status": None, "ms": None, "start": round(start - t0, 3),
                    "error": None, "outcome": None, "stdout": None, "retryAfter": None}
            try:
                c = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
                c.request("POST", url.path, body=bodies[k],
                          headers={"Content-Type": "application/json", "Connection": "close",
                                   "X-Request-Id": f"fleet-{i}"})
                r = c.getresponse()
                data = r.read()
                line["status"] = r.status
                line["retryAfter"] = r.getheader("Retry-After")
                try:
                    reply = json.loads(data)
                    line["outcome"] = reply.get("status") or reply.get("error")
                    line["stdout"] = reply.get("stdout")
                except ValueError:
                    line["outcome"] = "not JSON: " + data[:80].decode("utf-8", "replace")
                c.close()
            except (OSError, http.client.HTTPException) as e:
                line["error"] = repr(e)
            line["ms"] = round((time.monotonic() - start) * 1000, 1)
            with lock:
                print(json.dumps(line), flush=True)

    threads = [threading.Thread(target=worker) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
