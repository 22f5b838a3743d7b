// REST v2 conformance: the XML directory listing (spec: Resources and their fields > Directory listing)
// and directory ETags under the store features sync-recursive and sync-snapshot.

import { createHash } from "node:crypto";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { startServer, type TestServer } from "../support/server.js";
import {
  bytes,
  createStore,
  DATA,
  listingEntries,
  putDirectory,
  putResource,
  type RestClient,
  restClient,
  type TestClock,
  testClock,
} from "./rest-client.js";

let server: TestServer;
let client: RestClient;
let clock: TestClock;

beforeEach(async () => {
  clock = testClock(Date.UTC(2024, 5, 1, 8, 0, 0, 0));
  server = await startServer({ now: clock.now });
  client = restClient(server);
});

afterEach(async () => {
  await server.stop();
});

const md5 = (text: string) => createHash("md5").update(text).digest("base64");
const TAG = /^[^"\s]+$/;

async function list(path: string, query = ""): Promise<Array<Record<string, string>>> {
  const reply = await client.fetch("GET", `${DATA}/home/${path}${query}`);
  expect(reply.status, reply.text).toBe(200);
  return listingEntries(reply.text);
}

describe("XML directory listing", () => {
  test("listing: root element resources, one resource element per entry with name, tag, type, size, last-modified, md5", async () => {
    await putResource(client, "a.txt", "hello");
    const reply = await client.fetch("GET", `${DATA}/home/`);
    expect(reply.text).toMatch(
      /^<\?xml version="1.0" encoding="UTF-8"\?>\n<resources><resource [^>]*\/><\/resources>\n$/,
    );
    expect(listingEntries(reply.text)).toEqual([
      {
        name: "a.txt",
        tag: expect.stringMatching(TAG),
        type: "text/plain",
        size: "5",
        "last-modified": "2024-06-01T08:00:00.000Z",
        md5: md5("hello"),
      },
    ]);
  });

  test("listing: the tag attribute is the resource's ETag without quotes", async () => {
    const tag = await putResource(client, "a.txt", "hello");
    expect((await list(""))[0]?.tag).toBe(tag.slice(1, -1));
  });

  test('listing: a directory has type="" and md5="", directory="true", no size', async () => {
    clock.advance(1_500);
    await putDirectory(client, "docs/");
    const reply = await client.fetch("GET", `${DATA}/home/`);
    expect(reply.text).toContain(' type=""');
    expect(reply.text).toContain(' md5=""');
    expect(listingEntries(reply.text)).toEqual([
      {
        name: "docs",
        tag: expect.stringMatching(TAG),
        type: "",
        directory: "true",
        "last-modified": "2024-06-01T08:00:01.500Z",
        md5: "",
      },
    ]);
  });

  test("listing: deleted and directory appear only when true; access only with include-access; blob only with include-blob-uuid", async () => {
    await putDirectory(client, "docs/");
    await putResource(client, "a.txt", "a");
    await putResource(client, "b.txt", "b");
    expect((await client.fetch("DELETE", `${DATA}/home/b.txt`)).status).toBe(200);
    const plain = await list("", "?include-deleted=true");
    expect(plain.map((e) => Object.keys(e).sort())).toEqual([
      ["last-modified", "md5", "name", "size", "tag", "type"],
      ["deleted", "last-modified", "md5", "name", "size", "tag", "type"],
      ["directory", "last-modified", "md5", "name", "tag", "type"],
    ]);
    expect(plain.map((e) => [e.name, e.deleted, e.directory])).toEqual([
      ["a.txt", undefined, undefined],
      ["b.txt", "true", undefined],
      ["docs", undefined, "true"],
    ]);
    const all = await list("", "?include-deleted=true&include-access=true&include-blob-uuid=true");
    expect(all.map((e) => [e.name, e.access, typeof e.blob])).toEqual([
      ["a.txt", "read,write,delete", "string"],
      ["b.txt", "read,write,delete", "undefined"],
      ["docs", "read,write,delete", "undefined"],
    ]);
  });

  test("listing: an empty directory is an empty resources element", async () => {
    await putDirectory(client, "docs/");
    const reply = await client.fetch("GET", `${DATA}/home/docs/`);
    expect(reply.text).toBe('<?xml version="1.0" encoding="UTF-8"?>\n<resources></resources>\n');
    expect(listingEntries(reply.text)).toEqual([]);
  });

  test("recursive listing names entries by their path relative to the listed directory (e.g. sub/a.txt)", async () => {
    await putDirectory(client, "docs/");
    await putDirectory(client, "docs/sub/");
    await putDirectory(client, "docs/sub/deeper/");
    await putResource(client, "docs/sub/a.txt", "a");
    await putResource(client, "docs/sub/deeper/b.txt", "b");
    await putResource(client, "top.txt", "t");
    expect((await list("docs/", "?recursive=true")).map((e) => e.name)).toEqual([
      "sub",
      "sub/a.txt",
      "sub/deeper",
      "sub/deeper/b.txt",
    ]);
    expect((await list("docs/sub/", "?recursive=true")).map((e) => e.name)).toEqual([
      "a.txt",
      "deeper",
      "deeper/b.txt",
    ]);
    expect((await list("", "?recursive=true")).map((e) => e.name)).toEqual([
      "docs",
      "docs/sub",
      "docs/sub/a.txt",
      "docs/sub/deeper",
      "docs/sub/deeper/b.txt",
      "top.txt",
    ]);
  });

  test("recursive listing does not include a sibling whose name starts like the listed directory", async () => {
    await putDirectory(client, "docs/");
    await putDirectory(client, "docs-old/");
    await putResource(client, "docs/a.txt", "a");
    await putResource(client, "docs-old/b.txt", "b");
    await putResource(client, "docs.txt", "c");
    expect((await list("docs/", "?recursive=true")).map((e) => e.name)).toEqual(["a.txt"]);
    expect((await list("docs/")).map((e) => e.name)).toEqual(["a.txt"]);
  });

  test.each([
    ["&", "a&b.txt"],
    ["<", "a<b>.txt"],
    ['"', 'say "hi".txt'],
    ["'", "it's.txt"],
    ["all of them", `&<>"'.txt`],
  ])("listing: names with XML special characters (%s) round-trip", async (_, name) => {
    await putDirectory(client, `${encodeURIComponent(name)}/`);
    await putResource(client, `${encodeURIComponent(name)}/${encodeURIComponent(name)}`, name);
    expect((await list("")).map((e) => e.name)).toEqual([name]);
    expect((await list("", "?recursive=true")).map((e) => e.name)).toEqual([name, `${name}/${name}`]);
    const get = await client.fetch("GET", `${DATA}/home/${encodeURIComponent(name)}/${encodeURIComponent(name)}`);
    expect(get.status).toBe(200);
    expect(get.text).toBe(name);
  });

  test('listing: a type with a quoted parameter holding XML special characters round-trips (type="...")', async () => {
    const type = 'application/x-trove; label="a&b <c> \'d\' \\"e\\""';
    await putResource(client, "a.bin", "x", { "Content-Type": type });
    expect((await client.fetch("HEAD", `${DATA}/home/a.bin`)).headers.get("content-type")).toBe(type);
    expect((await list("")).map((e) => e.type)).toEqual([type]);
  });
});

async function etag(store: string, path: string): Promise<string> {
  const reply = await client.fetch("HEAD", `${DATA}/${store}/${path}`);
  expect(reply.status, `HEAD ${path}`).toBe(200);
  return reply.headers.get("etag") ?? "";
}

async function tags(store: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const dir of ["", "docs/", "docs/sub/", "other/"]) out[dir] = await etag(store, dir);
  return out;
}

async function tree(store: string): Promise<void> {
  await putDirectory(client, "docs/", store);
  await putDirectory(client, "docs/sub/", store);
  await putDirectory(client, "other/", store);
}

const changes: Array<[string, (store: string) => Promise<unknown>]> = [
  ["created", (store) => putResource(client, "docs/sub/a.txt", "new", {}, store)],
  ["updated", (store) => client.fetch("PUT", `${DATA}/${store}/docs/sub/keep.txt`, { body: bytes("changed") })],
  ["deleted", (store) => client.fetch("DELETE", `${DATA}/${store}/docs/sub/keep.txt`)],
  ["a directory created", (store) => putDirectory(client, "docs/sub/new/", store)],
];

describe("store features and directory ETags", () => {
  test.each(changes)(
    "recursive store (sync, sync-recursive): every ancestor ETag, the root included, changes when a descendant is %s",
    async (_, change) => {
      await tree("home");
      await putResource(client, "docs/sub/keep.txt", "keep");
      const before = await tags("home");
      await change("home");
      const after = await tags("home");
      expect(after[""]).not.toBe(before[""]);
      expect(after["docs/"]).not.toBe(before["docs/"]);
      expect(after["docs/sub/"]).not.toBe(before["docs/sub/"]);
      // Not an ancestor: unchanged.
      expect(after["other/"]).toBe(before["other/"]);
    },
  );

  test.each(changes)(
    "snapshot store (sync, sync-snapshot): no ancestor ETag changes when a descendant is %s",
    async (_, change) => {
      await createStore(client, "snap", "snapshot");
      await tree("snap");
      await putResource(client, "docs/sub/keep.txt", "keep", {}, "snap");
      const before = await tags("snap");
      await change("snap");
      expect(await tags("snap")).toEqual(before);
    },
  );

  test("recursive store: the listing's tag attributes of ancestors follow their ETags", async () => {
    await tree("home");
    await putResource(client, "docs/sub/a.txt", "a");
    const entries = await list("", "?recursive=true");
    for (const dir of ["docs", "docs/sub", "other"]) {
      expect(`"${entries.find((e) => e.name === dir)?.tag}"`).toBe(await etag("home", `${dir}/`));
    }
  });

  test.each(["recursive", "snapshot"] as const)(
    "%s store: a directory's last-modified does not change when its contents change",
    async (type) => {
      await createStore(client, "s", type);
      await tree("s");
      const created = clock.now();
      clock.advance(60_000);
      await putResource(client, "docs/sub/a.txt", "a", {}, "s");
      clock.advance(60_000);
      await client.fetch("PUT", `${DATA}/s/docs/sub/a.txt`, { body: bytes("b") });
      clock.advance(60_000);
      expect((await client.fetch("DELETE", `${DATA}/s/docs/sub/a.txt`)).status).toBe(200);
      const head = await client.fetch("HEAD", `${DATA}/s/docs/sub/`);
      expect(head.headers.get("last-modified-millis")).toBe(String(created));
      const listing = listingEntries((await client.fetch("GET", `${DATA}/s/?recursive=true`)).text);
      expect(listing.filter((e) => e.directory === "true").map((e) => [e.name, e["last-modified"]])).toEqual([
        ["docs", new Date(created).toISOString()],
        ["docs/sub", new Date(created).toISOString()],
        ["other", new Date(created).toISOString()],
      ]);
    },
  );
});
