// A Trove server in a child process, for the crash tests of filesystem stores
// (test/filesystem/crash.test.ts, test/filesystem/history.test.ts): SQLite in the data directory
// given as the first argument, no authentication, an ephemeral port on 127.0.0.1, printed as
// "listening <port>" once it serves. Runs the built server (dist/). With "crash-after-keep" as the
// second argument, the process kills itself (SIGKILL) the first time a write has kept the bytes
// of the state it replaces and has not yet replaced the file.
import { pino } from "pino";
import { createTroveServer } from "../../dist/server/server.js";
import { SqliteStorage } from "../../dist/storage/sqlite/sqlite-storage.js";

const crash = process.argv[3] === "crash-after-keep";
const storage = await SqliteStorage.open({ dataDir: process.argv[2] });
const server = createTroveServer({
  storage,
  auth: "anonymous",
  logger: pino({ level: "silent" }),
  filesystem: crash ? { afterKeep: () => process.kill(process.pid, "SIGKILL") } : {},
});
const { port } = await server.listen(0, "127.0.0.1");
process.stdout.write(`listening ${port}\n`);
process.on("SIGTERM", () => server.close().then(() => process.exit(0)));
