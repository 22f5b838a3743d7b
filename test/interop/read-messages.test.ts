// Read's messages as the proto comment describes them: the first carries the resource and the
// first chunk, the following ones only chunks; the chunks of every message make the contents.

import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterAll, beforeAll, expect, it } from "vitest";
import { startServer, type TestServer } from "../support/server.js";

let t: TestServer;
beforeAll(async () => {
  t = await startServer();
});
afterAll(() => t?.stop());

async function put(path: string, body: Uint8Array): Promise<void> {
  const res = await fetch(`${t.url}/resources/v2/data/home/${path}`, { method: "PUT", body });
  expect(res.status).toBe(201);
}

it("Read: the resource and the first chunk in the first message, then chunks only", async () => {
  const large = new Uint8Array(3 * 1024 * 1024).map((_, i) => i % 251);
  await put("large.bin", large);
  await put("small.txt", new TextEncoder().encode("small"));
  const resources = createClient(ResourceService, createGrpcTransport({ baseUrl: t.url }));

  const messages = [];
  for await (const m of resources.read({ store: "home", path: "large.bin" })) messages.push(m);
  expect(messages.length).toBeGreaterThan(1);
  const [first, ...rest] = messages;
  expect(first?.resource?.path).toBe("large.bin");
  expect(first?.chunk.length).toBeGreaterThan(0);
  expect(rest.every((m) => m.resource === undefined && m.chunk.length > 0)).toBe(true);
  expect(Buffer.concat(messages.map((m) => m.chunk)).equals(Buffer.from(large))).toBe(true);

  const small = [];
  for await (const m of resources.read({ store: "home", path: "small.txt" })) small.push(m);
  expect(small.map((m) => [m.resource?.path, new TextDecoder().decode(m.chunk)])).toEqual([["small.txt", "small"]]);
});
