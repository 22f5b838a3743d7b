// Where a 4 KiB GET's socket write goes (issue 32, session 14): bare servers answering with
// node:http's head and with Trove's, several ways (bench/response-head-server.js), under the same
// wrk load as bench/run.js (1 thread, 32 connections), in alternating rounds; the server's CPU
// (user + sys) per answer of each, and over the `node` variant's in the same round.
// `node bench/response-head.js [--variants node,trove-object,...] [--work 50] [--duration 5]
// [--rounds 3] [--warmup 2]`.

import { loadavg } from "node:os";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { cpuSeconds, median, pad } from "./report.js";
import { freePort, startChild } from "./servers.js";
import { wrkAvailable, wrkLoad } from "./wrk.js";

const { values: opts } = parseArgs({
  options: {
    variants: { type: "string", default: "node,trove-object,trove-set,trove-array,node-raw,trove-raw,node-work" },
    work: { type: "string", default: "50" },
    duration: { type: "string", default: "5" },
    rounds: { type: "string", default: "3" },
    warmup: { type: "string", default: "2" },
  },
});
if (!wrkAvailable()) throw new Error("bench/response-head.js needs wrk (apt-get install wrk)");

const SERVER = fileURLToPath(new URL("response-head-server.js", import.meta.url));
const variants = opts.variants.split(",");
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(", ");
const loadBefore = load();
const targets = [];
try {
  for (const variant of variants) {
    const port = await freePort();
    const server = await startChild([SERVER, String(port), variant, opts.work], "/", port);
    targets.push({ variant, ...server });
  }
  const request = { path: "/r", method: "GET" };
  for (const t of targets) await wrkLoad(`${t.url}/r`, request, Number(opts.warmup), 32);
  const runs = new Map(targets.map((t) => [t, []]));
  for (let r = 0; r < Number(opts.rounds); r++) {
    const order = targets.map((_, i) => targets[(i + r) % targets.length]);
    for (const t of order) {
      const cpu0 = cpuSeconds(t.pid);
      const s = await wrkLoad(`${t.url}/r`, request, Number(opts.duration), 32);
      const cpu = cpuSeconds(t.pid) - cpu0;
      runs.get(t).push({ rps: s.rps, cpu: (cpu * 1e6) / (s.rps * Number(opts.duration)), other: s.other });
      process.stderr.write(`  ${t.variant}, round ${r + 1}: ${Math.round(s.rps)} req/s\n`);
    }
  }
  const base = median(runs.get(targets[0]).map((x) => x.cpu));
  console.log(
    `\nA 4 KiB GET answered by bare servers, wrk 1 thread 32 connections, ${opts.duration} s rounds, median of ${opts.rounds}; Node ${process.version}; load average ${loadBefore} before, ${load()} after`,
  );
  const head = `${pad("variant", 16)}${pad("req/s", 9, true)}${pad("CPU/req", 10, true)}${pad(`/${targets[0].variant}`, 10, true)}  rounds (µs)`;
  console.log(`${head}\n${"-".repeat(head.length + 10)}`);
  for (const t of targets) {
    const xs = runs.get(t);
    const cpu = median(xs.map((x) => x.cpu));
    const label = t.variant === "node-work" ? `node-work ${opts.work}` : t.variant;
    console.log(
      `${pad(label, 16)}${pad(Math.round(median(xs.map((x) => x.rps))), 9, true)}${pad(`${cpu.toFixed(1)} µs`, 10, true)}${pad(`${(cpu / base).toFixed(2)}x`, 10, true)}  ${xs.map((x) => x.cpu.toFixed(1)).join(" ")} ${xs
        .map((x) => x.other)
        .filter(Boolean)
        .join(" ")}`,
    );
  }
} finally {
  for (const t of targets) await t.stop();
}
