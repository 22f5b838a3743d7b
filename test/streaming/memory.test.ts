// Writes stream: a 256 MiB PUT and its GET go through a server in a child
// process whose resident memory must not grow with the resource's size
// (DESIGN.md, Storage). The body is generated on the fly and never held whole.

import { createHash, randomBytes } from "node:crypto";
import { writeFile } from "node:fs/promises";
import * as http from "node:http";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ChildServer, procStatusBytes, startChildServer } from "../support/child-server.js";

const MiB = 1024 * 1024;
const SIZE = 256 * MiB;
const CHUNK = 256 * 1024;
const GROWTH_LIMIT = 100 * MiB;
/** The Authorization header value of the server under test. */
let authorization = "";

/** SIZE bytes in CHUNK-sized pieces, each one different; `md5` is complete once it is drained. */
function body(): { chunks: AsyncIterable<Buffer>; md5: () => string } {
  const hash = createHash("md5");
  const block = randomBytes(CHUNK);
  async function* chunks() {
    for (let i = 0; i < SIZE / CHUNK; i++) {
      const chunk = Buffer.from(block);
      chunk.writeUInt32BE(i, 0);
      hash.update(chunk);
      yield chunk;
    }
  }
  return { chunks: chunks(), md5: () => hash.digest("base64") };
}

function put(url: string, source: AsyncIterable<Buffer>, length: number): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, {
      method: "PUT",
      headers: { "Content-Length": length, "Content-Type": "application/octet-stream", Authorization: authorization },
    });
    req.once("response", (res) => {
      res.resume();
      res.once("end", () => resolve(res));
    });
    pipeline(Readable.from(source), req).catch(reject);
  });
}

function get(url: string): Promise<{ res: http.IncomingMessage; size: number; md5: string }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers: { Authorization: authorization } }, (res) => {
        const hash = createHash("md5");
        let size = 0;
        res.on("data", (chunk: Buffer) => {
          size += chunk.length;
          hash.update(chunk);
        });
        res.once("end", () => resolve({ res, size, md5: hash.digest("base64") }));
        res.once("error", reject);
      })
      .once("error", reject);
  });
}

/** Samples the child's resident memory while a transfer runs; `stop` answers the highest seen. */
function sampleRss(pid: number): { stop: () => Promise<number> } {
  let peak = 0;
  let pending = Promise.resolve();
  const timer = setInterval(() => {
    pending = procStatusBytes(pid, "VmRSS").then(
      (rss) => {
        peak = Math.max(peak, rss);
      },
      () => {},
    );
  }, 50);
  return {
    async stop() {
      clearInterval(timer);
      await pending;
      // The kernel's own peak covers what the samples missed.
      return Math.max(peak, await procStatusBytes(pid, "VmHWM"));
    },
  };
}

describe.skipIf(process.platform !== "linux")("streaming a 256 MiB resource", () => {
  let server: ChildServer;
  let baseline = 0;

  beforeAll(async () => {
    // One process (--workers 1): the test reads its memory in /proc.
    server = await startChildServer({ args: ["--workers", "1"] });
    authorization = server.authorization;
    // Warm the code paths of a large PUT and GET so that the baseline holds the compiled code.
    const warm = body();
    const url = `${server.url}/resources/v2/data/home/warm.bin`;
    await put(
      url,
      (async function* () {
        let n = 0;
        for await (const c of warm.chunks) {
          if (n++ === 8) return;
          yield c;
        }
      })(),
      8 * CHUNK,
    );
    await get(url);
    baseline = await procStatusBytes(server.pid, "VmRSS");
    // Writing 5 to clear_refs resets VmHWM to the current RSS, so the peak measured is this test's.
    await writeFile(`/proc/${server.pid}/clear_refs`, "5").catch(() => {});
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
  });

  it("PUT then GET round-trip size and MD5 exactly while the server's RSS grows less than 100 MiB", async () => {
    const url = `${server.url}/resources/v2/data/home/large.bin`;
    const sampler = sampleRss(server.pid);
    const sent = body();
    const putRes = await put(url, sent.chunks, SIZE);
    const md5 = sent.md5();
    expect(putRes.statusCode).toBe(201);
    expect(putRes.headers["content-md5"]).toBe(md5);

    const got = await get(url);
    const peak = await sampler.stop();
    expect(got.res.statusCode).toBe(200);
    expect(got.res.headers["content-length"]).toBe(String(SIZE));
    expect(got.res.headers["content-md5"]).toBe(md5);
    expect(got.res.headers.etag).toBe(putRes.headers.etag);
    expect(got.size).toBe(SIZE);
    expect(got.md5).toBe(md5);

    const growth = peak - baseline;
    expect(
      growth,
      `server RSS grew by ${(growth / MiB).toFixed(1)} MiB (from ${(baseline / MiB).toFixed(1)} MiB)`,
    ).toBeLessThan(GROWTH_LIMIT);
  }, 300_000);
});
