// Large resources read and written concurrently through every face (issue 14, GET and PUT of
// 1 MiB and 64 MiB; blob reads into pooled buffers, blob MD5 on a worker thread): REST GETs and
// gRPC Reads of different resources at the same time, fast and slow clients, each receive exactly
// their resource's bytes and Content-MD5; clients going away mid-body change nothing for the
// others; concurrent PUTs answer the MD5 of what they sent, and a wrong Content-MD5 is refused
// with 400 leaving the resource as it was.

import { createHash, randomBytes } from "node:crypto";
import * as http from "node:http";
import * as net from "node:net";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { readBuffers } from "../../src/storage/local/blob-files.js";
import { startServer, TEST_BACKEND, type TestServer } from "../support/server.js";

const MiB = 1024 * 1024;
const md5 = (data: Uint8Array) => createHash("md5").update(data).digest("base64");
let t: TestServer;
const contents = new Map<string, Buffer>();

function url(name: string): string {
  return `${t.url}/resources/v2/data/home/${name}`;
}

function put(name: string, body: Buffer, headers: Record<string, string> = {}): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.request(url(name), {
      method: "PUT",
      agent: false,
      headers: { "Content-Type": "application/octet-stream", "Content-Length": body.length, ...headers },
    });
    req.once("response", (res) => {
      res.resume();
      res.once("end", () => resolve(res));
    });
    req.once("error", reject);
    // In 64 KiB pieces, as a socket delivers them.
    (async () => {
      for (let at = 0; at < body.length; at += 65_536) {
        if (!req.write(body.subarray(at, at + 65_536))) await new Promise((r) => req.once("drain", r));
      }
      req.end();
    })().catch(reject);
  });
}

/** GET with the client reading at its own pace; `abortAfter` bytes, then it goes away. */
function get(
  name: string,
  options: { slow?: boolean; abortAfter?: number } = {},
): Promise<{ status: number; md5: string | undefined; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = http.get(url(name), { agent: false }, (res) => {
      const parts: Buffer[] = [];
      let received = 0;
      res.on("data", (chunk: Buffer) => {
        parts.push(chunk);
        received += chunk.length;
        if (options.abortAfter !== undefined && received >= options.abortAfter) {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, md5: undefined, body: Buffer.concat(parts) });
        } else if (options.slow) {
          res.pause();
          setTimeout(() => res.resume(), 2);
        }
      });
      res.once("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          md5: res.headers["content-md5"] as string | undefined,
          body: Buffer.concat(parts),
        }),
      );
      res.once("error", reject);
    });
    req.once("error", (err) => {
      if (options.abortAfter === undefined) reject(err);
    });
  });
}

beforeAll(async () => {
  t = await startServer();
  const sizes: Record<string, number> = { "a.bin": 5 * MiB + 3, "b.bin": 4 * MiB, "c.bin": MiB, "d.bin": 300_000 };
  for (const [name, size] of Object.entries(sizes)) {
    const body = randomBytes(size);
    const res = await put(name, body);
    expect(res.statusCode).toBe(201);
    expect(res.headers["content-md5"]).toBe(md5(body));
    contents.set(name, body);
  }
}, 60_000);

afterAll(() => t?.stop());

describe("large resources through every face at once (issue 14: GET and PUT of 1 MiB and 64 MiB)", () => {
  it("concurrent REST GETs (fast and slow clients) and gRPC Reads of different resources each receive exactly their bytes and MD5", async () => {
    const resources = createClient(ResourceService, createGrpcTransport({ baseUrl: t.url }));
    const read = async (name: string) => {
      const parts: Uint8Array[] = [];
      for await (const m of resources.read({ store: "home", path: name })) parts.push(m.chunk);
      return { name, face: "gRPC", status: 200, md5: undefined, body: Buffer.concat(parts) };
    };
    const names = [...contents.keys()];
    for (let round = 0; round < 2; round++) {
      const answers = await Promise.all([
        ...names.map(async (name) => ({ name, face: "REST", ...(await get(name)) })),
        ...names.map(async (name) => ({ name, face: "REST slow", ...(await get(name, { slow: true })) })),
        ...names.map(read),
      ]);
      for (const a of answers) {
        const expected = contents.get(a.name) as Buffer;
        expect(a.status, `${a.face} ${a.name}`).toBe(200);
        if (a.md5 !== undefined) expect(a.md5, `${a.face} ${a.name}`).toBe(md5(expected));
        expect(a.body.length, `${a.face} ${a.name}`).toBe(expected.length);
        expect(md5(a.body), `${a.face} ${a.name}`).toBe(md5(expected));
      }
    }
  }, 120_000);

  it("clients going away mid-body leave the GETs after them exact", async () => {
    const cut = await Promise.all([
      get("a.bin", { abortAfter: 1 }),
      get("a.bin", { abortAfter: 2 * MiB }),
      get("b.bin", { abortAfter: 3 * MiB + 1 }),
      get("c.bin", { abortAfter: 100 }),
    ]);
    const cutNames = ["a.bin", "a.bin", "b.bin", "c.bin"];
    for (const [i, answer] of cut.entries()) {
      const expected = contents.get(cutNames[i] as string) as Buffer;
      expect(answer.body.equals(expected.subarray(0, answer.body.length)), cutNames[i]).toBe(true);
    }
    const after = await Promise.all([...contents.keys()].map(async (name) => ({ name, ...(await get(name)) })));
    for (const a of after) {
      expect(a.status, a.name).toBe(200);
      expect(a.body.equals(contents.get(a.name) as Buffer), a.name).toBe(true);
    }
  }, 60_000);

  it("REST GETs over HTTP/1.1 give every pooled read buffer back, clients that went away included, and reuse them", async () => {
    // Only the embedded store's blob files read into pooled buffers (src/storage/chunk-pool.ts).
    const pooled = TEST_BACKEND === "sqlite" && process.env.TROVE_TEST_STORE_TYPE !== "filesystem";
    const before = readBuffers.stats();
    const names = [...contents.keys()];
    const answers = await Promise.all([
      ...names.map(async (name) => ({ name, ...(await get(name)) })),
      ...names.map(async (name) => ({ name, ...(await get(name, { slow: true })) })),
    ]);
    // Clients going away at different points: the server's read of the blob is closed each time,
    // its read-ahead chunk given back (and its file closed).
    await Promise.all([
      get("a.bin", { abortAfter: 1 }),
      get("a.bin", { abortAfter: MiB + 1 }),
      get("a.bin", { abortAfter: 3 * MiB }),
      get("b.bin", { abortAfter: 1 }),
      get("b.bin", { abortAfter: 2 * MiB + 7 }),
      get("b.bin", { abortAfter: 1, slow: true }),
    ]);
    for (const a of answers) expect(a.body.equals(contents.get(a.name) as Buffer), a.name).toBe(true);
    const after = readBuffers.stats();
    if (!pooled) return;
    // A client gone mid-body may leave its chunk lent until the server sees the close: wait for it.
    for (let i = 0; i < 100 && readBuffers.stats().lent !== before.lent; i++)
      await new Promise((r) => setTimeout(r, 50));
    expect(readBuffers.stats().lent - before.lent).toBe(0);
    expect(after.reused - before.reused).toBeGreaterThan(0);
  }, 60_000);

  it("pipelined GETs of large resources on one HTTP/1.1 connection are answered in order, each exact", async () => {
    const names = ["a.bin", "c.bin", "b.bin"];
    const socket = net.connect(t.port, "127.0.0.1");
    const received: Buffer[] = [];
    socket.on("data", (chunk: Buffer) => received.push(chunk));
    const ended = new Promise<void>((resolve, reject) => {
      socket.once("end", resolve);
      socket.once("error", reject);
    });
    // All three requests in one write: the second and third answers wait for the ones before.
    socket.write(
      names
        .map(
          (name, i) =>
            `GET /resources/v2/data/home/${name} HTTP/1.1\r\nHost: x\r\n${i === 2 ? "Connection: close\r\n" : ""}\r\n`,
        )
        .join(""),
    );
    await ended;
    let rest = Buffer.concat(received);
    for (const name of names) {
      const headEnd = rest.indexOf("\r\n\r\n");
      const head = rest.subarray(0, headEnd).toString("latin1");
      expect(head, name).toMatch(/^HTTP\/1\.1 200 /);
      const length = Number(/content-length: (\d+)/i.exec(head)?.[1]);
      const body = rest.subarray(headEnd + 4, headEnd + 4 + length);
      expect(body.equals(contents.get(name) as Buffer), name).toBe(true);
      rest = rest.subarray(headEnd + 4 + length);
    }
    expect(rest.length).toBe(0);
  }, 60_000);

  it("concurrent PUTs answer the MD5 of what each sent; a wrong Content-MD5 is refused with 400 and the resource is unchanged", async () => {
    const bodies = [randomBytes(3 * MiB + 17), randomBytes(MiB), randomBytes(2 * MiB)];
    const answers = await Promise.all(bodies.map((body, i) => put(`put-${i}.bin`, body)));
    for (const [i, res] of answers.entries()) {
      expect(res.statusCode).toBe(201);
      expect(res.headers["content-md5"]).toBe(md5(bodies[i] as Buffer));
      const back = await get(`put-${i}.bin`);
      expect(back.body.equals(bodies[i] as Buffer)).toBe(true);
    }
    const other = randomBytes(2 * MiB);
    const refused = await put("put-0.bin", other, { "Content-MD5": md5(randomBytes(16)) });
    expect(refused.statusCode).toBe(400);
    const unchanged = await get("put-0.bin");
    expect(unchanged.md5).toBe(md5(bodies[0] as Buffer));
    expect(unchanged.body.equals(bodies[0] as Buffer)).toBe(true);
  }, 60_000);
});
