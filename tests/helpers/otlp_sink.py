#!/usr/bin/env python3
"""A stand-in OTLP/HTTP collector for tests/76-traces.bats: listens on a free loopback port
(written to PORT_FILE once listening), appends every POST as one JSON line (its path, its
Content-Type and its body, parsed) to OUT_FILE, and answers 200 {}; while OUT_FILE.hang exists it holds each POST 5 s before reading it
(a collector that does not answer). Stdlib only; ends on
SIGTERM. Usage: otlp_sink.py PORT_FILE OUT_FILE"""
import http.server
import json
import os
import sys
import time


class Sink(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 (http.server's name)
        if os.path.exists(sys.argv[2] + ".hang"):
            time.sleep(5)
            return
        n = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(min(n, 1 << 20))
        try:
            body = json.loads(raw)
        except ValueError:
            body = {"unparsable": raw.decode("latin-1")}
        with open(sys.argv[2], "a", encoding="utf-8") as f:
            f.write(json.dumps({"path": self.path,
                                "contentType": self.headers.get("Content-Type"),
                                "body": body}, separators=(",", ":")) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format, *args):  # noqa: A002 (quiet)
        pass


def main():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    with open(sys.argv[1] + ".tmp", "w", encoding="utf-8") as f:
        f.write(str(server.server_address[1]))
    os.rename(sys.argv[1] + ".tmp", sys.argv[1])
    server.serve_forever()


if __name__ == "__main__":
    main()
