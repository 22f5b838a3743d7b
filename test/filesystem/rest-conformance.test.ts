// Issue 17: the REST conformance suite's resource cases (test/rest/: PUT, GET, DELETE, deleted
// resources, listings, paths) run unchanged against a filesystem store: the same files, with the
// suites' "home" store made a filesystem store on a folder of the test's data directory
// (TROVE_TEST_STORE_TYPE, read by test/support/server.ts). Each file's hooks stay in its own describe.

import { describe } from "vitest";

process.env.TROVE_TEST_STORE_TYPE = "filesystem";

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
