#!/usr/bin/python3
"""Misbehaving and measuring clients for codebox's bats suites (127.0.0.1 only, bounded).

usage: clients.py COMMAND PORT [ARGS...]
  raw PORT BYTES [REPEAT]     send BYTES (Python escapes: \\r\\n, \\x01), with REPEAT "a"s
                              inserted at "{}"; print the status and the body
  hangup PORT BODY SECONDS    POST /execute with BODY (or @FILE), hang up after SECONDS
  slowbody PORT N SECONDS     N connections that declare a 1000-byte body and send one byte
                              every 2 s; after SECONDS print how each ended:
                              "open", "closed" or "status NNN"
  slowupload PORT N SECONDS   N connections that send POST /upload's header (multipart,
                              declaring a 1 MB body) and then one byte every 2 s; print
                              "sent N" once every header is out, then after SECONDS (or
                              SIGTERM) how each ended, as slowbody does
  trickle PORT BODY INTERVAL [length|chunked]
                              POST /execute declaring BODY's length (or chunked), then send
                              BODY a byte every INTERVAL s while reading; print "status NNN
                              after S s" and the reply's body, or "closed after S s" (60 s
                              at most)
  flood PORT N SECONDS        open N idle connections (half a request line each), print
                              "opened N", hold them SECONDS, print how many are still open
  burst PORT N                N concurrent new connections, each GET /healthz; print
                              "answered X of N" (X counts complete JSON answers)
  loop PORT CLIENTS COUNT BODY [keepalive|close]
                              CLIENTS threads, each sending COUNT POST /execute one after the
                              other; print the count of each status, e.g. "200:38 429:2"
  fcgi SOCKET ENDPOINT BODY NAME=VALUE...
                              one FastCGI request straight to the pool's socket (BODY, or
                              @FILE for a file's bytes); print the reply (headers and body)
"""
import codecs
import os
import selectors
import socket
import struct
import sys
import threading
import time

HOST = "127.0.0.1"


def read_response(sock, deadline):
    """Reads one HTTP response (Content-Length framed, or until close). Returns (status, body)."""
    data = b""
    while b"\r\n\r\n" not in data:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = None
    length = None
    if lines and lines[0].startswith(b"HTTP/"):
        parts = lines[0].split()
        status = int(parts[1]) if len(parts) > 1 else None
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            if k.strip().lower() == b"content-length":
                length = int(v.strip())
    elif data:
        body = data  # HTTP/0.9: a bare body
    while length is None or len(body) < length:
        if time.monotonic() >= deadline:
            break
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            break
        if not chunk:
            break
        body += chunk
    return status, body


def cmd_raw(port, text, repeat="0"):
    data = codecs.escape_decode(text.encode())[0].replace(b"{}", b"a" * int(repeat))
    s = socket.create_connection((HOST, int(port)), timeout=10)
    s.sendall(data)
    status, body = read_response(s, time.monotonic() + 10)
    s.close()
    print(status)
    print(body.decode("utf-8", "replace"))


def post_bytes(body, keepalive=True):
    return (
        b"POST /execute HTTP/1.1\r\nHost: codebox\r\nContent-Type: application/json\r\n"
        + (b"" if keepalive else b"Connection: close\r\n")
        + b"Content-Length: %d\r\n\r\n" % len(body)
        + body
    )


def cmd_hangup(port, body, seconds):
    if body.startswith("@"):  # a file: keeps markers in the body off this command line
        with open(body[1:], encoding="utf-8") as f:
            body = f.read()
    s = socket.create_connection((HOST, int(port)), timeout=10)
    s.sendall(post_bytes(body.encode()))
    time.sleep(float(seconds))
    s.close()


def slow_clients(port, n, head, drip, seconds, stop=(), announce=False):
    """n connections that send head, then drip every 2 s until seconds pass (or stop holds
    something): prints each one's fate, "status NNN" (the first answer's), "closed" or "open"."""
    n = int(n)
    socks = []
    for _ in range(n):
        s = socket.create_connection((HOST, int(port)), timeout=10)
        s.sendall(head)
        s.setblocking(False)
        socks.append(s)
    if announce:
        print("sent", n, flush=True)
    state = ["open"] * n
    end = time.monotonic() + float(seconds)
    while time.monotonic() < end and not stop:
        for i, s in enumerate(socks):
            if state[i] != "open":
                continue
            try:
                data = s.recv(4096)
                if not data:
                    state[i] = "closed"
                    continue
                parts = data.split(b" ", 2)
                state[i] = "status " + parts[1].decode() if len(parts) > 1 else "closed"
                continue
            except BlockingIOError:
                pass
            except OSError:
                state[i] = "closed"
                continue
            try:
                s.send(drip)
            except OSError:
                state[i] = "closed"
        for _ in range(20):  # 2 s, in steps that notice SIGTERM
            if stop or time.monotonic() >= end:
                break
            time.sleep(0.1)
    for s in socks:
        s.close()
    for st in state:
        print(st)


def cmd_slowbody(port, n, seconds):
    slow_clients(port, n,
                 b"POST /execute HTTP/1.1\r\nHost: codebox\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 1000\r\n\r\n{", b" ", seconds)


def cmd_slowupload(port, n, seconds):
    import signal

    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    slow_clients(port, n,
                 b"POST /upload HTTP/1.1\r\nHost: codebox\r\n"
                 b"Content-Type: multipart/form-data; boundary=XX\r\n"
                 b"Content-Length: 1000000\r\n\r\n--XX\r\n", b"x", seconds, stop, announce=True)


def cmd_trickle(port, body, interval, framing="length"):
    body = body.encode()
    chunked = framing == "chunked"
    head = b"POST /execute HTTP/1.1\r\nHost: codebox\r\nContent-Type: application/json\r\n"
    head += b"Transfer-Encoding: chunked\r\n\r\n" if chunked else b"Content-Length: %d\r\n\r\n" % len(body)
    s = socket.create_connection((HOST, int(port)), timeout=10)
    s.sendall(head)
    t0 = time.monotonic()
    deadline = t0 + 60
    reply = b""
    pos = 0
    sent_all = False
    while time.monotonic() < deadline:
        if not sent_all:
            piece = body[pos : pos + 1]
            try:
                s.sendall(b"1\r\n" + piece + b"\r\n" if chunked else piece)
            except OSError:
                sent_all = True  # nginx stopped reading: the reply (if any) is what follows
            pos += 1
            if pos >= len(body):
                if chunked and not sent_all:
                    s.sendall(b"0\r\n\r\n")
                sent_all = True
        s.settimeout(float(interval) if not sent_all else max(0.01, deadline - time.monotonic()))
        try:
            data = s.recv(65536)
        except socket.timeout:
            continue
        except OSError:
            break
        if not data:
            break
        reply += data
        if b"\r\n\r\n" in reply:
            h, _, rest = reply.partition(b"\r\n\r\n")
            length = [int(v.split(b":")[1]) for v in h.split(b"\r\n") if v.lower().startswith(b"content-length:")]
            if length and len(rest) >= length[0]:
                break
    took = time.monotonic() - t0
    s.close()
    if reply.startswith(b"HTTP/"):
        h, _, rest = reply.partition(b"\r\n\r\n")
        print("status %s after %.1f s" % (h.split()[1].decode(), took))
        print(rest.decode(errors="replace"))
    else:
        print("closed after %.1f s" % took)


def cmd_flood(port, n, seconds):
    socks = []
    for _ in range(int(n)):
        s = socket.create_connection((HOST, int(port)), timeout=10)
        s.sendall(b"GET /healthz HT")
        socks.append(s)
    print("opened %d" % len(socks), flush=True)
    time.sleep(float(seconds))
    alive = 0
    for s in socks:
        s.setblocking(False)
        try:
            alive += 1 if s.recv(1) else 0
        except BlockingIOError:
            alive += 1  # nothing to read: still open
        except OSError:
            pass
        s.close()
    print(alive)


def cmd_burst(port, n):
    n = int(n)
    sel = selectors.DefaultSelector()
    answered = 0
    pending = {}
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex((HOST, int(port)))
        pending[s] = b""
        sel.register(s, selectors.EVENT_WRITE)
    deadline = time.monotonic() + 30
    while pending and time.monotonic() < deadline:
        for key, ev in sel.select(timeout=1):
            s = key.fileobj
            if ev & selectors.EVENT_WRITE:
                try:
                    s.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                    sel.modify(s, selectors.EVENT_READ)
                except OSError:
                    sel.unregister(s)
                    del pending[s]
                    s.close()
                continue
            try:
                chunk = s.recv(4096)
            except OSError:
                chunk = b""
            if chunk:
                pending[s] += chunk
                continue
            if b'{"status":"ok"}' in pending[s]:
                answered += 1
            sel.unregister(s)
            del pending[s]
            s.close()
    for s in pending:
        s.close()
    print("answered %d of %d" % (answered, n))


def cmd_loop(port, clients, count, body, mode="close"):
    counts = {}
    lock = threading.Lock()
    keep = mode == "keepalive"

    def one_client():
        s = None
        for _ in range(int(count)):
            if s is None:
                s = socket.create_connection((HOST, int(port)), timeout=60)
            s.sendall(post_bytes(body.encode(), keep))
            status, _ = read_response(s, time.monotonic() + 60)
            with lock:
                counts[status] = counts.get(status, 0) + 1
            if not keep:
                s.close()
                s = None
        if s is not None:
            s.close()

    threads = [threading.Thread(target=one_client) for _ in range(int(clients))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(" ".join("%s:%d" % (k, v) for k, v in sorted(counts.items(), key=str)))


def fcgi_record(rtype, content, req_id=1):
    pad = (8 - len(content) % 8) % 8
    return struct.pack("!BBHHBx", 1, rtype, req_id, len(content), pad) + content + b"\0" * pad


def fcgi_pair(name, value):
    def ln(n):
        return bytes([n]) if n < 128 else struct.pack("!I", n | 0x80000000)

    return ln(len(name)) + ln(len(value)) + name + value


def cmd_fcgi(path, endpoint, body, *pairs):
    if body.startswith("@"):
        with open(body[1:], encoding="utf-8") as f:
            body = f.read()
    params = {
        "REQUEST_METHOD": "POST",
        "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body.encode())),
        "CODEBOX_ENDPOINT": endpoint,
        "CODEBOX_REQUEST_ID": "forged",
    }
    for p in pairs:
        k, _, v = p.partition("=")
        params[k] = v
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(60)
    s.connect(path)
    msg = fcgi_record(1, struct.pack("!HB5x", 1, 0))  # BEGIN_REQUEST, responder
    enc = b"".join(fcgi_pair(k.encode(), v.encode()) for k, v in params.items())
    msg += fcgi_record(4, enc) + fcgi_record(4, b"")
    data = body.encode()
    for i in range(0, len(data), 32768):
        msg += fcgi_record(5, data[i : i + 32768])
    msg += fcgi_record(5, b"")
    s.sendall(msg)
    out = b""
    buf = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        buf += chunk
        while len(buf) >= 8:
            _, rtype, _, clen, plen = struct.unpack("!BBHHBx", buf[:8])
            if len(buf) < 8 + clen + plen:
                break
            if rtype == 6:
                out += buf[8 : 8 + clen]
            buf = buf[8 + clen + plen :]
    s.close()
    sys.stdout.write(out.decode("utf-8", "replace").replace("\r\n", "\n"))


COMMANDS = {
    "raw": cmd_raw,
    "hangup": cmd_hangup,
    "slowbody": cmd_slowbody,
    "slowupload": cmd_slowupload,
    "trickle": cmd_trickle,
    "flood": cmd_flood,
    "burst": cmd_burst,
    "loop": cmd_loop,
    "fcgi": cmd_fcgi,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in COMMANDS:
        sys.stderr.write(__doc__)
        sys.exit(2)
    COMMANDS[sys.argv[1]](*sys.argv[2:])
