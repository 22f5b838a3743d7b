// Issue 31 (speed and client CPU per file): the SDK's h2c fetch, which `trove push`, `pull` and
// `mirror` send their requests on. Against a Trove server it speaks HTTP/2 without TLS over one
// connection (the server's one port takes the preface); against a server that speaks only
// HTTP/1.1 (a proxy in front of Trove) it falls back to fetch; redirects are left to fetch.

import { createHash, randomBytes } from "node:crypto";
import { createServer, type Server } from "node:http";
import * as http2 from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createH2cFetch, createRestClient } from "../../sdk/src/index.js";
import { startServer, type TestServer } from "../support/server.js";
import { startTcpProxy, type TcpProxy } from "./support.js";

let server: TestServer;
/** A TCP proxy in front of the server that counts the connections it carries. */
let proxy: TcpProxy;
/** A server that speaks only HTTP/1.1. */
let h1: Server;
let h1Url: string;

beforeAll(async () => {
  server = await startServer();
  proxy = await startTcpProxy(server.port);
  h1 = createServer((req, res) => {
    res.writeHead(200, { "content-type": "text/plain", "x-protocol": req.httpVersion });
    res.end(`hello ${req.method} ${req.url}`);
  });
  await new Promise<void>((resolve) => h1.listen(0, "127.0.0.1", resolve));
  h1Url = `http://127.0.0.1:${(h1.address() as { port: number }).port}`;
}, 120_000);

afterAll(async () => {
  await proxy?.close();
  h1?.closeAllConnections();
  await new Promise((resolve) => h1?.close(resolve));
  await server?.stop();
});

const md5 = (b: Uint8Array) => createHash("md5").update(b).digest("base64");

describe("h2c fetch (issue 31: one HTTP/2 connection for push, pull and mirror)", () => {
  it("against Trove: 40 uploads and downloads at once, a 3 MiB streamed body and a listing, all over one connection", async () => {
    const h2c = createH2cFetch(proxy.url);
    try {
      const rest = createRestClient({ baseUrl: proxy.url, fetch: h2c });
      await rest.mkdir("home", "h2c");
      const small = Array.from({ length: 40 }, (_, i) => randomBytes(2048 + i));
      await Promise.all(small.map((b, i) => rest.put("home", `h2c/f${i}.bin`, b)));
      const large = randomBytes(3 * 1024 * 1024);
      const put = await rest.put(
        "home",
        "h2c/large.bin",
        new ReadableStream<Uint8Array>({
          start(c) {
            for (let o = 0; o < large.length; o += 100_000) c.enqueue(large.subarray(o, o + 100_000));
            c.close();
          },
        }),
        { contentLength: large.length },
      );
      expect(put.md5).toBe(md5(large));
      const got = await Promise.all(small.map((_, i) => rest.get("home", `h2c/f${i}.bin`)));
      got.forEach((g, i) => {
        expect(g.notModified).toBe(false);
        if (!g.notModified) expect(Buffer.from(g.body)).toEqual(small[i]);
      });
      const big = await rest.get("home", "h2c/large.bin");
      if (big.notModified) throw new Error("304 without a condition");
      expect(md5(big.body)).toBe(md5(large));
      const listing = await rest.list("home", "h2c", { recursive: true });
      expect(listing.entries.filter((e) => !e.directory)).toHaveLength(41);
      expect(h2c.http2).toBe(true);
      expect(proxy.connections()).toBe(1);
    } finally {
      h2c.close();
    }
  });

  it("against Trove: HEAD answers without a body; a directory named without its / is followed (303) through fetch", async () => {
    const h2c = createH2cFetch(server.url);
    try {
      const rest = createRestClient({ baseUrl: server.url });
      await rest.mkdir("home", "h2c-dir");
      await rest.put("home", "h2c-dir/a.txt", "a");
      const head = await h2c(`${server.url}/resources/v2/data/home/h2c-dir/a.txt`, { method: "HEAD" });
      expect(head.status).toBe(200);
      expect(head.body).toBeNull();
      const dir = await h2c(`${server.url}/resources/v2/data/home/h2c-dir`);
      expect(dir.status).toBe(200);
      expect(dir.redirected).toBe(true);
      expect(new URL(dir.url).pathname).toBe("/resources/v2/data/home/h2c-dir/");
      expect(await dir.text()).toContain('name="a.txt"');
    } finally {
      h2c.close();
    }
  });

  it("against a server that speaks only HTTP/1.1: every request falls back to fetch, answered in full", async () => {
    const h2c = createH2cFetch(h1Url);
    try {
      const first = await h2c(`${h1Url}/one`);
      expect(first.status).toBe(200);
      expect(first.headers.get("x-protocol")).toBe("1.1");
      expect(await first.text()).toBe("hello GET /one");
      expect(h2c.http2).toBe(false);
      const second = await h2c(`${h1Url}/two`, { method: "POST", body: "x" });
      expect(await second.text()).toBe("hello POST /two");
    } finally {
      h2c.close();
    }
  });

  it("a request whose signal is aborted is refused with the signal's reason, and the connection serves the next", async () => {
    const h2c = createH2cFetch(server.url);
    try {
      const aborted = AbortSignal.abort(new Error("stopped by the caller"));
      await expect(h2c(`${server.url}/resources/v2/data/home/`, { signal: aborted })).rejects.toThrow(
        "stopped by the caller",
      );
      const ok = await h2c(`${server.url}/resources/v2/data/home/`);
      expect(ok.status).toBe(200);
      await ok.text();
    } finally {
      h2c.close();
    }
  });

  describe("the answer's body (session 16: a web stream of the HTTP/2 stream's chunks, not Readable.toWeb)", () => {
    /** An h2c server whose answers the test writes: /echo gives the request's headers back as JSON. */
    let h2: http2.Http2Server;
    let h2Url: string;
    beforeAll(async () => {
      h2 = http2.createServer();
      h2.on("stream", (stream, headers) => {
        stream.on("error", () => {}); // the reset of /cut, and a cancelled /large
        const path = headers[":path"];
        if (path === "/echo") {
          stream.respond({ ":status": 200, "content-type": "application/json" });
          stream.end(JSON.stringify(headers));
        } else if (path === "/cut") {
          // Announces 100,000 bytes, sends 10,000, then resets the stream.
          stream.respond({ ":status": 200, "content-length": "100000" });
          stream.write(Buffer.alloc(10_000, "a"), () =>
            setTimeout(() => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR), 20),
          );
        } else if (path === "/large") {
          stream.respond({ ":status": 200, "content-length": String(3 * 1024 * 1024) });
          stream.end(Buffer.alloc(3 * 1024 * 1024, "b"));
        } else {
          stream.respond({ ":status": 404 });
          stream.end("no such test path");
        }
      });
      await new Promise<void>((resolve) => h2.listen(0, "127.0.0.1", resolve));
      h2Url = `http://127.0.0.1:${(h2.address() as { port: number }).port}`;
    });
    afterAll(async () => {
      await new Promise((resolve) => h2?.close(resolve));
    });

    it("request headers given as a record, a Headers or pairs arrive once each, in lower case, without hop-by-hop ones", async () => {
      const h2c = createH2cFetch(h2Url);
      try {
        const given: RequestInit["headers"][] = [
          { "If-None-Match": '"a"', Authorization: "Bearer t", Connection: "keep-alive" },
          new Headers({ "If-None-Match": '"a"', Authorization: "Bearer t" }),
          [
            ["If-None-Match", '"a"'],
            ["Authorization", "Bearer t"],
          ],
        ];
        for (const headers of given) {
          const echoed = (await (await h2c(`${h2Url}/echo`, { headers })).json()) as Record<string, string>;
          expect(echoed["if-none-match"]).toBe('"a"');
          expect(echoed.authorization).toBe("Bearer t");
          expect(echoed).not.toHaveProperty("connection");
          expect(Object.keys(echoed).filter((k) => k.toLowerCase() === "authorization")).toEqual(["authorization"]);
        }
        expect(h2c.http2).toBe(true);
      } finally {
        h2c.close();
      }
    });

    it("a body the server cuts short fails its reader, and the connection serves the next request", async () => {
      const h2c = createH2cFetch(h2Url);
      try {
        const res = await h2c(`${h2Url}/cut`);
        expect(res.status).toBe(200);
        await expect(res.arrayBuffer()).rejects.toThrow();
        const next = await h2c(`${h2Url}/large`);
        expect((await next.arrayBuffer()).byteLength).toBe(3 * 1024 * 1024);
      } finally {
        h2c.close();
      }
    });

    it("a body read slowly arrives whole and in order; one cancelled unread closes its stream and the next request is answered", async () => {
      const h2c = createH2cFetch(h2Url);
      try {
        const slow = await h2c(`${h2Url}/large`);
        const reader = (slow.body as ReadableStream<Uint8Array>).getReader();
        let bytes = 0;
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          expect(value.every((b) => b === 0x62)).toBe(true);
          bytes += value.byteLength;
          await new Promise((resolve) => setImmediate(resolve));
        }
        expect(bytes).toBe(3 * 1024 * 1024);
        const unread = await h2c(`${h2Url}/large`);
        await unread.body?.cancel();
        const after = await h2c(`${h2Url}/echo`);
        expect(after.status).toBe(200);
        await after.text();
      } finally {
        h2c.close();
      }
    });
  });
});
