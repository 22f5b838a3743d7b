// Filesystem stores at scale (issue 17, item 6; docs/benchmarks.md): a folder of small files
// (100 directories of 1,000 files for --files 100000) is indexed by a filesystem store, then
// rescanned unchanged, in a child process whose memory is read from /proc; the baseline is a
// bare recursive lstat walk of the same tree (Node's fs, and `find DIR -printf ''`), in the same run.
//
//   node bench/filesystem-scan.js [--files 100000] [--per-dir 1000] [--no-build]
//
// Runs the built server (dist/): builds it first unless --no-build.

import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { lstat, opendir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

if (process.argv[2] === "--child") await child(process.argv[3], process.argv[4]);
else await main();

async function main() {
  const { values } = parseArgs({
    options: {
      files: { type: "string", default: "100000" },
      "per-dir": { type: "string", default: "1000" },
      "no-build": { type: "boolean", default: false },
    },
  });
  const files = Number(values.files);
  const perDir = Number(values["per-dir"]);
  if (!values["no-build"]) {
    execFileSync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"], {
      cwd: ROOT,
      stdio: "inherit",
    });
  }
  const work = mkdtempSync(join(tmpdir(), "trove-fs-bench-"));
  const folder = join(work, "folder");
  const data = join(work, "data");
  mkdirSync(folder);
  mkdirSync(data);
  try {
    let made = 0;
    for (let d = 0; made < files; d++) {
      const dir = join(folder, `d${String(d).padStart(4, "0")}`);
      mkdirSync(dir);
      for (let f = 0; f < perDir && made < files; f++, made++) writeFileSync(join(dir, `f${f}.txt`), `file ${made}\n`);
    }
    const directories = Math.ceil(files / perDir);
    console.log(`tree: ${files} files in ${directories} directories (${work})`);

    // Baselines, caches warm (the tree was just written): what walking the tree costs at least.
    await lstatWalk(folder); // the first walk warms the JIT; the second is measured
    const walk = await timed(() => lstatWalk(folder));
    console.log(
      `baseline: recursive lstat walk (Node fs.promises, one at a time): ${ms(walk.ms)} (${walk.value} entries)`,
    );
    const find = await timed(async () => execFileSync("find", [folder, "-printf", ""]));
    console.log(`baseline: find DIR -printf '': ${ms(find.ms)}`);

    const result = await runChild(folder, data);
    const mib = (b) => `${(b / 1048576).toFixed(1)} MiB`;
    console.log(
      `start-up index: ${ms(result.indexed.duration)}, ${result.indexed.read} files read, ${result.indexed.recorded} changes recorded`,
    );
    console.log(
      `  progress lines: ${result.progress.length} (every 10,000 entries), RSS at each: ${result.progress.map((p) => mib(p.rss)).join(", ")}`,
    );
    console.log(`  V8 heap used at each: ${result.progress.map((p) => mib(p.heapUsed)).join(", ")}`);
    console.log(`  external (buffers) at each: ${result.progress.map((p) => mib(p.external)).join(", ")}`);
    console.log(
      `  RSS before ${mib(result.before)}, peak (VmHWM) ${mib(result.peak)}, growth ${mib(result.peak - result.before)}`,
    );
    console.log(
      `rescan, unchanged: ${ms(result.rescan.duration)}, ${result.rescan.read} files read, ${result.rescan.recorded} changes recorded`,
    );
    console.log(
      `ratios: index / lstat walk ${(result.indexed.duration / walk.ms).toFixed(1)}x, rescan / lstat walk ${(result.rescan.duration / walk.ms).toFixed(1)}x, rescan / find ${(result.rescan.duration / find.ms).toFixed(1)}x`,
    );
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

async function lstatWalk(dir) {
  let count = 0;
  const handle = await opendir(dir);
  const subdirectories = [];
  for await (const entry of handle) {
    const path = join(dir, entry.name);
    const st = await lstat(path, { bigint: true });
    count++;
    if (st.isDirectory()) subdirectories.push(path);
  }
  for (const sub of subdirectories) count += await lstatWalk(sub);
  return count;
}

async function timed(fn) {
  const start = performance.now();
  const value = await fn();
  return { ms: performance.now() - start, value };
}

function ms(n) {
  return n >= 10_000 ? `${(n / 1000).toFixed(1)} s` : `${Math.round(n)} ms`;
}

/** Runs the store in a child process, sampling its memory; answers what it reported. */
function runChild(folder, data) {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, [fileURLToPath(import.meta.url), "--child", folder, data], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const out = { progress: [], before: 0, peak: 0 };
    const status = (field) => {
      try {
        const text = readFileSync(`/proc/${proc.pid}/status`, "utf8");
        return Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(text)?.[1] ?? 0) * 1024;
      } catch {
        return 0;
      }
    };
    const sampler = setInterval(() => {
      out.peak = Math.max(out.peak, status("VmHWM"));
    }, 100);
    let buffer = "";
    proc.stdout.setEncoding("utf8").on("data", (chunk) => {
      buffer += chunk;
      for (let i = buffer.indexOf("\n"); i >= 0; i = buffer.indexOf("\n")) {
        const message = JSON.parse(buffer.slice(0, i));
        buffer = buffer.slice(i + 1);
        if (message.ready) out.before = status("VmRSS");
        if (message.progress) out.progress.push(message.progress);
        if (message.indexed) {
          out.indexed = message.indexed;
          out.peak = Math.max(out.peak, status("VmHWM"));
        }
        if (message.rescan) out.rescan = message.rescan;
      }
    });
    proc.on("exit", (code) => {
      clearInterval(sampler);
      if (code === 0 && out.indexed && out.rescan) resolve(out);
      else reject(new Error(`the child exited with ${code}`));
    });
  });
}

/** The child: SQLite index in `data`, one filesystem store on `folder`. */
async function child(folder, data) {
  const { createFilesystemStorage } = await import("../dist/storage/filesystem/filesystem-storage.js");
  const { SqliteStorage } = await import("../dist/storage/sqlite/sqlite-storage.js");
  const send = (message) => process.stdout.write(`${JSON.stringify(message)}\n`);
  const logger = {
    warn: (details, message) => process.stderr.write(`${message} ${JSON.stringify(details)}\n`),
    info: (details, message) => {
      if (message === "filesystem store scan in progress") {
        const { rss, heapUsed, external } = process.memoryUsage();
        send({ progress: { ...details, rss, heapUsed, external } });
      }
    },
  };
  const inner = await SqliteStorage.open({ dataDir: data });
  let scanned;
  const storage = createFilesystemStorage(inner, {
    logger,
    rescanInterval: 24 * 3600_000,
    scanned: (summary) => scanned?.(summary),
  });
  await storage.whenStarted();
  send({ ready: true });
  await new Promise((r) => setTimeout(r, 300));
  const first = new Promise((resolve) => {
    scanned = resolve;
  });
  await storage.createStore(
    { name: "bench", type: "filesystem", settings: { "keep-deleted": "1h", "filesystem-location": folder } },
    Date.now(),
  );
  send({ indexed: await first });
  let again;
  scanned = (summary) => {
    again = summary;
  };
  await storage.rescan("bench");
  send({ rescan: again });
  await storage.close();
}
