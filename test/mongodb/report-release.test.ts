// Graceful shutdown of a report worker on MongoDB (issue 13, item 8): the job it is generating
// goes back at once (lease released), so another instance's worker takes it without waiting for
// the lease to run out. Two in-process instances on one FerretDB database; instance A's lease is
// ten minutes long, so only a released lease lets B finish the report before A's lease ends.

import { randomBytes } from "node:crypto";
import { pino } from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureHomeStore } from "../../src/server/main.js";
import { createTroveServer, type TroveServer } from "../../src/server/server.js";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import type { ReportRecord, StoragePort } from "../../src/storage/port.js";
import { call, type ExampleProject, uploadExample } from "../insights/api-support.js";
import { describeWithMongoDb } from "../support/mongodb.js";

const LEASE_MS = 10 * 60_000;
const database = `trove_release_${randomBytes(6).toString("hex")}`;

/**
 * A's storage, with its resource contents held back until `open()`: A's worker is then
 * provably in the middle of a generation when the test shuts A down.
 */
function gated(storage: StoragePort): { storage: StoragePort; reading: Promise<void>; open(): void } {
  let reached: () => void = () => {};
  const reading = new Promise<void>((resolve) => {
    reached = resolve;
  });
  let open: () => void = () => {};
  const opened = new Promise<void>((resolve) => {
    open = resolve;
  });
  const readBlob: StoragePort["readBlob"] = async function* (node) {
    reached();
    await opened;
    yield* storage.readBlob(node);
  };
  const proxy = new Proxy(storage, {
    get(target, prop) {
      if (prop === "readBlob") return readBlob;
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
  return { storage: proxy, reading, open };
}

async function instance(storage: StoragePort): Promise<{ server: TroveServer; url: string }> {
  await ensureHomeStore(storage, Date.now());
  const server = createTroveServer({
    logger: pino({ level: "silent" }),
    auth: "anonymous",
    storage,
    reportWorker: { leaseMs: LEASE_MS, pollInterval: 200 },
  });
  const { port } = await server.listen(0, "127.0.0.1");
  return { server, url: `http://127.0.0.1:${port}` };
}

let admin: MongoStorage;
let a: { server: TroveServer; url: string } | undefined;
let b: { server: TroveServer; url: string } | undefined;
let gate: ReturnType<typeof gated>;
let example: ExampleProject;

describeWithMongoDb("a report worker shut down on MongoDB", (url) => {
  beforeAll(async () => {
    admin = await MongoStorage.open({ url, database });
    gate = gated(await MongoStorage.open({ url, database, watchInterval: 100 }));
    a = await instance(gate.storage);
    example = await uploadExample(a.url);
  }, 60_000);

  afterAll(async () => {
    gate?.open();
    await a?.server.close().catch(() => {});
    await b?.server.close();
    if (admin) {
      await admin.dropDatabase();
      await admin.close();
    }
  });

  it("shutdown gives the report job back: a second instance generates it long before the first one's lease ends", async () => {
    if (!a) throw new Error("instance A did not start");
    const created = await call(a.url, "POST", "/insights/v1/reports", {
      projectID: example.projectID,
      environmentID: example.environments.production,
    });
    expect(created.status).toBe(202);
    const id: string = created.json.reportID[0];

    // A's worker has claimed the job and is reading the environment's resources.
    await gate.reading;
    const claimed = (await admin.insights.getReport(id)) as ReportRecord;
    expect(claimed).toMatchObject({ status: "generating", attempts: 1 });
    expect(claimed.leaseOwner).not.toBe("");
    expect(claimed.leaseExpires).toBeGreaterThan(Date.now() + LEASE_MS / 2);

    // B starts, then A shuts down in the middle of the generation.
    b = await instance(await MongoStorage.open({ url, database, watchInterval: 100 }));
    const shutdown = a.server.shutdown(30_000, "test");
    gate.open();
    expect((await shutdown).drained).toBe(true);
    a = undefined;

    // B's wait answers generated, with the whole report.
    const query = `projectID=${example.projectID}&environmentID=${example.environments.production}`;
    let status = await call(b.url, "GET", `/insights/v1/reports/${id}?${query}&wait=20`);
    for (let i = 0; i < 10 && status.json.status === "generating"; i++) {
      status = await call(b.url, "GET", `/insights/v1/reports/${id}?${query}&wait=20`);
    }
    expect(status.json).toMatchObject({ id: [id], status: "generated" });
    const document = await call(b.url, "GET", status.json.href);
    expect(document.status).toBe(200);
    expect(document.json.resources.length).toBe(51);

    // Generated in a second attempt (B's: A is gone), before A's lease would have let anyone else.
    const done = (await admin.insights.getReport(id)) as ReportRecord;
    expect(done.attempts).toBe(2);
    expect(done.finished).toBeLessThan(claimed.leaseExpires);
  }, 120_000);
});
