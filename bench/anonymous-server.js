// Trove with authentication off (every caller anonymous, full access), from
// dist/, for the auth-off row of the benchmarks only: `trove serve` has no such
// mode. Usage: node bench/anonymous-server.js PORT DATA_DIR [LOG_LEVEL [MONGODB_URL DATABASE]]
// (with a MongoDB URL, everything is kept in DATABASE there, as `trove serve --mongodb-url`).

import { pino } from "pino";
import { ensureHomeStore } from "../dist/server/main.js";
import { createTroveServer } from "../dist/server/server.js";
import { MongoStorage } from "../dist/storage/mongodb/mongo-storage.js";
import { SqliteStorage } from "../dist/storage/sqlite/sqlite-storage.js";

const [port, dataDir, logLevel = "silent", mongodbUrl, database] = process.argv.slice(2);
const storage = mongodbUrl
  ? await MongoStorage.open({ url: mongodbUrl, database })
  : await SqliteStorage.open({ dataDir });
await ensureHomeStore(storage, Date.now());
const server = createTroveServer({ storage, logger: pino({ level: logLevel }), auth: "anonymous" });
await server.listen(Number(port), "127.0.0.1");
const stop = () => server.close().then(() => process.exit(0));
process.once("SIGINT", stop);
process.once("SIGTERM", stop);
