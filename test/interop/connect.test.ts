// The Connect face over HTTP/1.1, with the generated client from @trove/sdk/gen: the
// same round trip as the gRPC test, and the tags it sees match the other faces.

import type { MessageInitShape } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  ResourceService,
  type WriteHeaderSchema,
  type WriteRequestSchema,
} from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { StoreService } from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DELETED_TAG_KEY } from "../../src/rpc/connect-errors.js";
import { startServer, type TestServer } from "../support/server.js";
import { chunksOf, md5Base64, payload } from "./payload.js";

type Client<S extends typeof ResourceService | typeof StoreService> = ReturnType<typeof createClient<S>>;

async function* writeMessages(
  header: MessageInitShape<typeof WriteHeaderSchema>,
  chunks: Buffer[],
): AsyncIterable<MessageInitShape<typeof WriteRequestSchema>> {
  yield { part: { case: "header" as const, value: header } };
  for (const chunk of chunks) yield { part: { case: "chunk" as const, value: chunk } };
}

async function rejection(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error("the call succeeded");
}

describe("Connect face over HTTP/1.1", () => {
  let server: TestServer;
  let resources: Client<typeof ResourceService>;
  let stores: Client<typeof StoreService>;

  beforeAll(async () => {
    server = await startServer();
    const transport = createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" });
    resources = createClient(ResourceService, transport);
    stores = createClient(StoreService, transport);
  });

  afterAll(async () => {
    await server?.stop();
  });

  it("ListStores answers the home store with the root tag the REST face shows", async () => {
    const { stores: list } = await stores.listStores({});
    expect(list.map((s) => [s.name, s.type, s.deleted])).toEqual([["home", "recursive", false]]);
    const rest = await fetch(`${server.url}/resources/v2/data/home/`, { method: "HEAD" });
    expect(rest.headers.get("etag")).toBe(`"${list[0]?.tag}"`);
  });

  it("Write, Stat, Read, List and Delete round-trip a streamed resource", async () => {
    const contents = payload(150 * 1024 + 3, 23);
    const md5 = md5Base64(contents);

    const dir = await resources.makeDirectory({ store: "home", path: "blocks" });
    expect(dir.created).toBe(true);

    const written = await resources.write(
      writeMessages(
        { store: "home", path: "blocks/intro.block", contentMd5: md5, contentLength: BigInt(contents.length) },
        chunksOf(contents, 20_000),
      ),
    );
    expect(written.created).toBe(true);
    const resource = written.resource;
    expect(resource).toMatchObject({
      store: "home",
      path: "blocks/intro.block",
      name: "intro.block",
      directory: false,
      deleted: false,
      type: "application/vnd.trove.content-block+json",
      size: BigInt(contents.length),
      md5,
    });

    const { resource: stat } = await resources.stat({ store: "home", path: "blocks/intro.block" });
    expect(stat).toEqual(resource);

    const parts: Uint8Array[] = [];
    let first = true;
    for await (const message of resources.read({ store: "home", path: "blocks/intro.block" })) {
      if (first) expect(message.resource).toEqual(resource);
      else expect(message.resource).toBeUndefined();
      first = false;
      parts.push(message.chunk);
    }
    expect(Buffer.concat(parts).equals(contents)).toBe(true);

    const notModified = [];
    for await (const m of resources.read({
      store: "home",
      path: "blocks/intro.block",
      ifNoneMatch: [resource?.tag ?? ""],
    }))
      notModified.push(m);
    expect(notModified.map((m) => [m.notModified, m.chunk.length])).toEqual([[true, 0]]);

    const listed = [];
    for await (const m of resources.list({ store: "home", path: "blocks" })) listed.push(m);
    expect(listed[0]?.directory).toMatchObject({ path: "blocks", directory: true });
    expect(listed.flatMap((m) => m.entries)).toEqual([resource]);

    const rest = await fetch(`${server.url}/resources/v2/data/home/blocks/intro.block`);
    expect(rest.headers.get("etag")).toBe(`"${resource?.tag}"`);
    expect(rest.headers.get("content-md5")).toBe(md5);
    expect(Buffer.from(await rest.arrayBuffer()).equals(contents)).toBe(true);

    const deleted = await resources.delete({ store: "home", path: "blocks", ifMatch: [] });
    expect(deleted.deletedCount).toBe(2n);
    expect(deleted.resource).toMatchObject({ path: "blocks", directory: true, deleted: true });

    const gone = await rejection(resources.stat({ store: "home", path: "blocks/intro.block" }));
    expect(gone.code).toBe(Code.NotFound);
    expect(gone.metadata.get(DELETED_TAG_KEY)).not.toBeNull();
  });

  it("Stat of a missing path answers NotFound with the service's message", async () => {
    const err = await rejection(resources.stat({ store: "home", path: "no/such/thing.txt" }));
    expect(err.code).toBe(Code.NotFound);
    expect(err.rawMessage).toBe("/no/such/thing.txt not found in store home");
    expect(err.metadata.get(DELETED_TAG_KEY)).toBeNull();
  });

  it("a resource written over REST is read back byte for byte with the same tag", async () => {
    const contents = payload(4096, 5);
    const put = await fetch(`${server.url}/resources/v2/data/home/small.theme`, {
      method: "PUT",
      body: contents,
      headers: { "Content-Type": "application/vnd.trove.theme+json" },
    });
    expect(put.status).toBe(201);
    const tag = put.headers.get("etag");
    const parts: Uint8Array[] = [];
    let seenTag: string | undefined;
    for await (const m of resources.read({ store: "home", path: "small.theme" })) {
      seenTag ??= m.resource?.tag;
      parts.push(m.chunk);
    }
    expect(`"${seenTag}"`).toBe(tag);
    expect(Buffer.concat(parts).equals(contents)).toBe(true);
  });
});
