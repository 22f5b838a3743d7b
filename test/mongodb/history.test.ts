// History on MongoDB (docs/history.md, "MongoDB"), beyond the storage contract: what a write that
// died between its versions and its node leaves, and what reads and the next write make of it;
// versions of large subtrees (several write batches), blobs shared by a restore when history is
// turned off, and the orphan sweep counting versions' blobs. On a real wire-protocol server
// (TROVE_TEST_MONGODB_URL; FerretDB in CI).

import { randomBytes } from "node:crypto";
import { type Db, MongoClient } from "mongodb";
import { afterEach, describe, expect, it } from "vitest";
import type { StoreConfig } from "../../src/domain/store.js";
import { INLINE_MAX } from "../../src/storage/local/blob-files.js";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import type { NodeRecord, VersionRecord } from "../../src/storage/port.js";
import { describeWithMongoDb, MONGODB_URL } from "../support/mongodb.js";

const T0 = 1_700_000_000_000;
const SECOND = 1000;
const DAY = 86_400_000;

interface Opened {
  storage: MongoStorage;
  client: MongoClient;
  db: Db;
}

const opened: Opened[] = [];

/** A fresh database, and a connection of the test's own to look at it. */
async function open(): Promise<Opened> {
  const database = `trove_test_${randomBytes(6).toString("hex")}`;
  const storage = await MongoStorage.open({ url: MONGODB_URL as string, database });
  const client = new MongoClient(MONGODB_URL as string);
  const o = { storage, client, db: client.db(database) };
  opened.push(o);
  return o;
}

function keeping(name: string, keepVersions = "30d"): StoreConfig {
  return { name, type: "snapshot", settings: { "keep-deleted": "7d", "keep-versions": keepVersions } };
}

async function* once(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

async function put(storage: MongoStorage, store: string, path: string, body: Uint8Array | string, now = T0) {
  const blob = await storage.writeBlob(once(typeof body === "string" ? Buffer.from(body) : body), {
    maxSize: 1 << 24,
  });
  return storage.putFile(store, path, blob, "text/plain", {}, now);
}

async function readAll(storage: MongoStorage, node: NodeRecord): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of storage.readBlob(node)) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks);
}

async function versionsOf(storage: MongoStorage, store: string, path: string): Promise<VersionRecord[]> {
  const out: VersionRecord[] = [];
  for await (const batch of storage.listVersions(store, path, {})) out.push(...batch);
  return out;
}

async function listAsOf(storage: MongoStorage, store: string, dir: string, event: number): Promise<VersionRecord[]> {
  const out: VersionRecord[] = [];
  for await (const batch of storage.listNodesAsOf(store, dir, event, { recursive: true, includeDeleted: true })) {
    out.push(...batch);
  }
  return out;
}

async function storedBlobs(db: Db): Promise<string[]> {
  return (await db.collection("blobs.files").find({}).toArray()).map((f) => String(f._id)).sort();
}

describeWithMongoDb("history on MongoDB", () => {
  afterEach(async () => {
    for (const o of opened.splice(0)) {
      await o.storage.close();
      await o.db.dropDatabase();
      await o.client.close();
    }
  });

  it("creates the versions collection's indexes at start-up", async () => {
    const { db } = await open();
    const names = (await db.collection("versions").indexes()).map((i) => i.name);
    expect(names).toEqual(expect.arrayContaining(["store_path_event", "children", "ended", "events"]));
  });

  describe("a write that died between its versions and its node", () => {
    it("leaves a version of the current state: every read ignores it, and the next write records it again with its real end", async () => {
      const { storage, db } = await open();
      await storage.createStore(keeping("s"), T0);
      const { node: one } = await put(storage, "s", "a.txt", "one");
      // What the dying write had written: the version of the state it was replacing, ended by the
      // event it had reserved (never committed), and nothing else.
      const state = (await db.collection("nodes").findOne({ _id: "s/a.txt" as never })) as Record<string, unknown>;
      const left = {
        ...state,
        _id: `s/a.txt#${one.tag}`,
        user: "",
        endedEventId: one.eventId + 5,
        ended: T0 + 500,
      };
      await db.collection("versions").insertOne(left as never);

      // Reads: the current state only, and it is the node's.
      const states = await versionsOf(storage, "s", "a.txt");
      expect(states.map((v) => [v.tag, v.endedEventId])).toEqual([[one.tag, 0]]);
      expect(await storage.getVersion("s", "a.txt", one.tag)).toMatchObject({ tag: one.tag, endedEventId: 0 });
      for (const event of [one.eventId, one.eventId + 1, one.eventId + 4]) {
        expect(await storage.getNodeAsOf("s", "a.txt", event)).toMatchObject({ tag: one.tag, endedEventId: 0 });
        expect((await listAsOf(storage, "s", "", event)).map((v) => [v.path, v.tag, v.endedEventId])).toEqual([
          ["a.txt", one.tag, 0],
        ]);
      }
      expect(await storage.getNodeAsOf("s", "a.txt", one.eventId - 1)).toBeUndefined();
      expect(await storage.eventAt("s", T0 + DAY)).toBe(one.eventId);

      // The next write: its version of the same state replaces what was left, with this write's end.
      const { node: two } = await put(storage, "s", "a.txt", "two", T0 + 2 * SECOND);
      const after = await versionsOf(storage, "s", "a.txt");
      expect(after.map((v) => [v.tag, v.endedEventId, v.ended])).toEqual([
        [two.tag, 0, 0],
        [one.tag, two.eventId, T0 + 2 * SECOND],
      ]);
      expect(await db.collection("versions").countDocuments({ store: "s", path: "a.txt" })).toBe(1);
      expect(await storage.getNodeAsOf("s", "a.txt", two.eventId - 1)).toMatchObject({ tag: one.tag });
      expect((await readAll(storage, after[1] as VersionRecord)).toString()).toBe("one");
    });
  });

  describe("a path's state as of an event, by links (FerretDB) or by query (MongoDB's indexes)", () => {
    /** Both ways of MongoHistory.getNodeAsOf, whichever server this is. */
    function readingBy(storage: MongoStorage, scans: boolean): void {
      (storage as unknown as { history: { scansQueries: boolean } }).history.scansQueries = scans;
    }

    for (const scans of [true, false]) {
      const way = scans ? "following links by _id" : "by query";
      it(`${way}: 20 states back, past a purged tombstone, and a node made before history`, async () => {
        const { storage, db } = await open();
        readingBy(storage, scans);
        await storage.createStore(
          { name: "s", type: "recursive", settings: { "keep-deleted": "1s", "keep-versions": "30d" } },
          T0,
        );
        const states: NodeRecord[] = [];
        for (let i = 0; i < 20; i++) states.push((await put(storage, "s", "a.txt", `v${i}`, T0 + i)).node);
        for (const [i, state] of states.entries()) {
          const then = await storage.getNodeAsOf("s", "a.txt", state.eventId);
          expect(then, `state ${i}`).toMatchObject({ tag: state.tag, eventId: state.eventId });
          expect((await readAll(storage, then as VersionRecord)).toString()).toBe(`v${i}`);
        }
        // Deleted, its tombstone purged, made again: nothing links the new node to its earlier states.
        const { node: gone } = await storage.deleteTree("s", "a.txt", {}, T0 + SECOND);
        expect(await storage.purgeExpired(T0 + 10 * SECOND)).toBe(1);
        const { node: again } = await put(storage, "s", "a.txt", "again", T0 + 11 * SECOND);
        expect(await storage.getNodeAsOf("s", "a.txt", (states[3] as NodeRecord).eventId)).toMatchObject({
          tag: states[3]?.tag,
        });
        expect(await storage.getNodeAsOf("s", "a.txt", gone.eventId)).toBeUndefined();
        expect(await storage.getNodeAsOf("s", "a.txt", again.eventId)).toMatchObject({ tag: again.tag });
        // The root, re-tagged by every change: its first state, far back.
        const root = await storage.getNodeAsOf("s", "", (states[0] as NodeRecord).eventId);
        expect(root).toMatchObject({ directory: true, eventId: 1 });
        // A node made before history links to nothing: its earlier state is still found.
        const { node: before } = await put(storage, "s", "b.txt", "before", T0 + 12 * SECOND);
        const { node: after } = await put(storage, "s", "b.txt", "after", T0 + 13 * SECOND);
        await db.collection("nodes").updateOne({ _id: "s/b.txt" as never }, { $unset: { replacedTag: "" } });
        expect(await storage.getNodeAsOf("s", "b.txt", before.eventId)).toMatchObject({ tag: before.tag });
        expect(await storage.getNodeAsOf("s", "b.txt", after.eventId)).toMatchObject({ tag: after.tag });
        expect(await storage.getNodeAsOf("s", "c.txt", after.eventId)).toBeUndefined();
      });
    }
  });

  it("a deletion of a directory larger than one write batch keeps every file's contents", async () => {
    const { storage } = await open();
    await storage.createStore(keeping("s"), T0);
    await storage.makeDirectory("s", "d", {}, T0);
    const files = new Map<string, string>();
    for (let i = 0; i < 70; i++) {
      const path = `d/f${String(i).padStart(2, "0")}.txt`;
      files.set(path, `contents of ${path}`);
      await put(storage, "s", path, files.get(path) as string);
    }
    const { count } = await storage.deleteTree("s", "d", {}, T0 + SECOND, "carol");
    expect(count).toBe(71);
    for (const [path, text] of files) {
      const [tombstone, kept] = await versionsOf(storage, "s", path);
      expect(tombstone).toMatchObject({ deleted: true, user: "carol" });
      expect(kept).toMatchObject({ deleted: false, endedEventId: tombstone?.eventId, ended: T0 + SECOND });
      const state = await storage.getVersion("s", path, kept?.tag as string);
      expect(state?.inline && Buffer.from(state.inline).toString()).toBe(text);
      expect((await readAll(storage, kept as VersionRecord)).toString()).toBe(text);
    }
  }, 120_000);

  it("with history turned off, a replaced blob that a kept version shares (a restore) stays until the purge takes the version", async () => {
    const { storage, db } = await open();
    await storage.createStore(keeping("s"), T0);
    const v1 = randomBytes(INLINE_MAX * 2);
    const { node: first } = await put(storage, "s", "a.bin", v1);
    const { node: second } = await put(storage, "s", "a.bin", randomBytes(INLINE_MAX * 2), T0 + SECOND);
    const { node: restored } = await storage.restoreVersion("s", "a.bin", first.tag, {}, T0 + 2 * SECOND);
    expect(restored.blob).toBe(first.blob);
    await storage.updateStore(keeping("s", "0"), T0 + 3 * SECOND);
    // The restored node is replaced and no version of it is kept; its blob is the first state's.
    const { node: third } = await put(storage, "s", "a.bin", randomBytes(INLINE_MAX * 2), T0 + 4 * SECOND);
    expect(await storedBlobs(db)).toEqual([first.blob, second.blob, third.blob].sort());
    const kept = await storage.getVersion("s", "a.bin", first.tag);
    expect((await readAll(storage, kept as VersionRecord)).equals(v1)).toBe(true);
    // keep-versions 0: the next purge takes every version, then the blobs nothing refers to.
    expect(await storage.purgeExpired(T0 + 4 * SECOND)).toBe(2);
    expect(await storedBlobs(db)).toEqual([third.blob]);
  });

  it("the orphan sweep keeps the GridFS files that only a version refers to", async () => {
    const { storage, db } = await open();
    await storage.createStore(keeping("s"), T0);
    const v1 = randomBytes(INLINE_MAX * 2);
    const { node: first } = await put(storage, "s", "a.bin", v1);
    const { node: second } = await put(storage, "s", "a.bin", randomBytes(INLINE_MAX * 2), T0 + SECOND);
    // Both uploaded over an hour ago, as far as the sweep can tell.
    await db.collection("blobs.files").updateMany({}, { $set: { uploadDate: new Date(Date.now() - 2 * 3_600_000) } });
    await storage.purgeExpired(T0 + SECOND);
    expect(await storedBlobs(db)).toEqual([first.blob, second.blob].sort());
    const kept = await storage.getVersion("s", "a.bin", first.tag);
    expect((await readAll(storage, kept as VersionRecord)).equals(v1)).toBe(true);
  });
});
