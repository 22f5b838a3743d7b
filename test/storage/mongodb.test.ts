// The storage contract for the MongoDB adapter, against a real wire-protocol
// server (FerretDB in CI, see .ci/run). Runs when TROVE_TEST_MONGODB_URL is set.

import { randomBytes } from "node:crypto";
import { MongoClient } from "mongodb";
import { describe, expect, it } from "vitest";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
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
});
