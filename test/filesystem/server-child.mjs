// A Trove server in a child process, for the crash test of issue 17 (test/filesystem/crash.test.ts):
// SQLite in the data directory given as the first argument, no authentication, an ephemeral port
// on 127.0.0.1, printed as "listening <port>" once it serves. Runs the built server (dist/).
import { pino } from "pino";
import { createTroveServer } from "../../dist/server/server.js";
import { SqliteStorage } from "../../dist/storage/sqlite/sqlite-storage.js";

const storage = await SqliteStorage.open({ dataDir: process.argv[2] });
const server = createTroveServer({ storage, auth: "anonymous", logger: pino({ level: "silent" }) });
const { port } = await server.listen(0, "127.0.0.1");
process.stdout.write(`listening ${port}\n`);
process.on("SIGTERM", () => server.close().then(() => process.exit(0)));
