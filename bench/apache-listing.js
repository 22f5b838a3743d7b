// Listings against Apache httpd mod_dav (issue 14): a directory of 1,000 entries (Trove's XML
// listing against PROPFIND Depth: 1) and a tree of 10,000 files in 10 directories of 1,000
// (Trove's ?recursive=true against PROPFIND Depth: infinity, allowed by bench/apache.js), the
// same tree on both, made through each server's own PUT (and MKCOL on Apache). Load from wrk,
// a few connections, alternating rounds, medians; entries per second (listings/s x the entries
// one listing answers) and Trove/Apache ratios.
// `node bench/apache-listing.js [--duration 5] [--rounds 3] [--connections 4] [--skip-build]`,
// or `node bench/run.js --only apache-listing`.

import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";
import { apacheAvailable, startApache } from "./apache.js";
import { median, pad } from "./report.js";
import { buildDist, startTrove } from "./servers.js";
import { wrkAvailable, wrkLoad } from "./wrk.js";

const FLAT = 1000;
const TREE_DIRS = 10;
const TREE_FILES = 1000;
const PROPFIND_BODY = Buffer.from(
  '<?xml version="1.0" encoding="utf-8"?>\n<D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>\n',
);

/** Runs `tasks` (functions answering promises), `width` at a time. */
async function pool(tasks, width) {
  let next = 0;
  const worker = async () => {
    while (next < tasks.length) await tasks[next++]();
  };
  await Promise.all(Array.from({ length: width }, worker));
}

function expectOk(what, answer) {
  if (answer.status < 200 || answer.status >= 300) throw new Error(`${what} answered ${answer.status}`);
}

const name = (i) => `entry-${String(i).padStart(4, "0")}.txt`;
const body = (path) => `contents of ${path}\n`;

/** The flat directory and the tree under `root` (a URL ending in "/"), with `mkdir` and PUT. */
async function makeTree(root, headers, mkdir) {
  const put = (path) => async () => {
    const answer = await fetch(root + path, { method: "PUT", body: body(path), headers });
    await answer.arrayBuffer();
    expectOk(`PUT ${path}`, answer);
  };
  await mkdir(`${root}flat/`);
  await mkdir(`${root}tree/`);
  const dirs = Array.from({ length: TREE_DIRS }, (_, d) => `tree/dir-${String(d).padStart(2, "0")}/`);
  for (const dir of dirs) await mkdir(root + dir);
  const tasks = Array.from({ length: FLAT }, (_, i) => put(`flat/${name(i)}`));
  for (const dir of dirs) for (let i = 0; i < TREE_FILES; i++) tasks.push(put(dir + name(i)));
  await pool(tasks, 16);
}

/** Entries one answer lists: `resource` elements (Trove), `response` elements (WebDAV). */
async function countEntries(url, request) {
  const answer = await fetch(url, { method: request.method ?? "GET", headers: request.headers, body: request.body });
  const text = await answer.text();
  expectOk(`${request.method ?? "GET"} ${url}`, answer);
  return (text.match(/<resource |<D:response[ >]/g) ?? []).length;
}

export async function runApacheListing({ duration = 5, rounds = 3, warmup = 1, connections = 4, mongodbUrl } = {}) {
  if (!apacheAvailable()) throw new Error("needs Apache httpd: apt-get install apache2");
  if (!wrkAvailable()) throw new Error("needs wrk: apt-get install wrk");
  rounds = Math.max(3, rounds);
  const propfind = (depth) => ({
    method: "PROPFIND",
    body: PROPFIND_BODY,
    headers: { depth, "content-type": 'application/xml; charset="utf-8"' },
  });
  const targets = [];
  try {
    const apache = await startApache();
    targets.push({
      label: "apache mod_dav (PROPFIND)",
      ...apache,
      flat: { url: `${apache.url}/flat/`, request: propfind("1") },
      tree: { url: `${apache.url}/tree/`, request: propfind("infinity") },
    });
    process.stderr.write("  making the trees on Apache (MKCOL, PUT)\n");
    await makeTree(`${apache.url}/`, {}, async (url) => {
      const answer = await fetch(url, { method: "MKCOL" });
      await answer.arrayBuffer();
      expectOk(`MKCOL ${url}`, answer);
    });
    const trove = await startTrove({ logLevel: "info", mongodbUrl });
    const auth = { authorization: trove.authorization };
    const home = `${trove.url}/resources/v2/data/home/`;
    targets.push({
      label: "trove (defaults, XML)",
      ...trove,
      flat: { url: `${home}flat/`, request: { headers: auth } },
      tree: { url: `${home}tree/?recursive=true`, request: { headers: auth } },
    });
    process.stderr.write("  making the trees on Trove (PUT)\n");
    await makeTree(home, auth, async (url) => {
      const answer = await fetch(url, { method: "PUT", headers: auth });
      await answer.arrayBuffer();
      expectOk(`PUT ${url}`, answer);
    });
    const cases = [
      { name: "list 1,000 (Depth: 1)", key: "flat" },
      { name: "list 10,000 recursively (Depth: infinity)", key: "tree" },
    ];
    const rows = [];
    for (const c of cases) {
      const runs = new Map(targets.map((t) => [t, []]));
      const entries = new Map();
      for (const t of targets) entries.set(t, await countEntries(t[c.key].url, t[c.key].request));
      for (const t of targets)
        if (warmup > 0) await wrkLoad(t[c.key].url, t[c.key].request, warmup, connections, { timeout: 30 });
      for (let r = 0; r < rounds; r++) {
        for (const t of r % 2 === 0 ? targets : [...targets].reverse()) {
          const s = await wrkLoad(t[c.key].url, t[c.key].request, duration, connections, { timeout: 30 });
          runs.get(t).push(s);
          const perSecond = Math.round(s.rps * entries.get(t));
          process.stderr.write(`  ${c.name}, ${t.label}, round ${r + 1}: ${perSecond} entries/s ${s.other}\n`);
        }
      }
      const rate = (t) => median(runs.get(t).map((x) => x.rps * entries.get(t)));
      for (const t of targets) {
        rows.push({
          case: c.name,
          target: t.label,
          entries: entries.get(t),
          rps: median(runs.get(t).map((x) => x.rps)),
          rate: rate(t),
          p50: median(runs.get(t).map((x) => x.p50)),
          vsApache: t === targets[1] ? `${(rate(t) / rate(targets[0])).toFixed(2)}x` : "",
          other: runs
            .get(t)
            .map((x) => x.other)
            .filter(Boolean)
            .join(" "),
        });
      }
    }
    console.log(
      `\nListings: Trove against Apache mod_dav, wrk (1 thread), ${connections} connections, ${duration} s rounds, median of ${rounds} alternating rounds`,
    );
    const head = `${pad("case", 42)}${pad("server", 27)}${pad("entries", 8, true)}${pad("lists/s", 9, true)}${pad("entries/s", 11, true)}${pad("p50 ms", 9, true)}${pad("/apache", 9, true)}  other`;
    console.log(`${head}\n${"-".repeat(head.length + 6)}`);
    for (const r of rows) {
      console.log(
        `${pad(r.case, 42)}${pad(r.target, 27)}${pad(r.entries, 8, true)}${pad(r.rps.toFixed(1), 9, true)}${pad(Math.round(r.rate), 11, true)}${pad(r.p50.toFixed(1), 9, true)}${pad(r.vsApache, 9, true)}  ${r.other}`,
      );
    }
    return rows;
  } finally {
    for (const t of targets) await t.stop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { values } = parseArgs({
    options: {
      duration: { type: "string", default: "5" },
      warmup: { type: "string", default: "1" },
      rounds: { type: "string", default: "3" },
      connections: { type: "string", default: "4" },
      "mongodb-url": { type: "string" },
      "skip-build": { type: "boolean", default: false },
    },
  });
  if (!values["skip-build"]) buildDist();
  await runApacheListing({
    duration: Number(values.duration),
    warmup: Number(values.warmup),
    rounds: Number(values.rounds),
    connections: Number(values.connections),
    mongodbUrl: values["mongodb-url"],
  });
}
