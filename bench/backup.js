// Backup and restore (issue 28, docs/backup.md), each against a baseline measured in the same run:
//
//   backup   `trove backup --data DIR` of N resources against `tar cf` of the same data directory:
//            wall time (target: the backup at no less than half tar's speed) and the backup
//            process's peak RSS (VmHWM, read while it runs).
//   restore  `trove restore FILE --data DIR` against SQLite's own bulk insert of N rows of the same
//            size (better-sqlite3, transactions of 1,000); with --mongodb-url (FerretDB here),
//            `trove restore FILE --mongodb-url` against the driver's insertMany of N documents of
//            the same size in batches of 1,000. The move's downtime is backup + restore.
//
//   put-p99  a running `trove serve` holding the same resources: the p99 latency of PUTs of 4 KiB by
//            8 concurrent writers while `trove backup --url` runs, against the p99 of the same
//            writers without a backup, rounds alternating (target: within 2x).
//
// `node bench/backup.js [--resources 10000] [--size 4096] [--mongodb-url URL] [--only CASE] [--skip-build]
// [--rounds 3] [--log-level silent]`. With TROVE_BENCH_SERVER_LOG=FILE (bench/servers.js) the server's
// log (at --log-level: info logs a line per request) is appended to FILE.
// Resources are spread over directories of 100; every tenth is 200 KiB (a blob file), the others
// --size bytes (inline).

import { execFileSync, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, statSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import Database from "better-sqlite3";
import { MongoClient } from "mongodb";
import { buildDist, procStatusBytes, startTrove } from "./servers.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const CLI = join(ROOT, "bin/trove.js");

const { values: opts } = parseArgs({
  options: {
    resources: { type: "string", default: "10000" },
    size: { type: "string", default: "4096" },
    "mongodb-url": { type: "string" },
    "skip-build": { type: "boolean", default: false },
    only: { type: "string" },
    rounds: { type: "string", default: "3" },
    "log-level": { type: "string", default: "silent" },
  },
});
const N = Number(opts.resources);
const SIZE = Number(opts.size);
const LARGE = 200 * 1024;

if (!opts["skip-build"]) buildDist();
const { SqliteStorage } = await import(join(ROOT, "dist/storage/sqlite/sqlite-storage.js"));

async function* once(b) {
  yield b;
}

/** Runs a command; resolves with its wall seconds and (when asked) the peak RSS seen while it ran. */
function timed(command, args, { peak = false } = {}) {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(command, args, { stdio: ["ignore", "ignore", "inherit"] });
    let hwm = 0;
    const timer = peak
      ? setInterval(() => {
          try {
            hwm = Math.max(hwm, procStatusBytes(child.pid, "VmHWM"));
          } catch {}
        }, 20)
      : undefined;
    child.once("exit", (code) => {
      clearInterval(timer);
      if (code !== 0) reject(new Error(`${command} ${args.join(" ")} exited ${code}`));
      else resolve({ seconds: (performance.now() - started) / 1000, peak: hwm });
    });
  });
}

const mib = (b) => `${(b / 1024 / 1024).toFixed(1)} MiB`;

if (!opts.only || opts.only === "backup") await backupAndRestore();
if (!opts.only || opts.only === "put-p99") await putP99();

async function backupAndRestore() {
  const work = mkdtempSync(join(tmpdir(), "trove-bench-backup-"));
  const data = join(work, "data");

  console.log(
    `backup bench: ${N} resources (every tenth ${LARGE} B, others ${SIZE} B), load ${loadavg()[0].toFixed(1)}`,
  );
  const storage = await SqliteStorage.open({ dataDir: data });
  await storage.createStore({ name: "home", type: "recursive", settings: { "keep-deleted": "7d" } }, Date.now());
  let bytes = 0;
  for (let i = 0; i < N; i++) {
    if (i % 100 === 0) await storage.makeDirectory("home", `d${i / 100}`, {}, Date.now());
    const size = i % 10 === 0 ? LARGE : SIZE;
    bytes += size;
    const blob = await storage.writeBlob(once(randomBytes(size)), { maxSize: 1 << 30 });
    await storage.putFile("home", `d${Math.floor(i / 100)}/r${i}.json`, blob, "application/json", {}, Date.now());
  }
  await storage.close();
  console.log(`filled: ${mib(bytes)} of contents`);

  const archive = join(work, "backup.tar");
  const tarFile = join(work, "data.tar");
  const rounds = [];
  for (let r = 0; r < 3; r++) {
    rmSync(tarFile, { force: true });
    rmSync(archive, { force: true });
    execFileSync("sync");
    const tar = await timed("tar", ["cf", tarFile, "-C", data, "."]);
    execFileSync("sync");
    const backup = await timed(process.execPath, [CLI, "backup", "--data", data, "-o", archive, "-q"], { peak: true });
    rounds.push({ tar: tar.seconds, backup: backup.seconds, peak: backup.peak });
  }
  const best = (k) => Math.min(...rounds.map((x) => x[k]));
  const archiveSize = statSync(archive).size;
  console.log(
    `backup: tar ${best("tar").toFixed(2)} s (${mib(statSync(tarFile).size)}), trove backup ${best("backup").toFixed(2)} s (${mib(archiveSize)}): ` +
      `${(best("tar") / best("backup")).toFixed(2)}x tar's speed (target >= 0.5x); backup peak RSS ${mib(Math.max(...rounds.map((x) => x.peak)))}`,
  );

  // Restore into the embedded store, beside SQLite's own bulk insert.
  const restored = join(work, "restored");
  const restore = await timed(process.execPath, [CLI, "restore", archive, "--data", restored, "-q"], { peak: true });
  const db = new Database(join(work, "bulk.db"));
  db.pragma("journal_mode = WAL");
  db.exec("CREATE TABLE t (store TEXT, path TEXT, data BLOB, PRIMARY KEY (store, path))");
  const insert = db.prepare("INSERT INTO t VALUES (?, ?, ?)");
  const small = randomBytes(SIZE);
  const started = performance.now();
  for (let i = 0; i < N; i += 1000) {
    db.transaction(() => {
      for (let j = i; j < Math.min(N, i + 1000); j++)
        insert.run("home", `r${j}`, j % 10 === 0 ? randomBytes(LARGE) : small);
    })();
  }
  const bulk = (performance.now() - started) / 1000;
  db.close();
  console.log(
    `restore into embedded: ${restore.seconds.toFixed(2)} s, ${Math.round(N / restore.seconds)} resources/s, ${mib(archiveSize / restore.seconds)}/s, peak RSS ${mib(restore.peak)}; ` +
      `SQLite bulk insert ${bulk.toFixed(2)} s, ${Math.round(N / bulk)} rows/s (restore at ${(bulk / restore.seconds).toFixed(2)}x of it)`,
  );

  if (opts["mongodb-url"]) {
    const url = opts["mongodb-url"];
    const database = `trove_bench_${randomBytes(4).toString("hex")}`;
    const intoMongo = await timed(
      process.execPath,
      [CLI, "restore", archive, "--mongodb-url", url, "--mongodb-database", database, "-q"],
      { peak: true },
    );
    const client = new MongoClient(url);
    const coll = client.db(`${database}_bulk`).collection("t");
    const t0 = performance.now();
    for (let i = 0; i < N; i += 1000) {
      const docs = [];
      for (let j = i; j < Math.min(N, i + 1000); j++) {
        docs.push({ _id: `home/r${j}`, data: j % 10 === 0 ? randomBytes(LARGE) : small });
      }
      await coll.insertMany(docs, { ordered: false });
    }
    const mongoBulk = (performance.now() - t0) / 1000;
    await client.db(database).dropDatabase();
    await client.db(`${database}_bulk`).dropDatabase();
    await client.close();
    console.log(
      `restore into MongoDB: ${intoMongo.seconds.toFixed(2)} s, ${Math.round(N / intoMongo.seconds)} resources/s, ${mib(archiveSize / intoMongo.seconds)}/s; ` +
        `driver insertMany ${mongoBulk.toFixed(2)} s, ${Math.round(N / mongoBulk)} docs/s (restore at ${(mongoBulk / intoMongo.seconds).toFixed(2)}x of it)`,
    );
    console.log(
      `move embedded -> MongoDB, server stopped: backup ${best("backup").toFixed(2)} s + restore ${intoMongo.seconds.toFixed(2)} s = ${(best("backup") + intoMongo.seconds).toFixed(1)} s of downtime for writes`,
    );
  }
  rmSync(work, { recursive: true, force: true });
}

/** Latencies (ms) of PUTs by `writers` concurrent writers until `until()` says stop. */
async function puts(server, writers, until) {
  const latencies = [];
  const body = randomBytes(4096);
  await Promise.all(
    Array.from({ length: writers }, async (_, w) => {
      for (let i = 0; !until(); i++) {
        const t = performance.now();
        const r = await fetch(`${server.url}/resources/v2/data/home/w${w}/p${i % 200}.json`, {
          method: "PUT",
          body,
          headers: { authorization: server.authorization },
        });
        await r.arrayBuffer();
        if (r.status >= 300) throw new Error(`PUT answered ${r.status}`);
        latencies.push(performance.now() - t);
      }
    }),
  );
  return latencies;
}

function p99(xs) {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length * 0.99)] ?? 0;
}

async function putP99() {
  const server = await startTrove({ logLevel: opts["log-level"] });
  console.log(
    `put-p99 bench: ${N} resources (every tenth ${LARGE} B, others ${SIZE} B), load ${loadavg()[0].toFixed(1)}`,
  );
  try {
    const body = randomBytes(SIZE);
    const large = randomBytes(LARGE);
    for (let w = 0; w < 8; w++) {
      await fetch(`${server.url}/resources/v2/data/home/w${w}/`, {
        method: "PUT",
        headers: { authorization: server.authorization },
      });
    }
    for (let i = 0; i < N; i += 16) {
      await Promise.all(
        Array.from({ length: Math.min(16, N - i) }, (_, k) =>
          fetch(`${server.url}/resources/v2/data/home/r${i + k}.json`, {
            method: "PUT",
            body: (i + k) % 10 === 0 ? large : body,
            headers: { authorization: server.authorization },
          }).then((r) => r.arrayBuffer()),
        ),
      );
    }
    const token = server.authorization.slice("Bearer ".length);
    const out = join(tmpdir(), `trove-bench-put-p99-${process.pid}.tar`);
    const quiet = [];
    const during = [];
    const backups = [];
    for (let round = 0; round < Number(opts.rounds); round++) {
      let done = false;
      const backup = timed(process.execPath, [
        CLI,
        "backup",
        "--url",
        server.url,
        "--token",
        token,
        "-o",
        out,
        "-q",
      ]).then((r) => {
        done = true;
        return r;
      });
      const withBackup = await puts(server, 8, () => done);
      const { seconds } = await backup;
      backups.push(`${seconds.toFixed(1)} s`);
      during.push(...withBackup);
      const stopAt = performance.now() + seconds * 1000;
      quiet.push(...(await puts(server, 8, () => performance.now() >= stopAt)));
    }
    const archive = statSync(out).size;
    rmSync(out, { force: true });
    console.log(
      `backups over --url beside the writers: ${backups.join(", ")} (archive of the last ${mib(archive)}), load ${loadavg()[0].toFixed(1)}`,
    );
    const ratio = p99(during) / p99(quiet);
    console.log(
      `PUT p99 during a backup: ${p99(during).toFixed(1)} ms (${during.length} PUTs) against ${p99(quiet).toFixed(1)} ms without (${quiet.length} PUTs): ${ratio.toFixed(2)}x (target <= 2x)`,
    );
  } finally {
    await server.stop();
  }
}
