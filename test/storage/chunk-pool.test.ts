// Blob reads into pooled buffers (issue 14, GET of 1 MiB and 64 MiB): a chunk is lent to its
// consumer and comes back to the pool only when the consumer gives it back, after its socket
// write's callback, as a REST answer over HTTP/1.1 can. Concurrent reads of different blobs sent to slow and
// fast clients never carry each other's bytes, a client that goes away mid-body lets its chunks
// come back, a view kept after the give-back reads empty, and chunks never given back (a
// promotion's write batch) keep their bytes.

import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { giveBack } from "../../src/storage/chunk-pool.js";
import { BlobFiles, readBuffers } from "../../src/storage/local/blob-files.js";

const MiB = 1024 * 1024;
const md5 = (data: Uint8Array) => createHash("md5").update(data).digest("base64");

let root: string;
let blobs: BlobFiles;
/** The blobs the tests read, by name: their contents and their blob UUID. */
const stored = new Map<string, { data: Buffer; blob: string }>();
let server: http.Server;
let base: string;
/** Answers whose body ended early because the client went away. */
let abandoned = 0;

function entryOf(name: string): { data: Buffer; blob: string } {
  const entry = stored.get(name);
  if (!entry) throw new Error(`no blob ${name}`);
  return entry;
}

async function store(name: string, size: number): Promise<void> {
  const data = randomBytes(size);
  // Each blob differs from the others in every chunk: a mix-up shows in the bytes.
  const info = await blobs.write(
    (async function* () {
      yield data;
    })(),
    { maxSize: 100 * MiB },
  );
  stored.set(name, { data, blob: info.blob });
}

function drained(res: http.ServerResponse): Promise<void> {
  return new Promise((resolve, reject) => {
    const done = () => {
      res.off("close", closed);
      resolve();
    };
    const closed = () => {
      res.off("drain", done);
      reject(new Error("client went away"));
    };
    res.once("drain", done);
    res.once("close", closed);
  });
}

/** Waits for `condition`, for at most 20 s. */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** GET /{name} with the client reading at its own pace: `pauseEvery` bytes, then a pause. */
function get(name: string, options: { pauseEvery?: number; abortAfter?: number } = {}): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}/${name}`, { agent: false }, (res) => {
      const parts: Buffer[] = [];
      let received = 0;
      let sincePause = 0;
      res.on("data", (chunk: Buffer) => {
        parts.push(chunk);
        received += chunk.length;
        sincePause += chunk.length;
        if (options.abortAfter !== undefined && received >= options.abortAfter) {
          req.destroy();
          resolve(Buffer.concat(parts));
          return;
        }
        if (options.pauseEvery !== undefined && sincePause >= options.pauseEvery) {
          sincePause = 0;
          res.pause();
          setTimeout(() => res.resume(), 5);
        }
      });
      res.once("end", () => resolve(Buffer.concat(parts)));
      res.once("error", reject);
    });
    req.once("error", (err) => {
      if (options.abortAfter === undefined) reject(err);
    });
  });
}

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "trove-chunk-pool-"));
  blobs = new BlobFiles(root);
  await blobs.init();
  await store("a", 5 * MiB + 777);
  await store("b", 4 * MiB);
  await store("c", 3 * MiB + 1);
  await store("d", MiB);
  await store("e", 300 * 1024);
  await store("f", 20 * MiB);
  // Streams a blob as the REST face should: each chunk written and given back in the write's
  // callback. A response whose socket is gone or no longer writable would keep the chunk in its
  // own queue and never call back (node:http's OutgoingMessage): such a chunk is given back
  // without being written.
  server = http.createServer(async (req, res) => {
    const entry = stored.get((req.url ?? "").slice(1));
    if (!entry) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "Content-Length": entry.data.length });
    try {
      for await (const chunk of blobs.read(entry.blob, entry.data.length)) {
        const socket = res.socket;
        if (res.destroyed || !socket || socket.destroyed || !socket.writable) {
          giveBack(chunk);
          throw new Error("client went away");
        }
        if (!res.write(chunk, () => giveBack(chunk))) await drained(res);
      }
      res.end();
    } catch {
      abandoned++;
      res.destroy();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await rm(root, { recursive: true, force: true });
});

describe("blob reads into pooled buffers (issue 14: GET of 1 MiB and 64 MiB)", () => {
  it("concurrent GETs of different blobs, slow and fast clients, each get their blob's bytes and MD5 exactly while the pool's buffers are reused", async () => {
    const before = readBuffers.stats();
    const names = ["a", "b", "c", "d", "e", "a", "b", "c", "d", "e", "f", "f"];
    for (let round = 0; round < 3; round++) {
      const got = await Promise.all(
        names.map((name, i) =>
          get(name, i % 3 === 0 ? { pauseEvery: 256 * 1024 } : {}).then((data) => ({ name, data })),
        ),
      );
      for (const { name, data } of got) {
        const expected = entryOf(name).data;
        expect(data.length, name).toBe(expected.length);
        expect(md5(data), name).toBe(md5(expected));
        expect(data.equals(expected), name).toBe(true);
      }
    }
    await until(() => readBuffers.stats().lent === before.lent, "every lent chunk given back");
    const after = readBuffers.stats();
    expect(after.reused - before.reused).toBeGreaterThan(0);
    expect(after.free).toBeLessThanOrEqual(readBuffers.keep);
  }, 60_000);

  it("a client that goes away mid-body lets its chunks come back to the pool, and the next GETs are exact", async () => {
    const before = readBuffers.stats();
    const abandonedBefore = abandoned;
    const cut = await Promise.all([
      get("f", { abortAfter: 2 * MiB }),
      get("a", { abortAfter: 1 }),
      get("f", { abortAfter: 7 * MiB + 3 }),
    ]);
    expect(
      cut.map((part, i) => part.equals(entryOf(["f", "a", "f"][i] as string).data.subarray(0, part.length))),
    ).toEqual([true, true, true]);
    await until(() => abandoned === abandonedBefore + 3, "the server to see the three clients go");
    await until(() => readBuffers.stats().lent === before.lent, "the abandoned answers' chunks given back");
    for (const name of ["f", "a", "b"]) {
      const data = await get(name);
      expect(data.equals(entryOf(name).data), name).toBe(true);
    }
  }, 60_000);

  it("a chunk kept after it was given back reads as empty, never as the bytes of the blob read next into its buffer", async () => {
    const a = entryOf("a");
    const b = entryOf("b");
    let kept: Uint8Array | undefined;
    for await (const chunk of blobs.read(a.blob, a.data.length)) {
      kept = chunk;
      break;
    }
    const view = (kept as Uint8Array).subarray(10, 20);
    expect(Buffer.from(view).equals(a.data.subarray(10, 20))).toBe(true);
    giveBack(kept as Uint8Array);
    expect(kept?.byteLength).toBe(0);
    expect(view.byteLength).toBe(0);
    const reusedBefore = readBuffers.stats().reused;
    const parts: Buffer[] = [];
    for await (const chunk of blobs.read(b.blob, b.data.length)) {
      parts.push(Buffer.from(chunk));
      giveBack(chunk);
    }
    expect(readBuffers.stats().reused).toBeGreaterThan(reusedBefore);
    expect(Buffer.concat(parts).equals(b.data)).toBe(true);
    expect(kept?.byteLength).toBe(0);
    expect(view.byteLength).toBe(0);
  });

  it("chunks never given back (a promotion's write batch) keep their bytes while other reads reuse the pool", async () => {
    const f = entryOf("f");
    const held: Uint8Array[] = [];
    for await (const chunk of blobs.read(f.blob, f.data.length)) held.push(chunk);
    for (const name of ["a", "b", "c", "a", "b", "c"]) {
      const entry = entryOf(name);
      const parts: Buffer[] = [];
      for await (const chunk of blobs.read(entry.blob, entry.data.length)) {
        parts.push(Buffer.from(chunk));
        giveBack(chunk);
      }
      expect(Buffer.concat(parts).equals(entry.data), name).toBe(true);
    }
    expect(Buffer.concat(held).equals(f.data)).toBe(true);
  });

  it("giving back a chunk the pool did not lend, a part of a lent chunk, or a chunk twice changes nothing", async () => {
    const own = Buffer.from("not from a blob");
    giveBack(own);
    expect(own.toString()).toBe("not from a blob");

    const c = entryOf("c");
    const chunks: Uint8Array[] = [];
    for await (const chunk of blobs.read(c.blob, c.data.length)) chunks.push(chunk);
    const first = chunks[0] as Uint8Array;
    giveBack(first.subarray(0, 100));
    expect(Buffer.from(first).equals(c.data.subarray(0, MiB))).toBe(true);

    const before = readBuffers.stats();
    giveBack(first);
    giveBack(first);
    const after = readBuffers.stats();
    expect(after.lent).toBe(before.lent - 1);
    expect(after.free).toBeLessThanOrEqual(Math.min(before.free + 1, readBuffers.keep));
    for (const chunk of chunks.slice(1)) giveBack(chunk);
    // Three 1 MiB chunks were lent, and read empty once given back; the 1-byte tail had a buffer
    // of its own, which a give-back leaves as it is.
    expect(chunks.map((chunk) => chunk.byteLength)).toEqual([0, 0, 0, 1]);
    expect(readBuffers.stats().lent).toBe(before.lent - 3);
  });

  it("a read stopped after its first chunk gives back the chunk it read ahead; the one the consumer holds stays its own", async () => {
    const a = entryOf("a");
    const before = readBuffers.stats();
    let first: Uint8Array | undefined;
    for await (const chunk of blobs.read(a.blob, a.data.length)) {
      first = chunk;
      break;
    }
    const after = readBuffers.stats();
    expect(after.lent).toBe(before.lent + 1);
    expect(Buffer.from(first as Uint8Array).equals(a.data.subarray(0, MiB))).toBe(true);
    giveBack(first as Uint8Array);
    expect(readBuffers.stats().lent).toBe(before.lent);
  });
});
