// Issue 17: the REST conformance suite's resource cases (test/rest/: PUT, GET, DELETE, deleted
// resources, listings, paths) run unchanged against a filesystem store: the same files, with the
// suites' "home" store made a filesystem store on a folder of the test's data directory
// (TROVE_TEST_STORE_TYPE, read by test/support/server.ts). Each file's hooks stay in its own describe.

import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, describe, expect, test } from "vitest";
import { bytes, DATA, restClient, STORES } from "../rest/rest-client.js";
import { startServer } from "../support/server.js";

process.env.TROVE_TEST_STORE_TYPE = "filesystem";
// A worker process may run another test file next: it gets the default store type back.
afterAll(() => {
  delete process.env.TROVE_TEST_STORE_TYPE;
});

describe("filesystem store: PUT (test/rest/put.test.ts)", async () => {
  await import("../rest/put.test.js");
});
describe("filesystem store: GET (test/rest/get.test.ts)", async () => {
  await import("../rest/get.test.js");
});
describe("filesystem store: DELETE (test/rest/delete.test.ts)", async () => {
  await import("../rest/delete.test.js");
});
describe("filesystem store: deleted resources (test/rest/deleted.test.ts)", async () => {
  await import("../rest/deleted.test.js");
});
describe("filesystem store: listings (test/rest/listing.test.ts)", async () => {
  await import("../rest/listing.test.js");
});
describe("filesystem store: paths (test/rest/paths.test.ts)", async () => {
  await import("../rest/paths.test.js");
});

test("the suites above ran on a filesystem store: home is of type filesystem and a PUT lands in its folder", async () => {
  const server = await startServer();
  try {
    const client = restClient(server);
    expect((await client.fetch("GET", `${STORES}/home`)).text).toContain('type="filesystem"');
    expect((await client.fetch("PUT", `${DATA}/home/probe.txt`, { body: bytes("in the folder") })).status).toBe(201);
    expect(await readFile(join(server.dataDir, "home-folder", "probe.txt"), "utf8")).toBe("in the folder");
  } finally {
    await server.stop();
  }
});
