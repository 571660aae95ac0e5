# Tries to reach nginx's port, the FastCGI socket and an abstract socket; and UDP to loopback.
import json
import socket
import sys

port, fcgi = sys.stdin.read().split()
out = {}


def attempt(name, fn):
    try:
        fn()
        out[name] = "connected"
    except OSError as e:
        out[name] = f"{type(e).__name__}: {e.strerror}"


def tcp():
    with socket.create_connection(("127.0.0.1", int(port)), timeout=2) as s:
        s.sendall(b"GET /healthz HTTP/1.0\r\n\r\n")


def udp():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"x", ("127.0.0.1", int(port)))


def unix():
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(2)
        s.connect(fcgi)


def abstract():
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(2)
        s.connect("\0codebox-test-abstract")


def netlink():
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()


attempt("tcp-nginx", tcp)
attempt("udp-loopback", udp)
attempt("unix-fastcgi", unix)
attempt("unix-abstract", abstract)
attempt("netlink", netlink)
print(json.dumps(out))
