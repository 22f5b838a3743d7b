// REST v2 conformance: "Every response carries the header Server with value resources/1.0"
// (spec: What the service does, 5). The client of this suite checks it on every answer;
// these cases cover answers no other file provokes.

import { afterEach, beforeEach, expect, test } from "vitest";
import { startServer, type TestServer } from "../support/server.js";
import { DATA, putDirectory, type RestClient, restClient, SERVER, STORES } from "./rest-client.js";

let server: TestServer;
let client: RestClient;

beforeEach(async () => {
  server = await startServer();
  client = restClient(server);
  await putDirectory(client, "docs/");
});

afterEach(async () => {
  await server.stop();
});

test.each([
  ["GET", "/resources/v2/nothing-here", 404],
  ["HEAD", "/resources/v2/nothing-here", 404],
  ["GET", "/resources/v3/data/home/", 404],
  ["GET", "/resources/v2/data", 400],
  ["POST", `${DATA}/home/a.txt`, 405],
  ["PATCH", STORES, 405],
  ["POST", `${STORES}/home`, 405],
  ["GET", `${DATA}/home/docs`, 303],
  ["GET", `${DATA}/home/missing.txt`, 404],
  ["HEAD", `${DATA}/home/missing.txt`, 404],
  ["GET", `${DATA}/home/?bad=1`, 400],
  ["HEAD", `${DATA}/home/?bad=1`, 400],
  ["DELETE", `${DATA}/home/`, 403],
])("Server: resources/1.0 on every response: %s %s -> %i", async (method, target, status) => {
  const reply = await client.fetch(method, target);
  expect(reply.status).toBe(status);
  expect(reply.headers.get("server")).toBe(SERVER);
});
