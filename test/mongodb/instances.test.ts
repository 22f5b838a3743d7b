// Trove on MongoDB as users scale it: several stateless instances on one
// database, and a process killed in the middle of writing (issue 4).

import { randomBytes } from "node:crypto";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import { ADMIN, type Issuer, startIssuer } from "../auth/support.js";
import { followByPoll, lastEventId, Mirror, snapshot, until } from "../feed/mirror.js";
import { type ChildServer, startChildServer } from "../support/child-server.js";
import { describeWithMongoDb, MONGODB_URL } from "../support/mongodb.js";

// The instances share one authorization server, as in production (each one's development issuer
// would refuse the others' tokens), and every request of this file carries its token.
let issuer: Issuer | undefined;
let token = "";
const fetchWithoutToken = globalThis.fetch;

const started: ChildServer[] = [];
let database = "";

async function instance(): Promise<ChildServer> {
  const server = await startChildServer({
    args: ["--mongodb-url", MONGODB_URL as string, "--mongodb-database", database, "--issuer", issuer?.url as string],
    token,
  });
  started.push(server);
  return server;
}

describeWithMongoDb("Trove on MongoDB as users scale it", () => {
  beforeAll(async () => {
    issuer = await startIssuer();
    token = await issuer.token(ADMIN, { expiresIn: 3600 });
    vi.stubGlobal("fetch", (input: string | URL | Request, init: RequestInit = {}) => {
      const headers = new Headers(init.headers);
      headers.set("Authorization", `Bearer ${token}`);
      return fetchWithoutToken(input, { ...init, headers });
    });
  });
  afterAll(async () => {
    vi.unstubAllGlobals();
    await issuer?.stop();
  });

  afterEach(async () => {
    for (const s of started.splice(0)) await s.stop();
    const admin = await MongoStorage.open({ url: MONGODB_URL as string, database });
    await admin.dropDatabase();
    await admin.close();
  });

  describe("several instances on one MongoDB", () => {
    it("a long poll on instance B wakes within one second of a write on instance A (best of three)", async () => {
      database = `trove_test_${randomBytes(6).toString("hex")}`;
      const a = await instance();
      const b = await instance();
      const wakes: number[] = [];
      for (let i = 0; i < 3; i++) {
        const cursor = await lastEventId(b.url);
        const poll = fetch(`${b.url}/resources/v2/poll?store=home:${cursor}&wait=10`);
        await new Promise((r) => setTimeout(r, 300));
        const put = await fetch(`${a.url}/resources/v2/data/home/wake-${i}.txt`, { method: "PUT", body: "w" });
        const written = performance.now();
        expect(put.status).toBe(201);
        const res = await poll;
        wakes.push(performance.now() - written);
        expect(res.status).toBe(200);
        expect(await res.text()).toContain(`idr://home/wake-${i}.txt|modify`);
      }
      expect(Math.min(...wakes)).toBeLessThan(1000);
    }, 60_000);

    it("writers on instance A, a follower polling instance B: no missed event", async () => {
      database = `trove_test_${randomBytes(6).toString("hex")}`;
      const a = await instance();
      const b = await instance();
      for (const d of ["x", "y", "x/z"]) await fetch(`${a.url}/resources/v2/data/home/${d}/`, { method: "PUT" });
      const mirror = new Mirror(b.url, "home");
      const stop = new AbortController();
      const follower = followByPoll(mirror, b.url, stop.signal);
      try {
        await until(() => mirror.resets > 0, "the follower to start");
        await Promise.all(
          [0, 1, 2, 3].map(async (w) => {
            for (let i = 0; i < 25; i++) {
              const dir = ["x", "y", "x/z"][(w + i) % 3];
              const path = i % 7 === 6 ? `${dir}/f${w}.txt` : `${dir}/f${w}-${i % 5}.txt`;
              const method = i % 9 === 8 ? "DELETE" : "PUT";
              const res = await fetch(`${a.url}/resources/v2/data/home/${path}`, {
                method,
                body: method === "PUT" ? `${w}-${i}` : undefined,
              });
              await res.arrayBuffer();
              expect([200, 201, 404]).toContain(res.status);
            }
          }),
        );
        const last = await lastEventId(a.url);
        await until(() => mirror.cursor >= last, `the follower on B to reach event ${last}`);
      } finally {
        stop.abort();
        await follower;
      }
      const listing = await snapshot(b.url, "home");
      expect(new Map([...mirror.entries].sort())).toEqual(new Map([...listing].sort()));
      expect(await snapshot(a.url, "home")).toEqual(listing);
    }, 120_000);
  });

  describe("a process killed while writing", () => {
    it("SIGKILL mid-stream: every acknowledged write is readable, every listed resource has its content, the feed has no hole", async () => {
      database = `trove_test_${randomBytes(6).toString("hex")}`;
      const first = await instance();
      const cursor = await lastEventId(first.url);
      const acknowledged = new Map<string, string>();
      let killed = false;
      const big = randomBytes(100 * 1024).toString("base64"); // goes to GridFS
      const writers = [0, 1, 2, 3].map(async (w) => {
        for (let i = 0; !killed; i++) {
          const path = `w${w}-${i}.txt`;
          const body = i % 5 === 4 ? `${big}${path}` : `${w}/${i}`;
          try {
            const res = await fetch(`${first.url}/resources/v2/data/home/${path}`, { method: "PUT", body });
            await res.arrayBuffer();
            if (res.status === 201) acknowledged.set(path, body);
          } catch {
            return; // the server died under this request: not acknowledged
          }
        }
      });
      await until(() => acknowledged.size >= 40, "40 acknowledged writes");
      await first.kill();
      killed = true;
      await Promise.all(writers);

      const second = await instance();
      for (const [path, body] of acknowledged) {
        const res = await fetch(`${second.url}/resources/v2/data/home/${path}`);
        expect(res.status, path).toBe(200);
        expect(await res.text(), path).toBe(body);
      }
      const listing = await snapshot(second.url, "home");
      for (const name of listing.keys()) {
        if (name === "") continue;
        const res = await fetch(`${second.url}/resources/v2/data/home/${name}`);
        expect(res.status, name).toBe(200);
        const md5 = res.headers.get("content-md5");
        const { createHash } = await import("node:crypto");
        expect(
          createHash("md5")
            .update(Buffer.from(await res.arrayBuffer()))
            .digest("base64"),
          name,
        ).toBe(md5);
      }
      // Replay the feed from before the first write: every acknowledged write has its event.
      const seen = new Set<string>();
      let at = cursor;
      for (;;) {
        const res = await fetch(`${second.url}/resources/v2/poll?store=home:${at}&wait=0.3`);
        if (res.status === 204) break;
        for (const line of (await res.text()).trim().split("\n")) {
          const [kind, id, uri] = line.split("|");
          expect(kind).toBe("CHANGE");
          at = Number(id);
          seen.add((uri as string).slice("idr://home/".length));
        }
      }
      for (const path of acknowledged.keys()) expect(seen.has(path), path).toBe(true);
    }, 120_000);
  });
});
