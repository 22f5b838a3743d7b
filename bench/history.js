// History (issue 27, docs/history.md): what keeping versions costs the reads that do not ask for
// them, and how fast history's own reads and restores are, each against a baseline measured in
// the same run, rounds alternating. `node bench/history.js [--rounds 5] [--only CASE]`, CASE one of:
//
//   reads    GET, HEAD and 304 of a 4 KiB resource with 100 versions, keep-versions 30d, against the
//            same on a store with keep-versions 0: server CPU per answer (wrk -t1; HEAD with ab).
//   versions GET ?versions=true of a resource with 10,000 versions: time to list, and the server's
//            RSS growth (VmRSS before, the peak VmHWM during); beside a listing of 10,000 resources.
//   as-of    GET .../?recursive=true&as-of=E of 10,000 entries, 9,000 of them changed since E,
//            against the current listing of the same tree.
//   restore  PUT .../?restore-as-of=E of 1,000 resources after a recursive delete, against
//            `trove push` (the SDK's bin) of the same 1,000 files into an empty directory.
//
// Every server is `trove serve` from dist/ in a child process (bench/servers.js), logging silent,
// a development-issuer token on every request. `--skip-build` skips the tsc build of dist/.

import { execFile } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { BODY_4K } from "./payloads.js";
import { cpuSeconds, median, pad, times } from "./report.js";
import { buildDist, procStatusBytes, resetPeak, startTrove } from "./servers.js";
import { wrkAvailable, wrkLoad } from "./wrk.js";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SDK_BIN = join(ROOT, "sdk/bin/trove.js");

const { values: opts } = parseArgs({
  options: {
    rounds: { type: "string", default: "5" },
    duration: { type: "string", default: "5" },
    warmup: { type: "string", default: "2" },
    connections: { type: "string", default: "32" },
    only: { type: "string" },
    "skip-build": { type: "boolean", default: false },
    "mongodb-url": { type: "string" },
  },
});
const rounds = Number(opts.rounds);
const duration = Number(opts.duration);
const warmup = Number(opts.warmup);
const connections = Number(opts.connections);
const mongodbUrl = opts["mongodb-url"];
const CASES = ["reads", "versions", "as-of", "restore"];
if (opts.only !== undefined && !CASES.includes(opts.only)) {
  process.stderr.write(`--only takes one of ${CASES.join(", ")}\n`);
  process.exit(2);
}
const runs = (name) => opts.only === undefined || opts.only === name;

const DATA = "/resources/v2/data";
const log = (line) => process.stderr.write(`  ${line}\n`);
const ms = (x) => `${x.toFixed(1)} ms`;
const mib = (bytes) => `${(bytes / 1048576).toFixed(1)} MiB`;
/** A change of memory, signed: +2.7 MiB, -3.2 MiB. */
const growth = (bytes) => `${bytes < 0 ? "" : "+"}${mib(bytes)}`;
const spread = (xs, f = (x) => x.toFixed(1)) => `${f(Math.min(...xs))}-${f(Math.max(...xs))}`;
/** The summary lines printed at the end: each target, its measurement, and whether it is met. */
const verdicts = [];

function load() {
  const [one, five] = loadavg();
  return `load average ${one.toFixed(1)} (5 min ${five.toFixed(1)})`;
}

/** A request to a server of startTrove, with its token; throws unless the status is one of `ok`. */
async function call(server, method, path, { body, ok = [200, 201], headers = {} } = {}) {
  const res = await fetch(server.url + path, {
    method,
    body,
    headers: { authorization: server.authorization, "content-type": "application/octet-stream", ...headers },
  });
  const bytes = Buffer.from(await res.arrayBuffer());
  if (!ok.includes(res.status)) throw new Error(`${method} ${path} answered ${res.status}: ${bytes}`);
  return { status: res.status, headers: res.headers, bytes };
}

/** `count` requests, `parallel` at a time. */
async function inBatches(count, each, parallel = 8) {
  for (let i = 0; i < count; i += parallel) {
    await Promise.all(Array.from({ length: Math.min(parallel, count - i) }, (_, k) => each(i + k)));
  }
}

async function createStore(server, name, keepVersions) {
  await call(server, "POST", "/resources/v2/stores", {
    body: JSON.stringify({ name, type: "recursive", settings: { "keep-versions": keepVersions } }),
    headers: { "content-type": "application/json" },
  });
}

/** The store's last event id: a poll without cursors answers `RESET {store} {id}` for each store. */
async function lastEvent(server, store) {
  const text = (await call(server, "GET", "/resources/v2/poll")).bytes.toString();
  const line = text.split("\n").find((l) => l.startsWith(`RESET ${store} `));
  if (!line) throw new Error(`no RESET line for ${store}`);
  return Number(line.split(" ")[2]);
}

/** Milliseconds to fetch `path` whole (the body read to its end); the body's size besides. */
async function timed(server, path) {
  const start = performance.now();
  const { bytes } = await call(server, "GET", path);
  return { ms: performance.now() - start, size: bytes.length };
}

function trove() {
  return startTrove({ logLevel: "silent", mongodbUrl });
}

// --- reads: GET, HEAD and 304 with and without history ---------------------------------------

async function runReads() {
  if (!wrkAvailable()) throw new Error("the reads case needs wrk (apt-get install wrk) and ab (apache2-utils)");
  const targets = [];
  try {
    // The third server is the second again: how far two servers of one configuration differ.
    for (const [label, keep] of [
      ["keep-versions 30d", "30d"],
      ["keep-versions 0", "0"],
      ["keep-versions 0, control", "0"],
    ]) {
      const server = await trove();
      targets.push({ label, server });
      await createStore(server, "bench", keep);
      const path = `${DATA}/bench/resource-4k.bin`;
      // 100 writes: the resource's listing of versions has 100 states (99 kept and the current).
      for (let i = 0; i < 99; i++) await call(server, "PUT", path, { body: randomBytes(4096) });
      const last = await call(server, "PUT", path, { body: BODY_4K });
      Object.assign(targets.at(-1), { path, etag: last.headers.get("etag") });
      const states = (await call(server, "GET", `${path}?versions=true`)).bytes.toString().match(/<version /g);
      log(`${label}: ${states?.length} states listed by ?versions=true`);
    }
    const cases = [
      { name: "GET 4 KiB", request: (t) => ({ headers: { authorization: t.server.authorization } }) },
      { name: "HEAD 4 KiB", request: (t) => ({ method: "HEAD", headers: { authorization: t.server.authorization } }) },
      {
        name: "304 (If-None-Match)",
        request: (t) => ({ headers: { authorization: t.server.authorization, "if-none-match": t.etag } }),
      },
    ];
    const rows = [];
    for (const c of cases) {
      const perRound = new Map(targets.map((t) => [t, []]));
      for (const t of targets) await wrkLoad(t.server.url + t.path, c.request(t), warmup, connections);
      for (let r = 0; r < rounds; r++) {
        // The order rotates, so that no server always runs first after a quiet pause.
        for (const t of targets.map((_, i) => targets[(i + r) % targets.length])) {
          const before = cpuSeconds(t.server.pid);
          const s = await wrkLoad(t.server.url + t.path, c.request(t), duration, connections);
          const cpu = ((cpuSeconds(t.server.pid) - before) * 1e6) / (s.rps * duration);
          perRound.get(t).push({ ...s, cpu });
          log(`${c.name}, ${t.label}, round ${r + 1}: ${Math.round(s.rps)} answers/s, ${cpu.toFixed(1)} µs ${s.other}`);
        }
      }
      const [on, off, control] = targets.map((t) => perRound.get(t));
      const ratios = on.map((x, i) => x.cpu / off[i].cpu);
      const controlRatios = control.map((x, i) => x.cpu / off[i].cpu);
      rows.push({ case: c.name, on, off, control, ratios, controlRatios });
    }
    console.log(
      `\nReads with history on (keep-versions 30d, 100 versions) and off (keep-versions 0; and a second server with 0, the control), ${rounds} rotating rounds of ${duration} s, ${connections} connections; server CPU per answer, µs: median (rounds)`,
    );
    const head = `${pad("case", 21)}${pad("30d", 19)}${pad("0", 19)}${pad("0, control", 19)}${pad("30d/0 (rounds)", 22)}${pad("control/0 (rounds)", 22)}answers/s 30d / 0`;
    console.log(`${head}\n${"-".repeat(head.length + 4)}`);
    const ratioText = (xs) => `${median(xs).toFixed(3)} (${spread(xs, (x) => x.toFixed(2))})`;
    for (const r of rows) {
      const cpuText = (xs) => {
        const cpu = xs.map((x) => x.cpu);
        return `${median(cpu).toFixed(1)} (${spread(cpu, (x) => x.toFixed(0))})`;
      };
      const rps = (xs) => Math.round(median(xs.map((x) => x.rps)));
      const ratio = median(r.ratios);
      console.log(
        `${pad(r.case, 21)}${pad(cpuText(r.on), 19)}${pad(cpuText(r.off), 19)}${pad(cpuText(r.control), 19)}${pad(ratioText(r.ratios), 22)}${pad(ratioText(r.controlRatios), 22)}${rps(r.on)} / ${rps(r.off)}`,
      );
      verdicts.push([
        `${r.case}: CPU per answer with history within 5 % of without`,
        `${((ratio - 1) * 100).toFixed(1)} % (median of per-round ratios; control ${((median(r.controlRatios) - 1) * 100).toFixed(1)} %)`,
        ratio <= 1.05,
      ]);
    }
  } finally {
    for (const t of targets) await t.server.stop();
  }
}

// --- versions and as-of: one server with history on -------------------------------------------

/**
 * One server (history on) holding both trees: `versions.bin` written 10,001 times (10,000 kept
 * versions and the current state), and `tree/` of 10,000 resources in 10 directories, 9,000 of
 * them written again after the moment E.
 */
async function historyServer() {
  const server = await trove();
  const started = performance.now();
  const one = `${DATA}/home/versions.bin`;
  await inBatches(10_001, (i) => call(server, "PUT", one, { body: `state ${i} `.repeat(20) }));
  log(`10,001 writes of versions.bin: ${((performance.now() - started) / 1000).toFixed(1)} s`);
  await call(server, "PUT", `${DATA}/home/tree/`);
  for (let d = 0; d < 10; d++) await call(server, "PUT", `${DATA}/home/tree/d${d}/`);
  const file = (i) => `${DATA}/home/tree/d${i % 10}/r${String(i).padStart(5, "0")}.json`;
  await inBatches(10_000, (i) => call(server, "PUT", file(i), { body: `{"n":${i},"at":"E"}` }));
  const E = await lastEvent(server, "home");
  await inBatches(9_000, (i) => call(server, "PUT", file(i), { body: `{"n":${i},"at":"after E"}` }));
  log(`tree/: 10,000 written, E = ${E}, 9,000 written again (${((performance.now() - started) / 1000).toFixed(1)} s)`);
  return { server, E };
}

/**
 * Alternating rounds of listings: each round lists with every request of `requests` `perRound`
 * times; returns per request the times (ms) of all its listings and the median of each round.
 */
async function alternate(server, requests, perRound) {
  const results = requests.map(() => ({ all: [], rounds: [], cpu: [] }));
  for (const r of requests) await timed(server, r.path);
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? requests.keys() : [...requests.keys()].reverse();
    for (const i of order) {
      const times = [];
      const before = cpuSeconds(server.pid);
      for (let k = 0; k < perRound; k++) times.push((await timed(server, requests[i].path)).ms);
      const cpu = ((cpuSeconds(server.pid) - before) * 1000) / perRound;
      results[i].all.push(...times);
      results[i].rounds.push(median(times));
      results[i].cpu.push(cpu);
      log(
        `${requests[i].name}, round ${round + 1}: median ${ms(median(times))} (${spread(times)}), server CPU ${ms(cpu)} a listing`,
      );
    }
  }
  return results;
}

/** "median (rounds low-high)" of per-round figures in ms. */
const perRounds = (xs) => `${ms(median(xs))} (rounds ${spread(xs)})`;

async function runVersionsAndAsOf() {
  const { server, E } = await historyServer();
  try {
    const versionsPath = `${DATA}/home/versions.bin?versions=true`;
    const listingPath = `${DATA}/home/tree/?recursive=true`;
    const asOfPath = `${DATA}/home/tree/?recursive=true&as-of=${E}`;
    const sizes = {
      versions: (await timed(server, versionsPath)).size,
      listing: (await timed(server, listingPath)).size,
      asOf: (await timed(server, asOfPath)).size,
    };
    const states = (await call(server, "GET", versionsPath)).bytes.toString().match(/<version /g)?.length;
    const entries = (await call(server, "GET", asOfPath)).bytes.toString().match(/<resource /g)?.length;
    log(`versions.bin lists ${states} states (${sizes.versions} bytes); the as-of listing ${entries} entries`);

    if (runs("versions")) {
      // Memory: RSS before the listings, the peak during 20 of them, and RSS after.
      const rssBefore = procStatusBytes(server.pid, "VmRSS");
      const peakReset = resetPeak(server.pid);
      const [versions, listing] = await alternate(
        server,
        [
          { name: "versions of one resource (10,000)", path: versionsPath },
          { name: "listing of 10,000 resources", path: listingPath },
        ],
        10,
      );
      const peak = procStatusBytes(server.pid, "VmHWM");
      const rssAfter = procStatusBytes(server.pid, "VmRSS");
      // And 50 more listings of versions alone: does RSS keep growing?
      for (let i = 0; i < 50; i++) await timed(server, versionsPath);
      const rssAfterMore = procStatusBytes(server.pid, "VmRSS");
      const v = median(versions.rounds);
      console.log(
        `\nHistory of one resource with 10,000 versions (GET ?versions=true, ${sizes.versions} bytes of XML)`,
      );
      console.log(
        `  time to list: ${perRounds(versions.rounds)}, all ${versions.all.length} ${spread(versions.all)}; server CPU a listing ${perRounds(versions.cpu)}`,
      );
      console.log(
        `  baseline, a recursive listing of 10,000 resources (${sizes.listing} bytes): ${perRounds(listing.rounds)}; server CPU ${perRounds(listing.cpu)}; time versions/listing ${times(v / median(listing.rounds))}`,
      );
      console.log(
        `  server RSS: ${mib(rssBefore)} before, ${mib(rssAfter)} after ${versions.all.length + listing.all.length + 2} listings (${growth(rssAfter - rssBefore)}), ${mib(rssAfterMore)} after 50 more of versions (${growth(rssAfterMore - rssAfter)}); peak ${peakReset ? `${mib(peak)} (${growth(peak - rssBefore)})` : "(VmHWM could not be reset)"}`,
      );
      verdicts.push([`versions of 10,000: under 100 ms`, ms(v), v < 100]);
      verdicts.push([
        "versions of 10,000: flat memory",
        `RSS ${growth(rssAfterMore - rssAfter)} over 50 more listings, peak ${growth(peak - rssBefore)}`,
        rssAfterMore - rssAfter < 8 * 1048576,
      ]);
    }
    if (runs("as-of")) {
      const [asOf, current] = await alternate(
        server,
        [
          { name: "as-of listing (10,000, 9,000 changed since)", path: asOfPath },
          { name: "current listing (10,000)", path: listingPath },
        ],
        10,
      );
      const ratios = current.rounds.map((c, i) => c / asOf.rounds[i]);
      const cpuRatios = current.cpu.map((c, i) => c / asOf.cpu[i]);
      const speed = median(ratios);
      const cpuSpeed = median(cpuRatios);
      console.log(`\nAs-of listing of 10,000 entries (9,000 changed since E) against the current listing`);
      console.log(`  as-of:   ${perRounds(asOf.rounds)}; server CPU ${perRounds(asOf.cpu)}; ${sizes.asOf} bytes`);
      console.log(
        `  current: ${perRounds(current.rounds)}; server CPU ${perRounds(current.cpu)}; ${sizes.listing} bytes`,
      );
      console.log(
        `  speed of as-of against current (current / as-of): time ${times(speed)} (rounds ${spread(ratios, (x) => x.toFixed(2))}), server CPU ${times(cpuSpeed)} (rounds ${spread(cpuRatios, (x) => x.toFixed(2))})`,
      );
      verdicts.push([
        "as-of listing at least half as fast as the current one",
        `time ${times(speed)}, server CPU ${times(cpuSpeed)}`,
        speed >= 0.5,
      ]);
    }
  } finally {
    await server.stop();
  }
}

// --- restore against push --------------------------------------------------------------------

function run(command, args, env) {
  return new Promise((resolve, reject) => {
    const start = performance.now();
    execFile(command, args, { env: { ...process.env, ...env }, encoding: "utf8" }, (err, stdout, stderr) =>
      err
        ? reject(new Error(`${args.join(" ")}: ${stderr || err.message}`))
        : resolve({ ms: performance.now() - start, stdout, stderr }),
    );
  });
}

async function runRestore() {
  const server = await trove();
  const local = mkdtempSync(join(tmpdir(), "trove-bench-push-"));
  try {
    // 1,000 files in 4 directories, 1 byte to 3 KiB each (as design resources), the same on disk
    // (for the push) and below home/sub/ (for the restore).
    const dirs = ["a", "b", "c", "d"];
    const files = Array.from({ length: 1000 }, (_, i) => ({
      path: `${dirs[i % 4]}/f${String(i).padStart(4, "0")}.json`,
      body: randomBytes(1 + ((i * 37) % 3000)),
    }));
    await call(server, "PUT", `${DATA}/home/sub/`);
    for (const d of dirs) {
      await call(server, "PUT", `${DATA}/home/sub/${d}/`);
      mkdirSync(join(local, d));
    }
    for (const f of files) writeFileSync(join(local, f.path), f.body);
    await inBatches(files.length, (i) =>
      call(server, "PUT", `${DATA}/home/sub/${files[i].path}`, { body: files[i].body }),
    );
    const E = await lastEvent(server, "home");
    const env = { TROVE_URL: server.url, TROVE_TOKEN: server.authorization.slice("Bearer ".length) };
    // The CLI's fixed cost: a push with nothing to transfer (start-up, a listing, 1,000 MD5s).
    await run(process.execPath, [SDK_BIN, "push", local, "home/sub"], env);

    const restore = [];
    const push = [];
    const idle = [];
    // The server's CPU time during each (ms): the restore's work, and that of the push's requests.
    const restoreCpu = [];
    const pushCpu = [];
    for (let r = 0; r < rounds; r++) {
      const steps = [
        async () => {
          await call(server, "DELETE", `${DATA}/home/sub/`);
          const start = performance.now();
          const cpu = cpuSeconds(server.pid);
          const out = await call(server, "PUT", `${DATA}/home/sub/?restore-as-of=${E}`);
          restore.push(performance.now() - start);
          restoreCpu.push((cpuSeconds(server.pid) - cpu) * 1000);
          const changes = /changes="(\d+)"/.exec(out.bytes.toString())?.[1];
          if (changes !== "1005") throw new Error(`the restore made ${changes} changes, not 1,005`);
          log(`restore, round ${r + 1}: ${ms(restore.at(-1))} (${changes} changes)`);
        },
        async () => {
          const target = `home/pushed-${r}`;
          const cpu = cpuSeconds(server.pid);
          const out = await run(process.execPath, [SDK_BIN, "push", local, target], env);
          push.push(out.ms);
          pushCpu.push((cpuSeconds(server.pid) - cpu) * 1000);
          const again = await run(process.execPath, [SDK_BIN, "push", local, target], env);
          idle.push(again.ms);
          log(
            `push, round ${r + 1}: ${ms(out.ms)} (${out.stderr.trim() || out.stdout.trim()}); again, nothing to do: ${ms(again.ms)}`,
          );
          await call(server, "DELETE", `${DATA}/home/pushed-${r}/`);
        },
      ];
      for (const step of r % 2 === 0 ? steps : steps.reverse()) await step();
    }
    const ratios = push.map((p, i) => p / restore[i]);
    const speed = median(ratios);
    console.log(
      `\nRestore of 1,000 resources (4 directories) after a recursive delete, against trove push of the same files`,
    );
    const cpuText = (xs) => `${ms(median(xs))} (${spread(xs, (x) => x.toFixed(0))})`;
    console.log(
      `  restore-as-of (one REST PUT, 1,005 changes): median ${ms(median(restore))} (${spread(restore)}); server CPU ${cpuText(restoreCpu)}`,
    );
    console.log(
      `  trove push into an empty directory (a process): median ${ms(median(push))} (${spread(push)}); server CPU ${cpuText(pushCpu)}`,
    );
    console.log(
      `  trove push again, nothing to transfer (its fixed cost): median ${ms(median(idle))} (${spread(idle)})`,
    );
    console.log(
      `  speed of restore against push (push time / restore time): ${times(speed)} (rounds ${spread(ratios, (x) => x.toFixed(2))})`,
    );
    verdicts.push(["restore of 1,000 at least half as fast as trove push", times(speed), speed >= 0.5]);
  } finally {
    await server.stop();
    rmSync(local, { recursive: true, force: true });
  }
}

console.log(
  `History benchmarks (issue 27) — ${new Date().toISOString()}, Node ${process.version}, ${cpus().length} CPUs (${cpus()[0]?.model ?? "?"}), ${load()}`,
);
console.log(`Trove's storage: ${mongodbUrl ? `MongoDB at ${mongodbUrl}` : "embedded (SQLite)"}; ${rounds} rounds`);
if (!opts["skip-build"]) buildDist();
if (runs("reads")) await runReads();
if (runs("versions") || runs("as-of")) await runVersionsAndAsOf();
if (runs("restore")) await runRestore();
console.log(`\nTargets (${load()} at the end)`);
for (const [target, measured, met] of verdicts) {
  console.log(`  ${met ? "met    " : "NOT met"}  ${pad(target, 64)} ${measured}`);
}
