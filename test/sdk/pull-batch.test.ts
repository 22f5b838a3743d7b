// pull() by batches (issue 31; docs/cli.md, "Small files by batches"): files of up to 256 KiB
// read by ResourceService.ReadMany, at most 100 (512 KiB) a request, over the REST client's own
// fetch; larger files by GET. What a client observes: the requests sent, the bytes written, the
// local state, and the failures of files that changed on the server after the listing. Against
// a real server on 127.0.0.1.

import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BatchUnsupportedError,
  createRestClient,
  isTransferChangedError,
  NotFoundError,
  pull,
  push,
  type TroveRestClient,
} from "../../sdk/src/index.js";
import type { ReadManyResult } from "../../sdk/src/rest/read-many.js";
import { stateFileOf } from "../../sdk/src/transfer/local-state.js";
import { startServer, type TestServer } from "../support/server.js";
import { contentsOf, LARGE, makeBatchTree, SMALL, TREE_BYTES } from "./batch-tree.js";

const READ_MANY = "/trove.resources.v2.ResourceService/ReadMany";

let work: string;
let server: TestServer;
let rest: TroveRestClient;
let source: string;

/** A client whose fetch counts ReadMany calls and GETs of files, and can act before a ReadMany goes. */
function counted(before?: (body: Uint8Array) => Promise<Response | undefined>) {
  const seen = { readMany: 0, gets: 0 };
  const client = createRestClient({
    baseUrl: server.url,
    fetch: async (input, init) => {
      const url = String(input);
      if (url.endsWith(READ_MANY)) {
        seen.readMany += 1;
        const answer = await before?.(init?.body as Uint8Array);
        if (answer) return answer;
      } else if (
        init?.method === "GET" &&
        url.includes("/resources/v2/data/") &&
        !url.endsWith("/") &&
        !url.includes("?")
      ) {
        seen.gets += 1;
      }
      return fetch(input, init);
    },
  });
  return { client, seen };
}

async function same(dir: string): Promise<void> {
  for (const f of SMALL) expect(await readFile(join(dir, f), "utf8")).toBe(contentsOf(f));
  expect((await readFile(join(dir, "large.bin"))).equals(LARGE)).toBe(true);
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "trove-pull-batch-"));
  server = await startServer();
  rest = createRestClient({ baseUrl: server.url });
  source = join(work, "source");
  await makeBatchTree(source);
  await rest.stores.create("batch");
  await push({ client: rest, store: "batch", directory: source, state: false });
}, 60_000);

afterAll(async () => {
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("pull by batches of ReadMany", () => {
  it("250 small files in 3 ReadMany calls (100, 100, 50), the large one by GET; the bytes and the state as a pull of GETs", async () => {
    const { client, seen } = counted();
    const copy = join(work, "copy");
    const states = join(work, "states");
    const summary = await pull({ client, store: "batch", directory: copy, stateDirectory: states });
    expect(summary).toMatchObject({
      transferred: 251,
      bytes: TREE_BYTES,
    });
    expect(seen).toEqual({ readMany: 3, gets: 1 });
    await same(copy);
    // No temporary file left, and every file recorded with its MD5 for the next run.
    const names = await readdir(copy, { recursive: true });
    expect(names.filter((n) => n.split("/").pop()?.startsWith("."))).toEqual([]);
    const lines = (await readFile(stateFileOf(copy, states), "utf8")).trimEnd().split("\n").slice(1);
    expect(lines).toHaveLength(251);
    // The same pull without batches: one GET per file, the same bytes.
    const plain = counted();
    const byGets = join(work, "by-gets");
    await pull({ client: plain.client, store: "batch", directory: byGets, batch: false, state: false });
    expect(plain.seen).toEqual({ readMany: 0, gets: 251 });
    await same(byGets);
  });

  it("a file changed or deleted on the server after the listing is reported and left alone; the rest of its batch is written", async () => {
    let acted = false;
    const { client } = counted(async () => {
      if (acted) return undefined;
      acted = true;
      await rest.put("batch", "a/f001.txt", "changed since the listing\n");
      await rest.delete("batch", "a/f002.txt");
      return undefined;
    });
    const copy = join(work, "changed");
    const failure = await pull({ client, store: "batch", directory: copy, state: false }).catch((err) => err);
    expect(isTransferChangedError(failure)).toBe(true);
    expect(failure.failures.map((f: { path: string }) => f.path)).toEqual(["a/f001.txt", "a/f002.txt"]);
    expect(failure.failures[0].error.status).toBe(412);
    expect(failure.failures[1].error.status).toBe(404);
    expect(failure.summary.transferred).toBe(249);
    await expect(readFile(join(copy, "a/f001.txt"))).rejects.toThrow(/ENOENT/);
    expect(await readFile(join(copy, "a/f000.txt"), "utf8")).toBe("contents of a/f000.txt\n");
    expect(await readFile(join(copy, "b/f249.txt"), "utf8")).toBe("contents of b/f249.txt\n");
    // Put back for the other cases.
    await rest.put("batch", "a/f001.txt", "contents of a/f001.txt\n");
    await rest.put("batch", "a/f002.txt", "contents of a/f002.txt\n");
  });

  it("a server without ReadMany (404) is read one GET per file, from its first refusal on", async () => {
    const { client, seen } = counted(async () => new Response("no such endpoint", { status: 404 }));
    const copy = join(work, "no-read-many");
    expect((await pull({ client, store: "batch", directory: copy, state: false })).transferred).toBe(251);
    // The batches gathered before the first refusal came back (at most the 3 of this tree) were
    // each refused; every file then went by GET.
    expect(seen.gets).toBe(251);
    expect(seen.readMany).toBeGreaterThanOrEqual(1);
    expect(seen.readMany).toBeLessThanOrEqual(3);
    await same(copy);
    // The REST client says so to a program that calls it.
    const refused = counted(async () => new Response("no such endpoint", { status: 404 }));
    const failure = await (async () => {
      for await (const _ of refused.client.readMany("batch", ["a/f000.txt"])) {
        // nothing
      }
    })().catch((err) => err);
    expect(failure).toBeInstanceOf(BatchUnsupportedError);
  });

  it("cancelled during a batch: rejects with the reason, leaves no partial or temporary file, and the next pull copies only what is missing", async () => {
    const controller = new AbortController();
    const { client } = counted(async () => {
      controller.abort(new Error("stopped by the test"));
      return undefined;
    });
    const copy = join(work, "cancelled");
    await expect(
      pull({ client, store: "batch", directory: copy, signal: controller.signal, state: false }),
    ).rejects.toThrow(/stopped by the test/);
    const names = (await readdir(copy, { recursive: true })).filter((n) => n.endsWith(".txt") || n.endsWith(".bin"));
    expect(names.filter((n) => n.split("/").pop()?.startsWith("."))).toEqual([]);
    for (const n of names.filter((name) => name.endsWith(".txt"))) {
      expect(await readFile(join(copy, n), "utf8")).toBe(contentsOf(n));
    }
    const again = await pull({ client: rest, store: "batch", directory: copy, state: false });
    expect(again.transferred).toBe(251 - names.length);
    await same(copy);
  });

  it("readMany answers each path in order, a missing one with its own NotFoundError", async () => {
    const got: ReadManyResult[] = [];
    for await (const r of rest.readMany("batch", ["b/f200.txt", "nope.txt", "large.bin", "a"])) got.push(r);
    expect(got.map((r) => [r.index, r.path, r.error !== undefined ? r.error.status : r.body.length])).toEqual([
      [0, "b/f200.txt", 23],
      [1, "nope.txt", 404],
      [2, "large.bin", LARGE.length],
      [3, "a", 0],
    ]);
    const [first, missing, , dir] = got;
    expect(first !== undefined && first.error === undefined && first.body.toString()).toBe("contents of b/f200.txt\n");
    expect(missing?.error).toBeInstanceOf(NotFoundError);
    expect(dir !== undefined && dir.error === undefined && dir.directory).toBe(true);
  });
});

describe("a mirror's full copy by batches of ReadMany", () => {
  it("small files by ReadMany (3 calls for 250), the large one by GET; every write counted; a server without ReadMany by GETs", async () => {
    const { mirror } = await import("../../sdk/src/index.js");
    const run = async (client: TroveRestClient, target: string) => {
      let writes = 0;
      let synced: { written?: number } | undefined;
      const m = mirror({
        client,
        store: "batch",
        target,
        once: true,
        transfers: 4,
        onEvent: (e) => {
          if (e.type === "write") writes += 1;
          if (e.type === "synced") synced = e;
        },
      });
      await m.done;
      return { writes, written: synced?.written };
    };
    const batched = counted();
    expect(await run(batched.client, join(work, "mirror"))).toEqual({ writes: 251, written: 251 });
    expect(batched.seen).toEqual({ readMany: 3, gets: 1 });
    await same(join(work, "mirror"));

    const old = counted(async () => new Response("no such endpoint", { status: 404 }));
    expect(await run(old.client, join(work, "mirror-old"))).toEqual({ writes: 251, written: 251 });
    expect(old.seen.gets).toBe(251);
    await same(join(work, "mirror-old"));
  });
});
