// History of filesystem stores (issue 27, docs/history.md "Filesystem stores"): what keeping a
// copy of every recorded state costs, against a filesystem store with keep-versions 0 measured
// in the same run. `node bench/filesystem-history.js [--files 1000] [--rounds 3] [--skip-build]`.
//
// Two `trove serve` processes (bench/servers.js), each with one filesystem store on a folder of
// its own: `30d` and `0`. In each round, on each server in turn: every file PUT (4 KiB, 8 at a
// time), every file PUT again with other bytes, then half of them overwritten in place outside
// Trove and read once (the read records the edit, as the scanner would). Printed: server CPU per
// write and wall time (history / none), and the disk of the folder and of the history area
// (`du`: allocated blocks) after the last round.

import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { cpuSeconds, median, times } from "./report.js";
import { buildDist, startTrove } from "./servers.js";

const { values: opts } = parseArgs({
  options: {
    files: { type: "string", default: "1000" },
    rounds: { type: "string", default: "3" },
    "skip-build": { type: "boolean", default: false },
  },
});
const files = Number(opts.files);
const rounds = Number(opts.rounds);
const DATA = "/resources/v2/data";
const log = (line) => process.stderr.write(`  ${line}\n`);

async function call(server, method, path, { body, headers = {} } = {}) {
  const res = await fetch(server.url + path, {
    method,
    body,
    headers: { authorization: server.authorization, "content-type": "application/octet-stream", ...headers },
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  if (res.status >= 300) throw new Error(`${method} ${path} answered ${res.status}: ${bytes}`);
  return bytes;
}

async function inBatches(count, each, parallel = 8) {
  for (let i = 0; i < count; i += parallel) {
    await Promise.all(Array.from({ length: Math.min(parallel, count - i) }, (_, k) => each(i + k)));
  }
}

/** Allocated size of a directory in KiB (`du -sk`), 0 when it does not exist. */
function du(dir) {
  try {
    return Number(execFileSync("du", ["-sk", dir], { encoding: "utf8" }).split("\t")[0]);
  } catch {
    return 0;
  }
}

/** One round on one server: the server's CPU seconds and the wall milliseconds of its writes. */
async function round(target) {
  const { server, folder } = target;
  const cpu = cpuSeconds(server.pid);
  const start = performance.now();
  for (let pass = 0; pass < 2; pass++) {
    await inBatches(files, (i) => call(server, "PUT", `${DATA}/team/f${i}.bin`, { body: randomBytes(4096) }));
  }
  for (let i = 0; i < files; i += 2) writeFileSync(join(folder, `f${i}.bin`), randomBytes(4096));
  await inBatches(files / 2, (k) => call(server, "GET", `${DATA}/team/f${2 * k}.bin`));
  return { cpu: cpuSeconds(server.pid) - cpu, ms: performance.now() - start };
}

async function main() {
  if (!opts["skip-build"]) buildDist();
  const [one] = loadavg();
  log(`${files} files of 4 KiB, ${rounds} rounds, load average ${one.toFixed(1)} at start`);
  const targets = [];
  try {
    for (const [label, keep] of [
      ["keep-versions 30d", "30d"],
      ["keep-versions 0", "0"],
    ]) {
      const server = await startTrove({ logLevel: "silent" });
      const folder = mkdtempSync(join(tmpdir(), "trove-bench-folder-"));
      targets.push({ label, server, folder, results: [] });
      await call(server, "POST", "/resources/v2/stores", {
        body: JSON.stringify({
          name: "team",
          type: "filesystem",
          settings: { "filesystem-location": folder, "keep-versions": keep },
        }),
        headers: { "content-type": "application/json" },
      });
    }
    for (let r = 0; r < rounds; r++) {
      for (const target of r % 2 === 0 ? targets : [...targets].reverse()) {
        const result = await round(target);
        target.results.push(result);
        log(`round ${r + 1}, ${target.label}: ${result.cpu.toFixed(2)} s CPU, ${result.ms.toFixed(0)} ms`);
      }
    }
    const writes = 2.5 * files;
    const [history, none] = targets;
    const cpu = (t) => median(t.results.map((x) => x.cpu)) / writes;
    const wall = (t) => median(t.results.map((x) => x.ms));
    console.log(
      `server CPU per change: ${(cpu(history) * 1e6).toFixed(0)} us with history, ${(cpu(none) * 1e6).toFixed(0)} us without: ${times(cpu(history) / cpu(none))}`,
    );
    console.log(`wall time of a round: ${times(wall(history) / wall(none))} (history / none)`);
    const folderKiB = du(history.folder);
    const historyKiB = du(join(history.server.dataDir, "history", "team"));
    console.log(
      `disk after ${rounds} rounds: folder ${folderKiB} KiB, history area ${historyKiB} KiB (${times(historyKiB / folderKiB)} the folder); with keep-versions 0: ${du(join(none.server.dataDir, "history"))} KiB`,
    );
  } finally {
    for (const { server, folder } of targets) {
      await server.stop();
      rmSync(folder, { recursive: true, force: true });
    }
  }
}

await main();
