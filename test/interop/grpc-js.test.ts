// The gRPC face as a stock gRPC client sees it: @grpc/grpc-js with the .proto
// files loaded at run time by @grpc/proto-loader (no generated code), over h2c
// on the same port as REST.

import * as grpc from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { stockServices } from "../support/grpc-js.js";
import { startServer, type TestServer } from "../support/server.js";
import { chunksOf, md5Base64, payload } from "./payload.js";

/** A Resource as proto-loader decodes it: camelCase fields, int64 as decimal strings. */
interface WireResource {
  store: string;
  path: string;
  name: string;
  directory: boolean;
  deleted: boolean;
  tag: string;
  type: string;
  size: string;
  md5: string;
  blob: string;
  createdMillis: string;
  lastModifiedMillis: string;
  eventId: string;
  access: string[];
}

interface WireStore {
  name: string;
  type: string;
  tag: string;
  deleted: boolean;
  features: string[];
  settings: { name: string; value: string }[];
  lastEventId: string;
}

interface WireWriteRequest {
  header?: {
    store: string;
    path: string;
    ifMatch?: string[];
    contentType?: string;
    contentMd5?: string;
    contentLength?: number | string;
  };
  chunk?: Buffer;
}

type Callback<T> = (err: grpc.ServiceError | null, value?: T) => void;

interface ResourceClient extends grpc.Client {
  Stat(req: { store: string; path: string }, cb: Callback<{ resource: WireResource }>): grpc.ClientUnaryCall;
  Read(req: { store: string; path: string; ifNoneMatch?: string[] }): grpc.ClientReadableStream<{
    resource: WireResource | null;
    notModified: boolean;
    chunk: Buffer;
  }>;
  Write(cb: Callback<{ resource: WireResource; created: boolean }>): grpc.ClientWritableStream<WireWriteRequest>;
  MakeDirectory(
    req: { store: string; path: string },
    cb: Callback<{ resource: WireResource; created: boolean }>,
  ): grpc.ClientUnaryCall;
  Delete(
    req: { store: string; path: string; ifMatch?: string[] },
    cb: Callback<{ resource: WireResource; deletedCount: string }>,
  ): grpc.ClientUnaryCall;
  List(req: { store: string; path: string; recursive?: boolean }): grpc.ClientReadableStream<{
    directory: WireResource | null;
    notModified: boolean;
    entries: WireResource[];
  }>;
}

interface StoreClient extends grpc.Client {
  ListStores(req: Record<string, never>, cb: Callback<{ stores: WireStore[] }>): grpc.ClientUnaryCall;
}

const v2 = stockServices();

function unary<T>(call: (cb: Callback<T>) => unknown): Promise<T> {
  return new Promise((resolve, reject) => {
    call((err, value) => (err ? reject(err) : resolve(value as T)));
  });
}

function failure(promise: Promise<unknown>): Promise<grpc.ServiceError> {
  return promise.then(
    () => {
      throw new Error("the call succeeded");
    },
    (err: grpc.ServiceError) => err,
  );
}

async function collect<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const message of stream) out.push(message);
  return out;
}

/** Writes contents with a client stream: the header first, then the chunks. */
function writeResource(
  client: ResourceClient,
  header: NonNullable<WireWriteRequest["header"]>,
  chunks: Buffer[],
): Promise<{ resource: WireResource; created: boolean }> {
  return unary((cb) => {
    const call = client.Write(cb);
    call.write({ header });
    for (const chunk of chunks) call.write({ chunk });
    call.end();
  });
}

describe("gRPC face with @grpc/grpc-js over h2c", () => {
  let server: TestServer;
  let resources: ResourceClient;
  let stores: StoreClient;

  beforeAll(async () => {
    server = await startServer();
    const address = `127.0.0.1:${server.port}`;
    resources = new v2.ResourceService(address, grpc.credentials.createInsecure()) as unknown as ResourceClient;
    stores = new v2.StoreService(address, grpc.credentials.createInsecure()) as unknown as StoreClient;
  });

  afterAll(async () => {
    resources?.close();
    stores?.close();
    await server?.stop();
  });

  it("ListStores answers the home store of a fresh data directory", async () => {
    const { stores: list } = await unary<{ stores: WireStore[] }>((cb) => stores.ListStores({}, cb));
    expect(list.map((s) => [s.name, s.type, s.deleted])).toEqual([["home", "recursive", false]]);
    const rest = await fetch(`${server.url}/resources/v2/data/home/`, { method: "HEAD" });
    expect(rest.status).toBe(200);
    expect(rest.headers.get("etag")).toBe(`"${list[0]?.tag}"`);
  });

  it("Write streams a header then chunks; Stat, Read, List and REST agree on what was stored", async () => {
    const contents = payload(200 * 1024 + 7, 11);
    const md5 = md5Base64(contents);

    const dir = await unary<{ resource: WireResource; created: boolean }>((cb) =>
      resources.MakeDirectory({ store: "home", path: "templates" }, cb),
    );
    expect(dir.created).toBe(true);
    expect(dir.resource.directory).toBe(true);

    const written = await writeResource(
      resources,
      { store: "home", path: "templates/letter.template", contentMd5: md5, contentLength: contents.length },
      chunksOf(contents, 16 * 1024),
    );
    expect(written.created).toBe(true);
    expect(written.resource).toMatchObject({
      store: "home",
      path: "templates/letter.template",
      name: "letter.template",
      directory: false,
      deleted: false,
      type: "application/vnd.trove.template+json",
      size: String(contents.length),
      md5,
    });
    expect(written.resource.tag).toMatch(/^[A-Za-z0-9_-]+$/);

    const { resource: stat } = await unary<{ resource: WireResource }>((cb) =>
      resources.Stat({ store: "home", path: "templates/letter.template" }, cb),
    );
    expect(stat).toEqual(written.resource);

    const messages = await collect(resources.Read({ store: "home", path: "templates/letter.template" }));
    expect(messages[0]?.resource).toEqual(written.resource);
    expect(messages.slice(1).every((m) => m.resource === null)).toBe(true);
    const read = Buffer.concat(messages.map((m) => m.chunk));
    expect(read.length).toBe(contents.length);
    expect(read.equals(contents)).toBe(true);

    const notModified = await collect(
      resources.Read({ store: "home", path: "templates/letter.template", ifNoneMatch: [stat.tag] }),
    );
    expect(notModified).toHaveLength(1);
    expect(notModified[0]?.notModified).toBe(true);
    expect(notModified[0]?.chunk.length).toBe(0);

    const listing = await collect(resources.List({ store: "home", path: "templates" }));
    expect(listing[0]?.directory?.path).toBe("templates");
    expect(listing.flatMap((m) => m.entries)).toEqual([written.resource]);

    // The REST face serves the same bytes under the same tag.
    const rest = await fetch(`${server.url}/resources/v2/data/home/templates/letter.template`);
    expect(rest.status).toBe(200);
    expect(rest.headers.get("etag")).toBe(`"${written.resource.tag}"`);
    expect(rest.headers.get("content-md5")).toBe(md5);
    expect(Buffer.from(await rest.arrayBuffer()).equals(contents)).toBe(true);
  });

  it("Write of a small resource replaces it under If-Match and answers created false", async () => {
    const first = await writeResource(resources, { store: "home", path: "note.txt" }, [Buffer.from("one\n")]);
    expect(first.created).toBe(true);
    expect(first.resource.type).toBe("text/plain");
    const second = await writeResource(resources, { store: "home", path: "note.txt", ifMatch: [first.resource.tag] }, [
      Buffer.from("two"),
      Buffer.from("\n"),
    ]);
    expect(second.created).toBe(false);
    expect(second.resource.tag).not.toBe(first.resource.tag);
    expect(second.resource.md5).toBe(md5Base64(Buffer.from("two\n")));
    const read = await collect(resources.Read({ store: "home", path: "note.txt" }));
    expect(Buffer.concat(read.map((m) => m.chunk)).toString()).toBe("two\n");
  });

  it("Delete answers the tombstone; Stat of it is NOT_FOUND with the deleted tag", async () => {
    const written = await writeResource(resources, { store: "home", path: "gone.txt" }, [Buffer.from("bye")]);
    const deleted = await unary<{ resource: WireResource; deletedCount: string }>((cb) =>
      resources.Delete({ store: "home", path: "gone.txt", ifMatch: [written.resource.tag] }, cb),
    );
    expect(deleted.deletedCount).toBe("1");
    expect(deleted.resource).toMatchObject({ path: "gone.txt", deleted: true });

    const err = await failure(unary((cb) => resources.Stat({ store: "home", path: "gone.txt" }, cb)));
    expect(err.code).toBe(grpc.status.NOT_FOUND);
    expect(err.metadata.get("trove-deleted-tag")).toEqual([deleted.resource.tag]);
  });

  // The proto says if_none_match / if_match take quoted, unquoted or "*" tags, but the service
  // compares them unparsed: a quoted tag never matches. Expected to fail until that is fixed.
  it("Read and Write accept quoted entity tags, as resources.proto documents", async () => {
    const written = await writeResource(resources, { store: "home", path: "quoted.txt" }, [Buffer.from("q")]);
    const read = await collect(
      resources.Read({ store: "home", path: "quoted.txt", ifNoneMatch: [`"${written.resource.tag}"`] }),
    );
    expect(read[0]?.notModified).toBe(true);
    const replaced = await writeResource(
      resources,
      { store: "home", path: "quoted.txt", ifMatch: [`"${written.resource.tag}"`] },
      [Buffer.from("r")],
    );
    expect(replaced.created).toBe(false);
  });

  it("Stat of a missing path answers NOT_FOUND (5)", async () => {
    const err = await failure(unary((cb) => resources.Stat({ store: "home", path: "no/such/thing.txt" }, cb)));
    expect(err.code).toBe(5);
    expect(err.code).toBe(grpc.status.NOT_FOUND);
    // connect-node percent-encodes grpc-message with encodeURIComponent and grpc-js decodes it
    // with decodeURI, which leaves reserved characters such as "/" encoded: this is what a
    // grpc-js caller reads.
    expect(err.details).toBe("%2Fno%2Fsuch%2Fthing.txt not found in store home");
    expect(decodeURIComponent(err.details)).toBe("/no/such/thing.txt not found in store home");
  });

  it("errors carry their codes: bad path, stale If-Match, missing store, wrong MD5", async () => {
    const bad = await failure(unary((cb) => resources.Stat({ store: "home", path: "../etc" }, cb)));
    expect(bad.code).toBe(grpc.status.INVALID_ARGUMENT);

    const stale = await failure(
      writeResource(resources, { store: "home", path: "note2.txt", ifMatch: ["nope"] }, [Buffer.from("x")]),
    );
    expect(stale.code).toBe(grpc.status.FAILED_PRECONDITION);

    const noStore = await failure(unary((cb) => resources.Stat({ store: "nostore", path: "a.txt" }, cb)));
    expect(noStore.code).toBe(grpc.status.NOT_FOUND);

    const wrongMd5 = await failure(
      writeResource(resources, { store: "home", path: "md5.txt", contentMd5: md5Base64(Buffer.from("other")) }, [
        Buffer.from("this"),
      ]),
    );
    expect(wrongMd5.code).toBe(grpc.status.INVALID_ARGUMENT);
    const after = await failure(unary((cb) => resources.Stat({ store: "home", path: "md5.txt" }, cb)));
    expect(after.code).toBe(grpc.status.NOT_FOUND);

    const missingRead = await failure(collect(resources.Read({ store: "home", path: "absent.bin" })));
    expect(missingRead.code).toBe(grpc.status.NOT_FOUND);
  });
});
