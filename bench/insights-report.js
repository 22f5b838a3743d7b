// Content-insights benchmark: the report of an environment of 10,000 generated design
// resources, against a baseline measured in the same run that only reads and JSON.parse-s the
// same documents. Each case runs in its own process (fresh heap, its own peak RSS), three
// times; the table gives the median wall and CPU (user + system) times and the largest peaks.
// On a shared machine, CPU time is the steadier of the two.
//
//   node bench/insights-report.js [--count 10000] [--sizes 4,64] [--runs 3] [--skip-build]
//                                 [--sources generated,files,trove]
//
// Sources: "generated" makes every document on the fly when it is opened (no I/O, nothing
// held); "files" reads the same documents from a temporary directory (fileSource); "trove" is
// the server's path: the documents stored in a project's environment on the embedded SQLite
// storage, and a ReportWorker whose runOnce() claims the report's job, lists the environment,
// reads and parses each resource, writes the document blob and marks the report generated.
// Its baseline is the files baseline of the same size; its "read" case lists the store and
// reads and parses every resource (environmentSource) without building a report.

import { execFileSync, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const ROOT = fileURLToPath(new URL("..", import.meta.url));
const SELF = fileURLToPath(import.meta.url);
const KiB = 1024;
const MiB = 1024 * KiB;
// The project, its store and the environment the report is of (a top-level directory).
const PROJECT_ID = "00000000-0000-4000-8000-000000000001";
const ENVIRONMENT_ID = "00000000-0000-4000-8000-000000000002";
const STORE = "bench";
const ENVIRONMENT = "production";

const { values } = parseArgs({
  options: {
    count: { type: "string", default: "10000" },
    sizes: { type: "string", default: "4,64" },
    runs: { type: "string", default: "3" },
    "skip-build": { type: "boolean", default: false },
    sources: { type: "string", default: "generated,files,trove" },
    // Internal: one measured case, run in a child process.
    case: { type: "string" },
    source: { type: "string", default: "generated" },
    "size-kib": { type: "string", default: "4" },
    dir: { type: "string" },
  },
});

// ---------------------------------------------------------------------------------------------
// The generated environment: 5% templates, 60% content blocks, 20% pluggable objects, 10% data
// models, 5% themes, in directories of 100. Templates use a data model, two themes, eight blocks
// and two plugins; blocks use two later blocks and two plugins (so there are no cycles), and one
// block reference in a hundred points to a block that does not exist. Filler text brings each
// document to the requested size.

const KINDS = [
  { type: "template", dir: "templates", ext: "template", share: 0.05 },
  { type: "contentBlock", dir: "blocks", ext: "block", share: 0.6 },
  { type: "pluggableObject", dir: "plugins", ext: "plugin", share: 0.2 },
  { type: "datamodel", dir: "datamodels", ext: "datamodel", share: 0.1 },
  { type: "theme", dir: "themes", ext: "theme", share: 0.05 },
];

function layout(count) {
  const counts = KINDS.map((k) => Math.floor(count * k.share));
  counts[1] += count - counts.reduce((a, b) => a + b, 0);
  return KINDS.map((k, i) => ({ ...k, count: counts[i] }));
}

function pathOf(kind, i) {
  return `${kind.dir}/g${Math.floor(i / 100)}/${kind.dir.slice(0, 1)}${i}.${kind.ext}`;
}

/** Relative path from a resource two levels deep (dir/gN/name) to another resource. */
function ref(kind, i) {
  return `../../${pathOf(kind, i)}`;
}

function filler(bytes) {
  const sentence = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor. ";
  return sentence.repeat(Math.ceil(bytes / sentence.length)).slice(0, Math.max(0, bytes));
}

function documentText(kinds, kind, i, size) {
  const [, blocks, plugins, models, themes] = kinds;
  const tags = { authors: "Bench Generator", description: `${kind.type} number ${i}`, status: "approved" };
  let doc;
  if (kind.type === "template") {
    doc = {
      tags,
      datamodel: ref(models, i % models.count),
      themes: [{ path: ref(themes, i % themes.count), default: true }, { path: ref(themes, (i + 1) % themes.count) }],
      body: {
        header: [{ $block: ref(blocks, (i * 8) % blocks.count) }],
        flow: Array.from({ length: 7 }, (_, k) => ({
          section: k,
          content: [{ $block: ref(blocks, (i * 8 + k + 1) % blocks.count) }],
        })),
        footer: [{ $plugin: ref(plugins, i % plugins.count) }, { $plugin: ref(plugins, (i + 7) % plugins.count) }],
      },
    };
  } else if (kind.type === "contentBlock") {
    const later = (k) => (i + k < blocks.count ? i + k : blocks.count - 1);
    doc = {
      tags,
      body: {
        content: [
          { $block: i % 100 === 99 ? `../../${blocks.dir}/missing/m${i}.block` : ref(blocks, later(1)) },
          { $block: ref(blocks, later(17)) },
          {
            paragraph: [
              { $plugin: ref(plugins, i % plugins.count) },
              { $plugin: ref(plugins, (i * 3) % plugins.count) },
            ],
          },
        ],
      },
    };
    if (later(1) === i) doc.body.content.splice(0, 2);
  } else if (kind.type === "pluggableObject") {
    doc = {
      tags,
      implementation: { runtime: "builtin", entry: `bench.${i}` },
      parameters: { value: { type: "field" } },
    };
  } else if (kind.type === "datamodel") {
    doc = { tags, fields: { id: { type: "string" }, amount: { type: "number" } } };
  } else {
    doc = { tags, colors: { primary: "#0B3D91" }, fonts: { body: { family: "Source Sans 3" } } };
  }
  const bare = JSON.stringify(doc);
  doc.notes = filler(size - bare.length - ',"notes":""'.length);
  return JSON.stringify(doc);
}

function* everyResource(count) {
  const kinds = layout(count);
  for (const kind of kinds) for (let i = 0; i < kind.count; i++) yield { kinds, kind, i };
}

/** A ResourceSource that makes each document when it is opened, in chunks of 64 KiB. */
function generatedSource(count, size, onEach) {
  return {
    async *list() {
      for (const { kinds, kind, i } of everyResource(count)) {
        onEach();
        yield {
          path: pathOf(kind, i),
          size,
          created: Date.UTC(2026, 0, 1),
          lastModified: Date.UTC(2026, 0, 2),
          async *open() {
            const bytes = Buffer.from(documentText(kinds, kind, i, size));
            for (let at = 0; at < bytes.length; at += 64 * KiB) yield bytes.subarray(at, at + 64 * KiB);
          },
        };
      }
    },
  };
}

async function writeEnvironment(dir, count, size) {
  const made = new Set();
  for (const { kinds, kind, i } of everyResource(count)) {
    const path = join(dir, pathOf(kind, i));
    const parent = path.slice(0, path.lastIndexOf("/"));
    if (!made.has(parent)) {
      await mkdir(parent, { recursive: true });
      made.add(parent);
    }
    await writeFile(path, documentText(kinds, kind, i, size));
  }
}

async function* filesUnder(dir) {
  const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1));
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) yield* filesUnder(path);
    else yield path;
  }
}

/** Modules of dist/ (built from src/), or a clear message when they are missing. */
async function fromDist(path) {
  return import(join(ROOT, "dist", path)).catch(() => {
    console.error(`dist/${path} is missing: run \`npx tsc -p tsconfig.build.json\` (or drop --skip-build)`);
    process.exit(2);
  });
}

/**
 * The same documents in a Trove store on the embedded SQLite storage, written through the storage
 * port (contents up to 64 KiB inline in the database, larger ones as blob files), with the
 * project and environment records a report needs. Setup, not measured.
 */
async function writeTroveEnvironment(dir, count, size) {
  const { SqliteStorage } = await fromDist("storage/sqlite/sqlite-storage.js");
  const storage = await SqliteStorage.open({ dataDir: dir });
  try {
    const now = Date.UTC(2026, 0, 1);
    await storage.createStore({ name: STORE, type: "recursive", settings: {} }, now);
    await storage.makeDirectory(STORE, ENVIRONMENT, {}, now);
    const made = new Set();
    for (const { kinds, kind, i } of everyResource(count)) {
      const path = `${ENVIRONMENT}/${pathOf(kind, i)}`;
      const segments = path.split("/");
      for (let k = 2; k < segments.length; k++) {
        const directory = segments.slice(0, k).join("/");
        if (made.has(directory)) continue;
        await storage.makeDirectory(STORE, directory, {}, now);
        made.add(directory);
      }
      const bytes = Buffer.from(documentText(kinds, kind, i, size));
      const blob = await storage.writeBlob(
        (async function* () {
          yield bytes;
        })(),
        { maxSize: Number.MAX_SAFE_INTEGER },
      );
      await storage.putFile(STORE, path, blob, "application/json", {}, now);
    }
    await storage.insights.createProject({
      id: PROJECT_ID,
      name: STORE,
      account: "bench",
      store: STORE,
      created: now,
      creator: "bench",
    });
    await storage.insights.createEnvironment({
      id: ENVIRONMENT_ID,
      projectId: PROJECT_ID,
      name: ENVIRONMENT,
      created: now,
      creator: "bench",
    });
  } finally {
    await storage.close();
  }
}

// ---------------------------------------------------------------------------------------------
// One case, in a child process: prints one JSON line.

async function runCase() {
  if (values.source === "trove") return runTroveCase();
  const insights = await fromDist("insights/index.js");
  const count = Number(values.count);
  const size = Number(values["size-kib"]) * KiB;
  let peakHeap = 0;
  let seen = 0;
  const sample = () => {
    if (seen++ % 50 === 0) peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
  };
  globalThis.gc?.();
  const rssBefore = process.memoryUsage().rss;
  const heapBefore = process.memoryUsage().heapUsed;
  const started = performance.now();
  const cpuStarted = process.cpuUsage();
  const cpuMs = () => {
    const { user, system } = process.cpuUsage(cpuStarted);
    return (user + system) / 1000;
  };
  let resources = 0;
  let reportBytes = 0;
  let queries;

  if (values.case === "baseline") {
    // Read and parse every document, keep nothing: the least any report must do.
    if (values.source === "files") {
      for await (const file of filesUnder(values.dir)) {
        sample();
        JSON.parse(await readFile(file, "utf8"));
        resources++;
      }
    } else {
      for await (const resource of generatedSource(count, size, sample).list()) {
        const chunks = [];
        for await (const chunk of resource.open()) chunks.push(chunk);
        JSON.parse(new TextDecoder().decode(Buffer.concat(chunks)));
        resources++;
      }
    }
  } else {
    const source =
      values.source === "files"
        ? (() => {
            const files = insights.fileSource(values.dir);
            return {
              async *list() {
                for await (const r of files.list()) {
                  sample();
                  yield r;
                }
              },
            };
          })()
        : generatedSource(count, size, sample);
    const report = await insights.buildReport(source, {
      creator: "bench",
      projectID: PROJECT_ID,
      projectName: STORE,
      environmentID: ENVIRONMENT_ID,
      environmentName: ENVIRONMENT,
    });
    resources = report.resources.length;
    const elapsedReport = performance.now() - started;
    const cpuReport = cpuMs();
    // Memory of generation alone, before serializing and querying.
    peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
    const maxRss = process.resourceUsage().maxRSS * KiB;
    globalThis.gc?.();
    const heldByReport = process.memoryUsage().heapUsed - heapBefore;

    const timed = (fn) => {
      const t = performance.now();
      const value = fn();
      return { ms: Math.round(performance.now() - t), value };
    };
    reportBytes = timed(() => Buffer.byteLength(JSON.stringify(report)));
    const template = report.resources.find((r) => r.type === "template").path;
    const block = report.resources.find((r) => r.type === "contentBlock").path;
    queries = {
      graph: timed(() => insights.dependencyGraph(report).nodes.size),
      dependencies: timed(() => insights.dependenciesOf(report, template).all.length),
      dependents: timed(() => insights.dependentsOf(report, block).all.length),
      unused: timed(() => insights.unusedResources(report).length),
      missing: timed(() => insights.missingReferences(report).length),
      cycles: timed(() => insights.referenceCycles(report).length),
      dot: timed(() => insights.toDot(report).length),
      mermaid: timed(() => insights.toMermaid(report).length),
    };
    console.log(
      JSON.stringify({
        ms: elapsedReport,
        cpuMs: cpuReport,
        resources,
        reportBytes,
        heldByReport,
        queries,
        rssBefore,
        maxRss,
        heapGrowth: peakHeap - heapBefore,
      }),
    );
    return;
  }
  const ms = performance.now() - started;
  const cpu = cpuMs();
  peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
  console.log(
    JSON.stringify({
      ms,
      cpuMs: cpu,
      resources,
      rssBefore,
      maxRss: process.resourceUsage().maxRSS * KiB,
      heapGrowth: peakHeap - heapBefore,
    }),
  );
}

/**
 * A case of the "trove" source: "read" lists the environment and reads and parses every resource
 * as generation does (environmentSource), keeping nothing; "report" times a ReportWorker's
 * runOnce() on a report stored as a job nobody holds. The storage is wrapped to time what the
 * worker spends in it, and to sample the heap every 50 resources as they are listed.
 */
async function runTroveCase() {
  const [{ SqliteStorage }, { ReportWorker }, { ReportNotifier }, { environmentSource }] = await Promise.all([
    fromDist("storage/sqlite/sqlite-storage.js"),
    fromDist("services/report-worker.js"),
    fromDist("services/report-notifier.js"),
    fromDist("services/environment-source.js"),
  ]);
  const sqlite = await SqliteStorage.open({ dataDir: values.dir });
  let peakHeap = 0;
  // Buffers live outside the heap: the contents a listing page brings (inline ones, up to 64 KiB
  // each) are counted here, not in heapUsed.
  let peakBuffers = 0;
  let seen = 0;
  const sample = () => {
    if (seen++ % 50 !== 0) return;
    const { heapUsed, arrayBuffers } = process.memoryUsage();
    peakHeap = Math.max(peakHeap, heapUsed);
    peakBuffers = Math.max(peakBuffers, arrayBuffers);
  };
  const spent = { list: 0, read: 0, document: 0, jobs: 0 };
  const storage = timedStorage(sqlite, spent, sample);
  const report = {
    id: randomUUID(),
    projectId: PROJECT_ID,
    environmentId: ENVIRONMENT_ID,
    creator: "bench",
    created: Date.now(),
    additionalFields: [],
    status: "generating",
    finished: 0,
    expiresAt: Date.now() + 3_600_000,
    reason: "",
    attempts: 0,
    leaseOwner: "",
    leaseExpires: 0,
    document: null,
  };
  if (values.case === "report") await sqlite.createReport(report);
  const worker = new ReportWorker({ storage, notifier: new ReportNotifier(), availabilityMs: 3_600_000 });

  globalThis.gc?.();
  const rssBefore = process.memoryUsage().rss;
  const heapBefore = process.memoryUsage().heapUsed;
  const started = performance.now();
  const cpuStarted = process.cpuUsage();
  let resources = 0;
  if (values.case === "read") {
    const source = environmentSource({ storage, store: STORE, directory: ENVIRONMENT });
    for await (const resource of source.list()) {
      const chunks = [];
      for await (const chunk of resource.open()) chunks.push(chunk);
      JSON.parse(new TextDecoder().decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
      resources++;
    }
  } else if (!(await worker.runOnce())) {
    throw new Error("the worker found no job");
  }
  const ms = performance.now() - started;
  const { user, system } = process.cpuUsage(cpuStarted);
  peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
  const maxRss = process.resourceUsage().maxRSS * KiB;

  // Outside the measure: check that the report is there, generated, with every resource.
  let reportBytes = 0;
  if (values.case === "report") {
    const stored = await sqlite.getReport(report.id);
    if (stored?.status !== "generated") throw new Error(`report ${stored?.status}: ${stored?.reason}`);
    const chunks = [];
    for await (const chunk of sqlite.readReportDocument(stored)) chunks.push(chunk);
    const text = Buffer.concat(chunks);
    reportBytes = text.length;
    resources = JSON.parse(text.toString("utf8")).resources.length;
  }
  await sqlite.close();
  console.log(
    JSON.stringify({
      ms,
      cpuMs: (user + system) / 1000,
      resources,
      reportBytes,
      spent,
      peakBuffers,
      rssBefore,
      maxRss,
      heapGrowth: peakHeap - heapBefore,
    }),
  );
}

/**
 * The storage, with the wall time of its calls added to `spent`: listing pages (with inline
 * contents), blob reads, the document (serialized as writeBlob pulls it, and written) and the
 * job's records. Listed nodes call `sample` one by one, as the builder takes them.
 */
function timedStorage(storage, spent, sample) {
  const timedIterable = async function* (iterable, key, each = (value) => value) {
    const it = iterable[Symbol.asyncIterator]();
    try {
      for (;;) {
        const t = performance.now();
        const next = await it.next();
        spent[key] += performance.now() - t;
        if (next.done) return;
        yield each(next.value);
      }
    } finally {
      await it.return?.();
    }
  };
  const sampled = (batch) => ({
    *[Symbol.iterator]() {
      for (const node of batch) {
        sample();
        yield node;
      }
    },
  });
  const timedCall =
    (fn, key) =>
    async (...args) => {
      const t = performance.now();
      try {
        return await fn(...args);
      } finally {
        spent[key] += performance.now() - t;
      }
    };
  const jobCalls = new Set(["claimReportJob", "updateReportJob", "getProject", "getEnvironment"]);
  return new Proxy(storage, {
    get(target, key) {
      const value = target[key];
      if (typeof value !== "function") return value;
      const fn = value.bind(target);
      if (key === "listNodes") return (...args) => timedIterable(fn(...args), "list", sampled);
      if (key === "readBlob") return (...args) => timedIterable(fn(...args), "read");
      if (key === "writeBlob") return timedCall(fn, "document");
      if (jobCalls.has(key)) return timedCall(fn, "jobs");
      return fn;
    },
  });
}

// ---------------------------------------------------------------------------------------------
// The driver: builds dist/, prepares the files, runs every case in fresh processes, prints a table.

function child(args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(process.execPath, ["--expose-gc", SELF, ...args], { stdio: ["ignore", "pipe", "inherit"] });
    let out = "";
    proc.stdout.on("data", (d) => {
      out += d;
    });
    proc.once("error", reject);
    proc.once("exit", (code) => {
      if (code !== 0) reject(new Error(`case ${args.join(" ")} exited with ${code}`));
      else resolve(JSON.parse(out.trim().split("\n").at(-1)));
    });
  });
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const mib = (bytes) => `${(bytes / MiB).toFixed(1)} MiB`;
const pad = (text, width, right = false) => (right ? String(text).padStart(width) : String(text).padEnd(width));

async function main() {
  const count = Number(values.count);
  const runs = Number(values.runs);
  const sizes = values.sizes.split(",").map(Number);
  const sources = values.sources.split(",");
  if (!values["skip-build"]) {
    execFileSync(process.execPath, [join(ROOT, "node_modules/typescript/bin/tsc"), "-p", "tsconfig.build.json"], {
      cwd: ROOT,
      stdio: "inherit",
    });
  }
  console.log(
    `content insights: ${count.toLocaleString("en")} resources, ${runs} runs per case, Node ${process.version}\n`,
  );
  const header = `| source    | size    | case     | resources | time ms | vs baseline | CPU ms | vs baseline | peak RSS  | RSS growth | heap growth |`;
  console.log(header);
  console.log(header.replace(/[^|]/g, "-"));
  const cases = [
    ...(sources.includes("generated") ? sizes.map((s) => ({ source: "generated", size: s })) : []),
    ...(sources.includes("files") ? [{ source: "files", size: sizes[0] }] : []),
    ...(sources.includes("trove") ? sizes.map((s) => ({ source: "trove", size: s })) : []),
  ];
  const extra = [];
  const ranges = [];
  for (const { source, size } of cases) {
    const temporary = [];
    const dirOf = {};
    if (source !== "generated") {
      // The trove source's baseline reads the same documents from files.
      dirOf.files = mkdtempSync(join(tmpdir(), "trove-insights-bench-"));
      temporary.push(dirOf.files);
      await writeEnvironment(dirOf.files, count, size * KiB);
    }
    if (source === "trove") {
      dirOf.trove = mkdtempSync(join(tmpdir(), "trove-insights-bench-"));
      temporary.push(dirOf.trove);
      const t = performance.now();
      await writeTroveEnvironment(dirOf.trove, count, size * KiB);
      console.error(`(setup: ${size} KiB documents stored in ${((performance.now() - t) / 1000).toFixed(1)} s)`);
    }
    try {
      let baselineMs;
      let baselineCpu;
      for (const which of source === "trove" ? ["baseline", "read", "report"] : ["baseline", "report"]) {
        const results = [];
        const from = source === "trove" && which === "baseline" ? "files" : source;
        const args = ["--case", which, "--source", from, "--count", String(count), "--size-kib", String(size)];
        if (dirOf[from]) args.push("--dir", dirOf[from]);
        for (let r = 0; r < runs; r++) results.push(await child(args));
        const ms = median(results.map((r) => r.ms));
        const cpu = median(results.map((r) => r.cpuMs));
        if (which === "baseline") {
          baselineMs = ms;
          baselineCpu = cpu;
        }
        const maxRss = Math.max(...results.map((r) => r.maxRss));
        const growth = Math.max(...results.map((r) => r.maxRss - r.rssBefore));
        const heap = Math.max(...results.map((r) => r.heapGrowth));
        console.log(
          `| ${pad(source, 9)} | ${pad(`${size} KiB`, 7)} | ${pad(which, 8)} | ${pad(results[0].resources, 9, true)} | ${pad(ms.toFixed(0), 7, true)} | ${pad(`${(ms / baselineMs).toFixed(2)}x`, 11, true)} | ${pad(cpu.toFixed(0), 6, true)} | ${pad(`${(cpu / baselineCpu).toFixed(2)}x`, 11, true)} | ${pad(mib(maxRss), 9, true)} | ${pad(mib(growth), 10, true)} | ${pad(mib(heap), 11, true)} |`,
        );
        const range = (xs, format) => `${format(Math.min(...xs))}-${format(Math.max(...xs))}`;
        ranges.push(
          `${source} ${size} KiB ${which}: time ${range(
            results.map((r) => r.ms),
            (x) => x.toFixed(0),
          )} ms, CPU ${range(
            results.map((r) => r.cpuMs),
            (x) => x.toFixed(0),
          )} ms, peak RSS ${range(
            results.map((r) => r.maxRss),
            (x) => (x / MiB).toFixed(1),
          )} MiB`,
        );
        if (which === "report") extra.push({ source, size, results });
      }
    } finally {
      for (const dir of temporary) rmSync(dir, { recursive: true, force: true });
    }
  }
  console.log("");
  for (const { source, size, results } of extra) {
    const e = results[0];
    if (source === "trove") {
      // Medians of the wall time spent in the storage; the rest is parsing and building.
      const spent = (key) => median(results.map((r) => r.spent[key]));
      const inStorage = spent("list") + spent("read") + spent("document") + spent("jobs");
      console.log(
        `${source} ${size} KiB: in the storage: listing ${spent("list").toFixed(0)} ms, blob reads ` +
          `${spent("read").toFixed(0)} ms, document (serialized and written, ${mib(e.reportBytes)}) ` +
          `${spent("document").toFixed(0)} ms, job records ${spent("jobs").toFixed(0)} ms; the rest ` +
          `(parsing, building) ${(median(results.map((r) => r.ms)) - inStorage).toFixed(0)} ms; ` +
          `ArrayBuffers up to ${mib(Math.max(...results.map((r) => r.peakBuffers)))}`,
      );
      continue;
    }
    const q = Object.entries(e.queries)
      .map(([name, { ms, value }]) => `${name} ${ms} ms (${value})`)
      .join(", ");
    console.log(
      `${source} ${size} KiB: report held after generation ${mib(e.heldByReport)}; ` +
        `JSON ${mib(e.reportBytes.value)} in ${e.reportBytes.ms} ms; queries: ${q}`,
    );
  }
  console.log(`\nranges over the runs (min-max):\n${ranges.join("\n")}`);
}

if (values.case) await runCase();
else await main();
