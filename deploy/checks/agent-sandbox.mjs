// Offline check of the agent-sandbox overlay, whose kinds kubernetes-models does not know.
//   node agent-sandbox.mjs RENDERED.yaml DERIVED.yaml
// 1. The CRDs it checks against are agent-sandbox's own (crds/agent-sandbox/: the CRD YAML of
//    the release line the overlay targets, vendored with its provenance in README.md), each
//    pinned by the sha256 in crds/agent-sandbox/SHA256SUMS: a file that does not match is
//    refused before anything is checked.
// 2. Every agents.x-k8s.io or extensions.agents.x-k8s.io object must use a version its CRD
//    serves, is not deprecated, and is the CRD's storage version (what the API server keeps,
//    and what the next release still serves), and must match that version's openAPIV3Schema as
//    the API server applies it: types, formats, enums, patterns, bounds, required fields, and no
//    field the schema does not declare (the server would prune it without a word, dropping a
//    misspelled hardening field). A SandboxWarmPool must name a SandboxTemplate of the overlay.
// 3. It writes DERIVED.yaml: the overlay's plain objects (Namespace, ServiceAccount, the limits
//    ConfigMap) as they are, and what the controller makes of each SandboxTemplate: a Pod in the
//    template's namespace, the template's NetworkPolicy (`<name>-network-policy`, selecting the
//    sandboxes by the label the controller puts on them), and the sandbox's headless Service.
//    scripts/check-deploy.sh then runs validate.mjs (kubernetes-models: the PodSpec the CRD
//    extract leaves out is checked there), hardening.mjs and the pod's limits, grace and
//    storage on it, as on every other overlay.
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse, parseAllDocuments, stringify } from "yaml";

const here = dirname(fileURLToPath(import.meta.url));
const crdDir = join(here, "crds", "agent-sandbox");
const [input, output] = process.argv.slice(2);
const problems = [];
const bad = (where, why) => problems.push(`${where}: ${why}`);
// a field's path under an object's name: "SandboxTemplate codebox: spec.service"
const field = (where, k) => (where.includes(": ") ? `${where}.${k}` : `${where}: ${k}`);
const die = (why) => {
  console.error(`agent-sandbox: ${why}`);
  process.exit(1);
};

// 1. the pinned CRDs: every *.yaml of crds/agent-sandbox/ listed in SHA256SUMS, and matching
const sums = new Map();
for (const line of readFileSync(join(crdDir, "SHA256SUMS"), "utf8").split("\n")) {
  const m = /^([0-9a-f]{64}) [ *](\S+)$/.exec(line);
  if (m) sums.set(m[2], m[1]);
}
const crds = new Map(); // "group/Kind" -> the CRD
for (const file of readdirSync(crdDir).filter((f) => f.endsWith(".yaml")).sort()) {
  const bytes = readFileSync(join(crdDir, file));
  const sum = createHash("sha256").update(bytes).digest("hex");
  if (!sums.has(file)) die(`crds/agent-sandbox/${file} has no sha256 in crds/agent-sandbox/SHA256SUMS`);
  if (sums.get(file) !== sum)
    die(`crds/agent-sandbox/${file} does not match its pinned sha256 (${sums.get(file)}, the file has ${sum}): vendor it again as README.md says`);
  const crd = parse(bytes.toString("utf8"));
  crds.set(`${crd.spec.group}/${crd.spec.names.kind}`, crd);
}
for (const file of sums.keys())
  if (!readdirSync(crdDir).includes(file)) die(`crds/agent-sandbox/${file} is pinned in SHA256SUMS but missing`);

// 2. an openAPIV3Schema (structural, as controller-gen writes them) applied as the API server
// does, except that an unknown field is an error here where the server prunes it
const INT32 = 2 ** 31;
function check(where, v, s) {
  if (s["x-codebox-elided"]) {
    // a subtree of the upstream CRD left out of the vendored copy: checked by kubernetes-models
    if (typeof v !== "object" || v === null || Array.isArray(v)) bad(where, "must be an object");
    return;
  }
  if (s["x-kubernetes-int-or-string"]) {
    if (!(Number.isInteger(v) || typeof v === "string")) return bad(where, "must be an integer or a string");
    if (typeof v === "string" && s.pattern && !new RegExp(s.pattern).test(v)) bad(where, `'${v}' does not match ${s.pattern}`);
    return;
  }
  switch (s.type) {
    case "string":
      if (typeof v !== "string") return bad(where, "must be a string");
      if (s.enum && !s.enum.includes(v)) bad(where, `must be one of ${s.enum.join(", ")}, not '${v}'`);
      if (s.pattern && !new RegExp(s.pattern).test(v)) bad(where, `'${v}' does not match ${s.pattern}`);
      if (s.maxLength !== undefined && v.length > s.maxLength) bad(where, `is longer than ${s.maxLength}`);
      return;
    case "integer": {
      if (!Number.isInteger(v)) return bad(where, "must be an integer");
      if (s.format === "int32" && (v < -INT32 || v >= INT32)) bad(where, "must be an int32");
      if (s.minimum !== undefined && v < s.minimum) bad(where, `must be at least ${s.minimum}`);
      if (s.maximum !== undefined && v > s.maximum) bad(where, `must be at most ${s.maximum}`);
      if (s.enum && !s.enum.includes(v)) bad(where, `must be one of ${s.enum.join(", ")}`);
      return;
    }
    case "boolean":
      if (typeof v !== "boolean") bad(where, "must be a boolean (true or false)");
      return;
    case "array":
      if (!Array.isArray(v)) return bad(where, "must be a list");
      if (s.minItems !== undefined && v.length < s.minItems) bad(where, `must have at least ${s.minItems} item(s)`);
      if (s["x-kubernetes-list-type"] === "map") {
        const keys = v.map((x) => JSON.stringify((s["x-kubernetes-list-map-keys"] ?? []).map((k) => x?.[k])));
        if (new Set(keys).size !== keys.length) bad(where, `has two items with the same ${(s["x-kubernetes-list-map-keys"] ?? []).join(", ")}`);
      }
      v.forEach((x, i) => check(`${where}[${i}]`, x, s.items ?? {}));
      return;
    case "object": {
      if (typeof v !== "object" || v === null || Array.isArray(v)) return bad(where, "must be an object");
      for (const r of s.required ?? []) if (!(r in v)) bad(where, `${r} is required`);
      for (const [k, x] of Object.entries(v)) {
        if (s.properties && k in s.properties) check(field(where, k), x, s.properties[k]);
        else if (s.additionalProperties) check(field(where, k), x, s.additionalProperties);
        else if (!s.properties && !s["x-kubernetes-preserve-unknown-fields"]) continue; // metadata: type object
        else if (!s["x-kubernetes-preserve-unknown-fields"]) bad(field(where, k), "is not a field of the CRD's schema (the API server would drop it)");
      }
      return;
    }
    default:
      return;
  }
}
// metadata is "type: object" in every CRD: the API server checks it as ObjectMeta
const META = new Set(["name", "namespace", "labels", "annotations"]);
function checkMeta(where, m) {
  if (typeof m?.name !== "string" || !m.name) bad(where, "metadata.name is required");
  for (const k of Object.keys(m ?? {})) if (!META.has(k)) bad(field(where, `metadata.${k}`), "is not set by a manifest of this overlay");
  for (const k of ["labels", "annotations"])
    for (const [key, val] of Object.entries(m?.[k] ?? {})) if (typeof val !== "string") bad(field(where, `metadata.${k}.${key}`), "must be a string");
}

const docs = parseAllDocuments(readFileSync(input, "utf8")).map((d) => d.toJS()).filter(Boolean);
const templates = new Set();
const derived = [];
let checked = 0;
for (const o of docs) {
  const [group, version] = String(o.apiVersion).includes("/") ? o.apiVersion.split("/") : ["", o.apiVersion];
  if (!/(^|\.)agents\.x-k8s\.io$/.test(group)) {
    derived.push(o); // a plain object of the overlay: checked by validate.mjs with the rest
    continue;
  }
  const where = `${o.kind} ${o.metadata?.name ?? "?"}`;
  const crd = crds.get(`${group}/${o.kind}`);
  if (!crd) {
    bad(where, `no pinned CRD (crds/agent-sandbox/) defines ${group} ${o.kind}`);
    continue;
  }
  const v = crd.spec.versions.find((x) => x.name === version);
  const storage = crd.spec.versions.find((x) => x.storage)?.name;
  if (!v || !v.served) {
    bad(where, `${o.apiVersion} is not served by the pinned CRD (it serves ${crd.spec.versions.filter((x) => x.served).map((x) => x.name).join(", ")})`);
    continue;
  }
  if (v.deprecated) bad(where, `${o.apiVersion} is deprecated: ${v.deprecationWarning ?? `use ${group}/${storage}`}`);
  else if (!v.storage) bad(where, `${o.apiVersion} is not the storage version of ${crd.metadata.name}: use ${group}/${storage}`);
  checked++;
  const before = problems.length;
  checkMeta(where, o.metadata);
  // apiVersion, kind and metadata are the API server's: checked above
  const body = { ...o };
  for (const k of ["apiVersion", "kind", "metadata"]) delete body[k];
  check(where, body, v.schema.openAPIV3Schema);
  if (o.kind === "SandboxTemplate") templates.add(`${o.metadata?.namespace ?? ""}/${o.metadata?.name}`);
  // only a template that matches its schema has a pod to derive
  if (o.kind === "SandboxTemplate" && problems.length === before) {
    const ns = o.metadata.namespace;
    // the label the controller puts on every sandbox of the template, which its policy selects
    const ref = { "agents.x-k8s.io/sandbox-template-ref-hash": "derived-by-the-controller" };
    const labels = { ...(o.spec.podTemplate.metadata?.labels ?? {}), ...ref };
    const meta = (name, extra = {}) => ({ name, ...(ns ? { namespace: ns } : {}), ...extra });
    derived.push({
      apiVersion: "v1",
      kind: "Pod",
      metadata: meta(`${o.metadata.name}-sandbox`, { labels, ...(o.spec.podTemplate.metadata?.annotations ? { annotations: o.spec.podTemplate.metadata.annotations } : {}) }),
      spec: o.spec.podTemplate.spec,
    });
    if ((o.spec.networkPolicyManagement ?? "Managed") === "Managed") {
      const np = o.spec.networkPolicy;
      derived.push({
        apiVersion: "networking.k8s.io/v1",
        kind: "NetworkPolicy",
        metadata: meta(`${o.metadata.name}-network-policy`),
        // no networkPolicy: the controller's secure default, which admits the sandbox router
        // only (and lets egress out to the internet): codebox's template always sets its own
        spec: np
          ? { podSelector: { matchLabels: ref }, policyTypes: ["Ingress", "Egress"], ingress: np.ingress ?? [], egress: np.egress ?? [] }
          : { podSelector: { matchLabels: ref }, policyTypes: ["Ingress"], ingress: [{ from: [{ podSelector: { matchLabels: { app: "sandbox-router" } } }] }] },
      });
    }
    if (o.spec.service)
      derived.push({ apiVersion: "v1", kind: "Service", metadata: meta(`${o.metadata.name}-sandbox`), spec: { clusterIP: "None", selector: ref } });
  }
}
for (const o of docs)
  if (o.kind === "SandboxWarmPool" && !templates.has(`${o.metadata?.namespace ?? ""}/${o.spec?.sandboxTemplateRef?.name}`))
    bad(`SandboxWarmPool ${o.metadata?.name}`, `refers to the SandboxTemplate '${o.spec?.sandboxTemplateRef?.name}', which the overlay does not define in its namespace`);
for (const p of problems) console.error(`agent-sandbox: ${p}`);
if (problems.length) process.exit(1);
writeFileSync(output, derived.map((d) => stringify(d)).join("---\n"));
console.log(`agent-sandbox: ${checked} objects match the pinned CRDs' storage versions (${[...crds.values()].map((c) => c.metadata.name).join(", ")})`);
