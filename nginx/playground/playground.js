// codebox playground: runs the code field through this server's own API, as any client does.
// POST /execute with Accept: text/event-stream (output as it is printed, then the answer as the
// last event); with "keep state", a session (POST /sessions, then its execute, interrupt and
// notebook). No framework, no build step, nothing from another origin.
//
// Safety: everything a program prints or displays is put in the page as text (textContent and
// text nodes, never parsed as markup); images only as data: or blob: URLs in <img>; HTML
// outputs in an <iframe sandbox> (no allow-scripts) through srcdoc, the one Trusted Types
// policy of the page.
// The page's CSP (nginx/codebox-playground-headers.conf) enforces the rest.
"use strict";

const TOKEN_KEY = "codebox-token";
const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/svg+xml"];

const $ = (id) => document.getElementById(id);
const ui = {
  auth: $("auth"),
  token: $("token"),
  tokenSave: $("token-save"),
  authNote: $("auth-note"),
  code: $("code"),
  run: $("run"),
  interrupt: $("interrupt"),
  keep: $("keep"),
  notebook: $("notebook"),
  endSession: $("end-session"),
  sessionNote: $("session-note"),
  runs: $("runs"),
};

// srcdoc is a Trusted Types sink: this policy is the page's only way to give it HTML, and it is
// used for sandboxed frames alone (no allow-scripts: nothing in them runs)
const srcdocPolicy = window.trustedTypes
  ? window.trustedTypes.createPolicy("codebox-srcdoc", { createHTML: (s) => s })
  : { createHTML: (s) => s };

let sessionId = null; // the keep-state session
let running = null; // {abort: AbortController} while a run is in flight
const blobUrls = []; // revoked when their run is cleared

// --- small DOM helpers: text only ---
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

// ANSI colour codes (IPython's tracebacks may hold them) are dropped, not interpreted
function plain(s) {
  return String(s).replace(/\u001b\[[0-9;]*[A-Za-z]/g, "");
}

// --- the token ---
function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

function headers(extra) {
  const h = Object.assign({}, extra || {});
  const t = token();
  if (t) h.Authorization = "Bearer " + t;
  return h;
}

function needToken(message) {
  ui.auth.hidden = false;
  ui.authNote.textContent = message;
  ui.token.focus();
}

function saveToken() {
  const t = ui.token.value.trim();
  if (t) sessionStorage.setItem(TOKEN_KEY, t);
  else sessionStorage.removeItem(TOKEN_KEY);
  probe();
}

// whether this server wants a token, and whether the one kept is good: GET /capabilities
async function probe() {
  try {
    const r = await fetch("/capabilities", { headers: headers(), cache: "no-store" });
    if (r.status === 401) {
      needToken(token() ? "this token was refused (401): give another" : "this server requires a bearer token");
      return false;
    }
    if (token()) {
      ui.auth.hidden = false;
      ui.authNote.textContent = r.ok ? "token accepted" : "GET /capabilities answered " + r.status;
    }
    return r.ok;
  } catch (e) {
    ui.authNote.textContent = "the server cannot be reached: " + e.message;
    return false;
  }
}

// --- Server-Sent Events over fetch (EventSource cannot POST) ---
async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) name = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield { name, data: JSON.parse(data.join("\n")) };
    }
  }
}

// an answer that is not the event stream: the API's {"error", "message"}, or whatever it is
async function failure(r) {
  const text = await r.text();
  let msg = text;
  try {
    const j = JSON.parse(text);
    if (j && j.error) msg = j.error + ": " + j.message;
  } catch (e) {
    /* not JSON: shown as it is */
  }
  if (r.status === 401) needToken("a valid bearer token is required");
  const busy = r.headers.get("Codebox-Busy");
  return "HTTP " + r.status + (busy ? " (busy: " + busy + ")" : "") + ": " + msg;
}

// --- rendering ---
function newRun(code, label) {
  const box = el("article", "run");
  if (label) box.append(el("div", "prompt", label));
  if (code !== undefined) box.append(el("pre", "source", code));
  const live = el("div", "live");
  box.append(live);
  ui.runs.append(box);
  return { box, live, streams: { stdout: null, stderr: null }, last: null };
}

// streamed text: consecutive pieces of one stream go to one <pre>
function appendStream(run, name, text) {
  if (run.last !== name) {
    run.streams[name] = el("pre", name === "stderr" ? "stderr" : "stdout");
    run.live.append(run.streams[name]);
    run.last = name;
  }
  run.streams[name].append(document.createTextNode(text));
}

function b64bytes(b64) {
  const bin = atob(b64);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return bytes;
}

function image(mime, b64, alt) {
  const img = el("img", "figure");
  img.alt = alt;
  img.src = "data:" + mime + ";base64," + b64;
  return img;
}

function download(name, mime, bytes) {
  const url = URL.createObjectURL(new Blob([bytes], { type: mime }));
  blobUrls.push(url);
  const a = el("a", null, name);
  a.href = url;
  a.download = name.split("/").pop() || "download";
  return a;
}

function outcomeLine(run, answer, requestId) {
  const line = el("div", "outcome");
  line.append(el("span", answer.status, answer.status));
  line.append(document.createTextNode(
    " · exit code " + (answer.exitCode === null ? "none" : answer.exitCode) +
    " · " + answer.durationMs + " ms" +
    (answer.truncated ? " · output truncated" : "") +
    (answer.executionCount ? " · cell " + answer.executionCount : "") +
    (requestId ? " · request " + requestId : "")));
  run.box.append(line);
  if (answer.result !== null && answer.result !== undefined) {
    run.box.append(el("div", "prompt", "result.json"));
    run.box.append(el("pre", "plain result", JSON.stringify(answer.result, null, 2)));
  }
  if (answer.resultError) run.box.append(el("div", "error", "result.json: " + answer.resultError));
}

// the answer's artifacts: images inline (unless the session's outputs showed them already),
// the rest as downloads
function artifacts(run, list, inlineImages) {
  if (!Array.isArray(list) || list.length === 0) return;
  const files = el("div", "downloads");
  for (const a of list) {
    if (a.contentBase64 === null) {
      files.append(el("span", "note", a.path + " (" + a.bytes + " bytes, not sent: " + a.omitted + ") "));
    } else if (IMAGE_TYPES.includes(a.mimeType) && inlineImages) {
      run.box.append(image(a.mimeType, a.contentBase64, a.path));
    } else {
      files.append(download(a.path, a.mimeType, b64bytes(a.contentBase64)));
    }
  }
  if (files.childNodes.length) {
    run.box.append(el("div", "prompt", "files"));
    run.box.append(files);
  }
}

// one MIME bundle, as Jupyter picks: HTML (sandboxed), images, then text
function bundle(parent, data, prompt) {
  if (prompt) parent.append(el("div", "prompt", prompt));
  if (typeof data["text/html"] === "string") {
    const frame = el("iframe", "html-output");
    frame.setAttribute("sandbox", "");
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.title = "HTML output (sandboxed: no scripts)";
    frame.srcdoc = srcdocPolicy.createHTML(data["text/html"]);
    parent.append(frame);
    return;
  }
  for (const mime of IMAGE_TYPES) {
    const v = data[mime];
    if (typeof v !== "string") continue;
    const b64 = mime === "image/svg+xml" ? btoa(unescape(encodeURIComponent(v))) : v;
    parent.append(image(mime, b64, "a " + mime + " output"));
    return;
  }
  let text = data["text/plain"];
  if (text === undefined && data["text/markdown"] !== undefined) text = data["text/markdown"];
  if (text === undefined && data["application/json"] !== undefined) text = JSON.stringify(data["application/json"], null, 2);
  if (text !== undefined) parent.append(el("pre", "plain", Array.isArray(text) ? text.join("") : text));
}

// a cell's outputs in nbformat 4's form (fcgi/box/cell.py, fcgi/core/cellout.c)
function outputs(run, list) {
  const out = el("div", "outputs");
  for (const o of list || []) {
    const text = (t) => (Array.isArray(t) ? t.join("") : String(t));
    switch (o.output_type) {
      case "stream":
        out.append(el("pre", o.name === "stderr" ? "stderr" : "stdout", text(o.text)));
        break;
      case "execute_result":
        bundle(out, o.data || {}, "Out[" + (o.execution_count ?? " ") + "]:");
        break;
      case "display_data":
        bundle(out, o.data || {});
        break;
      case "error":
        out.append(el("pre", "traceback", plain((o.traceback || []).join("\n") || o.ename + ": " + o.evalue)));
        break;
      default:
        break;
    }
  }
  return out;
}

// --- running ---
function busy(on) {
  ui.run.disabled = on;
  ui.interrupt.disabled = !on;
  ui.keep.disabled = on;
  ui.notebook.disabled = on || !sessionId;
  ui.endSession.disabled = on || !sessionId;
}

function clearRuns() {
  while (blobUrls.length) URL.revokeObjectURL(blobUrls.pop());
  ui.runs.replaceChildren();
}

async function stream(run, url, body, signal, onOutcome) {
  const r = await fetch(url, {
    method: "POST",
    headers: headers({ "Content-Type": "application/json", Accept: "text/event-stream" }),
    body: JSON.stringify(body),
    signal,
  });
  const requestId = r.headers.get("X-Request-Id");
  if (!r.ok || !(r.headers.get("Content-Type") || "").startsWith("text/event-stream")) {
    run.box.append(el("div", "error", await failure(r)));
    return;
  }
  for await (const ev of events(r)) {
    if (ev.name === "stdout" || ev.name === "stderr") appendStream(run, ev.name, ev.data.text);
    else if (ev.name === "outcome") onOutcome(ev.data, requestId);
    else if (ev.name === "error") run.box.append(el("div", "error", ev.data.error + ": " + ev.data.message));
  }
}

async function runPlain(code, signal) {
  clearRuns();
  const run = newRun();
  await stream(run, "/execute", { code, artifacts: true }, signal, (answer, requestId) => {
    outcomeLine(run, answer, requestId);
    artifacts(run, answer.artifacts, true);
  });
}

async function openSession() {
  if (sessionId) return true;
  const r = await fetch("/sessions", {
    method: "POST",
    headers: headers({ "Content-Type": "application/json" }),
    body: "{}",
  });
  if (r.status !== 201) {
    const run = newRun();
    run.box.append(el("div", "error", "no session: " + (await failure(r))));
    return false;
  }
  sessionId = (await r.json()).id;
  ui.sessionNote.textContent = "session open: state is kept between runs";
  return true;
}

function sessionEnded(why) {
  sessionId = null;
  ui.sessionNote.textContent = why;
}

async function runCell(code, signal) {
  if (!(await openSession())) return;
  const run = newRun(code, "In [*]:");
  await stream(run, "/sessions/" + encodeURIComponent(sessionId) + "/execute",
    { code, artifacts: true }, signal, (answer, requestId) => {
      run.box.firstChild.textContent = "In [" + (answer.executionCount ?? " ") + "]:";
      // the cell's outputs, as a notebook shows them, replace the text streamed meanwhile
      run.live.replaceChildren(outputs(run, answer.outputs));
      outcomeLine(run, answer, requestId);
      const shown = (answer.outputs || []).some((o) => o.data && IMAGE_TYPES.some((m) => m in o.data));
      artifacts(run, answer.artifacts, !shown);
      if (answer.session && answer.session.open === false) sessionEnded("the session ended with this cell; the next run starts a new one");
    });
}

async function run() {
  if (running) return;
  const code = ui.code.value;
  if (!code.trim()) return;
  running = { abort: new AbortController() };
  busy(true);
  try {
    if (ui.keep.checked) await runCell(code, running.abort.signal);
    else await runPlain(code, running.abort.signal);
  } catch (e) {
    const box = ui.runs.lastElementChild || newRun().box;
    box.append(el("div", "error", e.name === "AbortError" ? "stopped: the run was ended" : "failed: " + e.message));
  } finally {
    running = null;
    busy(false);
  }
}

// a plain run stops when its request is dropped (the server kills it); a session's cell gets
// KeyboardInterrupt and the session keeps its state
async function interrupt() {
  if (!running) return;
  if (ui.keep.checked && sessionId) {
    const r = await fetch("/sessions/" + encodeURIComponent(sessionId) + "/interrupt",
      { method: "POST", headers: headers() });
    if (!r.ok) ui.sessionNote.textContent = "interrupt: " + (await failure(r));
  } else {
    running.abort.abort();
  }
}

async function notebook() {
  if (!sessionId) return;
  const r = await fetch("/sessions/" + encodeURIComponent(sessionId) + "/notebook", { headers: headers() });
  if (!r.ok) {
    if (r.status === 404) sessionEnded("the session has ended");
    ui.sessionNote.textContent = "notebook: " + (await failure(r));
    busy(false);
    return;
  }
  const a = download("codebox-session.ipynb", "application/x-ipynb+json", await r.arrayBuffer());
  a.hidden = true;
  document.body.append(a);
  a.click();
  a.remove();
}

async function endSession() {
  if (!sessionId) return;
  const id = sessionId;
  sessionEnded("session ended");
  busy(false);
  await fetch("/sessions/" + encodeURIComponent(id), { method: "DELETE", headers: headers() });
}

ui.run.addEventListener("click", run);
ui.interrupt.addEventListener("click", interrupt);
ui.notebook.addEventListener("click", notebook);
ui.endSession.addEventListener("click", endSession);
ui.tokenSave.addEventListener("click", saveToken);
ui.token.addEventListener("keydown", (e) => {
  if (e.key === "Enter") saveToken();
});
ui.keep.addEventListener("change", () => {
  if (!ui.keep.checked) endSession();
  ui.sessionNote.textContent = ui.keep.checked ? "cells run in one session: variables are kept" : "";
  clearRuns();
});
document.addEventListener("keydown", (e) => {
  if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
    e.preventDefault();
    run();
  }
});
ui.token.value = token();
busy(false);
probe();
