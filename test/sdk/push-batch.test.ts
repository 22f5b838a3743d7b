// push() by batches (issue 31; docs/cli.md, "Small files by batches"): files of up to 256 KiB
// written by ResourceService.WriteMany, at most 100 (512 KiB) a request, over the REST client's own
// fetch; larger files by PUT. What a client observes: the requests sent, what the server then
// holds, the local state, and the failures of files changed on the server after the listing.
// Against a real server on 127.0.0.1.

import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BatchUnsupportedError,
  createRestClient,
  isTransferChangedError,
  PreconditionFailedError,
  push,
  type TroveRestClient,
} from "../../sdk/src/index.js";
import { stateFileOf } from "../../sdk/src/transfer/local-state.js";
import { startServer, type TestServer } from "../support/server.js";
import { contentsOf, LARGE, makeBatchTree, SMALL, TREE_BYTES } from "./batch-tree.js";

const WRITE_MANY = "/trove.resources.v2.ResourceService/WriteMany";

let work: string;
let server: TestServer;
let rest: TroveRestClient;
let source: string;

/** A client whose fetch counts WriteMany calls and PUTs of files, and can act before a WriteMany goes. */
function counted(before?: () => Promise<Response | undefined>) {
  const seen = { writeMany: 0, puts: 0 };
  const client = createRestClient({
    baseUrl: server.url,
    fetch: async (input, init) => {
      const url = String(input);
      if (url.endsWith(WRITE_MANY)) {
        seen.writeMany += 1;
        const answer = await before?.();
        if (answer) return answer;
      } else if (init?.method === "PUT" && url.includes("/resources/v2/data/") && !url.endsWith("/")) {
        seen.puts += 1;
      }
      return fetch(input, init);
    },
  });
  return { client, seen };
}

/** What a GET of `path` answers: its bytes as text, MD5 and tag. */
async function stored(store: string, path: string) {
  const got = await rest.get(store, path);
  if (got.notModified) throw new Error(`GET ${path} answered 304 without a condition`);
  return { text: Buffer.from(got.body).toString(), bytes: Buffer.from(got.body), md5: got.md5, tag: got.tag };
}

/** The server's copy under `store` holds the source's bytes, and says so by its MD5s. */
async function same(store: string): Promise<void> {
  for (const f of SMALL) {
    const got = await stored(store, f);
    expect(got.text).toBe(contentsOf(f));
    expect(got.md5).toBe(createHash("md5").update(contentsOf(f)).digest("base64"));
  }
  expect((await stored(store, "large.bin")).bytes.equals(LARGE)).toBe(true);
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "trove-push-batch-"));
  server = await startServer();
  rest = createRestClient({ baseUrl: server.url });
  source = join(work, "source");
  await makeBatchTree(source);
}, 60_000);

afterAll(async () => {
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("push by batches of WriteMany", () => {
  it("250 small files in 3 WriteMany calls (100, 100, 50), the large one by PUT; the server's bytes and the state as a push of PUTs", async () => {
    await rest.stores.create("batched");
    const { client, seen } = counted();
    const states = join(work, "states");
    const summary = await push({ client, store: "batched", directory: source, stateDirectory: states });
    expect(summary).toMatchObject({
      transferred: 251,
      bytes: TREE_BYTES,
    });
    expect(seen).toEqual({ writeMany: 3, puts: 1 });
    await same("batched");
    // Every file recorded with its MD5: a second push reads no file and sends nothing.
    const lines = (await readFile(stateFileOf(source, states), "utf8")).trimEnd().split("\n").slice(1);
    expect(lines).toHaveLength(251);
    for (const line of lines) {
      const [path, size, , md5] = JSON.parse(line) as [string, number, string, string];
      const bytes = path === "large.bin" ? LARGE : Buffer.from(contentsOf(path));
      expect([size, md5]).toEqual([bytes.length, createHash("md5").update(bytes).digest("base64")]);
    }
    const again = counted();
    expect(
      (await push({ client: again.client, store: "batched", directory: source, stateDirectory: states })).transferred,
    ).toBe(0);
    expect(again.seen).toEqual({ writeMany: 0, puts: 0 });
    // The same push without batches: one PUT per file, the same bytes.
    await rest.stores.create("by-puts");
    const plain = counted();
    await push({ client: plain.client, store: "by-puts", directory: source, batch: false, state: false });
    expect(plain.seen).toEqual({ writeMany: 0, puts: 251 });
    await same("by-puts");
  });

  it("a file changed or created on the server after the listing is reported and keeps the server's bytes; the rest of its batch is written", async () => {
    await rest.stores.create("changed");
    await rest.mkdir("changed", "a");
    await rest.put("changed", "a/f001.txt", "old\n");
    let acted = false;
    const { client } = counted(async () => {
      if (!acted) {
        acted = true;
        await rest.put("changed", "a/f001.txt", "theirs, since the listing\n");
        await rest.put("changed", "a/f002.txt", "theirs, created since the listing\n");
      }
      return undefined;
    });
    const failure = await push({ client, store: "changed", directory: source, state: false }).catch((err) => err);
    expect(isTransferChangedError(failure)).toBe(true);
    expect(failure.failures.map((f: { path: string; created: boolean }) => [f.path, f.created])).toEqual([
      ["a/f001.txt", false],
      ["a/f002.txt", true],
    ]);
    for (const f of failure.failures) expect(f.error).toBeInstanceOf(PreconditionFailedError);
    expect(failure.summary.transferred).toBe(249);
    expect((await stored("changed", "a/f001.txt")).text).toBe("theirs, since the listing\n");
    expect((await stored("changed", "a/f002.txt")).text).toBe("theirs, created since the listing\n");
    expect((await stored("changed", "a/f000.txt")).text).toBe("contents of a/f000.txt\n");
    expect((await stored("changed", "b/f249.txt")).text).toBe("contents of b/f249.txt\n");
    // --force overwrites them, by batches too.
    const forced = await push({ client: rest, store: "changed", directory: source, state: false, force: true });
    expect(forced.transferred).toBe(2);
    await same("changed");
  });

  it("a server without WriteMany (404) is written one PUT per file, from its first refusal on", async () => {
    await rest.stores.create("no-write-many");
    const { client, seen } = counted(async () => new Response("no such endpoint", { status: 404 }));
    expect((await push({ client, store: "no-write-many", directory: source, state: false })).transferred).toBe(251);
    // Each batch gathered before the first refusal came back was refused whole; every file then went by PUT.
    expect(seen.puts).toBe(251);
    expect(seen.writeMany).toBeGreaterThanOrEqual(1);
    expect(seen.writeMany).toBeLessThanOrEqual(3);
    await same("no-write-many");
    // The REST client says so to a program that calls it, having written nothing.
    const refused = await client
      .writeMany("no-write-many", [{ path: "x.txt", body: Buffer.from("x") }])
      .catch((err) => err);
    expect(refused).toBeInstanceOf(BatchUnsupportedError);
    expect(refused.message).toBe("the server does not write many resources at once (404)");
  });

  it("writeMany(): each item's answer or its own typed error, in order; more than 1,000 items refused before a request", async () => {
    await rest.stores.create("api");
    const answers = await rest.writeMany("api", [
      { path: "one.txt", body: Buffer.from("one") },
      { path: "one.txt", body: Buffer.from("not this"), ifNoneMatch: "*" },
      { path: "two.txt", body: Buffer.from("two"), contentMd5: createHash("md5").update("two").digest("base64") },
      { path: "missing/three.txt", body: Buffer.from("three") },
    ]);
    expect(answers[0]).toMatchObject({
      index: 0,
      path: "one.txt",
      created: true,
      size: 3,
      tag: (await stored("api", "one.txt")).tag,
    });
    expect(answers[1]?.error).toBeInstanceOf(PreconditionFailedError);
    expect(answers[2]).toMatchObject({ created: true, md5: createHash("md5").update("two").digest("base64") });
    expect(answers[3]?.error?.status).toBe(404);
    expect((await stored("api", "one.txt")).text).toBe("one");
    const many = Array.from({ length: 1001 }, (_, i) => ({ path: `m${i}.txt`, body: Buffer.from("m") }));
    await expect(rest.writeMany("api", many)).rejects.toThrow("writeMany takes at most 1000 items, not 1001");
    await expect(rest.writeMany("api", [{ path: "big.bin", body: Buffer.alloc(3 * 1024 * 1024 + 1) }])).rejects.toThrow(
      RangeError,
    );
  });
});
