#!/usr/bin/python3
"""The load of scripts/bench-sessions.sh: keep-alive clients on loopback, stdlib only.

usage: bench-sessions.py BASE create N        N sessions made one after another (each deleted
                                              after its timing): latencies in ms, one a line
       bench-sessions.py BASE latency N PATH   N sequential print(1)s on one connection: PATH
                                              "session" (in one session) or "execute"
       bench-sessions.py BASE load C S PATH    C clients for S seconds, each on its own
                                              connection (and its own session): a JSON line
                                              {"ok", "other", "client_cpu_s", "busy_s"}
       bench-sessions.py BASE snapshot N       a session holding a 10 MB DataFrame, a fitted
                                              scikit-learn model and a file: N snapshots, each
                                              restored into a new session (then deleted): a
                                              line each, "snapshot_ms restore_ms bytes
                                              base64_bytes"

Every request is bounded (60 s); every loop is bounded in count or time.
"""

import http.client
import json
import os
import resource
import sys
import threading
import time
import urllib.parse

BODY = json.dumps({"code": "print(1)"})


def connect(base):
    u = urllib.parse.urlsplit(base)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=60)


def request(conn, method, path, body=None):
    headers = {"Content-Type": "application/json"} if body is not None else {}
    conn.request(method, path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    return r.status, data


# what a session of print(1) needs: 24 sessions of the runs' own cap would hold more than the
# pool's memory budget (a session holds its cap of it from its creation: 429 memory)
SESSION_BODY = json.dumps({"memoryBytes": 256 << 20})


def new_session(conn):
    status, data = request(conn, "POST", "/sessions", SESSION_BODY)
    if status != 201:
        raise SystemExit("bench-sessions: POST /sessions answered %d: %s" % (status, data[:200]))
    return json.loads(data)["id"]


def busy_jiffies():
    with open("/proc/stat") as f:
        v = f.readline().split()
    return sum(int(v[i]) for i in (1, 2, 3, 6, 7, 8))


def main():
    base, what = sys.argv[1], sys.argv[2]
    if what == "create":
        conn = connect(base)
        for _ in range(int(sys.argv[3])):
            t0 = time.perf_counter()
            sid = new_session(conn)
            print("%.2f" % ((time.perf_counter() - t0) * 1000))
            request(conn, "DELETE", "/sessions/" + sid)
        return
    if what == "latency":
        n, path = int(sys.argv[3]), sys.argv[4]
        conn = connect(base)
        target = "/execute"
        if path == "session":
            target = "/sessions/%s/execute" % new_session(conn)
        for _ in range(5):  # warm-up
            request(conn, "POST", target, BODY)
        for _ in range(n):
            t0 = time.perf_counter()
            status, _ = request(conn, "POST", target, BODY)
            if status != 200:
                raise SystemExit("bench-sessions: %s answered %d" % (target, status))
            print("%.2f" % ((time.perf_counter() - t0) * 1000))
        if path == "session":
            request(conn, "DELETE", target.rsplit("/", 1)[0])
        return
    if what == "load":
        clients, seconds, path = int(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
        conns = [connect(base) for _ in range(clients)]
        targets = []
        for c in conns:
            targets.append(
                "/sessions/%s/execute" % new_session(c) if path == "session" else "/execute"
            )
            request(c, "POST", targets[-1], BODY)  # warm-up
        counts = [[0, 0] for _ in range(clients)]
        stop = [0.0]

        def client(i):
            while time.monotonic() < stop[0]:
                status, _ = request(conns[i], "POST", targets[i], BODY)
                counts[i][0 if status == 200 else 1] += 1

        hz = os.sysconf("SC_CLK_TCK")
        r0 = resource.getrusage(resource.RUSAGE_SELF)
        b0 = busy_jiffies()
        stop[0] = time.monotonic() + seconds
        threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(seconds + 70)
        b1 = busy_jiffies()
        r1 = resource.getrusage(resource.RUSAGE_SELF)
        if path == "session":
            for c, t in zip(conns, targets):
                request(c, "DELETE", t.rsplit("/", 1)[0])
        print(
            json.dumps(
                {
                    "ok": sum(c[0] for c in counts),
                    "other": sum(c[1] for c in counts),
                    "client_cpu_s": (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime),
                    "busy_s": (b1 - b0) / hz,
                    "seconds": seconds,
                }
            )
        )
        return
    if what == "snapshot":
        snapshot(base, int(sys.argv[3]))
        return
    raise SystemExit(__doc__)


DATAFRAME = """
import numpy as np, pandas as pd
from sklearn.linear_model import LogisticRegression
rng = np.random.default_rng(7)
df = pd.DataFrame(rng.random((125000, 10)), columns=[f"c{i}" for i in range(10)])
df["label"] = (df.c0 + df.c1 > 1).astype(int)
model = LogisticRegression(max_iter=200).fit(df[["c0", "c1", "c2"]], df.label)
df.head(20000).to_csv("data.csv", index=False)
"""


def snapshot(base, n):
    conn = connect(base)
    sid = new_session(conn)
    status, data = request(
        conn, "POST", "/sessions/%s/execute" % sid, json.dumps({"code": DATAFRAME})
    )
    if status != 200 or json.loads(data)["status"] != "succeeded":
        raise SystemExit("bench-sessions: the DataFrame session failed: %s" % data[:300])
    for _ in range(n):
        t0 = time.perf_counter()
        status, data = request(conn, "POST", "/sessions/%s/snapshot" % sid, "")
        t1 = time.perf_counter()
        if status != 200:
            raise SystemExit("bench-sessions: snapshot answered %d: %s" % (status, data[:200]))
        snap = json.loads(data)
        body = json.dumps({"snapshot": snap["snapshot"], "memoryBytes": 256 << 20})
        t2 = time.perf_counter()
        status, data = request(conn, "POST", "/sessions", body)
        t3 = time.perf_counter()
        if status != 201:
            raise SystemExit("bench-sessions: restore answered %d: %s" % (status, data[:200]))
        request(conn, "DELETE", "/sessions/" + json.loads(data)["id"])
        print(
            "%.2f %.2f %d %d"
            % ((t1 - t0) * 1000, (t3 - t2) * 1000, snap["bytes"], len(snap["snapshot"]))
        )
    request(conn, "DELETE", "/sessions/" + sid)


if __name__ == "__main__":
    main()
