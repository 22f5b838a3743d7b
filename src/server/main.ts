// Starts a server from its configuration: the entry point of `trove serve`.

import { pino } from "pino";
import { AlreadyExistsError } from "../domain/errors.js";
import type { StoragePort } from "../storage/port.js";
import { MongoStorage } from "../storage/mongodb/mongo-storage.js";
import { SqliteStorage } from "../storage/sqlite/sqlite-storage.js";
import type { ServeConfig } from "./config.js";
import { createTroveServer, type TroveServer } from "./server.js";

/** On a fresh data directory, the store `home` (sync-recursive), so a new user can PUT at once. */
export async function ensureHomeStore(storage: StoragePort, now: number): Promise<void> {
  if ((await storage.listStores()).length === 0 && !(await storage.getStore("home"))) {
    try {
      await storage.createStore({ name: "home", type: "recursive", settings: { "keep-deleted": "7d" } }, now);
    } catch (err) {
      // Another instance on the same database created it first.
      if (!(err instanceof AlreadyExistsError)) throw err;
    }
  }
}

export async function serve(config: ServeConfig): Promise<TroveServer> {
  const logger = pino({ level: config.logLevel });
  const storage: StoragePort = config.mongodbUrl
    ? await MongoStorage.open({ url: config.mongodbUrl, database: config.mongodbDatabase })
    : await SqliteStorage.open({ dataDir: config.dataDir });
  await ensureHomeStore(storage, Date.now());
  const server = createTroveServer({
    storage,
    logger,
    maxResourceSize: config.maxResourceSize,
    pollWait: config.pollWait,
  });
  const address = await server.listen(config.port, config.host);
  logger.info(
    { host: address.address, port: address.port, data: config.dataDir },
    `Trove listening on http://${config.host}:${address.port}`,
  );
  return server;
}
