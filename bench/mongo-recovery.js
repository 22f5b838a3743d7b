// Time for Trove to recover after its MongoDB comes back (issue 11, item 2): two `trove serve`
// instances on one FerretDB of the benchmark's own, two writers on each, the database stopped
// (SIGTERM) or killed (SIGKILL), alternately, and restarted on the same port and data. Measured
// per instance from the moment the database accepts connections again to the first GET answered
// 200 and to the first PUT acknowledged (which may also wait for a write lease the outage left
// held); median and worst over every restart.
// `node bench/mongo-recovery.js [--restarts 20] [--down 2000] [--ferretdb-bin PATH] [--skip-build]`
// (FerretDB from --ferretdb-bin or TROVE_TEST_FERRETDB_BIN; builds dist/ first unless --skip-build).

import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { buildDist, freePort, startTrove } from "./servers.js";

const { values: opts } = parseArgs({
  options: {
    restarts: { type: "string", default: "20" },
    down: { type: "string", default: "2000" },
    "ferretdb-bin": { type: "string" },
    "skip-build": { type: "boolean", default: false },
  },
});
const RESTARTS = Number(opts.restarts);
const DOWN = Number(opts.down);
const BIN = opts["ferretdb-bin"] ?? process.env.TROVE_TEST_FERRETDB_BIN;
/** Past this an instance counts as not recovered (the issue saw 17 minutes). */
const GIVE_UP = 120_000;
if (!BIN) {
  console.error("needs FerretDB: --ferretdb-bin PATH or TROVE_TEST_FERRETDB_BIN");
  process.exit(2);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function portOpen(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

/** FerretDB on a fixed port and data directory, stopped and started again. */
async function ferretDb() {
  const dir = mkdtempSync(join(tmpdir(), "trove-bench-ferret-"));
  const port = await freePort();
  let child;
  const db = {
    url: `mongodb://127.0.0.1:${port}/`,
    async start() {
      child = spawn(
        BIN,
        [
          "--handler=sqlite",
          `--sqlite-url=file:${dir}/`,
          `--state-dir=${dir}`,
          `--listen-addr=127.0.0.1:${port}`,
          "--debug-addr=-",
          "--telemetry=disable",
          "--log-level=error",
        ],
        { stdio: "ignore" },
      );
      for (let i = 0; i < 3000; i++) {
        if (await portOpen(port)) return;
        await sleep(5);
      }
      throw new Error("FerretDB did not start within 15 s");
    },
    async end(signal) {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise((r) => c.once("exit", r));
      c.kill(signal);
      await exited;
    },
    async dispose() {
      await db.end("SIGKILL");
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await db.start();
  return db;
}

/** Repeats a request until it answers `ok`; ms from `from`, or undefined past GIVE_UP. */
async function firstSuccess(from, attempt, ok) {
  while (Date.now() - from < GIVE_UP) {
    const res = await attempt().catch(() => undefined);
    await res?.text();
    if (res && ok(res.status)) return Date.now() - from;
    await sleep(20);
  }
  return undefined;
}

function summary(values) {
  const done = values.filter((v) => v !== undefined).sort((a, b) => a - b);
  const stuck = values.length - done.length;
  if (done.length === 0) return `never (${stuck} of ${values.length})`;
  const median = done[Math.floor((done.length - 1) / 2)];
  const worst = stuck > 0 ? `never (${stuck} of ${values.length})` : `${done[done.length - 1]} ms`;
  return `median ${median} ms, worst ${worst} (n=${values.length})`;
}

if (!opts["skip-build"]) buildDist();
const db = await ferretDb();
const instances = [];
let running = true;
const writers = [];
try {
  for (let i = 0; i < 2; i++) instances.push(await startTrove({ mongodbUrl: db.url }));
  const headers = (instance) => (instance.authorization ? { authorization: instance.authorization } : {});
  for (const [i, instance] of instances.entries()) {
    for (let w = 0; w < 2; w++) {
      writers.push(
        (async () => {
          for (let n = 0; running; n++) {
            const res = await fetch(`${instance.url}/resources/v2/data/home/i${i}w${w}-${n % 5}.txt`, {
              method: "PUT",
              body: `i${i} w${w} ${n}`,
              headers: headers(instance),
              signal: AbortSignal.timeout(30_000),
            }).catch(() => undefined);
            await res?.text();
            if (!res || res.status >= 300) await sleep(50);
          }
        })(),
      );
    }
  }
  const results = { SIGTERM: { read: [], write: [] }, SIGKILL: { read: [], write: [] } };
  console.log(`FerretDB ${BIN}; ${RESTARTS} restarts, down ${DOWN} ms each; 2 instances, 2 writers each`);
  for (let r = 0; r < RESTARTS; r++) {
    const signal = r % 2 === 0 ? "SIGTERM" : "SIGKILL";
    await sleep(1000);
    await db.end(signal);
    await sleep(DOWN);
    await db.start();
    const back = Date.now();
    const line = [];
    await Promise.all(
      instances.map(async (instance, i) => {
        const [read, write] = await Promise.all([
          firstSuccess(
            back,
            () => fetch(`${instance.url}/resources/v2/data/home/`, { headers: headers(instance) }),
            (s) => s === 200,
          ),
          firstSuccess(
            back,
            () =>
              fetch(`${instance.url}/resources/v2/data/home/probe-${i}.txt`, {
                method: "PUT",
                body: `restart ${r}`,
                headers: headers(instance),
              }),
            (s) => s === 200 || s === 201,
          ),
        ]);
        results[signal].read.push(read);
        results[signal].write.push(write);
        line[i] = `instance ${i}: read ${read ?? "never"} ms, write ${write ?? "never"} ms`;
      }),
    );
    console.log(`restart ${r + 1} (${signal}): ${line.join("; ")}`);
  }
  console.log("\nFrom the database's return to the first answer, per instance and restart:");
  for (const signal of ["SIGTERM", "SIGKILL"]) {
    console.log(`  ${signal}: first GET 200:  ${summary(results[signal].read)}`);
    console.log(`  ${signal}: first PUT 2xx:  ${summary(results[signal].write)}`);
  }
  const all = (k) => [...results.SIGTERM[k], ...results.SIGKILL[k]];
  console.log(`  all:     first GET 200:  ${summary(all("read"))}`);
  console.log(`  all:     first PUT 2xx:  ${summary(all("write"))}`);
} finally {
  running = false;
  await Promise.race([Promise.all(writers), sleep(35_000)]);
  for (const instance of instances) await instance.stop().catch(() => {});
  await db.dispose();
}
