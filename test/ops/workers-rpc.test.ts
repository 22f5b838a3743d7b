// `trove serve --workers 2` (issue 14, multi-core serving; docs/operations.md, "Several cores") over
// HTTP/2: gRPC (stock @grpc/grpc-js and the SDK), the Connect protocol (the SDK) and REST over h2c
// (node:http2, prior knowledge). A worker holds a whole HTTP/2 session, so each test holds one
// session per worker and checks, through /proc (test/support/workers.ts), which worker holds
// which: "written on one worker, seen on the other" is a checked fact, not a hope about round robin.

import { createHash, randomBytes } from "node:crypto";
import { once } from "node:events";
import * as http2 from "node:http2";
import * as grpc from "@grpc/grpc-js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createTroveClient, Operation, type TroveClient } from "../../sdk/src/index.js";
import { h2Request, type RawAnswer } from "../security/rpc-client.js";
import type { ChildServer } from "../support/child-server.js";
import { stockServices } from "../support/grpc-js.js";
import {
  auth,
  changesOf,
  cleanUp,
  createStore,
  expectStillHeld,
  lastEventId,
  newConnection,
  onePerWorker,
  parked,
  type Session,
  servers,
  sessionPerWorker,
  startWorkers,
  workers,
} from "../support/workers.js";

/** A Resource as proto-loader decodes it: camelCase fields, int64 as decimal strings. */
interface WireResource {
  store: string;
  path: string;
  tag: string;
  type: string;
  size: string;
  md5: string;
  eventId: string;
}

interface WireWriteRequest {
  header?: { store: string; path: string; contentType?: string; contentLength?: string };
  chunk?: Buffer;
}

type Callback<T> = (err: grpc.ServiceError | null, value?: T) => void;

/** ResourceService as @grpc/grpc-js makes it from proto/ (no generated code). */
interface StockResources extends grpc.Client {
  Stat(req: { store: string; path: string }, md: grpc.Metadata, cb: Callback<{ resource: WireResource }>): unknown;
  Read(
    req: { store: string; path: string; ifNoneMatch?: string[] },
    md: grpc.Metadata,
  ): grpc.ClientReadableStream<{ resource: WireResource | null; notModified: boolean; chunk: Buffer }>;
  Write(
    md: grpc.Metadata,
    cb: Callback<{ resource: WireResource; created: boolean }>,
  ): grpc.ClientWritableStream<WireWriteRequest>;
}

const v2 = stockServices();
const CHUNK = 64 * 1024;

function md5Of(bytes: Uint8Array): string {
  return createHash("md5").update(bytes).digest("base64");
}

function metadata(s: ChildServer): grpc.Metadata {
  const md = new grpc.Metadata();
  md.set("authorization", s.authorization);
  return md;
}

function stockStat(client: StockResources, s: ChildServer, store: string, path: string): Promise<WireResource> {
  return new Promise((resolve, reject) => {
    client.Stat({ store, path }, metadata(s), (err, out) => (err || !out ? reject(err) : resolve(out.resource)));
  });
}

/** A client stream: the header, then the contents in chunks, as fast as the stream takes them. */
function stockWrite(
  client: StockResources,
  s: ChildServer,
  store: string,
  path: string,
  contents: Buffer,
): Promise<{ resource: WireResource; created: boolean }> {
  return new Promise((resolve, reject) => {
    const call = client.Write(metadata(s), (err, out) => (err || !out ? reject(err) : resolve(out)));
    call.write({ header: { store, path, contentLength: String(contents.length) } });
    void (async () => {
      for (let at = 0; at < contents.length; at += CHUNK) {
        if (!call.write({ chunk: contents.subarray(at, at + CHUNK) })) await once(call, "drain");
      }
      call.end();
    })();
  });
}

/** A Read: the first message's resource and the contents of every message, concatenated. */
async function stockRead(
  client: StockResources,
  s: ChildServer,
  store: string,
  path: string,
): Promise<{ resource: WireResource | null; contents: Buffer }> {
  let resource: WireResource | null = null;
  const parts: Buffer[] = [];
  for await (const m of client.Read({ store, path }, metadata(s))) {
    if (parts.length === 0) resource = m.resource;
    parts.push(m.chunk);
  }
  return { resource, contents: Buffer.concat(parts) };
}

/** A stock gRPC client with a connection of its own (no subchannel shared with other clients). */
async function stockSession(s: ChildServer): Promise<Session<StockResources>> {
  const client = new v2.ResourceService(`127.0.0.1:${s.port}`, grpc.credentials.createInsecure(), {
    "grpc.use_local_subchannel_pool": 1,
  }) as unknown as StockResources;
  const localPort = await newConnection(s.port, async () => {
    expect((await stockStat(client, s, "home", "")).path).toBe("");
  }).catch((err: Error) => {
    client.close();
    throw err;
  });
  return { client, localPort, close: () => client.close() };
}

/** An SDK client (its own HTTP/2 session) speaking `protocol`. */
async function sdkSession(s: ChildServer, protocol: "connect" | "grpc"): Promise<Session<TroveClient>> {
  const client = createTroveClient({ baseUrl: s.url, auth: s.authorization.replace(/^Bearer /, ""), protocol });
  const localPort = await newConnection(s.port, async () => {
    expect((await client.resources.stat({ store: "home", path: "" })).resource?.directory).toBe(true);
  }).catch((err: Error) => {
    client.close();
    throw err;
  });
  return { client, localPort, close: () => client.close() };
}

async function* sdkWriteRequests(store: string, path: string, contents: Buffer) {
  yield { part: { case: "header" as const, value: { store, path, contentLength: BigInt(contents.length) } } };
  for (let at = 0; at < contents.length; at += CHUNK) {
    yield { part: { case: "chunk" as const, value: contents.subarray(at, at + CHUNK) } };
  }
}

/** A node:http2 session over h2c (prior knowledge), used once. */
async function h2Session(s: ChildServer): Promise<Session<http2.ClientHttp2Session>> {
  const session = http2.connect(s.url);
  session.on("error", () => {});
  const health = await h2Request(session, "GET", "/healthz", {});
  expect(health.status).toBe(200);
  return { client: session, localPort: session.socket.localPort as number, close: () => session.destroy() };
}

/** The ETag header, checked to be there. */
function etagOf(a: RawAnswer): string {
  const etag = a.headers.etag;
  if (typeof etag !== "string") throw new Error(`no ETag in the answer (${a.status}): ${a.body}`);
  return etag;
}

/**
 * How long a poll or a watch may wait for a change: far longer than the test's bound on its answer
 * (BOUND), so an answer within the bound is a wake, not the re-read a wait's end makes.
 */
const POLL_WAIT = 600;
/** A generous bound on what takes milliseconds when it works, so a failure says what it missed. */
const BOUND = 30_000;

/** `promise`, or an error naming `what` when it has not settled within BOUND. */
async function within<T>(what: string, promise: Promise<T>, seen: () => unknown = () => ""): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new Error(`${what}: nothing within ${BOUND / 1000} s (${JSON.stringify(seen())})`)),
      BOUND,
    );
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

let s: ChildServer;
let pids: number[];

beforeAll(async () => {
  ({ s, pids } = await startWorkers({ args: ["--poll-wait", String(POLL_WAIT)] }));
  // One server for the file: each test's sessions are closed after it, the server after all.
  servers.splice(servers.indexOf(s), 1);
  for (const pid of pids) workers.delete(pid);
}, 60_000);
afterAll(async () => {
  if (s) servers.push(s);
  for (const pid of pids ?? []) workers.add(pid);
  await cleanUp();
});
afterEach(cleanUp);

describe("trove serve --workers 2 over HTTP/2 (issue 14, multi-core serving)", () => {
  it("gRPC (stock @grpc/grpc-js over h2c): a Write of 300 KiB and of 5 MiB on one worker's session is read on the other worker's session with the same bytes, MD5 and tag, and Stat there sees it (issue 14, multi-core serving)", async () => {
    const held = await sessionPerWorker(s, pids, "stock gRPC", () => stockSession(s));
    for (const [writer, reader] of [
      [held[0], held[1]],
      [held[1], held[0]],
    ] as const) {
      for (const size of [300 * 1024 + 7, 5 * 1024 * 1024]) {
        const contents = randomBytes(size);
        const md5 = md5Of(contents);
        const path = `grpc-${size}-by-${writer?.pid}.bin`;
        const written = await stockWrite(writer?.client as StockResources, s, "home", path, contents);
        expect(written.created).toBe(true);
        expect(written.resource).toMatchObject({ store: "home", path, size: String(size), md5 });

        const read = await stockRead(reader?.client as StockResources, s, "home", path);
        expect(read.resource).toMatchObject({
          path,
          tag: written.resource.tag,
          md5,
          size: String(size),
          eventId: written.resource.eventId,
        });
        expect(read.contents.length).toBe(size);
        expect(md5Of(read.contents)).toBe(md5);
        expect(read.contents.equals(contents)).toBe(true);

        const stat = await stockStat(reader?.client as StockResources, s, "home", path);
        expect(stat).toMatchObject({ path, tag: written.resource.tag, md5, size: String(size) });
      }
    }
    // Every call went over the sessions found at the start: still open, still on their workers.
    for (const h of held) await expectStillHeld(s, h);
  }, 120_000);

  it("gRPC WatchChanges on one worker's session receives, in order and with their ids, a gRPC Write on the other worker's session and a REST PUT (HTTP/1.1) answered by the other worker (issue 14, multi-core serving)", async () => {
    const watchers = await sessionPerWorker(s, pids, "SDK gRPC", () => sdkSession(s, "grpc"));
    const writers = await sessionPerWorker(s, pids, "stock gRPC", () => stockSession(s));
    const rest = await onePerWorker(s, pids);
    for (const [watchOn, writeOn] of [
      [0, 1],
      [1, 0],
    ] as const) {
      const watcher = watchers[watchOn]?.client as TroveClient;
      const writer = writers[writeOn]?.client as StockResources;
      const restOn = rest[writeOn];
      const store = `watched-${watchOn}`;
      await createStore(s, store);
      const cursor = await lastEventId(s, store);

      const abort = new AbortController();
      const messages: Array<{ heartbeat: boolean; events: number }> = [];
      const changes: Array<Record<string, unknown>> = [];
      // No heartbeat within the test (a message before the events would be one), and no re-read:
      // only a wake brings the events.
      const watching = (async () => {
        const stream = watcher.changes.watchChanges(
          { cursors: [{ store, eventId: BigInt(cursor) }], heartbeatMillis: POLL_WAIT * 1000 },
          { signal: abort.signal },
        );
        for await (const m of stream) {
          messages.push({ heartbeat: m.heartbeat, events: m.events.length });
          for (const e of m.events) {
            if (e.kind.case !== "change") throw new Error(`not a change: ${e.kind.case}`);
            const c = e.kind.value;
            changes.push({
              store: c.store,
              eventId: c.eventId,
              path: c.path,
              uri: c.uri,
              operation: c.operation,
              previousTag: c.previousTag,
              tag: c.tag,
            });
          }
          if (changes.length >= 2) break;
        }
      })();
      // The watch is armed in its worker (a change waiter) before anything is written.
      await parked(s, 1);

      const written = await stockWrite(writer, s, store, "by-grpc.txt", Buffer.from("written over gRPC"));
      expect(written.resource.eventId).toBe(String(cursor + 1));
      const put = await restOn?.request(`/resources/v2/data/${store}/by-rest.txt`, {
        method: "PUT",
        headers: auth(s, { "content-type": "text/plain" }),
        body: "written over REST",
      });
      expect(put?.status).toBe(201);
      expect(restOn?.pid).toBe(pids[writeOn]);

      await within(
        `the watch on worker ${pids[watchOn]} woken for the writes on worker ${pids[writeOn]}`,
        watching,
        () => ({
          changes,
        }),
      );
      abort.abort();
      // The stream is gone from its worker before the next round counts armed watches.
      await parked(s, 0);
      expect(messages.every((m) => !m.heartbeat && m.events > 0)).toBe(true);
      expect(changes).toEqual([
        {
          store,
          eventId: BigInt(cursor + 1),
          path: "by-grpc.txt",
          uri: `idr://${store}/by-grpc.txt`,
          operation: Operation.MODIFY,
          previousTag: "",
          tag: written.resource.tag,
        },
        {
          store,
          eventId: BigInt(cursor + 2),
          path: "by-rest.txt",
          uri: `idr://${store}/by-rest.txt`,
          operation: Operation.MODIFY,
          previousTag: "",
          tag: String(put?.headers.etag).replaceAll('"', ""),
        },
      ]);
    }
    for (const h of [...watchers, ...writers]) await expectStillHeld(s, h);
  }, 120_000);

  it("Connect over HTTP/2 and REST over h2c: a write on one worker, then on the other a read with the written ETag answers not modified (304), and a read without it the same bytes (issue 14, multi-core serving)", async () => {
    const connect = await sessionPerWorker(s, pids, "SDK Connect (HTTP/2)", () => sdkSession(s, "connect"));
    const h2 = await sessionPerWorker(s, pids, "h2c", () => h2Session(s));
    for (const [a, b] of [
      [0, 1],
      [1, 0],
    ] as const) {
      const onA = { connect: connect[a]?.client as TroveClient, h2: h2[a]?.client as http2.ClientHttp2Session };
      const onB = { connect: connect[b]?.client as TroveClient, h2: h2[b]?.client as http2.ClientHttp2Session };

      // Connect: Write on A; on B, Read with its tag is not modified, Read without it the bytes.
      const contents = randomBytes(200 * 1024 + 3);
      const md5 = md5Of(contents);
      const path = `connect-by-${pids[a]}.bin`;
      const written = await onA.connect.resources.write(sdkWriteRequests("home", path, contents));
      expect({ created: written.created, md5: written.resource?.md5 }).toEqual({ created: true, md5 });
      const tag = written.resource?.tag as string;
      const notModified = [];
      for await (const m of onB.connect.resources.read({ store: "home", path, ifNoneMatch: [tag] })) {
        notModified.push({ notModified: m.notModified, tag: m.resource?.tag, chunk: m.chunk.length });
      }
      expect(notModified).toEqual([{ notModified: true, tag, chunk: 0 }]);
      const parts: Uint8Array[] = [];
      let readTag: string | undefined;
      for await (const m of onB.connect.resources.read({ store: "home", path })) {
        if (parts.length === 0) readTag = m.resource?.tag;
        parts.push(m.chunk);
      }
      expect(readTag).toBe(tag);
      expect(Buffer.concat(parts).equals(contents)).toBe(true);
      // REST over h2c on B: the Connect write's ETag answers 304.
      const cached = await h2Request(onB.h2, "GET", `/resources/v2/data/home/${path}`, {
        authorization: s.authorization,
        "if-none-match": `"${tag}"`,
      });
      expect({ status: cached.status, etag: cached.headers.etag, body: cached.body.length }).toEqual({
        status: 304,
        etag: `"${tag}"`,
        body: 0,
      });

      // REST over h2c: PUT on A; on B, GET answers the bytes, GET with the ETag 304.
      const restPath = `/resources/v2/data/home/h2c-by-${pids[a]}.bin`;
      const body = randomBytes(100 * 1024 + 11);
      const put = await h2Request(
        onA.h2,
        "PUT",
        restPath,
        { authorization: s.authorization, "content-type": "application/octet-stream" },
        body,
      );
      expect(put.status).toBe(201);
      const etag = etagOf(put);
      const got = await h2Request(onB.h2, "GET", restPath, { authorization: s.authorization });
      expect({ status: got.status, etag: got.headers.etag, md5: got.headers["content-md5"] }).toEqual({
        status: 200,
        etag,
        md5: md5Of(body),
      });
      expect(got.body.equals(body)).toBe(true);
      const again = await h2Request(onB.h2, "GET", restPath, { authorization: s.authorization, "if-none-match": etag });
      expect({ status: again.status, etag: again.headers.etag, body: again.body.length }).toEqual({
        status: 304,
        etag,
        body: 0,
      });
      // And Connect on B takes the REST write's ETag (quoted, as the header gave it).
      const connectCached = [];
      for await (const m of onB.connect.resources.read({
        store: "home",
        path: restPath.slice("/resources/v2/data/home/".length),
        ifNoneMatch: [etag],
      })) {
        connectCached.push({ notModified: m.notModified, chunk: m.chunk.length });
      }
      expect(connectCached).toEqual([{ notModified: true, chunk: 0 }]);
    }
    for (const h of [...connect, ...h2]) await expectStillHeld(s, h);
  }, 120_000);

  it("spec Poll over h2c: a long poll parked on one worker's HTTP/2 session is answered by a PUT (REST over h2c) and by a gRPC Write on the other worker's sessions, with their CHANGE lines and tags (issue 14, multi-core serving)", async () => {
    const h2 = await sessionPerWorker(s, pids, "h2c", () => h2Session(s));
    const grpcOn = await sessionPerWorker(s, pids, "stock gRPC", () => stockSession(s));
    await createStore(s, "h2feed");
    for (const [a, b] of [
      [0, 1],
      [1, 0],
    ] as const) {
      const pollOn = h2[a]?.client as http2.ClientHttp2Session;
      for (const by of ["rest", "grpc"] as const) {
        const cursor = await lastEventId(s, "h2feed");
        const path = `${by}-by-${pids[b]}.txt`;
        const waiting = h2Request(pollOn, "GET", `/resources/v2/poll?store=h2feed:${cursor}&wait=${POLL_WAIT}`, {
          authorization: s.authorization,
        });
        await parked(s, 1);
        let tag: string;
        if (by === "rest") {
          const put = await h2Request(
            h2[b]?.client as http2.ClientHttp2Session,
            "PUT",
            `/resources/v2/data/h2feed/${path}`,
            { authorization: s.authorization, "content-type": "text/plain" },
            Buffer.from(path),
          );
          expect(put.status).toBe(201);
          tag = etagOf(put).replaceAll('"', "");
        } else {
          const written = await stockWrite(grpcOn[b]?.client as StockResources, s, "h2feed", path, Buffer.from(path));
          tag = written.resource.tag;
        }
        const woke = await within(
          `the poll on worker ${pids[a]} woken by the ${by} write on worker ${pids[b]}`,
          waiting,
        );
        expect(woke.status).toBe(200);
        expect(changesOf("h2feed", woke.body.toString("utf8"))).toEqual([
          { id: cursor + 1, path, op: "modify", previous: "", tag, type: "text/plain" },
        ]);
      }
    }
    for (const h of [...h2, ...grpcOn]) await expectStillHeld(s, h);
  }, 120_000);
});
