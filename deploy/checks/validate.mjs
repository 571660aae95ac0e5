// Schema validation of rendered manifests with kubernetes-models, and a TypeScript file that
// types every object as written, so that tsc's excess-property check catches a misspelled
// field (a JSON schema that tolerates unknown keys would not).
//   node validate.mjs OUT.ts FILE.yaml...   exits 1 on the first invalid document
import { readFileSync, writeFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const [tsOut, ...files] = process.argv.slice(2);
let failed = 0;
const lines = [];
let n = 0;

// groups outside kubernetes-models' own, and the package that types them
const groupPackages = {
  "monitoring.coreos.com": "@kubernetes-models/prometheus-operator",
  "keda.sh": "@kubernetes-models/keda",
};

function modulePath(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : [null, apiVersion];
  if (group && groupPackages[group]) return `${groupPackages[group]}/${group}/${version}/${kind}`;
  return `kubernetes-models/${group ? group + "/" : ""}${version}/${kind}`;
}

for (const file of files) {
  for (const doc of parseAllDocuments(readFileSync(file, "utf8"))) {
    const obj = doc.toJS();
    if (obj == null) continue;
    const where = `${file}: ${obj.kind} ${obj.metadata?.name ?? "?"}`;
    const path = modulePath(obj.apiVersion, obj.kind);
    let mod;
    try {
      mod = await import(path);
    } catch {
      console.error(`${where}: no schema for ${obj.apiVersion} ${obj.kind}`);
      failed++;
      continue;
    }
    try {
      new mod[obj.kind](obj).validate();
    } catch (e) {
      console.error(`${where}: ${e.message}`);
      failed++;
    }
    lines.push(`import type { I${obj.kind} as T${n} } from "${path}";`);
    lines.push(`export const d${n}: T${n} = ${JSON.stringify(obj, null, 2)};`);
    n++;
  }
}
writeFileSync(tsOut, lines.join("\n") + "\n");
if (failed) process.exit(1);
console.log(`validate: ${n} documents match their schemas`);
