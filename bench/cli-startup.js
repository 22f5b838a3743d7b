// CLI start-up (issue 31, target under 0.2 s): `trove --version`, `trove help` and `trove ls`
// (against `trove serve` on the embedded store), through the server package's bin and the SDK's,
// against `node -e 0` (the runtime's own start-up) measured in the same run, the commands taking
// turns so that the machine's load falls on all alike. Prints medians of wall time and of peak
// memory (GNU time), and each command's cost above `node -e 0`.
//
// `node bench/cli-startup.js [--runs 21] [--skip-build]`

import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { buildDist, startTrove } from "./servers.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const { values } = parseArgs({
  options: { runs: { type: "string", default: "21" }, "skip-build": { type: "boolean", default: false } },
});
const RUNS = Number(values.runs);

/** One run under GNU time: wall seconds and peak resident bytes. */
function timed(args, env) {
  const out = spawnSync("/usr/bin/time", ["-f", "TIME %e %M", process.execPath, ...args], {
    encoding: "utf8",
    env: { ...process.env, ...env },
  });
  const m = /TIME ([\d.]+) (\d+)\s*$/.exec(out.stderr);
  if (out.status !== 0 || !m) throw new Error(`${args.join(" ")} exited ${out.status}: ${out.stderr}`);
  return { wall: Number(m[1]), peak: Number(m[2]) * 1024 };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  if (!values["skip-build"]) buildDist();
  const server = await startTrove({ auth: "off" });
  const env = { TROVE_URL: server.url };
  const serverBin = join(ROOT, "bin/trove.js");
  const sdkBin = join(ROOT, "sdk/bin/trove.js");
  const cases = [
    ["node -e 0 (baseline)", ["-e", "0"]],
    ["trove --version", [serverBin, "--version"]],
    ["trove help", [serverBin, "help"]],
    ["trove ls home/", [serverBin, "ls", "home/"]],
    ["@trove/sdk trove --version", [sdkBin, "--version"]],
    ["@trove/sdk trove ls home/", [sdkBin, "ls", "home/"]],
  ];
  const results = cases.map(() => []);
  try {
    for (let run = 0; run < RUNS; run++) {
      for (const [i, [, args]] of cases.entries()) results[i].push(timed(args, env));
    }
  } finally {
    await server.stop();
  }
  const base = median(results[0].map((r) => r.wall));
  console.log(`${RUNS} runs each, taking turns; medians`);
  console.log("| command | wall | above node -e 0 | peak memory |");
  console.log("|---|---:|---:|---:|");
  cases.forEach(([label], i) => {
    const wall = median(results[i].map((r) => r.wall));
    const peak = median(results[i].map((r) => r.peak)) / 2 ** 20;
    console.log(`| ${label} | ${wall.toFixed(2)} s | ${(wall - base).toFixed(2)} s | ${peak.toFixed(0)} MiB |`);
  });
}

await main();
