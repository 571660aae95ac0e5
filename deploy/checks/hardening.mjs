// codebox's hardening rules for its pod: the restricted Pod Security Standard and more.
//   node hardening.mjs FILE.yaml...   prints every violation, exits 1 if there is one
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const docs = [];
for (const file of process.argv.slice(2))
  for (const d of parseAllDocuments(readFileSync(file, "utf8"))) {
    const o = d.toJS();
    if (o) docs.push(o);
  }

const problems = [];
const bad = (what, why) => problems.push(`${what}: ${why}`);
const okSeccomp = (p) => p && (p.type === "RuntimeDefault" || (p.type === "Localhost" && p.localhostProfile));

const workloads = docs.filter((d) => ["Deployment", "StatefulSet", "DaemonSet", "Pod"].includes(d.kind));
if (workloads.length === 0) bad("manifests", "no workload found");
for (const w of workloads) {
  const name = `${w.kind} ${w.metadata?.name}`;
  const pod = w.kind === "Pod" ? w.spec : w.spec?.template?.spec;
  if (!pod) {
    bad(name, "no pod spec");
    continue;
  }
  const psc = pod.securityContext ?? {};
  if (pod.automountServiceAccountToken !== false) bad(name, "automountServiceAccountToken must be false");
  for (const k of ["hostNetwork", "hostPID", "hostIPC"]) if (pod[k]) bad(name, `${k} must not be set`);
  for (const v of pod.volumes ?? []) if (v.hostPath) bad(name, `volume ${v.name} is a hostPath`);
  if (psc.runAsUser === 0) bad(name, "runAsUser must not be 0");
  for (const c of [...(pod.initContainers ?? []), ...(pod.containers ?? [])]) {
    const cn = `${name} container ${c.name}`;
    const sc = c.securityContext ?? {};
    if (sc.allowPrivilegeEscalation !== false) bad(cn, "allowPrivilegeEscalation must be false");
    if (sc.privileged) bad(cn, "privileged must not be set");
    if (sc.readOnlyRootFilesystem !== true) bad(cn, "readOnlyRootFilesystem must be true");
    if ((sc.runAsNonRoot ?? psc.runAsNonRoot) !== true) bad(cn, "runAsNonRoot must be true");
    if (sc.runAsUser === 0) bad(cn, "runAsUser must not be 0");
    if (!(sc.capabilities?.drop ?? []).includes("ALL")) bad(cn, "capabilities must drop ALL");
    if ((sc.capabilities?.add ?? []).length) bad(cn, "capabilities must add nothing");
    if (!okSeccomp(sc.seccompProfile ?? psc.seccompProfile)) bad(cn, "a seccomp profile (RuntimeDefault or Localhost) must be set");
    for (const kind of ["requests", "limits"])
      for (const r of ["cpu", "memory"])
        if (!c.resources?.[kind]?.[r]) bad(cn, `resources.${kind}.${r} must be set`);
    for (const p of c.ports ?? []) if (p.hostPort) bad(cn, "hostPort must not be set");
  }
  const probes = (pod.containers ?? []).flatMap((c) => [c.livenessProbe?.httpGet?.path, c.readinessProbe?.httpGet?.path]);
  if (!probes.includes("/healthz")) bad(name, "a liveness probe on /healthz is missing");
  if (!probes.includes("/readyz")) bad(name, "a readiness probe on /readyz is missing");
}
const policies = docs.filter((d) => d.kind === "NetworkPolicy");
if (!policies.some((p) => (p.spec?.policyTypes ?? []).includes("Egress") && (p.spec?.egress ?? []).length === 0))
  bad("manifests", "no NetworkPolicy denies all egress");
if (!docs.some((d) => d.kind === "Service")) bad("manifests", "no Service");

for (const p of problems) console.error(`hardening: ${p}`);
if (problems.length) process.exit(1);
console.log(`hardening: ${workloads.length} workload(s) pass`);
