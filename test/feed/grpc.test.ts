// ChangeService over gRPC: Poll (unary) and WatchChanges (stream with heartbeats).

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChangeService, Operation } from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../support/server.js";

let t: TestServer;
beforeEach(async () => {
  t = await startServer({ pollWait: 500 });
});
afterEach(async () => {
  await t.stop();
});

const client = () => createClient(ChangeService, createGrpcTransport({ baseUrl: t.url }));

describe("ChangeService", () => {
  it("Poll without cursors answers the current event id of every store as reset events", async () => {
    const out = await client().poll({});
    expect(out.events).toHaveLength(1);
    expect(out.events[0]?.kind.case).toBe("reset");
    expect(out.events[0]?.kind.value).toMatchObject({ store: "home" });
  });

  it("Poll with a cursor returns change events after it, and none (empty) when the wait passes", async () => {
    const start = await client().poll({});
    const cursor = start.events[0]?.kind.value?.eventId ?? 0n;
    const empty = await client().poll({ cursors: [{ store: "home", eventId: cursor }], waitMillis: 100 });
    expect(empty.events).toEqual([]);
    const put = await fetch(`${t.url}/resources/v2/data/home/g.txt`, {
      method: "PUT",
      body: "g",
      headers: { "Content-Type": "text/plain" },
    });
    const tag = put.headers.get("etag")?.replaceAll('"', "");
    const out = await client().poll({ cursors: [{ store: "home", eventId: cursor }] });
    const change = out.events.find((e) => e.kind.case === "change" && e.kind.value.path === "g.txt");
    expect(change?.kind.value).toMatchObject({
      store: "home",
      uri: "idr://home/g.txt",
      operation: Operation.MODIFY,
      previousTag: "",
      tag,
      type: "text/plain",
      directory: false,
    });
  });

  it("a change event carries its time from the server: a file's and a deletion's is the time the change was made, a live directory's is 0 (issue 30, docs/change-feed.md)", async () => {
    const start = await client().poll({});
    const cursor = start.events[0]?.kind.value?.eventId ?? 0n;
    const mkdir = await fetch(`${t.url}/resources/v2/data/home/timed/`, { method: "PUT" });
    expect(mkdir.status).toBe(201);
    const put = await fetch(`${t.url}/resources/v2/data/home/timed/t.txt`, { method: "PUT", body: "t" });
    expect(put.status).toBe(201);
    const changes = async (from: bigint) =>
      (await client().poll({ cursors: [{ store: "home", eventId: from }] })).events.flatMap((e) =>
        e.kind.case === "change" ? [e.kind.value] : [],
      );
    const events = await changes(cursor);
    const written = events.find((e) => e.path === "timed/t.txt");
    expect(written?.operation).toBe(Operation.MODIFY);
    const del = await fetch(`${t.url}/resources/v2/data/home/timed/t.txt`, { method: "DELETE" });
    expect(del.status).toBe(200);
    const deleted = (await changes(written?.eventId ?? 0n)).find((e) => e.path === "timed/t.txt");
    expect(deleted?.operation).toBe(Operation.DELETE);
    // Its time is the one the listing shows for that state (the server's clock), to the millisecond:
    // the deletion's is the tombstone's modification time.
    const listing = await fetch(`${t.url}/resources/v2/data/home/timed/?include-deleted=true`);
    const modified = /name="t\.txt"[^>]*last-modified="([^"]+)"/.exec(await listing.text())?.[1];
    expect(modified).toBeDefined();
    expect(Number(deleted?.timeMillis)).toBe(Date.parse(modified as string));
    expect(Number(written?.timeMillis)).toBeGreaterThan(0);
    expect(Number(written?.timeMillis)).toBeLessThanOrEqual(Number(deleted?.timeMillis));
    // A live directory's event may be a re-tag, whose time is not kept: 0, not a wrong time.
    const dir = events.filter((e) => e.path === "timed" && e.directory);
    expect(dir.length).toBeGreaterThan(0);
    expect(dir.every((e) => e.timeMillis === 0n)).toBe(true);
  });

  it("Poll with a malformed cursor answers InvalidArgument", async () => {
    await expect(client().poll({ cursors: [{ store: "bad name", eventId: 1n }] })).rejects.toSatisfy(
      (err) => err instanceof ConnectError && err.code === Code.InvalidArgument,
    );
  });

  it("WatchChanges sends heartbeats while idle, then the changes as they happen", async () => {
    const abort = new AbortController();
    const seen: string[] = [];
    const stream = client().watchChanges({ heartbeatMillis: 100 }, { signal: abort.signal });
    try {
      for await (const msg of stream) {
        if (msg.heartbeat) {
          seen.push("heartbeat");
          if (seen.filter((s) => s === "heartbeat").length === 2) {
            await fetch(`${t.url}/resources/v2/data/home/w.txt`, { method: "PUT", body: "w" });
          }
        }
        for (const e of msg.events) {
          seen.push(e.kind.case === "change" ? `change ${e.kind.value.path}` : `${e.kind.case}`);
        }
        if (seen.includes("change w.txt")) break;
      }
    } finally {
      abort.abort();
    }
    expect(seen[0]).toBe("reset");
    expect(seen.slice(1, 3)).toEqual(["heartbeat", "heartbeat"]);
    expect(seen).toContain("change w.txt");
    // The server releases the stream's waiter once it sees the cancellation.
    for (let i = 0; i < 100 && t.server.notifier.waiterCount > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(t.server.notifier.waiterCount).toBe(0);
  });
});
