// REST v2 conformance: GET and HEAD of resources and directories (spec: Endpoints > GET (and HEAD)).

import { createHash } from "node:crypto";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { startServer, type TestServer } from "../support/server.js";
import {
  bytes,
  DATA,
  expectError,
  listingEntries,
  putDirectory,
  putResource,
  type RestClient,
  restClient,
  type TestClock,
  testClock,
  XML,
} from "./rest-client.js";

let server: TestServer;
let client: RestClient;
let clock: TestClock;

beforeEach(async () => {
  clock = testClock(Date.UTC(2024, 0, 15, 10, 30, 0, 250));
  server = await startServer({ now: clock.now });
  client = restClient(server);
});

afterEach(async () => {
  await server.stop();
});

const md5 = (text: string) => createHash("md5").update(text).digest("base64");
const RESOURCE_HEADERS = ["etag", "content-md5", "last-modified", "last-modified-millis", "content-type"];

function pick(headers: Headers, names: readonly string[]): Record<string, string | null> {
  return Object.fromEntries(names.map((n) => [n, headers.get(n)]));
}

describe("GET and HEAD of a resource", () => {
  test("GET resource -> 200 with contents, ETag, Content-MD5, Last-Modified, Last-Modified-Millis, Content-Type, Content-Length (Resource response headers)", async () => {
    clock.advance(1_000);
    const tag = await putResource(client, "data.json", '{"a":1}');
    const reply = await client.fetch("GET", `${DATA}/home/data.json`);
    expect(reply.status).toBe(200);
    expect(reply.text).toBe('{"a":1}');
    expect(pick(reply.headers, [...RESOURCE_HEADERS, "content-length"])).toEqual({
      etag: tag,
      "content-md5": md5('{"a":1}'),
      "last-modified": "Mon, 15 Jan 2024 10:30:01 GMT",
      "last-modified-millis": "1705314601250",
      "content-type": "application/json",
      "content-length": "7",
    });
    expect(tag).toMatch(/^"[^"]+"$/);
  });

  test("GET resource: Last-Modified-Millis is the Last-Modified time in integer milliseconds", async () => {
    await putResource(client, "a.txt", "one");
    clock.advance(61_789);
    await client.fetch("PUT", `${DATA}/home/a.txt`, { body: bytes("two") });
    const reply = await client.fetch("GET", `${DATA}/home/a.txt`);
    const millis = reply.headers.get("last-modified-millis") ?? "";
    expect(millis).toMatch(/^\d+$/);
    expect(Number(millis)).toBe(clock.now());
    expect(Date.parse(reply.headers.get("last-modified") ?? "")).toBe(Math.floor(Number(millis) / 1000) * 1000);
  });

  test("GET of an empty resource -> 200 with Content-Length 0 and the MD5 of no bytes", async () => {
    await putResource(client, "empty.txt", "");
    const reply = await client.fetch("GET", `${DATA}/home/empty.txt`);
    expect(reply.status).toBe(200);
    expect(reply.text).toBe("");
    expect(reply.headers.get("content-length")).toBe("0");
    expect(reply.headers.get("content-md5")).toBe(md5(""));
  });

  test("GET of a large resource streams the whole contents", async () => {
    const big = "0123456789abcdef".repeat(40_000);
    await putResource(client, "big.bin", big);
    const reply = await client.fetch("GET", `${DATA}/home/big.bin`);
    expect(reply.status).toBe(200);
    expect(reply.headers.get("content-length")).toBe(String(big.length));
    expect(reply.headers.get("content-md5")).toBe(md5(big));
    expect(reply.text).toBe(big);
  });

  test("HEAD resource -> 200 with the same headers as GET and an empty body", async () => {
    await putResource(client, "a.txt", "hello");
    const get = await client.fetch("GET", `${DATA}/home/a.txt`);
    const head = await client.fetch("HEAD", `${DATA}/home/a.txt`);
    expect(head.status).toBe(200);
    expect(head.bytes.byteLength).toBe(0);
    const names = [...RESOURCE_HEADERS, "content-length"];
    expect(pick(head.headers, names)).toEqual(pick(get.headers, names));
    expect(head.headers.get("content-length")).toBe("5");
  });

  test.each([
    ["quoted", (tag: string) => tag],
    ["unquoted", (tag: string) => tag.slice(1, -1)],
    ["*", () => "*"],
    ["in a list", (tag: string) => `"other", ${tag}`],
  ])(
    "GET with If-None-Match %s matching -> 304 with no body; only ETag and Server remain of the headers",
    async (_, value) => {
      const tag = await putResource(client, "a.txt", "hello");
      for (const method of ["GET", "HEAD"]) {
        const reply = await client.fetch(method, `${DATA}/home/a.txt`, { headers: { "If-None-Match": value(tag) } });
        expect(reply.status).toBe(304);
        expect(reply.text).toBe("");
        expect(reply.headers.get("etag")).toBe(tag);
        expect(pick(reply.headers, ["content-md5", "last-modified", "last-modified-millis", "content-type"])).toEqual({
          "content-md5": null,
          "last-modified": null,
          "last-modified-millis": null,
          "content-type": null,
        });
      }
    },
  );

  test("GET with If-None-Match not matching -> 200 with the contents", async () => {
    const tag = await putResource(client, "a.txt", "hello");
    const reply = await client.fetch("GET", `${DATA}/home/a.txt`, { headers: { "If-None-Match": '"old"' } });
    expect(reply.status).toBe(200);
    expect(reply.headers.get("etag")).toBe(tag);
    expect(reply.text).toBe("hello");
  });

  test("GET resource: absent -> 404 with a text/plain reason", async () => {
    expectError(await client.fetch("GET", `${DATA}/home/missing.txt`), 404, "/missing.txt not found in store home");
    const head = await client.fetch("HEAD", `${DATA}/home/missing.txt`);
    expect(head.status).toBe(404);
    expect(head.text).toBe("");
    expect(head.headers.get("etag")).toBeNull();
  });

  test("GET of a missing directory -> 404, of a resource as a directory -> 404", async () => {
    expectError(await client.fetch("GET", `${DATA}/home/nodir/`), 404, "/nodir not found in store home");
    await putResource(client, "a.txt", "x");
    expectError(await client.fetch("GET", `${DATA}/home/a.txt/`), 404, "/a.txt is not a directory");
  });

  test("GET in an unknown store -> 404 with a text/plain reason", async () => {
    expectError(await client.fetch("GET", `${DATA}/nostore/a.txt`), 404, "store nostore not found");
    expectError(await client.fetch("GET", `${DATA}/nostore/`), 404, "store nostore not found");
  });
});

describe("GET of a directory", () => {
  test("GET of a directory without trailing / -> 303 with Location .../dir/ (query string kept)", async () => {
    await putDirectory(client, "docs/");
    for (const method of ["GET", "HEAD"]) {
      const plain = await client.fetch(method, `${DATA}/home/docs`);
      expect(plain.status).toBe(303);
      expect(plain.headers.get("location")).toBe(`${DATA}/home/docs/`);
      expect(plain.text).toBe("");
      const query = await client.fetch(method, `${DATA}/home/docs?recursive=true&include-access=true`);
      expect(query.status).toBe(303);
      expect(query.headers.get("location")).toBe(`${DATA}/home/docs/?recursive=true&include-access=true`);
    }
  });

  test("GET of a directory -> 200 with the XML listing, ETag, Last-Modified, Last-Modified-Millis, no Content-MD5", async () => {
    const dirTag = await putDirectory(client, "docs/");
    clock.advance(5_000);
    await putResource(client, "docs/a.txt", "hello");
    const reply = await client.fetch("GET", `${DATA}/home/docs/`);
    expect(reply.status).toBe(200);
    expect(pick(reply.headers, RESOURCE_HEADERS)).toEqual({
      etag: expect.stringMatching(/^"[^"]+"$/),
      "content-md5": null,
      "last-modified": "Mon, 15 Jan 2024 10:30:00 GMT",
      "last-modified-millis": "1705314600250",
      "content-type": XML,
    });
    // home is sync-recursive: the directory tag changed with its new child.
    expect(reply.headers.get("etag")).not.toBe(dirTag);
    expect(reply.text.startsWith('<?xml version="1.0" encoding="UTF-8"?>\n<resources>')).toBe(true);
    expect(listingEntries(reply.text)).toEqual([
      {
        name: "a.txt",
        tag: expect.stringMatching(/^[^"]+$/),
        type: "text/plain",
        size: "5",
        "last-modified": "2024-01-15T10:30:05.250Z",
        md5: md5("hello"),
      },
    ]);
  });

  test("HEAD of a directory -> 200 with the listing headers and an empty body", async () => {
    await putDirectory(client, "docs/");
    const get = await client.fetch("GET", `${DATA}/home/docs/`);
    const head = await client.fetch("HEAD", `${DATA}/home/docs/`);
    expect(head.status).toBe(200);
    expect(head.text).toBe("");
    expect(pick(head.headers, RESOURCE_HEADERS)).toEqual(pick(get.headers, RESOURCE_HEADERS));
  });

  test("GET of a directory with If-None-Match matching -> 304 with no body; only ETag and Server remain of the headers", async () => {
    await putDirectory(client, "docs/");
    const tag = (await client.fetch("GET", `${DATA}/home/docs/`)).headers.get("etag") ?? "";
    const reply = await client.fetch("GET", `${DATA}/home/docs/`, { headers: { "If-None-Match": tag } });
    expect(reply.status).toBe(304);
    expect(reply.text).toBe("");
    expect(reply.headers.get("etag")).toBe(tag);
    expect(reply.headers.get("content-type")).toBeNull();
    expect(reply.headers.get("last-modified")).toBeNull();
  });

  test("GET of the store root: /data/{store}/ and /data/{store} both list it", async () => {
    await putResource(client, "a.txt", "x");
    const slash = await client.fetch("GET", `${DATA}/home/`);
    expect(slash.status).toBe(200);
    expect(listingEntries(slash.text).map((e) => e.name)).toEqual(["a.txt"]);
    const bare = await client.fetch("GET", `${DATA}/home`);
    expect(bare.status).toBe(200);
    expect(bare.text).toBe(slash.text);
  });
});

describe("GET query parameters", () => {
  async function tree(): Promise<void> {
    await putDirectory(client, "docs/");
    await putDirectory(client, "docs/sub/");
    await putResource(client, "docs/a.txt", "a");
    await putResource(client, "docs/sub/b.txt", "b");
  }

  test("GET directory ?recursive=true lists sub-directories' resources, named relative to the directory", async () => {
    await tree();
    const flat = await client.fetch("GET", `${DATA}/home/docs/`);
    expect(listingEntries(flat.text).map((e) => e.name)).toEqual(["a.txt", "sub"]);
    const off = await client.fetch("GET", `${DATA}/home/docs/?recursive=false`);
    expect(off.text).toBe(flat.text);
    const deep = await client.fetch("GET", `${DATA}/home/docs/?recursive=true`);
    expect(deep.status).toBe(200);
    expect(listingEntries(deep.text).map((e) => e.name)).toEqual(["a.txt", "sub", "sub/b.txt"]);
  });

  test('GET directory ?include-access=true adds access="read,write,delete" for the anonymous caller', async () => {
    await tree();
    const plain = await client.fetch("GET", `${DATA}/home/docs/`);
    expect(listingEntries(plain.text).every((e) => !("access" in e))).toBe(true);
    const reply = await client.fetch("GET", `${DATA}/home/docs/?include-access=true`);
    expect(reply.status).toBe(200);
    expect(listingEntries(reply.text).map((e) => [e.name, e.access])).toEqual([
      ["a.txt", "read,write,delete"],
      ["sub", "read,write,delete"],
    ]);
  });

  test("GET directory ?include-blob-uuid=true adds the blob UUID of files; absent without the flag", async () => {
    await tree();
    await putResource(client, "docs/big.bin", "x".repeat(100_000));
    const plain = await client.fetch("GET", `${DATA}/home/docs/`);
    expect(listingEntries(plain.text).every((e) => !("blob" in e))).toBe(true);
    const reply = await client.fetch("GET", `${DATA}/home/docs/?include-blob-uuid=true`);
    const entries = listingEntries(reply.text);
    const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
    expect(entries.map((e) => [e.name, e.blob])).toEqual([
      ["a.txt", expect.stringMatching(uuid)],
      ["big.bin", expect.stringMatching(uuid)],
      ["sub", undefined],
    ]);
  });

  test("GET directory ?include-deleted=true also returns deleted resources and directories", async () => {
    await tree();
    expect((await client.fetch("DELETE", `${DATA}/home/docs/a.txt`)).status).toBe(200);
    expect((await client.fetch("DELETE", `${DATA}/home/docs/sub/`)).status).toBe(200);
    const plain = await client.fetch("GET", `${DATA}/home/docs/`);
    expect(listingEntries(plain.text)).toEqual([]);
    const reply = await client.fetch("GET", `${DATA}/home/docs/?include-deleted=true`);
    expect(listingEntries(reply.text).map((e) => [e.name, e.deleted, e.directory])).toEqual([
      ["a.txt", "true", undefined],
      ["sub", "true", "true"],
    ]);
  });

  test("GET ?override-mime sets the Content-Type of a resource and of a listing", async () => {
    await tree();
    const file = await client.fetch("GET", `${DATA}/home/docs/a.txt?override-mime=application%2Fjson`);
    expect(file.status).toBe(200);
    expect(file.headers.get("content-type")).toBe("application/json");
    expect(file.text).toBe("a");
    const withParam = await client.fetch(
      "HEAD",
      `${DATA}/home/docs/a.txt?override-mime=text%2Fhtml%3B%20charset%3Dutf-8`,
    );
    expect(withParam.headers.get("content-type")).toBe("text/html; charset=utf-8");
    const dir = await client.fetch("GET", `${DATA}/home/docs/?override-mime=text%2Fxml`);
    expect(dir.status).toBe(200);
    expect(dir.headers.get("content-type")).toBe("text/xml");
    // The stored type is unchanged.
    const again = await client.fetch("GET", `${DATA}/home/docs/a.txt`);
    expect(again.headers.get("content-type")).toBe("text/plain");
  });

  test.each([
    ["recursive=yes", "query parameter recursive must be true or false"],
    ["include-deleted=1", "query parameter include-deleted must be true or false"],
    ["include-access", "query parameter include-access must be true or false"],
    ["depth=1", "unknown query parameter depth"],
    ["recursive=true&recursive=true", "query parameter recursive given twice"],
    ["override-mime=not%20a%20type", 'override-mime "not a type" is not a media type'],
    ["override-mime=", 'override-mime "" is not a media type'],
    ["override-mime=text%2Fplain%3Bx%3D%22%01%22", 'override-mime "text/plain;x=\\"\\u0001\\"" is not a media type'],
    ["override-mime=text%2Fplain%0A%3Bx%3D1", 'override-mime "text/plain\\n;x=1" is not a media type'],
  ])("GET with a bad query (%s) -> 400 with a text/plain reason", async (query, reason) => {
    await tree();
    for (const path of ["docs/", "docs/a.txt", "docs"]) {
      expectError(await client.fetch("GET", `${DATA}/home/${path}?${query}`), 400, reason);
      const head = await client.fetch("HEAD", `${DATA}/home/${path}?${query}`);
      expect(head.status).toBe(400);
      expect(head.text).toBe("");
    }
  });
});
