// mirror() against a real server: converges under concurrent writers (long poll
// and WatchChanges), survives RESETs (store deleted and re-created; tombstones
// purged), resumes after a restart without a full copy, and the mirrored
// directory equals the store byte for byte.

import { createHash } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import {
  clientCredentials,
  createRestClient,
  devIssuer,
  isTroveError,
  type MirrorEvent,
  mirror,
  NotFoundError,
  type StoreMirror,
  type TroveRestClient,
  UnauthorizedError,
} from "../../sdk/src/index.js";
import { startServer, type TestServer } from "../support/server.js";
import { countingFetch, type DevServer, readMirrorMarker, startDevServer } from "./support.js";

/** Everything under `path` in the store: relative path -> contents, or "dir". */
async function storeContents(rest: TroveRestClient, store: string, path = ""): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const listing = await rest.list(store, path, { recursive: true });
  for (const e of listing.entries) {
    if (e.directory) out.set(e.name, "dir");
    else {
      const got = await rest.get(store, path === "" ? e.name : `${path}/${e.name}`);
      if (got.notModified) throw new Error("not modified");
      out.set(e.name, createHash("sha256").update(got.body).digest("hex"));
    }
  }
  return out;
}

/** The same for a local directory. */
async function localContents(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const walk = async (d: string, prefix: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const rel = prefix ? `${prefix}/${e.name}` : e.name;
      if (e.isDirectory()) {
        out.set(rel, "dir");
        await walk(join(d, e.name), rel);
      } else
        out.set(
          rel,
          createHash("sha256")
            .update(await readFile(join(d, e.name)))
            .digest("hex"),
        );
    }
  };
  await walk(dir, "");
  return out;
}

const sorted = (m: Map<string, string>) => [...m].sort(([a], [b]) => (a < b ? -1 : 1));

async function lastEventId(rest: TroveRestClient, store: string): Promise<number> {
  const status = await rest.poll();
  return status.find((e) => e.store === store)?.eventId ?? -1;
}

async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** Waits until the mirror has applied every event of the store, then compares. */
async function expectConverged(m: StoreMirror, rest: TroveRestClient, store: string, dir: string, path = "") {
  const last = await lastEventId(rest, store);
  await until(() => m.eventId >= last, `mirror at event ${last} (is at ${m.eventId})`);
  expect(sorted(await localContents(dir))).toEqual(sorted(await storeContents(rest, store, path)));
}

/** Writers that create, replace and delete files and directories at the same time. */
async function concurrentWrites(rest: TroveRestClient, store: string, writers: number, ops: number) {
  let seed = 7;
  const random = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  await Promise.all(
    Array.from({ length: writers }, async (_, w) => {
      for (let i = 0; i < ops; i++) {
        const dir = `w${w}-d${random(3)}`;
        const file = `${dir}/f${random(4)}.txt`;
        try {
          switch (random(6)) {
            case 0:
              await rest.delete(store, dir);
              break;
            case 1:
              await rest.delete(store, file);
              break;
            default:
              await rest.mkdir(store, dir);
              await rest.put(store, file, `${w}:${i}:${"x".repeat(random(5000))}`);
          }
        } catch (err) {
          // Races between writers (a file deleted, a directory gone) are expected answers.
          if (!isTroveError(err) || ![404, 412].includes(err.status)) throw err;
        }
      }
    }),
  );
}

describe("mirror", () => {
  let server: TestServer;
  let rest: TroveRestClient;
  const dirs: string[] = [];
  const running: StoreMirror[] = [];

  const tempDir = async () => {
    const d = await mkdtemp(join(tmpdir(), "trove-mirror-"));
    dirs.push(d);
    return d;
  };
  const start = (options: Parameters<typeof mirror>[0]) => {
    const m = mirror(options);
    running.push(m);
    return m;
  };

  beforeAll(async () => {
    server = await startServer({ pollWait: 1000 });
    rest = createRestClient({ baseUrl: server.url });
  });
  afterEach(async () => {
    for (const m of running.splice(0)) {
      m.stop();
      await m.done.catch(() => {});
    }
  });
  afterAll(async () => {
    await server?.stop();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  for (const follow of ["poll", "watch"] as const) {
    it(`converges under 4 concurrent writers, following by ${follow}, byte for byte`, async () => {
      const store = `conc-${follow}`;
      await rest.stores.create(store);
      await rest.mkdir(store, "seed");
      await rest.put(store, "seed/a.bin", new Uint8Array([0, 1, 2, 255]));
      const target = join(await tempDir(), "out");
      const events: MirrorEvent[] = [];
      const m = start({ client: rest, store, target, follow, pollWait: 1 });
      m.on("event", (e: MirrorEvent) => events.push(e));
      await until(() => events.some((e) => e.type === "follow"), "following");
      await concurrentWrites(rest, store, 4, 40);
      await expectConverged(m, rest, store, target);
      expect(events.find((e) => e.type === "follow")).toEqual({ type: "follow", via: follow });
      expect(events.filter((e) => e.type === "write").length).toBeGreaterThan(10);
      // The mirror's own files are beside the target, not in it.
      expect((await readdir(target)).some((n) => n.includes("trove"))).toBe(false);
    });
  }

  it("follows by WatchChanges by default when the gRPC face is reachable", async () => {
    const store = "auto-watch";
    await rest.stores.create(store);
    const m = start({ client: rest, store, target: join(await tempDir(), "out") });
    const follow = await new Promise<MirrorEvent>((resolve) => m.once("follow", resolve));
    expect(follow).toEqual({ type: "follow", via: "watch" });
    await rest.put(store, "after.txt", "after");
    await expectConverged(m, rest, store, join(dirs.at(-1) as string, "out"));
  });

  it("falls back to long polls when the gRPC face is not reachable (an HTTP/1.1-only proxy)", async () => {
    const proxy = http.createServer((req, res) => {
      const upstream = http.request(`${server.url}${req.url}`, { method: req.method, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      upstream.on("error", () => res.destroy());
      req.pipe(upstream);
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    const proxied = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    try {
      const store = "via-proxy";
      await rest.stores.create(store);
      const target = join(await tempDir(), "out");
      const follows: MirrorEvent[] = [];
      const m = start({ baseUrl: proxied, store, target, pollWait: 1 });
      m.on("follow", (e: MirrorEvent) => follows.push(e));
      await until(() => follows.some((e) => e.type === "follow" && e.via === "poll"), "falling back to poll");
      expect(follows[0]).toEqual({ type: "follow", via: "watch" });
      await rest.put(store, "p.txt", "through the proxy");
      await expectConverged(m, rest, store, target);
      m.stop();
      await m.done;
    } finally {
      proxy.closeAllConnections();
      await new Promise((r) => proxy.close(r));
    }
  });

  it("resumes after a restart from its cursor: only what changed is copied, no listing", async () => {
    const store = "resume";
    await rest.stores.create(store);
    await rest.mkdir(store, "a");
    for (let i = 0; i < 10; i++) await rest.put(store, `a/${i}.txt`, `file ${i}`);
    const target = join(await tempDir(), "out");

    const first = start({ client: rest, store, target, once: true });
    await first.done;
    expect(first.stats).toMatchObject({ listings: 1, downloads: 10 });
    expect(sorted(await localContents(target))).toEqual(sorted(await storeContents(rest, store)));
    const saved = readMirrorMarker(join(target, "..", ".out.trove-mirror.db"));
    expect(saved.eventId).toBe(await lastEventId(rest, store));

    await rest.put(store, "a/3.txt", "changed");
    await rest.delete(store, "a/4.txt");
    await rest.put(store, "new.txt", "new");
    const second = start({ client: rest, store, target, once: true });
    const events: MirrorEvent[] = [];
    second.on("event", (e: MirrorEvent) => events.push(e));
    await second.done;
    expect(events[0]).toMatchObject({ type: "start", resumed: true, eventId: saved.eventId });
    expect(second.stats.listings).toBe(0);
    expect(second.stats.downloads).toBe(2);
    expect(
      events
        .filter((e) => e.type === "write")
        .map((e) => (e as { path: string }).path)
        .sort(),
    ).toEqual(["a/3.txt", "new.txt"]);
    expect(sorted(await localContents(target))).toEqual(sorted(await storeContents(rest, store)));

    const third = start({ client: rest, store, target, once: true });
    await third.done;
    expect(third.stats).toMatchObject({ listings: 0, downloads: 0 });
  });

  it("survives a RESET when the store is deleted and re-created: relists and removes what is gone", async () => {
    const store = "reborn";
    await rest.stores.create(store, { type: "snapshot" });
    await rest.mkdir(store, "old");
    await rest.put(store, "old/x.txt", "old");
    await rest.put(store, "keep.txt", "v1");
    const target = join(await tempDir(), "out");
    const events: MirrorEvent[] = [];
    const m = start({ client: rest, store, target, follow: "poll", pollWait: 1 });
    m.on("event", (e: MirrorEvent) => events.push(e));
    await expectConverged(m, rest, store, target);

    await rest.stores.delete(store);
    await rest.stores.create(store, { type: "snapshot" });
    await rest.put(store, "keep.txt", "v2");
    await rest.mkdir(store, "fresh");
    await rest.put(store, "fresh/y.txt", "y");
    await expectConverged(m, rest, store, target);
    expect(m.stats.resets).toBeGreaterThanOrEqual(1);
    const sync = events.filter((e) => e.type === "sync");
    expect(sync.at(-1)).toMatchObject({ reason: "reset", strategy: "recursive-listing" });
    expect(await readFile(join(target, "keep.txt"), "utf8")).toBe("v2");
    await expect(stat(join(target, "old"))).rejects.toThrow(/ENOENT/);
  });

  it("a subtree mirror copies only that subtree and ignores changes elsewhere", async () => {
    const store = "subtree";
    await rest.stores.create(store);
    await rest.mkdir(store, "docs");
    await rest.mkdir(store, "docs/deep");
    await rest.put(store, "docs/deep/d.txt", "d");
    await rest.put(store, "other.txt", "o");
    const target = join(await tempDir(), "docs");
    const m = start({ client: rest, store, path: "docs", target, follow: "poll", pollWait: 1 });
    await expectConverged(m, rest, store, target, "docs");
    await rest.put(store, "docs/e.txt", "e");
    await rest.put(store, "else.txt", "x");
    await rest.delete(store, "docs/deep");
    await expectConverged(m, rest, store, target, "docs");
    expect(sorted(await localContents(target))).toEqual([["e.txt", expect.any(String)]]);
  });
});

describe("mirror after tombstones are purged", () => {
  let server: TestServer;
  let clock = Date.now();
  let dir: string;

  beforeAll(async () => {
    server = await startServer({ pollWait: 500, now: () => clock, purgeInterval: 3_600_000 });
    dir = await mkdtemp(join(tmpdir(), "trove-mirror-purge-"));
  });
  afterAll(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("a restarted mirror whose cursor is older than the purge gets RESET and walks only directories whose tag changed", async () => {
    const rest = createRestClient({ baseUrl: server.url });
    await rest.stores.create("tags", { settings: { "keep-deleted": "1s" } });
    for (const d of ["a", "b", "c"]) {
      await rest.mkdir("tags", d);
      for (let i = 0; i < 5; i++) await rest.put("tags", `${d}/${i}.txt`, `${d}${i}`);
    }
    const target = join(dir, "out");
    const first = mirror({ client: rest, store: "tags", target, once: true });
    await first.done;
    expect(first.stats.downloads).toBe(15);

    await rest.put("tags", "b/1.txt", "changed");
    await rest.delete("tags", "c/2.txt");
    clock += 2_000;
    expect(await server.storage.purgeExpired(clock)).toBe(1);

    const events: MirrorEvent[] = [];
    const second = mirror({ client: rest, store: "tags", target, once: true });
    second.on("event", (e: MirrorEvent) => events.push(e));
    await second.done;
    expect(events.find((e) => e.type === "sync")).toMatchObject({ reason: "reset", strategy: "directory-tags" });
    expect(second.stats.resets).toBe(1);
    // The root, b and c are listed; a is skipped by its unchanged tag. One file is copied, one removed.
    expect(second.stats.listings).toBe(3);
    expect(second.stats.downloads).toBe(1);
    expect(events.find((e) => e.type === "synced")).toMatchObject({ written: 1, removed: 1 });
    expect(sorted(await localContents(target))).toEqual(sorted(await storeContents(rest, "tags")));
  });
});

describe("mirror against a server that needs tokens", () => {
  let server: DevServer;
  let dir: string;

  beforeAll(async () => {
    server = await startDevServer({ pollWait: 1000 });
    dir = await mkdtemp(join(tmpdir(), "trove-mirror-auth-"));
  });
  afterAll(async () => {
    await server?.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it("sends the provider's token on listings, downloads and the WatchChanges stream; events as an async iterable", async () => {
    const counter = countingFetch();
    const auth = clientCredentials({
      tokenUrl: server.tokenUrl,
      clientId: server.clientId,
      clientSecret: server.clientSecret,
      fetch: counter.fetch,
    });
    const rest = createRestClient({ baseUrl: server.url, auth });
    await rest.put("home", "before.txt", "before");
    const controller = new AbortController();
    const target = join(dir, "out");
    const m = mirror({ baseUrl: server.url, auth, store: "home", target, follow: "watch", signal: controller.signal });
    const seen: string[] = [];
    for await (const e of m) {
      seen.push(e.type);
      if (e.type === "follow") await rest.put("home", "after.txt", "after");
      if (e.type === "write" && e.path === "after.txt") controller.abort();
    }
    await m.done;
    expect(seen[0]).toBe("start");
    expect(seen).toContain("synced");
    expect(seen.at(-1)).toBe("stop");
    expect(await readFile(join(target, "after.txt"), "utf8")).toBe("after");
    expect(await readFile(join(target, "before.txt"), "utf8")).toBe("before");
    expect(counter.tokenRequests()).toBe(1);
  });

  it("without a token the mirror fails with UnauthorizedError", async () => {
    const m = mirror({ baseUrl: server.url, store: "home", target: join(dir, "refused") });
    await expect(m.done).rejects.toBeInstanceOf(UnauthorizedError);
  });

  it("with once, a store that does not exist fails with NotFoundError instead of waiting for it", async () => {
    const token = await devIssuer({ baseUrl: server.url, dataDir: server.issuerDir });
    const m = mirror({ baseUrl: server.url, auth: token, store: "ghost", target: join(dir, "ghost"), once: true });
    await expect(m.done).rejects.toBeInstanceOf(NotFoundError);
  });
});
