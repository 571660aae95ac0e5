// Fixtures that must fail: each is the rendered kind manifest with one hardening rule broken
// (or one field misspelled), or, with --agent-sandbox, the rendered agent-sandbox overlay (its
// SandboxTemplate, before the controller's pod is derived) with one rule broken. Writes each
// to OUTDIR/<name>.yaml and prints "<name>\t<expected message>" lines for check-deploy.sh,
// which runs the checks on them and expects failures (agent-sandbox fixtures are named as-*).
//   node fixtures.mjs [--agent-sandbox] RENDERED.yaml OUTDIR
import { readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments, stringify } from "yaml";

const args = process.argv.slice(2);
const agentSandbox = args[0] === "--agent-sandbox";
if (agentSandbox) args.shift();
const [rendered, outdir] = args;
const original = parseAllDocuments(readFileSync(rendered, "utf8")).map((d) => d.toJS()).filter(Boolean);
const template = (docs) => docs.find((d) => d.kind === "SandboxTemplate");
const pod = (docs) => (agentSandbox ? template(docs).spec.podTemplate.spec : docs.find((d) => d.kind === "Deployment").spec.template.spec);
const pool = (docs) => pod(docs).containers.find((c) => c.name === "pool");
const policy = (docs) => docs.find((x) => x.kind === "NetworkPolicy");

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
  ["select-all", "podSelector must select codebox's pods", (d) => { d.find((x) => x.kind === "NetworkPolicy").spec.podSelector = {}; }],
  ["no-psa", "Pod Security restricted enforce, audit and warn labels", (d) => { delete d.find((x) => x.kind === "Namespace").metadata.labels["pod-security.kubernetes.io/enforce"]; }],
  ["psa-latest", "pod-security.kubernetes.io/enforce-version must be pinned to v1.32", (d) => { d.find((x) => x.kind === "Namespace").metadata.labels["pod-security.kubernetes.io/enforce-version"] = "latest"; }],
  ["default-account", "serviceAccountName must name codebox's own account", (d) => { delete pod(d).serviceAccountName; }],
  ["no-pdb", "no PodDisruptionBudget selects its pods", (d) => { d.splice(d.findIndex((x) => x.kind === "PodDisruptionBudget"), 1); }],
  ["hpa-fights", "replicas must not be set when an HPA scales it", (d) => {
    d.push({ apiVersion: "autoscaling/v2", kind: "HorizontalPodAutoscaler", metadata: { name: "codebox", namespace: "codebox" },
      spec: { scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "codebox" }, minReplicas: 3, maxReplicas: 10 } });
  }],
  ["no-spread", "several replicas need a topology spread", (d) => { d.find((x) => x.kind === "Deployment").spec.replicas = 3; }],
  ["no-pool-probe", "an exec startupProbe (the pool answers on its socket) is missing", (d) => { delete pool(d).startupProbe; }],
  ["probe-timeout", "livenessProbe.timeoutSeconds must be set on purpose", (d) => { delete pool(d).livenessProbe.timeoutSeconds; }],
  ["no-storage-limit", "resources.limits.ephemeral-storage must be set", (d) => { delete pool(d).resources.limits["ephemeral-storage"]; }],
  // tenancy: port 8888 (one tenant's workspace) outside the agent-sandbox overlay
  ["agent-port-on", "CODEBOX_AGENT_PORT=on turns port 8888 on: port 8888 serves one tenant's workspace: only the agent-sandbox overlay may serve or expose it", (d) => {
    for (const c of pod(d).containers) c.env = [...(c.env ?? []).filter((e) => e.name !== "CODEBOX_AGENT_PORT"), { name: "CODEBOX_AGENT_PORT", value: "on" }];
  }],
  ["agent-port-half", "its containers must agree on CODEBOX_AGENT_PORT", (d) => {
    pool(d).env = [...(pool(d).env ?? []).filter((e) => e.name !== "CODEBOX_AGENT_PORT"), { name: "CODEBOX_AGENT_PORT", value: "on" }];
  }],
  ["agent-port-container", "containerPort 8888: port 8888 serves one tenant's workspace", (d) => { pod(d).containers.find((c) => c.name === "nginx").ports.push({ name: "agent", containerPort: 8888 }); }],
  ["agent-port-service", "Service codebox: port 8888 (target 8888): port 8888 serves one tenant's workspace", (d) => { d.find((x) => x.kind === "Service").spec.ports.push({ name: "agent", port: 8888, targetPort: 8888 }); }],
  ["agent-port-policy", "NetworkPolicy codebox: ingress to port 8888: port 8888 serves one tenant's workspace", (d) => { d.find((x) => x.kind === "NetworkPolicy").spec.ingress[0].ports.push({ protocol: "TCP", port: 8888 }); }],
  ["agent-port-any", "an ingress rule without ports admits every port, 8888 too", (d) => { delete d.find((x) => x.kind === "NetworkPolicy").spec.ingress[0].ports; }],
  // the pod as a whole (check-deploy.sh's pod_limits): limits, memory, grace, release tag
  ["pod-memory", "more than the memory limit", (d) => { pool(d).resources.limits.memory = "2Gi"; }],
  ["pod-bad-limit", "CODEBOX_MAX_PROCESSES must be a positive integer", (d) => { d.find((x) => x.kind === "ConfigMap").data.CODEBOX_MAX_PROCESSES = "lots"; }],
  ["pod-grace", "terminationGracePeriodSeconds (30) must cover the pool's drain", (d) => { pod(d).terminationGracePeriodSeconds = 30; }],
  ["pod-timeout-grace", "terminationGracePeriodSeconds (60) must cover the pool's drain (136 s)", (d) => { d.find((x) => x.kind === "ConfigMap").data.CODEBOX_EXECUTION_TIMEOUT_SECONDS = "120"; }],
  ["pod-runs-disk", "must hold CODEBOX_MAX_CONCURRENT_EXECUTIONS (8) * CODEBOX_DISK_BYTES (64 MiB)", (d) => { pod(d).volumes.find((v) => v.name === "runs").emptyDir.sizeLimit = "256Mi"; }],
  ["pod-storage", "ephemeral-storage limit (512 MiB) must cover its emptyDirs' sizeLimits (1088 MiB)", (d) => { pool(d).resources.limits["ephemeral-storage"] = "512Mi"; }],
  ["pod-dev-tag", "must be tagged with the release", (d) => { pool(d).image = "localhost/codebox:dev"; }],
  // images: never untagged (docker.io/library/codebox:latest), never latest, always a registry
  ["pod-untagged", "has no tag, which pulls :latest", (d) => { for (const c of pod(d).containers) c.image = "codebox"; }],
  ["pod-latest", "has the moving tag latest", (d) => { pool(d).image = "localhost/codebox:latest"; }],
  ["pod-no-registry", "names no registry", (d) => { pool(d).image = "codebox:0.1.0"; }],
  // who may connect: no ingress rule admits every pod, namespace or address
  ["policy-no-from", "ingress rule 1 has no from: it admits every pod and address", (d) => { delete policy(d).spec.ingress[0].from; }],
  ["policy-all-pods", "ingress rule 1 admits every pod of its namespace", (d) => { policy(d).spec.ingress[0].from = [{ podSelector: {} }]; }],
  ["policy-all-namespaces", "ingress rule 1 admits every pod of every namespace", (d) => { policy(d).spec.ingress[0].from = [{ namespaceSelector: {} }]; }],
  // the base's policy as it was: a pod label in any namespace, which any tenant can set
  ["policy-pod-label", "ingress rule 1 admits a pod label in every namespace", (d) => {
    policy(d).spec.ingress[0].from = [{ namespaceSelector: {}, podSelector: { matchExpressions: [{ key: "codebox.dev/client", operator: "In", values: ["true"] }] } }];
  }],
  ["policy-any-address", "ingress rule 1 admits ipBlock 0.0.0.0/0", (d) => { policy(d).spec.ingress[0].from.push({ ipBlock: { cidr: "0.0.0.0/0" } }); }],
  ["policy-no-ingress-type", "no NetworkPolicy restricts the ingress of codebox's pods", (d) => { policy(d).spec.policyTypes = ["Egress"]; }],
  // a misspelled field: caught by the TypeScript excess-property check, not by hardening.mjs
  ["typo", "does not exist in type", (d) => { const c = pool(d); c.securityContex = c.securityContext; }],
];

// the agent-sandbox overlay as shipped at first (v1alpha1, no limits ConfigMap, no probes of
// the pool, no storage limits, no namespace, open to every pod) broke each of these
const agentFixtures = [
  ["as-v1alpha1", "extensions.agents.x-k8s.io/v1alpha1 is deprecated", (d) => { template(d).apiVersion = "extensions.agents.x-k8s.io/v1alpha1"; }],
  ["as-pool-v1alpha1", "is not the storage version of sandboxwarmpools", (d) => { d.find((x) => x.kind === "SandboxWarmPool").apiVersion = "extensions.agents.x-k8s.io/v1alpha1"; }],
  ["as-unknown-field", "spec.networkPolicy.ingres: is not a field of the CRD's schema", (d) => { const np = template(d).spec.networkPolicy; np.ingres = np.ingress; delete np.ingress; }],
  ["as-bad-enum", "must be one of Managed, Unmanaged", (d) => { template(d).spec.networkPolicyManagement = "Sometimes"; }],
  ["as-bad-type", "spec.service: must be a boolean", (d) => { template(d).spec.service = "yes"; }],
  ["as-dangling-pool", "which the overlay does not define", (d) => { d.find((x) => x.kind === "SandboxWarmPool").spec.sandboxTemplateRef.name = "other"; }],
  ["as-no-limits", "mounts no ConfigMap at /etc/codebox/limits", (d) => { for (const c of pod(d).containers) c.volumeMounts = c.volumeMounts.filter((m) => m.name !== "limits"); }],
  ["as-memory", "leave nothing of the pool's memory limit", (d) => { pool(d).resources.limits.memory = "2Gi"; }],
  ["as-memory-runs", "more than the memory limit", (d) => { pool(d).resources.limits.memory = "4Gi"; }],
  ["as-grace", "must cover the pool's drain", (d) => { pod(d).terminationGracePeriodSeconds = 30; }],
  ["as-storage", "must cover its emptyDirs' sizeLimits", (d) => { pool(d).resources.limits["ephemeral-storage"] = "512Mi"; }],
  ["as-no-pool-probe", "an exec startupProbe (the pool answers on its socket) is missing", (d) => { delete pool(d).startupProbe; }],
  ["as-probe-timeout", "readinessProbe.timeoutSeconds must be set on purpose", (d) => { delete pod(d).containers[0].readinessProbe.timeoutSeconds; }],
  ["as-no-namespace", "Pod Security restricted enforce, audit and warn labels", (d) => { d.splice(d.findIndex((x) => x.kind === "Namespace"), 1); }],
  ["as-open-policy", "admits every pod of its namespace", (d) => { template(d).spec.networkPolicy.ingress[0].from = [{ podSelector: {} }]; }],
  ["as-not-router", "the agent-sandbox pod admits the sandbox router only", (d) => { template(d).spec.networkPolicy.ingress[0].from[0].podSelector.matchLabels = { "codebox.dev/client": "true" }; }],
  ["as-dev-tag", "must be tagged with the release", (d) => { pool(d).image = "localhost/codebox:dev"; }],
];

for (const [name, expect, mutate] of agentSandbox ? agentFixtures : fixtures) {
  const docs = structuredClone(original);
  mutate(docs);
  writeFileSync(`${outdir}/${name}.yaml`, docs.map((d) => stringify(d)).join("---\n"));
  console.log(`${name}\t${expect}`);
}
