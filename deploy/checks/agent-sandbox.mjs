// Offline check of the agent-sandbox overlay, whose kinds kubernetes-models does not know.
//   node agent-sandbox.mjs RENDERED.yaml DERIVED.yaml
// 1. Every SandboxTemplate and SandboxWarmPool must match the v1alpha1 schema of
//    extensions.agents.x-k8s.io as the v0.5.4 CRDs declare it (sandboxtemplates: spec with
//    podTemplate {metadata {labels, annotations}, spec: a PodSpec} required, networkPolicy
//    {ingress, egress}, volumeClaimTemplates; sandboxwarmpools: spec with replicas (int32 >= 0)
//    and sandboxTemplateRef {name} required, updateStrategy {type}): required fields, types,
//    and no unknown field (the API server prunes unknown fields silently, which would drop a
//    misspelled hardening field without a word).
// 2. It writes DERIVED.yaml: what the controller makes of them, a Pod from the template, the
//    NetworkPolicy it manages for the template's rules, and the Service it puts in front of a
//    sandbox; scripts/check-deploy.sh then runs validate.mjs (PodSpec and NetworkPolicy
//    schemas, excess-property check) and hardening.mjs on it like on every other overlay.
import { readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments, stringify } from "yaml";

const [input, output] = process.argv.slice(2);
const problems = [];
const bad = (where, why) => problems.push(`${where}: ${why}`);

// a tiny structural schema: {t: "object", p: {...}, req: [...]}, {t: "string"}, {t: "int32",
// min}, {t: "array", items}, {t: "map"} (string values), {t: "any"} (checked elsewhere)
const str = { t: "string" };
const map = { t: "map" };
const anyObj = { t: "any" };
const objectMeta = {
  t: "object",
  p: { name: str, namespace: str, labels: map, annotations: map },
};
const schemas = {
  SandboxTemplate: {
    t: "object",
    req: ["spec"],
    p: {
      apiVersion: str,
      kind: str,
      metadata: objectMeta,
      spec: {
        t: "object",
        req: ["podTemplate"],
        p: {
          podTemplate: {
            t: "object",
            req: ["spec"],
            p: { metadata: { t: "object", p: { labels: map, annotations: map } }, spec: anyObj },
          },
          volumeClaimTemplates: { t: "array", items: anyObj },
          networkPolicy: {
            t: "object",
            p: { ingress: { t: "array", items: anyObj }, egress: { t: "array", items: anyObj } },
          },
        },
      },
    },
  },
  SandboxWarmPool: {
    t: "object",
    req: ["spec"],
    p: {
      apiVersion: str,
      kind: str,
      metadata: objectMeta,
      spec: {
        t: "object",
        req: ["replicas", "sandboxTemplateRef"],
        p: {
          replicas: { t: "int32", min: 0 },
          sandboxTemplateRef: { t: "object", req: ["name"], p: { name: str } },
          updateStrategy: { t: "object", p: { type: { t: "enum", v: ["Recreate", "OnReplenish"] } } },
        },
      },
    },
  },
};

function check(where, v, s) {
  switch (s.t) {
    case "any":
      return;
    case "string":
      if (typeof v !== "string") bad(where, "must be a string");
      return;
    case "enum":
      if (!s.v.includes(v)) bad(where, `must be one of ${s.v.join(", ")}`);
      return;
    case "int32":
      if (!Number.isInteger(v) || v < (s.min ?? -(2 ** 31)) || v >= 2 ** 31) bad(where, "must be an int32" + (s.min != null ? ` >= ${s.min}` : ""));
      return;
    case "map":
      if (typeof v !== "object" || v === null || Array.isArray(v) || Object.values(v).some((x) => typeof x !== "string")) bad(where, "must map strings to strings");
      return;
    case "array":
      if (!Array.isArray(v)) return bad(where, "must be a list");
      v.forEach((x, i) => check(`${where}[${i}]`, x, s.items));
      return;
    case "object":
      if (typeof v !== "object" || v === null || Array.isArray(v)) return bad(where, "must be an object");
      for (const r of s.req ?? []) if (!(r in v)) bad(where, `${r} is required`);
      for (const [k, x] of Object.entries(v)) {
        if (!(k in s.p)) bad(`${where}.${k}`, "is not a field of the v1alpha1 schema");
        else check(`${where}.${k}`, x, s.p[k]);
      }
  }
}

const derived = [];
const docs = parseAllDocuments(readFileSync(input, "utf8")).map((d) => d.toJS()).filter(Boolean);
const templates = new Set();
for (const o of docs) {
  const where = `${o.kind} ${o.metadata?.name ?? "?"}`;
  if (o.apiVersion !== "extensions.agents.x-k8s.io/v1alpha1" || !schemas[o.kind]) {
    bad(where, `expected extensions.agents.x-k8s.io/v1alpha1 SandboxTemplate or SandboxWarmPool, not ${o.apiVersion} ${o.kind}`);
    continue;
  }
  const before = problems.length;
  check(where, o, schemas[o.kind]);
  if (o.kind === "SandboxTemplate") templates.add(o.metadata?.name);
  // only a template that matches its schema has a pod to derive
  if (o.kind === "SandboxTemplate" && problems.length === before) {
    const labels = o.spec.podTemplate.metadata?.labels ?? {};
    derived.push({
      apiVersion: "v1",
      kind: "Pod",
      metadata: { name: `${o.metadata.name}-sandbox`, labels, annotations: o.spec.podTemplate.metadata?.annotations },
      spec: o.spec.podTemplate.spec,
    });
    const np = o.spec.networkPolicy ?? {};
    derived.push({
      apiVersion: "networking.k8s.io/v1",
      kind: "NetworkPolicy",
      metadata: { name: `${o.metadata.name}-sandbox` },
      spec: { podSelector: { matchLabels: labels }, policyTypes: ["Ingress", "Egress"], ingress: np.ingress ?? [], egress: np.egress ?? [] },
    });
    derived.push({
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: `${o.metadata.name}-sandbox` },
      spec: { clusterIP: "None", selector: labels },
    });
  }
}
for (const o of docs)
  if (o.kind === "SandboxWarmPool" && !templates.has(o.spec?.sandboxTemplateRef?.name))
    bad(`SandboxWarmPool ${o.metadata?.name}`, `refers to the SandboxTemplate '${o.spec?.sandboxTemplateRef?.name}', which the overlay does not define`);
for (const p of problems) console.error(`agent-sandbox: ${p}`);
if (problems.length) process.exit(1);
writeFileSync(output, derived.map((d) => stringify(d)).join("---\n"));
console.log(`agent-sandbox: ${docs.length} objects match the v1alpha1 schemas`);
