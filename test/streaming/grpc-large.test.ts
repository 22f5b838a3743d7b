// gRPC Read and Write of a 20 MiB resource as a client observes them (issue 14): the server's HTTP/2
// receive windows, Read's messages (their size, uncompressed even when the client accepts gzip) and
// the contents byte for byte, a gzip-compressed Write still accepted, and Write and Read through the
// SDK's gRPC client (its larger receive windows, test/sdk/http2-windows.test.ts) and through a stock
// gRPC client (@grpc/grpc-js, the .proto files loaded at run time); and Read over every RPC protocol
// giving the storage's read buffers back without a byte of any answer changing.

import { createHash } from "node:crypto";
import * as http2 from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { compressionGzip, createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import {
  ReadRequestSchema,
  ReadResponseSchema,
  ResourceService,
} from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTroveClient } from "../../sdk/src/index.js";
import { READ_MESSAGE_CHUNK } from "../../src/services/resource-service.js";
import { readBuffers } from "../../src/storage/local/blob-files.js";
import { stockServices } from "../support/grpc-js.js";
import { startServer, TEST_BACKEND, type TestServer } from "../support/server.js";

const MiB = 1024 * 1024;
const SIZE = 20 * MiB;
/** Read's chunks are at most READ_MESSAGE_CHUNK; a message adds the resource to the first. */
const LARGEST_MESSAGE = READ_MESSAGE_CHUNK + 4096;

/** SIZE bytes in 256 KiB pieces, each different; `md5` is complete once drained. */
function body(): { chunks: AsyncIterable<Uint8Array>; md5: () => string } {
  const hash = createHash("md5");
  async function* chunks() {
    for (let i = 0; i < SIZE / (256 * 1024); i++) {
      const chunk = Buffer.alloc(256 * 1024, i % 251);
      chunk.writeUInt32BE(i, 0);
      hash.update(chunk);
      yield chunk;
    }
  }
  return { chunks: chunks(), md5: () => hash.digest("base64") };
}

async function* writeRequests(path: string, chunks: AsyncIterable<Uint8Array>) {
  yield { part: { case: "header" as const, value: { store: "home", path, contentLength: BigInt(SIZE) } } };
  for await (const chunk of chunks) yield { part: { case: "chunk" as const, value: chunk } };
}

/** What @grpc/grpc-js makes of ResourceService's Write and Read (proto-loader: int64 as strings). */
interface StockResourceClient extends grpc.Client {
  Write(
    cb: (err: grpc.ServiceError | null, out?: { resource: { size: string; md5: string } }) => void,
  ): grpc.ClientWritableStream<{ header?: object; chunk?: Uint8Array }>;
  Read(req: { store: string; path: string }): grpc.ClientReadableStream<{ chunk: Buffer }>;
}

function stockClient(url: string): StockResourceClient {
  const v2 = stockServices();
  return new v2.ResourceService(
    url.replace(/^http:\/\//, ""),
    grpc.credentials.createInsecure(),
  ) as unknown as StockResourceClient;
}

/** Waits for a condition, checking every 20 ms, for up to 10 s. */
async function until(condition: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 10_000; !condition(); ) {
    if (Date.now() > deadline) throw new Error("condition not met within 10 s");
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("gRPC Read and Write of 20 MiB (issue 14)", () => {
  let t: TestServer;
  let md5 = "";
  beforeAll(async () => {
    t = await startServer();
    const sent = body();
    const resources = createClient(ResourceService, createGrpcTransport({ baseUrl: t.url }));
    const out = await resources.write(writeRequests("large.bin", sent.chunks));
    md5 = sent.md5();
    expect(out.resource?.md5).toBe(md5);
    expect(out.resource?.size).toBe(BigInt(SIZE));
  }, 120_000);
  afterAll(() => t?.stop());

  it("the server's HTTP/2 receive windows: 1 MiB per stream, 4 MiB per session (issue 14)", async () => {
    const session = http2.connect(t.url);
    try {
      await until(
        () =>
          session.remoteSettings.initialWindowSize !== undefined &&
          session.state.remoteWindowSize !== undefined &&
          session.state.remoteWindowSize > 65_535,
      );
      expect(session.remoteSettings.initialWindowSize).toBe(1024 * 1024);
      expect(session.state.remoteWindowSize).toBe(4 * 1024 * 1024);
    } finally {
      session.close();
    }
  });

  it("Read with grpc-accept-encoding gzip: uncompressed messages of at most 1 MiB of contents, the contents' bytes and MD5 (issue 14)", async () => {
    const session = http2.connect(t.url);
    try {
      const message = toBinary(ReadRequestSchema, create(ReadRequestSchema, { store: "home", path: "large.bin" }));
      const envelope = Buffer.alloc(5 + message.length);
      envelope.writeUInt32BE(message.length, 1);
      envelope.set(message, 5);
      const stream = session.request({
        ":method": "POST",
        ":path": "/trove.resources.v2.ResourceService/Read",
        "content-type": "application/grpc",
        te: "trailers",
        "grpc-accept-encoding": "gzip",
      });
      stream.end(envelope);
      const parts: Buffer[] = [];
      let trailers: http2.IncomingHttpHeaders = {};
      stream.on("trailers", (h) => {
        trailers = h;
      });
      for await (const part of stream) parts.push(part as Buffer);
      expect(trailers["grpc-status"]).toBe("0");

      const data = Buffer.concat(parts);
      const hash = createHash("md5");
      const flags = new Set<number>();
      let messages = 0;
      let largest = 0;
      let offset = 0;
      let contents = 0;
      while (offset < data.length) {
        const length = data.readUInt32BE(offset + 1);
        flags.add(data[offset] as number);
        largest = Math.max(largest, length);
        // A message is `Resource resource = 1` (first only) and `bytes chunk = 2`: decode the chunk.
        const m = fromBinary(ReadResponseSchema, data.subarray(offset + 5, offset + 5 + length));
        hash.update(m.chunk);
        contents += m.chunk.length;
        messages++;
        offset += 5 + length;
      }
      expect(offset).toBe(data.length);
      expect([...flags]).toEqual([0]);
      expect(largest).toBeLessThanOrEqual(LARGEST_MESSAGE);
      expect(messages).toBeGreaterThanOrEqual(SIZE / READ_MESSAGE_CHUNK);
      expect(contents).toBe(SIZE);
      expect(hash.digest("base64")).toBe(md5);
    } finally {
      session.close();
    }
  }, 120_000);

  it("Write with gzip-compressed messages is still accepted: size and MD5 of what was sent (issue 14)", async () => {
    const resources = createClient(
      ResourceService,
      createGrpcTransport({ baseUrl: t.url, sendCompression: compressionGzip, acceptCompression: [compressionGzip] }),
    );
    const sent = body();
    const out = await resources.write(writeRequests("gzipped.bin", sent.chunks));
    expect(out.resource?.size).toBe(BigInt(SIZE));
    expect(out.resource?.md5).toBe(sent.md5());

    const hash = createHash("md5");
    let size = 0;
    for await (const m of resources.read({ store: "home", path: "gzipped.bin" })) {
      size += m.chunk.length;
      hash.update(m.chunk);
    }
    expect(size).toBe(SIZE);
    expect(hash.digest("base64")).toBe(out.resource?.md5);
  }, 120_000);

  it("Write then Read of 20 MiB through the SDK's gRPC client: size, MD5 and bytes (issue 14)", async () => {
    const client = createTroveClient({ baseUrl: t.url, protocol: "grpc" });
    try {
      const sent = body();
      const out = await client.resources.write(writeRequests("sdk.bin", sent.chunks));
      const sentMd5 = sent.md5();
      expect(out.resource?.size).toBe(BigInt(SIZE));
      expect(out.resource?.md5).toBe(sentMd5);

      const hash = createHash("md5");
      let size = 0;
      let messages = 0;
      for await (const m of client.resources.read({ store: "home", path: "sdk.bin" })) {
        size += m.chunk.length;
        messages++;
        hash.update(m.chunk);
      }
      expect(size).toBe(SIZE);
      expect(messages).toBeGreaterThanOrEqual(SIZE / READ_MESSAGE_CHUNK);
      expect(hash.digest("base64")).toBe(sentMd5);
    } finally {
      client.close();
    }
  }, 120_000);

  it("Write then Read of 20 MiB through @grpc/grpc-js: size, MD5 and bytes (issue 14)", async () => {
    const client = stockClient(t.url);
    try {
      const sent = body();
      const out = await new Promise<{ resource: { size: string; md5: string } }>((resolve, reject) => {
        const call = client.Write((err, answer) => (err || !answer ? reject(err) : resolve(answer)));
        call.write({ header: { store: "home", path: "stock.bin", contentLength: String(SIZE) } });
        void (async () => {
          for await (const chunk of sent.chunks) {
            if (!call.write({ chunk })) await new Promise((r) => call.once("drain", r));
          }
          call.end();
        })();
      });
      const sentMd5 = sent.md5();
      expect(out.resource.size).toBe(String(SIZE));
      expect(out.resource.md5).toBe(sentMd5);

      const hash = createHash("md5");
      let size = 0;
      for await (const m of client.Read({ store: "home", path: "stock.bin" }) as AsyncIterable<{ chunk: Buffer }>) {
        size += m.chunk.length;
        hash.update(m.chunk);
      }
      expect(size).toBe(SIZE);
      expect(hash.digest("base64")).toBe(sentMd5);
    } finally {
      client.close();
    }
  }, 120_000);

  it("Read over gRPC, gRPC-Web and Connect (HTTP/2 and 1.1) gives the storage's read buffers back, every answer's bytes and MD5 intact (issue 14)", async () => {
    // The embedded store reads blobs into pooled buffers that it lends (src/storage/chunk-pool.ts);
    // MongoDB's GridFS and filesystem stores read otherwise.
    const pooled = TEST_BACKEND === "sqlite" && process.env.TROVE_TEST_STORE_TYPE !== "filesystem";
    const before = readBuffers.stats();
    const clients = [
      createTroveClient({ baseUrl: t.url, protocol: "grpc" }),
      createTroveClient({ baseUrl: t.url, protocol: "grpc-web" }),
      createTroveClient({ baseUrl: t.url, protocol: "connect" }),
      createTroveClient({ baseUrl: t.url, protocol: "connect", httpVersion: "1.1" }),
    ];
    try {
      // Two at a time on each client: one call's chunks never show in the other's answer.
      const reads = clients.flatMap((client) =>
        [0, 1].map(async () => {
          const hash = createHash("md5");
          let size = 0;
          for await (const m of client.resources.read({ store: "home", path: "large.bin" })) {
            size += m.chunk.length;
            hash.update(m.chunk);
          }
          return { protocol: client.protocol, size, md5: hash.digest("base64") };
        }),
      );
      for (const got of await Promise.all(reads)) expect(got).toEqual({ protocol: got.protocol, size: SIZE, md5 });
    } finally {
      for (const client of clients) client.close();
    }
    const after = readBuffers.stats();
    if (pooled) {
      const taken = after.allocated + after.reused - (before.allocated + before.reused);
      expect(taken).toBeGreaterThanOrEqual(8 * (SIZE / READ_MESSAGE_CHUNK));
      // Every chunk lent for these Reads came back, and most takes found a buffer given back before.
      expect(after.lent - before.lent).toBe(0);
      expect(after.reused - before.reused).toBeGreaterThan(taken / 2);
    }
  }, 120_000);
});
