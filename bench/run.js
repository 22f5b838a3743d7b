// Request benchmarks: GET, PUT and conditional GET (304) of a 4 KiB resource,
// against Trove (logging off, and logging at info to /dev/null) and against a
// bare node:http baseline measured in the same run; then the 1 GiB streaming
// benchmark (bench/stream-1g.js). `npm run bench [-- --duration 10 --connections 32]`.

import { cpus } from "node:os";
import { parseArgs } from "node:util";
import autocannon from "autocannon";
import { BODY_4K, ETAG_4K } from "./payloads.js";
import { buildDist, startBaseline, startTrove } from "./servers.js";
import { runStream } from "./stream-1g.js";

const { values: opts } = parseArgs({
  options: {
    duration: { type: "string", default: "10" },
    warmup: { type: "string", default: "3" },
    connections: { type: "string", default: "32" },
    only: { type: "string" },
    "skip-build": { type: "boolean", default: false },
    "stream-size-mib": { type: "string", default: "1024" },
  },
});
const duration = Number(opts.duration);
const warmup = Number(opts.warmup);
const connections = Number(opts.connections);

const RESOURCE = "/resources/v2/data/home/resource-4k.bin";
const PUT_TARGET = "/resources/v2/data/home/put-4k.bin";

/** One autocannon run; autocannon takes the path from the URL, not from a `path` option. */
function load(base, { path, ...request }, seconds) {
  return autocannon({ url: base + path, connections, pipelining: 1, duration: seconds, ...request });
}

/** Responses with an expected status per second, with what went wrong besides. */
function summarize(result, expected) {
  let ok = 0;
  const other = [];
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) {
    if (expected.includes(Number(code))) ok += count;
    else other.push(`${count}x${code}`);
  }
  if (result.errors) other.push(`${result.errors} errors`);
  if (result.timeouts) other.push(`${result.timeouts} timeouts`);
  return { rps: ok / result.duration, p50: result.latency.p50, p99: result.latency.p99, other: other.join(" ") };
}

async function prepareTrove(server) {
  const put = await fetch(server.url + RESOURCE, { method: "PUT", body: BODY_4K });
  if (put.status !== 201) throw new Error(`setup PUT answered ${put.status}: ${await put.text()}`);
  const again = await fetch(server.url + PUT_TARGET, { method: "PUT", body: BODY_4K });
  if (again.status !== 201) throw new Error(`setup PUT answered ${again.status}`);
  return { ...server, get: RESOURCE, put: PUT_TARGET, etag: put.headers.get("etag") };
}

const CASES = [
  { name: "GET 4 KiB", expected: [200], request: (t) => ({ path: t.get }) },
  {
    name: "PUT 4 KiB",
    expected: [200, 201],
    request: (t) => ({
      path: t.put,
      method: "PUT",
      body: BODY_4K,
      headers: { "content-type": "application/octet-stream" },
    }),
  },
  {
    name: "GET 304 (If-None-Match)",
    expected: [304],
    request: (t) => ({ path: t.get, headers: { "if-none-match": t.etag } }),
  },
];

function pad(text, width, right = false) {
  const s = String(text);
  return right ? s.padStart(width) : s.padEnd(width);
}

async function runRequests() {
  const targets = [];
  try {
    targets.push({ label: "node:http baseline", ...(await startBaseline()), get: "/r", put: "/r", etag: ETAG_4K });
    targets.push({ label: "trove, log silent", ...(await prepareTrove(await startTrove({ logLevel: "silent" }))) });
    targets.push({ label: "trove, log info", ...(await prepareTrove(await startTrove({ logLevel: "info" }))) });

    const rows = [];
    for (const c of CASES) {
      let baseline = 0;
      for (const t of targets) {
        const request = c.request(t);
        if (warmup > 0) await load(t.url, request, warmup);
        const s = summarize(await load(t.url, request, duration), c.expected);
        if (t === targets[0]) baseline = s.rps;
        rows.push({ case: c.name, target: t.label, ...s, ratio: baseline > 0 ? s.rps / baseline : Number.NaN });
        process.stderr.write(`  ${c.name}, ${t.label}: ${Math.round(s.rps)} req/s\n`);
      }
    }

    const head = `${pad("case", 26)}${pad("server", 20)}${pad("req/s", 9, true)}${pad("p50 ms", 8, true)}${pad("p99 ms", 8, true)}${pad("vs baseline", 13, true)}  other`;
    console.log(`\n${head}\n${"-".repeat(head.length + 6)}`);
    for (const r of rows) {
      console.log(
        `${pad(r.case, 26)}${pad(r.target, 20)}${pad(Math.round(r.rps), 9, true)}${pad(r.p50, 8, true)}${pad(r.p99, 8, true)}${pad(`${r.ratio.toFixed(2)}x`, 13, true)}  ${r.other}`,
      );
    }
  } finally {
    for (const t of targets) await t.stop();
  }
}

console.log(
  `Trove benchmarks — ${new Date().toISOString()}, Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? "?"})`,
);
console.log(`autocannon: ${connections} connections, ${duration} s per case after ${warmup} s of warm-up, 1 process`);
if (!opts["skip-build"]) buildDist();
if (opts.only === undefined || opts.only === "requests") await runRequests();
if (opts.only === undefined || opts.only === "stream") await runStream({ sizeMiB: Number(opts["stream-size-mib"]) });
