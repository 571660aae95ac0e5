// codebox's pod as a whole, for check-deploy.sh's limits check. The pod is the Deployment's
// (the scale overlay's StatefulSet's) or the Pod the agent-sandbox controller makes from the SandboxTemplate (agent-sandbox.mjs
// writes it): exactly one of the two. Writes the limits ConfigMap's keys as files into
// LIMITS_DIR (as the pod mounts them), checks that every image names a registry path and is
// tagged with the release (VERSION: never untagged, which pulls :latest, never latest or dev),
// and prints "<pool memory limit in bytes> <terminationGracePeriodSeconds> <longest preStop
// sleep in seconds> <the runs emptyDir's sizeLimit in bytes> <the pool's ephemeral-storage
// limit in bytes> <the sizeLimits of the pool's disk-backed emptyDirs> <the agent workspace's
// bytes in the pool's memory (0 without port 8888)> <the pool's CPU limit in millicores (0:
// none)>".
//   node podfacts.mjs RENDERED.yaml LIMITS_DIR VERSION
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const [file, limitsDir, version] = process.argv.slice(2);
const docs = parseAllDocuments(readFileSync(file, "utf8")).map((d) => d.toJS()).filter(Boolean);
const die = (msg) => {
  console.error(`podfacts: ${msg}`);
  process.exit(1);
};

// codebox's own: the one with a pool container (the scale overlay also runs the router)
const podOf = (w) => (w.kind === "Pod" ? w.spec : w.spec?.template?.spec);
const workloads = docs.filter((d) => ["Deployment", "StatefulSet", "Pod"].includes(d.kind) && (podOf(d)?.containers ?? []).some((c) => c.name === "pool"));
if (workloads.length !== 1) die(`expected one Deployment, StatefulSet or Pod with a pool container, found ${workloads.length}`);
const pod = workloads[0].kind === "Pod" ? workloads[0].spec : workloads[0].spec.template.spec;
const pool = pod.containers.find((c) => c.name === "pool");
if (!pool) die("no pool container");

const mounted = (pod.volumes ?? []).find((v) => v.configMap && (pool.volumeMounts ?? []).some((m) => m.name === v.name && m.mountPath === "/etc/codebox/limits"));
if (!mounted) die("the pool container mounts no ConfigMap at /etc/codebox/limits");
const cm = docs.find((d) => d.kind === "ConfigMap" && d.metadata.name === mounted.configMap.name);
if (!cm) die(`the ConfigMap ${mounted.configMap.name} is not in the manifests`);
mkdirSync(limitsDir, { recursive: true });
for (const [k, v] of Object.entries(cm.data ?? {})) writeFileSync(`${limitsDir}/${k}`, String(v));

for (const c of [...(pod.initContainers ?? []), ...pod.containers]) {
  const image = String(c.image ?? "");
  const last = image.slice(image.lastIndexOf("/") + 1);
  const tag = last.includes(":") ? last.slice(last.indexOf(":") + 1) : "";
  if (!tag) die(`container ${c.name}: image '${image}' has no tag, which pulls :latest: it must be tagged with the release ${version} (VERSION)`);
  if (tag === "latest") die(`container ${c.name}: image '${image}' has the moving tag latest: it must be tagged with the release ${version} (VERSION)`);
  if (!image.includes("/")) die(`container ${c.name}: image '${image}' names no registry, so it is pulled from docker.io/library: set the registry in deploy/image/kustomization.yaml`);
  if (tag !== version) die(`container ${c.name}: image ${image} must be tagged with the release ${version} (VERSION), not ${tag}`);
}

const units = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, k: 1e3, M: 1e6, G: 1e9, T: 1e12, "": 1 };
const bytes = (q) => {
  const m = /^([0-9.]+)(Ki|Mi|Gi|Ti|k|M|G|T|)$/.exec(String(q));
  if (!m) die(`cannot read the quantity ${q}`);
  return Math.floor(Number(m[1]) * units[m[2]]);
};
const memory = pool.resources?.limits?.memory;
if (!memory) die("the pool container has no memory limit");

// preStop: the sleep action, or an exec of sleep N
let preStop = 0;
for (const c of pod.containers) {
  const h = c.lifecycle?.preStop;
  if (!h) continue;
  if (h.sleep?.seconds) preStop = Math.max(preStop, h.sleep.seconds);
  const m = /\bsleep\s+([0-9]+)/.exec((h.exec?.command ?? []).join(" "));
  if (m) preStop = Math.max(preStop, Number(m[1]));
}
// disk: the runs volume, and every disk-backed emptyDir the pool writes to
const volume = (name) => (pod.volumes ?? []).find((v) => v.name === name);
const runsMount = (pool.volumeMounts ?? []).find((m) => m.mountPath === "/var/lib/codebox/runs");
const runs = runsMount && volume(runsMount.name);
if (!runs?.emptyDir?.sizeLimit) die("the pool's runs volume (/var/lib/codebox/runs) must be an emptyDir with a sizeLimit");
let disk = 0;
for (const m of pool.volumeMounts ?? []) {
  const v = volume(m.name);
  if (v?.emptyDir && v.emptyDir.medium !== "Memory") {
    if (!v.emptyDir.sizeLimit) die(`the pool's emptyDir ${v.name} needs a sizeLimit`);
    disk += bytes(v.emptyDir.sizeLimit);
  }
}
const storage = pool.resources?.limits?.["ephemeral-storage"];
if (!storage) die("the pool container has no ephemeral-storage limit");
// port 8888's workspace: a tmpfs in the pool's memory (image/codebox-pool-start's default)
const env = (name) => (pool.env ?? []).find((e) => e.name === name)?.value;
const workspace = env("CODEBOX_AGENT_PORT") === "on" ? Number(env("CODEBOX_AGENT_WORKSPACE_BYTES") ?? 268435456) : 0;
// the pool's CPU limit in millicores (0: none), for check-config's oversubscription warning
const cpuLimit = pool.resources?.limits?.cpu;
const millicores = (q) => {
  const m = /^([0-9.]+)(m?)$/.exec(String(q));
  if (!m) die(`cannot read the CPU quantity ${q}`);
  return Math.floor(m[2] ? Number(m[1]) : Number(m[1]) * 1000);
};
console.log(`${bytes(memory)} ${pod.terminationGracePeriodSeconds ?? 30} ${preStop} ${bytes(runs.emptyDir.sizeLimit)} ${bytes(storage)} ${disk} ${workspace} ${cpuLimit ? millicores(cpuLimit) : 0}`);
