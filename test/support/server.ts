// Starts a real Trove server on 127.0.0.1 with an ephemeral port and a fresh
// data directory, for tests; `stop` closes every connection and removes the data.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { ensureHomeStore } from "../../src/server/main.js";
import { createTroveServer, type TroveServer, type TroveServerOptions } from "../../src/server/server.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";

export interface TestServer {
  /** e.g. http://127.0.0.1:41234 */
  url: string;
  port: number;
  dataDir: string;
  /** The running server (its notifier counts waiting polls). */
  server: TroveServer;
  storage: SqliteStorage;
  stop(): Promise<void>;
}

export async function startServer(options: Partial<Omit<TroveServerOptions, "storage">> = {}): Promise<TestServer> {
  const dataDir = await mkdtemp(join(tmpdir(), "trove-test-"));
  const storage = await SqliteStorage.open({ dataDir });
  await ensureHomeStore(storage, (options.now ?? Date.now)());
  const server = createTroveServer({ logger: pino({ level: "silent" }), ...options, storage });
  const { port } = await server.listen(0, "127.0.0.1");
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    dataDir,
    server,
    storage,
    async stop() {
      await server.close();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}
