// codebox's hardening rules for its pod: the restricted Pod Security Standard and more, and
// what a platform team expects around it (namespace, service account, disruption budget,
// probes, storage limits, a NetworkPolicy and an HPA that select and own exactly codebox),
// who may connect (every ingress rule admits selected pods only: never every pod, namespace or
// address; the agent-sandbox pod only the sandbox router), and tenancy: port 8888 is served
// and exposed by the agent-sandbox overlay only.
//   node hardening.mjs [--agent-sandbox] FILE.yaml...
//   node hardening.mjs [--agent-sandbox] --each FILE.yaml...   (each file alone: FILE.yaml.hardening)
// prints every violation, exits 1 if there is one. --agent-sandbox: the files are the
// agent-sandbox overlay's (one tenant per pod), which must serve port 8888; its pod is the one
// the controller makes from the SandboxTemplate (agent-sandbox.mjs), held to the same rules as
// the Deployment's but the disruption budget and the replicas (the controller owns both).
import { readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

// the Pod Security Standards' version the namespaces pin: the minor of the kubectl the
// manifests are rendered and checked with (deploy/tools: v1.32.3)
const PSA_VERSION = "v1.32";

// check(DOCS, AGENT_SANDBOX): the violations of one set of manifests, and its workloads' count
function check(docs, agentSandbox) {
  const problems = [];
  const bad = (what, why) => problems.push(`${what}: ${why}`);
  const emptySel = (sel) => !sel || Object.keys(sel.matchLabels ?? {}).length + (sel.matchExpressions ?? []).length === 0;
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
    // the service's pod, as a platform team runs it: the Deployment's, and the agent-sandbox
    // controller's Pod (whose replicas and disruptions the controller owns: see below)
    for (const c of pod.containers ?? []) {
      const cn = `${name} container ${c.name}`;
      for (const kind of ["requests", "limits"])
        if (!c.resources?.[kind]?.["ephemeral-storage"]) bad(cn, `resources.${kind}.ephemeral-storage must be set`);
      for (const p of ["livenessProbe", "readinessProbe", "startupProbe"])
        if (c[p] && c[p].timeoutSeconds === undefined) bad(cn, `${p}.timeoutSeconds must be set on purpose`);
    }
    const pool = (pod.containers ?? []).find((c) => c.name === "pool");
    if (pool) {
      for (const p of ["livenessProbe", "startupProbe"])
        if (!pool[p]?.exec?.command?.length) bad(`${name} container pool`, `an exec ${p} (the pool answers on its socket) is missing`);
    }
    if (!pod.serviceAccountName || pod.serviceAccountName === "default") bad(name, "serviceAccountName must name codebox's own account");
    else if (!docs.some((d) => d.kind === "ServiceAccount" && d.metadata?.name === pod.serviceAccountName))
      bad(name, `the ServiceAccount ${pod.serviceAccountName} is not in the manifests`);
    const labels = w.kind === "Pod" ? w.metadata?.labels ?? {} : w.spec?.template?.metadata?.labels ?? {};
    const selects = (sel) => sel && Object.keys(sel.matchLabels ?? {}).length + (sel.matchExpressions ?? []).length > 0 &&
      Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
    const ns = w.metadata?.namespace;
    const policies = docs.filter((d) => d.kind === "NetworkPolicy" && d.metadata?.namespace === ns);
    // codebox's pods (those with a pool container) reach nothing; the scale overlay's router
    // reaches only the peers its egress rules name (codebox's pods, the cluster's DNS)
    const isCodebox = (pod.containers ?? []).some((c) => c.name === "pool");
    if (isCodebox) {
      if (!policies.some((p) => selects(p.spec?.podSelector) && (p.spec?.policyTypes ?? []).includes("Egress") && (p.spec?.egress ?? []).length === 0))
        bad(name, "no NetworkPolicy denies all egress of codebox's pods");
    } else {
      const eg = policies.filter((p) => selects(p.spec?.podSelector) && (p.spec?.policyTypes ?? []).includes("Egress"));
      if (!eg.length) bad(name, "no NetworkPolicy restricts its egress (policyTypes: Egress)");
      for (const p of eg)
        (p.spec?.egress ?? []).forEach((rule, i) => {
          if (!(rule.to ?? []).length || (rule.to ?? []).some((t) => (t.ipBlock && /\/0$/.test(t.ipBlock.cidr ?? "")) || (!t.ipBlock && emptySel(t.podSelector) && emptySel(t.namespaceSelector))))
            bad(`NetworkPolicy ${p.metadata?.name}`, `egress rule ${i + 1} must name the pods it reaches, not every destination`);
        });
    }
    if (!policies.some((p) => selects(p.spec?.podSelector) && (p.spec?.policyTypes ?? []).includes("Ingress")))
      bad(name, "no NetworkPolicy restricts the ingress of codebox's pods (policyTypes: Ingress)");
    const namespace = docs.find((d) => d.kind === "Namespace" && d.metadata?.name === ns);
    const psa = namespace?.metadata?.labels ?? {};
    if (!["enforce", "audit", "warn"].every((m) => psa[`pod-security.kubernetes.io/${m}`] === "restricted"))
      bad(name, `its namespace (${ns ?? "none"}) must be in the manifests with Pod Security restricted enforce, audit and warn labels`);
    // pinned: `latest` (or no version, which means latest) changes what restricted means when
    // the cluster is upgraded; the version is the Kubernetes the manifests are checked against
    for (const m of ["enforce", "audit", "warn"])
      if (psa[`pod-security.kubernetes.io/${m}`] && psa[`pod-security.kubernetes.io/${m}-version`] !== PSA_VERSION)
        bad(name, `its namespace's pod-security.kubernetes.io/${m}-version must be pinned to ${PSA_VERSION} (the Kubernetes of deploy/tools' kubectl), not ${psa[`pod-security.kubernetes.io/${m}-version`] ?? "unset (latest)"}`);
    if (w.kind !== "Deployment" && w.kind !== "StatefulSet") continue;
    if (!docs.some((d) => d.kind === "PodDisruptionBudget" && selects(d.spec?.selector))) bad(name, "no PodDisruptionBudget selects its pods");
    // an HPA, or KEDA's ScaledObject (which makes one)
    const hpa = docs.find((d) => ["HorizontalPodAutoscaler", "ScaledObject"].includes(d.kind) && d.spec?.scaleTargetRef?.name === w.metadata?.name);
    if (hpa && w.spec?.replicas !== undefined) bad(name, "replicas must not be set when an HPA scales it (the two would fight at every apply)");
    if ((hpa || (w.spec?.replicas ?? 1) > 1) && !(pod.topologySpreadConstraints ?? []).some((t) => t.topologyKey === "kubernetes.io/hostname"))
      bad(name, "several replicas need a topology spread over kubernetes.io/hostname");
  }
  if (!docs.some((d) => d.kind === "Service")) bad("manifests", "no Service");
  // every NetworkPolicy selects pods of a workload of the manifests, never every pod of its namespace
  for (const p of docs.filter((d) => d.kind === "NetworkPolicy")) {
    const sel = p.spec?.podSelector;
    const hits = workloads.some((w) => {
      const labels = w.kind === "Pod" ? w.metadata?.labels ?? {} : w.spec?.template?.metadata?.labels ?? {};
      return w.metadata?.namespace === p.metadata?.namespace && !emptySel(sel) && Object.entries(sel.matchLabels ?? {}).every(([k, v]) => labels[k] === v);
    });
    if (!hits) bad(`NetworkPolicy ${p.metadata?.name}`, "podSelector must select codebox's pods (or its router's), not every pod of the namespace");
  }

  // Who may connect. Every ingress rule of every shipped NetworkPolicy names its sources, and
  // none of them is everyone: a rule without `from` admits every pod and address; a peer with
  // an empty (or no) podSelector and no namespaceSelector admits every pod of the namespace;
  // with an empty namespaceSelector, every pod of the cluster; an ipBlock of /0, everything.
  // Clients from other namespaces are admitted by a label on their namespace, which the
  // cluster's operator sets (tenants cannot patch a Namespace): an empty namespaceSelector with
  // a podSelector admits a pod label, which any tenant can put on its own pods, so it is refused
  // too. A peer with a podSelector alone selects pods of codebox's own namespace. The
  // agent-sandbox pod admits the sandbox router only (app: sandbox-router in its namespace, as
  // agent-sandbox's own secure default does): its clients reach it through the router, which
  // routes each request to its claim's sandbox.
  for (const d of docs.filter((x) => x.kind === "NetworkPolicy")) {
    const pn = `NetworkPolicy ${d.metadata?.name}`;
    (d.spec?.ingress ?? []).forEach((rule, i) => {
      const from = rule.from ?? [];
      if (from.length === 0) return bad(pn, `ingress rule ${i + 1} has no from: it admits every pod and address`);
      for (const peer of from) {
        if (peer.ipBlock) {
          if (/\/0$/.test(peer.ipBlock.cidr ?? "")) bad(pn, `ingress rule ${i + 1} admits ipBlock ${peer.ipBlock.cidr}: every address, every pod`);
          continue;
        }
        if (emptySel(peer.podSelector) && !peer.namespaceSelector) bad(pn, `ingress rule ${i + 1} admits every pod of its namespace (an empty podSelector)`);
        else if (emptySel(peer.podSelector) && emptySel(peer.namespaceSelector)) bad(pn, `ingress rule ${i + 1} admits every pod of every namespace (an empty namespaceSelector)`);
        else if (peer.namespaceSelector && emptySel(peer.namespaceSelector))
          bad(pn, `ingress rule ${i + 1} admits a pod label in every namespace (an empty namespaceSelector): any tenant can label its own pods; admit client namespaces by a namespace label`);
        if (agentSandbox && (peer.podSelector?.matchLabels?.app !== "sandbox-router" || peer.namespaceSelector))
          bad(pn, `ingress rule ${i + 1}: the agent-sandbox pod admits the sandbox router only (podSelector app: sandbox-router, in its namespace), not ${JSON.stringify(peer)}`);
      }
    });
  }

  // Tenancy. Port 8888 (the agent-sandbox protocol) serves one tenant: every client of it shares
  // the instance's workspace. Only the agent-sandbox overlay's pod, one instance per tenant,
  // serves it (CODEBOX_AGENT_PORT=on in both containers: image/codebox-config keeps nginx's
  // server for it, codebox-pool-start the workspace) and exposes it. Every other deployment
  // serves many tenants: nginx must not listen on it, and no containerPort, probe, Service or
  // NetworkPolicy may name it.
  const AGENT_PORT = 8888;
  const notHere = "port 8888 serves one tenant's workspace: only the agent-sandbox overlay may serve or expose it";
  const namedPorts = new Map(); // a container port's name -> its number, over every pod
  for (const w of workloads) {
    const pod = w.kind === "Pod" ? w.spec : w.spec?.template?.spec;
    for (const c of pod?.containers ?? []) for (const p of c.ports ?? []) if (p.name) namedPorts.set(p.name, p.containerPort);
  }
  const isAgentPort = (port) => port === AGENT_PORT || String(port) === String(AGENT_PORT) || namedPorts.get(port) === AGENT_PORT;
  for (const w of workloads) {
    const name = `${w.kind} ${w.metadata?.name}`;
    const pod = w.kind === "Pod" ? w.spec : w.spec?.template?.spec;
    const settings = new Set();
    for (const c of [...(pod?.initContainers ?? []), ...(pod?.containers ?? [])]) {
      const cn = `${name} container ${c.name}`;
      const env = (c.env ?? []).find((e) => e.name === "CODEBOX_AGENT_PORT");
      if (env?.valueFrom) bad(cn, "CODEBOX_AGENT_PORT must be a literal on or off, not valueFrom");
      const value = env?.value ?? "off";
      if (value !== "on" && value !== "off") bad(cn, `CODEBOX_AGENT_PORT must be on or off, not '${value}'`);
      if (pod?.containers?.includes(c)) settings.add(value);
      if (!agentSandbox && value === "on") bad(cn, `CODEBOX_AGENT_PORT=on turns port 8888 on: ${notHere}`);
      if (!agentSandbox)
        for (const p of c.ports ?? []) if (p.containerPort === AGENT_PORT) bad(cn, `containerPort ${AGENT_PORT}: ${notHere}`);
      for (const probe of ["livenessProbe", "readinessProbe", "startupProbe"]) {
        const port = c[probe]?.httpGet?.port ?? c[probe]?.tcpSocket?.port;
        if (!agentSandbox && port !== undefined && isAgentPort(port)) bad(cn, `${probe} on port ${port}: ${notHere}`);
      }
    }
    // nginx renders its config and the pool sizes itself from the same setting
    if (settings.size > 1) bad(name, "its containers must agree on CODEBOX_AGENT_PORT (nginx serves 8888 with the workers and the workspace the pool starts for it)");
    if (agentSandbox) {
      if (!settings.has("on") || settings.size > 1) bad(name, "the agent-sandbox pod serves port 8888: CODEBOX_AGENT_PORT must be on in every container");
      if (!(pod?.containers ?? []).some((c) => (c.ports ?? []).some((p) => p.containerPort === AGENT_PORT)))
        bad(name, `the agent-sandbox pod must declare containerPort ${AGENT_PORT}`);
    }
  }
  if (!agentSandbox) {
    for (const d of docs.filter((x) => x.kind === "Service"))
      for (const p of d.spec?.ports ?? [])
        if (isAgentPort(p.port) || isAgentPort(p.targetPort ?? p.port)) bad(`Service ${d.metadata?.name}`, `port ${p.port} (target ${p.targetPort ?? p.port}): ${notHere}`);
    for (const d of docs.filter((x) => x.kind === "NetworkPolicy"))
      for (const rule of d.spec?.ingress ?? []) {
        if (!(rule.ports ?? []).length) bad(`NetworkPolicy ${d.metadata?.name}`, `an ingress rule without ports admits every port, 8888 too: ${notHere}`);
        for (const p of rule.ports ?? [])
          if (isAgentPort(p.port) || (p.endPort !== undefined && p.port <= AGENT_PORT && AGENT_PORT <= p.endPort))
            bad(`NetworkPolicy ${d.metadata?.name}`, `ingress to port ${p.port}${p.endPort ? `-${p.endPort}` : ""}: ${notHere}`);
      }
  }
  return { problems, workloads: workloads.length };
}

// the documents of FILES, as one set of manifests
const load = (files) =>
  files.flatMap((f) => parseAllDocuments(readFileSync(f, "utf8")).map((d) => d.toJS()).filter(Boolean));

const args = process.argv.slice(2);
const agentSandbox = args[0] === "--agent-sandbox";
if (agentSandbox) args.shift();
if (args[0] === "--each") {
  // every file on its own, for one node start (check-deploy's fixtures): FILE.hardening holds
  // what the check of FILE alone prints on stderr, empty when FILE passes
  for (const file of args.slice(1)) {
    let lines;
    try {
      lines = check(load([file]), agentSandbox).problems.map((p) => `hardening: ${p}\n`);
    } catch (e) {
      lines = [`hardening: ${file}: ${e.message}\n`];
    }
    writeFileSync(`${file}.hardening`, lines.join(""));
  }
} else {
  const { problems, workloads } = check(load(args), agentSandbox);
  for (const p of problems) console.error(`hardening: ${p}`);
  if (problems.length) process.exit(1);
  console.log(`hardening: ${workloads} workload(s) pass`);
}
