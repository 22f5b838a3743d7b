// GET of a 4 KiB resource on several runtimes: Trove's server from one or more checkouts, each
// run by the Node.js binary given for it, beside bare node:http (bench/baseline-server.js) run by
// each of those binaries, rounds alternating. Prints requests/s and server CPU per answer (µs).
// Issue 26 chose the Node.js line and the SQLite binding with it (docs/benchmarks.md, "Node.js
// lines and the SQLite binding").
//
//   node bench/runtimes.js [--target LABEL=NODE:CHECKOUT ...] [--rounds 3 --duration 5 --warmup 2]
//
// Without --target: this checkout, run by the Node.js that runs the benchmark. A CHECKOUT is a
// directory holding an installed and built Trove (bin/trove.js, dist/, node_modules/); wrk
// (Debian package) generates the load: one thread, 32 connections.

import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { BODY_4K } from "./payloads.js";
import { cpuSeconds, median, pad } from "./report.js";
import { startBaseline, startTrove } from "./servers.js";
import { wrkAvailable, wrkLoad } from "./wrk.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const { values: opts } = parseArgs({
  options: {
    target: { type: "string", multiple: true },
    rounds: { type: "string", default: "3" },
    duration: { type: "string", default: "5" },
    warmup: { type: "string", default: "2" },
    connections: { type: "string", default: "32" },
  },
});
const rounds = Number(opts.rounds);
const duration = Number(opts.duration);
const warmup = Number(opts.warmup);
const connections = Number(opts.connections);
if (!wrkAvailable()) {
  process.stderr.write("bench/runtimes.js needs wrk (apt-get install wrk)\n");
  process.exit(2);
}

const targets = (opts.target ?? [`this=${process.execPath}:${ROOT}`]).map((spec) => {
  const m = /^([^=]+)=([^:]+):(.+)$/.exec(spec);
  if (!m) throw new Error(`--target ${spec}: expected LABEL=NODE:CHECKOUT`);
  const [, label, node, checkout] = m;
  const version = execFileSync(node, ["--version"], { encoding: "utf8" }).trim();
  return { label: label, node, checkout, version };
});

async function startTroveOf(target) {
  // One process: its CPU per answer against one node:http process.
  const server = await startTrove({ root: target.checkout, node: target.node });
  const headers = { Authorization: server.authorization };
  const path = "/resources/v2/data/home/resource-4k.bin";
  const put = await fetch(server.url + path, { method: "PUT", body: BODY_4K, headers });
  if (put.status !== 201) throw new Error(`PUT answered ${put.status}`);
  return { ...server, get: server.url + path, headers };
}

async function startBaselineOf(target) {
  const server = await startBaseline({ node: target.node });
  return { ...server, get: `${server.url}/resource-4k.bin`, headers: {} };
}

const rows = [];
for (const target of targets) {
  rows.push({ name: `node:http (${target.version})`, start: () => startBaselineOf(target), rps: [], cpu: [] });
  rows.push({ name: `Trove ${target.label} (${target.version})`, start: () => startTroveOf(target), rps: [], cpu: [] });
}
// One node:http per distinct binary.
const seen = new Set();
const measured = rows.filter((r) => !seen.has(r.name) && seen.add(r.name));

const servers = [];
try {
  for (const row of measured) servers.push(await row.start());
  for (const server of servers) await wrkLoad(server.get, { headers: server.headers }, warmup, connections);
  for (let round = 0; round < rounds; round++) {
    // Alternate the order each round, so that no row always runs first after a quiet pause.
    const order = round % 2 === 0 ? measured.keys() : [...measured.keys()].reverse();
    for (const i of order) {
      const server = servers[i];
      const before = cpuSeconds(server.pid);
      const r = await wrkLoad(server.get, { headers: server.headers }, duration, connections);
      const cpu = cpuSeconds(server.pid) - before;
      if (r.other) process.stderr.write(`  ${measured[i].name}: ${r.other}\n`);
      measured[i].rps.push(r.rps);
      measured[i].cpu.push((cpu / (r.rps * duration)) * 1e6);
      process.stdout.write(
        `round ${round + 1} ${pad(measured[i].name, 44)} ${pad(Math.round(r.rps), 8, true)} req/s ${pad(((cpu / (r.rps * duration)) * 1e6).toFixed(1), 7, true)} µs CPU/answer\n`,
      );
    }
  }
} finally {
  for (const server of servers) await server.stop();
}

process.stdout.write(`\nGET 4 KiB, wrk -t1 -c${connections}, ${rounds} rounds of ${duration} s, medians:\n`);
for (const row of measured) {
  const spread = row.cpu.map((c) => c.toFixed(0)).join("-");
  process.stdout.write(
    `${pad(row.name, 44)} ${pad(Math.round(median(row.rps)), 8, true)} req/s ${pad(median(row.cpu).toFixed(1), 7, true)} µs CPU/answer (rounds: ${spread})\n`,
  );
}
