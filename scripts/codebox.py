#!/usr/bin/env python3
"""codebox: a command-line client and a Python module for codebox's HTTP API (docs/API.md).

Python 3.8+ and its standard library only: copy this one file anywhere and run it, or import it.

    codebox run prog.py                     # its stdout and stderr as it runs; its exit code
    codebox run - --files data.csv --artifacts out/ < prog.py
    id=$(codebox session new)
    codebox session run "$id" - <<<'x = 41'
    codebox session run "$id" - <<<'x + 1'   # 42
    codebox session notebook "$id" > work.ipynb
    codebox session rm "$id"

`codebox --help` and `codebox VERB --help` say the rest. The service is CODEBOX_URL (default
http://127.0.0.1:8080) and its bearer token CODEBOX_TOKEN (none by default), or --url / --token.

Exit status of `run` and `session run`: the program's exit code (death by signal N: 128 + N);
124 when it timed out (as timeout(1)); 125 when codebox could not run it (the service refused
the request, answered an error, was busy past the retries, or could not be reached); 130 after
Ctrl-C; 2 on bad usage. Every other verb: 0, or 125 / 130 / 2 as above.

As a module (scripts/ on sys.path, or this file copied beside your program):

    from codebox import Client

    client = Client()                       # CODEBOX_URL / CODEBOX_TOKEN, or Client(url, token)
    answer = client.run("print(6 * 7)")     # POST /execute's answer, a dict
    for event in client.stream("for i in range(3): print(i)"):
        print(event.event, event.data)       # stdout {'text': '0\\n'} ... outcome {...}
    with client.session() as s:             # POST /sessions; DELETE when the block ends
        s.run("import numpy as np\\nx = np.arange(10)")
        print(s.run("x.sum()")["value"])     # '45'
        s.upload("data.csv", b"a,b\\n1,2\\n")
        nb = s.notebook()                    # the session as nbformat 4 JSON (a dict)

Every failure of the service (an HTTP error, an unreachable service, an `error` event) raises
CodeboxError, with the HTTP status, the service's `error` code and its message; a 429 (and a
409 `session_busy`) is retried after its Retry-After, `retries` times, before it is raised.
"""

import argparse
import base64
import collections
import http.client
import json
import os
import signal
import socket
import sys
import time
import urllib.parse

__all__ = ["Client", "Session", "Stream", "Event", "CodeboxError", "main"]

DEFAULT_URL = "http://127.0.0.1:8080"
EXIT_TIMED_OUT = 124  # the program passed its wall-clock limit (timeout(1)'s code)
EXIT_SERVICE = 125  # codebox could not run it: refused, an error, busy, unreachable
EXIT_INTERRUPTED = 130  # Ctrl-C (128 + SIGINT)
EXIT_USAGE = 2

MAX_ANSWER_BYTES = 256 << 20  # any one answer or event read (a snapshot's base64 is the largest)
CONNECT_TIMEOUT_SECONDS = 10
READ_TIMEOUT_SECONDS = 600  # the longest silence on a connection (streams send keep-alives)
RETRY_AFTER_MAX_SECONDS = 10  # a Retry-After longer than this is waited this long
TAIL_REASKS = 12  # a background execution's stream lasts 10 minutes; asked again this often

Event = collections.namedtuple("Event", "event data")
Event.__doc__ = """One server-sent event: `event` is "stdout", "stderr" (data {"text": ...}) or
"outcome" (data: the execution's answer, the same document as without streaming)."""


class CodeboxError(Exception):
    """The service refused or failed a request, or could not be reached. `status` is the HTTP
    status (None when there was no answer), `error` the service's error code (e.g.
    "sandbox_busy", "not_found"), `message` its sentence, `headers` the answer's headers."""

    def __init__(self, message, status=None, error=None, headers=None):
        super().__init__(message)
        self.message, self.status, self.error, self.headers = message, status, error, headers

    def __str__(self):
        where = []
        if self.status is not None:
            where.append("HTTP %d" % self.status)
        if self.error:
            where.append(self.error)
        busy = self.headers.get("Codebox-Busy") if self.headers is not None else None
        if busy:
            where.append("Codebox-Busy: " + busy)
        rid = self.headers.get("X-Request-Id") if self.headers is not None else None
        if rid and self.status is not None and self.status >= 500:
            where.append("request id " + rid)
        return self.message + (" (%s)" % ", ".join(where) if where else "")


def _retry_after(headers):
    try:
        seconds = float(headers.get("Retry-After", "1"))
    except ValueError:
        seconds = 1.0
    return min(max(seconds, 0.1), RETRY_AFTER_MAX_SECONDS)


def _read_bounded(resp, limit=MAX_ANSWER_BYTES):
    """An answer's body, whole, in pieces (read(limit) would allocate the limit at once)."""
    parts, total = [], 0
    while True:
        chunk = resp.read(1 << 16)
        if not chunk:
            return b"".join(parts)
        total += len(chunk)
        if total > limit:
            raise CodeboxError("the answer is larger than %d bytes" % limit, resp.status)
        parts.append(chunk)


def _error_of(resp, raw):
    """The CodeboxError an HTTP error answer stands for."""
    message, error = None, None
    try:
        doc = json.loads(raw)
        if isinstance(doc, dict):
            error = doc.get("error") if isinstance(doc.get("error"), str) else None
            message = doc.get("message") if isinstance(doc.get("message"), str) else None
    except ValueError:
        pass
    if message is None:
        message = "the service answered %d %s" % (resp.status, resp.reason)
    if resp.status == 401:
        message += "; set CODEBOX_TOKEN (or --token) to a token the service accepts"
    return CodeboxError(message, resp.status, error, resp.headers)


def _files_body(files):
    """The request's `files`: from a mapping (or pairs) of path -> bytes or str."""
    items = files.items() if hasattr(files, "items") else files
    out = []
    for path, content in items:
        if isinstance(content, str):
            out.append({"path": path, "content": content})
        else:
            out.append({"path": path, "contentBase64": base64.b64encode(content).decode()})
    return out


def _execute_body(code, stdin=None, timeout=None, files=None, artifacts=False, details=False,
                  background=False):
    body = {"code": code}
    if stdin is not None:
        body["stdin"] = stdin
    if timeout is not None:
        body["timeoutSeconds"] = timeout
    if files:
        body["files"] = _files_body(files)
    if artifacts:
        body["artifacts"] = True
    if details:
        body["details"] = True
    if background:
        body["background"] = True
    return body


class _Events:
    """Reads one text/event-stream answer, an event at a time. Its state lives in the object, not
    in a generator's frame, so that a KeyboardInterrupt raised while it waits leaves it readable."""

    def __init__(self, resp):
        self.resp = resp
        self.buf = bytearray()
        self.scanned = 0  # bytes of buf known to hold no newline
        self.name, self.data = None, []

    def _line(self):
        while True:
            nl = self.buf.find(b"\n", self.scanned)
            if nl >= 0:
                line = bytes(self.buf[:nl])
                del self.buf[:nl + 1]
                self.scanned = 0
                return line.rstrip(b"\r").decode("utf-8", "replace")
            self.scanned = len(self.buf)
            if len(self.buf) > MAX_ANSWER_BYTES:
                raise CodeboxError("an event is larger than %d bytes" % MAX_ANSWER_BYTES)
            chunk = self.resp.read1(65536)
            if not chunk:
                return None
            self.buf += chunk

    def next(self):
        """The next Event, or None when the stream ended (a half-sent event is dropped)."""
        while True:
            line = self._line()
            if line is None:
                return None
            if line == "":
                if not self.data:
                    self.name = None
                    continue
                name, text = self.name or "message", "\n".join(self.data)
                self.name, self.data = None, []
                try:
                    return Event(name, json.loads(text))
                except ValueError:
                    raise CodeboxError("the service sent a %s event that is not JSON" % name)
            if line.startswith(":"):
                continue  # a comment: the keep-alives
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                self.name = value
            elif field == "data":
                self.data.append(value)


class Stream:
    """The events of one execution, as they come: an iterator of Event, "stdout" and "stderr"
    ones, then a last "outcome" (also kept as `.outcome`). An "error" event (the sandbox failed
    after the stream began) raises CodeboxError. Closing it (or leaving a `with` block) hangs up:
    codebox then kills a run of /execute, and interrupts a session's cell."""

    def __init__(self, conn, resp):
        self.conn, self.outcome, self.done = conn, None, False
        self._events = _Events(resp) if self._is_stream(resp) else None
        self._plain = None if self._events else resp

    @staticmethod
    def _is_stream(resp):
        return (resp.headers.get("Content-Type") or "").startswith("text/event-stream")

    def __iter__(self):
        return self

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _raw(self):
        """The next event as the service sent it, or None at the stream's end."""
        if self._plain is not None:  # a service that answered without streaming
            raw, self._plain = _read_bounded(self._plain), None
            return Event("outcome", json.loads(raw))
        return self._events.next() if self._events else None

    def _finish(self, event):
        """The event the caller sees: the outcome kept, an error raised."""
        if event.event == "outcome":
            self.outcome, self.done = event.data, True
            self.close()
        elif event.event == "error":
            self.done = True
            self.close()
            data = event.data if isinstance(event.data, dict) else {}
            raise CodeboxError(data.get("message") or "the execution failed", None,
                               data.get("error"))
        return event

    def __next__(self):
        if self.done:
            raise StopIteration
        try:
            event = self._raw()
        except (OSError, http.client.HTTPException) as e:
            self.done = True
            self.close()
            raise CodeboxError("the stream was cut short (%s)" % _reason(e))
        if event is None:
            self.done = True
            self.close()
            raise CodeboxError("the stream ended without an answer (the connection was closed)")
        return self._finish(event)


class _TailStream(Stream):
    """A background execution's events (GET /sessions/{id}/executions/{e}): its output from the
    start, then its answer. A stream that lasted its longest (`stream_limit`) is asked again and
    what was already seen is skipped; the last event's data is the execution's answer."""

    def __init__(self, session, execution):
        self.session, self.execution, self.asks = session, execution, 0
        self.seen = {"stdout": 0, "stderr": 0}  # characters passed on, per stream
        self.sent = {}
        super().__init__(*self._open())

    def _open(self):
        self.asks += 1
        self.sent = {"stdout": 0, "stderr": 0}
        return self.session.client._open(
            "GET", self.session._path("/executions/" + self.execution), stream=True)

    def _raw(self):
        while True:
            event = super()._raw()
            if event is None or event.event not in ("stdout", "stderr", "error", "outcome"):
                return event
            if event.event == "error" and isinstance(event.data, dict) and \
                    event.data.get("error") == "stream_limit" and self.asks <= TAIL_REASKS:
                self.close()
                self.conn, resp = self._open()
                self._events = _Events(resp) if self._is_stream(resp) else None
                self._plain = None if self._events else resp
                continue
            if event.event == "outcome":
                data = event.data
                if isinstance(data, dict) and "state" in data:  # {"execution", "state", ...}
                    if data.get("outcome") is None:
                        return Event("error", {"error": "execution_lost", "message":
                                               data.get("error") or "the execution has no answer"})
                    return Event("outcome", data["outcome"])
                return event
            if event.event == "error":
                return event
            text = event.data.get("text", "") if isinstance(event.data, dict) else ""
            start, end = self.sent[event.event], self.sent[event.event] + len(text)
            self.sent[event.event] = end
            if end <= self.seen[event.event]:
                continue  # already passed on before the stream was asked again
            text = text[max(0, self.seen[event.event] - start):]
            self.seen[event.event] = end
            return Event(event.event, {"text": text})


class Client:
    """codebox's HTTP API. `url` and `token` default to CODEBOX_URL (else
    http://127.0.0.1:8080) and CODEBOX_TOKEN (else none). A 429, and a 409 session_busy, is
    retried after its Retry-After `retries` times; `on_retry(error, attempt, seconds)`, when
    given, hears of each retry. `timeout` is the longest silence on a connection, in seconds."""

    def __init__(self, url=None, token=None, retries=3, timeout=READ_TIMEOUT_SECONDS,
                 on_retry=None):
        self.url = (url or os.environ.get("CODEBOX_URL") or DEFAULT_URL).rstrip("/")
        self.token = token if token is not None else os.environ.get("CODEBOX_TOKEN") or None
        self.retries, self.timeout, self.on_retry = retries, timeout, on_retry
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("not an http:// or https:// URL: %s" % self.url)
        self._parts = parts

    # --- HTTP ------------------------------------------------------------------------------

    def _connect(self, read_timeout):
        p = self._parts
        cls = http.client.HTTPSConnection if p.scheme == "https" else http.client.HTTPConnection
        conn = cls(p.hostname, p.port, timeout=CONNECT_TIMEOUT_SECONDS)
        conn.connect()
        conn.sock.settimeout(read_timeout)
        return conn

    def _open(self, method, path, body=None, ctype=None, stream=False, read_timeout=None):
        """One request, retried while the service is busy: (connection, response), the answer
        a success (2xx) whose body the caller reads; an error answer raises CodeboxError."""
        if isinstance(body, (dict, list)):
            body, ctype = json.dumps(body).encode(), "application/json"
        headers = {"User-Agent": "codebox.py"}
        if ctype:
            headers["Content-Type"] = ctype
        if stream:
            headers["Accept"] = "text/event-stream"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        target = self._parts.path.rstrip("/") + path
        attempt = 0
        while True:
            attempt += 1
            conn = None
            try:
                conn = self._connect(read_timeout or self.timeout)
                conn.request(method, target, body=body, headers=headers)
                resp = conn.getresponse()
                if resp.status < 400:
                    return conn, resp
                err = _error_of(resp, _read_bounded(resp, 1 << 20))
            except (OSError, http.client.HTTPException) as e:
                if conn is not None:
                    conn.close()
                raise CodeboxError("cannot reach %s (%s): is the service running? CODEBOX_URL "
                                   "or --url names it" % (self.url, _reason(e)))
            conn.close()
            busy = err.status == 429 or (err.status == 409 and err.error == "session_busy")
            if not busy or attempt > self.retries:
                if busy and attempt > 1:
                    err.message += "; gave up after %d attempts" % attempt
                raise err
            seconds = _retry_after(err.headers)
            if self.on_retry is not None:
                self.on_retry(err, attempt, seconds)
            time.sleep(seconds)

    def _call(self, method, path, body=None, ctype=None, raw=False, read_timeout=None):
        """A request whose answer is read whole: its JSON (None for an empty one), or the
        bytes with raw=True."""
        conn, resp = self._open(method, path, body, ctype, read_timeout=read_timeout)
        try:
            data = _read_bounded(resp)
        except (OSError, http.client.HTTPException) as e:
            raise CodeboxError("the answer was cut short (%s)" % _reason(e))
        finally:
            conn.close()
        if raw:
            return data
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            raise CodeboxError("the service's answer is not JSON", resp.status)

    def _run_timeout(self, timeout):
        """A request's read timeout: a foreground run is silent for as long as it runs."""
        return max(self.timeout, (timeout or 0) + 60)

    # --- the API ---------------------------------------------------------------------------

    def run(self, code, stdin=None, timeout=None, files=None, artifacts=False, details=False,
            on_output=None):
        """POST /execute: runs `code` in a fresh sandbox, returns its answer (a dict: status,
        exitCode, stdout, stderr, result, ...). `files`: {path: bytes or str} written beside it;
        `artifacts`: the files it made come back (base64). With `on_output(name, text)`, the
        output is streamed to it as it is printed ("stdout" or "stderr")."""
        body = _execute_body(code, stdin, timeout, files, artifacts, details)
        if on_output is None:
            return self._call("POST", "/execute", body, read_timeout=self._run_timeout(timeout))
        return _drain(self._stream("/execute", body, timeout), on_output)

    def stream(self, code, stdin=None, timeout=None, files=None, artifacts=False, details=False):
        """POST /execute with Accept: text/event-stream: a Stream of its events."""
        body = _execute_body(code, stdin, timeout, files, artifacts, details)
        return self._stream("/execute", body, timeout)

    def _stream(self, path, body, timeout):
        return Stream(*self._open("POST", path, body, stream=True,
                                  read_timeout=self._run_timeout(timeout)))

    def session(self, id=None, idle_timeout=None, lifetime=None, memory=None):
        """A Session: the one named `id`, or (without) a new one (POST /sessions, with the
        bounds given: idleTimeoutSeconds, maxLifetimeSeconds, memoryBytes)."""
        if id is not None:
            return Session(self, id)
        state = self._call("POST", "/sessions", _session_body(idle_timeout, lifetime, memory))
        return Session(self, state["id"], state)

    def restore(self, snapshot, idle_timeout=None, lifetime=None, memory=None):
        """A new Session holding a snapshot's state (Session.snapshot()'s answer, or its
        "snapshot" string)."""
        if isinstance(snapshot, dict):
            snapshot = snapshot["snapshot"]
        body = _session_body(idle_timeout, lifetime, memory)
        body["snapshot"] = snapshot
        state = self._call("POST", "/sessions", body)
        return Session(self, state["id"], state)

    def sessions(self):
        """GET /sessions: the caller's open sessions, each a dict as Session.info() answers."""
        return self._call("GET", "/sessions")["sessions"]

    def capabilities(self):
        return self._call("GET", "/capabilities")

    def isolation(self):
        return self._call("GET", "/isolation")


def _session_body(idle_timeout, lifetime, memory):
    body = {}
    if idle_timeout is not None:
        body["idleTimeoutSeconds"] = idle_timeout
    if lifetime is not None:
        body["maxLifetimeSeconds"] = lifetime
    if memory is not None:
        body["memoryBytes"] = memory
    return body


def _drain(stream, on_output):
    with stream:
        for event in stream:
            if event.event in ("stdout", "stderr") and isinstance(event.data, dict):
                on_output(event.event, event.data.get("text", ""))
        return stream.outcome


def _reason(e):
    if isinstance(e, socket.timeout):
        return "timed out"
    return getattr(e, "strerror", None) or str(e) or type(e).__name__


class Session:
    """A session: an interpreter that keeps its state between executions (docs/API.md,
    Sessions). A context manager: leaving the block closes it."""

    def __init__(self, client, id, state=None):
        self.client, self.id, self.state = client, id, state

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return "Session(%r)" % self.id

    def _path(self, sub=""):
        return "/sessions/" + urllib.parse.quote(self.id, safe="") + sub

    def run(self, code, stdin=None, timeout=None, files=None, artifacts=False, details=False,
            on_output=None):
        """An execution (a cell): its answer, the /execute keys then value, executionCount,
        outputs, error and session. `on_output(name, text)` streams the output as for
        Client.run()."""
        body = _execute_body(code, stdin, timeout, files, artifacts, details)
        if on_output is None:
            return self.client._call("POST", self._path("/execute"), body,
                                     read_timeout=self.client._run_timeout(timeout))
        return _drain(self.stream(code, stdin, timeout, files, artifacts, details), on_output)

    def stream(self, code, stdin=None, timeout=None, files=None, artifacts=False, details=False):
        """An execution as a Stream of events. Closing the stream interrupts the cell."""
        body = _execute_body(code, stdin, timeout, files, artifacts, details)
        return self.client._stream(self._path("/execute"), body, timeout)

    def start(self, code, stdin=None, timeout=None, files=None, artifacts=False):
        """A background execution: started and answered at once; returns its id (for poll(),
        events(), interrupt())."""
        body = _execute_body(code, stdin, timeout, files, artifacts, background=True)
        return self.client._call("POST", self._path("/execute"), body)["execution"]

    def poll(self, execution):
        """A background execution's state: {"state": "running", "stdout", "stderr"}, then
        {"state": "done", "outcome", "error"} (or "lost")."""
        return self.client._call("GET", self._path("/executions/" + execution))

    def events(self, execution):
        """A background execution's Stream: its output from the start, then its answer."""
        return _TailStream(self, execution)

    def interrupt(self):
        """KeyboardInterrupt to the running cell; True when one was running."""
        return self.client._call("POST", self._path("/interrupt"))["interrupted"]

    def restart(self):
        """A fresh interpreter, the files kept; the session's new state."""
        self.state = self.client._call("POST", self._path("/restart"))
        return self.state

    def info(self):
        """GET /sessions/{id}: its state, executions, age, idle time and bounds."""
        self.state = self.client._call("GET", self._path())
        return self.state

    def files(self, path=None):
        """Its working directory's files and directories (beneath `path`): a list of
        {"path", "type", "size", "modifiedMs"}."""
        query = "" if path is None else "?path=" + urllib.parse.quote(path, safe="")
        return self.client._call("GET", self._path("/files" + query))["files"]

    def upload(self, path, data):
        """Writes `data` (bytes, str, or a binary file object) to `path` in its working
        directory; {"path", "size"}."""
        if isinstance(data, str):
            data = data.encode()
        elif hasattr(data, "read"):
            data = data.read(MAX_ANSWER_BYTES + 1)
            if len(data) > MAX_ANSWER_BYTES:
                raise CodeboxError("the file is larger than %d bytes" % MAX_ANSWER_BYTES)
        return self.client._call("PUT", self._file(path), data, "application/octet-stream")

    def download(self, path, file=None):
        """A file of its working directory: its bytes, or written to `file` (a binary file
        object) in pieces, returning the byte count."""
        if file is None:
            return self.client._call("GET", self._file(path), raw=True)
        conn, resp = self.client._open("GET", self._file(path))
        total = 0
        try:
            while True:
                chunk = resp.read(1 << 16)
                if not chunk:
                    return total
                total += len(chunk)
                if total > MAX_ANSWER_BYTES:
                    raise CodeboxError("the file is larger than %d bytes" % MAX_ANSWER_BYTES)
                file.write(chunk)
        finally:
            conn.close()

    def remove(self, path):
        """Removes a file (or an empty directory) of its working directory."""
        self.client._call("DELETE", self._file(path))

    def _file(self, path):
        return self._path("/files/" + urllib.parse.quote(path, safe="/"))

    def notebook(self, raw=False):
        """The session's cells so far as a Jupyter notebook (nbformat 4): a dict, or the .ipynb's
        bytes with raw=True."""
        return self.client._call("GET", self._path("/notebook"), raw=raw)

    def snapshot(self):
        """Its state as a snapshot (Client.restore() makes a session of it): the answer, whose
        "snapshot" is the snapshot itself."""
        return self.client._call("POST", self._path("/snapshot"))

    def close(self):
        """Ends it (DELETE): everything of it killed and removed. An ended one is no error."""
        try:
            self.client._call("DELETE", self._path())
        except CodeboxError as e:
            if e.status != 404:
                raise


# --- the command line ----------------------------------------------------------------------


class UsageError(Exception):
    pass


def _say(text):
    sys.stderr.write("codebox: %s\n" % text)
    sys.stderr.flush()


def _write(stream, text):
    stream.buffer.write(text.encode("utf-8", "replace"))
    stream.buffer.flush()


def _read_code(name):
    try:
        data = sys.stdin.buffer.read() if name == "-" else open(name, "rb").read()
    except OSError as e:
        raise UsageError("cannot read %s: %s" % (name, e.strerror or e))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError("%s is not UTF-8 text" % ("the standard input" if name == "-" else name))


def _input_files(paths):
    """--files: each file as the path it was named by (when relative and without ".."), else its
    base name; a directory's files beneath its own name."""
    files = []
    for p in paths or []:
        if os.path.isdir(p):
            base = os.path.dirname(os.path.normpath(p))
            for top, dirs, names in os.walk(p):
                dirs.sort()
                for n in sorted(names):
                    local = os.path.join(top, n)
                    files.append((_sandbox_name(local, base), local))
        else:
            files.append((_sandbox_name(p, None), p))
    out = []
    for name, local in files:
        try:
            with open(local, "rb") as f:
                out.append((name, f.read()))
        except OSError as e:
            raise UsageError("cannot read %s: %s" % (local, e.strerror or e))
    return out


def _sandbox_name(path, base):
    rel = os.path.relpath(path, base) if base else os.path.normpath(path)
    if os.path.isabs(rel) or rel == ".." or rel.startswith(".." + os.sep):
        rel = os.path.basename(path)
    return rel.replace(os.sep, "/")


def _safe_join(top, rel):
    """top/rel, or None for a path that would leave top."""
    parts = rel.split("/")
    if rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        return None
    return os.path.join(top, *parts)


def _save_artifacts(top, answer):
    """--artifacts DIR: result.json (when the program left one) and every file sent back."""
    os.makedirs(top, exist_ok=True)
    if answer.get("result") is not None:
        with open(os.path.join(top, "result.json"), "w") as f:
            json.dump(answer["result"], f)
            f.write("\n")
    for a in answer.get("artifacts") or []:
        dest = _safe_join(top, a.get("path", ""))
        if dest is None:
            _say("artifact %r not saved: not a relative path" % a.get("path"))
            continue
        if a.get("contentBase64") is None:
            _say("artifact %s not sent: %s" % (a["path"], a.get("omitted") or "no content"))
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "wb") as f:
            f.write(base64.b64decode(a["contentBase64"]))


def _exit_code(answer):
    """The CLI's exit status for an execution's answer (see the module's docstring)."""
    if answer.get("status") == "timed_out":
        _say("the program timed out and was killed (its wall-clock limit)")
        return EXIT_TIMED_OUT
    code = answer.get("exitCode")
    if not isinstance(code, int):
        return EXIT_SERVICE
    if code < 0:
        return 128 + min(-code, 127)
    return min(code, 255)


def _finish(args, answer, raw=None):
    """What `run` and `session run` do with an answer: print it (--json: as the service sent
    it, `raw`) or what the stream does not carry (the value, notes), save the artifacts, and
    say the exit status."""
    if raw is not None:
        sys.stdout.buffer.write(raw.rstrip(b"\n") + b"\n")
        sys.stdout.buffer.flush()
    else:
        if answer.get("value") is not None:
            _write(sys.stdout, answer["value"] + "\n")
        if answer.get("truncated"):
            _say("the output went past the service's limit: the answer holds its first bytes")
        if answer.get("resultError"):
            _say("result.json: " + answer["resultError"])
        if answer.get("session", {}).get("open") is False:
            _say("the session has ended with this execution")
    if args.artifacts:
        _save_artifacts(args.artifacts, answer)
    return _exit_code(answer)


def _print_output(event):
    if event.event in ("stdout", "stderr") and isinstance(event.data, dict):
        _write(sys.stdout if event.event == "stdout" else sys.stderr, event.data.get("text", ""))


def cmd_run(client, args):
    code = _read_code(args.file)
    kw = _run_kwargs(args)
    if args.json:
        return _answer_raw(args, client, "/execute", _execute_body(code, **kw), kw["timeout"])
    stream = client.stream(code, **kw)
    try:
        for event in stream:
            _print_output(event)
    except KeyboardInterrupt:
        stream.close()
        _say("interrupted: the connection is closed, and the service kills the run")
        return EXIT_INTERRUPTED
    return _finish(args, stream.outcome)


def _answer_raw(args, client, path, body, timeout):
    """--json: the answer as the service sent it (no streaming)."""
    raw = client._call("POST", path, body, raw=True, read_timeout=client._run_timeout(timeout))
    try:
        answer = json.loads(raw)
    except ValueError:
        raise CodeboxError("the service's answer is not JSON")
    return _finish(args, answer, raw)


def _run_kwargs(args):
    stdin = None
    if args.stdin is not None:
        stdin = _read_code(args.stdin)
    return {"stdin": stdin, "timeout": args.timeout, "files": _input_files(args.files),
            "artifacts": bool(args.artifacts), "details": args.details}


def _stream_cell(session, open_stream):
    """Prints the events of a cell's stream (open_stream() opens it; the service sends its head
    with the first output): (outcome, interrupted). The first Ctrl-C interrupts the cell (its
    handler asks the service, and the read it broke into goes on: a KeyboardInterrupt raised
    there would leave the HTTP response's chunked reading half done), so the stream goes on to
    the cell's answer; a second one hangs up (which interrupts the cell too)."""
    interrupted = []

    def on_sigint(signum, frame):
        if interrupted:
            raise KeyboardInterrupt
        interrupted.append(signum)
        try:
            running = session.interrupt()
        except CodeboxError as e:
            _say("could not interrupt the cell (%s); closing the connection" % e)
            raise KeyboardInterrupt
        _say("interrupted: the cell gets KeyboardInterrupt; the session keeps its state"
             if running else "interrupted: no cell was running any more")

    # a SIGINT the caller ignores (a background job of a script) stays ignored
    old = signal.getsignal(signal.SIGINT)
    if old is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_sigint)
    stream = None
    try:
        stream = open_stream()
        with stream:
            for event in stream:
                _print_output(event)
        return stream.outcome, bool(interrupted)
    except KeyboardInterrupt:
        if stream is not None:
            stream.close()
        _say("interrupted: the connection is closed (which interrupts the cell)")
        return None, True
    finally:
        if old is signal.default_int_handler:
            signal.signal(signal.SIGINT, old)


def cmd_session_run(client, args):
    session = client.session(args.id)
    code = _read_code(args.file)
    kw = _run_kwargs(args)
    if args.background:
        kw.pop("details")
        print(session.start(code, **kw))
        return 0
    if args.json:
        return _answer_raw(args, client, session._path("/execute"), _execute_body(code, **kw),
                           kw["timeout"])
    outcome, interrupted = _stream_cell(session, lambda: session.stream(code, **kw))
    if outcome is None:
        return EXIT_INTERRUPTED
    status = _finish(args, outcome)
    return EXIT_INTERRUPTED if interrupted else status


def cmd_session_attach(client, args):
    session = client.session(args.id)
    outcome, interrupted = _stream_cell(session, lambda: session.events(args.execution))
    if outcome is None:
        return EXIT_INTERRUPTED
    status = _finish(args, outcome)
    return EXIT_INTERRUPTED if interrupted else status


def _print_json(doc):
    _write(sys.stdout, json.dumps(doc, ensure_ascii=False, indent=1) + "\n")


def cmd_session_new(client, args):
    kw = {"idle_timeout": args.idle_timeout, "lifetime": args.lifetime, "memory": args.memory}
    if args.restore:
        try:
            with (sys.stdin if args.restore == "-" else open(args.restore)) as f:
                text = f.read().strip()
        except OSError as e:
            raise UsageError("cannot read %s: %s" % (args.restore, e.strerror or e))
        snap = json.loads(text) if text.startswith("{") else text
        session = client.restore(snap, **kw)
    else:
        session = client.session(**kw)
    if args.json:
        _print_json(session.state)
    else:
        print(session.id)
    return 0


def cmd_session_list(client, args):
    sessions = client.sessions()
    if args.json:
        _print_json(sessions)
        return 0
    for s in sessions:
        print("%s  %-4s  %d executions, idle %ds, age %ds" % (
            s["id"], s["state"], s["executions"], s["idleSeconds"], s["ageSeconds"]))
    return 0


def cmd_session_info(client, args):
    _print_json(client.session(args.id).info())
    return 0


def _split(spec, default):
    """LEFT[=RIGHT] of --put and --get."""
    left, eq, right = spec.partition("=")
    return left, (right if eq else default(left))


def cmd_session_files(client, args):
    session = client.session(args.id)
    did = False
    for spec in args.put or []:
        local, remote = _split(spec, lambda p: os.path.basename(p))
        try:
            with open(local, "rb") as f:
                answer = session.upload(remote, f)
        except OSError as e:
            raise UsageError("cannot read %s: %s" % (local, e.strerror or e))
        _say("%s: %d bytes" % (answer["path"], answer["size"]))
        did = True
    for spec in args.get or []:
        remote, local = _split(spec, lambda p: p.rsplit("/", 1)[-1])
        if local == "-":
            session.download(remote, sys.stdout.buffer)
            sys.stdout.buffer.flush()
        else:
            tmp = local + ".part"
            with open(tmp, "wb") as f:
                try:
                    session.download(remote, f)
                except BaseException:
                    os.unlink(tmp)
                    raise
            os.replace(tmp, local)
        did = True
    for remote in args.rm or []:
        session.remove(remote)
        did = True
    if did:
        return 0
    files = session.files(args.path)
    if args.json:
        _print_json(files)
        return 0
    for f in files:
        print("%s%s  %d" % (f["path"], "/" if f["type"] == "directory" else "", f["size"]))
    return 0


def _output(args, data):
    """-o FILE (or the standard output): raw bytes."""
    if args.output and args.output != "-":
        with open(args.output, "wb") as f:
            f.write(data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()


def cmd_session_notebook(client, args):
    _output(args, client.session(args.id).notebook(raw=True))
    return 0


def cmd_session_snapshot(client, args):
    answer = client.session(args.id).snapshot()
    _output(args, (json.dumps(answer) + "\n").encode())
    _say("snapshot: %s bytes of state, %d variables, %d modules, %s files, %d skipped" % (
        answer.get("bytes"), len(answer.get("variables") or []),
        len(answer.get("modules") or []), answer.get("files"), len(answer.get("skipped") or [])))
    return 0


def cmd_session_interrupt(client, args):
    running = client.session(args.id).interrupt()
    _say("interrupted the running cell" if running else "no cell was running")
    return 0


def cmd_session_restart(client, args):
    client.session(args.id).restart()
    _say("restarted: a fresh interpreter, the files kept")
    return 0


def cmd_session_rm(client, args):
    status = 0
    for sid in args.ids:
        try:
            client._call("DELETE", Session(client, sid)._path())
        except CodeboxError as e:
            _say("%s: %s" % (sid, e))
            status = EXIT_SERVICE
    return status


FILE_HELP = "the Python program (- reads the standard input)"


def _parser():
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("the service")
    g.add_argument("--url", default=argparse.SUPPRESS,
                   help="codebox's base URL (default: $CODEBOX_URL, else %s)" % DEFAULT_URL)
    g.add_argument("--token", default=argparse.SUPPRESS,
                   help="bearer token (default: $CODEBOX_TOKEN; the environment keeps it out "
                        "of ps)")
    g.add_argument("--retries", type=int, default=argparse.SUPPRESS,
                   help="retries of a busy answer (429, 409 session_busy) after its "
                        "Retry-After (default 3)")

    exe = argparse.ArgumentParser(add_help=False)
    g = exe.add_argument_group("the execution")
    g.add_argument("--files", nargs="+", metavar="PATH", action="extend",
                   help="files (or directories) written beside the program, under the path "
                        "named when it is relative, else their base name")
    g.add_argument("--stdin", metavar="FILE|-", help="the program's standard input")
    g.add_argument("--timeout", type=float, metavar="SECONDS",
                   help="a shorter wall-clock limit (timeoutSeconds)")
    g.add_argument("--artifacts", metavar="DIR",
                   help="save what it made in DIR: result.json, its files and figures")
    g.add_argument("--json", action="store_true",
                   help="print the service's answer as JSON (no streaming)")
    g.add_argument("--details", action="store_true",
                   help="ask for details (signal, limit hit, CPU time, peak memory)")

    top = argparse.ArgumentParser(
        prog="codebox", parents=[common],
        description="A client of codebox, a code-execution sandbox (docs/API.md).",
        epilog="Exit status of run and session run: the program's exit code (killed by signal "
               "N: 128+N), 124 timed out, 125 codebox could not run it (refused, error, busy, "
               "unreachable), 130 Ctrl-C, 2 bad usage.")
    verbs = top.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    p = verbs.add_parser("run", parents=[common, exe], help="run a program in a fresh sandbox",
                         description="Runs a program in a fresh sandbox (POST /execute), "
                                     "printing its stdout and stderr as it runs; exits with "
                                     "its exit code. Ctrl-C closes the connection: the "
                                     "service kills the run.")
    p.add_argument("file", metavar="FILE|-", help=FILE_HELP)
    p.set_defaults(func=cmd_run)

    s = verbs.add_parser("session", parents=[common],
                         help="sessions: interpreters that keep their state",
                         description="Sessions (API.md): an interpreter that keeps its "
                                     "variables, imports and files between executions.")
    sv = s.add_subparsers(dest="sverb", metavar="VERB")
    sv.required = True

    def sub(name, func, help, parents=(), ident=True):
        q = sv.add_parser(name, parents=[common] + list(parents), help=help, description=help)
        if ident:
            q.add_argument("id", metavar="ID", help="the session's id")
        q.set_defaults(func=func)
        return q

    q = sub("new", cmd_session_new, "make a session; prints its id", ident=False)
    q.add_argument("--idle-timeout", type=float, metavar="SECONDS", help="idleTimeoutSeconds")
    q.add_argument("--lifetime", type=float, metavar="SECONDS", help="maxLifetimeSeconds")
    q.add_argument("--memory", type=int, metavar="BYTES", help="memoryBytes")
    q.add_argument("--restore", metavar="FILE|-",
                   help="a snapshot (session snapshot's output) the new session holds")
    q.add_argument("--json", action="store_true", help="print its state as JSON")
    q = sub("list", cmd_session_list, "the open sessions (yours, with a token)", ident=False)
    q.add_argument("--json", action="store_true", help="as JSON")
    q = sub("run", cmd_session_run, "run a cell in a session, its output as it is printed and "
            "its final expression's value; Ctrl-C interrupts the cell (KeyboardInterrupt), the "
            "session keeps its state", parents=[exe])
    q.add_argument("file", metavar="FILE|-", help=FILE_HELP)
    q.add_argument("--background", action="store_true",
                   help="start it in the background; prints the execution's id (for attach)")
    q = sub("attach", cmd_session_attach, "a background execution's output from its start, "
            "then its answer, as session run prints them")
    q.add_argument("execution", metavar="EXECUTION", help="its id (session run --background)")
    q.set_defaults(json=False, artifacts=None)
    q = sub("files", cmd_session_files, "list, upload, download or remove the files of a "
            "session's working directory (with no option: list)")
    q.add_argument("path", metavar="DIR", nargs="?", help="list beneath DIR only")
    q.add_argument("--put", action="append", metavar="LOCAL[=REMOTE]",
                   help="upload LOCAL (as REMOTE; default its base name)")
    q.add_argument("--get", action="append", metavar="REMOTE[=LOCAL]",
                   help="download REMOTE (to LOCAL, - for the standard output; default its "
                        "base name, in the current directory)")
    q.add_argument("--rm", action="append", metavar="REMOTE", help="remove REMOTE")
    q.add_argument("--json", action="store_true", help="list as JSON")
    q = sub("notebook", cmd_session_notebook,
            "the session's cells as a Jupyter notebook (.ipynb JSON)")
    q.add_argument("-o", "--output", metavar="FILE", help="write it to FILE (default: stdout)")
    q = sub("snapshot", cmd_session_snapshot,
            "the session's state as a snapshot (JSON), for session new --restore")
    q.add_argument("-o", "--output", metavar="FILE", help="write it to FILE (default: stdout)")
    sub("info", cmd_session_info, "the session's state and bounds, as JSON")
    sub("interrupt", cmd_session_interrupt, "interrupt its running cell (KeyboardInterrupt)")
    sub("restart", cmd_session_restart, "a fresh interpreter; the files are kept")
    q = sub("rm", cmd_session_rm, "end sessions (everything of them killed and removed)",
            ident=False)
    q.add_argument("ids", metavar="ID", nargs="+", help="the sessions' ids")
    return top


def main(argv=None):
    """The command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)

    def on_retry(err, attempt, seconds):
        _say("busy (%s); retrying in %g s (retry %d of %d)" % (err, seconds, attempt,
                                                                client.retries))

    try:
        client = Client(getattr(args, "url", None), getattr(args, "token", None),
                        retries=max(0, getattr(args, "retries", 3)), on_retry=on_retry)
    except ValueError as e:
        _say(str(e))
        return EXIT_USAGE
    try:
        return args.func(client, args)
    except UsageError as e:
        _say(str(e))
        return EXIT_USAGE
    except CodeboxError as e:
        _say(str(e))
        return EXIT_SERVICE
    except KeyboardInterrupt:
        _say("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader of the output left (| head): no traceback, as a shell tool
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
