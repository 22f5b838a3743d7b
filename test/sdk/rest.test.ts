// The SDK's REST v2 client against a real server: every operation, and each
// typed error a client observes.

import { createHash } from "node:crypto";
import * as http from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  BadRequestError,
  ConnectionError,
  createRestClient,
  DeletedError,
  ForbiddenError,
  isDeletedError,
  isNotFoundError,
  isPreconditionFailedError,
  isServerError,
  isTroveError,
  NotFoundError,
  PayloadTooLargeError,
  PreconditionFailedError,
  ServerError,
  type TroveRestClient,
} from "../../sdk/src/index.js";
import { startServer, type TestServer } from "../support/server.js";

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("the call succeeded");
}

const md5 = (b: Uint8Array | string) => createHash("md5").update(b).digest("base64");

describe("REST client", () => {
  let server: TestServer;
  let rest: TroveRestClient;

  beforeAll(async () => {
    server = await startServer({ maxResourceSize: 1024 * 1024, pollWait: 2000 });
    rest = createRestClient({ baseUrl: server.url });
    await rest.mkdir("home", "docs");
  });

  afterAll(async () => {
    await server?.stop();
  });

  it("put of bytes creates (201) then replaces (200) and answers the tag the server sends", async () => {
    const created = await rest.put("home", "docs/a.bin", new Uint8Array([1, 2, 3]));
    expect(created.created).toBe(true);
    expect(created.md5).toBe(md5(new Uint8Array([1, 2, 3])));
    const replaced = await rest.put("home", "docs/a.bin", new Uint8Array([4, 5]));
    expect(replaced.created).toBe(false);
    expect(replaced.tag).not.toBe(created.tag);
    const head = await rest.head("home", "docs/a.bin");
    expect(head).toMatchObject({ notModified: false, tag: replaced.tag, size: 2, md5: md5(new Uint8Array([4, 5])) });
  });

  it("put of a string stores UTF-8 with the given Content-Type", async () => {
    await rest.put("home", "docs/é note.txt", "héllo", { contentType: "text/plain; charset=utf-8" });
    const got = await rest.get("home", "docs/é note.txt", { as: "text" });
    expect(got.notModified).toBe(false);
    if (got.notModified) return;
    expect(got.body).toBe("héllo");
    expect(got.type).toBe("text/plain; charset=utf-8");
  });

  it("put streams a Node Readable and a web ReadableStream, and reports progress", async () => {
    const chunk = Buffer.alloc(64 * 1024, 7);
    const sent: number[] = [];
    const fromNode = await rest.put("home", "docs/node.bin", Readable.from([chunk, chunk, chunk]), {
      onProgress: (n) => sent.push(n),
    });
    expect(fromNode.md5).toBe(md5(Buffer.concat([chunk, chunk, chunk])));
    expect(sent.at(-1)).toBe(3 * chunk.byteLength);
    const web = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(new Uint8Array([9, 9]));
        c.enqueue(new Uint8Array([8]));
        c.close();
      },
    });
    await rest.put("home", "docs/web.bin", web, { contentLength: 3 });
    const got = await rest.get("home", "docs/web.bin");
    if (got.notModified) throw new Error("not modified");
    expect([...got.body]).toEqual([9, 9, 8]);
  });

  it("put with If-Match replaces only the matching tag; a stale one is PreconditionFailedError (412)", async () => {
    const first = await rest.put("home", "docs/m.txt", "1");
    const second = await rest.put("home", "docs/m.txt", "2", { ifMatch: first.tag });
    const err = await rejection(rest.put("home", "docs/m.txt", "3", { ifMatch: first.tag }));
    expect(err).toBeInstanceOf(PreconditionFailedError);
    expect(isPreconditionFailedError(err)).toBe(true);
    expect((err as PreconditionFailedError).status).toBe(412);
    expect((await rest.get("home", "docs/m.txt", { as: "text" })).notModified === false).toBe(true);
    const now = await rest.get("home", "docs/m.txt", { as: "text" });
    expect(now.notModified ? "" : now.body).toBe("2");
    expect(now.notModified ? "" : now.tag).toBe(second.tag);
  });

  it("issue 30: put with ifNoneMatch * creates once; then PreconditionFailedError (412) with the reason, contents unchanged", async () => {
    const made = await rest.put("home", "docs/once.txt", "first", { ifNoneMatch: "*" });
    expect(made.created).toBe(true);
    const err = await rejection(rest.put("home", "docs/once.txt", "second", { ifNoneMatch: "*" }));
    expect(err).toBeInstanceOf(PreconditionFailedError);
    expect((err as PreconditionFailedError).status).toBe(412);
    expect((err as PreconditionFailedError).reason).toBe(
      `If-None-Match * given but /docs/once.txt exists (current ETag "${made.tag}")`,
    );
    const now = await rest.get("home", "docs/once.txt", { as: "text" });
    expect(now.notModified ? "" : now.body).toBe("first");
    expect(now.notModified ? "" : now.tag).toBe(made.tag);
  });

  it("get as a stream, with If-None-Match (304 as notModified) and override-mime", async () => {
    const put = await rest.put("home", "docs/s.json", '{"a":1}');
    const streamed = await rest.get("home", "docs/s.json", { as: "stream", overrideMime: "text/plain" });
    if (streamed.notModified) throw new Error("not modified");
    expect(streamed.type).toBe("text/plain");
    expect(await new Response(streamed.body).text()).toBe('{"a":1}');
    const again = await rest.get("home", "docs/s.json", { ifNoneMatch: put.tag });
    expect(again).toEqual({ notModified: true, tag: put.tag });
    const head = await rest.head("home", "docs/s.json", { ifNoneMatch: [`"${put.tag}"`, "other"] });
    expect(head).toEqual({ notModified: true, tag: put.tag });
  });

  it("a missing resource is NotFoundError, a deleted one DeletedError with its tag, on get, head and delete", async () => {
    const missing = await rejection(rest.get("home", "docs/never.txt"));
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(isDeletedError(missing)).toBe(false);
    expect((missing as NotFoundError).reason).toMatch(/not found|no /i);

    const put = await rest.put("home", "docs/gone.txt", "x");
    await rest.delete("home", "docs/gone.txt", { ifMatch: put.tag });
    for (const call of [
      rest.get("home", "docs/gone.txt"),
      rest.head("home", "docs/gone.txt"),
      rest.delete("home", "docs/gone.txt"),
    ]) {
      const err = await rejection(call);
      expect(err).toBeInstanceOf(DeletedError);
      expect(isNotFoundError(err)).toBe(true);
      expect((err as DeletedError).status).toBe(404);
      expect((err as DeletedError).tag).not.toBe("");
    }
    expect(isDeletedError(await rejection(rest.head("home", "docs/never.txt")))).toBe(false);
  });

  it("delete with a stale If-Match is PreconditionFailedError and deletes nothing; a directory goes with its contents", async () => {
    await rest.mkdir("home", "tree");
    const leaf = await rest.put("home", "tree/leaf.txt", "leaf");
    await rest.put("home", "tree/leaf.txt", "leaf2");
    expect(await rejection(rest.delete("home", "tree/leaf.txt", { ifMatch: leaf.tag }))).toBeInstanceOf(
      PreconditionFailedError,
    );
    await rest.delete("home", "tree/");
    expect(isDeletedError(await rejection(rest.get("home", "tree/leaf.txt")))).toBe(true);
  });

  it("put under a missing parent is NotFoundError; a file named like a directory is ForbiddenError", async () => {
    const noParent = await rejection(rest.put("home", "nowhere/a.txt", "x"));
    expect(noParent).toBeInstanceOf(NotFoundError);
    const clash = await rejection(rest.put("home", "docs", "x"));
    expect(clash).toBeInstanceOf(ForbiddenError);
    expect((clash as ForbiddenError).status).toBe(403);
  });

  it("a body that does not match Content-MD5 is BadRequestError with the server's reason", async () => {
    const err = await rejection(rest.put("home", "docs/md5.txt", "abc", { contentMd5: md5("abd") }));
    expect(err).toBeInstanceOf(BadRequestError);
    expect((err as BadRequestError).status).toBe(400);
    expect((err as BadRequestError).reason).toMatch(/md5/i);
    expect(isNotFoundError(await rejection(rest.head("home", "docs/md5.txt")))).toBe(true);
  });

  it("a body larger than the server's limit is PayloadTooLargeError", async () => {
    const err = await rejection(rest.put("home", "docs/big.bin", new Uint8Array(1024 * 1024 + 1)));
    expect(err).toBeInstanceOf(PayloadTooLargeError);
    expect((err as PayloadTooLargeError).status).toBe(413);
  });

  it("list answers typed entries: plain, recursive, with access, blob UUIDs and deleted entries", async () => {
    await rest.mkdir("home", "l");
    await rest.mkdir("home", "l/sub");
    await rest.put("home", "l/a.txt", "aaa", { contentType: "text/plain" });
    await rest.put("home", "l/sub/b.txt", "b");
    await rest.put("home", "l/del.txt", "d");
    await rest.delete("home", "l/del.txt");

    const plain = await rest.list("home", "l");
    expect(plain.tag).not.toBe("");
    expect(plain.entries.map((e) => [e.name, e.directory, e.size])).toEqual([
      ["a.txt", false, 3],
      ["sub", true, undefined],
    ]);
    const a = plain.entries[0];
    expect(a).toMatchObject({ type: "text/plain", md5: md5("aaa"), deleted: false });
    expect(a?.lastModified).toBeInstanceOf(Date);
    expect(a?.access).toBeUndefined();
    expect(a?.blob).toBeUndefined();

    const full = await rest.list("home", "l/", {
      recursive: true,
      includeAccess: true,
      includeBlobUuid: true,
      includeDeleted: true,
    });
    expect(full.entries.map((e) => [e.name, e.deleted])).toEqual([
      ["a.txt", false],
      ["del.txt", true],
      ["sub", false],
      ["sub/b.txt", false],
    ]);
    expect(full.entries[0]?.access).toEqual(["read", "write", "delete"]);
    expect(full.entries[0]?.blob).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("list of a missing directory is NotFoundError; of the root, the store's entries", async () => {
    expect(await rejection(rest.list("home", "nope/"))).toBeInstanceOf(NotFoundError);
    const root = await rest.list("home", "");
    expect(root.entries.some((e) => e.name === "docs" && e.directory)).toBe(true);
  });

  it("stores: create, get, list, update, delete; a duplicate is ForbiddenError, an unknown NotFoundError, a bad type BadRequestError", async () => {
    const created = await rest.stores.create("brand", { type: "snapshot", settings: { "keep-deleted": "1d" } });
    expect(created).toMatchObject({ name: "brand", type: "snapshot", deleted: false });
    expect(created.features).toEqual(["sync", "sync-snapshot"]);
    expect(created.settings["keep-deleted"]).toBe("1d");
    expect((await rest.stores.list()).map((s) => s.name)).toEqual(["brand", "home"]);
    expect((await rest.stores.get("brand")).tag).toBe(created.tag);
    const updated = await rest.stores.update("brand", { settings: { "keep-deleted": "12h" } });
    expect(updated.settings["keep-deleted"]).toBe("12h");
    expect(updated.type).toBe("snapshot");
    expect(await rejection(rest.stores.create("brand"))).toBeInstanceOf(ForbiddenError);
    expect(await rejection(rest.stores.create("x", { type: "nonsense" }))).toBeInstanceOf(BadRequestError);
    await rest.stores.delete("brand");
    expect(await rejection(rest.stores.get("brand"))).toBeInstanceOf(NotFoundError);
    expect((await rest.stores.list()).map((s) => s.name)).toEqual(["home"]);
  });

  it("poll: the status without cursors, then typed CHANGE events after a cursor, [] when none came", async () => {
    const status = await rest.poll();
    const home = status.find((e) => e.store === "home");
    expect(home?.kind).toBe("reset");
    const cursor = home?.eventId as number;
    const put = await rest.put("home", "docs/pipe|name.txt", "p", { contentType: "text/plain" });
    const events = await rest.poll({ cursors: { home: cursor }, wait: 1 });
    const change = events.find((e) => e.kind === "change" && e.path === "docs/pipe|name.txt");
    expect(change).toMatchObject({
      kind: "change",
      store: "home",
      operation: "modify",
      previousTag: "",
      tag: put.tag,
      type: "text/plain",
      directory: false,
      uri: "idr://home/docs/pipe%7Cname.txt",
    });
    const last = Math.max(...events.map((e) => e.eventId));
    expect(await rest.poll({ cursors: new Map([["home", last]]), wait: 0.2 })).toEqual([]);
  });

  it("poll with a cursor of a store that does not exist answers a reset to 0", async () => {
    expect(await rest.poll({ cursors: { ghost: 5 }, wait: 0 })).toEqual([
      { kind: "reset", store: "ghost", eventId: 0 },
    ]);
  });

  it("a 500 or 502 answer (e.g. from a proxy in front of Trove) is ServerError with the reason", async () => {
    const proxy = http.createServer((req, res) => {
      res.writeHead(req.url?.includes("bad-gateway") ? 502 : 500, { "Content-Type": "text/plain" });
      res.end("internal error\n");
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", r));
    try {
      const broken = createRestClient({ baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}` });
      const err = await rejection(broken.get("home", "a"));
      expect(err).toBeInstanceOf(ServerError);
      expect(err).toMatchObject({ status: 500, reason: "internal error" });
      expect(isServerError(await rejection(broken.list("home", "bad-gateway/")))).toBe(true);
    } finally {
      await new Promise((r) => proxy.close(r));
    }
  });

  it("a server that cannot be reached is ConnectionError with status 0", async () => {
    const dead = createRestClient({ baseUrl: "http://127.0.0.1:1" });
    const err = await rejection(dead.get("home", "a"));
    expect(err).toBeInstanceOf(ConnectionError);
    expect(isTroveError(err)).toBe(true);
    expect((err as ConnectionError).status).toBe(0);
  });
});
