// REST v2 conformance: PUT of resources and directories (spec: Endpoints > PUT, States table).

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
  storeState,
} from "./rest-client.js";

let server: TestServer;
let client: RestClient;

beforeEach(async () => {
  server = await startServer();
  client = restClient(server);
});

afterEach(async () => {
  await server.stop();
});

const md5 = (text: string) => createHash("md5").update(text).digest("base64");
const QUOTED_TAG = /^"[^"]+"$/;

async function contents(path: string): Promise<{ status: number; text: string; etag: string | null }> {
  const reply = await client.fetch("GET", `${DATA}/home/${path}`);
  return { status: reply.status, text: reply.text, etag: reply.headers.get("etag") };
}

describe("PUT resource", () => {
  test("PUT resource: absent -> 201 created (States table)", async () => {
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, { body: bytes("hello") });
    expect(reply.status).toBe(201);
    expect(reply.headers.get("etag")).toMatch(QUOTED_TAG);
    expect(reply.headers.get("content-md5")).toBe(md5("hello"));
    expect(reply.headers.get("location")).toBe(`${DATA}/home/a.txt`);
    expect(reply.text).toBe("");
    expect(await contents("a.txt")).toEqual({ status: 200, text: "hello", etag: reply.headers.get("etag") });
  });

  test("PUT resource: present -> 200 updated with a new ETag (States table)", async () => {
    const first = await putResource(client, "a.txt", "one");
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, { body: bytes("two") });
    expect(reply.status).toBe(200);
    expect(reply.headers.get("location")).toBeNull();
    expect(reply.headers.get("etag")).toMatch(QUOTED_TAG);
    expect(reply.headers.get("etag")).not.toBe(first);
    expect(reply.text).toBe("");
    expect(await contents("a.txt")).toEqual({ status: 200, text: "two", etag: reply.headers.get("etag") });
  });

  test("PUT of a path ending in / -> 201, creates a directory (PUT)", async () => {
    const reply = await client.fetch("PUT", `${DATA}/home/docs/`);
    expect(reply.status).toBe(201);
    expect(reply.headers.get("etag")).toMatch(QUOTED_TAG);
    expect(reply.headers.get("content-md5")).toBeNull();
    expect(reply.text).toBe("");
    const listing = await client.fetch("GET", `${DATA}/home/`);
    expect(listingEntries(listing.text)).toEqual([
      expect.objectContaining({ name: "docs", directory: "true", type: "", md5: "" }),
    ]);
    const dir = await client.fetch("GET", `${DATA}/home/docs/`);
    expect(dir.status).toBe(200);
    expect(dir.headers.get("etag")).toBe(reply.headers.get("etag"));
  });

  test("PUT of an existing directory -> 200, the directory is unchanged", async () => {
    const tag = await putDirectory(client, "docs/");
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/docs/`);
    expect(reply.status).toBe(200);
    expect(reply.headers.get("etag")).toBe(tag);
    expect(await storeState(client)).toEqual(before);
  });

  test("PUT resource: missing parent -> 404, no automatic parents (PUT: parent path not found)", async () => {
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/a/b/c.txt`, { body: bytes("x") });
    expectError(reply, 404, "parent directory /a/b/ not found");
    expect(await storeState(client)).toEqual(before);
    expect((await client.fetch("GET", `${DATA}/home/a/`)).status).toBe(404);
  });

  test("PUT directory: missing parent -> 404, no automatic parents (PUT: parent path not found)", async () => {
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/a/b/`);
    expectError(reply, 404, "parent directory /a/ not found");
    expect(await storeState(client)).toEqual(before);
  });

  test("PUT resource named like an existing directory -> 403 (PUT: forbidden)", async () => {
    await putDirectory(client, "docs/");
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/docs`, { body: bytes("x") });
    expectError(reply, 403, "a directory named /docs/ exists; a resource cannot take its name");
    expect(await storeState(client)).toEqual(before);
  });

  test("PUT directory named like an existing resource -> 403 (PUT: forbidden)", async () => {
    await putResource(client, "a.txt", "x");
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt/`);
    expectError(reply, 403, "a resource named /a.txt exists; a directory cannot take its name");
    expect(await storeState(client)).toEqual(before);
  });

  test("PUT of a directory with a body -> 400, nothing created", async () => {
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/docs/`, { body: bytes("contents") });
    expectError(reply, 400, "a directory PUT takes no body");
    expect(await storeState(client)).toEqual(before);
  });

  test("PUT resource into a resource as if it were a directory -> 404 (parent path not found)", async () => {
    await putResource(client, "a.txt", "x");
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt/b.txt`, { body: bytes("y") });
    expectError(reply, 404, "parent directory /a.txt/ not found");
    expect(await storeState(client)).toEqual(before);
  });
});

describe("PUT with If-Match", () => {
  test("PUT with If-Match different from the stored ETag -> 412, contents unchanged (States table)", async () => {
    const tag = await putResource(client, "a.txt", "one");
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("two"),
      headers: { "If-Match": '"not-the-tag"' },
    });
    expectError(reply, 412, `If-Match does not match the current ETag ${tag}`);
    expect(await storeState(client)).toEqual(before);
    expect(await contents("a.txt")).toEqual({ status: 200, text: "one", etag: tag });
  });

  test("PUT with If-Match on an absent resource -> 412, nothing created (States table)", async () => {
    const before = await storeState(client);
    for (const ifMatch of ['"abc"', "*"]) {
      const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, {
        body: bytes("x"),
        headers: { "If-Match": ifMatch },
      });
      expectError(reply, 412, "If-Match given but the resource does not exist");
    }
    expect(await storeState(client)).toEqual(before);
    expect((await contents("a.txt")).status).toBe(404);
  });

  test.each([
    ["an unterminated quote", '"abc', 'malformed entity tag "abc'],
    ["a quote inside a tag", 'ab"c', 'malformed entity tag ab"c'],
    ["an empty list", " , ", "empty entity tag list"],
  ])("PUT with a malformed If-Match (%s) -> 400 text/plain reason, nothing changes", async (_, ifMatch, reason) => {
    const tag = await putResource(client, "a.txt", "one");
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("two"),
      headers: { "If-Match": ifMatch },
    });
    expectError(reply, 400, reason);
    expect(await storeState(client)).toEqual(before);
    expect(await contents("a.txt")).toEqual({ status: 200, text: "one", etag: tag });
  });

  test.each([
    ["quoted", (tag: string) => tag],
    ["unquoted", (tag: string) => tag.slice(1, -1)],
    ["*", () => "*"],
    ["in a list", (tag: string) => `"other", ${tag}`],
  ])("PUT with If-Match %s equal to the stored ETag -> 200 updated (States table)", async (_, ifMatch) => {
    const tag = await putResource(client, "a.txt", "one");
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("two"),
      headers: { "If-Match": ifMatch(tag) },
    });
    expect(reply.status).toBe(200);
    expect(reply.headers.get("etag")).not.toBe(tag);
    expect(await contents("a.txt")).toEqual({ status: 200, text: "two", etag: reply.headers.get("etag") });
  });
});

describe("PUT with If-None-Match (issue 30: RFC 9110's conditional create, a Trove addition)", () => {
  test("PUT with If-None-Match: * on an absent resource -> 201 created", async () => {
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("new"),
      headers: { "If-None-Match": "*" },
    });
    expect(reply.status).toBe(201);
    expect(await contents("a.txt")).toEqual({ status: 200, text: "new", etag: reply.headers.get("etag") });
  });

  test("PUT with If-None-Match: * on an existing resource -> 412 with its reason, contents and store unchanged", async () => {
    const tag = await putResource(client, "a.txt", "one");
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("two"),
      headers: { "If-None-Match": "*" },
    });
    expectError(reply, 412, `If-None-Match * given but /a.txt exists (current ETag ${tag})`);
    expect(await storeState(client)).toEqual(before);
    expect(await contents("a.txt")).toEqual({ status: 200, text: "one", etag: tag });
  });

  test("PUT with If-None-Match: * of a body of unknown length on an existing resource -> 412, nothing stored", async () => {
    const tag = await putResource(client, "a.txt", "one");
    const before = await storeState(client);
    const reply = await client.raw("PUT", `${DATA}/home/a.txt`, {
      body: "streamed",
      headers: { "If-None-Match": "*", "Transfer-Encoding": "chunked" },
    });
    expectError(reply, 412, `If-None-Match * given but /a.txt exists (current ETag ${tag})`);
    expect(await storeState(client)).toEqual(before);
  });

  test("PUT with If-None-Match: * where a deleted resource was -> 201: a tombstone does not exist", async () => {
    await putResource(client, "a.txt", "one");
    expect((await client.fetch("DELETE", `${DATA}/home/a.txt`)).status).toBe(200);
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("again"),
      headers: { "If-None-Match": "*" },
    });
    expect(reply.status).toBe(201);
    expect((await contents("a.txt")).text).toBe("again");
  });

  test("PUT with If-None-Match: * where a directory is, of a resource or of the directory -> 412, nothing changes", async () => {
    const tag = await putDirectory(client, "d/");
    const before = await storeState(client);
    const file = await client.fetch("PUT", `${DATA}/home/d`, { body: bytes("x"), headers: { "If-None-Match": "*" } });
    expectError(file, 412, `If-None-Match * given but a directory /d/ exists (current ETag ${tag})`);
    const dir = await client.fetch("PUT", `${DATA}/home/d/`, { headers: { "If-None-Match": "*" } });
    expectError(dir, 412, `If-None-Match * given but a directory /d/ exists (current ETag ${tag})`);
    expect(await storeState(client)).toEqual(before);
    const made = await client.fetch("PUT", `${DATA}/home/e/`, { headers: { "If-None-Match": "*" } });
    expect(made.status).toBe(201);
  });

  test("PUT with If-None-Match of tags: 412 on the current ETag, 200 on another", async () => {
    const tag = await putResource(client, "a.txt", "one");
    const refused = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("two"),
      headers: { "If-None-Match": `"other", ${tag}` },
    });
    expectError(refused, 412, `If-None-Match matches the current ETag ${tag} of /a.txt`);
    const replaced = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("two"),
      headers: { "If-None-Match": '"other"' },
    });
    expect(replaced.status).toBe(200);
    expect((await contents("a.txt")).text).toBe("two");
  });

  test('PUT with a quoted "*" or a malformed If-None-Match -> 400, nothing changes', async () => {
    const before = await storeState(client);
    const quoted = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("x"),
      headers: { "If-None-Match": '"*"' },
    });
    expectError(quoted, 400, 'entity tag "*" is not a tag this server makes: send * unquoted to match any');
    const malformed = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("x"),
      headers: { "If-None-Match": '"abc' },
    });
    expectError(malformed, 400, 'malformed entity tag "abc');
    expect(await storeState(client)).toEqual(before);
  });

  test("PUT ?restore= or ?restore-as-of= with If-None-Match -> 400: it does not apply to a restore; nothing changes", async () => {
    const tag = await putResource(client, "a.txt", "one");
    await putDirectory(client, "d/");
    const before = await storeState(client);
    const reason = "If-None-Match does not apply to a restore: its state replaces the current one (If-Match does)";
    const version = await client.fetch("PUT", `${DATA}/home/a.txt?restore=${tag.slice(1, -1)}`, {
      headers: { "If-None-Match": "*" },
    });
    expectError(version, 400, reason);
    const subtree = await client.fetch("PUT", `${DATA}/home/d/?restore-as-of=1`, { headers: { "If-None-Match": "*" } });
    expectError(subtree, 400, reason);
    expect(await storeState(client)).toEqual(before);
  });

  test("concurrent PUTs with If-None-Match: * of one path -> exactly one 201, the others 412; the winner's bytes are stored", async () => {
    const bodies = Array.from({ length: 6 }, (_, i) => `body ${i}`);
    const replies = await Promise.all(
      bodies.map((b) =>
        client.fetch("PUT", `${DATA}/home/race.txt`, { body: bytes(b), headers: { "If-None-Match": "*" } }),
      ),
    );
    const statuses = replies.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 412)).toHaveLength(bodies.length - 1);
    const winner = statuses.indexOf(201);
    expect(await contents("race.txt")).toEqual({
      status: 200,
      text: bodies[winner],
      etag: replies[winner]?.headers.get("etag"),
    });
  });
});

describe("PUT and the resource type", () => {
  test("PUT keeps the request Content-Type as the resource type (GET Content-Type, listing type)", async () => {
    const type = "application/vnd.trove.template+json; version=2";
    await putResource(client, "page.bin", "{}", { "Content-Type": type });
    const reply = await client.fetch("GET", `${DATA}/home/page.bin`);
    expect(reply.headers.get("content-type")).toBe(type);
    const listing = await client.fetch("GET", `${DATA}/home/`);
    expect(listingEntries(listing.text)).toEqual([expect.objectContaining({ name: "page.bin", type })]);
  });

  test.each([
    ["data.json", "application/json"],
    ["notes.TXT", "text/plain"],
    ["image.nosuchextension", "application/octet-stream"],
    ["conf.yaml", "application/yaml"],
    ["logo.ico", "image/vnd.microsoft.icon"],
    ["README", "application/octet-stream"],
  ])("PUT without Content-Type: %s gets the type %s from its extension", async (name, type) => {
    await putResource(client, name, "x");
    const reply = await client.fetch("GET", `${DATA}/home/${name}`);
    expect(reply.status).toBe(200);
    expect(reply.headers.get("content-type")).toBe(type);
  });

  test("PUT with an invalid Content-Type -> 400 text/plain, nothing stored", async () => {
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("x"),
      headers: { "Content-Type": "not a type" },
    });
    expectError(reply, 400, 'invalid Content-Type "not a type"');
    expect(await storeState(client)).toEqual(before);
  });
});

describe("PUT with Content-MD5", () => {
  test("PUT with a matching Content-MD5 -> 201, the MD5 is kept", async () => {
    await putResource(client, "a.txt", "hello", { "Content-MD5": md5("hello") });
    const reply = await client.fetch("HEAD", `${DATA}/home/a.txt`);
    expect(reply.headers.get("content-md5")).toBe(md5("hello"));
  });

  test("PUT with a mismatched Content-MD5 on an update -> 400, the old contents and ETag stay", async () => {
    const tag = await putResource(client, "a.txt", "one");
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("two"),
      headers: { "Content-MD5": md5("something else") },
    });
    expectError(reply, 400, `Content-MD5 mismatch: the contents have MD5 ${md5("two")}`);
    expect(await storeState(client)).toEqual(before);
    expect(await contents("a.txt")).toEqual({ status: 200, text: "one", etag: tag });
  });

  test("PUT with a mismatched Content-MD5 on a new resource -> 400, nothing created", async () => {
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("two"),
      headers: { "Content-MD5": md5("something else") },
    });
    expectError(reply, 400, `Content-MD5 mismatch: the contents have MD5 ${md5("two")}`);
    expect(await storeState(client)).toEqual(before);
    expect((await contents("a.txt")).status).toBe(404);
  });

  test("PUT with a mismatched Content-MD5 on a large (non-inline) resource -> 400, the old contents stay", async () => {
    const big = "x".repeat(200 * 1024);
    const tag = await putResource(client, "big.bin", big);
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/big.bin`, {
      body: bytes(`${big}y`),
      headers: { "Content-MD5": md5(big) },
    });
    expectError(reply, 400, `Content-MD5 mismatch: the contents have MD5 ${md5(`${big}y`)}`);
    expect(await storeState(client)).toEqual(before);
    expect(await contents("big.bin")).toEqual({ status: 200, text: big, etag: tag });
  });

  test.each([
    ["not base64 of 16 bytes", "abcd"],
    ["a hex digest", createHash("md5").update("x").digest("hex")],
    ["the right digest with trailing junk", `${md5("x")}!!`],
    ["the right digest without padding", md5("x").slice(0, -2)],
  ])("PUT with a malformed Content-MD5 (%s) -> 400, nothing stored", async (_, value) => {
    const before = await storeState(client);
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt`, {
      body: bytes("x"),
      headers: { "Content-MD5": value },
    });
    expectError(reply, 400, "Content-MD5 must be the base64 text of a 16-byte MD5 digest");
    expect(await storeState(client)).toEqual(before);
  });
});
