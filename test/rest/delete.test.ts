// REST v2 conformance: DELETE (spec: Endpoints > DELETE, States table).

import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { startServer, type TestServer } from "../support/server.js";
import {
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

async function tree(): Promise<void> {
  await putDirectory(client, "docs/");
  await putDirectory(client, "docs/sub/");
  await putDirectory(client, "docs/sub/deeper/");
  await putResource(client, "docs/a.txt", "a");
  await putResource(client, "docs/sub/b.txt", "b");
  await putResource(client, "docs/sub/deeper/c.txt", "c".repeat(100_000));
  await putResource(client, "keep.txt", "keep");
}

const gone = async (path: string) => {
  const reply = await client.fetch("GET", `${DATA}/home/${path}`);
  return reply.status === 404 && reply.text === "deleted";
};

describe("DELETE", () => {
  test("DELETE resource: present -> 200 deleted (States table)", async () => {
    await putResource(client, "a.txt", "hello");
    const reply = await client.fetch("DELETE", `${DATA}/home/a.txt`);
    expect(reply.status).toBe(200);
    expect(reply.text).toBe("");
    expect(await gone("a.txt")).toBe(true);
  });

  test("DELETE directory: recursive, a directory with nested contents -> 200, then all of it is gone (States table)", async () => {
    await tree();
    const reply = await client.fetch("DELETE", `${DATA}/home/docs/`);
    expect(reply.status).toBe(200);
    expect(reply.text).toBe("");
    for (const path of [
      "docs/",
      "docs/a.txt",
      "docs/sub/",
      "docs/sub/b.txt",
      "docs/sub/deeper/",
      "docs/sub/deeper/c.txt",
    ]) {
      expect(await gone(path), path).toBe(true);
    }
    const listing = await client.fetch("GET", `${DATA}/home/?recursive=true`);
    expect(listingEntries(listing.text).map((e) => e.name)).toEqual(["keep.txt"]);
    const withDeleted = await client.fetch("GET", `${DATA}/home/?recursive=true&include-deleted=true`);
    expect(listingEntries(withDeleted.text).map((e) => [e.name, e.deleted ?? "false"])).toEqual([
      ["docs", "true"],
      ["docs/a.txt", "true"],
      ["docs/sub", "true"],
      ["docs/sub/b.txt", "true"],
      ["docs/sub/deeper", "true"],
      ["docs/sub/deeper/c.txt", "true"],
      ["keep.txt", "false"],
    ]);
  });

  test("DELETE directory named without trailing / -> 200, deleted with its contents", async () => {
    await tree();
    expect((await client.fetch("DELETE", `${DATA}/home/docs/sub`)).status).toBe(200);
    expect(await gone("docs/sub/deeper/c.txt")).toBe(true);
    expect((await client.fetch("GET", `${DATA}/home/docs/a.txt`)).text).toBe("a");
  });

  test("DELETE: absent resource -> 404, nothing changes", async () => {
    await tree();
    const before = await storeState(client);
    expectError(await client.fetch("DELETE", `${DATA}/home/docs/missing.txt`), 404, "/docs/missing.txt not found");
    expect(await storeState(client)).toEqual(before);
  });

  test("DELETE: missing parent directory -> 404, nothing changes", async () => {
    await tree();
    const before = await storeState(client);
    expectError(await client.fetch("DELETE", `${DATA}/home/nodir/a.txt`), 404, "/nodir/a.txt not found");
    expectError(await client.fetch("DELETE", `${DATA}/home/nodir/`), 404, "/nodir not found");
    expect(await storeState(client)).toEqual(before);
  });

  test("DELETE in an unknown store -> 404", async () => {
    expectError(await client.fetch("DELETE", `${DATA}/nostore/a.txt`), 404, "store nostore not found");
  });

  test("DELETE with If-Match different from the stored ETag -> 412, nothing deleted", async () => {
    await tree();
    const before = await storeState(client);
    const file = await client.fetch("DELETE", `${DATA}/home/docs/a.txt`, { headers: { "If-Match": '"stale"' } });
    expect(file.status).toBe(412);
    const dir = await client.fetch("DELETE", `${DATA}/home/docs/`, { headers: { "If-Match": '"stale"' } });
    expect(dir.status).toBe(412);
    expect(dir.text).toMatch(/^If-Match does not match the current ETag "[^"]+"\n$/);
    expect(await storeState(client)).toEqual(before);
    expect((await client.fetch("GET", `${DATA}/home/docs/a.txt`)).text).toBe("a");
  });

  test("DELETE with If-Match equal to the stored ETag -> 200 (States table)", async () => {
    await tree();
    const fileTag = (await client.fetch("HEAD", `${DATA}/home/docs/a.txt`)).headers.get("etag") ?? "";
    expect((await client.fetch("DELETE", `${DATA}/home/docs/a.txt`, { headers: { "If-Match": fileTag } })).status).toBe(
      200,
    );
    const dirTag = (await client.fetch("HEAD", `${DATA}/home/docs/`)).headers.get("etag") ?? "";
    expect((await client.fetch("DELETE", `${DATA}/home/docs/`, { headers: { "If-Match": dirTag } })).status).toBe(200);
    expect(await gone("docs/sub/b.txt")).toBe(true);
  });

  test("DELETE of the store root / -> 403, nothing deleted", async () => {
    await tree();
    const before = await storeState(client);
    for (const target of [`${DATA}/home/`, `${DATA}/home`]) {
      expectError(
        await client.fetch("DELETE", target),
        403,
        "the root directory of a store cannot be deleted; delete the store instead",
      );
    }
    expect(await storeState(client)).toEqual(before);
  });
});
