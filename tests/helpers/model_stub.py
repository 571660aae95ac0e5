#!/usr/bin/python3
"""A local stand-in for a model's API, for scripts/cafe-agent's real loop (tests/77-cafe.bats):
it answers as Anthropic's Messages API or OpenAI's Chat Completions does, on 127.0.0.1 and a free
port, with no network. It checks each request as the API would, and more:

  - the path, the method, the headers (x-api-key and anthropic-version: 2023-06-01; or
    Authorization: Bearer), a JSON body with a model;
  - the tools: exactly the one codebox's GET /tool served (TOOL_FILE), within the API's own rules
    (a name of at most 64 of [a-zA-Z0-9_-]; OpenAI: a description of at most 1024 characters and,
    with "strict": true, strict mode's schema: every object closed and requiring all its keys);
  - turn 1 (the question alone) is answered with a call of the tool running the café program;
  - turn 2 must carry the assistant's turn back as it was sent and the tool's result under the
    call's id (a tool_result block; a "tool" message with tool_call_id); it is answered with a
    final text built from that result: "coffee C, tea T, cake K".

A request that breaks a rule gets the API's own error shape with status 400 and a message
starting "stub:"; more than 4 requests, the same. --fail STATUS answers every request with that
status and the API's error for it (401: a bad key).

usage: model_stub.py --api anthropic|openai --tool TOOL_FILE --ready FIFO [--key KEY]
                     [--fail STATUS]
The port is written to FIFO once the server listens (the caller's readiness check); a line per
request goes to stderr. SIGTERM stops it.
"""
import argparse
import json
import os
import re
import signal
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

MAX_REQUESTS = 4
MAX_BODY_BYTES = 4 << 20
NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# the tool call's program: the café program's one copy (tests/programs/cafe.py, which the
# scripted model of scripts/cafe-agent sends as it is), and a last line of the stand-in's own, on
# purpose: by it tests/77-cafe.bats tells that the call was the stand-in's, not the scripted model's
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "programs",
                       "cafe.py"), encoding="utf-8") as _f:
    PROGRAM = _f.read() + 'print("solved")\n'


class Refusal(Exception):
    """A request the API (or the stub's checks) refuses: status, error type, message."""

    def __init__(self, status, etype, message, code=None):
        super().__init__(message)
        self.status, self.etype, self.message, self.code = status, etype, message, code


def check(cond, message):
    if not cond:
        raise Refusal(400, "invalid_request_error", "stub: " + message)


def strict_violations(schema, path="parameters"):
    """OpenAI strict mode's object rules (tool.c's top comment): every object closed, all of its
    properties required; walks properties, items and anyOf."""
    out = []
    types = schema.get("type")
    types = types if isinstance(types, list) else [types]
    if "object" in types or "properties" in schema:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            out.append(f"{path}: additionalProperties must be false")
        if sorted(schema.get("required", [])) != sorted(props):
            out.append(f"{path}: 'required' must list every key in properties")
        for k, v in props.items():
            out += strict_violations(v, f"{path}.{k}")
    if "items" in schema:
        out += strict_violations(schema["items"], path + "[]")
    for i, v in enumerate(schema.get("anyOf", [])):
        out += strict_violations(v, f"{path}|{i}")
    return out


def answer_from(result_text):
    """The final answer, read from the tool's result as a model would."""
    try:
        outcome = json.loads(result_text)
    except ValueError:
        raise Refusal(400, "invalid_request_error", "stub: the tool's result is not JSON")
    check(outcome.get("status") == "succeeded", f"the run did not succeed: {result_text[:300]}")
    prices = outcome.get("result") or {}
    check(all(isinstance(prices.get(k), (int, float)) for k in ("coffee", "tea", "cake")),
          f"the result lacks the prices: {result_text[:300]}")
    return "coffee %.2f, tea %.2f, cake %.2f" % (prices["coffee"], prices["tea"], prices["cake"])


class Api:
    """What both stand-ins keep: the tool they expect, the key, their first answer, the turn."""

    def __init__(self, tool, key):
        self.tool, self.key, self.turn1, self.turn = tool, key, None, 0


class Anthropic(Api):
    path = "/v1/messages"
    call_id = "toolu_stub_01"

    def error(self, r):
        return {"type": "error", "error": {"type": r.etype, "message": r.message}}

    def auth_error(self):
        return Refusal(401, "authentication_error", "invalid x-api-key")

    def check_headers(self, headers):
        if headers.get("x-api-key") != self.key:
            raise self.auth_error()
        check(headers.get("anthropic-version") == "2023-06-01",
              f"anthropic-version must be 2023-06-01, not {headers.get('anthropic-version')}")

    def respond(self, body):
        check(isinstance(body.get("max_tokens"), int) and body["max_tokens"] > 0,
              "max_tokens must be a positive integer")
        tools = body.get("tools")
        check(tools == [self.tool], "tools must be exactly [GET /tool's tool]")
        check(NAME.match(self.tool["name"]) is not None, "a tool's name is [a-zA-Z0-9_-]{1,64}")
        check(self.tool["input_schema"].get("type") == "object", "input_schema must be an object")
        msgs = body.get("messages")
        check(isinstance(msgs, list) and msgs, "messages must be a non-empty list")
        check(msgs[0].get("role") == "user" and "café" in json.dumps(msgs[0], ensure_ascii=False),
              "the first message is the user's question")
        if len(msgs) == 1:
            self.turn = 1
            self.turn1 = [
                {"type": "text", "text": "stub: I will run the café program."},
                {"type": "tool_use", "id": self.call_id, "name": self.tool["name"],
                 "input": {"code": PROGRAM}},
            ]
            return {"id": "msg_stub_1", "type": "message", "role": "assistant",
                    "model": body["model"], "content": self.turn1, "stop_reason": "tool_use",
                    "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
        check(len(msgs) == 3 and self.turn1 is not None, "turn 2 is question, call, result")
        check(msgs[1] == {"role": "assistant", "content": self.turn1},
              "the assistant's turn must come back as it was sent")
        check(msgs[2].get("role") == "user" and isinstance(msgs[2].get("content"), list),
              "the tool's results come in a user message of content blocks")
        blocks = msgs[2]["content"]
        check(len(blocks) == 1 and blocks[0].get("type") == "tool_result",
              "one tool_result block per tool_use block, first in the message")
        check(blocks[0].get("tool_use_id") == self.call_id,
              f"tool_use_id must be {self.call_id}, not {blocks[0].get('tool_use_id')}")
        self.turn = 2
        content = blocks[0].get("content")
        if isinstance(content, list):
            content = "".join(b.get("text", "") for b in content if b.get("type") == "text")
        check(isinstance(content, str), "a tool_result's content is a string or text blocks")
        check(blocks[0].get("is_error") in (None, False), "the tool call failed")
        return {"id": "msg_stub_2", "type": "message", "role": "assistant", "model": body["model"],
                "content": [{"type": "text", "text": answer_from(content)}],
                "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1}}


class OpenAI(Api):
    path = "/v1/chat/completions"
    call_id = "call_stub_01"

    def error(self, r):
        return {"error": {"message": r.message, "type": r.etype, "param": None, "code": r.code}}

    def auth_error(self):
        return Refusal(401, "invalid_request_error",
                       "Incorrect API key provided. You can find your API key at "
                       "https://platform.openai.com/account/api-keys.", "invalid_api_key")

    def check_headers(self, headers):
        if headers.get("Authorization") != f"Bearer {self.key}":
            raise self.auth_error()

    def respond(self, body):
        tools = body.get("tools")
        check(tools == [self.tool], "tools must be exactly [GET /tool?format=openai...'s tool]")
        fn = self.tool.get("function", {})
        check(self.tool.get("type") == "function" and NAME.match(fn.get("name", "")) is not None,
              "a function tool with a name of [a-zA-Z0-9_-]{1,64}")
        if len(fn.get("description", "")) > 1024:
            raise Refusal(400, "invalid_request_error",
                          "Invalid 'tools[0].function.description': string too long. Expected a "
                          "string with maximum length 1024, but got a string with length "
                          f"{len(fn['description'])} instead.", "string_above_max_length")
        if fn.get("strict"):
            bad = strict_violations(fn["parameters"])
            check(not bad, "Invalid schema for function 'code_executor': " + "; ".join(bad))
        msgs = body.get("messages")
        check(isinstance(msgs, list) and msgs, "messages must be a non-empty list")
        asked = [m for m in msgs if m.get("role") == "user"]
        check(len(asked) == 1 and "café" in asked[0].get("content", ""),
              "one user message, the question")
        rest = msgs[msgs.index(asked[0]) + 1:]
        if not rest:
            # a strict-mode call: every key of the schema, null for those not used
            args = {k: None for k in fn["parameters"]["properties"]}
            args["code"] = PROGRAM
            self.turn = 1
            self.turn1 = {"role": "assistant", "content": None, "tool_calls": [
                {"id": self.call_id, "type": "function",
                 "function": {"name": fn["name"], "arguments": json.dumps(args)}}]}
            return self.completion(body, dict(self.turn1, refusal=None), "tool_calls")
        check(len(rest) == 2 and self.turn1 is not None, "turn 2 is question, call, result")
        echo = rest[0]
        check(echo.get("role") == "assistant" and echo.get("tool_calls") == self.turn1["tool_calls"]
              and echo.get("content") is None,
              "the assistant's message must come back with its tool_calls as sent")
        result = rest[1]
        check(result.get("role") == "tool", "each tool call is answered by a 'tool' message")
        check(result.get("tool_call_id") == self.call_id,
              f"tool_call_id must be {self.call_id}, not {result.get('tool_call_id')}")
        check(isinstance(result.get("content"), str), "a tool message's content is a string")
        self.turn = 2
        answer = answer_from(result["content"])
        return self.completion(body, {"role": "assistant", "content": answer, "refusal": None},
                               "stop")

    @staticmethod
    def completion(body, message, finish):
        return {"id": "chatcmpl-stub", "object": "chat.completion", "created": 0,
                "model": body["model"], "choices": [{"index": 0, "message": message,
                                                     "logprobs": None, "finish_reason": finish}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


def serve(api, fail):
    requests = [0]

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            pass

        def reply(self, status, doc):
            data = json.dumps(doc).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self.reply(404, api.error(Refusal(404, "not_found_error", "stub: POST only")))

        def do_POST(self):
            requests[0] += 1
            n = requests[0]
            try:
                if fail:
                    raise api.auth_error() if fail == 401 else Refusal(
                        fail, "api_error", f"stub: a {fail} as asked")
                check(n <= MAX_REQUESTS, f"more than {MAX_REQUESTS} requests")
                check(self.path == api.path, f"the path is {api.path}, not {self.path}")
                api.check_headers(self.headers)
                check(self.headers.get("Content-Type", "").startswith("application/json"),
                      "Content-Type must be application/json")
                length = int(self.headers.get("Content-Length", "0"))
                check(0 < length <= MAX_BODY_BYTES, "a body of 1 to 4 MiB")
                try:
                    body = json.loads(self.rfile.read(length))
                except ValueError:
                    raise Refusal(400, "invalid_request_error", "stub: the body is not JSON")
                check(isinstance(body, dict) and isinstance(body.get("model"), str)
                      and body["model"], "a JSON object with a model")
                doc = api.respond(body)
            except Refusal as r:
                print(f"stub: request {n}: {r.status} {r.message}", file=sys.stderr, flush=True)
                self.reply(r.status, api.error(r))
                return
            print(f"stub: request {n}: turn {api.turn} answered", file=sys.stderr, flush=True)
            self.reply(200, doc)

    return Handler


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--api", choices=("anthropic", "openai"), required=True)
    p.add_argument("--tool", required=True, help="the tool GET /tool served (a JSON file)")
    p.add_argument("--ready", required=True, help="a FIFO: the port is written to it")
    p.add_argument("--key", default="test")
    p.add_argument("--fail", type=int, default=0, help="answer every request with this status")
    a = p.parse_args()
    with open(a.tool) as f:
        tool = json.load(f)
    api = (Anthropic if a.api == "anthropic" else OpenAI)(tool, a.key)
    server = HTTPServer(("127.0.0.1", 0), serve(api, a.fail))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    with open(a.ready, "w") as ready:
        ready.write(f"{server.server_address[1]}\n")
    server.serve_forever()


if __name__ == "__main__":
    main()
