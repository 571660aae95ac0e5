#!/usr/bin/python3
"""Checks the answers the test suites receive against codebox's OpenAPI documents
(docs/openapi.json for port 8080, docs/openapi-agent.json for port 8888), so that the documents
cannot drift from the code.

An exchange (one request and its answer) comes from a curl --trace file (every curl of the
suites goes through stack.bash's curl(), which adds --trace) or from a JSON record a Python
helper wrote (record(), below). Each answer is checked: its path and method are documented (an
unknown path must be answered as the document's x-codebox-unknown-path says, a method the path
does not serve as its x-codebox-method-not-allowed), its status is one the operation lists, its
Content-Type one the status lists, its body valid against that content's schema (a
text/event-stream answer event by event against x-codebox-events), the keys of an object in the
order its schema's x-codebox-key-order gives, and every header the status marks required is
present and valid. An answer that did not arrive whole (a client that hung up, a timeout) is
not checked.

Usage:
  openapi_check.py serve PORTFILE   a checker on a loopback port (written to PORTFILE), one
                                    line a request: "main|agent TRACE-OR-RECORD" answered "ok"
                                    or "fail <why>"; it exits after 120 s without a request or
                                    once PORTFILE's directory is gone
  openapi_check.py check main|agent FILE...   checks FILEs now; exit 1 and why on a mismatch
  openapi_check.py paths main|agent           the documented paths, one a line
Standard library and Debian's python3-jsonschema only (/usr/bin/python3).
"""
import base64
import json
import os
import re
import socket
import socketserver
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOCS = {"main": os.path.join(ROOT, "docs", "openapi.json"),
        "agent": os.path.join(ROOT, "docs", "openapi-agent.json")}
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


class Spec:
    """One document: its paths as patterns, and a validator per schema."""

    def __init__(self, path):
        import jsonschema  # here: the helpers that only record() never load it

        self.jsonschema = jsonschema
        with open(path, encoding="utf-8") as f:
            self.doc = json.load(f)
        self.resolver = jsonschema.RefResolver("", self.doc)
        self.routes = []
        self.prefixes = []
        for template, item in self.doc["paths"].items():
            greedy = set()
            for p in item.get("parameters", []) + [
                    p for m in METHODS if m in item for p in item[m].get("parameters", [])]:
                if p.get("in") == "path" and p.get("x-codebox-greedy"):
                    greedy.add(p["name"])
            rx = ""
            for part in re.split(r"(\{[^}]+\})", template):
                if part.startswith("{"):
                    rx += "(.*)" if part[1:-1] in greedy else "([^/]+)"
                else:
                    rx += re.escape(part)
            self.routes.append((re.compile("^" + rx + "$"), template, item))
            parts = re.split(r"(\{[^}]+\})", template)
            if len(parts) == 3 and parts[1][1:-1] in greedy and parts[2] == "":
                # /download/{path}: port 8888 answers by the prefix the request named, before
                # nginx resolves its dot segments (a climb out is that endpoint's 403)
                self.prefixes.append((parts[0], template, item))
        self.routes.sort(key=lambda r: -len(r[1]))  # the most specific template first
        self.cache = {}

    def deref(self, node):
        while isinstance(node, dict) and "$ref" in node:
            node = self.resolver.resolve(node["$ref"])[1]
        return node

    def errors(self, schema, value):
        key = json.dumps(schema, sort_keys=True)
        v = self.cache.get(key)
        if v is None:
            v = self.jsonschema.Draft202012Validator(schema, resolver=self.resolver)
            self.cache[key] = v
        return [f"{'/'.join(str(p) for p in e.absolute_path) or '(body)'}: {e.message[:300]}"
                for e in v.iter_errors(value)]

    def route(self, path, sent=""):
        for prefix, template, item in self.prefixes:
            if sent.startswith(prefix):
                return template, item
        for p in (path, path.rstrip("/")) if len(path) > 1 and path.endswith("/") else (path,):
            for rx, template, item in self.routes:
                if rx.match(p):
                    return template, item
        return None, None


def parse_trace(path):
    """The exchanges of a curl --trace file: [{method, target, status, headers, body,
    complete}], with the answer's last header block (after any 100 Continue) and its body
    de-chunked."""
    exchanges = []
    cur = None
    kind = None
    with open(path, "rb") as f:
        for raw in f:
            if raw.startswith(b"=> Send header"):
                cur = {"send": bytearray(), "recvh": bytearray(), "data": bytearray()}
                exchanges.append(cur)
                kind = "send"
            elif raw.startswith(b"<= Recv header"):
                kind = "recvh"
            elif raw.startswith(b"<= Recv data"):
                kind = "data"
            elif raw.startswith(b"=>") or raw.startswith(b"<=") or raw.startswith(b"=="):
                kind = None
            elif cur is not None and kind is not None and len(raw) > 6 and raw[4:6] == b": ":
                cur[kind] += bytes.fromhex(raw[6:54].decode("ascii"))
    out = []
    for ex in exchanges:
        line = bytes(ex["send"]).split(b"\r\n", 1)[0].decode("latin-1").split(" ")
        if len(line) < 2:
            continue
        req_headers = {}
        for h in bytes(ex["send"]).split(b"\r\n")[1:]:
            if b":" in h:
                k, v = h.split(b":", 1)
                req_headers[k.decode("latin-1").strip().lower()] = v.decode("latin-1").strip()
        blocks = [b for b in bytes(ex["recvh"]).split(b"\r\n\r\n") if b.strip()]
        if not blocks:
            continue
        head = blocks[-1].split(b"\r\n")
        status_line = head[0].decode("latin-1").split(" ")
        if len(status_line) < 2 or not status_line[1].isdigit():
            continue
        headers = []
        for h in head[1:]:
            if b":" in h:
                k, v = h.split(b":", 1)
                headers.append((k.decode("latin-1").strip().lower(),
                                v.decode("latin-1").strip()))
        hmap = dict(headers)
        data = bytes(ex["data"])
        complete = True
        body = data
        if hmap.get("transfer-encoding", "").lower() == "chunked":
            body, complete = dechunk(data)
        elif "content-length" in hmap:
            complete = len(data) == int(hmap["content-length"])
        elif int(status_line[1]) not in (204, 304) and line[0] != "HEAD":
            complete = len(bytes(ex["recvh"])) > 0  # read to the close
        if int(status_line[1]) < 200:
            complete = False  # no final answer (the client gave up after a 100 Continue)
        out.append({"method": line[0], "target": line[1], "status": int(status_line[1]),
                    "headers": headers, "body": body, "complete": complete,
                    "request_headers": req_headers})
    return out


def dechunk(data):
    body = bytearray()
    i = 0
    while True:
        j = data.find(b"\r\n", i)
        if j < 0:
            return bytes(body), False
        try:
            n = int(data[i:j].split(b";")[0], 16)
        except ValueError:
            return bytes(body), False
        if n == 0:
            return bytes(body), True
        if j + 2 + n + 2 > len(data):
            return bytes(body), False
        body += data[j + 2:j + 2 + n]
        i = j + 2 + n + 2


def parse_sse(text):
    """[(event, data)] of a text/event-stream body; raises ValueError when it is not one."""
    events = []
    if not text:
        return events
    if not text.endswith("\n\n"):
        raise ValueError("the stream does not end with a blank line")
    for block in text[:-2].split("\n\n"):
        event, data = "message", []
        for line in block.split("\n"):
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                event = value
            elif name == "data":
                data.append(value)
            else:
                raise ValueError(f"a line that is not an event's field: {line[:80]!r}")
        events.append((event, "\n".join(data)))
    return events


def key_order(spec, schema, value, where):
    """x-codebox-key-order: the object's keys in that order (those present)."""
    s = spec.deref(schema)
    order = s.get("x-codebox-key-order") if isinstance(s, dict) else None
    if not order or not isinstance(value, dict):
        return []
    keys = [k for k in value]
    want = [k for k in order if k in value]
    return [] if keys == want else [f"{where}: keys in the order {keys}, not {want}"]


def check_body(spec, media, mtype, body, where):
    probs = []
    if mtype == "application/json" or mtype.endswith("+json"):
        try:
            value = json.loads(body.decode("utf-8"), object_pairs_hook=pairs)
        except (UnicodeDecodeError, ValueError) as e:
            return [f"{where}: the body is not JSON ({e})"]
        probs += [f"{where}: {e}" for e in spec.errors(media.get("schema", {}), plain(value))]
        probs += key_order(spec, media.get("schema", {}), value, where)
    elif mtype == "text/event-stream":
        events_doc = media.get("x-codebox-events", {})
        try:
            events = parse_sse(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            return [f"{where}: not an event stream ({e})"]
        for n, (event, data) in enumerate(events):
            if event not in events_doc:
                probs.append(f"{where}: event {n} is {event!r}, not one of {sorted(events_doc)}")
                continue
            try:
                value = json.loads(data, object_pairs_hook=pairs)
            except ValueError as e:
                probs.append(f"{where}: event {n} ({event}): its data is not JSON ({e})")
                continue
            schema = events_doc[event].get("schema", {})
            probs += [f"{where}: event {n} ({event}): {e}"
                      for e in spec.errors(schema, plain(value))]
            probs += key_order(spec, schema, value, f"{where}: event {n} ({event})")
    return probs


class Pairs(dict):
    """A JSON object that remembers its keys' order and whether one repeated."""


def pairs(items):
    d = Pairs(items)
    if len(d) != len(items):
        raise ValueError("a key is repeated")
    return d


def plain(v):
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [plain(x) for x in v]
    return v


def route_path(target):
    """The path nginx routes a request target by: percent-decoded, its slashes merged and its
    dot segments resolved (None when it climbs above the root: nginx's 400)."""
    from urllib.parse import unquote

    segs = unquote(target.split("?", 1)[0], errors="replace").split("/")[1:]
    out = []
    for seg in segs:
        if seg == "..":
            if not out:
                return None
            out.pop()
        elif seg not in (".", ""):
            out.append(seg)
    trailing = bool(out) and segs[-1] in ("", ".", "..")
    return "/" + "/".join(out) + ("/" if trailing else "")


def check_exchange(spec, ex):
    """The problems of one exchange, [] when it matches its document."""
    method = ex["method"].lower()
    path = route_path(ex["target"]) or "/"
    where = f"{ex['method']} {ex['target'][:120]} -> {ex['status']}"
    template, item = spec.route(path, ex["target"])
    status = str(ex["status"])
    if item is None and ex["status"] in (200, 304) and \
            path in spec.doc.get("x-codebox-static", {}).get("paths", []):
        return []  # the playground's files: not API (91-playground checks them)
    if item is None:
        if ex["status"] == 404:
            resp = spec.doc["x-codebox-unknown-path"]
        elif ex["status"] >= 400:
            resp = {"content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/Error"}}}}
        else:
            return [f"{where}: the path is not documented"]
    elif method not in item:
        if method == "head" and "get" in item and ex["status"] != 405:
            return []  # nginx's static files answer HEAD as GET, without the body
        if ex["status"] == 405:
            resp = spec.doc["x-codebox-method-not-allowed"]
        elif ex["status"] == 404:  # a path whose resource does not exist (an unknown session)
            resp = spec.doc["x-codebox-unknown-path"]
        elif ex["status"] in (400, 401, 413):
            resp = {"content": {"application/json": {"schema": {
                "$ref": "#/components/schemas/Error"}}}}
        else:
            return [f"{where}: {ex['method']} is not documented for {template}"]
    else:
        op = item[method]
        responses = op["responses"]
        resp = responses.get(status) or responses.get(status[0] + "XX") or responses.get("default")
        if resp is None:
            return [f"{where}: status {status} is not documented for {ex['method']} {template} "
                    f"(documented: {', '.join(sorted(responses))})"]
    resp = spec.deref(resp)
    probs = []
    hmap = {}
    for k, v in ex["headers"]:
        hmap.setdefault(k, v)
    for name, h in resp.get("headers", {}).items():
        h = spec.deref(h)
        value = hmap.get(name.lower())
        if value is None:
            if h.get("required"):
                probs.append(f"{where}: no {name} header")
            continue
        probs += [f"{where}: header {name}: {e}" for e in spec.errors(h.get("schema", {}), value)]
    content = resp.get("content")
    body = ex["body"]
    if ex["method"] == "HEAD":
        return probs
    if not content:
        if body:
            probs.append(f"{where}: a body ({len(body)} bytes) where the document says none")
        return probs
    ctype = hmap.get("content-type", "")
    mtype = ctype.split(";")[0].strip().lower()
    media = content.get(mtype)
    if media is None:
        for k, m in content.items():
            if k == "*/*" or (k.endswith("/*") and mtype.startswith(k[:-1])):
                media = m
                break
    if media is None:
        return probs + [f"{where}: Content-Type {ctype!r} is not one of {sorted(content)}"]
    return probs + check_body(spec, media, mtype, body, where)


def load_record(path):
    """A Python helper's record (record() below) as an exchange."""
    with open(path, encoding="utf-8") as f:
        r = json.load(f)
    return [{"method": r["method"], "target": r["target"], "status": r["status"],
             "headers": [(k.lower(), v) for k, v in r["headers"]],
             "body": base64.b64decode(r["body"]), "complete": True, "request_headers": {}}]


def check_file(specs, which, path):
    spec = specs[which]
    exchanges = load_record(path) if path.endswith(".json") else parse_trace(path)
    probs = []
    for ex in exchanges:
        if ex["complete"]:
            COUNTS[0] += 1
            probs += check_exchange(spec, ex)
    return probs


COUNTS = [0]


def record(method, url, status, headers, body):
    """For the Python helpers: has the answer checked by the suite's checker (the one curl()
    started: OPENAPI_CHECK_PORTFILE), which fails the test at its teardown if it does not match.
    headers: (name, value) pairs; body: bytes. Does nothing outside the suites."""
    portfile = os.environ.get("OPENAPI_CHECK_PORTFILE")
    failfile = os.environ.get("OPENAPI_CHECK_FAILFILE")
    if not portfile or not failfile:
        return
    from urllib.parse import urlsplit
    u = urlsplit(url)
    agent = os.environ.get("AGENT", "")
    which = "agent" if agent and url.startswith(agent + "/") else "main"
    if os.environ.get("METRICS") and url.startswith(os.environ["METRICS"] + "/"):
        return
    target = u.path + ("?" + u.query if u.query else "")
    d = os.path.dirname(failfile)
    name = os.path.join(d, f"openapi-{os.getpid()}-{threading.get_ident()}-"
                     f"{time.monotonic_ns()}.json")
    with open(name, "w", encoding="utf-8") as f:
        json.dump({"method": method, "target": target, "status": status,
                   "headers": list(headers), "body": base64.b64encode(body).decode()}, f)
    verdict = ask(portfile, which, name)
    if verdict == "ok":
        try:
            os.unlink(name)  # the checker removes what it found right
        except FileNotFoundError:
            pass
    else:
        with open(failfile, "a", encoding="utf-8") as f:
            f.write(verdict + "\n")


def hook_requests():
    """Has every answer the requests library receives in this process checked (record()):
    what the agent protocol's Python clients get. Does nothing outside the suites."""
    if not os.environ.get("OPENAPI_CHECK_FAILFILE"):
        return
    import requests

    send = requests.sessions.Session.send

    def checked_send(self, request, **kwargs):
        r = send(self, request, **kwargs)
        if not kwargs.get("stream"):
            record(request.method, request.url, r.status_code, list(r.raw.headers.items()),
                   r.content)
        return r

    requests.sessions.Session.send = checked_send


def ask(portfile, which, name):
    """The checker's verdict on one file: "ok" or "fail ..." (it is started if need be)."""
    for _ in range(2):
        try:
            with open(portfile, encoding="ascii") as f:
                port = int(f.read().strip())
            with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
                s.sendall(f"{which} {name}\n".encode())
                return s.makefile("r", encoding="utf-8").readline().strip() or "fail no answer"
        except (OSError, ValueError):
            specs = {k: Spec(p) for k, p in DOCS.items()}
            probs = check_file(specs, which, name)
            return "ok" if not probs else "fail " + " | ".join(probs)
    return "fail no checker"


def serve(portfile):
    specs = {k: Spec(p) for k, p in DOCS.items()}
    last = [time.monotonic()]
    lock = threading.Lock()

    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            last[0] = time.monotonic()
            line = self.rfile.readline(8192).decode("utf-8", "replace").strip()
            which, _, name = line.partition(" ")
            try:
                if which not in specs:
                    raise ValueError(f"no document {which!r}")
                probs = check_file(specs, which, name)
                verdict = "ok" if not probs else "fail " + " | ".join(probs)
                if not probs:
                    os.unlink(name)  # a trace can be large; one that failed is kept
            except Exception as e:  # noqa: BLE001 (a checker's failure fails the test)
                verdict = f"fail the checker failed on {name}: {type(e).__name__}: {e}"
            self.wfile.write(verdict.replace("\n", " ").encode("utf-8") + b"\n")
            last[0] = time.monotonic()

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    srv = Server(("127.0.0.1", 0), Handler)
    tmp = f"{portfile}.{os.getpid()}"
    with open(tmp, "w", encoding="ascii") as f:
        f.write(f"{srv.server_address[1]}\n")
    os.rename(tmp, portfile)

    def watchdog():
        while True:
            time.sleep(2)
            with lock:
                idle = time.monotonic() - last[0]
            if idle > 120 or not os.path.isdir(os.path.dirname(portfile)):
                srv.shutdown()
                return

    threading.Thread(target=watchdog, daemon=True).start()
    t0 = time.monotonic()
    srv.serve_forever(poll_interval=0.5)
    print(f"openapi_check: {COUNTS[0]} answers checked in {time.process_time():.1f} s of CPU "
          f"over {time.monotonic() - t0:.0f} s", file=sys.stderr)
    try:
        with open(portfile, encoding="ascii") as f:
            if int(f.read().strip()) == srv.server_address[1]:
                os.unlink(portfile)
    except (OSError, ValueError):
        pass


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        serve(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "check":
        specs = {k: Spec(p) for k, p in DOCS.items()}
        bad = 0
        for name in sys.argv[3:]:
            for p in check_file(specs, sys.argv[2], name):
                print(p)
                bad = 1
        sys.exit(bad)
    elif len(sys.argv) == 3 and sys.argv[1] == "paths":
        for p in Spec(DOCS[sys.argv[2]]).doc["paths"]:
            print(p)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
