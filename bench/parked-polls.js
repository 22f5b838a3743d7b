// Parked long polls (issue 14, A): the server memory and CPU that 10,000 long polls cost while
// they wait, beside a bare node:http server holding as many requests open (the floor: what Node
// itself needs per connection and request), measured in the same run.
//
//   node bench/parked-polls.js [--skip-build] [--polls 10000] [--rounds 1] [--idle-seconds 10]
//   node bench/parked-polls.js --snapshots [--retainers] [--baseline] [--polls 2000] [--top 40]
//
// `npm run bench:feed` (bench/feed.js) runs it after the delivery latency. Every server runs in a
// child process of its own, and so do the polls: a client child (this file with `--role client`)
// opens one HTTP/1.1 keep-alive connection per poll with a raw socket and writes one request on
// each, so neither the client's memory nor its event loop is the server's. Per server:
//
//  1. warm-up: 500 polls parked and released, so that code paths are compiled and lazy state made;
//  2. a full GC in the server (it runs with `--expose-gc --require bench/gc-on-signal.cjs`, and
//     SIGUSR2 makes it collect and write `process.memoryUsage()` to a file), then VmRSS;
//  3. the client parks the polls; once the server has used under 5 % of a core for a second
//     (every poll's first read done), a GC again and VmRSS: bytes per poll = the difference / polls;
//  4. the server's CPU time (utime + stime of /proc/{pid}/stat) over the idle seconds;
//  5. the client reports how many polls were answered before it let them go (must be none).
//
// `--snapshots` measures Trove alone another way: a heap snapshot (node's `--heapsnapshot-signal`)
// before and after parking the polls, diffed by constructor (objects, closures, arrays, strings),
// printed per poll: where the bytes of a parked poll go.
//
// File descriptors: each side holds one per poll. Both the server and the client inherit this
// shell's `ulimit -n` (20,000 on the machine of the recorded runs); the client raises nothing
// (Node cannot), so a lower limit is an error that names it. Trove is started with
// `--max-connections`, `--max-long-lived` and `--max-long-lived-per-caller` above the polls (the
// defaults follow the open-file limit, docs/security.md "Capacity", and give one token 1,000) and
// `--poll-wait 600` so that the polls outlast the measurement.

import { fork } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import * as http from "node:http";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { cpuSeconds } from "./report.js";
import { buildDist, freePort, procStatusBytes, startChild, startTrove } from "./servers.js";

const SELF = fileURLToPath(import.meta.url);
const GC_PRELOAD = fileURLToPath(new URL("./gc-on-signal.cjs", import.meta.url));
const POLL_WAIT = 600;
const WARMUP_POLLS = 500;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits until each pid uses less than 5 % of a core over one second. Returns the seconds waited,
 * or -1 when they did not settle within `limitSeconds`.
 */
export async function settled(pids, limitSeconds) {
  const start = performance.now();
  while (performance.now() - start < limitSeconds * 1000) {
    const before = pids.map(cpuSeconds);
    await sleep(1000);
    if (pids.every((p, i) => cpuSeconds(p) - before[i] < 0.05)) return (performance.now() - start) / 1000;
  }
  return -1;
}

// ---- the client child: parks polls on raw sockets ----

async function clientRole({ url, path, count, authorization }) {
  const { hostname, port } = new URL(url);
  const head =
    `GET ${path} HTTP/1.1\r\nHost: ${hostname}:${port}\r\n` +
    (authorization ? `Authorization: ${authorization}\r\n` : "") +
    "\r\n";
  const sockets = [];
  let answered = 0;
  let failed = 0;
  let firstError;
  const open = () =>
    new Promise((resolve) => {
      const socket = net.connect({ host: hostname, port: Number(port) });
      let seen = false;
      const mark = () => {
        if (!seen) answered += 1;
        seen = true;
      };
      socket.on("connect", () => {
        socket.write(head);
        resolve();
      });
      socket.on("data", mark);
      socket.on("end", mark);
      socket.on("error", (err) => {
        failed += 1;
        firstError ??= err.message;
        resolve();
      });
      sockets.push(socket);
    });
  // In batches: the listen backlog (511) would drop a burst of 10,000 SYNs.
  for (let i = 0; i < count; i += 200) {
    const batch = [];
    for (let j = i; j < Math.min(count, i + 200); j++) batch.push(open());
    await Promise.all(batch);
  }
  process.send({ parked: sockets.length, failed, firstError });
  process.on("message", (m) => {
    if (m === "report") process.send({ answered, failed, firstError });
    if (m === "close") {
      for (const s of sockets) s.destroy();
      process.send({ closed: true });
      process.disconnect();
    }
  });
}

/** Starts a client child that parks `count` polls; resolves with a handle once they were all sent. */
async function parkPolls(url, path, count, authorization) {
  const child = fork(SELF, ["--role", "client"], {
    env: { ...process.env, PARK_URL: url, PARK_PATH: path, PARK_COUNT: String(count), PARK_AUTH: authorization ?? "" },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  const next = () =>
    new Promise((resolve, reject) => {
      child.once("message", resolve);
      child.once("exit", (code) => reject(new Error(`poll client exited with ${code}`)));
    });
  const parked = await next();
  if (parked.failed > 0) {
    child.kill();
    throw new Error(
      `${parked.failed} of ${count} polls could not connect (${parked.firstError}); is ulimit -n (${count} + some needed on each side) high enough?`,
    );
  }
  return {
    async report() {
      child.send("report");
      return next();
    },
    async close() {
      child.send("close");
      await next();
      await new Promise((r) => (child.exitCode === null ? child.once("exit", r) : r()));
    },
  };
}

// ---- the baseline: a bare node:http server that holds every /park request open ----

function baselineRole(port) {
  // The least a long-poll server must hold: each response, to answer it later, until its close.
  const parked = new Set();
  const server = http.createServer({ requestTimeout: 0 }, (req, res) => {
    if (!req.url.startsWith("/park")) return res.end("ok\n");
    parked.add(res);
    res.once("close", () => parked.delete(res));
  });
  server.listen(port, "127.0.0.1");
}

// ---- measuring ----

/** A full GC in the server, then its memory figures (process.memoryUsage() and VmRSS). */
async function memoryAfterGc(server) {
  const before = statMtime(server.memoryFile);
  process.kill(server.pid, "SIGUSR2");
  for (let i = 0; i < 200 && statMtime(server.memoryFile) === before; i++) await sleep(50);
  await sleep(200); // the file is complete and the collection's effects settled
  const usage = JSON.parse(readFileSync(server.memoryFile, "utf8"));
  return { ...usage, vmRss: procStatusBytes(server.pid, "VmRSS") };
}

function statMtime(file) {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

async function startMeasured(kind, { serveArgs = [], mongodbUrl, polls, snapshots = false }) {
  const dir = mkdtempSync(join(tmpdir(), "trove-parked-"));
  const memoryFile = join(dir, "memory.json");
  const nodeArgs = ["--expose-gc", "--require", GC_PRELOAD];
  if (snapshots) nodeArgs.push(`--heapsnapshot-signal=${SNAPSHOT_SIGNAL}`, `--diagnostic-dir=${dir}`);
  const env = { TROVE_BENCH_MEMORY_FILE: memoryFile };
  const cleanup = () => rmSync(dir, { recursive: true, force: true });
  if (kind === "baseline") {
    const port = await freePort();
    const server = await startChild([SELF, "--role", "baseline", "--port", String(port)], "/", port, {
      nodeArgs,
      env,
      cleanup,
    });
    // A request of the same size as Trove's polls (a token of the development issuer's length):
    // Node holds the request line and headers of every request in flight.
    return {
      ...server,
      dir,
      memoryFile,
      path: "/park?store=home:1&wait=600&pad=xxxxxxxxx",
      authorization: `Bearer ${"x".repeat(708)}`,
    };
  }
  const server = await startTrove({
    logLevel: "silent",
    mongodbUrl,
    pollWait: POLL_WAIT,
    serveArgs: [
      "--max-connections",
      String(polls + 1000),
      "--max-long-lived",
      String(polls),
      "--max-long-lived-per-caller",
      String(polls),
      ...serveArgs,
    ],
    nodeArgs,
    env,
  });
  const text = await (
    await fetch(`${server.url}/resources/v2/poll`, { headers: { Authorization: server.authorization } })
  ).text();
  const cursor = /^RESET home (\d+)$/m.exec(text)[1];
  const stop = server.stop;
  return {
    ...server,
    dir,
    memoryFile,
    path: `/resources/v2/poll?store=home:${cursor}&wait=${POLL_WAIT}`,
    async stop() {
      await stop();
      cleanup();
    },
  };
}

/**
 * Parks `polls` polls on one server (kind "baseline" or "trove") and measures it; `databasePid`
 * (MongoDB) is waited for to settle as well and its CPU reported.
 */
export async function measureParked(kind, { polls, idleSeconds = 10, mongodbUrl, databasePid, settleLimit = 300 }) {
  const server = await startMeasured(kind, { mongodbUrl, polls });
  const pids = databasePid === undefined ? [server.pid] : [server.pid, databasePid];
  try {
    const warm = await parkPolls(server.url, server.path, WARMUP_POLLS, server.authorization);
    await settled(pids, 60);
    await warm.close();
    await sleep(1000);
    await settled(pids, 60);
    const idleStart = cpuSeconds(server.pid);
    await sleep(idleSeconds * 1000);
    const idleCpu = cpuSeconds(server.pid) - idleStart;
    const before = await memoryAfterGc(server);
    const client = await parkPolls(server.url, server.path, polls, server.authorization);
    const settle = await settled(pids, settleLimit);
    const steadyRss = procStatusBytes(server.pid, "VmRSS");
    const cpuStart = pids.map(cpuSeconds);
    await sleep(idleSeconds * 1000);
    const cpu = pids.map((p, i) => cpuSeconds(p) - cpuStart[i]);
    const after = await memoryAfterGc(server);
    const { answered } = await client.report();
    await client.close();
    const per = (field) => (after[field] - before[field]) / polls;
    return {
      kind,
      polls,
      settle,
      answered,
      idleCpu,
      cpu: cpu[0],
      databaseCpu: cpu[1],
      rssBefore: before.vmRss,
      rssAfter: after.vmRss,
      perPoll: per("vmRss"),
      steadyPerPoll: (steadyRss - before.vmRss) / polls,
      heapPerPoll: per("heapUsed"),
      externalPerPoll: per("external"),
    };
  } finally {
    await server.stop();
  }
}

// ---- heap snapshots, diffed by constructor ----

const SNAPSHOT_SIGNAL = "SIGWINCH";

/** Makes the server write a heap snapshot into its directory; resolves with the file once complete. */
async function heapSnapshot(server) {
  const existing = new Set(readdirSync(server.dir).filter((f) => f.endsWith(".heapsnapshot")));
  process.kill(server.pid, SNAPSHOT_SIGNAL);
  for (let i = 0; i < 1200; i++) {
    await sleep(250);
    const file = readdirSync(server.dir).find((f) => f.endsWith(".heapsnapshot") && !existing.has(f));
    if (file === undefined) continue;
    // Written in pieces: complete once its JSON parses.
    try {
      return { file, graph: JSON.parse(readFileSync(join(server.dir, file), "utf8")) };
    } catch {
      // not complete yet
    }
  }
  throw new Error("the server wrote no heap snapshot within 300 s");
}

/** Self sizes and counts by node type and constructor (strings all as one). */
export function heapByConstructor(graph) {
  const meta = graph.snapshot.meta;
  const fields = meta.node_fields;
  const types = meta.node_types[0];
  const typeAt = fields.indexOf("type");
  const nameAt = fields.indexOf("name");
  const sizeAt = fields.indexOf("self_size");
  const { nodes, strings } = graph;
  const totals = new Map();
  for (let i = 0; i < nodes.length; i += fields.length) {
    const type = types[nodes[i + typeAt]];
    const name =
      type === "string" || type === "concatenated string" || type === "sliced string" ? "" : strings[nodes[i + nameAt]];
    const key = `${type} ${name.slice(0, 60)}`;
    const t = totals.get(key) ?? { count: 0, size: 0 };
    t.count += 1;
    t.size += nodes[i + sizeAt];
    totals.set(key, t);
  }
  return totals;
}

/**
 * The objects of `graph` whose ids are not in `before` (made since), grouped by type, constructor
 * and what holds them (the first retainer's type and constructor and the edge's name).
 */
export function newObjectsByRetainer(before, graph) {
  const meta = graph.snapshot.meta;
  const nf = meta.node_fields.length;
  const ef = meta.edge_fields.length;
  const types = meta.node_types[0];
  const edgeTypes = meta.edge_types[0];
  const [typeAt, nameAt, idAt, sizeAt, edgesAt] = ["type", "name", "id", "self_size", "edge_count"].map((f) =>
    meta.node_fields.indexOf(f),
  );
  const [edgeTypeAt, edgeNameAt, toAt] = ["type", "name_or_index", "to_node"].map((f) => meta.edge_fields.indexOf(f));
  const { nodes, edges, strings } = graph;
  const oldIds = new Set();
  for (let i = 0; i < before.nodes.length; i += nf) oldIds.add(before.nodes[i + idAt]);
  const retainer = new Int32Array(nodes.length / nf).fill(-1);
  const via = new Array(nodes.length / nf);
  let e = 0;
  for (let i = 0; i < nodes.length; i += nf) {
    for (let k = 0; k < nodes[i + edgesAt]; k++, e += ef) {
      const edgeType = edgeTypes[edges[e + edgeTypeAt]];
      if (edgeType === "weak") continue;
      const to = edges[e + toAt] / nf;
      if (retainer[to] !== -1) continue;
      retainer[to] = i / nf;
      via[to] =
        edgeType === "element" || edgeType === "hidden"
          ? `[${edges[e + edgeNameAt]}]`.replace(/\d+/, "n")
          : strings[edges[e + edgeNameAt]];
    }
  }
  const label = (n) => {
    const type = types[nodes[n * nf + typeAt]];
    return type.endsWith("string") ? type : `${type} ${String(strings[nodes[n * nf + nameAt]]).slice(0, 40)}`;
  };
  const totals = new Map();
  for (let n = 0; n < nodes.length / nf; n++) {
    if (oldIds.has(nodes[n * nf + idAt])) continue;
    const r = retainer[n];
    const key = `${label(n)} <- ${r < 0 ? "(none)" : label(r)} .${via[n]}`;
    const t = totals.get(key) ?? { count: 0, size: 0 };
    t.count += 1;
    t.size += nodes[n * nf + sizeAt];
    totals.set(key, t);
  }
  return totals;
}

/** Parks `polls` polls on Trove between two heap snapshots; prints what grew, per poll. */
async function snapshotParked({ kind, polls, top, retainers }) {
  const server = await startMeasured(kind, { polls, snapshots: true });
  try {
    const warm = await parkPolls(server.url, server.path, WARMUP_POLLS, server.authorization);
    await settled([server.pid], 60);
    await warm.close();
    await sleep(1000);
    await settled([server.pid], 60);
    const beforeGraph = (await heapSnapshot(server)).graph;
    const before = heapByConstructor(beforeGraph);
    const client = await parkPolls(server.url, server.path, polls, server.authorization);
    await settled([server.pid], 300);
    const afterGraph = (await heapSnapshot(server)).graph;
    const after = heapByConstructor(afterGraph);
    const { answered } = await client.report();
    await client.close();
    const rows = [];
    let total = 0;
    for (const [key, a] of after) {
      const b = before.get(key) ?? { count: 0, size: 0 };
      const size = (a.size - b.size) / polls;
      total += size;
      rows.push({ key, size, count: (a.count - b.count) / polls });
    }
    rows.sort((x, y) => y.size - x.size);
    console.log(`\nHeap snapshot diff, ${kind}, ${polls} parked polls (${answered} answered early), per poll:\n`);
    console.log("| bytes | count | type and constructor |\n|---:|---:|---|");
    for (const r of rows.slice(0, top)) console.log(`| ${r.size.toFixed(0)} | ${r.count.toFixed(2)} | ${r.key} |`);
    console.log(`\ntotal self size per poll: ${total.toFixed(0)} bytes`);
    if (retainers) {
      const made = [...newObjectsByRetainer(beforeGraph, afterGraph)]
        .map(([key, t]) => ({ key, size: t.size / polls, count: t.count / polls }))
        .sort((x, y) => y.size - x.size);
      console.log(`\nObjects made since the first snapshot, by what holds them, per poll:\n`);
      console.log("| bytes | count | object <- holder .edge |\n|---:|---:|---|");
      for (const r of made.slice(0, top)) console.log(`| ${r.size.toFixed(0)} | ${r.count.toFixed(2)} | ${r.key} |`);
    }
  } finally {
    await server.stop();
  }
}

const kib = (b) => `${(b / 1024).toFixed(1)} KiB`;
const mb = (b) => `${(b / 1e6).toFixed(0)} MB`;

/** Prints the rows of one or more rounds (each a baseline and a Trove measurement). */
export function printParked(rounds, idleSeconds) {
  console.log(
    `\nParked long polls: ${rounds[0].trove.polls} per server, HTTP/1.1 keep-alive, client in its own process\n`,
  );
  console.log(
    "| round | server | RSS before -> after (after GC) | per poll (RSS) | per poll (V8 heap) | per poll (RSS, no GC) | CPU over " +
      `${idleSeconds} s parked | CPU, ${idleSeconds} s, no polls | answered early |`,
  );
  console.log("|---|---|---|---|---|---|---|---|---|");
  rounds.forEach((r, i) => {
    for (const m of [r.baseline, r.trove]) {
      if (!m) continue;
      const name = m.kind === "baseline" ? "node:http baseline" : "trove";
      const settle = m.settle < 0 ? " (did not settle)" : "";
      console.log(
        `| ${i + 1} | ${name} | ${mb(m.rssBefore)} -> ${mb(m.rssAfter)} | ${kib(m.perPoll)} | ${kib(m.heapPerPoll)} | ${kib(m.steadyPerPoll)} | ${m.cpu.toFixed(2)} s${settle}${m.databaseCpu === undefined ? "" : `, database ${m.databaseCpu.toFixed(2)} s`} | ${m.idleCpu.toFixed(2)} s | ${m.answered} |`,
      );
    }
    if (r.baseline)
      console.log(
        `|  | trove - baseline | | ${kib(r.trove.perPoll - r.baseline.perPoll)} | ${kib(r.trove.heapPerPoll - r.baseline.heapPerPoll)} | | | | |`,
      );
  });
  console.log("\ntarget: trove under 10 KiB per parked poll, no CPU while idle");
}

/** Rounds alternate the order of the two servers (the machine is shared). */
export async function runParked({ polls, rounds = 1, idleSeconds = 10, mongodbUrl, databasePid, baseline = true }) {
  const results = [];
  for (let i = 0; i < rounds; i++) {
    const round = {};
    const order = i % 2 === 0 ? ["baseline", "trove"] : ["trove", "baseline"];
    for (const kind of order) {
      if (kind === "baseline" && !baseline) continue;
      round[kind] = await measureParked(kind, { polls, idleSeconds, mongodbUrl, databasePid });
    }
    results.push(round);
  }
  printParked(results, idleSeconds);
  return results;
}

const { values: opts } = parseArgs({
  options: {
    role: { type: "string" },
    port: { type: "string" },
    "skip-build": { type: "boolean", default: false },
    polls: { type: "string" },
    rounds: { type: "string", default: "1" },
    "idle-seconds": { type: "string", default: "10" },
    snapshots: { type: "boolean", default: false },
    baseline: { type: "boolean", default: false },
    retainers: { type: "boolean", default: false },
    top: { type: "string", default: "40" },
  },
  strict: false,
});

if (opts.role === "client") {
  await clientRole({
    url: process.env.PARK_URL,
    path: process.env.PARK_PATH,
    count: Number(process.env.PARK_COUNT),
    authorization: process.env.PARK_AUTH || undefined,
  });
} else if (opts.role === "baseline") {
  baselineRole(Number(opts.port));
} else if (process.argv[1] === SELF) {
  if (!opts["skip-build"]) buildDist();
  if (opts.snapshots)
    await snapshotParked({
      kind: opts.baseline ? "baseline" : "trove",
      retainers: opts.retainers,
      polls: Number(opts.polls ?? 2000),
      top: Number(opts.top),
    });
  else
    await runParked({
      polls: Number(opts.polls ?? 10000),
      rounds: Number(opts.rounds),
      idleSeconds: Number(opts["idle-seconds"]),
    });
}
