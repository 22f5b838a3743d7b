// Issue 31, session 13: what a push or pull holds in memory is bounded by bytes as well as by the
// number of transfers (eachLimited's byte budget, `bytesInFlight`), and the files a pull writes
// with one synchronous write (replace-file.ts) are as atomic as before and stamped as they are
// under their final name. The bodies in flight are counted by the fetch the REST client is given:
// from the request until its answer's body has been read to its end.

import { createHash } from "node:crypto";
import { lstatSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRestClient, pull, push, type TroveRestClient } from "../../sdk/src/index.js";
import { eachLimited } from "../../sdk/src/rest/in-flight.js";
import { parseListing } from "../../sdk/src/rest/xml.js";
import { stampOf, stateFileOf } from "../../sdk/src/transfer/local-state.js";
import { replaceFileSync } from "../../sdk/src/transfer/replace-file.js";
import { startServer, type TestServer } from "../support/server.js";
import { ensureSdkBuilt } from "./build.js";
import { runTrove } from "./support.js";

let work: string;
let server: TestServer;
let rest: TroveRestClient;

/** 12 files of 300 KiB (streamed: above the 256 KiB read whole) and 40 of 3 KiB (read whole). */
const LARGE = 12;
const SMALL = 40;
const bytesOf = (name: string) => Buffer.alloc(name.startsWith("large") ? 300 * 1024 : 3 * 1024, `${name} `);

/** A REST client whose fetch records the most file bytes (listed sizes) and bodies open at once. */
function measuredClient(sizes: Map<string, number>) {
  const seen = { bytes: 0, bodies: 0, maxBytes: 0, maxBodies: 0 };
  const client = createRestClient({
    baseUrl: server.url,
    fetch: async (input, init) => {
      const path = new URL(String(input)).pathname;
      const name = path.split("/").pop() ?? "";
      const size = (init?.method ?? "GET") === "GET" ? sizes.get(name) : undefined;
      if (size === undefined) return fetch(input, init);
      seen.bytes += size;
      seen.bodies += 1;
      seen.maxBytes = Math.max(seen.maxBytes, seen.bytes);
      seen.maxBodies = Math.max(seen.maxBodies, seen.bodies);
      let open = true;
      const settle = () => {
        if (!open) return;
        open = false;
        seen.bytes -= size;
        seen.bodies -= 1;
      };
      try {
        const res = await fetch(input, init);
        if (!res.body) {
          settle();
          return res;
        }
        const body = res.body.pipeThrough(new TransformStream({ flush: settle }));
        return new Response(body, { status: res.status, headers: res.headers });
      } catch (err) {
        settle();
        throw err;
      }
    },
  });
  return { client, seen };
}

beforeAll(async () => {
  await ensureSdkBuilt();
  work = await mkdtemp(join(tmpdir(), "trove-transfer-memory-"));
  server = await startServer();
  rest = createRestClient({ baseUrl: server.url });
  const source = join(work, "source");
  await mkdir(join(source, "d"), { recursive: true });
  for (let i = 0; i < LARGE; i++) await writeFile(join(source, "d", `large${i}.bin`), bytesOf(`large${i}.bin`));
  for (let i = 0; i < SMALL; i++) await writeFile(join(source, "d", `small${i}.txt`), bytesOf(`small${i}.txt`));
  await push({ client: rest, store: "home", path: "memory", directory: source, state: false });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("issue 31 (session 13): in flight bounded by bytes as well as by count", () => {
  it("eachLimited never has more than the budget's bytes in flight; an item heavier than the whole budget goes alone", async () => {
    const weights = [300, 300, 300, 50, 50, 900, 50, 400, 400, 10];
    let bytes = 0;
    let count = 0;
    const seen: { bytes: number; count: number; alone: boolean }[] = [];
    await eachLimited(
      weights.map((w, i) => ({ w, i })),
      4,
      async ({ w }) => {
        bytes += w;
        count += 1;
        seen.push({ bytes, count, alone: w > 600 ? count === 1 : true });
        await new Promise((resolve) => setImmediate(resolve));
        bytes -= w;
        count -= 1;
      },
      undefined,
      { bytes: 600, weigh: ({ w }) => w },
    );
    expect(seen).toHaveLength(weights.length);
    // The item of 900 is over the whole budget: it ran with nothing else in flight.
    expect(seen.every((s) => s.alone)).toBe(true);
    expect(Math.max(...seen.filter((s) => s.count > 1).map((s) => s.bytes))).toBeLessThanOrEqual(600);
    expect(Math.max(...seen.map((s) => s.count))).toBeLessThanOrEqual(4);
    // Not one at a time: the budget still lets small items run together.
    expect(Math.max(...seen.map((s) => s.count))).toBeGreaterThan(1);
  });

  it("pull() with 16 transfers and bytesInFlight 1 MiB has at most 1 MiB of listed file bytes open at once, and copies every byte", async () => {
    const sizes = new Map<string, number>();
    for (let i = 0; i < LARGE; i++) sizes.set(`large${i}.bin`, 300 * 1024);
    for (let i = 0; i < SMALL; i++) sizes.set(`small${i}.txt`, 3 * 1024);
    const { client, seen } = measuredClient(sizes);
    const target = join(work, "pulled");
    const summary = await pull({
      client,
      store: "home",
      path: "memory",
      directory: target,
      transfers: 16,
      bytesInFlight: 1024 * 1024,
      state: false,
    });
    expect(summary.transferred).toBe(LARGE + SMALL);
    expect(seen.maxBytes).toBeGreaterThan(0);
    expect(seen.maxBytes).toBeLessThanOrEqual(1024 * 1024);
    expect(seen.maxBodies).toBeLessThanOrEqual(16);
    expect(seen.bodies).toBe(0);
    for (const name of sizes.keys()) {
      expect(
        createHash("md5")
          .update(await readFile(join(target, "d", name)))
          .digest("base64"),
      ).toBe(createHash("md5").update(bytesOf(name)).digest("base64"));
    }
    // No temporary file left beside them.
    expect((await readdir(join(target, "d"))).sort()).toEqual([...sizes.keys()].sort());
  });

  it("the stamps a pull records are those of the files under their final names (taken after the rename, from the open file)", async () => {
    const cache = join(work, "state");
    const target = join(work, "stamped");
    await pull({ client: rest, store: "home", path: "memory", directory: target, stateDirectory: cache });
    // Version 2: a header line, then one [path, size, stamp, md5, at] line per file, in path order.
    const [header, ...lines] = (await readFile(stateFileOf(target, cache), "utf8")).trimEnd().split("\n");
    expect(JSON.parse(header as string)).toEqual({ version: 2, root: target });
    const records = lines.map((l) => JSON.parse(l) as [string, number, string, string, number]);
    const state = {
      files: Object.fromEntries(records.map(([path, size, stamp, md5]) => [path, { size, stamp, md5 }])),
    };
    expect(records.map(([path]) => path)).toEqual(records.map(([path]) => path).sort());
    expect(Object.keys(state.files)).toHaveLength(LARGE + SMALL);
    for (const [path, recorded] of Object.entries(state.files)) {
      const st = lstatSync(join(target, ...path.split("/")), { bigint: true });
      expect({ path, stamp: recorded.stamp, size: recorded.size }).toEqual({
        path,
        stamp: stampOf(st),
        size: Number(st.size),
      });
    }
  });
});

describe("issue 31 (session 13): replaceFileSync leaves no part of a file under its final name", () => {
  it("a rename that fails (no parent directory) leaves neither the temporary file nor the destination", async () => {
    const dir = await mkdtemp(join(work, "replace-"));
    const tmp = join(dir, ".a.tmp");
    expect(() => replaceFileSync(tmp, join(dir, "missing", "a.txt"), Buffer.from("abc"))).toThrow(/ENOENT/);
    expect(await readdir(dir)).toEqual([]);
  });

  it("a directory in the way is left alone unless replaceDirectory; with it the file takes its place", async () => {
    const dir = await mkdtemp(join(work, "replace-"));
    await mkdir(join(dir, "a", "inner"), { recursive: true });
    await writeFile(join(dir, "a", "inner", "kept.txt"), "kept");
    expect(() => replaceFileSync(join(dir, ".t1"), join(dir, "a"), Buffer.from("new"))).toThrow();
    expect(await readFile(join(dir, "a", "inner", "kept.txt"), "utf8")).toBe("kept");
    expect((await readdir(dir)).sort()).toEqual(["a"]);
    const st = replaceFileSync(join(dir, ".t2"), join(dir, "a"), Buffer.from("new"), { replaceDirectory: true });
    expect(await readFile(join(dir, "a"), "utf8")).toBe("new");
    expect(stampOf(st)).toBe(stampOf(lstatSync(join(dir, "a"), { bigint: true })));
    expect((await readdir(dir)).sort()).toEqual(["a"]);
  });
});

describe("issue 31 (session 13): trove mirror --transfers, as push and pull take it", () => {
  const trove = (args: string[]) =>
    runTrove(args, {
      env: { PATH: process.env.PATH, HOME: work, XDG_CONFIG_HOME: join(work, ".config"), TROVE_URL: server.url },
      cwd: work,
    });

  it("--transfers 0 or 65 is a usage error (exit 2) and creates nothing; --transfers 16 copies every file", async () => {
    for (const bad of ["0", "65", "many"]) {
      const r = await trove(["mirror", "home/memory", "mirrored", "--once", "--transfers", bad]);
      expect(r).toEqual({
        code: 2,
        stdout: "",
        stderr: `trove mirror: --transfers takes a number from 1 to 64, not ${JSON.stringify(bad)}\n`,
      });
    }
    expect((await readdir(work)).filter((n) => n.includes("mirrored"))).toEqual([]);
    const r = await trove([
      "mirror",
      "home/memory",
      "mirrored",
      "--once",
      "--follow",
      "poll",
      "--transfers",
      "16",
      "-q",
    ]);
    expect(r).toEqual({ code: 0, stdout: "", stderr: "" });
    for (const name of await readdir(join(work, "source", "d"))) {
      expect((await readFile(join(work, "mirrored", "d", name))).equals(bytesOf(name))).toBe(true);
    }
    expect((await readdir(join(work, "mirrored", "d"))).length).toBe(LARGE + SMALL);
  });
});

describe("issue 31 (session 13): a listing is read element by element, without a document tree", () => {
  it("reads every attribute as the server writes it, entities and character references decoded, quotes of either kind, any spacing, self-closed or not", () => {
    const xml =
      '<?xml version="1.0" encoding="UTF-8"?>\n<resources tag="root">' +
      '<resource name="a&amp;b &lt;c&gt; &quot;d&quot; &apos;e&apos; \u00e9 &#38;&#x26;.txt" tag="t1" type="text/plain" access="read,write" size="3" last-modified="2026-11-27T15:27:41.876Z" md5="1B2M2Y8AsgTpgAmY7PhCfg==" blob="b-1"/>' +
      "<resource\n  name='dir' tag='t2'\ttype='' directory='true' last-modified='2026-11-27T15:27:42.000Z' md5=''></resource>" +
      '<resource name="gone.txt" tag="t3" type="text/plain" deleted="true" size="0" last-modified="2026-11-27T15:27:43.000Z" md5="" access="" />' +
      "</resources>\n";
    expect(parseListing(xml)).toEqual([
      {
        name: "a&b <c> \"d\" 'e' \u00e9 &&.txt",
        tag: "t1",
        type: "text/plain",
        deleted: false,
        directory: false,
        lastModified: new Date("2026-11-27T15:27:41.876Z"),
        md5: "1B2M2Y8AsgTpgAmY7PhCfg==",
        access: ["read", "write"],
        size: 3,
        blob: "b-1",
      },
      {
        name: "dir",
        tag: "t2",
        type: "",
        deleted: false,
        directory: true,
        lastModified: new Date("2026-11-27T15:27:42.000Z"),
        md5: "",
      },
      {
        name: "gone.txt",
        tag: "t3",
        type: "text/plain",
        deleted: true,
        directory: false,
        lastModified: new Date("2026-11-27T15:27:43.000Z"),
        md5: "",
        access: [],
        size: 0,
      },
    ]);
    expect(parseListing('<?xml version="1.0"?>\n<resources/>')).toEqual([]);
    expect(() => parseListing("<stores/>")).toThrow("not a directory listing: no resources element");
  });
});
