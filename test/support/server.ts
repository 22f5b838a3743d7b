// Starts a real Trove server on 127.0.0.1 with an ephemeral port and fresh
// storage, for tests; `stop` closes every connection and removes the data.
// Storage is the embedded SQLite store, or MongoDB (a fresh database) when
// TROVE_TEST_BACKEND=mongodb and TROVE_TEST_MONGODB_URL are set: the same
// suites then run unchanged against it (see .ci/run).

import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { ensureHomeStore } from "../../src/server/main.js";
import { createTroveServer, type TroveServer, type TroveServerOptions } from "../../src/server/server.js";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import type { StoragePort } from "../../src/storage/port.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { MONGODB_URL_HINT } from "./mongodb.js";

/** Which backend the server tests run on. */
export const TEST_BACKEND = process.env.TROVE_TEST_BACKEND === "mongodb" ? "mongodb" : "sqlite";

/**
 * The type of the "home" store the suites use: "recursive", or "filesystem" (a folder in the
 * data directory) when TROVE_TEST_STORE_TYPE=filesystem, as test/filesystem/rest-conformance.test.ts
 * sets it to run the REST conformance suite's resource cases against a filesystem store.
 */
function homeStoreType(): "recursive" | "filesystem" {
  return process.env.TROVE_TEST_STORE_TYPE === "filesystem" ? "filesystem" : "recursive";
}

async function openStorage(dataDir: string): Promise<{ storage: StoragePort; drop(): Promise<void> }> {
  if (TEST_BACKEND === "sqlite") return { storage: await SqliteStorage.open({ dataDir }), drop: async () => {} };
  const url = process.env.TROVE_TEST_MONGODB_URL;
  // Every test of the run fails then: a run asked for MongoDB never passes on SQLite instead.
  if (!url) throw new Error(`TROVE_TEST_BACKEND=mongodb: ${MONGODB_URL_HINT}`);
  const database = `trove_test_${randomBytes(6).toString("hex")}`;
  // The drop uses its own connection: the server closes the storage's own.
  return {
    storage: await MongoStorage.open({ url, database, watchInterval: 100 }),
    async drop() {
      const admin = await MongoStorage.open({ url, database });
      await admin.dropDatabase();
      await admin.close();
    },
  };
}

export interface TestServer {
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  port: number;
  dataDir: string;
  /** The running server (its notifier counts waiting polls). */
  server: TroveServer;
  storage: StoragePort;
  stop(): Promise<void>;
}

export async function startServer(options: Partial<Omit<TroveServerOptions, "storage">> = {}): Promise<TestServer> {
  const dataDir = await mkdtemp(join(tmpdir(), "trove-test-"));
  const { storage, drop } = await openStorage(dataDir);
  if (homeStoreType() === "filesystem") {
    const location = join(dataDir, "home-folder");
    await mkdir(location);
    const settings = { "keep-deleted": "7d", "filesystem-location": location };
    await storage.createStore({ name: "home", type: "filesystem", settings }, (options.now ?? Date.now)());
  } else {
    await ensureHomeStore(storage, (options.now ?? Date.now)());
  }
  // Anonymous full access unless a test passes its own authenticator (test/auth/).
  const server = createTroveServer({
    logger: pino({ level: "silent" }),
    ...options,
    auth: options.auth ?? "anonymous",
    storage,
  });
  const { port } = await server.listen(0, "127.0.0.1");
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    dataDir,
    server,
    storage,
    async stop() {
      await server.close();
      await drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
