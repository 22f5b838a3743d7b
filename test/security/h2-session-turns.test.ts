// Many 1 MiB answers asked for at once over one h2c session (issue 31 item 1, docs/security.md
// "HTTP/2 sessions"): Node's HTTP/2 server refused the new streams of a session whose queued
// answers passed its `maxSessionMemory` (NGHTTP2_ENHANCE_YOUR_CALM, a pull failed so). The answers
// of blob contents now take turns per session (src/server/answer-turns.ts): a client that reads
// slowly sees later answers come later, never a refusal, and a client that reads nothing makes the
// server read no more than H2_CONTENT_TURNS files for it. The turns are taken in the core, so a
// gRPC Read meets the same (every face gets the same decision).

import { createHash, randomBytes } from "node:crypto";
import * as http from "node:http";
import * as http2 from "node:http2";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { ReadRequestSchema, ReadResponseSchema } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { H2_CONTENT_TURNS } from "../../src/server/answer-turns.js";
import { startServer, type TestServer } from "../support/server.js";

const MiB = 1024 * 1024;
const FILES = 32;
const md5 = (data: Uint8Array) => createHash("md5").update(data).digest("hex");

let t: TestServer;
const contents: Buffer[] = [];

function put(name: string, body: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${t.url}/resources/v2/data/home/${name}`, {
      method: "PUT",
      agent: false,
      headers: { "Content-Type": "application/octet-stream", "Content-Length": body.length },
    });
    req.once("response", (res) => {
      res.resume();
      res.once("end", () => resolve(res.statusCode ?? 0));
    });
    req.once("error", reject);
    req.end(body);
  });
}

/** An h2c session at HTTP/2's default 64 KiB windows: an answer the client does not read waits on the server. */
async function connect(): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(t.url);
  session.on("error", () => {});
  await new Promise<void>((resolve, reject) => {
    session.once("connect", () => resolve());
    session.once("error", reject);
  });
  return session;
}

/** A GET whose body is not read until `read()`; its head, its error and its end as the client sees them. */
interface Asked {
  index: number;
  stream: http2.ClientHttp2Stream;
  status: number | undefined;
  error: Error | undefined;
  read(): Promise<Buffer>;
}

type Face = "rest" | "grpc";

/** The request of file `index`: a REST GET, or a gRPC Read (one enveloped ReadRequest). */
function request(session: http2.ClientHttp2Session, face: Face, index: number): http2.ClientHttp2Stream {
  if (face === "rest") return session.request({ ":path": `/resources/v2/data/home/f${index}.bin` });
  const message = toBinary(ReadRequestSchema, create(ReadRequestSchema, { store: "home", path: `f${index}.bin` }));
  const envelope = Buffer.alloc(5 + message.length);
  envelope.writeUInt32BE(message.length, 1);
  envelope.set(message, 5);
  const stream = session.request({
    ":method": "POST",
    ":path": "/trove.resources.v2.ResourceService/Read",
    "content-type": "application/grpc",
    te: "trailers",
  });
  stream.end(envelope);
  return stream;
}

/** The contents in a body: as is (REST), or the chunks of its Read messages (gRPC). */
function contentsOf(face: Face, body: Buffer): Buffer {
  if (face === "rest") return body;
  const chunks: Uint8Array[] = [];
  for (let at = 0; at < body.length; ) {
    const length = body.readUInt32BE(at + 1);
    chunks.push(fromBinary(ReadResponseSchema, body.subarray(at + 5, at + 5 + length)).chunk);
    at += 5 + length;
  }
  return Buffer.concat(chunks);
}

function ask(session: http2.ClientHttp2Session, index: number, onHead: (a: Asked) => void, face: Face = "rest"): Asked {
  const stream = request(session, face, index);
  const asked: Asked = {
    index,
    stream,
    status: undefined,
    error: undefined,
    read: () =>
      new Promise<Buffer>((resolve, reject) => {
        const parts: Buffer[] = [];
        stream.on("data", (chunk: Buffer) => parts.push(chunk));
        stream.once("end", () => resolve(Buffer.concat(parts)));
        stream.once("error", reject);
        if (asked.error) reject(asked.error);
        stream.resume();
      }),
  };
  // Paused: no WINDOW_UPDATE until read() resumes it.
  stream.pause();
  stream.once("response", (headers) => {
    asked.status = Number(headers[":status"]);
    onHead(asked);
  });
  stream.once("error", (err) => {
    asked.error = err;
    onHead(asked);
  });
  return asked;
}

/** The answers with a head (or an error), in the order they came. */
class Heads {
  readonly seen: Asked[] = [];
  private waiters: Array<{ count: number; go: () => void }> = [];
  private taken = 0;

  push(a: Asked): void {
    this.seen.push(a);
    const waiting = this.waiters;
    this.waiters = [];
    for (const w of waiting) {
      if (this.seen.length >= w.count) w.go();
      else this.waiters.push(w);
    }
  }

  /** Resolves once `count` answers have a head. */
  when(count: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.seen.length >= count) resolve();
      else this.waiters.push({ count, go: resolve });
    });
  }

  /** The next answer not taken yet, in the order heads came. */
  async next(): Promise<Asked> {
    const at = this.taken++;
    await this.when(at + 1);
    return this.seen[at] as Asked;
  }
}

beforeAll(async () => {
  t = await startServer();
  for (let i = 0; i < FILES; i++) {
    const body = randomBytes(MiB);
    contents.push(body);
    expect(await put(`f${i}.bin`, body)).toBe(201);
  }
  // One small (inline) file: an answer that takes no turn.
  expect(await put("small.txt", Buffer.from("small\n"))).toBe(201);
}, 120_000);

afterAll(() => t?.stop());

describe("many 1 MiB answers at once over one h2c session (issue 31 item 1)", () => {
  it.each<Face>(["rest", "grpc"])(
    "%s: a client asking 32 files of 1 MiB in two waves and reading them one at a time gets every one whole: no stream refused (ENHANCE_YOUR_CALM)",
    async (face) => {
      const session = await connect();
      try {
        const got = new Heads();
        const asked: Asked[] = [];
        // First wave: 16 answers of 1 MiB queued on the server (more than Node's 10 MB default).
        for (let i = 0; i < 16; i++) asked.push(ask(session, i, (a) => got.push(a), face));
        await got.when(H2_CONTENT_TURNS);
        // Second wave, while the first is unread: before the fix, refused with ENHANCE_YOUR_CALM.
        for (let i = 16; i < FILES; i++) asked.push(ask(session, i, (a) => got.push(a), face));
        // The slow reader: one answer at a time, whichever has its head.
        for (let n = 0; n < FILES; n++) {
          const a = await got.next();
          expect(a.error?.message, `f${a.index}.bin`).toBeUndefined();
          expect(a.status, `f${a.index}.bin`).toBe(200);
          const body = contentsOf(face, await a.read());
          expect(body.length, `f${a.index}.bin`).toBe(MiB);
          expect(md5(body), `f${a.index}.bin`).toBe(md5(contents[a.index] as Buffer));
        }
        expect(new Set(got.seen.map((a) => a.index)).size).toBe(FILES);
      } finally {
        session.destroy();
      }
    },
    120_000,
  );

  it("a client that reads nothing gets H2_CONTENT_TURNS answers of blob contents, the others wait (a small answer still comes), and all come once it reads", async () => {
    const session = await connect();
    try {
      const got = new Heads();
      const asked: Asked[] = [];
      for (let i = 0; i < FILES; i++) asked.push(ask(session, i, (a) => got.push(a)));
      await got.when(H2_CONTENT_TURNS);
      // A small answer asked after them comes (no turn, no refusal): by then the server has taken
      // every earlier request, and no more than the turns were answered.
      const small = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = session.request({ ":path": "/resources/v2/data/home/small.txt" });
        let status = 0;
        let body = "";
        req.setEncoding("utf8");
        req.once("response", (h) => {
          status = Number(h[":status"]);
        });
        req.on("data", (s: string) => {
          body += s;
        });
        req.once("end", () => resolve({ status, body }));
        req.once("error", reject);
      });
      expect(small).toEqual({ status: 200, body: "small\n" });
      expect(got.seen.length).toBe(H2_CONTENT_TURNS);
      for (const a of got.seen) expect(a.status, `f${a.index}.bin`).toBe(200);
      // Reading them lets the others come, whole.
      for (let n = 0; n < FILES; n++) {
        const a = await got.next();
        expect(a.status, `f${a.index}.bin`).toBe(200);
        expect(md5(await a.read()), `f${a.index}.bin`).toBe(md5(contents[a.index] as Buffer));
      }
    } finally {
      session.destroy();
    }
  }, 120_000);
});
