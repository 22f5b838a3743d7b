// MongoDB going away and coming back (issue 4): requests fail with 503 and a
// clear reason (gRPC Unavailable), the server keeps running, and it recovers by
// itself. Starts its own FerretDB (TROVE_TEST_FERRETDB_BIN, set by .ci/run).

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { pino } from "pino";
import { afterEach, expect, it } from "vitest";
import { ensureHomeStore } from "../../src/server/main.js";
import { createTroveServer, type TroveServer } from "../../src/server/server.js";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import { type FerretDb, startFerretDb } from "../support/ferretdb.js";
import { describeWithFerretDb } from "../support/mongodb.js";

let ferret: FerretDb | undefined;
let server: TroveServer | undefined;

afterEach(async () => {
  await server?.close().catch(() => {});
  await ferret?.dispose();
});

describeWithFerretDb("MongoDB connection loss", () => {
  it("answers 503 with a reason (gRPC Unavailable) while MongoDB is down, and recovers by itself", async () => {
    ferret = await startFerretDb();
    const storage = await MongoStorage.open({
      url: ferret.url,
      database: "trove",
      serverSelectionTimeout: 1000,
    });
    await ensureHomeStore(storage, Date.now());
    server = createTroveServer({ storage, logger: pino({ level: "silent" }), auth: "anonymous" });
    const { port: trovePort } = await server.listen(0, "127.0.0.1");
    const url = `http://127.0.0.1:${trovePort}`;
    const put = await fetch(`${url}/resources/v2/data/home/kept.txt`, { method: "PUT", body: "still here" });
    expect(put.status).toBe(201);

    await ferret.stop();
    const down = await fetch(`${url}/resources/v2/data/home/kept.txt`);
    expect(down.status).toBe(503);
    expect(down.headers.get("server")).toBe("resources/1.0");
    expect(down.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(await down.text()).toMatch(/^MongoDB unavailable/);
    const write = await fetch(`${url}/resources/v2/data/home/new.txt`, { method: "PUT", body: "x" });
    expect(write.status).toBe(503);
    const client = createClient(ResourceService, createGrpcTransport({ baseUrl: url }));
    await expect(client.stat({ store: "home", path: "kept.txt" })).rejects.toSatisfy(
      (err) => err instanceof ConnectError && err.code === Code.Unavailable,
    );

    await ferret.start();
    let status = 0;
    for (let i = 0; i < 100 && status !== 200; i++) {
      const res = await fetch(`${url}/resources/v2/data/home/kept.txt`);
      status = res.status;
      if (status === 200) expect(await res.text()).toBe("still here");
      else await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe(200);
    expect((await fetch(`${url}/resources/v2/data/home/new.txt`, { method: "PUT", body: "x" })).status).toBe(201);
  }, 60_000);
});
