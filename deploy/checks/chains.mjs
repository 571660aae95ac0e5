// Runs chains of this directory's checks in one node start (each start costs some 0.4 s of
// CPU, and check-deploy.sh has some 130 of them to make). A chain is steps, each a script of
// this directory and its arguments, run in order as `node SCRIPT ARGS... && node ...` would:
// the first that fails ends its chain. Each step is the script evaluated anew (its own module
// instance: nothing of an earlier step's state), with process.argv as its own start would
// have it; what it prints is kept, and process.exit() ends the step with that status.
//   node chains.mjs JOBS.jsonl
// JOBS.jsonl: one chain a line, {"out": PREFIX, "steps": [["validate.mjs", ARG...], ...]};
// writes PREFIX.status (the failed step's exit status, 0 when every step passed), PREFIX.err
// and PREFIX.out (what the chain's steps printed on stderr and stdout) and PREFIX.last (what
// the last step that ran printed on stdout: the one that failed, if one did).
import { readFileSync, writeFileSync } from "node:fs";
import { format } from "node:util";

class Exit extends Error {
  constructor(status) {
    super(`exit ${status}`);
    this.status = status;
  }
}

const [jobsFile] = process.argv.slice(2);
if (!jobsFile) {
  console.error("usage: node chains.mjs JOBS.jsonl");
  process.exit(2);
}
const jobs = readFileSync(jobsFile, "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
const argv0 = process.argv.slice(0, 1);
const realExit = process.exit.bind(process);
const realLog = console.log;
const realError = console.error;
let out = [];
let err = [];
process.exit = (status) => {
  throw new Exit(status ?? 0);
};
console.log = (...a) => out.push(format(...a) + "\n");
console.error = (...a) => err.push(format(...a) + "\n");

let n = 0;
for (const job of jobs) {
  let status = 0;
  const errs = [];
  const outs = [];
  for (const [script, ...args] of job.steps) {
    out = [];
    err = [];
    process.argv = [...argv0, new URL(script, import.meta.url).pathname, ...args];
    try {
      await import(`${new URL(script, import.meta.url).href}?chain=${n++}`);
    } catch (e) {
      if (e instanceof Exit) status = e.status;
      else {
        // an uncaught error: node prints it and exits 1
        err.push(`${e?.stack ?? e}\n`);
        status = 1;
      }
    }
    errs.push(...err);
    outs.push(...out);
    if (status !== 0) break;
  }
  writeFileSync(`${job.out}.status`, `${status}\n`);
  writeFileSync(`${job.out}.err`, errs.join(""));
  writeFileSync(`${job.out}.out`, outs.join(""));
  writeFileSync(`${job.out}.last`, out.join(""));
}
console.log = realLog;
console.error = realError;
process.exit = realExit;
