// The cost of metrics: GET of a 4 KiB resource (REST) and a Connect unary Stat (JSON) against
// `trove serve` (development issuer, a bearer token on every request, logging silent) with
// metrics on (the default) and with TROVE_METRICS=false, the two servers running side by side
// and measured in alternating rounds so that machine load falls on both alike. Prints requests
// per second, latency and the server's CPU time per request (from /proc, less sensitive than
// throughput to what else the machine runs) per round, then the median ratios on/off per case.
// `node bench/metrics.js [--duration 8] [--rounds 5] [--connections 32] [--only rest|connect] [--skip-build]`

import { parseArgs } from "node:util";
import autocannon from "autocannon";
import { BODY_4K } from "./payloads.js";
import { cpuSeconds, median } from "./report.js";
import { buildDist, startTrove } from "./servers.js";

const { values: opts } = parseArgs({
  options: {
    duration: { type: "string", default: "8" },
    warmup: { type: "string", default: "2" },
    rounds: { type: "string", default: "5" },
    connections: { type: "string", default: "32" },
    "skip-build": { type: "boolean", default: false },
    only: { type: "string" },
  },
});
const duration = Number(opts.duration);
const warmup = Number(opts.warmup);
const rounds = Number(opts.rounds);
const connections = Number(opts.connections);

const RESOURCE = "/resources/v2/data/home/resource-4k.bin";

const CASES = [
  { name: "REST GET 4 KiB", request: { path: RESOURCE } },
  {
    name: "Connect Stat (JSON)",
    request: {
      path: "/trove.resources.v2.ResourceService/Stat",
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ store: "home", path: "resource-4k.bin" }),
    },
  },
];

/** `trove serve` with TROVE_METRICS as given (the child inherits this process's environment). */
async function startWith(metrics) {
  const before = process.env.TROVE_METRICS;
  process.env.TROVE_METRICS = metrics ? "true" : "false";
  try {
    return await startTrove({ logLevel: "silent" });
  } finally {
    if (before === undefined) delete process.env.TROVE_METRICS;
    else process.env.TROVE_METRICS = before;
  }
}

async function prepare(server) {
  const headers = { authorization: server.authorization };
  const put = await fetch(server.url + RESOURCE, { method: "PUT", body: BODY_4K, headers });
  if (put.status !== 201) throw new Error(`setup PUT answered ${put.status}: ${await put.text()}`);
  const scrape = await fetch(`${server.url}/metrics`);
  await scrape.arrayBuffer();
  return { ...server, scrapeStatus: scrape.status };
}

async function load(server, { path, headers = {}, ...request }, seconds) {
  const cpuBefore = cpuSeconds(server.pid);
  const result = await autocannon({
    url: server.url + path,
    connections,
    pipelining: 1,
    duration: seconds,
    headers: { ...headers, authorization: server.authorization },
    ...request,
  });
  const ok = result.statusCodeStats["200"]?.count ?? 0;
  const other = result.requests.total - ok;
  if (other > 0 || result.errors > 0) throw new Error(`${other} answers other than 200, ${result.errors} errors`);
  const cpuUs = ((cpuSeconds(server.pid) - cpuBefore) / ok) * 1e6;
  return { rps: ok / result.duration, p50: result.latency.p50, p99: result.latency.p99, cpuUs };
}

if (!opts["skip-build"]) buildDist();
const servers = [];
try {
  const on = await prepare(await startWith(true));
  servers.push(on);
  const off = await prepare(await startWith(false));
  servers.push(off);
  if (on.scrapeStatus !== 200 || off.scrapeStatus !== 404) {
    throw new Error(`/metrics answered ${on.scrapeStatus} (on) and ${off.scrapeStatus} (off)`);
  }
  console.log(
    `metrics overhead: ${rounds} rounds of ${duration} s per case and server, ${connections} connections, Node ${process.version}`,
  );
  for (const c of CASES.filter((x) => opts.only === undefined || x.name.toLowerCase().startsWith(opts.only))) {
    for (const s of [on, off]) await load(s, c.request, warmup);
    const ratios = [];
    const cpuRatios = [];
    const cpu = { on: [], off: [] };
    for (let round = 1; round <= rounds; round++) {
      // Alternate which server goes first, so neither always runs on a warmer machine.
      const order = round % 2 === 1 ? [on, off] : [off, on];
      const result = new Map();
      for (const s of order) result.set(s, await load(s, c.request, duration));
      const a = result.get(on);
      const b = result.get(off);
      ratios.push(a.rps / b.rps);
      cpuRatios.push(a.cpuUs / b.cpuUs);
      cpu.on.push(a.cpuUs);
      cpu.off.push(b.cpuUs);
      console.log(
        `  ${c.name.padEnd(20)} round ${round}: on ${a.rps.toFixed(0).padStart(6)} req/s (p50 ${a.p50} ms, p99 ${a.p99} ms, ${a.cpuUs.toFixed(0)} µs CPU/req)  ` +
          `off ${b.rps.toFixed(0).padStart(6)} req/s (p50 ${b.p50} ms, p99 ${b.p99} ms, ${b.cpuUs.toFixed(0)} µs CPU/req)`,
      );
    }
    const list = (xs) => xs.map((r) => r.toFixed(3)).join(", ");
    console.log(`${c.name}: on/off, median of ${rounds} rounds:`);
    console.log(`  throughput ratio    ${median(ratios).toFixed(3)} (${list(ratios)})`);
    console.log(
      `  CPU per request     ${median(cpu.on).toFixed(1)} µs on, ${median(cpu.off).toFixed(1)} µs off; ratio ${median(cpuRatios).toFixed(3)} (${list(cpuRatios)})`,
    );
  }
} finally {
  for (const s of servers) await s.stop();
}
