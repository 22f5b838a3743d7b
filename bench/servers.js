// Servers under test for the benchmarks, each in its own child process so that
// the load generator (this process) and the server do not share an event loop,
// and the server's memory can be read from /proc.

import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = fileURLToPath(new URL("..", import.meta.url));

/** Builds dist/, which `bin/trove.js` runs. */
export function buildDist() {
  execFileSync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"], {
    cwd: ROOT,
    stdio: "inherit",
  });
}

/** A port that was free a moment ago: `trove serve` takes a fixed port. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });
}

async function untilAnswering(url, child, output) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}: ${output()}`);
    try {
      const res = await fetch(url, { method: "HEAD" });
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`server did not answer within 30 s: ${output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startChild(args, probePath, port, extra = {}) {
  // stdout is /dev/null ("ignore"): what a server logs costs its writes, never a pipe's backlog.
  // TROVE_BENCH_SERVER_LOG=FILE appends it to FILE instead (a file, never a pipe), to read after a run.
  const log = process.env.TROVE_BENCH_SERVER_LOG;
  const child = spawn(extra.node ?? process.execPath, [...(extra.nodeArgs ?? []), ...args], {
    cwd: ROOT,
    stdio: ["ignore", log ? openSync(log, "a") : "ignore", "pipe"],
    env: extra.env ? { ...process.env, ...extra.env } : process.env,
  });
  let stderr = "";
  child.stderr.setEncoding("utf8").on("data", (s) => {
    stderr = (stderr + s).slice(-4000);
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  const url = `http://127.0.0.1:${port}`;
  try {
    await untilAnswering(url + probePath, child, () => stderr);
  } catch (err) {
    child.kill("SIGKILL");
    await extra.cleanup?.();
    throw err;
  }
  return {
    url,
    port,
    pid: child.pid,
    async stop() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
        await exited;
        clearTimeout(timer);
      }
      await extra.cleanup?.();
    },
  };
}

/** A database name of its own for each server: a fresh, empty store like a fresh data directory. */
function benchDatabase() {
  return `trove_bench_${Date.now().toString(36)}_${randomBytes(4).toString("hex")}`;
}

/** Drops a benchmark's database once its server has stopped, so runs leave nothing behind. */
async function dropDatabase(url, database) {
  const { MongoClient } = await import("mongodb");
  const client = new MongoClient(url, { serverSelectionTimeoutMS: 5000 });
  try {
    await client.db(database).dropDatabase();
  } catch (err) {
    process.stderr.write(`  (could not drop ${database}: ${err.message})\n`);
  } finally {
    await client.close();
  }
}

/**
 * `trove serve` from dist/ with a fresh data directory; logLevel "info" logs one line per request
 * to /dev/null. It runs its development issuer: `authorization` is `Bearer {token}` from there,
 * and every request must carry it. With `auth: "off"` the server is bench/anonymous-server.js
 * instead (same server, callers anonymous), for the auth-off row; `authorization` is then undefined.
 * With `mongodbUrl`, everything is kept on that MongoDB (`--mongodb-url`) in a database of its own,
 * dropped when the server stops; the data directory then holds only the development issuer's keys.
 * `pollWait` (seconds) raises the longest wait a poll may ask for (`--poll-wait`, default 30).
 * `serveArgs` are more `trove serve` flags; `nodeArgs` and `env` are node's flags and extra
 * environment variables of the server process (bench/parked-polls.js). `workers` is `--workers`:
 * 1 unless asked, since most benchmarks measure what one process costs (its memory, its CPU);
 * `--only apache` and `apache-large` measure the default, auto, beside it. `root` is the checkout
 * whose bin/trove.js runs (built, with its node_modules; default this one) and `node` the Node.js
 * binary that runs it (default the one running the benchmark): bench/runtimes.js, bench/attack.js.
 */
export async function startTrove({
  root = ROOT,
  node = process.execPath,
  logLevel = "silent",
  auth = "dev",
  mongodbUrl,
  pollWait,
  serveArgs = [],
  nodeArgs,
  env,
  workers = "1",
} = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), "trove-bench-"));
  const port = await freePort();
  const database = mongodbUrl ? benchDatabase() : undefined;
  const cleanup = async () => {
    rmSync(dataDir, { recursive: true, force: true });
    if (database) await dropDatabase(mongodbUrl, database);
  };
  const backend = database ? { backend: "mongodb", database } : { backend: "embedded" };
  if (auth === "off") {
    const args = [join(ROOT, "bench/anonymous-server.js"), String(port), dataDir, logLevel];
    if (database) args.push(mongodbUrl, database);
    const server = await startChild(args, "/resources/v2/data/home/", port, { cleanup });
    return { ...server, ...backend, dataDir, authorization: undefined };
  }
  const args = [
    join(root, "bin/trove.js"),
    "serve",
    "--port",
    String(port),
    "--data",
    dataDir,
    "--log-level",
    logLevel,
    "--token-lifetime",
    "86400",
    "--workers",
    String(workers),
  ];
  if (database) args.push("--mongodb-url", mongodbUrl, "--mongodb-database", database);
  if (pollWait !== undefined) args.push("--poll-wait", String(pollWait));
  args.push(...serveArgs);
  const server = await startChild(args, "/auth/.well-known/openid-configuration", port, {
    cleanup,
    nodeArgs,
    env,
    node,
  });
  try {
    // As `trove token --data DIR` does: the development issuer's credentials in the data directory.
    const token = execFileSync(node, [join(root, "bin/trove.js"), "token", "--url", server.url, "--data", dataDir], {
      encoding: "utf8",
    }).trim();
    return { ...server, ...backend, dataDir, authorization: `Bearer ${token}` };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

/** The bare node:http server of bench/baseline-server.js, run by `node` (default this Node.js). */
export async function startBaseline({ node } = {}) {
  const dir = mkdtempSync(join(tmpdir(), "trove-baseline-"));
  const port = await freePort();
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  return startChild([join(ROOT, "bench/baseline-server.js"), String(port), dir], "/", port, { cleanup, node });
}

/** A field of /proc/{pid}/status in bytes: VmRSS (resident now) or VmHWM (peak resident). */
export function procStatusBytes(pid, field) {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  if (!match) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(match[1]) * 1024;
}

/** Resets VmHWM to the current RSS (Linux: writing 5 to clear_refs); false where that is refused. */
export function resetPeak(pid) {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, "5");
    return true;
  } catch {
    return false;
  }
}
