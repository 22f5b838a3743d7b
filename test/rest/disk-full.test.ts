// A full disk is an answer: REST 507 Insufficient Storage and gRPC RESOURCE_EXHAUSTED, with the
// reason "insufficient storage: the server's disk is full", and nothing changed; a DELETE that
// frees space still runs (the room kept for deletes), and afterwards writes work again.
// Two ways to a full disk: the database's size cap (maxDatabaseBytes, SQLite's max_page_count:
// runs everywhere), and a real 8 MiB tmpfs under the data directory (needs root and mount).

import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtemp, open, readdir, rm, stat, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import {
  ResourceService,
  type WriteHeaderSchema,
  type WriteRequestSchema,
} from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { InsufficientStorageError } from "../../src/domain/errors.js";
import { ensureHomeStore } from "../../src/server/main.js";
import { createTroveServer, type TroveServer } from "../../src/server/server.js";
import { SqliteStorage, type SqliteStorageOptions } from "../../src/storage/sqlite/sqlite-storage.js";
import { codeOf } from "../auth/support.js";
import { tmpfsMountable } from "../support/tmpfs.js";
import { DATA, expectError, type RestClient, restClient, storeState } from "./rest-client.js";

const REASON = "insufficient storage: the server's disk is full";

const TMPFS = tmpfsMountable();
if (!TMPFS) {
  console.warn(
    "test/rest/disk-full.test.ts: cannot mount a tmpfs (needs root and mount): the tests on a real full disk are SKIPPED; the database-cap tests still run",
  );
}

interface Served {
  server: TroveServer;
  client: RestClient;
  url: string;
  storage: SqliteStorage;
}

let served: Served | undefined;

async function serve(options: SqliteStorageOptions, logger = pino({ level: "silent" })): Promise<Served> {
  const storage = await SqliteStorage.open(options);
  await ensureHomeStore(storage, Date.now());
  // Without history: a delete on a store that keeps versions frees nothing until the purge
  // (docs/storage.md, "Room for deletes"), and these cases are about the deletes that free space.
  await storage.updateStore(
    { name: "home", type: "recursive", settings: { "keep-deleted": "7d", "keep-versions": "0" } },
    Date.now(),
  );
  const server = createTroveServer({ logger, auth: "anonymous", storage });
  const { port } = await server.listen(0, "127.0.0.1");
  const url = `http://127.0.0.1:${port}`;
  served = { server, storage, url, client: restClient({ url, port }) };
  return served;
}

afterEach(async () => {
  await served?.server.close();
  served = undefined;
});

async function* writeMessages(
  header: MessageInitShape<typeof WriteHeaderSchema>,
  data: Uint8Array,
): AsyncIterable<MessageInitShape<typeof WriteRequestSchema>> {
  yield { part: { case: "header" as const, value: header } };
  for (let i = 0; i < data.byteLength; i += 32 * 1024) {
    yield { part: { case: "chunk" as const, value: data.subarray(i, i + 32 * 1024) } };
  }
}

async function* once(data: Uint8Array): AsyncIterable<Uint8Array> {
  yield data;
}

/** What a client sees of every write refused for a full disk: REST and gRPC. */
async function expectWritesRefused(s: Served, options: { deletePath: string }): Promise<void> {
  const { client } = s;
  expectError(await client.fetch("PUT", `${DATA}/home/new.txt`, { body: "small and inline" }), 507, REASON);
  expectError(await client.fetch("PUT", `${DATA}/home/new.bin`, { body: randomBytes(300_000) }), 507, REASON);
  expectError(await client.fetch("PUT", `${DATA}/home/new-dir/`), 507, REASON);
  expectError(await client.fetch("DELETE", `${DATA}/home/${options.deletePath}`), 507, REASON);
  const resources = createClient(ResourceService, createGrpcTransport({ baseUrl: s.url }));
  const exhausted = [Code.ResourceExhausted, REASON];
  expect(
    await codeOf(() => resources.write(writeMessages({ store: "home", path: "new.txt" }, Buffer.from("small")))),
  ).toEqual(exhausted);
  expect(
    await codeOf(() => resources.write(writeMessages({ store: "home", path: "new.bin" }, randomBytes(300_000)))),
  ).toEqual(exhausted);
  expect(await codeOf(() => resources.makeDirectory({ store: "home", path: "new-dir" }))).toEqual(exhausted);
  expect(await codeOf(() => resources.delete({ store: "home", path: options.deletePath }))).toEqual(exhausted);
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile())
    .map((e) => e.name)
    .sort();
}

async function until(check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("a full database (its size cap)", () => {
  let dataDir: string;
  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "trove-full-"));
  });
  afterEach(async () => {
    await rm(dataDir, { recursive: true, force: true });
  });

  /** A directory of 300 small files (deleting it needs room for 300 tombstones), then contents until refused. */
  async function fill(storage: SqliteStorage): Promise<void> {
    await storage.makeDirectory("home", "many", {}, Date.now());
    const put = async (path: string, data: Uint8Array) => {
      const blob = await storage.writeBlob(once(data), { maxSize: 1 << 20 });
      await storage.putFile("home", path, blob, "application/octet-stream", {}, Date.now());
    };
    for (let i = 0; i < 300; i++) await put(`many/${i}.txt`, Buffer.from(`file ${i}`));
    const refused = async (write: () => Promise<unknown>) =>
      write().then(
        () => false,
        (err: unknown) => {
          if (err instanceof InsufficientStorageError) return true;
          throw err;
        },
      );
    for (let i = 0; !(await refused(() => put(`fill-${i}.bin`, randomBytes(60 * 1024)))); i++);
    for (let d = 0; !(await refused(() => storage.makeDirectory("home", `d${d}`, {}, Date.now()))); d++);
  }

  it("PUT, PUT of a directory and DELETE answer 507 (gRPC RESOURCE_EXHAUSTED) with the reason, and change nothing", async () => {
    const s = await serve({ dataDir, reserveBytes: 0, maxDatabaseBytes: 512 * 1024 });
    await fill(s.storage);
    const before = await storeState(s.client);
    await expectWritesRefused(s, { deletePath: "many/" });
    expect(await storeState(s.client)).toEqual(before);
    // The contents of the refused large writes went with them.
    expect(await filesUnder(join(dataDir, "blobs"))).toEqual([]);
    expect(await filesUnder(join(dataDir, "tmp"))).toEqual([]);
  });

  it("each 507 is one short log line with the request id and the reason, not the error's protobuf details (issue 29, item 5)", async () => {
    const lines: string[] = [];
    const logger = pino({ level: "error" }, { write: (line: string) => lines.push(line) });
    const s = await serve({ dataDir, reserveBytes: 0, maxDatabaseBytes: 512 * 1024 }, logger);
    await fill(s.storage);
    lines.length = 0;
    const res = await fetch(`${s.url}${DATA}/home/one-more.bin`, { method: "PUT", body: randomBytes(64 * 1024) });
    expect(res.status).toBe(507);
    const id = res.headers.get("x-request-id");
    const failed = lines.map((l) => JSON.parse(l)).filter((l) => l.msg === "request failed");
    expect(failed).toHaveLength(1);
    expect(failed[0]).toMatchObject({
      req: id,
      method: "PUT",
      status: 507,
      err: { code: "ResourceExhausted", message: REASON },
    });
    expect(JSON.stringify(failed[0].err)).not.toMatch(/details|desc|QuotaFailure/);
    expect(lines[0]?.length).toBeLessThan(512);
  });

  it("a DELETE that frees space runs while the database is full, and afterwards writes work again", async () => {
    const s = await serve({ dataDir, reserveBytes: 64 * 1024, maxDatabaseBytes: 512 * 1024 });
    await fill(s.storage);
    expectError(await s.client.fetch("PUT", `${DATA}/home/new.txt`, { body: "new" }), 507, REASON);
    const deleted = await s.client.fetch("DELETE", `${DATA}/home/many/`);
    expect(deleted.status, deleted.text).toBe(200);
    for (let i = 0; i < 3; i++) {
      expect((await s.client.fetch("DELETE", `${DATA}/home/fill-${i}.bin`)).status).toBe(200);
    }
    expect((await s.client.fetch("PUT", `${DATA}/home/new.txt`, { body: "new" })).status).toBe(201);
    expect((await s.client.fetch("PUT", `${DATA}/home/new-dir/`)).status).toBe(201);
    const read = await s.client.fetch("GET", `${DATA}/home/new.txt`);
    expect([read.status, read.text]).toEqual([200, "new"]);
  });
});

describe.runIf(TMPFS)("a full disk (8 MiB tmpfs)", () => {
  let mountDir: string;
  beforeEach(async () => {
    mountDir = await mkdtemp(join(tmpdir(), "trove-tmpfs-"));
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=8m", "tmpfs", mountDir]);
  });
  afterEach(async () => {
    await served?.server.close();
    served = undefined;
    execFileSync("umount", [mountDir]);
    await rm(mountDir, { recursive: true, force: true });
  });

  /**
   * Large PUTs until the disk refuses one (507: blob files end in ENOSPC), then what is left taken
   * by a file of another program, as when something else fills the disk.
   */
  async function fill(s: Served): Promise<string> {
    for (let i = 0; ; i++) {
      const reply = await s.client.fetch("PUT", `${DATA}/home/big-${i}.bin`, { body: randomBytes(600 * 1024) });
      if (reply.status === 507) {
        expectError(reply, 507, REASON);
        break;
      }
      expect(reply.status, reply.text).toBe(201);
    }
    expect(await filesUnder(join(mountDir, "tmp"))).toEqual([]);
    const filler = join(mountDir, "filler");
    const file = await open(filler, "w");
    const chunk = Buffer.alloc(4096, 1);
    try {
      for (;;) await file.write(chunk);
    } catch (err) {
      expect((err as NodeJS.ErrnoException).code).toBe("ENOSPC");
    } finally {
      await file.close();
    }
    return filler;
  }

  it("PUT, PUT of a directory and DELETE answer 507 (gRPC RESOURCE_EXHAUSTED), change nothing, and work once space is freed", async () => {
    const s = await serve({ dataDir: mountDir, reserveBytes: 0 });
    const filler = await fill(s);
    const before = await storeState(s.client);
    const blobsBefore = await filesUnder(join(mountDir, "blobs"));
    await expectWritesRefused(s, { deletePath: "big-0.bin" });
    expect(await storeState(s.client)).toEqual(before);
    expect(await filesUnder(join(mountDir, "blobs"))).toEqual(blobsBefore);
    expect(await filesUnder(join(mountDir, "tmp"))).toEqual([]);

    await unlink(filler);
    expect((await s.client.fetch("PUT", `${DATA}/home/new.txt`, { body: "new" })).status).toBe(201);
    expect((await s.client.fetch("DELETE", `${DATA}/home/big-0.bin`)).status).toBe(200);
  });

  it("a DELETE that frees space runs on the full disk (the reserve), then writes work and the reserve comes back", async () => {
    const reserve = join(mountDir, "reserve");
    const s = await serve({ dataDir: mountDir, reserveBytes: 1024 * 1024 });
    await until(async () => (await stat(reserve).catch(() => undefined))?.size === 1024 * 1024);
    await fill(s);
    expectError(await s.client.fetch("PUT", `${DATA}/home/new.txt`, { body: "new" }), 507, REASON);
    expectError(await s.client.fetch("PUT", `${DATA}/home/new-dir/`), 507, REASON);

    const deleted = await s.client.fetch("DELETE", `${DATA}/home/big-0.bin`);
    expect(deleted.status, deleted.text).toBe(200);
    await expect(stat(reserve)).rejects.toThrow("ENOENT");
    expect((await s.client.fetch("PUT", `${DATA}/home/new.txt`, { body: "new" })).status).toBe(201);
    expect((await s.client.fetch("PUT", `${DATA}/home/new-dir/`)).status).toBe(201);
    const read = await s.client.fetch("GET", `${DATA}/home/new.txt`);
    expect([read.status, read.text]).toEqual([200, "new"]);

    // Once there is room for it twice over, the reserve is written again (after a write).
    for (let i = 1; i < 6; i++) await s.client.fetch("DELETE", `${DATA}/home/big-${i}.bin`);
    await until(async () => {
      await s.client.fetch("PUT", `${DATA}/home/new.txt`, { body: "again" });
      return (await stat(reserve).catch(() => undefined))?.size === 1024 * 1024;
    });
  });
});
