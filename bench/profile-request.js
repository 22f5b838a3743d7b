// Where a 4 KiB request's CPU goes (issue 32): Trove at its defaults (a development-issuer token
// on every request, one log line at info to /dev/null) under wrk load, run with `node --cpu-prof`,
// then the profile's functions by self time. `node bench/profile-request.js [--case get|head|304|put]
// [--duration 10] [--top 25] [--skip-build] [--perf]`; the .cpuprofile is kept in a temporary directory.
//
// V8's sampler ticks on wall time: a thread that the kernel puts off the CPU inside a system call
// (the answer's `writev`, which wakes the client) is counted as running in it. `--perf` records
// on-CPU time instead (`perf record -e cpu-clock`, which works without hardware counters, with
// node's `--perf-basic-prof-only-functions` to name JavaScript frames) and prints the CPU per
// answer, the request path's parts (session 14, docs/benchmarks.md) and the functions by self time.

import { execFileSync, spawn } from "node:child_process";
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
    perf: { type: "boolean", default: false },
  },
});
if (!wrkAvailable()) throw new Error("bench/profile-request.js needs wrk (apt-get install wrk)");
if (!opts["skip-build"]) buildDist();

const SOCKET_WRITES = new Set(["__GI___writev", "__writev", "__GI___libc_write", "__libc_write", "__write"]);

/** The parts of the request path a sample's stack belongs to, the first that matches. */
const PARTS = [
  ["other threads (GC helpers, the log's writes)", (sample) => !sample.main],
  // On the main thread every write(v) is a socket's (the log's are the thread pool's): one writev with a
  // body, one write for a head alone (HEAD, 304).
  ["the answer's socket write (writev, write)", (sample) => sample.frames.some((f) => SOCKET_WRITES.has(f))],
  ["the request's socket read", (sample) => sample.frames.some((f) => f === "read" || f === "__GI___libc_read")],
  ["the SQLite point read (getStoreNode)", (sample) => sample.frames.some((f) => f.includes("getStoreNode"))],
  ["the request log line", (sample) => sample.frames.some((f) => /request-line|pino\/|sonic-boom|node:fs:/.test(f))],
  ["the token (authenticate)", (sample) => sample.frames.some((f) => f.includes("'authenticate "))],
  ["the response head (writeHead)", (sample) => sample.frames.some((f) => f.includes("writeHead"))],
  ["garbage collection (main thread)", (sample) => sample.frames.some((f) => /CollectGarbage|Scavenge/.test(f))],
];

const RESOURCE = "/resources/v2/data/home/resource-4k.bin";
const profileDir = mkdtempSync(join(tmpdir(), "trove-profile-"));
const perfData = join(profileDir, "perf.data");
const server = await startTrove({
  logLevel: "info",
  nodeArgs: opts.perf ? ["--perf-basic-prof-only-functions"] : ["--cpu-prof", `--cpu-prof-dir=${profileDir}`],
});
let answers = 0;
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
  let recorded = Promise.resolve();
  if (opts.perf) {
    // Warm first (the JIT's work is not the request path's), then record as long as the load runs.
    await wrkLoad(server.url + RESOURCE, { path: RESOURCE, ...request }, 2, 32);
    const args = ["record", "-e", "cpu-clock", "-F", "2000", "-g", "-p", String(server.pid), "-o", perfData];
    const perf = spawn("perf", [...args, "--", "sleep", opts.duration], { stdio: "ignore" });
    recorded = new Promise((resolve) => perf.once("exit", resolve));
  }
  const result = await wrkLoad(server.url + RESOURCE, { path: RESOURCE, ...request }, Number(opts.duration), 32);
  await recorded;
  answers = result.rps * Number(opts.duration);
  console.log(`${opts.case}: ${Math.round(result.rps)} req/s ${result.other}, load average ${loadavg()[0].toFixed(2)}`);
} finally {
  await server.stop();
}

if (opts.perf) {
  printPerf(
    execFileSync("perf", ["script", "-i", perfData], {
      encoding: "utf8",
      maxBuffer: 1 << 30,
      stdio: ["ignore", "pipe", "ignore"],
    }),
  );
  process.exit(0);
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

/** On-CPU time from `perf script`: the CPU per answer, the parts of the path, the functions by self time. */
function printPerf(text) {
  const samples = [];
  for (const block of text.split("\n\n")) {
    const lines = block.split("\n").filter(Boolean);
    if (lines.length < 2) continue;
    const frames = lines
      .slice(1)
      .map((line) => /^\s*[0-9a-f]+\s+(.*?)(\+0x[0-9a-f]+)?\s+\(.*\)$/.exec(line)?.[1] ?? "?");
    samples.push({ main: !/^\S*(V8Worker|libuv-worker)/.test(lines[0]), frames });
  }
  // -F 2000: each sample stands for 500 µs of CPU.
  console.log(
    `perf (cpu-clock): ${samples.length} samples, ${((samples.length * 500) / answers).toFixed(1)} µs of CPU per answer`,
  );
  const parts = new Map();
  const self = new Map();
  for (const sample of samples) {
    const part = PARTS.find(([, is]) => is(sample))?.[0];
    const js = sample.frames.find((f) => f.startsWith("JS:"));
    const rest =
      js === undefined
        ? "native, no JavaScript frame"
        : /\/dist\//.test(js)
          ? "Trove's JavaScript"
          : /node_modules/.test(js)
            ? "dependencies' JavaScript"
            : "Node's JavaScript (HTTP, streams, events)";
    parts.set(part ?? rest, (parts.get(part ?? rest) ?? 0) + 1);
    // Self time: the innermost JavaScript function (with the builtins and runtime it called), else the native leaf.
    const key = (js ?? sample.frames[0] ?? "?").replace(/^JS:[*+~]?'?/, "").replace(/file:\/\/\/.*?\/dist\//, "dist/");
    self.set(key, (self.get(key) ?? 0) + 1);
  }
  for (const [part, n] of [...parts].sort((a, b) => b[1] - a[1])) {
    console.log(
      `${((n / samples.length) * 100).toFixed(1).padStart(5)} %  ${((n * 500) / answers).toFixed(1).padStart(5)} µs  ${part}`,
    );
  }
  console.log("functions by self time (the innermost JavaScript frame, else the native one):");
  for (const [key, n] of [...self].sort((a, b) => b[1] - a[1]).slice(0, Number(opts.top))) {
    console.log(`${((n / samples.length) * 100).toFixed(1).padStart(5)} %  ${key.slice(0, 120)}`);
  }
}
