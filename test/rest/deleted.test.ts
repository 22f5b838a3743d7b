// REST v2 conformance: known-deleted resources and the keep-deleted retention
// (spec: States table rows "deleted", Errors 404, Limits).

import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { startServer, type TestServer } from "../support/server.js";
import {
  bytes,
  createStore,
  DATA,
  expectError,
  listingEntries,
  putDirectory,
  putResource,
  type RestClient,
  restClient,
  storeState,
  TEXT,
  type TestClock,
  testClock,
} from "./rest-client.js";

let server: TestServer;
let client: RestClient;
let clock: TestClock;

beforeEach(async () => {
  clock = testClock();
  server = await startServer({ now: clock.now });
  client = restClient(server);
});

afterEach(async () => {
  await server.stop();
});

async function remove(path: string, store = "home"): Promise<void> {
  const reply = await client.fetch("DELETE", `${DATA}/${store}/${path}`);
  expect(reply.status, reply.text).toBe(200);
}

function expectKnownDeleted(reply: { status: number; text: string; headers: Headers }, head = false): void {
  expect(reply.status).toBe(404);
  expect(reply.headers.get("etag")).toMatch(/^"[^"]+"$/);
  if (head) {
    expect(reply.text).toBe("");
  } else {
    expect(reply.headers.get("content-type")).toBe(TEXT);
    expect(reply.text).toBe("deleted");
  }
}

describe("known-deleted resources", () => {
  test("GET of a known-deleted resource -> 404 with body exactly `deleted` and an ETag header (States table: deleted, GET)", async () => {
    const liveTag = await putResource(client, "a.txt", "hello");
    await remove("a.txt");
    const reply = await client.fetch("GET", `${DATA}/home/a.txt`);
    expectKnownDeleted(reply);
    // The tombstone has a tag of its own: a client that held the live tag sees a change.
    expect(reply.headers.get("etag")).not.toBe(liveTag);
  });

  test("HEAD of a known-deleted resource -> 404 with an ETag header and no body", async () => {
    await putResource(client, "a.txt", "hello");
    await remove("a.txt");
    const get = await client.fetch("GET", `${DATA}/home/a.txt`);
    const head = await client.fetch("HEAD", `${DATA}/home/a.txt`);
    expectKnownDeleted(head, true);
    expect(head.headers.get("etag")).toBe(get.headers.get("etag"));
  });

  test("GET of a known-deleted directory and of its contents -> 404 `deleted` with an ETag each", async () => {
    await putDirectory(client, "docs/");
    await putResource(client, "docs/a.txt", "a");
    await remove("docs/");
    expectKnownDeleted(await client.fetch("GET", `${DATA}/home/docs/`));
    expectKnownDeleted(await client.fetch("GET", `${DATA}/home/docs`));
    expectKnownDeleted(await client.fetch("GET", `${DATA}/home/docs/a.txt`));
  });

  test('a known-deleted resource is listed only with include-deleted, marked deleted="true"', async () => {
    await putResource(client, "a.txt", "hello");
    await remove("a.txt");
    const tombstoneTag = (await client.fetch("HEAD", `${DATA}/home/a.txt`)).headers.get("etag");
    expect(listingEntries((await client.fetch("GET", `${DATA}/home/`)).text)).toEqual([]);
    const entries = listingEntries((await client.fetch("GET", `${DATA}/home/?include-deleted=true`)).text);
    expect(entries).toEqual([
      expect.objectContaining({ name: "a.txt", deleted: "true", tag: tombstoneTag?.slice(1, -1) }),
    ]);
  });

  test("PUT over a known-deleted resource -> 201 created again (States table: absent -> present)", async () => {
    await putResource(client, "a.txt", "one");
    await remove("a.txt");
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, { body: bytes("two") });
    expect(reply.status).toBe(201);
    const get = await client.fetch("GET", `${DATA}/home/a.txt`);
    expect(get.status).toBe(200);
    expect(get.text).toBe("two");
    expect(get.headers.get("etag")).toBe(reply.headers.get("etag"));
  });

  test("PUT with If-Match on a known-deleted resource -> 412, it stays deleted", async () => {
    await putResource(client, "a.txt", "one");
    await remove("a.txt");
    const tombstoneTag = (await client.fetch("HEAD", `${DATA}/home/a.txt`)).headers.get("etag") ?? "";
    const before = await storeState(client);
    for (const ifMatch of [tombstoneTag, "*"]) {
      const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, {
        body: bytes("two"),
        headers: { "If-Match": ifMatch },
      });
      expectError(reply, 412, "If-Match given but the resource does not exist");
    }
    expect(await storeState(client)).toEqual(before);
  });

  test("PUT into a known-deleted directory -> 404 (parent path not found)", async () => {
    await putDirectory(client, "docs/");
    await remove("docs/");
    const before = await storeState(client);
    expectError(
      await client.fetch("PUT", `${DATA}/home/docs/a.txt`, { body: bytes("x") }),
      404,
      "parent directory /docs/ not found",
    );
    expect(await storeState(client)).toEqual(before);
  });

  test("DELETE of a known-deleted resource -> 404 `deleted` with an ETag, nothing changes", async () => {
    await putResource(client, "a.txt", "one");
    await remove("a.txt");
    const before = await storeState(client);
    expectKnownDeleted(await client.fetch("DELETE", `${DATA}/home/a.txt`));
    expect(await storeState(client)).toEqual(before);
  });
});

describe("keep-deleted retention", () => {
  test("after the store's keep-deleted elapses a deleted resource is a plain 404 and leaves include-deleted listings (States table: retention period elapses)", async () => {
    await createStore(client, "short", "recursive", { "keep-deleted": "1s" });
    await putResource(client, "a.txt", "hello", {}, "short");
    await remove("a.txt", "short");

    clock.advance(999);
    expectKnownDeleted(await client.fetch("GET", `${DATA}/short/a.txt`));
    const listed = await client.fetch("GET", `${DATA}/short/?include-deleted=true`);
    expect(listingEntries(listed.text).map((e) => [e.name, e.deleted])).toEqual([["a.txt", "true"]]);

    clock.advance(1);
    const get = await client.fetch("GET", `${DATA}/short/a.txt`);
    expectError(get, 404, "/a.txt not found in store short");
    expect(get.headers.get("etag")).toBeNull();
    const head = await client.fetch("HEAD", `${DATA}/short/a.txt`);
    expect(head.status).toBe(404);
    expect(head.headers.get("etag")).toBeNull();
    const after = await client.fetch("GET", `${DATA}/short/?include-deleted=true`);
    expect(listingEntries(after.text)).toEqual([]);
    expect(
      listingEntries((await client.fetch("GET", `${DATA}/short/?include-deleted=true&recursive=true`)).text),
    ).toEqual([]);
  });

  test("the default keep-deleted of home (7d) holds a deleted resource for seven days", async () => {
    await putResource(client, "a.txt", "hello");
    await remove("a.txt");
    clock.advance(7 * 86_400_000 - 1);
    expectKnownDeleted(await client.fetch("GET", `${DATA}/home/a.txt`));
    clock.advance(1);
    expectError(await client.fetch("GET", `${DATA}/home/a.txt`), 404, "/a.txt not found in store home");
  });

  test("after keep-deleted elapses a deleted directory's contents leave the recursive listing too", async () => {
    await createStore(client, "short", "snapshot", { "keep-deleted": "2s" });
    await putDirectory(client, "docs/", "short");
    await putResource(client, "docs/a.txt", "a", {}, "short");
    await remove("docs/", "short");
    const listing = () => client.fetch("GET", `${DATA}/short/?include-deleted=true&recursive=true`);
    expect(listingEntries((await listing()).text).map((e) => [e.name, e.deleted])).toEqual([
      ["docs", "true"],
      ["docs/a.txt", "true"],
    ]);
    clock.advance(2_000);
    expect(listingEntries((await listing()).text)).toEqual([]);
    expectError(await client.fetch("GET", `${DATA}/short/docs/a.txt`), 404, "/docs/a.txt not found in store short");
    // The path is free again: PUT creates it.
    expect((await client.fetch("PUT", `${DATA}/short/docs/`)).status).toBe(201);
    expect(listingEntries((await client.fetch("GET", `${DATA}/short/docs/?include-deleted=true`)).text)).toEqual([]);
  });

  test("a shorter keep-deleted set with PUT /stores/{name} applies to existing tombstones", async () => {
    await putResource(client, "a.txt", "hello");
    await remove("a.txt");
    clock.advance(5_000);
    expectKnownDeleted(await client.fetch("GET", `${DATA}/home/a.txt`));
    const update = await client.fetch("PUT", "/resources/v2/stores/home", {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ settings: { "keep-deleted": "5s" } }),
    });
    expect(update.status, update.text).toBe(201);
    expectError(await client.fetch("GET", `${DATA}/home/a.txt`), 404, "/a.txt not found in store home");
  });
});
