// The playground's browser test (tests/91-playground.bats): Debian's chromium-headless-shell
// driven by playwright-core (tests/playground pins it; its own browser download is never used),
// on the node tests/mcp pins. It lives beside its node_modules, from which node resolves it. Each scenario loads the page as a person would, types, clicks,
// and reads what the page shows; every wait is bounded (playwright's timeouts).
//
// usage: browser.mjs URL SCENARIO [ARG]
//   cafe FILE      runs FILE with Run: the output and the outcome
//   figure FILE    runs FILE: the figure's <img> has loaded
//   ctrl-enter     runs print(6 * 7) with Ctrl+Enter
//   session        keep state: x = 41, then x + 1 in a second cell; the notebook downloads
//   pwned          a program that prints <script> and onerror= HTML, and displays it as HTML in
//                  a session: nothing of it runs, the text shows
//   token TOKEN    a token stack: the page asks for a token; a wrong one is refused, TOKEN runs
// Prints one JSON line of what the page showed; exit 1 with a message on stderr when a check
// fails or a wait times out; 2 on a usage error.
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";

const BROWSER = process.env.PLAYGROUND_BROWSER || "/usr/lib/chromium/chromium-headless-shell";
const WAIT_MS = Number(process.env.PLAYGROUND_WAIT_MS || 30000); // one run's answer, on a loaded host
const [url, scenario, arg] = process.argv.slice(2);
if (!url || !scenario) {
  process.stderr.write("usage: browser.mjs URL cafe|figure FILE | ctrl-enter | session | pwned | token TOKEN\n");
  process.exit(2);
}

function check(ok, what) {
  if (!ok) throw new Error(`check failed: ${what}`);
}

// the run's outcome line, once it says how the run ended
async function outcome(page, nth = -1) {
  const line = page.locator(".run .outcome").nth(nth);
  await line.waitFor({ timeout: WAIT_MS });
  return line.textContent();
}

async function runCode(page, code, how = "click") {
  await page.getByLabel("Code").fill(code);
  const before = await page.locator(".run .outcome").count();
  if (how === "ctrl-enter") {
    await page.getByLabel("Code").press("Control+Enter");
  } else {
    await page.getByRole("button", { name: "Run", exact: true }).click();
  }
  // a plain run clears the runs before it; a cell adds one
  await page.waitForFunction(
    ([n, keep]) => document.querySelectorAll(".run .outcome").length > (keep ? n : 0) &&
      !document.getElementById("run").disabled,
    [before, await page.locator("#keep").isChecked()],
    { timeout: WAIT_MS },
  );
  return outcome(page);
}

const scenarios = {
  async cafe(page) {
    const text = await runCode(page, readFileSync(arg, "utf8"));
    const out = await page.locator(".run .stdout").first().textContent();
    check(text.startsWith("succeeded · exit code 0 · "), `the outcome says succeeded, exit code 0: ${text}`);
    check(out.includes("[3.0, 2.0, 5.0]"), `the output shows the prices: ${out}`);
    const result = await page.locator(".run .result").textContent();
    return { outcome: text, stdout: out, result: JSON.parse(result) };
  },

  async figure(page) {
    const text = await runCode(page, readFileSync(arg, "utf8"));
    const img = page.locator(".run img.figure").first();
    await img.waitFor({ timeout: WAIT_MS });
    await page.waitForFunction(() => {
      const i = document.querySelector(".run img.figure");
      return i && i.complete && i.naturalWidth > 0;
    }, null, { timeout: WAIT_MS });
    const size = await img.evaluate((i) => ({ w: i.naturalWidth, h: i.naturalHeight, src: i.src.slice(0, 22) }));
    check(size.src === "data:image/png;base64,", `the figure is a data: URL of a PNG: ${size.src}`);
    return { outcome: text, figure: size };
  },

  async "ctrl-enter"(page) {
    const text = await runCode(page, "print(6 * 7)", "ctrl-enter");
    const out = await page.locator(".run .stdout").first().textContent();
    check(out === "42\n", `Ctrl+Enter ran the code: ${JSON.stringify(out)}`);
    return { outcome: text, stdout: out };
  },

  async session(page) {
    await page.getByLabel("Keep state").check();
    await runCode(page, "x = 41\nprint('set')");
    const second = await runCode(page, "x + 1");
    const cells = page.locator(".run");
    check((await cells.count()) === 2, "two cells are shown");
    const result = await cells.nth(1).locator(".outputs .plain").textContent();
    const prompt = await cells.nth(1).locator(".outputs .prompt").textContent();
    check(result === "42", `the second cell sees the first's x: ${JSON.stringify(result)}`);
    check(prompt === "Out[2]:", `Jupyter's prompt: ${prompt}`);
    const dl = page.waitForEvent("download", { timeout: WAIT_MS });
    await page.getByRole("button", { name: "Download notebook" }).click();
    const file = await (await dl).path();
    const nb = JSON.parse(readFileSync(file, "utf8"));
    check(nb.nbformat === 4 && nb.cells.length === 2, "the notebook holds the two cells");
    return { outcome: second, value: result, prompt, notebookCells: nb.cells.map((c) => c.source) };
  },

  async pwned(page) {
    // each also reaches for the page itself (parent), as a script in a frame would
    const html = '<script>window.__pwned=1;parent.__pwned=1</script>' +
      '<img src=x onerror="window.__pwned=1;parent.__pwned=1"><b id=shown>shown</b>';
    const code = `html = ${JSON.stringify(html)}\nprint(html)\n`;
    await runCode(page, code);
    const out = await page.locator(".run .stdout").first().textContent();
    check(out === `${html}\n`, `the printed HTML is shown as text: ${out}`);
    check(await page.locator(".run img, .run script, #shown").count() === 0, "no element of it is in the page");
    // in a session, displayed as HTML: a sandboxed frame without scripts
    await page.getByLabel("Keep state").check();
    await runCode(page, `${code}from IPython.display import HTML, display\ndisplay(HTML(html))\nHTML(html)`);
    const frames = page.locator(".run iframe.html-output");
    await frames.first().waitFor({ timeout: WAIT_MS });
    check(await frames.count() === 2, "display() and the cell's value each made a frame");
    const sandbox = await frames.first().getAttribute("sandbox");
    check(sandbox === "", `the frame is sandboxed with no permission: ${JSON.stringify(sandbox)}`);
    const shown = await page.frameLocator(".run iframe.html-output").first().locator("#shown").textContent({ timeout: WAIT_MS });
    const stream = await page.locator(".run .outputs .stdout").first().textContent();
    check(stream === `${html}\n`, `the cell's printed HTML is text: ${stream}`);
    const pwned = await page.evaluate(() => window.__pwned);
    check(pwned === undefined, `window.__pwned is ${pwned}`);
    return { stdout: out, frameText: shown, sandbox, pwned: pwned === undefined ? "undefined" : pwned };
  },

  async token(page) {
    const auth = page.locator("#auth");
    await auth.waitFor({ state: "visible", timeout: WAIT_MS });
    const asked = await page.locator("#auth-note").textContent();
    await page.getByLabel("Token").fill("not-the-token-0123456789");
    await page.getByRole("button", { name: "Use token" }).click();
    await page.waitForFunction(() => /refused/.test(document.getElementById("auth-note").textContent), null, { timeout: WAIT_MS });
    await page.getByLabel("Token").fill(arg);
    await page.getByRole("button", { name: "Use token" }).click();
    await page.waitForFunction(() => document.getElementById("auth-note").textContent === "token accepted", null, { timeout: WAIT_MS });
    const text = await runCode(page, "print(6 * 7)");
    const out = await page.locator(".run .stdout").first().textContent();
    check(out === "42\n", `with the token the code ran: ${out}`);
    const kept = await page.evaluate(() => sessionStorage.getItem("codebox-token"));
    check(kept === arg, "the token is kept in sessionStorage");
    const local = await page.evaluate(() => localStorage.length);
    check(local === 0, "nothing is kept in localStorage");
    return { asked, outcome: text, stdout: out };
  },
};

if (!scenarios[scenario]) {
  process.stderr.write(`browser.mjs: no scenario ${scenario}\n`);
  process.exit(2);
}

const browser = await chromium.launch({ executablePath: BROWSER, timeout: WAIT_MS });
let status = 0;
try {
  const context = await browser.newContext({ acceptDownloads: true });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  // what the browser reports: a CSP violation (console), a script error (pageerror)
  const violations = [];
  const errors = [];
  page.on("console", (m) => {
    if (/Content Security Policy|Trusted Type/i.test(m.text())) violations.push(m.text());
  });
  page.on("pageerror", (e) => errors.push(e.message));
  const response = await page.goto(url, { timeout: WAIT_MS });
  check(response.status() === 200, `the page answered ${response.status()}`);
  const csp = response.headers()["content-security-policy"] || "";
  check(csp.includes("default-src 'none'") && csp.includes("frame-ancestors 'none'"), `a strict CSP: ${csp}`);
  const result = await scenarios[scenario](page);
  check(errors.length === 0, `no script error: ${errors.join("; ")}`);
  if (scenario !== "pwned") check(violations.length === 0, `no CSP violation: ${violations.join("; ")}`);
  process.stdout.write(`${JSON.stringify({ ...result, violations, errors })}\n`);
} catch (e) {
  process.stderr.write(`browser.mjs: ${scenario}: ${e.message}\n`);
  status = 1;
} finally {
  await browser.close();
}
process.exit(status);
