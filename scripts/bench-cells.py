#!/usr/bin/python3
"""Session cells side by side (make bench --before REV): one session on each stack, the same
cell executed in each in turn on keep-alive connections, COUNT times; prints p50 and p95 of
each side's round trip in ms and their ratio. Loopback only; bounded in count and time.

usage: bench-cells.py NOW_URL BEFORE_URL COUNT NAME=CODE_FILE...
"""
import http.client
import json
import sys
import time
import urllib.parse


def conn(url):
    u = urllib.parse.urlsplit(url)
    return http.client.HTTPConnection(u.hostname, u.port, timeout=60)


def post(c, path, body):
    c.request('POST', path, body=body, headers={'Content-Type': 'application/json'})
    r = c.getresponse()
    data = r.read()
    return r.status, data


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


def main():
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    urls = {'now': sys.argv[1], 'before': sys.argv[2]}
    count = max(10, min(int(sys.argv[3]), 2000))
    progs = [a.split('=', 1) for a in sys.argv[4:]]
    conns = {k: conn(u) for k, u in urls.items()}
    sids = {}
    for k, c in conns.items():
        status, data = post(c, '/sessions', b'{}')
        if status != 201:
            print('bench-cells: %s: POST /sessions answered %d' % (k, status), file=sys.stderr)
            return 1
        sids[k] = json.loads(data)['id']
    deadline = time.monotonic() + 600
    try:
        for name, path in progs:
            body = json.dumps({'code': open(path).read()}).encode()
            ms = {'now': [], 'before': []}
            for i in range(count + 5):
                for k in ('now', 'before'):
                    t = time.perf_counter()
                    status, _ = post(conns[k], '/sessions/%s/execute' % sids[k], body)
                    dt = (time.perf_counter() - t) * 1000
                    if status != 200:
                        print('bench-cells: %s answered %d' % (k, status), file=sys.stderr)
                        return 1
                    if i >= 5:  # the first few warm the session
                        ms[k].append(dt)
                if time.monotonic() > deadline:
                    break
            for k in ('now', 'before'):
                print('%-50s %8.2f %8.2f   (n=%d)' % ('session cell %s: %s p50 p95 ms' % (name, k),
                                                   pct(ms[k], 0.5), pct(ms[k], 0.95), len(ms[k])))
            print('%-50s %8.2f   (%+.2f ms)' % ('ratio now/before (p50): session %s' % name,
                                                pct(ms['now'], 0.5) / pct(ms['before'], 0.5),
                                                pct(ms['now'], 0.5) - pct(ms['before'], 0.5)))
    finally:
        for k, c in conns.items():
            try:
                c.request('DELETE', '/sessions/%s' % sids[k])
                c.getresponse().read()
            except OSError:
                pass
    return 0


if __name__ == '__main__':
    sys.exit(main())
