// Where a 4 KiB request's CPU goes (issue 32): Trove at its defaults (a development-issuer token
// on every request, one log line at info to /dev/null) under wrk load, run with `node --cpu-prof`,
// then the profile's functions by self time. `node bench/profile-request.js [--case get|head|304|put]
// [--duration 10] [--top 25] [--skip-build]`; the .cpuprofile is kept in a temporary directory.

import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { BODY_4K } from "./payloads.js";
import { buildDist, startTrove } from "./servers.js";
import { wrkAvailable, wrkLoad } from "./wrk.js";

const { values: opts } = parseArgs({
  options: {
    case: { type: "string", default: "get" },
    duration: { type: "string", default: "10" },
    top: { type: "string", default: "25" },
    "skip-build": { type: "boolean", default: false },
  },
});
if (!wrkAvailable()) throw new Error("bench/profile-request.js needs wrk (apt-get install wrk)");
if (!opts["skip-build"]) buildDist();

const RESOURCE = "/resources/v2/data/home/resource-4k.bin";
const profileDir = mkdtempSync(join(tmpdir(), "trove-profile-"));
const server = await startTrove({ logLevel: "info", nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${profileDir}`] });
try {
  const headers = { authorization: server.authorization };
  const put = await fetch(server.url + RESOURCE, { method: "PUT", body: BODY_4K, headers });
  if (put.status !== 201) throw new Error(`setup PUT answered ${put.status}`);
  const request = {
    get: { method: "GET", headers },
    head: { method: "HEAD", headers },
    // The tag the setup PUT answered (Trove's tags are its own): a 304, not a 400 for a malformed tag.
    304: { method: "GET", headers: { ...headers, "if-none-match": put.headers.get("etag") } },
    put: { method: "PUT", headers: { ...headers, "content-type": "application/octet-stream" }, body: BODY_4K },
  }[opts.case];
  if (!request) throw new Error(`--case get, head, 304 or put, not ${opts.case}`);
  const result = await wrkLoad(server.url + RESOURCE, { path: RESOURCE, ...request }, Number(opts.duration), 32);
  console.log(`${opts.case}: ${Math.round(result.rps)} req/s ${result.other}, load average ${loadavg()[0].toFixed(2)}`);
} finally {
  await server.stop();
}

// Self time by function (name, file:line), as a share of the samples that were not idle.
const file = readdirSync(profileDir).find((name) => name.endsWith(".cpuprofile"));
if (!file) throw new Error(`no profile written in ${profileDir}`);
const profile = JSON.parse(readFileSync(join(profileDir, file), "utf8"));
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const self = new Map();
let busy = 0;
for (const id of profile.samples) {
  const { callFrame } = byId.get(id);
  if (callFrame.functionName === "(idle)" || callFrame.functionName === "(program)") continue;
  const where = callFrame.url
    ? `${callFrame.url.replace(/^.*\/(node_modules|dist)\//, "$1/")}:${callFrame.lineNumber + 1}`
    : "";
  const key = `${callFrame.functionName || "(anonymous)"} ${where}`;
  self.set(key, (self.get(key) ?? 0) + 1);
  busy += 1;
}
console.log(`${join(profileDir, file)}: ${busy} busy samples`);
for (const [key, n] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(opts.top))) {
  console.log(`${((n / busy) * 100).toFixed(1).padStart(5)} %  ${key}`);
}
