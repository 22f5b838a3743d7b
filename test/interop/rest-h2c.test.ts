// REST over h2c: a plain node:http2 client on the port that also serves gRPC,
// and the gRPC face sees what it wrote.

import * as http2 from "node:http2";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { h2Request } from "../security/rpc-client.js";
import { startServer, type TestServer } from "../support/server.js";
import { md5Base64, payload } from "./payload.js";

describe("REST over h2c", () => {
  let server: TestServer;
  let session: http2.ClientHttp2Session;

  beforeAll(async () => {
    server = await startServer();
    session = http2.connect(server.url);
    await new Promise<void>((resolve, reject) => {
      session.once("connect", () => resolve());
      session.once("error", reject);
    });
  });

  afterAll(async () => {
    session?.close();
    await server?.stop();
  });

  it("PUT creates a resource and GET answers the same bytes, tag and MD5", async () => {
    const contents = payload(90 * 1024 + 1, 41);
    const md5 = md5Base64(contents);
    const path = "/resources/v2/data/home/letter.template";

    const put = await h2Request(
      session,
      "PUT",
      path,
      { "content-type": "application/vnd.trove.template+json", "content-md5": md5 },
      contents,
    );
    expect(put.status).toBe(201);
    expect(put.headers.server).toBe("resources/1.0");
    expect(put.headers["content-md5"]).toBe(md5);
    expect(put.headers.location).toBe(path);
    const etag = put.headers.etag;
    expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    expect(put.body.length).toBe(0);

    const get = await h2Request(session, "GET", path, {});
    expect(get.status).toBe(200);
    expect(get.headers.etag).toBe(etag);
    expect(get.headers["content-md5"]).toBe(md5);
    expect(get.headers["content-type"]).toBe("application/vnd.trove.template+json");
    expect(get.headers["content-length"]).toBe(String(contents.length));
    expect(get.body.equals(contents)).toBe(true);

    const notModified = await h2Request(session, "GET", path, { "if-none-match": String(etag) });
    expect(notModified.status).toBe(304);
    expect(notModified.headers.etag).toBe(etag);
    expect(notModified.body.length).toBe(0);

    // The gRPC face, over h2c on the same port, sees the same resource.
    const grpc = createClient(ResourceService, createGrpcTransport({ baseUrl: server.url }));
    const { resource } = await grpc.stat({ store: "home", path: "letter.template" });
    expect(`"${resource?.tag}"`).toBe(etag);
    expect(resource?.md5).toBe(md5);
    expect(resource?.size).toBe(BigInt(contents.length));
  });

  it("PUT with If-Match replaces the resource, a stale one answers 412 text/plain", async () => {
    const path = "/resources/v2/data/home/note.txt";
    const first = await h2Request(session, "PUT", path, {}, Buffer.from("one\n"));
    expect(first.status).toBe(201);
    const second = await h2Request(
      session,
      "PUT",
      path,
      { "if-match": String(first.headers.etag) },
      Buffer.from("two\n"),
    );
    expect(second.status).toBe(200);
    expect(second.headers.etag).not.toBe(first.headers.etag);
    const stale = await h2Request(
      session,
      "PUT",
      path,
      { "if-match": String(first.headers.etag) },
      Buffer.from("three\n"),
    );
    expect(stale.status).toBe(412);
    expect(stale.headers["content-type"]).toBe("text/plain; charset=utf-8");
    const get = await h2Request(session, "GET", path, {});
    expect(get.body.toString()).toBe("two\n");
    expect(get.headers.etag).toBe(second.headers.etag);
  });

  it("GET of a missing resource answers 404 text/plain", async () => {
    const get = await h2Request(session, "GET", "/resources/v2/data/home/none.txt", {});
    expect(get.status).toBe(404);
    expect(get.headers.server).toBe("resources/1.0");
    expect(get.body.toString()).toBe("/none.txt not found in store home\n");
  });
});
