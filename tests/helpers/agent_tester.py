#!/usr/bin/python3
"""The protocol checks of Kubernetes agent-sandbox's example tester
(examples/python-runtime-sandbox/tester.py, the version that checks /list, /exists and path
traversal), rebuilt from its source because it is not shipped here: the same requests, made the
same way (module-level requests.get/post, no session, no headers of its own, so urllib3 drops a
trailing "." segment: "/exists/." is sent as "/exists/"), and the same assertions. Only the
sections for endpoints of the python-runtime protocol: its /execute_code sections exercise the
example's stateful Jupyter kernel, which codebox does not serve. Written for codebox's bats
suites.

usage: agent_tester.py BASE SECTION...
SECTION: health, execute, upload_download, list_files, exists, path_traversal,
         absolute_path_traversal, or all (every one, in the tester's order).
Prints what the tester prints; exits 1 at the first failed section, as the tester does
(upload_download included, which the tester only reports).
"""
import sys
import time
import urllib.parse

import requests

import openapi_check  # every answer checked against the OpenAPI documents

openapi_check.hook_requests()


class Failed(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failed(what)


def health(base):
    # the tester tries 10 times, 2 s apart, for a runtime that is still starting
    for attempt in range(10):
        try:
            r = requests.get(f"{base}/")
            r.raise_for_status()
            print("health:", r.json())
            check(r.json()["status"] == "ok", "status is not ok")
            return
        except (requests.exceptions.RequestException, Failed) as e:
            if attempt == 9:
                raise
            print(f"health attempt {attempt + 1} failed: {e}")
            time.sleep(2)


def execute(base):
    r = requests.post(f"{base}/execute", json={"command": "echo 'hello world'"})
    r.raise_for_status()
    print("execute:", r.json())
    check(r.json()["stdout"] == "hello world\n", "stdout is not 'hello world\\n'")


def upload_download(base):
    content = b"Hello Sandbox!"
    r = requests.post(f"{base}/upload", files={"file": ("test.txt", content)})
    r.raise_for_status()
    r = requests.get(f"{base}/download/test.txt")
    r.raise_for_status()
    print("download:", len(r.content), "bytes")
    check(r.content == content, "the downloaded bytes differ")


def list_files(base):
    r = requests.get(f"{base}/list/.")
    r.raise_for_status()
    print("list:", r.json())
    check(isinstance(r.json(), list), "the listing is not a list")


def exists(base):
    r = requests.get(f"{base}/exists/.")
    r.raise_for_status()
    print("exists:", r.json())
    check(r.json()["path"] == "", "path is not ''")
    check(r.json()["exists"] is True, "exists is not true")
    r = requests.get(f"{base}/exists/does_not_exist")
    r.raise_for_status()
    print("exists (negative):", r.json())
    check(r.json()["path"] == "does_not_exist", "path is not 'does_not_exist'")
    check(r.json()["exists"] is False, "exists is not false")


def denied(base, unsafe):
    # slashes encoded, so that the server, not the client, sees the traversal
    url = f"{base}/exists/{urllib.parse.quote(unsafe, safe='')}"
    r = requests.get(url)
    print(f"GET {url}:", r.status_code, r.text)
    check(r.status_code == 403, f"status {r.status_code}, not 403")
    check(r.json()["message"] == "Access denied", "message is not 'Access denied'")


def path_traversal(base):
    denied(base, "../../etc/passwd")


def absolute_path_traversal(base):
    denied(base, "/../etc/passwd")


SECTIONS = {
    "health": health,
    "execute": execute,
    "upload_download": upload_download,
    "list_files": list_files,
    "exists": exists,
    "path_traversal": path_traversal,
    "absolute_path_traversal": absolute_path_traversal,
}


def main(argv):
    if len(argv) < 3 or any(s != "all" and s not in SECTIONS for s in argv[2:]):
        print(__doc__, file=sys.stderr)
        return 2
    base = argv[1]
    names = list(SECTIONS) if "all" in argv[2:] else argv[2:]
    for name in names:
        try:
            SECTIONS[name](base)
        # what the tester catches (a body that is not JSON is a RequestException too), and
        # what a missing key raises
        except (requests.exceptions.RequestException, Failed, KeyError) as e:
            print(f"tester section {name} failed: {e!r}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
