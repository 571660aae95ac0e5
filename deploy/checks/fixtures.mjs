// Fixtures that must fail: each is the rendered kind manifest with one hardening rule broken
// (or one field misspelled). Writes each to OUTDIR/<name>.yaml and prints "<name>\t<expected
// message>" lines for check-deploy.sh, which runs the checks on them and expects failures.
//   node fixtures.mjs RENDERED.yaml OUTDIR
import { readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments, stringify } from "yaml";

const [rendered, outdir] = process.argv.slice(2);
const original = parseAllDocuments(readFileSync(rendered, "utf8")).map((d) => d.toJS()).filter(Boolean);
const pod = (docs) => docs.find((d) => d.kind === "Deployment").spec.template.spec;
const pool = (docs) => pod(docs).containers.find((c) => c.name === "pool");

const fixtures = [
  ["privileged", "privileged must not be set", (d) => { pool(d).securityContext.privileged = true; }],
  ["escalation", "allowPrivilegeEscalation must be false", (d) => { delete pool(d).securityContext.allowPrivilegeEscalation; }],
  ["writable-root", "readOnlyRootFilesystem must be true", (d) => { pool(d).securityContext.readOnlyRootFilesystem = false; }],
  ["root-user", "runAsUser must not be 0", (d) => { pool(d).securityContext.runAsUser = 0; }],
  ["capabilities", "capabilities must drop ALL", (d) => { pool(d).securityContext.capabilities = { drop: ["NET_RAW"] }; }],
  ["unconfined", "a seccomp profile", (d) => { pool(d).securityContext.seccompProfile = { type: "Unconfined" }; }],
  ["token", "automountServiceAccountToken must be false", (d) => { delete pod(d).automountServiceAccountToken; }],
  ["host-path", "is a hostPath", (d) => { pod(d).volumes.push({ name: "host", hostPath: { path: "/" } }); }],
  ["no-limits", "resources.limits.memory must be set", (d) => { delete pool(d).resources.limits.memory; }],
  ["no-probe", "a readiness probe on /readyz is missing", (d) => { for (const c of pod(d).containers) delete c.readinessProbe; }],
  ["egress", "no NetworkPolicy denies all egress", (d) => { d.find((x) => x.kind === "NetworkPolicy").spec.egress = [{}]; }],
  // a misspelled field: caught by the TypeScript excess-property check, not by hardening.mjs
  ["typo", "does not exist in type", (d) => { const c = pool(d); c.securityContex = c.securityContext; }],
];

for (const [name, expect, mutate] of fixtures) {
  const docs = structuredClone(original);
  mutate(docs);
  writeFileSync(`${outdir}/${name}.yaml`, docs.map((d) => stringify(d)).join("---\n"));
  console.log(`${name}\t${expect}`);
}
