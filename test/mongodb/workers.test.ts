// `trove serve --workers 2` on MongoDB (docs/operations.md, "Several cores"): the workers are
// instances on one database, and tell each other their commits through their primary.

import { randomBytes } from "node:crypto";
import * as http from "node:http";
import { afterAll, beforeAll, expect, it } from "vitest";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import { ADMIN, type Issuer, startIssuer } from "../auth/support.js";
import { type ChildServer, startChildServer } from "../support/child-server.js";
import { describeWithMongoDb } from "../support/mongodb.js";

let issuer: Issuer | undefined;
let token = "";
let server: ChildServer | undefined;
const database = `trove_test_${randomBytes(6).toString("hex")}`;

/** One request on a connection of its own (the primary hands each new connection to the next worker). */
function send(path: string, method = "GET", body?: string): Promise<{ status: number; text: string; etag?: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${server?.url}${path}`,
      { method, agent: false, headers: { authorization: `Bearer ${token}` } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (s: string) => {
          text += s;
        });
        res.on("end", () => resolve({ status: res.statusCode ?? 0, text, etag: res.headers.etag }));
        res.on("error", reject);
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

/** trove_change_waiters summed over the workers (GET /metrics answers the sum). */
async function waiters(): Promise<number> {
  const { text } = await send("/metrics");
  return Number(/^trove_change_waiters (\d+)/m.exec(text)?.[1] ?? Number.NaN);
}

describeWithMongoDb("trove serve --workers 2 on MongoDB (issue 14, multi-core serving)", (url) => {
  beforeAll(async () => {
    issuer = await startIssuer();
    token = await issuer.token(ADMIN, { expiresIn: 3600 });
    server = await startChildServer({
      args: ["--workers", "2", "--mongodb-url", url, "--mongodb-database", database, "--issuer", issuer.url],
      token,
    });
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
    await issuer?.stop();
    const admin = await MongoStorage.open({ url, database });
    await admin.dropDatabase();
    await admin.close();
  });

  it("spec Poll: six long polls on six connections (both workers) all wake with the CHANGE of a PUT made on a seventh", async () => {
    const reset = await send("/resources/v2/poll");
    const cursor = Number(/^RESET home (\d+)$/m.exec(reset.text)?.[1]);
    expect(Number.isInteger(cursor)).toBe(true);
    const polls = Array.from({ length: 6 }, () => send(`/resources/v2/poll?store=home:${cursor}&wait=60`));
    for (const end = Date.now() + 30_000; (await waiters()) < 6; ) {
      if (Date.now() > end) throw new Error(`polls parked: ${await waiters()} of 6`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const put = await send("/resources/v2/data/home/across.txt", "PUT", "across workers");
    expect(put.status).toBe(201);
    // Poll events carry the ETag without the header's quotes.
    const tag = put.etag?.replaceAll('"', "");
    for (const poll of await Promise.all(polls)) {
      expect(poll.status).toBe(200);
      expect(poll.text).toMatch(new RegExp(`^CHANGE\\|\\d+\\|idr://home/across\\.txt\\|modify\\|\\|${tag}\\|`, "m"));
    }
  }, 60_000);

  it("read-after-write: each of six fresh connections (both workers) sees a PUT's body and ETag at once", async () => {
    for (let round = 0; round < 3; round++) {
      const put = await send("/resources/v2/data/home/raw.txt", "PUT", `round ${round}`);
      expect([200, 201]).toContain(put.status);
      for (let i = 0; i < 6; i++) {
        const got = await send("/resources/v2/data/home/raw.txt");
        expect(got).toMatchObject({ status: 200, text: `round ${round}`, etag: put.etag });
      }
    }
  }, 60_000);
});
