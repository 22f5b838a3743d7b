// Client peak memory of `trove push`, `trove pull` and `trove mirror --once` (issue 31: under 100 MB whatever the tree's
// size) against `trove serve` on the embedded store: the bench tree of bench/transfers.js (10,020
// files of 2-8 KiB and 1 MiB) and a tree of many small files (100,000 of 0.5-1.5 KiB by default).
// Each run's wall time, client CPU and peak RSS come from GNU time, also of a second pull and
// push with nothing changed (the local state read beside the listing), and of a first and a second
// `mirror --once` (its state in an SQLite database beside the copy); `node -e 0` and `trove
// --version` are measured in the same run as the floor (the node binary's own pages). Every
// download is compared with `diff -r`.
//
// `node bench/transfer-memory.js [--files 100000] [--transfers 16] [--skip-small] [--skip-many]`

import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startTrove } from "./servers.js";
import { makeTree, timed } from "./transfer-tree.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const TROVE_BIN = join(ROOT, "sdk/bin/trove.js");

const { values } = parseArgs({
  options: {
    files: { type: "string", default: "100000" },
    transfers: { type: "string", default: "16" },
    "skip-small": { type: "boolean", default: false },
    "skip-many": { type: "boolean", default: false },
  },
});

const MiB = (bytes) => `${(bytes / 2 ** 20).toFixed(0)} MiB`;
const row = (label, r, floor) =>
  `| ${label} | ${r.wall.toFixed(2)} s | ${r.cpu.toFixed(2)} s | ${MiB(r.peak)} | ${MiB(r.peak - floor.peak)} |`;

async function main() {
  const server = await startTrove({ auth: "off" });
  const work = mkdtempSync(join(tmpdir(), "trove-bench-transfer-memory-"));
  // TROVE_DATA: no development issuer's key from a .trove-data in the directory the bench runs in.
  const env = {
    TROVE_URL: server.url,
    HOME: work,
    XDG_CONFIG_HOME: join(work, ".config"),
    TROVE_DATA: join(work, "none"),
  };
  const cli = (...args) => timed(process.execPath, [TROVE_BIN, ...args, "-q"], env);
  const rows = [];
  try {
    const floor = timed(process.execPath, ["-e", "0"]);
    rows.push(row("`node -e 0` (the floor)", floor, floor));
    rows.push(row("`trove --version`", timed(process.execPath, [TROVE_BIN, "--version"], env), floor));
    const trees = [];
    if (!values["skip-small"]) trees.push({ name: "bench tree, 10,020 files", folders: 100, files: 100, options: {} });
    if (!values["skip-many"]) {
      const files = Number(values.files);
      const folders = Math.max(1, Math.round(files / 100));
      trees.push({
        name: `${(folders * 100).toLocaleString("en")} files of 0.5-1.5 KiB`,
        folders,
        files: 100,
        options: { minSize: 512, spread: 1024, large: 0 },
      });
    }
    for (const [i, tree] of trees.entries()) {
      const source = join(work, `source${i}`);
      const target = join(work, `pulled${i}`);
      makeTree(source, tree.folders, tree.files, tree.options);
      rows.push(
        row(`push, ${tree.name}`, cli("push", source, `home/tree${i}`, "--transfers", values.transfers), floor),
      );
      rows.push(
        row(`pull, ${tree.name}`, cli("pull", `home/tree${i}`, target, "--transfers", values.transfers), floor),
      );
      // Nothing changed on either side: the listing, the walk and the local state read side by side.
      rows.push(row(`pull again, nothing changed (${tree.name})`, cli("pull", `home/tree${i}`, target), floor));
      rows.push(row(`push again, nothing changed (${tree.name})`, cli("push", source, `home/tree${i}`), floor));
      // The mirror: its first copy (the listing and the walk compared in its state database), then
      // a run with nothing to do (resumed from its cursor).
      const mirrored = join(work, `mirrored${i}`);
      const mirror = (label) =>
        row(
          `${label} (${tree.name})`,
          cli("mirror", `home/tree${i}`, mirrored, "--once", "--transfers", values.transfers),
          floor,
        );
      rows.push(mirror("first `mirror --once`"));
      rows.push(mirror("`mirror --once` again, nothing changed"));
      for (const copy of [target, mirrored]) {
        const diff = spawnSync("diff", ["-r", "-q", source, copy], { encoding: "utf8" });
        if (diff.status !== 0) throw new Error(`diff -r ${source} ${copy}: ${diff.stdout}${diff.stderr}`);
      }
      rmSync(source, { recursive: true, force: true });
      rmSync(target, { recursive: true, force: true });
      rmSync(mirrored, { recursive: true, force: true });
    }
  } finally {
    await server.stop();
    rmSync(work, { recursive: true, force: true });
  }
  console.log(
    `--transfers ${values.transfers}; GNU time; load average at the end ${spawnSync("cat", ["/proc/loadavg"], { encoding: "utf8" }).stdout.trim()}`,
  );
  console.log("| run | wall | client CPU | peak RSS | above `node -e 0` |");
  console.log("|---|---:|---:|---:|---:|");
  for (const r of rows) console.log(r);
}

await main();
