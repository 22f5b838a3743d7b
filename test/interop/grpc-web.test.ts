// The gRPC-Web face, over HTTP/1.1 and over h2c, with connect-node's gRPC-Web transport.

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcWebTransport } from "@connectrpc/connect-node";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../support/server.js";
import { md5Base64, payload } from "./payload.js";

describe.each(["1.1", "2"] as const)("gRPC-Web face over HTTP/%s", (httpVersion) => {
  let server: TestServer;
  let resources: ReturnType<typeof createClient<typeof ResourceService>>;
  const contents = payload(100 * 1024, 31);
  let tag = "";

  beforeAll(async () => {
    server = await startServer();
    resources = createClient(ResourceService, createGrpcWebTransport({ baseUrl: server.url, httpVersion }));
    const put = await fetch(`${server.url}/resources/v2/data/home/model.datamodel`, { method: "PUT", body: contents });
    expect(put.status).toBe(201);
    tag = (put.headers.get("etag") ?? "").slice(1, -1);
  });

  afterAll(async () => {
    await server?.stop();
  });

  it("Stat answers what REST stored, under the same tag", async () => {
    const { resource } = await resources.stat({ store: "home", path: "model.datamodel" });
    expect(resource).toMatchObject({
      store: "home",
      path: "model.datamodel",
      name: "model.datamodel",
      directory: false,
      tag,
      type: "application/vnd.trove.data-model+json",
      size: BigInt(contents.length),
      md5: md5Base64(contents),
    });
  });

  it("Read streams the same bytes", async () => {
    const parts: Uint8Array[] = [];
    for await (const m of resources.read({ store: "home", path: "model.datamodel" })) parts.push(m.chunk);
    expect(Buffer.concat(parts).equals(contents)).toBe(true);
  });

  it("Stat of a missing path answers NotFound", async () => {
    const err = await resources.stat({ store: "home", path: "missing.datamodel" }).then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    expect(err?.code).toBe(Code.NotFound);
    expect(err?.rawMessage).toBe("/missing.datamodel not found in store home");
  });
});
