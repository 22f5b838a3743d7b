// REST GET over HTTP/2 (REST on h2c) gives the storage's pooled read buffers back (issue 14, large
// bodies; src/rest/http.ts `sendLent`, docs/storage.md): concurrent GETs of large resources on one
// session and on several, fast and slow readers, each receive exactly their bytes and
// Content-MD5 while every chunk lent for them comes back to the pool and is reused; clients that
// reset a stream or destroy their session mid-body let every chunk come back and leave the GETs
// after them exact; and a stream the server destroys while a slice of its chunk is still in the
// socket write in flight sends the client that chunk's bytes, not those of the blob read next
// into its buffer.

import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Duplex } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { writeLent } from "../../src/rest/http.js";
import { giveBack } from "../../src/storage/chunk-pool.js";
import { BlobFiles, readBuffers } from "../../src/storage/local/blob-files.js";
import { startServer, TEST_BACKEND, type TestServer } from "../support/server.js";

const MiB = 1024 * 1024;
const md5 = (data: Uint8Array) => createHash("md5").update(data).digest("base64");
/** Only the embedded store's blob files read into pooled buffers (src/storage/chunk-pool.ts). */
const pooled = TEST_BACKEND === "sqlite" && process.env.TROVE_TEST_STORE_TYPE !== "filesystem";

let t: TestServer;
const contents = new Map<string, Buffer>();

/** Waits for `condition`, for at most 20 s. */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 20_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

function put(name: string, body: Buffer): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${t.url}/resources/v2/data/home/${name}`, {
      method: "PUT",
      agent: false,
      headers: { "Content-Type": "application/octet-stream", "Content-Length": body.length },
    });
    req.once("response", (res) => {
      res.resume();
      res.once("end", () => resolve(res));
    });
    req.once("error", reject);
    req.end(body);
  });
}

/** An h2c session to the server (prior knowledge); `window` raises its receive windows. */
async function connect(window?: number): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(t.url, window ? { settings: { initialWindowSize: window } } : {});
  session.on("error", () => {});
  await new Promise<void>((resolve, reject) => {
    session.once("connect", () => resolve());
    session.once("error", reject);
  });
  if (window) session.setLocalWindowSize(8 * window);
  return session;
}

function closeSession(session: http2.ClientHttp2Session): Promise<void> {
  if (session.destroyed) return Promise.resolve();
  return new Promise((resolve) => session.close(() => resolve()));
}

interface Answer {
  name: string;
  status: number;
  md5: string | undefined;
  body: Buffer;
}

/**
 * GET over h2c with the client reading at its own pace: `pauseEvery` bytes, then the stream is
 * paused (no WINDOW_UPDATE: the server's writes wait); `resetAfter` bytes, then the client resets
 * the stream (RST_STREAM CANCEL); `destroyAfter` bytes, then it destroys the whole session.
 */
function get(
  session: http2.ClientHttp2Session,
  name: string,
  options: { pauseEvery?: number; resetAfter?: number; destroyAfter?: number } = {},
): Promise<Answer> {
  const leaves = options.resetAfter !== undefined || options.destroyAfter !== undefined;
  return new Promise((resolve, reject) => {
    const req = session.request({ ":path": `/resources/v2/data/home/${name}` });
    let status = 0;
    let contentMd5: string | undefined;
    const parts: Buffer[] = [];
    let received = 0;
    let sincePause = 0;
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      resolve({ name, status, md5: contentMd5, body: Buffer.concat(parts) });
    };
    req.once("response", (headers) => {
      status = Number(headers[":status"]);
      contentMd5 = headers["content-md5"] as string | undefined;
    });
    req.on("data", (chunk: Buffer) => {
      if (done) return;
      parts.push(chunk);
      received += chunk.length;
      sincePause += chunk.length;
      if (options.resetAfter !== undefined && received >= options.resetAfter) {
        req.close(http2.constants.NGHTTP2_CANCEL);
        finish();
      } else if (options.destroyAfter !== undefined && received >= options.destroyAfter) {
        session.destroy();
        finish();
      } else if (options.pauseEvery !== undefined && sincePause >= options.pauseEvery) {
        sincePause = 0;
        req.pause();
        setTimeout(() => req.resume(), 5);
      }
    });
    req.once("end", finish);
    req.once("close", () => {
      if (leaves) finish();
    });
    req.once("error", (err) => {
      if (leaves) finish();
      else reject(err);
    });
  });
}

function expectExact(answers: Answer[], label: string): void {
  for (const a of answers) {
    const expected = contents.get(a.name) as Buffer;
    expect(a.status, `${label} ${a.name}`).toBe(200);
    expect(a.md5, `${label} ${a.name}`).toBe(md5(expected));
    expect(a.body.length, `${label} ${a.name}`).toBe(expected.length);
    expect(md5(a.body), `${label} ${a.name}`).toBe(md5(expected));
  }
}

function expectPrefixes(answers: Answer[]): void {
  for (const a of answers) {
    const expected = contents.get(a.name) as Buffer;
    expect(a.body.equals(expected.subarray(0, a.body.length)), `${a.name}: the bytes received before leaving`).toBe(
      true,
    );
  }
}

/** Every chunk lent since `before` comes back (a client gone mid-body: once the server sees it). */
async function expectAllGivenBack(before: { lent: number }): Promise<void> {
  if (!pooled) return;
  await until(() => readBuffers.stats().lent === before.lent, "every lent chunk given back");
  expect(readBuffers.stats().lent).toBe(before.lent);
}

beforeAll(async () => {
  t = await startServer();
  const sizes: Record<string, number> = {
    "a.bin": 5 * MiB + 3,
    "b.bin": 4 * MiB,
    "c.bin": MiB,
    "d.bin": 300 * 1024,
    "e.bin": 20 * MiB,
  };
  for (const [name, size] of Object.entries(sizes)) {
    const body = randomBytes(size);
    const res = await put(name, body);
    expect(res.statusCode).toBe(201);
    contents.set(name, body);
  }
}, 60_000);

afterAll(() => t?.stop());

describe("REST GET over h2c gives pooled read buffers back (issue 14: GET of 1 MiB and 64 MiB)", () => {
  it("concurrent GETs on one h2c session, fast and slow readers, each receive exactly their bytes and Content-MD5; every lent chunk comes back and is reused", async () => {
    const before = readBuffers.stats();
    const names = [...contents.keys()];
    for (const window of [undefined, 4 * MiB]) {
      const session = await connect(window);
      try {
        const answers = await Promise.all([
          ...names.map((name) => get(session, name)),
          ...names.map((name) => get(session, name, { pauseEvery: 256 * 1024 })),
          get(session, "e.bin"),
        ]);
        expectExact(answers, `one session, window ${window ?? "64 KiB"}`);
      } finally {
        await closeSession(session);
      }
    }
    await expectAllGivenBack(before);
    if (pooled) expect(readBuffers.stats().reused - before.reused).toBeGreaterThan(0);
  }, 120_000);

  it("concurrent GETs on several h2c sessions at once each receive exactly their bytes; every lent chunk comes back", async () => {
    const before = readBuffers.stats();
    const sessions = await Promise.all([connect(), connect(2 * MiB), connect(16 * MiB)]);
    try {
      const names = [...contents.keys()];
      for (let round = 0; round < 2; round++) {
        const answers = await Promise.all(
          sessions.flatMap((session, s) =>
            names.map((name, i) => get(session, name, (i + s) % 2 === 0 ? { pauseEvery: 512 * 1024 } : {})),
          ),
        );
        expectExact(answers, `several sessions, round ${round}`);
      }
    } finally {
      await Promise.all(sessions.map(closeSession));
    }
    await expectAllGivenBack(before);
  }, 120_000);

  it("clients that reset a stream or destroy their session mid-body let every lent chunk come back; the GETs after them, and beside them on the same session, are exact", async () => {
    const before = readBuffers.stats();
    // Streams reset at different points while other streams of the same session go on.
    const shared = await connect(4 * MiB);
    try {
      const answers = await Promise.all([
        get(shared, "e.bin", { resetAfter: 1 }),
        get(shared, "e.bin", { resetAfter: 3 * MiB + 5 }),
        get(shared, "a.bin", { resetAfter: MiB }),
        get(shared, "b.bin", { resetAfter: 2 * MiB, pauseEvery: 256 * 1024 }),
        get(shared, "c.bin", { resetAfter: 100 }),
        get(shared, "e.bin"),
        get(shared, "a.bin", { pauseEvery: 256 * 1024 }),
      ]);
      expectPrefixes(answers.slice(0, 5));
      expectExact(answers.slice(5), "beside the resets");
    } finally {
      await closeSession(shared);
    }
    // Whole sessions destroyed mid-body, with another stream beside (node's client then resets
    // every open stream with NO_ERROR). Rounds, because where each stream stands when its session
    // goes varies from one to the next.
    for (let round = 0; round < 8; round++) {
      const destroyed = await Promise.all(
        [1, 2 * MiB, 7 * MiB + 1].map(async (at, i) => {
          const session = await connect(i === 0 ? undefined : 4 * MiB);
          const [cut, beside] = await Promise.all([
            get(session, "e.bin", { destroyAfter: at }),
            get(session, "a.bin", { destroyAfter: Number.MAX_SAFE_INTEGER }),
          ]);
          return [cut, beside] as Answer[];
        }),
      );
      expectPrefixes(destroyed.flat());
    }
    await expectAllGivenBack(before);
    const after = await connect();
    try {
      const answers = await Promise.all([...contents.keys()].map((name) => get(after, name)));
      expectExact(answers, "after the resets");
    } finally {
      await closeSession(after);
    }
    await expectAllGivenBack(before);
  }, 120_000);
});

describe("a stream the server destroys mid-body (issue 14, REST on h2c, src/rest/http.ts sendLent)", () => {
  // A bare node:http2 server streams blobs with the REST face's own `writeLent`, so that the test
  // can destroy a stream at a chosen moment: while its client reads nothing, the session's socket
  // write in flight carries a slice of the chunk whose rest node still queues (the client's
  // window ends inside it). Node calls that chunk's write back as cancelled at once; given back
  // then, the blob read next would fill its memory while the socket still sends from it.
  let root: string;
  let blobs: BlobFiles;
  const stored = new Map<string, { data: Buffer; blob: string }>();
  let server: http2.Http2Server;
  let port: number;
  const answering: http2.Http2ServerResponse[] = [];

  beforeAll(async () => {
    root = await mkdtemp(join(tmpdir(), "trove-h2c-lent-"));
    blobs = new BlobFiles(root);
    await blobs.init();
    for (const [name, size] of [
      ["big", 24 * MiB],
      ["other", 8 * MiB],
    ] as const) {
      const data = randomBytes(size);
      const info = await blobs.write(
        (async function* () {
          yield data;
        })(),
        { maxSize: 100 * MiB },
      );
      stored.set(name, { data, blob: info.blob });
    }
    server = http2.createServer(async (req, res) => {
      const entry = stored.get(req.url.slice(1));
      if (!entry) {
        res.writeHead(404).end();
        return;
      }
      answering.push(res);
      res.writeHead(200, { "Content-Length": entry.data.length });
      try {
        for await (const chunk of blobs.read(entry.blob, entry.data.length)) await writeLent(res, chunk);
        res.end();
      } catch {
        // The stream was destroyed: the read is closed by the loop's exit.
      }
    });
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    port = (server.address() as net.AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
    await rm(root, { recursive: true, force: true });
  });

  /** Reads the other blob through the pool, giving each chunk back: the pool's buffers get its bytes. */
  async function churnPool(): Promise<void> {
    const other = stored.get("other") as { data: Buffer; blob: string };
    for await (const chunk of blobs.read(other.blob, other.data.length)) giveBack(chunk);
  }

  it("the chunk whose slice is still in the socket write in flight comes back only once sent: the client receives the blob's own bytes", async () => {
    const big = stored.get("big") as { data: Buffer; blob: string };
    const before = readBuffers.stats();
    // How much the kernel's buffers take before the socket blocks varies from one connection to
    // the next (about 5 to 9 MiB here): windows an eighth of a MiB apart, so that in some of them
    // the window ends inside a chunk whose first part is stuck in the socket write.
    const windows = Array.from({ length: 44 }, (_, i) => (4.25 + i / 8) * MiB);
    for (const window of windows) {
      answering.length = 0;
      // The client reads through a socket it can stop reading from (a session's own socket is
      // read natively and cannot be paused).
      const raw = net.connect(port, "127.0.0.1");
      let rawReceived = 0;
      let holding = true;
      const wire = new Duplex({
        read() {},
        write(chunk, _encoding, callback) {
          raw.write(chunk, callback);
        },
        final(callback) {
          raw.end();
          callback();
        },
        destroy(err, callback) {
          raw.destroy();
          callback(err);
        },
      });
      raw.on("data", (data: Buffer) => {
        wire.push(data);
        rawReceived += data.length;
        if (holding && rawReceived > MiB / 2) raw.pause();
      });
      raw.on("end", () => wire.push(null));
      raw.on("error", () => {});
      const session = http2.connect(`http://127.0.0.1:${port}`, {
        createConnection: () => wire,
        settings: { initialWindowSize: window },
      });
      session.on("error", () => {});
      session.once("connect", () => session.setLocalWindowSize(256 * MiB));
      const req = session.request({ ":path": "/big" });
      const parts: Buffer[] = [];
      req.on("data", (chunk: Buffer) => parts.push(chunk));
      req.on("error", () => {});
      const closed = new Promise<void>((resolve) => req.once("close", () => resolve()));
      await until(() => answering.length === 1, "the server to answer");
      const res = answering[0] as http2.Http2ServerResponse;
      // The server has sent what the window allows and the socket can take: the client's socket
      // has taken its half MiB and stopped reading (on a loaded machine that can take longer than
      // any fixed wait), then a moment for the server's writes to back up behind it.
      await until(() => rawReceived > MiB / 2, "the client to receive its first half MiB");
      await new Promise((r) => setTimeout(r, 200));
      res.destroy();
      await churnPool();
      await churnPool();
      holding = false;
      raw.resume();
      await closed;
      const body = Buffer.concat(parts);
      expect(body.length, `window ${window}`).toBeGreaterThan(0);
      expect(body.length, `window ${window}`).toBeLessThan(big.data.length);
      expect(body.equals(big.data.subarray(0, body.length)), `window ${window}: the bytes the client received`).toBe(
        true,
      );
      session.destroy();
      await expectAllGivenBack(before);
    }
  }, 60_000);
});
