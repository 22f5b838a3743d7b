// The storage contract for the MongoDB adapter, against a real wire-protocol
// server (FerretDB in CI, see .ci/run). Needs TROVE_TEST_MONGODB_URL: without it the suite
// fails under CI=true and is skipped elsewhere (test/support/mongodb.ts).

import { randomBytes, randomUUID } from "node:crypto";
import { MongoClient } from "mongodb";
import { describe, expect, it } from "vitest";
import { MongoStorage, type MongoStorageOptions } from "../../src/storage/mongodb/mongo-storage.js";
import { StoreLeases } from "../../src/storage/mongodb/mongo-store-lease.js";
import type { ReportRecord } from "../../src/storage/port.js";
import { describeWithMongoDb, MONGODB_URL } from "../support/mongodb.js";
import { asServed } from "./as-served.js";
import { type AdapterUnderTest, storageContract } from "./contract.js";

/** A fresh database per adapter, dropped afterwards. */
export async function openMongoAdapter(): Promise<AdapterUnderTest> {
  const database = `trove_test_${randomBytes(6).toString("hex")}`;
  const storage = await MongoStorage.open({ url: MONGODB_URL as string, database });
  return {
    storage,
    async cleanup() {
      await storage.close();
      // On a connection of its own: the adapter's is closed (by a decorator's close too, as-served.ts).
      const client = new MongoClient(MONGODB_URL as string);
      try {
        await client.db(database).dropDatabase();
      } finally {
        await client.close();
      }
    },
    async storedBlobs() {
      const client = new MongoClient(MONGODB_URL as string);
      try {
        const files = await client.db(database).collection("blobs.files").find({}).toArray();
        const chunks = await client.db(database).collection("blobs.chunks").distinct("files_id");
        return [...new Set([...files.map((f) => String(f._id)), ...chunks.map(String)])];
      } finally {
        await client.close();
      }
    },
  };
}

describeWithMongoDb("mongodb adapter", () => {
  storageContract("mongodb", openMongoAdapter);
  storageContract("mongodb inside FilesystemStorage", () => asServed(openMongoAdapter));

  it("creates its indexes idempotently at every start-up", async () => {
    const a = await openMongoAdapter();
    try {
      const again = await MongoStorage.open({
        url: MONGODB_URL as string,
        database: (a.storage as MongoStorage).databaseName,
      });
      await again.close();
      const client = new MongoClient(MONGODB_URL as string);
      const names = (
        await client
          .db((a.storage as MongoStorage).databaseName)
          .collection("nodes")
          .indexes()
      ).map((i) => i.name);
      await client.close();
      expect(names).toEqual(expect.arrayContaining(["store_path", "children", "events", "tombstones"]));
      // The TTL index exists where the deployment supports it (MongoDB, not FerretDB).
      expect(names.includes("tombstone_ttl")).toBe((a.storage as MongoStorage).ttlIndex);
    } finally {
      await a.cleanup();
    }
  });

  it("creates the insights indexes, unique where names must be, TTL on reports only where supported", async () => {
    const a = await openMongoAdapter();
    const storage = a.storage as MongoStorage;
    const client = new MongoClient(MONGODB_URL as string);
    try {
      const db = client.db(storage.databaseName);
      const indexes = async (collection: string) =>
        Object.fromEntries((await db.collection(collection).indexes()).map((i) => [i.name, i]));
      const projects = await indexes("projects");
      expect(projects.account_name).toMatchObject({ key: { account: 1, name: 1 }, unique: true });
      const environments = await indexes("environments");
      expect(environments.project_name).toMatchObject({ key: { projectId: 1, name: 1 }, unique: true });
      expect((await indexes("promotions")).environment_path).toMatchObject({ key: { environmentId: 1, path: 1 } });
      const reports = await indexes("reports");
      expect(reports.jobs).toMatchObject({ key: { status: 1, created: 1, leaseExpires: 1 } });
      expect(reports.expiry).toMatchObject({ key: { expiresAt: 1 } });
      expect(reports.environment).toMatchObject({ key: { projectId: 1, environmentId: 1, created: -1 } });
      expect("report_ttl" in reports).toBe(storage.ttlIndex);
      expect((await indexes("reportClaims")).report).toMatchObject({ key: { report: 1 } });
    } finally {
      await client.close();
      await a.cleanup();
    }
  });

  describe("writers of one store on several instances", () => {
    const T0 = 1_700_000_000_000;

    async function* once(data: string): AsyncIterable<Uint8Array> {
      yield new TextEncoder().encode(data);
    }

    /** Opens more adapters on the database of `a`: separate processes, as far as the store lease goes. */
    function more(a: AdapterUnderTest, count: number, options: Partial<MongoStorageOptions> = {}) {
      const database = (a.storage as MongoStorage).databaseName;
      return Promise.all(
        Array.from({ length: count }, () => MongoStorage.open({ url: MONGODB_URL as string, database, ...options })),
      );
    }

    /** A client on the database of `a`, to look at (or stage) what the adapter stores. */
    async function rawDb(a: AdapterUnderTest) {
      const client = new MongoClient(MONGODB_URL as string);
      return { client, db: client.db((a.storage as MongoStorage).databaseName) };
    }

    for (const type of ["snapshot", "recursive"] as const) {
      it(`4 instances x 25 concurrent writes (${type} store): every write has its own event id, the feed has no hole`, async () => {
        const a = await openMongoAdapter();
        const others = await more(a, 3);
        const instances = [a.storage, ...others];
        try {
          await a.storage.createStore({ name: "s", type, settings: {} }, T0);
          // A follower polls the feed meanwhile: it must never move past an id written later.
          const seen = new Map<string, number>();
          let cursor = 0;
          let done = false;
          const follower = (async () => {
            for (;;) {
              const finished = done;
              const batch = await a.storage.changesSince("s", cursor, 7);
              for (const n of batch) {
                expect(n.eventId).toBeGreaterThan(cursor);
                cursor = n.eventId;
                seen.set(n.path, n.eventId);
              }
              if (batch.length === 0) {
                if (finished) return;
                await new Promise((resolve) => setTimeout(resolve, 1));
              }
            }
          })();
          const outcomes = await Promise.allSettled(
            instances.flatMap((s, i) =>
              Array.from({ length: 25 }, async (_, j) => {
                const path = `i${i}-${j}`;
                if (j % 5 === 4) return (await s.makeDirectory("s", path, {}, T0)).node;
                const blob = await s.writeBlob(once(`${i}/${j}`), { maxSize: 1024 });
                return (await s.putFile("s", `${path}.txt`, blob, "text/plain", {}, T0)).node;
              }),
            ),
          );
          done = true;
          await follower;
          const failures = outcomes.flatMap((o) => (o.status === "rejected" ? [String(o.reason)] : []));
          expect(failures).toEqual([]);
          const written = outcomes.flatMap((o) => (o.status === "fulfilled" ? [o.value] : []));

          // Each write takes one id, and on a recursive store one more for the root directory.
          const last = type === "snapshot" ? 101 : 201;
          expect(new Set(written.map((n) => n.eventId)).size).toBe(100);
          const changes = await a.storage.changesSince("s", 0, 10_000);
          const feedIds = changes.map((n) => n.eventId);
          expect(new Set(feedIds).size).toBe(feedIds.length);
          expect(changes.map((n) => n.path).sort()).toEqual(["", ...written.map((n) => n.path)].sort());
          for (const n of changes) expect(await a.storage.getNode("s", n.path)).toMatchObject({ eventId: n.eventId });
          for (const n of changes) expect([n.path, seen.get(n.path)]).toEqual([n.path, n.eventId]);
          if (type === "snapshot") {
            for (const n of written) expect(seen.get(n.path)).toBe(n.eventId);
            expect(feedIds).toEqual(Array.from({ length: last }, (_, k) => k + 1));
          } else {
            expect(changes.at(-1)).toMatchObject({ path: "", eventId: last });
          }
          expect((await a.storage.getStore("s"))?.lastEventId).toBe(last);
          expect(cursor).toBe(last);
        } finally {
          for (const s of others) await s.close();
          await a.cleanup();
        }
      }, 120_000);
    }

    it("issue 30: 4 instances create one path with If-None-Match * at once: exactly one wins, the others fail their precondition", async () => {
      const a = await openMongoAdapter();
      const others = await more(a, 3);
      const instances = [a.storage, ...others];
      try {
        await a.storage.createStore({ name: "s", type: "recursive", settings: {} }, T0);
        const outcomes = await Promise.allSettled(
          instances.map(async (s, i) => {
            const blob = await s.writeBlob(once(`instance ${i}`), { maxSize: 1024 });
            return (await s.putFile("s", "once.txt", blob, "text/plain", { ifNoneMatch: ["*"] }, T0)).node;
          }),
        );
        const won = outcomes.flatMap((o) => (o.status === "fulfilled" ? [o.value] : []));
        const lost = outcomes.flatMap((o) => (o.status === "rejected" ? [o.reason as Error] : []));
        expect(won).toHaveLength(1);
        expect(lost.map((e) => e.name)).toEqual([
          "PreconditionFailedError",
          "PreconditionFailedError",
          "PreconditionFailedError",
        ]);
        expect(await a.storage.getNode("s", "once.txt")).toMatchObject({ tag: won[0]?.tag, size: won[0]?.size });
        expect((await a.storage.changesSince("s", 0, 100)).filter((n) => n.path === "once.txt")).toHaveLength(1);
      } finally {
        for (const s of others) await s.close();
        await a.cleanup();
      }
    }, 120_000);

    it("a holder that died is followed once its lease ends, and the ids it allocated are published", async () => {
      const a = await openMongoAdapter();
      const { client, db } = await rawDb(a);
      const [b] = await more(a, 1, { lockTimeout: 5000 });
      try {
        await a.storage.createStore({ name: "s", type: "snapshot", settings: {} }, T0);
        // What a holder killed after allocating ids 2 to 4 leaves: its lease announced, not released.
        const until = Date.now() + 1000;
        await db
          .collection("stores")
          .updateOne(
            { _id: "s" as never },
            { $set: { leaseEpoch: 1, leaseUntil: until, leaseReleased: false, lastEventId: 4 } },
          );
        expect((await a.storage.getStore("s"))?.lastEventId).toBe(1);
        const blob = await b?.writeBlob(once("x"), { maxSize: 1024 });
        const { node } = await (b as MongoStorage).putFile("s", "x.txt", blob as never, "text/plain", {}, T0);
        expect(Date.now()).toBeGreaterThanOrEqual(until);
        expect(node.eventId).toBe(5);
        expect((await a.storage.getStore("s"))?.lastEventId).toBe(5);
        expect((await a.storage.changesSince("s", 0, 10)).map((n) => [n.path, n.eventId])).toEqual([
          ["", 1],
          ["x.txt", 5],
        ]);
      } finally {
        await b?.close();
        await client.close();
        await a.cleanup();
      }
    });

    it("a holder whose lease another writer took can neither allocate nor publish", async () => {
      const a = await openMongoAdapter();
      const { client, db } = await rawDb(a);
      try {
        await a.storage.createStore({ name: "s", type: "snapshot", settings: {} }, T0);
        const first = new StoreLeases(db, { lease: 10_000, lockTimeout: 2000 });
        const second = new StoreLeases(db, { lease: 10_000, lockTimeout: 2000 });
        const { lease: old } = await first.acquire("s");
        expect(await old.allocate(1)).toBe(2);
        // Its lease ends in the others' eyes (a stalled process, or a clock behind theirs).
        await db.collection("stores").updateOne({ _id: "s" as never }, { $set: { leaseUntil: 0 } });
        const { doc, lease } = await second.acquire("s");
        expect(lease.epoch).toBe(old.epoch + 1);
        // The first holder's allocation is published: it may have written it.
        expect(doc).toMatchObject({ lastEventId: 2, committedEventId: 2 });
        await expect(old.allocate(1)).rejects.toThrow(/lost the write lease of store s/);
        expect(await lease.allocate(2)).toBe(3);
        await first.release(old);
        expect(await db.collection("stores").findOne({ _id: "s" as never })).toMatchObject({
          leaseEpoch: lease.epoch,
          leaseReleased: false,
          lastEventId: 4,
          committedEventId: 2,
        });
        await second.release(lease);
        expect(await db.collection("stores").findOne({ _id: "s" as never })).toMatchObject({
          leaseEpoch: lease.epoch,
          leaseReleased: true,
          committedEventId: 4,
        });
      } finally {
        await client.close();
        await a.cleanup();
      }
    });

    it("a holder whose renewal comes late keeps its lease while nobody took it over (a loaded machine)", async () => {
      const a = await openMongoAdapter();
      const { client, db } = await rawDb(a);
      try {
        await a.storage.createStore({ name: "s", type: "snapshot", settings: {} }, T0);
        const leases = new StoreLeases(db, { lease: 300, lockTimeout: 2000 });
        const { lease } = await leases.acquire("s");
        // Past the whole lease without a renewal, as a stalled process would be.
        await new Promise((resolve) => setTimeout(resolve, 400));
        await lease.keep();
        const first = await lease.allocate(2);
        expect(first).toBeGreaterThan(0);
        await leases.release(lease);
        const next = await new StoreLeases(db, { lease: 300, lockTimeout: 2000 }).acquire("s");
        expect(next.lease.epoch).toBe(lease.epoch + 1);
        expect(next.doc.committedEventId).toBe(first + 1);
      } finally {
        await client.close();
        await a.cleanup();
      }
    });

    it("a holder whose lease another instance took over is refused every further write (fenced)", async () => {
      const a = await openMongoAdapter();
      const { client, db } = await rawDb(a);
      try {
        await a.storage.createStore({ name: "s", type: "snapshot", settings: {} }, T0);
        const { lease } = await new StoreLeases(db, { lease: 300, lockTimeout: 2000 }).acquire("s");
        await new Promise((resolve) => setTimeout(resolve, 400));
        const next = await new StoreLeases(db, { lease: 300, lockTimeout: 2000 }).acquire("s");
        expect(next.lease.epoch).toBe(lease.epoch + 1);
        await expect(lease.keep()).rejects.toThrow(/lost the write lease of store s/);
        await expect(lease.allocate(1)).rejects.toThrow(/lost the write lease of store s/);
      } finally {
        await client.close();
        await a.cleanup();
      }
    });

    it("writers queue in ticket order; one that gives up waiting does not hold up the next", async () => {
      const a = await openMongoAdapter();
      const { client, db } = await rawDb(a);
      try {
        await a.storage.createStore({ name: "s", type: "snapshot", settings: {} }, T0);
        const holder = new StoreLeases(db, { lease: 30_000, lockTimeout: 2000 });
        const impatient = new StoreLeases(db, { lease: 30_000, lockTimeout: 300 });
        const patient = new StoreLeases(db, { lease: 30_000, lockTimeout: 10_000 });
        const { lease } = await holder.acquire("s");
        const gaveUp = impatient.acquire("s");
        await new Promise((resolve) => setTimeout(resolve, 50));
        const waiting = patient.acquire("s");
        await expect(gaveUp).rejects.toThrow(/store s is busy/);
        await new Promise((resolve) => setTimeout(resolve, 200));
        await holder.release(lease);
        const released = performance.now();
        const next = await waiting;
        // Not held up until the abandoned ticket's own end (lockTimeout + lease/3 = 10.3 s).
        expect(performance.now() - released).toBeLessThan(2000);
        expect(next.lease.epoch).toBe(lease.epoch + 2);
        const abandoned = await db.collection("storeLeases").findOne({ _id: `s#${lease.epoch + 1}` as never });
        expect(abandoned).toMatchObject({ store: "s", epoch: lease.epoch + 1, released: true });
      } finally {
        await client.close();
        await a.cleanup();
      }
    });

    it("an operation longer than the lease renews it, and other instances wait for it", async () => {
      const a = await openMongoAdapter();
      // Short enough that the deletion (about 4 s on FerretDB) outlasts it, long enough that a
      // loaded machine (a batch of 32 updates taking over a second) does not lose it to the waiter.
      const lease = 2000;
      const [slow, other] = await more(a, 2, { lease });
      try {
        await a.storage.createStore({ name: "s", type: "snapshot", settings: {} }, T0);
        await a.storage.makeDirectory("s", "d", {}, T0);
        for (let i = 0; i < 200; i++) {
          const blob = await a.storage.writeBlob(once(`${i}`), { maxSize: 1024 });
          await a.storage.putFile("s", `d/f${i}.txt`, blob, "text/plain", {}, T0);
        }
        const started = performance.now();
        const deletion = (slow as MongoStorage).deleteTree("s", "d", {}, T0);
        await new Promise((resolve) => setTimeout(resolve, 100));
        const blob = await a.storage.writeBlob(once("late"), { maxSize: 1024 });
        const { node: late } = await (other as MongoStorage).putFile("s", "late.txt", blob, "text/plain", {}, T0);
        const { count } = await deletion;
        // On FerretDB the 201 tombstones take longer than the lease (about 2 s).
        console.info(`deleteTree of 201 nodes: ${Math.round(performance.now() - started)} ms, lease ${lease} ms`);
        expect(count).toBe(201);
        const tombstones = await a.storage.changesSince("s", 0, 1000);
        const lastTombstone = Math.max(...tombstones.filter((n) => n.deleted).map((n) => n.eventId));
        expect(late.eventId).toBe(lastTombstone + 1);
        expect((await a.storage.getStore("s"))?.lastEventId).toBe(late.eventId);
      } finally {
        await slow?.close();
        await other?.close();
        await a.cleanup();
      }
    }, 60_000);

    it("the purge removes the tickets of past epochs", async () => {
      const a = await openMongoAdapter();
      const { client, db } = await rawDb(a);
      const [b] = await more(a, 1);
      try {
        await a.storage.createStore({ name: "s", type: "snapshot", settings: {} }, T0);
        for (let i = 0; i < 6; i++) {
          const s = i % 2 === 0 ? a.storage : (b as MongoStorage);
          await s.makeDirectory("s", `d${i}`, {}, T0);
        }
        const tickets = db.collection<{ _id: string; epoch: number }>("storeLeases");
        expect(await tickets.countDocuments({ store: "s" })).toBe(6);
        await a.storage.purgeExpired(T0);
        const store = await db.collection("stores").findOne({ _id: "s" as never });
        expect(await tickets.find({ store: "s" }).toArray()).toEqual([
          expect.objectContaining({ _id: `s#${store?.leaseEpoch}` }),
        ]);
        // And writing goes on from there, from either instance.
        await (b as MongoStorage).makeDirectory("s", "after", {}, T0);
        await a.storage.makeDirectory("s", "after-2", {}, T0);
        expect((await a.storage.getStore("s"))?.lastEventId).toBe(9);
      } finally {
        await b?.close();
        await client.close();
        await a.cleanup();
      }
    });
  });

  it("the purge removes GridFS files over an hour old that nothing refers to, and keeps every other", async () => {
    const a = await openMongoAdapter();
    const client = new MongoClient(MONGODB_URL as string);
    const T0 = 1_700_000_000_000;
    async function* big(): AsyncIterable<Uint8Array> {
      yield randomBytes(100 * 1024);
    }
    try {
      const { storage } = a;
      await storage.createStore({ name: "s", type: "snapshot", settings: {} }, T0);
      // What a process killed between the upload and the metadata write leaves: a file nobody refers to.
      const orphan = await storage.writeBlob(big(), { maxSize: 1 << 20 });
      const young = await storage.writeBlob(big(), { maxSize: 1 << 20 });
      const contents = await storage.writeBlob(big(), { maxSize: 1 << 20 });
      await storage.putFile("s", "a.bin", contents, "application/octet-stream", {}, T0);
      const report: ReportRecord = {
        id: randomUUID(),
        projectId: randomUUID(),
        environmentId: randomUUID(),
        creator: "ann",
        created: T0,
        additionalFields: [],
        status: "generating",
        finished: 0,
        expiresAt: T0 + 90 * 86_400_000,
        reason: "",
        attempts: 0,
        leaseOwner: "",
        leaseExpires: 0,
        document: null,
      };
      await storage.insights.createReport(report);
      await storage.insights.claimReportJob("w", T0, 30_000);
      const document = await storage.writeBlob(big(), { maxSize: 1 << 20 });
      expect(
        await storage.insights.updateReportJob(report.id, "w", { status: "generated", finished: T0, document }),
      ).toBe(true);
      const files = client.db((a.storage as MongoStorage).databaseName).collection("blobs.files");
      const old = new Date(Date.now() - 2 * 3_600_000);
      await files.updateMany(
        { _id: { $in: [orphan.blob, contents.blob, document.blob] } as never },
        { $set: { uploadDate: old } },
      );
      expect(await a.storedBlobs?.()).toHaveLength(4);

      await storage.purgeExpired(T0);
      expect((await a.storedBlobs?.())?.sort()).toEqual([young.blob, contents.blob, document.blob].sort());
      const node = await storage.getNode("s", "a.bin");
      let size = 0;
      for await (const chunk of storage.readBlob(node as NonNullable<typeof node>)) size += chunk.byteLength;
      expect(size).toBe(100 * 1024);
    } finally {
      await client.close();
      await a.cleanup();
    }
  });

  describe("report jobs", () => {
    const T0 = 1_700_000_000_000;
    const LEASE = 30_000;

    function job(): ReportRecord {
      return {
        id: randomUUID(),
        projectId: randomUUID(),
        environmentId: randomUUID(),
        creator: "ann",
        created: T0,
        additionalFields: [],
        status: "generating",
        finished: 0,
        expiresAt: T0 + 90 * 86_400_000,
        reason: "",
        attempts: 0,
        leaseOwner: "",
        leaseExpires: 0,
        document: null,
      };
    }

    it("instances sharing one database never claim one job twice", async () => {
      const a = await openMongoAdapter();
      const others = await Promise.all(
        [1, 2, 3].map(() =>
          MongoStorage.open({ url: MONGODB_URL as string, database: (a.storage as MongoStorage).databaseName }),
        ),
      );
      try {
        const instances = [a.storage, ...others];
        for (let round = 0; round < 4; round++) {
          const r = { ...job(), created: T0 + round };
          await a.storage.insights.createReport(r);
          const now = T0 + round * 2 * LEASE;
          const claims = await Promise.all(
            instances.flatMap((s, i) => [
              s.insights.claimReportJob(`i${i}a`, now, LEASE),
              s.insights.claimReportJob(`i${i}b`, now, LEASE),
            ]),
          );
          const won = claims.filter((c) => c !== undefined);
          expect(won).toHaveLength(1);
          expect(await a.storage.insights.getReport(r.id)).toEqual(won[0]);
          await a.storage.insights.updateReportJob(r.id, won[0]?.leaseOwner as string, {
            status: "generated",
            finished: now,
          });
        }
      } finally {
        for (const s of others) await s.close();
        await a.cleanup();
      }
    });

    it("a claim whose claimer died before recording it holds the job until its lease ends, then the next attempt is taken", async () => {
      const a = await openMongoAdapter();
      const client = new MongoClient(MONGODB_URL as string);
      try {
        const r = job();
        await a.storage.insights.createReport(r);
        // What a claimer killed between its two writes leaves: the claim of attempt 1, not recorded on the report.
        await client
          .db((a.storage as MongoStorage).databaseName)
          .collection<{ _id: string; report: string; attempt: number; owner: string; expires: number }>("reportClaims")
          .insertOne({ _id: `${r.id}/1`, report: r.id, attempt: 1, owner: "dead", expires: T0 + LEASE });
        expect(await a.storage.insights.claimReportJob("w1", T0, LEASE)).toBeUndefined();
        expect(await a.storage.insights.getReport(r.id)).toEqual(r);
        const claimed = await a.storage.insights.claimReportJob("w1", T0 + LEASE, LEASE);
        expect(claimed).toMatchObject({ id: r.id, leaseOwner: "w1", leaseExpires: T0 + 2 * LEASE, attempts: 2 });
        // Purging the report removes its claims too.
        await a.storage.insights.updateReportJob(r.id, "w1", { status: "failed", finished: T0, expiresAt: T0 + 1 });
        expect(await a.storage.purgeExpired(T0 + 1)).toBe(1);
        const left = await client
          .db((a.storage as MongoStorage).databaseName)
          .collection("reportClaims")
          .countDocuments({});
        expect(left).toBe(0);
      } finally {
        await client.close();
        await a.cleanup();
      }
    });
  });
});
