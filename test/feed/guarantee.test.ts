// Change-feed guarantees: followers never miss a change, RESET after retention,
// no waiter leaks (issue 3; spec: Poll client procedure, Events, Limits).

import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChangeService, Operation } from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { afterEach, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../support/server.js";
import { followByPoll, lastEventId, Mirror, snapshot, until } from "./mirror.js";

let t: TestServer | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

/** Follows a store with the WatchChanges stream until `signal` aborts. */
async function followByWatch(mirror: Mirror, url: string, signal: AbortSignal): Promise<void> {
  const client = createClient(ChangeService, createGrpcTransport({ baseUrl: url }));
  try {
    for await (const msg of client.watchChanges({ cursors: [], heartbeatMillis: 200 }, { signal })) {
      for (const e of msg.events) {
        if (e.kind.case === "reset" && e.kind.value.store === mirror.store)
          await mirror.relist(Number(e.kind.value.eventId));
        if (e.kind.case === "change" && e.kind.value.store === mirror.store) {
          const c = e.kind.value;
          mirror.applyChange(Number(c.eventId), c.path, c.operation === Operation.DELETE ? "delete" : "modify", c.tag);
        }
      }
    }
  } catch (err) {
    if (!signal.aborted) throw err;
  }
}

const DIRS = ["a", "b", "a/x", "a/y", "b/z", "a/x/deep"];
const EXPECTED = new Set([200, 201, 403, 404, 412]);

/** One writer: PUTs, directory creations and recursive DELETEs on a small nested tree. */
async function writer(url: string, seed: number, ops: number): Promise<void> {
  let s = seed;
  const rand = (n: number) => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s % n;
  };
  for (let i = 0; i < ops; i++) {
    const dir = DIRS[rand(DIRS.length)] as string;
    const r = rand(10);
    const requests: Array<[string, RequestInit]> = [];
    if (r < 6) {
      requests.push([`${dir}/f${rand(4)}.txt`, { method: "PUT", body: `w${seed}-${i}` }]);
    } else if (r < 8) {
      // Create the directory and its parents, in order (no automatic parents).
      const parts = dir.split("/");
      for (let k = 1; k <= parts.length; k++) requests.push([`${parts.slice(0, k).join("/")}/`, { method: "PUT" }]);
    } else {
      requests.push([`${dir}/`, { method: "DELETE" }]);
    }
    for (const [path, init] of requests) {
      const res = await fetch(`${url}/resources/v2/data/home/${path}`, init);
      await res.arrayBuffer();
      if (!EXPECTED.has(res.status))
        throw new Error(`writer ${seed}: unexpected ${res.status} for ${init.method} ${path}`);
    }
  }
}

describe("change feed guarantees", () => {
  it.each([1, 2, 3])(
    "No missed change (round %i): 8 concurrent writers; a REST poll follower and a WatchChanges follower end equal to a recursive listing",
    async (round) => {
      t = await startServer({ pollWait: 1000 });
      const url = t.url;
      for (const d of ["a", "b", "a/x", "a/y", "b/z", "a/x/deep"]) {
        await fetch(`${url}/resources/v2/data/home/${d}/`, { method: "PUT" });
      }
      const stop = new AbortController();
      const byPoll = new Mirror(url, "home");
      const byWatch = new Mirror(url, "home");
      const followers = Promise.all([followByPoll(byPoll, url, stop.signal), followByWatch(byWatch, url, stop.signal)]);
      try {
        await until(() => byPoll.resets > 0 && byWatch.resets > 0, "followers to start");
        await Promise.all(Array.from({ length: 8 }, (_, w) => writer(url, round * 100 + w + 1, 60)));
        const last = await lastEventId(url, "home");
        await until(() => byPoll.cursor >= last && byWatch.cursor >= last, `followers to reach event ${last}`);
      } finally {
        stop.abort();
        await followers;
      }
      const listing = await snapshot(url, "home");
      expect(listing.size).toBeGreaterThan(1);
      expect(new Map([...byPoll.entries].sort())).toEqual(new Map([...listing].sort()));
      expect(new Map([...byWatch.entries].sort())).toEqual(new Map([...listing].sort()));
    },
    60_000,
  );

  it("Reset: with a short keep-deleted, a follower that falls behind gets RESET, relists, and converges", async () => {
    let clock = Date.now();
    t = await startServer({ pollWait: 500, now: () => clock, purgeInterval: 3_600_000 });
    const url = t.url;
    const B = `${url}/resources/v2`;
    await fetch(`${B}/stores`, {
      method: "POST",
      body: '{"name":"short","settings":{"keep-deleted":"1s"}}',
      headers: { "Content-Type": "application/json" },
    });
    const mirror = new Mirror(url, "short");
    await mirror.relist(await lastEventId(url, "short"));
    const behind = mirror.cursor;
    await fetch(`${B}/data/short/gone.txt`, { method: "PUT", body: "x" });
    await fetch(`${B}/data/short/kept.txt`, { method: "PUT", body: "y" });
    await fetch(`${B}/data/short/gone.txt`, { method: "DELETE" });
    clock += 2_000;
    expect(await t.storage.purgeExpired(clock)).toBe(1);
    const last = await lastEventId(url, "short");
    const res = await fetch(`${B}/poll?store=short:${behind}`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(`RESET short ${last}\n`);
    await mirror.applyLine(`RESET short ${last}`);
    expect(mirror.cursor).toBe(last);
    expect([...mirror.entries.keys()].sort()).toEqual(["", "kept.txt"]);
    expect(mirror.entries).toEqual(await snapshot(url, "short"));
    // From the new position the feed continues normally.
    const next = fetch(`${B}/poll?store=short:${last}&wait=5`);
    await fetch(`${B}/data/short/new.txt`, { method: "PUT", body: "z" });
    expect(await (await next).text()).toContain("idr://short/new.txt|modify");
  });

  it("A client that disconnects during a long poll releases its waiter: none left after 10,000 abandoned polls", async () => {
    t = await startServer({ pollWait: 30_000 });
    const { url, server } = t;
    const last = await lastEventId(url, "home");
    // 250 at a time: with the previous round's sockets still closing, 500 would meet the connection cap (1000).
    const batch = 250;
    for (let round = 0; round < 10_000 / batch; round++) {
      const controllers = Array.from({ length: batch }, () => new AbortController());
      const polls = controllers.map((c) =>
        fetch(`${url}/resources/v2/poll?store=home:${last}`, { signal: c.signal }).catch(() => undefined),
      );
      await until(() => server.notifier.waiterCount === batch, `${batch} waiting polls`);
      for (const c of controllers) c.abort();
      await Promise.all(polls);
      await until(() => server.notifier.waiterCount === 0, "waiters to be released");
    }
    expect(server.notifier.waiterCount).toBe(0);
    const res = await fetch(`${url}/resources/v2/poll`);
    expect(res.status).toBe(200);
  }, 600_000);
});
