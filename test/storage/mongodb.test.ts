// The storage contract for the MongoDB adapter, against a real wire-protocol
// server (FerretDB in CI, see .ci/run). Runs when TROVE_TEST_MONGODB_URL is set.

import { randomBytes, randomUUID } from "node:crypto";
import { MongoClient } from "mongodb";
import { describe, expect, it } from "vitest";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import type { ReportRecord } from "../../src/storage/port.js";
import { type AdapterUnderTest, storageContract } from "./contract.js";

export const MONGODB_URL = process.env.TROVE_TEST_MONGODB_URL;

if (!MONGODB_URL) {
  console.warn("MongoDB suites NOT RUN: set TROVE_TEST_MONGODB_URL (bash .ci/run starts FerretDB and sets it)");
}

/** A fresh database per adapter, dropped afterwards. */
export async function openMongoAdapter(): Promise<AdapterUnderTest> {
  const database = `trove_test_${randomBytes(6).toString("hex")}`;
  const storage = await MongoStorage.open({ url: MONGODB_URL as string, database });
  return {
    storage,
    async cleanup() {
      await storage.dropDatabase();
      await storage.close();
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

describe.runIf(MONGODB_URL)("mongodb adapter", () => {
  storageContract("mongodb", openMongoAdapter);

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
          await a.storage.createReport(r);
          const now = T0 + round * 2 * LEASE;
          const claims = await Promise.all(
            instances.flatMap((s, i) => [
              s.claimReportJob(`i${i}a`, now, LEASE),
              s.claimReportJob(`i${i}b`, now, LEASE),
            ]),
          );
          const won = claims.filter((c) => c !== undefined);
          expect(won).toHaveLength(1);
          expect(await a.storage.getReport(r.id)).toEqual(won[0]);
          await a.storage.updateReportJob(r.id, won[0]?.leaseOwner as string, { status: "generated", finished: now });
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
        await a.storage.createReport(r);
        // What a claimer killed between its two writes leaves: the claim of attempt 1, not recorded on the report.
        await client
          .db((a.storage as MongoStorage).databaseName)
          .collection<{ _id: string; report: string; attempt: number; owner: string; expires: number }>("reportClaims")
          .insertOne({ _id: `${r.id}/1`, report: r.id, attempt: 1, owner: "dead", expires: T0 + LEASE });
        expect(await a.storage.claimReportJob("w1", T0, LEASE)).toBeUndefined();
        expect(await a.storage.getReport(r.id)).toEqual(r);
        const claimed = await a.storage.claimReportJob("w1", T0 + LEASE, LEASE);
        expect(claimed).toMatchObject({ id: r.id, leaseOwner: "w1", leaseExpires: T0 + 2 * LEASE, attempts: 2 });
        // Purging the report removes its claims too.
        await a.storage.updateReportJob(r.id, "w1", { status: "failed", finished: T0, expiresAt: T0 + 1 });
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
