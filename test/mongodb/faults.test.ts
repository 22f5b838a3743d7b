// Faults at each step (issue 11, items 1 and 3): a proxy between Trove and its own FerretDB cuts
// every connection just before the k-th database command of a PUT, a DELETE, a promotion and a
// report generation, for every k. What a client must see: never a 500; a 503 with a reason (the
// command never reached the database, so nothing changed), or success (the cut came after the
// commit, and the write stands); and afterwards every resource reads back whole, with the MD5
// its metadata announces: an acknowledged write is never undone. Runs with
// TROVE_TEST_FERRETDB_BIN (set by .ci/run).

import { createHash, randomBytes } from "node:crypto";
import { pino } from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ensureHomeStore } from "../../src/server/main.js";
import { createTroveServer, type TroveServer } from "../../src/server/server.js";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import { call, uploadExample } from "../insights/api-support.js";
import { type FaultProxy, type FerretDb, startFaultProxy, startFerretDb } from "../support/ferretdb.js";
import { describeWithFerretDb } from "../support/mongodb.js";

const md5 = (bytes: Uint8Array) => createHash("md5").update(bytes).digest("base64");
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describeWithFerretDb("MongoDB: a cut connection at each step of an operation (FerretDB behind a proxy)", () => {
  let ferret: FerretDb;
  let proxy: FaultProxy;
  let storage: MongoStorage;
  let server: TroveServer;
  let url = "";

  beforeAll(async () => {
    ferret = await startFerretDb();
    proxy = await startFaultProxy(ferret.port);
    storage = await MongoStorage.open({ url: proxy.url, database: "faults", serverSelectionTimeout: 2000 });
    await ensureHomeStore(storage, Date.now());
    server = createTroveServer({
      storage,
      logger: pino({ level: "silent" }),
      auth: "anonymous",
      reportWorker: { pollInterval: 1000, retryDelayMs: 100, leaseMs: 3000, maxAttempts: 10 },
    });
    const { port } = await server.listen(0, "127.0.0.1");
    url = `http://127.0.0.1:${port}`;
  }, 60_000);

  afterAll(async () => {
    await server?.close().catch(() => {});
    await proxy?.close();
    await ferret?.dispose();
  });

  const data = (path: string) => `${url}/resources/v2/data/${path}`;

  /** Waits until the database answers through Trove again (the driver reconnects by itself). */
  async function settle(): Promise<void> {
    for (let i = 0; i < 300; i++) {
      const res = await fetch(data("home/"));
      await res.arrayBuffer();
      if (res.status === 200) return;
      expect(res.status).toBe(503);
      await sleep(100);
    }
    throw new Error("Trove did not reach the database again within 30 s");
  }

  /** GET of a resource: its bytes, checked against the MD5 its metadata announces. */
  async function read(path: string): Promise<{ status: number; body: Buffer }> {
    const res = await fetch(data(path));
    const body = Buffer.from(await res.arrayBuffer());
    if (res.status === 200) expect(md5(body), `Content-MD5 of ${path}`).toBe(res.headers.get("content-md5"));
    return { status: res.status, body };
  }

  /** The database commands an operation sends, by name, in order. */
  async function commandsOf(operation: () => Promise<unknown>): Promise<string[]> {
    proxy.record();
    await operation();
    return proxy.recorded();
  }

  /**
   * Runs `attempt(k)` once per command of the operation, with every connection cut just before
   * the k-th; returns the names of the commands that were cut.
   */
  async function atEachStep(
    steps: number,
    prepare: () => Promise<void>,
    attempt: (k: number) => Promise<void>,
  ): Promise<string[]> {
    const hit: string[] = [];
    for (let k = 1; k <= steps; k++) {
      await prepare();
      const fault = proxy.failCommand(k, () => proxy.cut());
      await attempt(k).catch((err: Error) => {
        throw new Error(`with the cut before command ${k}: ${err.message}`);
      });
      hit.push(await Promise.race([fault, sleep(0).then(() => "(none)")]));
      proxy.clearFault();
      await settle();
    }
    return hit;
  }

  function expectRefusal(status: number, text: string, step: string): void {
    expect(status, `${step}: ${text}`).toBe(503);
    expect(text).toMatch(/MongoDB unavailable|write lease|busy/);
  }

  it("PUT (200,000 bytes, GridFS, replacing): 503 leaves the previous contents (or, with the write in flight, the new ones whole), success keeps the new; nothing reads as missing", async () => {
    let current = randomBytes(200_000);
    expect((await fetch(data("home/big.bin"), { method: "PUT", body: current })).status).toBe(201);
    const steps = await commandsOf(() =>
      fetch(data("home/big.bin"), { method: "PUT", body: current }).then((r) => r.arrayBuffer()),
    );
    expect(steps.length).toBeGreaterThan(4);
    let refused = 0;
    let body = current;
    const prepare = async () => {
      body = randomBytes(200_000);
    };
    const hit = await atEachStep(steps.length + 1, prepare, async (k) => {
      const res = await fetch(data("home/big.bin"), { method: "PUT", body });
      const text = await res.text();
      await settle();
      const got = await read("home/big.bin");
      expect(got.status, `PUT answered ${res.status} ${text}; GET: ${got.body.subarray(0, 200)}`).toBe(200);
      if (res.status === 503) {
        refused++;
        expectRefusal(res.status, text, `PUT, cut before command ${k}`);
        // Cut before the node's write: the previous contents. A cut that also takes a reply in
        // flight on another pooled connection (the change notifier's polls count as commands
        // too) may leave the write applied (docs/mongodb.md): then the new contents, whole.
        const landed = got.body.equals(body);
        expect(landed || got.body.equals(current), "a refused PUT left the previous or the new contents").toBe(true);
        if (landed) current = body;
      } else {
        expect(res.status, text).toBe(200);
        current = body;
        expect(got.body.equals(body), "an acknowledged PUT is what reads back").toBe(true);
      }
    });
    expect(refused, `commands cut: ${hit.join(", ")}`).toBeGreaterThan(0);
  }, 240_000);

  it("DELETE of a directory: 503 leaves every resource readable (or, with the write in flight, all deleted; never a part), success removes them all", async () => {
    const small = Buffer.from("small contents");
    const large = randomBytes(150_000);
    const fill = async () => {
      const dir = await fetch(data("home/d/"), { method: "PUT" });
      expect([200, 201], await dir.text()).toContain(dir.status);
      for (const [name, body] of [
        ["d/one.txt", small],
        ["d/two.bin", large],
      ] as const) {
        const res = await fetch(data(`home/${name}`), { method: "PUT", body });
        expect([200, 201], `PUT ${name}: ${await res.text()}`).toContain(res.status);
      }
    };
    await fill();
    const steps = await commandsOf(() => fetch(data("home/d/"), { method: "DELETE" }).then((r) => r.arrayBuffer()));
    let refused = 0;
    await atEachStep(steps.length + 1, fill, async (k) => {
      const res = await fetch(data("home/d/"), { method: "DELETE" });
      const text = await res.text();
      await settle();
      const one = await read("home/d/one.txt");
      const two = await read("home/d/two.bin");
      if (res.status === 503) {
        refused++;
        expectRefusal(res.status, text, `DELETE, cut before command ${k}`);
        // Everything still readable; or, when the cut took the tombstones' write in flight (see
        // the PUT case), everything deleted: never a part.
        expect(one.status, `one.txt ${one.status}, two.bin ${two.status}`).toBe(two.status);
        if (one.status === 200) {
          expect(one.body.equals(small)).toBe(true);
          expect(two.body.equals(large)).toBe(true);
        } else {
          expect(one.status).toBe(404);
        }
      } else {
        expect(res.status, text).toBe(200);
        expect(one.status).toBe(404);
        expect(two.status).toBe(404);
      }
    });
    expect(refused).toBeGreaterThan(0);
  }, 240_000);

  it("promotion: 503 leaves the target readable (old or new contents), success copies; never a 500", async () => {
    const project = await call(url, "POST", "/insights/v1/projects", { name: "faults", account: "acme" });
    expect(project.status).toBe(201);
    const env: Record<string, string> = {};
    for (const name of ["dev", "prod"]) {
      const created = await call(url, "POST", `/insights/v1/projects/${project.json.id}/environments`, { name });
      expect(created.status).toBe(201);
      env[name] = created.json.id;
    }
    const store = project.json.store as string;
    const promote = () =>
      call(url, "POST", `/insights/v1/projects/${project.json.id}/promotions`, {
        fromEnvironmentID: env.dev,
        toEnvironmentID: env.prod,
        resources: ["/t.bin"],
      });
    let source = randomBytes(100_000);
    expect((await fetch(data(`${store}/dev/t.bin`), { method: "PUT", body: source })).status).toBe(201);
    let target = source;
    const steps = await commandsOf(promote);
    let refused = 0;
    const prepare = async () => {
      source = randomBytes(100_000);
      const res = await fetch(data(`${store}/dev/t.bin`), { method: "PUT", body: source });
      expect(res.status, await res.text()).toBe(200);
    };
    await atEachStep(steps.length + 1, prepare, async (k) => {
      const res = await promote();
      await settle();
      const got = await read(`${store}/prod/t.bin`);
      expect(got.status).toBe(200);
      if (res.status === 503) {
        refused++;
        expectRefusal(res.status, res.text, `promotion, cut before command ${k}`);
        // A promotion is a copy and then its record: cut between the two, the copy stands.
        expect(got.body.equals(target) || got.body.equals(source)).toBe(true);
      } else {
        expect(res.status, res.text).toBe(200);
        expect(res.json.promoted).toBe(1);
        expect(got.body.equals(source)).toBe(true);
      }
      if (got.body.equals(source)) target = source;
    });
    expect(refused).toBeGreaterThan(0);
  }, 240_000);

  it("report generation: a cut at any step of the worker is retried, and the report is generated; reads answer 503, never 500", async () => {
    const example = await uploadExample(url, "reports");
    const query = `projectID=${example.projectID}&environmentID=${example.environments.draft}`;
    const create = async () => {
      const created = await call(url, "POST", "/insights/v1/reports", {
        projectID: example.projectID,
        environmentID: example.environments.draft,
      });
      expect(created.status, created.text).toBe(202);
      return created.json.reportID[0] as string;
    };
    const generated = async (id: string) => {
      // The worker starts at once; the first commands after the report's creation are its own.
      await sleep(300);
      for (let i = 0; i < 600; i++) {
        const status = await call(url, "GET", `/insights/v1/reports/${id}?${query}`);
        expect([200, 503], status.text).toContain(status.status);
        if (status.status === 200 && status.json.status !== "generating") return status.json.status as string;
        await sleep(50);
      }
      throw new Error(`report ${id} still generating after 30 s`);
    };
    const first = await create();
    proxy.record();
    expect(await generated(first)).toBe("generated");
    const steps = Math.min(proxy.recorded().length, 40);
    for (let k = 1; k <= steps; k++) {
      const id = await create();
      proxy.failCommand(k, () => proxy.cut());
      expect(await generated(id), `report with a cut before command ${k} after its creation`).toBe("generated");
      proxy.clearFault();
      await settle();
      const document = await call(url, "GET", `/insights/v1/reports/${id}/document?${query}`);
      expect(document.status, document.text).toBe(200);
    }
  }, 300_000);
});
