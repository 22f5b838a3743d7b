// Change-feed benchmarks (issues 3 and 14), against `trove serve` in a child process:
//  1. delivery latency: time from a PUT's response to the poll response that carries its
//     event, p50 and p99 over 1,000 changes, with one writer and with 8 concurrent writers (each
//     PUTs, waits until the follower has its event, PUTs again); baselines: the round trip of a GET
//     of a small resource on the same server, and, for 8 writers, the same client against a bare
//     node:http server keeping a change feed in memory (bench/baseline-server.js), rounds
//     alternating between the two servers (`--latency-rounds N`, 3 by default), percentiles over
//     all rounds' deliveries. On a virtual machine the scheduler's wake-up jitter sets a floor
//     under any p99; the baseline measures it in the same run.
//  2. parked long polls (bench/parked-polls.js): 10,000 polls parked from a child process, server
//     memory per poll after a GC and CPU over 10 idle seconds, beside a bare node:http server
//     holding as many requests open (1,000 polls and no baseline with --mongodb-url).
// `node bench/feed.js` (builds dist/ first; `--skip-build` not). With `--mongodb-url URL` the
// server keeps everything on that MongoDB (a fresh database); `--mongodb-pid PID` adds the
// database server's CPU over the idle measurements. `--parked N` sets the number of parked polls,
// `--rounds N` the rounds of the parked-poll measurement (alternating which server goes first).

import * as http from "node:http";
import { parseArgs } from "node:util";
import { runParked } from "./parked-polls.js";
import { buildDist, startBaseline, startTrove } from "./servers.js";

const { values: opts } = parseArgs({
  options: {
    "skip-build": { type: "boolean", default: false },
    "mongodb-url": { type: "string" },
    "mongodb-pid": { type: "string" },
    parked: { type: "string" },
    rounds: { type: "string", default: "1" },
    "latency-only": { type: "boolean", default: false },
    "latency-rounds": { type: "string", default: "3" },
  },
});
const mongodbUrl = opts["mongodb-url"];
const databasePid = opts["mongodb-pid"] === undefined ? undefined : Number(opts["mongodb-pid"]);

const CHANGES = 1000;
const WRITERS = 8;
const PARKED = Number(opts.parked ?? (mongodbUrl ? 1000 : 10000));
const IDLE_SECONDS = 10;
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

async function lastEventId(url) {
  const text = await (await fetch(`${url}/resources/v2/poll`, { headers: auth })).text();
  return Number(/^RESET home (\d+)$/m.exec(text)[1]);
}

/**
 * `writers` concurrent writers, CHANGES PUTs in all; each writer waits until the follower has
 * its event before its next PUT, then (one writer only) times a GET round trip as the baseline.
 */
async function deliveryLatency(url, writers) {
  const agent = new Agent({ connections: writers + 2 });
  let cursor = await lastEventId(url);
  const seen = new Map();
  /** Writers waiting for the follower to see their change, by URI (no busy loop in this process). */
  const waiting = new Map();
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
        waiting.get(uri)?.();
      }
    }
  })();
  const latencies = [];
  const rtts = [];
  await request(`${url}/resources/v2/data/home/probe.txt`, { method: "PUT", body: "p", dispatcher: agent }).then((r) =>
    r.body.dump(),
  );
  const prefix = `lat${writers}`;
  const writer = async (w) => {
    for (let i = w; i < CHANGES; i += writers) {
      const uri = `idr://home/${prefix}-${i}.txt`;
      const res = await request(`${url}/resources/v2/data/home/${prefix}-${i}.txt`, {
        method: "PUT",
        body: `v${i}`,
        dispatcher: agent,
      });
      await res.body.dump();
      const answered = performance.now();
      if (!seen.has(uri)) await new Promise((r) => waiting.set(uri, r));
      waiting.delete(uri);
      latencies[i] = Math.max(0, seen.get(uri) - answered);
      if (writers > 1) continue;
      const t0 = performance.now();
      await (await request(`${url}/resources/v2/data/home/probe.txt`, { dispatcher: agent })).body.dump();
      rtts.push(performance.now() - t0);
    }
  };
  await Promise.all(Array.from({ length: writers }, (_, w) => writer(w)));
  stop = true;
  await follower;
  await agent.close();
  const tenth = Math.floor(CHANGES / 10);
  const firstTenth = latencies.slice(0, tenth).sort((a, b) => a - b);
  const lastTenth = latencies.slice(-tenth).sort((a, b) => a - b);
  latencies.sort((a, b) => a - b);
  rtts.sort((a, b) => a - b);
  return {
    latencies,
    firstP50: percentile(firstTenth, 50),
    lastP50: percentile(lastTenth, 50),
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
    rttP50: rtts.length ? percentile(rtts, 50) : Number.NaN,
    rttP99: rtts.length ? percentile(rtts, 99) : Number.NaN,
  };
}

if (!opts["skip-build"]) buildDist();
const server = await startTrove({ logLevel: "silent", mongodbUrl });
auth = { Authorization: server.authorization };
const baseline = await startBaseline();
const rounds = Number(opts["latency-rounds"]);
let one;
const many = { trove: [], baseline: [] };
try {
  one = await deliveryLatency(server.url, 1);
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? ["trove", "baseline"] : ["baseline", "trove"];
    for (const name of order) {
      const url = name === "trove" ? server.url : baseline.url;
      many[name].push(...(await deliveryLatency(url, WRITERS)).latencies);
    }
    console.error(`  delivery round ${round + 1}/${rounds} done`);
  }
} finally {
  await Promise.all([server.stop(), baseline.stop()]);
}
const f = (x) => x.toFixed(2);
const storage = mongodbUrl ? `MongoDB at ${mongodbUrl}` : "embedded store";
const pooled = (name, p) =>
  percentile(
    many[name].sort((a, b) => a - b),
    p,
  );
console.log(`\nChange feed (${storage}), one server process, loopback\n`);
console.log("| measure | value | baseline (same run) | ratio |");
console.log("|---|---|---|---|");
console.log(
  `| delivery latency p50, PUT answered -> poll answered, 1 writer | ${f(one.p50)} ms | GET round trip p50 ${f(one.rttP50)} ms | ${f(one.p50 / one.rttP50)}x |`,
);
console.log(
  `| delivery latency p99, 1 writer | ${f(one.p99)} ms | GET round trip p99 ${f(one.rttP99)} ms | ${f(one.p99 / one.rttP99)}x |`,
);
console.log(
  `| delivery latency p50, changes 1-${CHANGES / 10} and ${CHANGES - CHANGES / 10 + 1}-${CHANGES}, 1 writer | ${f(one.firstP50)} ms, ${f(one.lastP50)} ms | - | - |`,
);
for (const [label, p] of [
  ["p50", 50],
  ["p99", 99],
]) {
  const [t, b] = [pooled("trove", p), pooled("baseline", p)];
  console.log(
    `| delivery latency ${label}, ${WRITERS} concurrent writers, ${rounds} rounds | ${f(t)} ms | bare node:http feed in memory ${f(b)} ms | ${f(t / b)}x |`,
  );
}
console.log(`\ntargets: p50 < 5 ms, p99 < 50 ms (issue 14: p99 < 5 ms with ${WRITERS} writers, embedded)`);
if (!opts["latency-only"]) {
  await runParked({
    polls: PARKED,
    rounds: Number(opts.rounds),
    idleSeconds: IDLE_SECONDS,
    mongodbUrl,
    databasePid,
    baseline: !mongodbUrl,
  });
}
