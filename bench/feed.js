// Change-feed benchmarks (issue 3), against `trove serve` in a child process:
//  1. delivery latency: time from a PUT's response to the poll response that carries its
//     event, p50 and p99 over 1,000 changes; baseline: the round trip of a GET of a small
//     resource on the same server, measured in the same run.
//  2. 1,000 concurrent idle long polls: server CPU over 10 s against the same server idle
//     with none, and memory per waiter.
// `node bench/feed.js` (builds dist/ first; `--skip-build` not). With `--mongodb-url URL` the
// server keeps everything on that MongoDB (a fresh database); `--mongodb-pid PID` adds the
// database server's CPU over the idle measurements.

import { readFileSync } from "node:fs";
import * as http from "node:http";
import { parseArgs } from "node:util";
import { buildDist, procStatusBytes, startTrove } from "./servers.js";

const { values: opts } = parseArgs({
  options: {
    "skip-build": { type: "boolean", default: false },
    "mongodb-url": { type: "string" },
    "mongodb-pid": { type: "string" },
  },
});
const mongodbUrl = opts["mongodb-url"];
const databasePid = opts["mongodb-pid"] === undefined ? undefined : Number(opts["mongodb-pid"]);

const CHANGES = 1000;
const IDLE_POLLS = 1000;
const IDLE_SECONDS = 10;
/**
 * How long the idle polls ask to wait, in seconds (the server is started with it as its
 * --poll-wait): long enough that they are all still waiting when measured, even on a database
 * that takes minutes to answer their first reads.
 */
const IDLE_WAIT = 600;
/** Headers every request carries: the server's bearer token. */
let auth = {};

/** One HTTP/1.1 request on a keep-alive agent; resolves with status and body text. */
function request(url, { method = "GET", body, dispatcher, signal } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent: dispatcher, signal, headers: auth }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (s) => {
        text += s;
      });
      res.on("end", () =>
        resolve({ statusCode: res.statusCode, body: { text: async () => text, dump: async () => {} } }),
      );
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end(body);
  });
}

class Agent extends http.Agent {
  constructor({ connections }) {
    super({ keepAlive: true, maxSockets: connections });
  }
  async close() {
    this.destroy();
  }
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100; // utime + stime, in clock ticks of 10 ms
}

async function lastEventId(url) {
  const text = await (await fetch(`${url}/resources/v2/poll`, { headers: auth })).text();
  return Number(/^RESET home (\d+)$/m.exec(text)[1]);
}

async function deliveryLatency(url) {
  const agent = new Agent({ connections: 4 });
  let cursor = await lastEventId(url);
  const seen = new Map();
  let stop = false;
  const follower = (async () => {
    while (!stop) {
      const res = await request(`${url}/resources/v2/poll?store=home:${cursor}&wait=1`, { dispatcher: agent });
      const text = await res.body.text();
      const at = performance.now();
      if (res.statusCode !== 200) continue;
      for (const line of text.trim().split("\n")) {
        const [kind, id, uri] = line.split("|");
        if (kind !== "CHANGE") continue;
        cursor = Math.max(cursor, Number(id));
        if (!seen.has(uri)) seen.set(uri, at);
      }
    }
  })();
  const latencies = [];
  const rtts = [];
  await request(`${url}/resources/v2/data/home/probe.txt`, { method: "PUT", body: "p", dispatcher: agent }).then((r) =>
    r.body.dump(),
  );
  for (let i = 0; i < CHANGES; i++) {
    const uri = `idr://home/lat-${i}.txt`;
    const res = await request(`${url}/resources/v2/data/home/lat-${i}.txt`, {
      method: "PUT",
      body: `v${i}`,
      dispatcher: agent,
    });
    await res.body.dump();
    const answered = performance.now();
    while (!seen.has(uri)) await new Promise((r) => setImmediate(r));
    latencies.push(Math.max(0, seen.get(uri) - answered));
    const t0 = performance.now();
    await (await request(`${url}/resources/v2/data/home/probe.txt`, { dispatcher: agent })).body.dump();
    rtts.push(performance.now() - t0);
  }
  stop = true;
  await follower;
  await agent.close();
  const tenth = Math.floor(CHANGES / 10);
  const firstTenth = latencies.slice(0, tenth).sort((a, b) => a - b);
  const lastTenth = latencies.slice(-tenth).sort((a, b) => a - b);
  latencies.sort((a, b) => a - b);
  rtts.sort((a, b) => a - b);
  return {
    firstP50: percentile(firstTenth, 50),
    lastP50: percentile(lastTenth, 50),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    rttP50: percentile(rtts, 50),
    rttP99: percentile(rtts, 99),
  };
}

/**
 * Waits until the server (and the database server, when its pid is known) use less than 5 % of
 * a core over one second: each new poll first reads its store's events, and on a slow database
 * 1,000 of those reads are still being answered after the first 2 s. Returns the seconds waited,
 * or -1 when they did not settle in time (the idle figures then include that work).
 */
async function settled(pid, limitSeconds) {
  const busy = (p) => {
    const before = cpuSeconds(p);
    return () => cpuSeconds(p) - before >= 0.05;
  };
  const start = performance.now();
  while (performance.now() - start < limitSeconds * 1000) {
    const checks = [busy(pid), ...(databasePid === undefined ? [] : [busy(databasePid)])];
    await new Promise((r) => setTimeout(r, 1000));
    if (!checks.some((isBusy) => isBusy())) return (performance.now() - start) / 1000;
  }
  return -1;
}

async function idlePolls(server) {
  const agent = new Agent({ connections: IDLE_POLLS + 10 });
  const cursor = await lastEventId(server.url);
  const databaseCpu = () => (databasePid === undefined ? Number.NaN : cpuSeconds(databasePid));
  const idleStart = cpuSeconds(server.pid);
  const idleDbStart = databaseCpu();
  await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
  const idleCpu = cpuSeconds(server.pid) - idleStart;
  const idleDbCpu = databaseCpu() - idleDbStart;
  const rssBefore = procStatusBytes(server.pid, "VmRSS");
  const controllers = [];
  const polls = [];
  let answered = 0;
  for (let i = 0; i < IDLE_POLLS; i++) {
    const c = new AbortController();
    controllers.push(c);
    polls.push(
      request(`${server.url}/resources/v2/poll?store=home:${cursor}&wait=${IDLE_WAIT}`, {
        dispatcher: agent,
        signal: c.signal,
      })
        .then((r) => {
          answered += 1;
          return r.body.dump();
        })
        .catch(() => undefined),
    );
  }
  await new Promise((r) => setTimeout(r, 2000)); // all connected and waiting
  const settle = await settled(server.pid, IDLE_WAIT - IDLE_SECONDS - 60);
  const rssWaiting = procStatusBytes(server.pid, "VmRSS");
  const start = cpuSeconds(server.pid);
  const dbStart = databaseCpu();
  await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
  const cpu = cpuSeconds(server.pid) - start;
  const dbCpu = databaseCpu() - dbStart;
  // Polls answered before the end were not waiting throughout (they should all still be).
  const early = answered;
  for (const c of controllers) c.abort();
  await Promise.all(polls);
  await agent.close();
  return { idleCpu, cpu, idleDbCpu, dbCpu, settle, early, perWaiter: (rssWaiting - rssBefore) / IDLE_POLLS };
}

if (!opts["skip-build"]) buildDist();
const server = await startTrove({ logLevel: "silent", mongodbUrl, pollWait: IDLE_WAIT });
auth = { Authorization: server.authorization };
try {
  const lat = await deliveryLatency(server.url);
  const idle = await idlePolls(server);
  const f = (x) => x.toFixed(2);
  const storage = mongodbUrl ? `MongoDB at ${mongodbUrl}` : "embedded store";
  console.log(`\nChange feed (${storage}), one server process, loopback\n`);
  console.log("| measure | value | baseline (same run) | ratio |");
  console.log("|---|---|---|---|");
  console.log(
    `| delivery latency p50, PUT answered -> poll answered | ${f(lat.p50)} ms | GET round trip p50 ${f(lat.rttP50)} ms | ${f(lat.p50 / lat.rttP50)}x |`,
  );
  console.log(
    `| delivery latency p99 | ${f(lat.p99)} ms | GET round trip p99 ${f(lat.rttP99)} ms | ${f(lat.p99 / lat.rttP99)}x |`,
  );
  console.log(
    `| delivery latency p50, changes 1-${CHANGES / 10} and ${CHANGES - CHANGES / 10 + 1}-${CHANGES} | ${f(lat.firstP50)} ms, ${f(lat.lastP50)} ms | - | - |`,
  );
  const settle =
    idle.settle < 0
      ? `not settled within ${IDLE_WAIT - IDLE_SECONDS - 60} s`
      : `settled ${idle.settle.toFixed(0)} s after the first 2 s`;
  console.log(`| ${IDLE_POLLS} new long polls' first reads answered (measured after) | ${settle} | - | - |`);
  console.log(
    `| server CPU, ${IDLE_POLLS} idle long polls, ${IDLE_SECONDS} s | ${f(idle.cpu)} s (${f((100 * idle.cpu) / IDLE_SECONDS)}% of a core) | no polls: ${f(idle.idleCpu)} s | - |`,
  );
  if (databasePid !== undefined) {
    console.log(
      `| database server CPU, same ${IDLE_SECONDS} s | ${f(idle.dbCpu)} s (${f((100 * idle.dbCpu) / IDLE_SECONDS)}% of a core) | no polls: ${f(idle.idleDbCpu)} s | - |`,
    );
  }
  if (idle.early > 0) console.log(`| idle polls answered before the end (not waiting) | ${idle.early} | - | - |`);
  console.log(`| server memory per waiting poll | ${(idle.perWaiter / 1024).toFixed(1)} KiB | - | - |`);
  console.log(`\ntargets: p50 < 5 ms, p99 < 50 ms; CPU near idle with ${IDLE_POLLS} waiting polls`);
} finally {
  await server.stop();
}
