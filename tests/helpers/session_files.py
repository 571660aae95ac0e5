#!/usr/bin/python3
"""Sessions' artifacts under concurrency, for 87-session-guarantees.bats (127.0.0.1 only, bounded).

usage: session_files.py PORT SESSIONS CELLS
  SESSIONS threads, each with a session of its own, run CELLS cells one after the other; each
  cell creates a file named after it (and rewrites an earlier cell's file in place, its size
  unchanged) and expects exactly those in the cell's artifacts, with their content. Prints
  "cells N missing M extra E" and one line per missing or extra file; the sessions are closed
  at the end. Exit status 0 when every cell answered 200, 1 otherwise.
"""
import base64
import json
import sys
import threading
import time
import urllib.error
import urllib.request

import openapi_check

HOST = "127.0.0.1"
CELL = """\
import os
open({new!r}, "w").write({new!r})
if {old!r}:
    with open({old!r}, "r+") as f:
        f.write({new_old!r})
"""


def call(port, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://{HOST}:{port}{path}", data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            raw = r.read()
            openapi_check.record(method, req.full_url, r.status, r.headers.items(), raw)
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        openapi_check.record(method, req.full_url, e.code, e.headers.items(), e.read())
        return e.code, None


def one_session(port, n, cells, out):
    code, s = call(port, "POST", "/sessions")
    if code != 201:
        out.append(("error", f"session {n}: POST /sessions answered {code}"))
        return
    sid = s["id"]
    try:
        for i in range(cells):
            new = f"s{n}-c{i}.txt"
            # every fourth cell also rewrites the file two cells back (same size, new text)
            old = f"s{n}-c{i - 2}.txt" if i >= 2 and i % 4 == 0 else ""
            new_old = ("r" + new)[: len(old)].ljust(len(old), "r")
            code, r = call(port, "POST", f"/sessions/{sid}/execute",
                           {"code": CELL.format(new=new, old=old, new_old=new_old),
                            "artifacts": True})
            if code != 200 or r.get("status") != "succeeded":
                out.append(("error", f"session {n} cell {i}: {code} {r}"))
                return
            want = {new: new}
            if old:
                want[old] = new_old
            got = {a["path"]: base64.b64decode(a["contentBase64"] or "").decode()
                   for a in r.get("artifacts") or []}
            for p, text in want.items():
                if p not in got:
                    out.append(("missing", f"session {n} cell {i}: {p} ({r['durationMs']} ms)"))
                elif got[p] != text:
                    out.append(("missing", f"session {n} cell {i}: {p} as {got[p]!r}"))
            for p in got:
                if p not in want:
                    out.append(("extra", f"session {n} cell {i}: {p}"))
            out.append(("cell", ""))
    finally:
        call(port, "DELETE", f"/sessions/{sid}")


def main():
    port, sessions, cells = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    out = []
    threads = [threading.Thread(target=one_session, args=(port, n, cells, out), daemon=True)
               for n in range(sessions)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 600
    for t in threads:
        t.join(max(0.0, deadline - time.monotonic()))
    count = {k: sum(1 for e in out if e[0] == k) for k in ("cell", "missing", "extra", "error")}
    print(f"cells {count['cell']} missing {count['missing']} extra {count['extra']}")
    for kind, what in out:
        if kind != "cell":
            print(f"{kind}: {what}")
    return 0 if count["error"] == 0 and not any(t.is_alive() for t in threads) else 1


if __name__ == "__main__":
    sys.exit(main())
