// Issue 31, session 17: push and pull hold no per-file state. They read the recursive listing as
// it arrives, the directory as it is walked and the local state as it was recorded side by side,
// in path order (docs/rest.md: byte order of the UTF-8 path), and keep the plan on disk. So the
// walk must give the server's order exactly (names that sort differently in UTF-16 and UTF-8, and
// a directory whose contents sort after a sibling of a longer name), and a listing that is cut
// short or out of order must refuse the run before anything changes.

import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import type { Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRestClient, pull, push, type TroveRestClient } from "../../sdk/src/index.js";
import { createH2cFetch, type H2cFetch } from "../../sdk/src/rest/h2c-fetch.js";
import { ListingReader, parseListing } from "../../sdk/src/rest/xml.js";
import { FINE_RACY_MS, RACY_MS, racyMarginOf, stateFileOf } from "../../sdk/src/transfer/local-state.js";
import { comparePaths, walkLocal } from "../../sdk/src/transfer/path-order.js";
import { startServer, type TestServer } from "../support/server.js";
import { startRewritingProxy } from "./support.js";

let work: string;
let server: TestServer;
let rest: TroveRestClient;
let tmpBefore: string | undefined;
const proxies = new Set<Server>();
const h2cFetches = new Set<H2cFetch>();

/** Directories and files whose order differs between UTF-16 and UTF-8, and around "/". */
const DIRECTORIES = ["a", "a/x", "z", "z/😀"];
const FILES = [
  "a b.txt", // " " (0x20) before "-" and "/"
  "a-b",
  "a.c",
  "a/w.txt",
  "a/x/y.txt",
  "a0",
  "b.txt",
  "é.txt",
  "\uFFFD.txt", // U+FFFD: after a surrogate pair in UTF-16, before it in UTF-8
  "😀.txt",
  "z/😀/1.txt",
];

const byUtf8 = (a: string, b: string) => Buffer.compare(Buffer.from(a), Buffer.from(b));

async function makeTree(dir: string): Promise<void> {
  for (const d of DIRECTORIES) await mkdir(join(dir, ...d.split("/")), { recursive: true });
  for (const f of FILES) await writeFile(join(dir, ...f.split("/")), `contents of ${f}\n`);
}

/** Sets every file's times into the past: the state trusts only files older than its record. */
async function age(dir: string): Promise<void> {
  const old = new Date("2026-01-01T00:00:00Z");
  for (const name of await readdir(dir, { recursive: true })) {
    const full = join(dir, name);
    if ((await stat(full)).isFile()) await utimes(full, old, old);
  }
}

async function tree(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir, { recursive: true })).sort()) {
    const full = join(dir, name);
    out[name] = (await stat(full)).isDirectory() ? "dir" : await readFile(full, "utf8");
  }
  return out;
}

/** A client through a proxy to the server that rewrites every directory listing's text. */
async function startProxy(listing: (xml: string) => string): Promise<TroveRestClient> {
  return createRestClient({ baseUrl: await startRewritingProxy(server.url, { listing }, proxies) });
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "trove-transfer-order-"));
  server = await startServer();
  rest = createRestClient({ baseUrl: server.url });
  // The plans of push and pull go to the temporary directory: here, the test's own, to see them gone.
  tmpBefore = process.env.TMPDIR;
  process.env.TMPDIR = join(work, "tmp");
  await mkdir(join(work, "tmp"));
}, 60_000);

afterAll(async () => {
  if (tmpBefore === undefined) delete process.env.TMPDIR;
  else process.env.TMPDIR = tmpBefore;
  for (const h2c of h2cFetches) h2c.close();
  for (const proxy of proxies) {
    proxy.closeAllConnections();
    await new Promise((resolve) => proxy.close(resolve));
  }
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("issue 31: push and pull read both sides in the listing's path order", () => {
  it("comparePaths is UTF-8 byte order, which JavaScript's string order is not", () => {
    const names = [...FILES, ...DIRECTORIES];
    expect([...names].sort(comparePaths)).toEqual([...names].sort(byUtf8));
    expect([...names].sort()).not.toEqual([...names].sort(byUtf8));
  });

  it("the directory walk gives every entry in the order the server lists them (docs/rest.md: byte order of the UTF-8 path)", async () => {
    const dir = join(work, "walked");
    await makeTree(dir);
    const walked = [...walkLocal(dir)].map((e) => `${e.path}${e.kind === "directory" ? "/" : ""}`);
    expect(walked.map((p) => p.replace(/\/$/, ""))).toEqual([...FILES, ...DIRECTORIES].sort(byUtf8));

    await rest.stores.create("ordered");
    await push({ client: rest, store: "ordered", directory: dir, state: false });
    const listed = (await rest.list("ordered", "", { recursive: true })).entries.map(
      (e) => `${e.name}${e.directory ? "/" : ""}`,
    );
    expect(listed).toEqual(walked);
  });

  it("a second push and pull of such a tree transfer nothing and delete nothing (the two sides meet at every path)", async () => {
    const dir = join(work, "walked");
    const again = await push({ client: rest, store: "ordered", directory: dir, delete: true });
    expect(again).toMatchObject({ transferred: 0, skipped: FILES.length, deleted: 0, directories: 0 });

    const copy = join(work, "pulled");
    const first = await pull({ client: rest, store: "ordered", directory: copy });
    expect(first).toMatchObject({ transferred: FILES.length, directories: DIRECTORIES.length + 1 });
    expect(await tree(copy)).toEqual(await tree(dir));
    await age(copy);
    const hashed = await pull({ client: rest, store: "ordered", directory: copy, delete: true });
    expect(hashed).toMatchObject({ transferred: 0, skipped: FILES.length, deleted: 0, hashed: FILES.length });
    const idle = await pull({ client: rest, store: "ordered", directory: copy, delete: true });
    expect(idle).toMatchObject({ transferred: 0, skipped: FILES.length, deleted: 0, hashed: 0 });
    // Every plan was removed with its run.
    expect(await readdir(join(work, "tmp"))).toEqual([]);
  });

  it("a listing cut short (no </resources>) refuses the pull: nothing downloaded, nothing deleted with --delete", async () => {
    const copy = join(work, "cut");
    await mkdir(copy);
    await writeFile(join(copy, "local-only.txt"), "mine\n");
    // The last element and the end of the document are lost, as when a connection drops.
    const cut = await startProxy((xml) => xml.slice(0, xml.lastIndexOf("<resource ")));
    await expect(pull({ client: cut, store: "ordered", directory: copy, delete: true })).rejects.toThrow(
      /the directory listing ended before its end \(no <\/resources>\): it was cut short/,
    );
    expect(await tree(copy)).toEqual({ "local-only.txt": "mine\n" });
    const before = (await rest.list("ordered", "", { recursive: true })).entries;
    await expect(
      push({ client: cut, store: "ordered", directory: join(work, "walked"), delete: true }),
    ).rejects.toThrow(/cut short/);
    expect((await rest.list("ordered", "", { recursive: true })).entries).toEqual(before);
    expect(await readdir(join(work, "tmp"))).toEqual([]);
  });

  it("a listing out of path order refuses the pull before anything is written, naming the two entries", async () => {
    const copy = join(work, "disordered");
    await mkdir(copy);
    await writeFile(join(copy, "local-only.txt"), "mine\n");
    // The first two elements swapped.
    const swapped = await startProxy((xml) => {
      const elements = xml.match(/<resource [^>]*\/>/g) ?? [];
      const [first, second] = elements as [string, string];
      return xml.replace(first + second, second + first);
    });
    await expect(pull({ client: swapped, store: "ordered", directory: copy, delete: true })).rejects.toThrow(
      /the listing of ordered\/ is not in path order \("a" after "a b.txt"\); nothing was transferred/,
    );
    expect(await tree(copy)).toEqual({ "local-only.txt": "mine\n" });
  });

  it("a state file of the first version is not trusted: the next run hashes, then writes version 2, which the run after trusts", async () => {
    const copy = join(work, "upgraded");
    const states = join(work, "states");
    await pull({ client: rest, store: "ordered", directory: copy, stateDirectory: states, state: false });
    await age(copy);
    const file = stateFileOf(copy, states);
    await mkdir(states, { recursive: true });
    // What version 1 wrote: one JSON object (here with MD5s that match nothing).
    const files = Object.fromEntries(
      FILES.map((f) => [f, { size: 1, stamp: "0:0:0", md5: "AAAAAAAAAAAAAAAAAAAAAA==" }]),
    );
    await writeFile(file, JSON.stringify({ version: 1, root: copy, recordedAt: Date.now(), files }));
    const first = await pull({ client: rest, store: "ordered", directory: copy, stateDirectory: states });
    expect(first).toMatchObject({ transferred: 0, hashed: FILES.length });
    const [header, ...lines] = (await readFile(file, "utf8")).trimEnd().split("\n");
    expect(JSON.parse(header as string)).toEqual({ version: 2, root: copy });
    expect(lines.map((l) => (JSON.parse(l) as string[])[0])).toEqual([...FILES].sort(byUtf8));
    const second = await pull({ client: rest, store: "ordered", directory: copy, stateDirectory: states });
    expect(second).toMatchObject({ transferred: 0, hashed: 0 });
  });
});

describe("issue 31: what the local state trusts of the files a pull downloaded", () => {
  it("a file modified within 100 ms of the state's writing is hashed again; 500 ms before it, trusted (a file system of nanoseconds)", async () => {
    const states = join(work, "racy-states");
    const copy = join(work, "racy");
    expect((await pull({ client: rest, store: "ordered", directory: copy, stateDirectory: states })).transferred).toBe(
      FILES.length,
    );
    // The downloads are recorded as of the moment the state file was written (its modification
    // time, as git's index). Put that moment 50 ms after the newest download: it is racy.
    const mtimes = await Promise.all(FILES.map(async (f) => (await stat(join(copy, f))).mtimeMs));
    expect(mtimes.every((m) => m % 1000 !== 0)).toBe(true); // this file system keeps fractions
    const newest = Math.max(...mtimes);
    // As local-state.ts compares: whole milliseconds of the file against the state's time.
    const at = Math.floor(newest + 50);
    const racy = mtimes.filter((m) => Math.floor(m) > at - FINE_RACY_MS).length;
    await utimes(stateFileOf(copy, states), new Date(at), new Date(at));
    const right = await pull({ client: rest, store: "ordered", directory: copy, stateDirectory: states });
    expect(right).toMatchObject({ transferred: 0, hashed: racy });
    expect(racy).toBeGreaterThanOrEqual(1);
    // That run recorded the files it hashed as of its start; the others keep their record. Half
    // a second after the newest file, as a later run sees it, nothing is hashed.
    const later = join(work, "racy-later");
    await pull({ client: rest, store: "ordered", directory: later, stateDirectory: states });
    const newestLater = Math.max(...(await Promise.all(FILES.map(async (f) => (await stat(join(later, f))).mtimeMs))));
    await utimes(stateFileOf(later, states), new Date(newestLater + 500), new Date(newestLater + 500));
    const idle = await pull({ client: rest, store: "ordered", directory: later, stateDirectory: states });
    expect(idle).toMatchObject({ transferred: 0, skipped: FILES.length, hashed: 0 });
  });

  it("the racy margin: 2 s for a modification time of whole seconds (FAT, HFS+, ext3), 100 ms for one with a fraction", () => {
    expect(racyMarginOf("1764400000000000000:1764400000000000000:12")).toBe(RACY_MS);
    expect(racyMarginOf("1764400000000000001:1764400000000000000:12")).toBe(FINE_RACY_MS);
    expect(racyMarginOf("1764400000123456789:1764400000123456789:12")).toBe(FINE_RACY_MS);
    expect(racyMarginOf("0:0:0")).toBe(RACY_MS);
    expect([RACY_MS, FINE_RACY_MS]).toEqual([2_000, 100]);
  });
});

describe("issue 31: the plan carried out in path order, copies finishing in any order", () => {
  it("a slow first download holds back the rest: at most 8,192 more downloads start before it ends; then every record is written, in path order", async () => {
    // 8,300 files of one byte after one file whose download is held until the run stops starting
    // downloads: the records of the files after it wait behind its record (MAX_WAITING_RECORDS,
    // 8,192), so the run stops there, and goes on once the slow one is let go.
    const source = join(work, "many");
    await mkdir(join(source, "d"), { recursive: true });
    await writeFile(join(source, "0-slow.txt"), "slow\n");
    for (let i = 0; i < 8_300; i++) await writeFile(join(source, "d", `f${String(i).padStart(5, "0")}`), "x");
    await rest.stores.create("many");
    // Over one h2c connection, as the CLI does: thousands of requests in a few seconds.
    const h2c = createH2cFetch(server.url);
    h2cFetches.add(h2c);
    await push({
      client: createRestClient({ baseUrl: server.url, fetch: h2c }),
      store: "many",
      directory: source,
      transfers: 16,
      state: false,
    });

    let release: () => void = () => {};
    const slowHeld = new Promise<void>((resolve) => {
      release = resolve;
    });
    let started = 0;
    let finished = 0;
    const held = createRestClient({
      baseUrl: server.url,
      fetch: async (input, init) => {
        if (String(input).endsWith("/0-slow.txt")) await slowHeld;
        else if (/\/d\/f\d{5}$/.test(String(input))) started += 1;
        return h2c(input, init);
      },
    });
    const copy = join(work, "many-copy");
    const states = join(work, "many-states");
    const pulling = pull({
      client: held,
      store: "many",
      directory: copy,
      transfers: 16,
      // One GET per file, to hold one (the batches of ReadMany: test/sdk/pull-batch.test.ts).
      batch: false,
      stateDirectory: states,
      onProgress: (p) => {
        finished = p.files;
      },
    });
    // Let the slow one go once 8,192 others started and nothing else is in flight, the
    // count the same on two looks 50 ms apart (or after 60 s, and the counts below fail).
    for (let waited = 0, last = -1; waited < 60_000; waited += 50) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      if (started >= 8_192 && started === finished && started === last) break;
      last = started;
    }
    const startedWhenReleased = started;
    release();
    const pulled = await pulling;
    // The slow file and 8,192 after it; not all 8,300 (allowing for what `transfers` had started).
    expect(startedWhenReleased).toBeGreaterThanOrEqual(8_192);
    expect(startedWhenReleased).toBeLessThanOrEqual(8_192 + 16);
    expect(pulled).toMatchObject({ transferred: 8_301, directories: 2 });
    expect(await readFile(join(copy, "0-slow.txt"), "utf8")).toBe("slow\n");
    expect((await readdir(join(copy, "d"))).length).toBe(8_300);
    const lines = (await readFile(stateFileOf(copy, states), "utf8")).trimEnd().split("\n").slice(1);
    const paths = lines.map((l) => (JSON.parse(l) as string[])[0] as string);
    expect(paths).toHaveLength(8_301);
    expect(paths[0]).toBe("0-slow.txt");
    expect(paths).toEqual([...paths].sort(byUtf8));

    // By batches now: the first file changed (same size) before 8,300 unchanged ones. Its batch
    // is gathered while their records wait behind it, and goes once 8,192 wait: the pull ends.
    await rest.put("many", "0-slow.txt", "SLOW\n");
    const again = await pull({ client: rest, store: "many", directory: copy, transfers: 16, stateDirectory: states });
    expect(again).toMatchObject({ transferred: 1, skipped: 8_300 });
    expect(await readFile(join(copy, "0-slow.txt"), "utf8")).toBe("SLOW\n");
  }, 180_000);

  it("a pull aborted midway rejects with the reason, leaves no partial file and no plan, and the next pull fetches only what is missing", async () => {
    const source = join(work, "few");
    await mkdir(join(source, "d"), { recursive: true });
    for (let i = 0; i < 400; i++) await writeFile(join(source, "d", `f${String(i).padStart(3, "0")}`), "x");
    await rest.stores.create("few");
    await push({ client: rest, store: "few", directory: source, transfers: 16, state: false });
    const copy = join(work, "aborted");
    const controller = new AbortController();
    let downloads = 0;
    const h2c = createH2cFetch(server.url);
    h2cFetches.add(h2c);
    const counting = createRestClient({
      baseUrl: server.url,
      fetch: (input, init) => {
        if (!String(input).endsWith("/") && ++downloads === 100) controller.abort(new Error("stopped by the test"));
        return h2c(input, init);
      },
    });
    await expect(
      pull({ client: counting, store: "few", directory: copy, batch: false, signal: controller.signal }),
    ).rejects.toThrow(/stopped by the test/);
    expect(await readdir(join(work, "tmp"))).toEqual([]);
    const files = (await readdir(copy, { recursive: true })).filter((name) => name !== "d");
    expect(files.filter((name) => name.split("/").pop()?.startsWith("."))).toEqual([]);
    expect(files.length).toBeGreaterThan(0);
    expect(files.length).toBeLessThan(400);
    for (const name of files) {
      expect(await readFile(join(copy, name), "utf8")).toBe("x");
    }
    const again = await pull({
      client: createRestClient({ baseUrl: server.url, fetch: h2c }),
      store: "few",
      directory: copy,
    });
    expect(again.transferred).toBe(400 - files.length);
    expect((await readdir(join(copy, "d"))).length).toBe(400);
  }, 120_000);
});

describe("issue 31: the listing read as it arrives (ListingReader)", () => {
  const xml =
    '<?xml version="1.0" encoding="UTF-8"?>\n<resources tag="root">' +
    '<resource name="a&amp;b" tag="t1" type="text/plain" size="3" last-modified="2026-11-01T00:00:00.000Z" md5="x"/>' +
    "<resource name='d' tag='t2' type='' directory='true' last-modified='2026-11-01T00:00:00.000Z' md5=''></resource>" +
    '<resource name="é😀" tag="t3" type="text/plain" size="0" last-modified="2026-11-01T00:00:00.000Z" md5="y"/>' +
    "</resources>\n";

  it("gives the same entries whatever the chunks are, down to one character at a time", () => {
    const whole = parseListing(xml);
    expect(whole.map((e) => e.name)).toEqual(["a&b", "d", "é😀"]);
    for (const size of [1, 2, 7, 64]) {
      const reader = new ListingReader();
      const entries = [];
      for (let i = 0; i < xml.length; i += size) entries.push(...reader.push(xml.slice(i, i + size)));
      reader.end();
      expect(entries).toEqual(whole);
    }
  });

  it("a document without its end is an error at its end; so is one that is not a listing, or an element of over 1 MiB", () => {
    const cut = new ListingReader();
    expect(cut.push(xml.slice(0, xml.indexOf("</resources>"))).map((e) => e.name)).toEqual(["a&b", "d", "é😀"]);
    expect(() => cut.end()).toThrow(/cut short/);
    expect(() => parseListing("<stores/>")).toThrow(/not a directory listing/);
    const huge = new ListingReader();
    huge.push('<resources><resource name="');
    expect(() => huge.push("x".repeat(1024 * 1024 + 1))).toThrow(/an element of over 1 MiB/);
    expect(parseListing('<?xml version="1.0"?>\n<resources/>')).toEqual([]);
  });
});
