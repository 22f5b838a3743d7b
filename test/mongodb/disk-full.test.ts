// A full database disk on MongoDB (issue 11, item 4), as far as FerretDB allows: its SQLite files
// on a real 16 MiB tmpfs, filled through Trove. Every write refused for lack of space answers
// 507 with the reason (gRPC RESOURCE_EXHAUSTED), never 500; reads keep working; the server keeps
// running; and once the operator gives the database room, writes work again. Needs
// FerretDB (TROVE_TEST_FERRETDB_BIN; missing, it fails under CI=true) and a tmpfs it may mount (root).

import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureHomeStore } from "../../src/server/main.js";
import { createTroveServer, type TroveServer } from "../../src/server/server.js";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import { type FerretDb, startFerretDb } from "../support/ferretdb.js";
import { describeWithFerretDb } from "../support/mongodb.js";
import { tmpfsMountable } from "../support/tmpfs.js";

const REASON = "insufficient storage: the database's disk is full";

const TMPFS = tmpfsMountable();
const NO_TMPFS = "NOT RUN: needs a tmpfs it may mount (root); bash .ci/run as root has one";
if (!TMPFS) console.warn(`test/mongodb/disk-full.test.ts ${NO_TMPFS}`);

describeWithFerretDb("MongoDB (FerretDB) with its disk full", () => {
  describe.runIf(TMPFS)(`its SQLite files on a 16 MiB tmpfs${TMPFS ? "" : ` (${NO_TMPFS})`}`, () => {
    let mountDir = "";
    let ferret: FerretDb;
    let storage: MongoStorage;
    let server: TroveServer;
    let url = "";

    beforeAll(async () => {
      mountDir = mkdtempSync(join(tmpdir(), "trove-ferret-tmpfs-"));
      execFileSync("mount", ["-t", "tmpfs", "-o", "size=16m", "tmpfs", mountDir]);
      ferret = await startFerretDb({ dataDir: mountDir });
      storage = await MongoStorage.open({ url: ferret.url, database: "full", serverSelectionTimeout: 2000 });
      await ensureHomeStore(storage, Date.now());
      server = createTroveServer({
        storage,
        logger: pino({ level: "silent" }),
        auth: "anonymous",
        reportWorker: false,
      });
      const { port } = await server.listen(0, "127.0.0.1");
      url = `http://127.0.0.1:${port}`;
    }, 60_000);

    afterAll(async () => {
      await server?.close().catch(() => {});
      await storage?.close().catch(() => {});
      await ferret?.dispose();
      if (mountDir) {
        execFileSync("umount", [mountDir]);
        rmSync(mountDir, { recursive: true, force: true });
      }
    });

    it("writes answer 507 with the reason once the disk is full, never 500; reads go on; room given back, writes work again", async () => {
      const data = (path: string) => `${url}/resources/v2/data/home/${path}`;
      const kept = Buffer.from("written before the disk filled up");
      expect((await fetch(data("kept.txt"), { method: "PUT", body: kept })).status).toBe(201);

      // Fill the disk through Trove: large PUTs (GridFS) until one is refused.
      let refused: Response | undefined;
      for (let i = 0; i < 64 && !refused; i++) {
        const res = await fetch(data(`fill-${i}.bin`), { method: "PUT", body: randomBytes(1024 * 1024) });
        if (res.status !== 201) refused = res;
        else await res.arrayBuffer();
      }
      expect(refused, "the 16 MiB disk filled up").toBeDefined();
      const full = refused as Response;
      expect(full.status).toBe(507);
      expect(full.headers.get("server")).toBe("resources/1.0");
      expect(await full.text()).toBe(`${REASON}\n`);

      // Small writes too: a small PUT, a directory, over REST and gRPC.
      const small = await fetch(data("small.txt"), { method: "PUT", body: "x" });
      expect(small.status).toBe(507);
      expect(await small.text()).toBe(`${REASON}\n`);
      const mkdir = await fetch(data("dir/"), { method: "PUT" });
      expect(mkdir.status).toBe(507);
      await mkdir.arrayBuffer();
      const client = createClient(ResourceService, createGrpcTransport({ baseUrl: url }));
      await expect(client.makeDirectory({ store: "home", path: "rpc" })).rejects.toSatisfy(
        (err) => err instanceof ConnectError && err.code === Code.ResourceExhausted && err.rawMessage === REASON,
      );

      // Reads still work, and what was written before is intact.
      const read = await fetch(data("kept.txt"));
      expect(read.status).toBe(200);
      expect(Buffer.from(await read.arrayBuffer()).equals(kept)).toBe(true);

      // The operator gives the database room (FerretDB refuses even deletes on a full disk).
      execFileSync("mount", ["-o", "remount,size=64m", mountDir]);
      const after = await fetch(data("after.txt"), { method: "PUT", body: "room again" });
      expect(after.status, await after.text()).toBe(201);
    }, 120_000);
  });
});
