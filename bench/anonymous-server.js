// Trove with authentication off (every caller anonymous, full access), from
// dist/, for the auth-off row of the benchmarks only: `trove serve` has no such
// mode. Usage: node bench/anonymous-server.js PORT DATA_DIR [LOG_LEVEL]

import { pino } from "pino";
import { ensureHomeStore } from "../dist/server/main.js";
import { createTroveServer } from "../dist/server/server.js";
import { SqliteStorage } from "../dist/storage/sqlite/sqlite-storage.js";

const [port, dataDir, logLevel = "silent"] = process.argv.slice(2);
const storage = await SqliteStorage.open({ dataDir });
await ensureHomeStore(storage, Date.now());
const server = createTroveServer({ storage, logger: pino({ level: logLevel }), auth: "anonymous" });
await server.listen(Number(port), "127.0.0.1");
const stop = () => server.close().then(() => process.exit(0));
process.once("SIGINT", stop);
process.once("SIGTERM", stop);
