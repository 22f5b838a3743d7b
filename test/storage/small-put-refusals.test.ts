// A PUT whose body is announced as small (UNCHECKED_UPLOAD_MAX) is received before any check
// (issue 14: the core's check before the upload cost a database round trip). The refusal then
// comes from the storage's own check, made atomically with the write: it must answer as the early
// check did (404 / 412 with its reason) and store nothing, on SQLite and on MongoDB. On MongoDB
// the event ids a write reserves with its lease's announcement are given back when it is
// refused: the feed stays dense across instances (docs/mongodb.md, "The store write lease").

import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureHomeStore } from "../../src/server/main.js";
import { createTroveServer, type TroveServer } from "../../src/server/server.js";
import { UNCHECKED_UPLOAD_MAX } from "../../src/services/resource-service.js";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import type { StoragePort } from "../../src/storage/port.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { type FerretDb, startFerretDb } from "../support/ferretdb.js";
import { describeWithMongoDbOrFerretDb } from "../support/mongodb.js";

const DATA = "/resources/v2/data";
const small = () => randomBytes(4096);

/** Two servers on one storage: two instances on one MongoDB database, or one SQLite data directory. */
interface Pair {
  a: string;
  b: string;
  /** Creates a filesystem store that the server at `b` has not served yet, as another instance would. */
  folderStoreElsewhere(name: string, folder: string): Promise<void>;
  close(): Promise<void>;
}

const folderStore = (name: string, folder: string) => ({
  name,
  type: "filesystem" as const,
  settings: { "keep-deleted": "1h", "filesystem-location": folder },
});

async function serve(storage: StoragePort): Promise<{ url: string; server: TroveServer }> {
  const server = createTroveServer({ logger: pino({ level: "silent" }), auth: "anonymous", storage });
  const { port } = await server.listen(0, "127.0.0.1");
  return { url: `http://127.0.0.1:${port}`, server };
}

async function sqlitePair(): Promise<Pair> {
  const dataDir = await mkdtemp(join(tmpdir(), "trove-small-put-"));
  const storage = await SqliteStorage.open({ dataDir });
  await ensureHomeStore(storage, Date.now());
  const one = await serve(storage);
  return {
    a: one.url,
    b: one.url,
    async folderStoreElsewhere(name, folder) {
      // On the storage itself, under the server's filesystem layer: it learns of the store only
      // when a request touches it.
      await storage.createStore(folderStore(name, folder), Date.now());
    },
    async close() {
      await one.server.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

let ferret: FerretDb | undefined;
let mongoUrl = "";

async function mongoPair(): Promise<Pair> {
  const database = `trove_test_${randomBytes(6).toString("hex")}`;
  const open = () => MongoStorage.open({ url: mongoUrl, database, watchInterval: 100 });
  const first = await open();
  await ensureHomeStore(first, Date.now());
  const a = await serve(first);
  const b = await serve(await open());
  return {
    a: a.url,
    b: b.url,
    async folderStoreElsewhere(name, folder) {
      const created = await fetch(`${a.url}/resources/v2/stores`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(folderStore(name, folder)),
      });
      expect(created.status, await created.text()).toBe(201);
    },
    async close() {
      await a.server.close();
      await b.server.close();
      const admin = await open();
      await admin.dropDatabase();
      await admin.close();
    },
  };
}

/** The store's current event id, as a follower starting now is told it. */
async function cursorOf(url: string, store: string): Promise<number> {
  const lines = (await (await fetch(`${url}/resources/v2/poll`)).text()).trim().split("\n");
  const line = lines.find((l) => l.startsWith(`RESET ${store} `));
  expect(line, lines.join("\n")).toMatch(/^RESET \S+ \d+$/);
  return Number(line?.split(" ")[2]);
}

/** The event ids after `cursor`, as a follower reads them (at once: nothing is waited for). */
async function eventIdsAfter(url: string, store: string, cursor: number): Promise<number[]> {
  const res = await fetch(`${url}/resources/v2/poll?store=${store}:${cursor}&wait=0`);
  const text = await res.text();
  if (res.status === 204) return [];
  expect(res.status, text).toBe(200);
  return text
    .trim()
    .split("\n")
    .filter((line) => line.startsWith("CHANGE|"))
    .map((line) => Number(line.split("|")[1]));
}

async function put(url: string, path: string, body: Uint8Array, headers: Record<string, string> = {}) {
  const res = await fetch(`${url}${DATA}/${path}`, { method: "PUT", body, headers });
  return { status: res.status, text: (await res.text()).trim(), etag: res.headers.get("ETag") };
}

/** The refusals on one backend: `pair` gives two servers on one storage. */
function refusalCases(backend: string, pair: () => Promise<Pair>): void {
  describe(`PUT of a small body refused by the store's own check (${backend}; issue 14)`, () => {
    let servers: Pair;
    const folders: string[] = [];
    beforeAll(async () => {
      servers = await pair();
    }, 60_000);
    afterAll(async () => {
      await servers?.close();
      for (const folder of folders) await rm(folder, { recursive: true, force: true });
    }, 60_000);

    it("the bodies these tests send are announced as small: no check before the upload", () => {
      expect(small().byteLength).toBeLessThanOrEqual(UNCHECKED_UPLOAD_MAX);
    });

    it("PUT of a small body to a missing store -> 404 with its reason, no store created", async () => {
      const reply = await put(servers.a, "nope/a.txt", small());
      expect(reply).toMatchObject({ status: 404, text: "store nope not found", etag: null });
      expect((await fetch(`${servers.b}/resources/v2/stores/nope`)).status).toBe(404);
      expect((await fetch(`${servers.b}${DATA}/nope/a.txt`)).status).toBe(404);
    });

    it("PUT of a small body under a missing parent -> 404 with its reason, nothing stored, no event", async () => {
      const cursor = await cursorOf(servers.a, "home");
      const reply = await put(servers.a, "home/missing/a.txt", small());
      expect(reply).toMatchObject({ status: 404, text: "parent directory /missing/ not found" });
      expect((await fetch(`${servers.b}${DATA}/home/missing/a.txt`)).status).toBe(404);
      expect(await eventIdsAfter(servers.b, "home", cursor)).toEqual([]);
    });

    it("PUT of a small body with a stale If-Match -> 412 with its reason, contents, ETag and feed unchanged", async () => {
      const body = small();
      const first = await put(servers.a, "home/stale.bin", body);
      expect(first.status).toBe(201);
      const cursor = await cursorOf(servers.a, "home");
      const stale = await put(servers.a, "home/stale.bin", small(), { "If-Match": '"not-the-tag"' });
      expect(stale).toMatchObject({
        status: 412,
        text: `If-Match does not match the current ETag ${first.etag}`,
        etag: null,
      });
      const got = await fetch(`${servers.b}${DATA}/home/stale.bin`);
      expect(got.status).toBe(200);
      expect(got.headers.get("ETag")).toBe(first.etag);
      expect(Buffer.from(await got.arrayBuffer()).equals(body)).toBe(true);
      expect(await eventIdsAfter(servers.b, "home", cursor)).toEqual([]);
      expect(await cursorOf(servers.b, "home")).toBe(cursor);
    });

    it("PUT of a small body with If-Match on an absent resource -> 412 with its reason, nothing created", async () => {
      const cursor = await cursorOf(servers.a, "home");
      const reply = await put(servers.a, "home/absent.bin", small(), { "If-Match": '"any"' });
      expect(reply).toMatchObject({ status: 412, text: "If-Match given but the resource does not exist" });
      expect((await fetch(`${servers.b}${DATA}/home/absent.bin`)).status).toBe(404);
      expect(await eventIdsAfter(servers.b, "home", cursor)).toEqual([]);
    });

    it("a small PUT to a filesystem store this instance has not served yet lands in the folder (issue 17)", async () => {
      // The check before the upload used to make the filesystem layer look the store up; a small
      // upload now reaches it without that, and the storage refuses to index it outside the folder.
      const folder = await mkdtemp(join(tmpdir(), "trove-small-put-folder-"));
      folders.push(folder);
      await servers.folderStoreElsewhere("shared", folder);
      const first = await put(servers.b, "shared/a.txt", Buffer.from("one"));
      expect(first.status, first.text).toBe(201);
      expect(await readFile(join(folder, "a.txt"), "utf8")).toBe("one");
      const second = await put(servers.b, "shared/a.txt", Buffer.from("two"), { "If-Match": first.etag as string });
      expect(second.status, second.text).toBe(200);
      expect(await readFile(join(folder, "a.txt"), "utf8")).toBe("two");
      const got = await fetch(`${servers.a}${DATA}/shared/a.txt`);
      expect(got.headers.get("ETag")).toBe(second.etag);
      expect(await got.text()).toBe("two");
    });

    it("Write announcing a small content_length and sending more -> InvalidArgument, received only up to it, nothing stored", async () => {
      const resources = createClient(
        ResourceService,
        createConnectTransport({ baseUrl: servers.a, httpVersion: "1.1" }),
      );
      async function* messages() {
        yield { part: { case: "header" as const, value: { store: "home", path: "liar.bin", contentLength: 10n } } };
        for (let i = 0; i < 4; i++) yield { part: { case: "chunk" as const, value: randomBytes(16 * 1024) } };
      }
      const err = await resources.write(messages()).then(
        () => undefined,
        (e: unknown) => ConnectError.from(e),
      );
      expect(err?.code).toBe(Code.InvalidArgument);
      expect(err?.rawMessage).toBe("received more than the 10 bytes announced");
      expect((await fetch(`${servers.b}${DATA}/home/liar.bin`)).status).toBe(404);
    });

    it("refused and accepted writes alternating on two instances: the feed's event ids stay dense", async () => {
      const created = await fetch(`${servers.a}/resources/v2/stores`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ name: "dense", type: "snapshot" }),
      });
      expect(created.status).toBe(201);
      const start = await cursorOf(servers.a, "dense");
      const etags = new Map<string, string>();
      for (let i = 0; i < 8; i++) {
        const [writer, refuser] = i % 2 === 0 ? [servers.a, servers.b] : [servers.b, servers.a];
        const path = `dense/f${i % 3}.bin`;
        const refused = await put(refuser, path, small(), { "If-Match": '"stale"' });
        expect(refused.status, refused.text).toBe(412);
        const missing = await put(refuser, `dense/none/f${i}.bin`, small());
        expect(missing.status, missing.text).toBe(404);
        const ok = await put(writer, path, small(), etags.has(path) ? { "If-Match": etags.get(path) as string } : {});
        expect([200, 201], ok.text).toContain(ok.status);
        etags.set(path, ok.etag as string);
      }
      // One event per accepted write, numbered on from the store's id: nothing was taken by a refusal.
      const ids = await eventIdsAfter(servers.b, "dense", start);
      expect(ids).toEqual([start + 6, start + 7, start + 8]);
      expect(await cursorOf(servers.a, "dense")).toBe(start + 8);
    });
  });
}

refusalCases("sqlite", sqlitePair);

// On the shared server when there is one, else on a FerretDB of the file's own.
describeWithMongoDbOrFerretDb("small PUT refusals on MongoDB", (shared) => {
  beforeAll(async () => {
    if (shared) mongoUrl = shared;
    else {
      ferret = await startFerretDb();
      mongoUrl = ferret.url;
    }
  }, 60_000);

  afterAll(async () => {
    await ferret?.dispose();
  }, 60_000);

  refusalCases("mongodb", mongoPair);

  describe("event ids reserved with the lease's announcement, 10 instances (issue 14)", () => {
    it("refused and accepted writes from 10 instances at once: every accepted write has its own id, the feed is dense and never moves past an id written later", async () => {
      const database = `trove_test_${randomBytes(6).toString("hex")}`;
      const instances = await Promise.all(
        Array.from({ length: 10 }, () => MongoStorage.open({ url: mongoUrl, database, watchInterval: 3_600_000 })),
      );
      const [a] = instances as [MongoStorage];
      const T0 = 1_700_000_000_000;
      const once = async function* (text: string) {
        yield Buffer.from(text);
      };
      try {
        await a.createStore({ name: "s", type: "snapshot", settings: {} }, T0);
        const start = (await a.getStore("s"))?.lastEventId as number;
        let cursor = start;
        let done = false;
        const follower = (async () => {
          for (;;) {
            const finished = done;
            const batch = await a.changesSince("s", cursor, 7);
            for (const n of batch) {
              expect(n.eventId).toBe(cursor + 1);
              cursor = n.eventId;
            }
            if (batch.length === 0) {
              if (finished) return;
              await new Promise((resolve) => setTimeout(resolve, 2));
            }
          }
        })();
        const refusals: string[] = [];
        const writes = instances.flatMap((s, i) =>
          Array.from({ length: 5 }, async (_, j) => {
            const path = `f${i}-${j}.txt`;
            // Refused under the lease, after its ids were reserved: a stale If-Match, a missing parent.
            for (const [target, pre] of [
              [path, { ifMatch: ["stale"] }],
              [`none/${path}`, {}],
            ] as const) {
              const blob = await s.writeBlob(once("refused"), { maxSize: 1024 });
              await s.putFile("s", target, blob, "text/plain", pre, T0).then(
                () => refusals.push(`${target} was accepted`),
                (err: Error) => refusals.push(err.name),
              );
            }
            const blob = await s.writeBlob(once(path), { maxSize: 1024 });
            return (await s.putFile("s", path, blob, "text/plain", {}, T0)).node.eventId;
          }),
        );
        const ids = await Promise.all(writes);
        done = true;
        await follower;
        expect(new Set(refusals)).toEqual(new Set(["PreconditionFailedError", "NotFoundError"]));
        expect(refusals).toHaveLength(100);
        expect([...ids].sort((x, y) => x - y)).toEqual(Array.from({ length: 50 }, (_, k) => start + 1 + k));
        expect(cursor).toBe(start + 50);
        expect((await a.getStore("s"))?.lastEventId).toBe(start + 50);
        // Nothing left reserved: the next write, from any instance, takes the next id.
        const blob = await instances[9]?.writeBlob(once("last"), { maxSize: 1024 });
        const { node } = await (instances[9] as MongoStorage).putFile(
          "s",
          "last.txt",
          blob as never,
          "text/plain",
          {},
          T0,
        );
        expect(node.eventId).toBe(start + 51);
      } finally {
        await a.dropDatabase();
        for (const s of instances) await s.close();
      }
    }, 120_000);
  });
});
