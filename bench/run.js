// Request benchmarks: GET, PUT and conditional GET (304) of a 4 KiB resource,
// against Trove (authentication off; with a bearer token, logging off and at
// info to /dev/null) and against a bare node:http baseline measured in the same
// run; then the 1 GiB streaming benchmark (bench/stream-1g.js).
// `npm run bench [-- --duration 10 --connections 32]`; `--only auth` compares
// GET with authentication off and on, alternating, with server CPU per request.
// `--mongodb-url URL` runs every Trove on that MongoDB (a fresh database per
// server); `--only backends --mongodb-url URL [--mongodb-pid PID]` compares the
// embedded store with MongoDB, alternating, with the CPU per request of Trove
// and of the database server (PID) besides. `--only apache` (and a bare `npm run
// bench` where Apache httpd is installed) compares Trove at its defaults with
// Apache mod_dav (bench/apache.js) and node:http: GET, 304 and PUT. `--only durability`: PUT
// with `--sqlite-synchronous full` against the default normal. `--only apache-large`
// (bench/apache-large.js) compares GET and PUT of 1 MiB and 64 MiB, `--only apache-listing`
// (bench/apache-listing.js) listings of 1,000 and 10,000 entries against PROPFIND; a bare `npm
// run bench` runs both too where httpd and wrk are installed (4 connections, rounds of <= 5 s).
// `--only apache` and `apache-large` measure Trove at its defaults (`--workers auto`, one worker
// per core) and also `trove serve --workers N` (`--workers N`, default 1; `--workers 0` leaves it
// out). Every other case runs one worker (bench/servers.js).

import { cpus, loadavg } from "node:os";
import { parseArgs } from "node:util";
import autocannon from "autocannon";
import { apacheAvailable, prepareApache, startApache } from "./apache.js";
import { runApacheLarge } from "./apache-large.js";
import { runApacheListing } from "./apache-listing.js";
import { BODY_4K, ETAG_4K } from "./payloads.js";
import { cpuSeconds, median, pad, times, treeCpuSeconds } from "./report.js";
import { buildDist, startBaseline, startTrove } from "./servers.js";
import { runStream } from "./stream-1g.js";
import { wrkAvailable, wrkLoad } from "./wrk.js";

const { values: opts } = parseArgs({
  options: {
    duration: { type: "string", default: "10" },
    warmup: { type: "string", default: "3" },
    connections: { type: "string", default: "32" },
    only: { type: "string" },
    "skip-build": { type: "boolean", default: false },
    "stream-size-mib": { type: "string", default: "1024" },
    rounds: { type: "string", default: "3" },
    "mongodb-url": { type: "string" },
    "mongodb-pid": { type: "string" },
    // `--only apache` and `apache-large`: also Trove with `--workers N` (0: not; default 1).
    workers: { type: "string" },
  },
});
const mongodbUrl = opts["mongodb-url"];
const mongodbPid = opts["mongodb-pid"] === undefined ? undefined : Number(opts["mongodb-pid"]);
const duration = Number(opts.duration);
const warmup = Number(opts.warmup);
const connections = Number(opts.connections);
/** `--only apache` and `apache-large` also measure `trove serve --workers N` when N > 0. */
const troveWorkers = Number(opts.workers ?? 1);

const RESOURCE = "/resources/v2/data/home/resource-4k.bin";
const PUT_TARGET = "/resources/v2/data/home/put-4k.bin";

/** One autocannon run; autocannon takes the path from the URL, not from a `path` option. */
function load(base, { path, ...request }, seconds) {
  return autocannon({ url: base + path, connections, pipelining: 1, duration: seconds, ...request });
}

/** Responses with an expected status per second, with what went wrong besides. */
function summarize(result, expected) {
  let ok = 0;
  const other = [];
  for (const [code, { count }] of Object.entries(result.statusCodeStats)) {
    if (expected.includes(Number(code))) ok += count;
    else other.push(`${count}x${code}`);
  }
  if (result.errors) other.push(`${result.errors} errors`);
  if (result.timeouts) other.push(`${result.timeouts} timeouts`);
  return { rps: ok / result.duration, p50: result.latency.p50, p99: result.latency.p99, other: other.join(" ") };
}

async function prepareTrove(server) {
  const auth = server.authorization ? { authorization: server.authorization } : {};
  const put = await fetch(server.url + RESOURCE, { method: "PUT", body: BODY_4K, headers: auth });
  if (put.status !== 201) throw new Error(`setup PUT answered ${put.status}: ${await put.text()}`);
  const again = await fetch(server.url + PUT_TARGET, { method: "PUT", body: BODY_4K, headers: auth });
  if (again.status !== 201) throw new Error(`setup PUT answered ${again.status}`);
  return { ...server, auth, get: RESOURCE, put: PUT_TARGET, etag: put.headers.get("etag") };
}

/** A case's request for a target, with the target's Authorization header. */
function requestFor(c, t) {
  const request = c.request(t);
  return { ...request, headers: { ...t.auth, ...request.headers } };
}

const CASES = [
  { name: "GET 4 KiB", expected: [200], request: (t) => ({ path: t.get }) },
  {
    name: "PUT 4 KiB",
    expected: [200, 201, 204],
    request: (t) => ({
      path: t.put,
      method: "PUT",
      body: BODY_4K,
      headers: { "content-type": "application/octet-stream" },
    }),
  },
  {
    name: "GET 304 (If-None-Match)",
    expected: [304],
    request: (t) => ({ path: t.get, headers: { "if-none-match": t.etag } }),
  },
];

async function runRequests() {
  const targets = [];
  try {
    targets.push({ label: "node:http baseline", ...(await startBaseline()), get: "/r", put: "/r", etag: ETAG_4K });
    targets.push({
      label: "trove, no auth, silent",
      ...(await prepareTrove(await startTrove({ logLevel: "silent", auth: "off", mongodbUrl }))),
    });
    targets.push({
      label: "trove, log silent",
      ...(await prepareTrove(await startTrove({ logLevel: "silent", mongodbUrl }))),
    });
    targets.push({
      label: "trove, log info",
      ...(await prepareTrove(await startTrove({ logLevel: "info", mongodbUrl }))),
    });

    const rows = [];
    for (const c of CASES) {
      let baseline = 0;
      for (const t of targets) {
        const request = requestFor(c, t);
        if (warmup > 0) await load(t.url, request, warmup);
        const s = summarize(await load(t.url, request, duration), c.expected);
        if (t === targets[0]) baseline = s.rps;
        rows.push({ case: c.name, target: t.label, ...s, ratio: baseline > 0 ? s.rps / baseline : Number.NaN });
        process.stderr.write(`  ${c.name}, ${t.label}: ${Math.round(s.rps)} req/s\n`);
      }
    }

    console.log(`\nTrove's storage: ${mongodbUrl ? `MongoDB at ${mongodbUrl}` : "embedded (SQLite)"}`);
    const head = `${pad("case", 26)}${pad("server", 24)}${pad("req/s", 9, true)}${pad("p50 ms", 8, true)}${pad("p99 ms", 8, true)}${pad("vs baseline", 13, true)}  other`;
    console.log(`${head}\n${"-".repeat(head.length + 6)}`);
    for (const r of rows) {
      console.log(
        `${pad(r.case, 26)}${pad(r.target, 24)}${pad(Math.round(r.rps), 9, true)}${pad(r.p50, 8, true)}${pad(r.p99, 8, true)}${pad(times(r.ratio), 13, true)}  ${r.other}`,
      );
    }
  } finally {
    for (const t of targets) await t.stop();
  }
}

/**
 * GET and 304 with authentication off (anonymous) and on (a development-issuer token), both
 * logging silent, in alternating rounds so that the machine's drift hits both alike; reports the
 * median req/s and server CPU per request of each, and on/off ratios.
 */
async function runAuth() {
  const rounds = Number(opts.rounds);
  const off = { label: "auth off", ...(await prepareTrove(await startTrove({ logLevel: "silent", auth: "off" }))) };
  const on = { label: "auth on (token)", ...(await prepareTrove(await startTrove({ logLevel: "silent" }))) };
  try {
    const results = [];
    for (const c of CASES.filter((x) => x.name !== "PUT 4 KiB")) {
      const runs = new Map([
        [off, []],
        [on, []],
      ]);
      for (const t of [off, on]) if (warmup > 0) await load(t.url, requestFor(c, t), warmup);
      for (let r = 0; r < rounds; r++) {
        for (const t of r % 2 === 0 ? [off, on] : [on, off]) {
          const cpu0 = cpuSeconds(t.pid);
          const result = await load(t.url, requestFor(c, t), duration);
          const cpu = cpuSeconds(t.pid) - cpu0;
          const s = summarize(result, c.expected);
          const answered = s.rps * result.duration;
          runs.get(t).push({ ...s, cpuPerRequest: answered > 0 ? (cpu * 1e6) / answered : Number.NaN });
          process.stderr.write(`  ${c.name}, ${t.label}, round ${r + 1}: ${Math.round(s.rps)} req/s\n`);
        }
      }
      const summary = (t) => ({
        rps: median(runs.get(t).map((x) => x.rps)),
        cpu: median(runs.get(t).map((x) => x.cpuPerRequest)),
        p50: median(runs.get(t).map((x) => x.p50)),
        p99: median(runs.get(t).map((x) => x.p99)),
        other: runs
          .get(t)
          .map((x) => x.other)
          .filter(Boolean)
          .join(" "),
      });
      results.push({ case: c.name, off: summary(off), on: summary(on) });
    }
    console.log(`\nAuthentication off and on, median of ${rounds} alternating rounds, logging silent`);
    const head = `${pad("case", 26)}${pad("server", 18)}${pad("req/s", 9, true)}${pad("CPU/req", 10, true)}${pad("p50 ms", 8, true)}${pad("p99 ms", 8, true)}${pad("on/off", 9, true)}  other`;
    console.log(`${head}\n${"-".repeat(head.length + 6)}`);
    for (const r of results) {
      for (const [label, x] of [
        ["auth off", r.off],
        ["auth on (token)", r.on],
      ]) {
        const ratio = x === r.on ? `${(r.on.rps / r.off.rps).toFixed(2)}x` : "";
        console.log(
          `${pad(r.case, 26)}${pad(label, 18)}${pad(Math.round(x.rps), 9, true)}${pad(`${Math.round(x.cpu)} µs`, 10, true)}${pad(x.p50, 8, true)}${pad(x.p99, 8, true)}${pad(ratio, 9, true)}  ${x.other}`,
        );
      }
    }
  } finally {
    await off.stop();
    await on.stop();
  }
}

/**
 * The node:http baseline, Trove on the embedded store and Trove on MongoDB (each with a token,
 * logging silent), in rounds whose order rotates so that the machine's drift hits all alike.
 * Reports per server the median req/s and its range, the median of each round's ratio to that
 * round's baseline, the CPU per request of the server process and, for MongoDB with
 * `--mongodb-pid`, of the database server's process over the same load.
 */
async function runBackends() {
  if (!mongodbUrl) throw new Error("--only backends needs --mongodb-url");
  const rounds = Number(opts.rounds);
  const targets = [];
  try {
    targets.push({ label: "node:http baseline", ...(await startBaseline()), get: "/r", put: "/r", etag: ETAG_4K });
    targets.push({ label: "trove, embedded", ...(await prepareTrove(await startTrove({ logLevel: "silent" }))) });
    targets.push({
      label: "trove, MongoDB",
      dbPid: mongodbPid,
      ...(await prepareTrove(await startTrove({ logLevel: "silent", mongodbUrl }))),
    });
    const results = [];
    for (const c of CASES) {
      const runs = new Map(targets.map((t) => [t, []]));
      for (const t of targets) if (warmup > 0) await load(t.url, requestFor(c, t), warmup);
      for (let r = 0; r < rounds; r++) {
        const order = targets.map((_, i) => targets[(i + r) % targets.length]);
        const round = new Map();
        for (const t of order) {
          const cpu0 = cpuSeconds(t.pid);
          const db0 = t.dbPid === undefined ? 0 : cpuSeconds(t.dbPid);
          const result = await load(t.url, requestFor(c, t), duration);
          const cpu = cpuSeconds(t.pid) - cpu0;
          const db = t.dbPid === undefined ? Number.NaN : cpuSeconds(t.dbPid) - db0;
          const s = summarize(result, c.expected);
          const answered = s.rps * result.duration;
          round.set(t, { ...s, cpu: (cpu * 1e6) / answered, db: (db * 1e6) / answered });
          process.stderr.write(`  ${c.name}, ${t.label}, round ${r + 1}: ${Math.round(s.rps)} req/s\n`);
        }
        for (const t of targets) {
          const x = round.get(t);
          runs.get(t).push({ ...x, ratio: x.rps / round.get(targets[0]).rps });
        }
      }
      for (const t of targets) {
        const xs = runs.get(t);
        const of = (k) => xs.map((x) => x[k]);
        results.push({
          case: c.name,
          target: t.label,
          rps: median(of("rps")),
          low: Math.min(...of("rps")),
          high: Math.max(...of("rps")),
          ratio: median(of("ratio")),
          cpu: median(of("cpu")),
          db: median(of("db")),
          p50: median(of("p50")),
          p99: median(of("p99")),
          other: of("other").filter(Boolean).join(" "),
        });
      }
    }
    console.log(`\nEmbedded store and MongoDB (${mongodbUrl}), median of ${rounds} rotating rounds, logging silent`);
    const head = `${pad("case", 26)}${pad("server", 20)}${pad("req/s", 8, true)}${pad("range", 15, true)}${pad("vs baseline", 13, true)}${pad("CPU/req", 10, true)}${pad("DB CPU/req", 12, true)}${pad("p50 ms", 8, true)}${pad("p99 ms", 8, true)}  other`;
    console.log(`${head}\n${"-".repeat(head.length + 6)}`);
    const us = (x) => (Number.isNaN(x) ? "-" : `${Math.round(x)} µs`);
    for (const r of results) {
      console.log(
        `${pad(r.case, 26)}${pad(r.target, 20)}${pad(Math.round(r.rps), 8, true)}${pad(`${Math.round(r.low)}-${Math.round(r.high)}`, 15, true)}${pad(times(r.ratio), 13, true)}${pad(us(r.cpu), 10, true)}${pad(us(r.db), 12, true)}${pad(r.p50, 8, true)}${pad(r.p99, 8, true)}  ${r.other}`,
      );
    }
  } finally {
    for (const t of targets) await t.stop();
  }
}

/** The cases of the Apache comparison: `path` and `newPrefix` name each server's own resources. */
const APACHE_CASES = [
  CASES[0],
  { name: "HEAD 4 KiB", request: (t) => ({ path: t.get, method: "HEAD" }), wrkOnly: true },
  CASES[2],
  { ...CASES[1], name: "PUT 4 KiB (replacing)" },
  {
    name: "PUT 4 KiB (new)",
    request: (t) => ({
      path: `${t.newPrefix}0.bin`,
      uniquePrefix: t.newPrefix,
      method: "PUT",
      body: BODY_4K,
      headers: { "content-type": "application/octet-stream" },
    }),
    wrkOnly: true,
  },
];

/**
 * Trove at its defaults (a development-issuer token on every request, one log line per request
 * at info to /dev/null) against Apache httpd with mod_dav and bare node:http, in alternating
 * rounds; medians of `--rounds`, with Trove/Apache and Trove/node:http ratios (issue 14). The load
 * comes from wrk (one thread) where it is installed, as in the issue; from autocannon otherwise
 * (then without HEAD and new-resource PUTs, which autocannon 8 cannot measure).
 */
async function runApache() {
  if (!apacheAvailable()) throw new Error("--only apache needs Apache httpd: apt-get install apache2");
  const rounds = Math.max(3, Number(opts.rounds));
  const useWrk = wrkAvailable();
  const measure = async (t, c, seconds) => {
    const request = requestFor(c, t);
    if (useWrk) return wrkLoad(t.url + request.path, request, seconds, connections);
    return summarize(await load(t.url, request, seconds), [200, 201, 204, 304]);
  };
  const targets = [];
  // The machine may be shared: its load, before and after, says how far the figures can be read.
  const load = () =>
    loadavg()
      .map((x) => x.toFixed(2))
      .join(", ");
  const loadBefore = load();
  try {
    const baseline = await startBaseline();
    targets.push({ label: "node:http", ...baseline, get: "/r", put: "/r", newPrefix: "/n", etag: ETAG_4K });
    const apache = await prepareApache(await startApache(), BODY_4K, "/r.bin", "/p.bin");
    targets.push({ label: "apache mod_dav", ...apache, newPrefix: "/new-" });
    const trove = await prepareTrove(await startTrove({ logLevel: "info", mongodbUrl, workers: "auto" }));
    targets.push({ label: "trove (defaults)", ...trove, newPrefix: "/resources/v2/data/home/new-" });
    if (troveWorkers > 0) {
      const workers = String(troveWorkers);
      const other = await prepareTrove(await startTrove({ logLevel: "info", mongodbUrl, workers }));
      targets.push({ label: `trove --workers ${workers}`, ...other, newPrefix: "/resources/v2/data/home/new-" });
    }
    const [bare, ,] = targets;
    const rows = [];
    for (const c of APACHE_CASES.filter((x) => useWrk || !x.wrkOnly)) {
      const runs = new Map(targets.map((t) => [t, []]));
      for (const t of targets) if (warmup > 0) await measure(t, c, warmup);
      for (let r = 0; r < rounds; r++) {
        const order = r % 2 === 0 ? targets : [...targets].reverse();
        for (const t of order) {
          const before = treeCpuSeconds(t.pid);
          const s = await measure(t, c, duration);
          // Server CPU per answer: the whole process tree (Apache's children), utime + stime.
          const cpu = ((treeCpuSeconds(t.pid) - before) * 1e6) / (s.rps * duration);
          runs.get(t).push({ ...s, cpu });
          process.stderr.write(`  ${c.name}, ${t.label}, round ${r + 1}: ${Math.round(s.rps)} req/s ${s.other}\n`);
        }
      }
      const rps = (t) => median(runs.get(t).map((x) => x.rps));
      const cpu = (t) => median(runs.get(t).map((x) => x.cpu));
      for (const t of targets) {
        const isTrove = t.label.startsWith("trove");
        rows.push({
          case: c.name,
          target: t.label,
          rps: rps(t),
          p50: median(runs.get(t).map((x) => x.p50)),
          p99: median(runs.get(t).map((x) => x.p99)),
          cpu: cpu(t),
          vsApache: isTrove ? times(rps(t) / rps(targets[1])) : "",
          vsBare: isTrove ? times(rps(t) / rps(bare)) : "",
          // Issue 32's target: Trove's CPU per answer against bare node:http's, same run.
          cpuVsBare: isTrove ? times(cpu(t) / cpu(bare)) : "",
          other: runs
            .get(t)
            .map((x) => x.other)
            .filter(Boolean)
            .join(" "),
        });
      }
    }
    console.log(
      `\nTrove against Apache mod_dav and node:http, ${useWrk ? "wrk, 1 thread" : "autocannon"}, ${connections} connections, ${duration} s rounds, median of ${rounds} alternating rounds; Node ${process.version}; load average ${loadBefore} before, ${load()} after (CPU/node: CPU per answer over node:http's)`,
    );
    const head = `${pad("case", 26)}${pad("server", 20)}${pad("req/s", 9, true)}${pad("p50 ms", 8, true)}${pad("p99 ms", 8, true)}${pad("CPU/req", 10, true)}${pad("CPU/node", 10, true)}${pad("/apache", 9, true)}${pad("/node", 8, true)}  other`;
    console.log(`${head}\n${"-".repeat(head.length + 6)}`);
    for (const r of rows) {
      const ms = (x) => (Number.isNaN(x) ? "-" : x.toFixed(2));
      console.log(
        `${pad(r.case, 26)}${pad(r.target, 20)}${pad(Math.round(r.rps), 9, true)}${pad(ms(r.p50), 8, true)}${pad(ms(r.p99), 8, true)}${pad(`${Math.round(r.cpu)} µs`, 10, true)}${pad(r.cpuVsBare, 10, true)}${pad(r.vsApache, 9, true)}${pad(r.vsBare, 8, true)}  ${r.other}`,
      );
    }
  } finally {
    for (const t of targets) await t.stop();
  }
}

/**
 * The cost of `--sqlite-synchronous full` (docs/storage.md): PUT 4 KiB replacing and new, and a
 * 64 KiB PUT (contents over the inline limit: a blob file and its directory are fsynced too),
 * against the same server at its default `normal`, in alternating rounds (wrk where installed).
 */
async function runDurability() {
  const rounds = Math.max(3, Number(opts.rounds));
  const useWrk = wrkAvailable();
  const body64k = Buffer.alloc(65536, "trove durability benchmark, 64 KiB. ");
  const cases = APACHE_CASES.filter((c) => c.name.startsWith("PUT") && (useWrk || !c.wrkOnly));
  cases.push({
    name: "PUT 64 KiB (replacing)",
    request: (t) => ({
      path: t.put,
      method: "PUT",
      body: body64k,
      headers: { "content-type": "application/octet-stream" },
    }),
  });
  const targets = [];
  try {
    for (const mode of ["normal", "full"]) {
      const trove = await prepareTrove(
        await startTrove({ logLevel: "info", serveArgs: ["--sqlite-synchronous", mode] }),
      );
      targets.push({ label: `trove synchronous=${mode}`, ...trove, newPrefix: `/resources/v2/data/home/new-${mode}-` });
    }
    const measure = async (t, c, seconds) => {
      const request = requestFor(c, t);
      if (useWrk) return wrkLoad(t.url + request.path, request, seconds, connections);
      return summarize(await load(t.url, request, seconds), [200, 201]);
    };
    console.log(`\nPUT durability: synchronous=normal (default) against full, median of ${rounds} alternating rounds`);
    const head = `${pad("case", 26)}${pad("server", 28)}${pad("req/s", 9, true)}${pad("p50 ms", 8, true)}${pad("p99 ms", 8, true)}${pad("/normal", 9, true)}`;
    console.log(`${head}\n${"-".repeat(head.length)}`);
    for (const c of cases) {
      const runs = new Map(targets.map((t) => [t, []]));
      for (const t of targets) if (warmup > 0) await measure(t, c, warmup);
      for (let r = 0; r < rounds; r++) {
        for (const t of r % 2 === 0 ? targets : [...targets].reverse()) runs.get(t).push(await measure(t, c, duration));
      }
      const rps = (t) => median(runs.get(t).map((x) => x.rps));
      const ms = (x) => (Number.isNaN(x) ? "-" : x.toFixed(2));
      for (const t of targets) {
        console.log(
          `${pad(c.name, 26)}${pad(t.label, 28)}${pad(Math.round(rps(t)), 9, true)}${pad(ms(median(runs.get(t).map((x) => x.p50))), 8, true)}${pad(ms(median(runs.get(t).map((x) => x.p99))), 8, true)}${pad(times(rps(t) / rps(targets[0])), 9, true)}`,
        );
      }
    }
  } finally {
    for (const t of targets) await t.stop();
  }
}

console.log(
  `Trove benchmarks — ${new Date().toISOString()}, Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? "?"})`,
);
console.log(`autocannon: ${connections} connections, ${duration} s per case after ${warmup} s of warm-up, 1 process`);
if (!opts["skip-build"]) buildDist();
if (opts.only === undefined || opts.only === "requests") await runRequests();
if (opts.only === "auth") await runAuth();
if (opts.only === "backends") await runBackends();
if (opts.only === undefined ? apacheAvailable() : opts.only === "apache") await runApache();
const apacheCases = { duration: Math.min(duration, 5), warmup: Math.min(warmup, 1), rounds: Number(opts.rounds) };
const withApache = apacheAvailable() && wrkAvailable();
if (opts.only === undefined ? withApache : opts.only === "apache-large")
  await runApacheLarge({ ...apacheCases, mongodbUrl, workers: troveWorkers });
if (opts.only === undefined ? withApache : opts.only === "apache-listing")
  await runApacheListing({ ...apacheCases, mongodbUrl });
if (opts.only === "durability") await runDurability();
if (opts.only === undefined || opts.only === "stream") await runStream({ sizeMiB: Number(opts["stream-size-mib"]) });
