#!/usr/bin/python3
"""The requests that Kubernetes agent-sandbox's official client (k8s_agent_sandbox, its legacy
python-runtime connection) sends, rebuilt from its sources because the package itself is not
installable here (no PyPI): connector.send_request (URL join, X-Sandbox-* headers, no
redirects, raise_for_status, a Session retrying 500/502/503/504), CommandExecutor.run,
Filesystem.write/read/list/exists with _safe_upload_path, and the models' parsing
(ExecutionResult(**json), FileEntry.from_legacy). Written for codebox's bats suites.

usage: agent_client.py BASE run COMMAND
       agent_client.py BASE write PATH SRC_FILE      (SRC_FILE's bytes become PATH)
       agent_client.py BASE read PATH DST_FILE
       agent_client.py BASE list PATH
       agent_client.py BASE exists PATH
Prints a JSON line with the parsed result, or {"error": ..., "status": ...} and exits 1.
"""
import json
import posixpath
import sys
import urllib.parse
from datetime import datetime, timezone

import requests
from requests.adapters import HTTPAdapter
from urllib3.util.retry import Retry

import openapi_check  # every answer checked against the OpenAPI documents

openapi_check.hook_requests()


class Connector:
    def __init__(self, base_url):
        self.base_url = base_url
        self.session = requests.Session()
        # the client's retry policy: connection errors and these statuses, with backoff
        retries = Retry(total=5, backoff_factor=0.5, status_forcelist=[500, 502, 503, 504],
                        allowed_methods=["GET", "POST", "PUT", "DELETE"])
        self.session.mount("http://", HTTPAdapter(max_retries=retries))

    def send_request(self, method, endpoint, **kwargs):
        url = f"{self.base_url.rstrip('/')}/{endpoint.lstrip('/')}"
        headers = kwargs.pop("headers", {}).copy()
        headers["X-Sandbox-ID"] = "codebox-test"
        headers["X-Sandbox-Namespace"] = "default"
        headers["X-Sandbox-Port"] = "8888"
        if "timeout" in kwargs:
            headers["X-Sandbox-Timeout"] = str(kwargs["timeout"])
        response = self.session.request(method, url, headers=headers, allow_redirects=False,
                                        **kwargs)
        if response.is_redirect:
            raise requests.exceptions.HTTPError("redirect", response=response)
        response.raise_for_status()
        return response


def safe_upload_path(path):
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        raise ValueError(f"Upload path contains ASCII control characters: {path!r}")
    stripped = path.strip()
    if not stripped:
        raise ValueError("Upload path cannot be empty.")
    normalized = posixpath.normpath(stripped).lstrip("/")
    if not normalized or normalized == ".":
        raise ValueError(f"Upload path '{path}' does not name a file.")
    if any(part == ".." for part in normalized.split("/")):
        raise ValueError(f"Upload path '{path}' escapes the sandbox root.")
    return normalized


def main(argv):
    base, op = argv[1], argv[2]
    c = Connector(base)
    # CODEBOX_UNSAFE=1: skip the client's own path check (allow_unsafe_paths=True), so that
    # the server's checks are what is tested
    unsafe = __import__("os").environ.get("CODEBOX_UNSAFE") == "1"
    try:
        if op == "run":
            r = c.send_request("POST", "execute", json={"command": argv[3]}, timeout=600)
            data = r.json()
            # ExecutionResult(**data): exactly these fields, typed
            assert set(data) == {"stdout", "stderr", "exit_code"}, data
            assert isinstance(data["stdout"], str) and isinstance(data["stderr"], str)
            assert isinstance(data["exit_code"], int) and not isinstance(data["exit_code"], bool)
            print(json.dumps(data))
        elif op == "write":
            path = argv[3] if unsafe else safe_upload_path(argv[3])
            with open(argv[4], "rb") as f:
                content = f.read()
            r = c.send_request("POST", "upload", files={"file": (path, content)}, timeout=60)
            print(json.dumps(r.json()))
        elif op == "read":
            path = argv[3] if unsafe else safe_upload_path(argv[3])
            r = c.send_request("GET", f"download/{urllib.parse.quote(path, safe='')}",
                               timeout=60)
            with open(argv[4], "wb") as f:
                f.write(r.content)
            print(json.dumps({"bytes": len(r.content),
                              "content_type": r.headers.get("Content-Type")}))
        elif op == "list":
            r = c.send_request("GET", f"list/{urllib.parse.quote(argv[3], safe='')}",
                               timeout=60)
            entries = r.json()
            out = []
            for e in entries or []:
                # FileEntry.from_legacy
                assert e["type"] in ("file", "directory"), e
                assert isinstance(e["size"], int), e
                modified = datetime.fromtimestamp(e.get("mod_time", 0), tz=timezone.utc)
                out.append({"name": e["name"], "size": e["size"], "type": e["type"],
                            "modified": modified.isoformat()})
            print(json.dumps(out))
        elif op == "exists":
            r = c.send_request("GET", f"exists/{urllib.parse.quote(argv[3], safe='')}",
                               timeout=60)
            print(json.dumps({"exists": r.json().get("exists", False)}))
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except requests.exceptions.RequestException as e:
        resp = getattr(e, "response", None)
        print(json.dumps({"error": str(e), "status": resp.status_code if resp is not None else None,
                          "body": resp.text if resp is not None else None}))
        return 1
    except ValueError as e:
        print(json.dumps({"error": f"client refused: {e}", "status": None}))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
