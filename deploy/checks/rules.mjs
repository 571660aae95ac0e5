// The monitoring overlay's alerts and dashboard, out of its rendered manifests: writes the
// PrometheusRule's spec (a Prometheus rules file) to OUT_DIR/codebox-rules.yaml, for promtool
// check rules and promtool test rules (scripts/check-deploy.sh), and the dashboard's JSON to
// OUT_DIR/codebox-dashboard.json (its panels' queries, as recording rules for promtool to parse,
// to OUT_DIR/dashboard-queries.yaml); refuses an alert without severity, summary, description, or
// a runbook_url that names a section of docs/OPERATIONS.md, an alert the tests
// (TESTS.yaml) never see fire or never see silent, and a dashboard panel without a query.
//   node rules.mjs RENDERED.yaml TESTS.yaml OPERATIONS.md OUT_DIR
import { readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments, parse, stringify } from "yaml";

const [rendered, testsFile, opsFile, outDir] = process.argv.slice(2);
const docs = parseAllDocuments(readFileSync(rendered, "utf8")).map((d) => d.toJS()).filter(Boolean);
const errors = [];
const bad = (what, msg) => errors.push(`rules: ${what}: ${msg}`);

// GitHub's anchor of a Markdown heading: lower case, punctuation but - and _ dropped, spaces -
const slug = (h) => h.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
const anchors = new Set(
  readFileSync(opsFile, "utf8")
    .split("\n")
    .filter((l) => /^#{1,6} /.test(l))
    .map((l) => slug(l.replace(/^#+ /, ""))),
);

const ruleObjs = docs.filter((d) => d.kind === "PrometheusRule");
if (ruleObjs.length !== 1) bad(rendered, `${ruleObjs.length} PrometheusRules, expected 1`);
const spec = ruleObjs[0]?.spec ?? { groups: [] };
const alerts = spec.groups.flatMap((g) => g.rules ?? []).filter((r) => r.alert);
if (alerts.length === 0) bad(rendered, "the PrometheusRule has no alert");
for (const r of alerts) {
  if (!["critical", "warning", "info"].includes(r.labels?.severity))
    bad(r.alert, `severity ${r.labels?.severity} is not critical, warning or info`);
  for (const a of ["summary", "description", "runbook_url"])
    if (!r.annotations?.[a]) bad(r.alert, `no ${a} annotation`);
  const m = /^docs\/OPERATIONS\.md#(.+)$/.exec(r.annotations?.runbook_url ?? "");
  if (!m) bad(r.alert, `runbook_url ${r.annotations?.runbook_url} is not docs/OPERATIONS.md#<section>`);
  else if (!anchors.has(m[1])) bad(r.alert, `runbook_url: docs/OPERATIONS.md has no section #${m[1]}`);
}

// every alert seen firing in one case and silent in another
const tests = parse(readFileSync(testsFile, "utf8"));
const cases = (tests.tests ?? []).flatMap((t) => t.alert_rule_test ?? []);
for (const r of alerts) {
  const mine = cases.filter((c) => c.alertname === r.alert);
  if (!mine.some((c) => (c.exp_alerts ?? []).length > 0)) bad(r.alert, `${testsFile} never sees it fire`);
  if (!mine.some((c) => (c.exp_alerts ?? []).length === 0)) bad(r.alert, `${testsFile} never sees it silent`);
}
for (const c of cases)
  if (!alerts.some((r) => r.alert === c.alertname)) bad(testsFile, `tests ${c.alertname}, which is no alert`);

// the dashboard: a ConfigMap Grafana's sidecar picks up, of JSON whose every panel queries
const boards = docs.filter((d) => d.kind === "ConfigMap" && d.metadata?.labels?.grafana_dashboard === "1");
if (boards.length !== 1) bad(rendered, `${boards.length} ConfigMaps labelled grafana_dashboard: "1", expected 1`);
const [key, json] = Object.entries(boards[0]?.data ?? {})[0] ?? [];
let board = null;
try {
  board = JSON.parse(json ?? "");
} catch (e) {
  bad(`dashboard ${key}`, `not JSON: ${e.message}`);
}
const panels = (board?.panels ?? []).flatMap((p) => [p, ...(p.panels ?? [])]).filter((p) => p.type !== "row");
if (board && panels.length === 0) bad(`dashboard ${key}`, "no panel");
for (const p of panels)
  if (!(p.targets ?? []).some((t) => t.expr)) bad(`dashboard ${key}`, `the panel "${p.title}" queries nothing`);

if (errors.length) {
  console.error(errors.join("\n"));
  process.exit(1);
}
writeFileSync(`${outDir}/codebox-rules.yaml`, stringify(spec));
writeFileSync(`${outDir}/codebox-dashboard.json`, json);
// the panels' queries as recording rules, for promtool check rules to parse (Grafana's
// variables replaced by what they stand for)
const exprs = panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr).filter(Boolean));
const promql = (e) => e.replaceAll("$__rate_interval", "5m").replace(/\$(namespace|pod)\b/g, ".*");
writeFileSync(
  `${outDir}/dashboard-queries.yaml`,
  stringify({ groups: [{ name: "dashboard", rules: exprs.map((e, i) => ({ record: `dashboard:query${i}`, expr: promql(e) })) }] }),
);
console.log(`rules: ${alerts.length} alerts, each with its runbook and tests; a dashboard of ${panels.length} panels`);
