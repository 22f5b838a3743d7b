// What bench/transfers.js and bench/transfer-memory.js share: a client run under GNU time, and
// the tree they transfer (issue 31).

import { spawnSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** Runs a client under GNU time: { wall, cpu (s), peak (bytes), stdout, stderr }. */
export function timed(cmd, args, env = {}) {
  const out = spawnSync("/usr/bin/time", ["-f", "TIME %e %U %S %M", cmd, ...args], {
    encoding: "utf8",
    env: { ...process.env, ...env },
    maxBuffer: 64 * 1024 * 1024,
  });
  const m = /TIME ([\d.]+) ([\d.]+) ([\d.]+) (\d+)\s*$/.exec(out.stderr);
  if (out.status !== 0 || !m) throw new Error(`${cmd} ${args.join(" ")} exited ${out.status}: ${out.stderr}`);
  return { wall: Number(m[1]), cpu: Number(m[2]) + Number(m[3]), peak: Number(m[4]) * 1024, stderr: out.stderr };
}

/** The tree: `folders` x `files` small files (2-8 KiB by default), and `large` of 1 MiB. */
export function makeTree(dir, folders, files, { minSize = 2048, spread = 6144, large = 20 } = {}) {
  let seed = 1;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed;
  };
  for (let f = 0; f < folders; f++) {
    mkdirSync(join(dir, `folder${f}`), { recursive: true });
    for (let i = 0; i < files; i++) {
      const size = minSize + (random() % spread);
      writeFileSync(join(dir, `folder${f}`, `file${i}.txt`), Buffer.alloc(size, `${f}-${i}-${random()} `));
    }
  }
  if (large === 0) return;
  mkdirSync(join(dir, "large"));
  for (let i = 0; i < large; i++) writeFileSync(join(dir, "large", `large${i}.bin`), Buffer.alloc(1024 * 1024, `${i}`));
}
