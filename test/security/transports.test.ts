// The same request gets the same answer on every transport (issue 12, item 5), an unknown RPC
// method answers UNIMPLEMENTED in the caller's protocol (item 6), and an RPC message larger than
// the read limit is refused without being buffered (item 1).

import * as http2 from "node:http2";
import * as net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { rpcReadMaxBytes } from "../../src/server/limits.js";
import { startServer, type TestServer } from "../support/server.js";

let t: TestServer;
beforeAll(async () => {
  t = await startServer({ maxResourceSize: 1024 * 1024 });
});
afterAll(async () => {
  await t.stop();
});

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** One raw HTTP/1.1 exchange on a fresh connection: whatever the server writes until it closes. */
function http1(request: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(t.port, "127.0.0.1");
    const chunks: Buffer[] = [];
    socket.on("data", (d: Buffer) => chunks.push(d));
    socket.on("error", reject);
    socket.on("close", () => {
      const text = Buffer.concat(chunks).toString("latin1");
      const [head = "", body = ""] = text.split(/\r\n\r\n(.*)/s);
      const [statusLine = "", ...lines] = head.split("\r\n");
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const i = line.indexOf(":");
        headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
      }
      resolve({ status: Number(statusLine.split(" ")[1]), headers, body });
    });
    socket.write(`${request.replace(/\r\n$/, "")}\r\nConnection: close\r\n\r\n`);
  });
}

/** One HTTP/2 exchange; `path` may hold any byte (a latin1 string is sent byte for byte). */
function h2(headers: http2.OutgoingHttpHeaders, body?: Buffer): Promise<Answer & { endStream: boolean }> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(t.url);
    session.on("error", reject);
    const req = session.request(headers, { endStream: body === undefined });
    const chunks: Buffer[] = [];
    let status = 0;
    let endStream = false;
    const out: Record<string, string> = {};
    req.on("response", (h, flags) => {
      status = Number(h[":status"]);
      endStream = (flags & 1) === 1;
      for (const [k, v] of Object.entries(h)) if (!k.startsWith(":")) out[k] = String(v);
    });
    req.on("trailers", (h) => {
      for (const [k, v] of Object.entries(h)) out[k] = String(v);
    });
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("error", reject);
    req.on("close", () => {
      session.close();
      resolve({ status, headers: out, body: Buffer.concat(chunks).toString("utf8"), endStream });
    });
    if (body !== undefined) req.end(body);
  });
}

/** Raw bytes to a fresh HTTP/1.1 connection: everything the server writes, and how it ended the connection. */
function http1Exchange(request: string): Promise<{ text: string; ended: boolean; error?: string }> {
  return new Promise((resolve) => {
    const socket = net.connect(t.port, "127.0.0.1");
    const chunks: Buffer[] = [];
    let ended = false;
    let error: string | undefined;
    socket.on("data", (d: Buffer) => chunks.push(d));
    socket.on("end", () => {
      ended = true;
    });
    socket.on("error", (err: NodeJS.ErrnoException) => {
      error = err.code ?? err.message;
    });
    socket.on("close", () => resolve({ text: Buffer.concat(chunks).toString("latin1"), ended, error }));
    socket.end(Buffer.from(request, "latin1"));
  });
}

/** One stream on an existing HTTP/2 session. */
function h2Exchange(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
): Promise<Answer & { endStream: boolean }> {
  return new Promise((resolve, reject) => {
    const req = session.request(headers, { endStream: true });
    const chunks: Buffer[] = [];
    let status = 0;
    let endStream = false;
    const out: Record<string, string> = {};
    req.on("response", (h, flags) => {
      status = Number(h[":status"]);
      endStream = (flags & 1) === 1;
      for (const [k, v] of Object.entries(h)) if (!k.startsWith(":")) out[k] = String(v);
    });
    req.on("data", (d: Buffer) => chunks.push(d));
    req.on("error", reject);
    req.on("close", () => resolve({ status, headers: out, body: Buffer.concat(chunks).toString("utf8"), endStream }));
  });
}

describe("every transport answers alike", () => {
  it("a request target with raw UTF-8 bytes answers 400 with a reason, on HTTP/1.1 and HTTP/2", async () => {
    const raw = Buffer.from("/resources/v2/data/home/h2é.txt", "utf8").toString("latin1");
    const one = await http1(`PUT ${raw} HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx`);
    const two = await h2({ ":method": "PUT", ":path": raw }, Buffer.from("x"));
    for (const a of [one, two]) {
      expect(a.status).toBe(400);
      expect(a.headers.server).toBe("resources/1.0");
      expect(a.headers["content-type"]).toBe("text/plain; charset=utf-8");
      expect(a.body).toBe(
        "malformed HTTP request: the request target must be printable ASCII (percent-encode other bytes)\n",
      );
    }
    // Nothing was stored under a mis-decoded name.
    const listing = await fetch(`${t.url}/resources/v2/data/home/`);
    expect(await listing.text()).not.toContain("h2");
  });

  it("HEAD with a raw UTF-8 target answers 400 with Server and no body, on HTTP/1.1 and HTTP/2", async () => {
    const raw = Buffer.from("/resources/v2/data/home/h2é.txt", "utf8").toString("latin1");
    const reason = "malformed HTTP request: the request target must be printable ASCII (percent-encode other bytes)\n";

    // HTTP/1.1: the head alone, then the server ends the connection (a FIN, not a reset).
    const one = await http1Exchange(`HEAD ${raw} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(one.error).toBeUndefined();
    expect(one.ended).toBe(true);
    expect(one.text).toBe(
      "HTTP/1.1 400 Bad Request\r\nServer: resources/1.0\r\nContent-Type: text/plain; charset=utf-8\r\n" +
        `Content-Length: ${Buffer.byteLength(reason)}\r\nConnection: close\r\n\r\n`,
    );

    // The method is the refused request's, not that of an earlier one in the same read.
    const pipelined = await http1Exchange(
      `GET /resources/v2/data/home/ HTTP/1.1\r\nHost: x\r\n\r\nHEAD ${raw} HTTP/1.1\r\nHost: x\r\n\r\n`,
    );
    expect(pipelined.error).toBeUndefined();
    expect(pipelined.ended).toBe(true);
    expect(pipelined.text.endsWith(one.text)).toBe(true);
    expect(pipelined.text).not.toContain(reason);

    // A GET still gets the reason.
    const get = await http1Exchange(`GET ${raw} HTTP/1.1\r\nHost: x\r\n\r\n`);
    expect(get.text.endsWith(`\r\n\r\n${reason}`)).toBe(true);

    // HTTP/2: headers with END_STREAM and no DATA; the session stays usable.
    const session = http2.connect(t.url);
    try {
      const head = await h2Exchange(session, { ":method": "HEAD", ":path": raw });
      expect(head.status).toBe(400);
      expect(head.headers.server).toBe("resources/1.0");
      expect(head.headers["content-type"]).toBe("text/plain; charset=utf-8");
      expect(head.endStream).toBe(true);
      expect(head.body).toBe("");
      const after = await h2Exchange(session, { ":method": "GET", ":path": "/resources/v2/data/home/" });
      expect(after.status).toBe(200);
      expect(session.destroyed).toBe(false);
    } finally {
      session.close();
    }
  });

  it("CONNECT answers 405 with Allow, Server and a reason, on HTTP/1.1 and HTTP/2", async () => {
    const one = await http1("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443");
    const two = await h2({ ":method": "CONNECT", ":authority": "example.com:443" });
    for (const a of [one, two]) {
      expect(a.status).toBe(405);
      expect(a.headers.server).toBe("resources/1.0");
      expect(a.headers.allow).toBe("GET, HEAD, PUT, POST, DELETE");
      expect(a.body).toBe("CONNECT is not supported\n");
    }
  });

  it("OPTIONS answers 405 with Allow, Server and a reason, on HTTP/1.1 and HTTP/2", async () => {
    const one = await http1("OPTIONS /resources/v2/data/home/ HTTP/1.1\r\nHost: x");
    const two = await h2({ ":method": "OPTIONS", ":path": "/resources/v2/data/home/" });
    for (const a of [one, two]) {
      expect(a.status).toBe(405);
      expect(a.headers.server).toBe("resources/1.0");
      expect(a.headers["content-type"]).toBe("text/plain; charset=utf-8");
      expect(a.body).toBe("OPTIONS is not supported on /resources/v2/data/home/\n");
    }
  });

  it("a path outside /resources/, /insights/ and the RPC services answers 404 with Server and a reason", async () => {
    // (`/` redirects to the console: test/console/server.test.ts.)
    for (const path of ["/nothing/here", "/trove.resources.v2.StoreService/ListStores/extra", "/favicon.ico"]) {
      const one = await http1(`GET ${path} HTTP/1.1\r\nHost: x`);
      const two = await h2({ ":method": "GET", ":path": path });
      for (const a of [one, two]) {
        expect(a.status, path).toBe(404);
        expect(a.headers.server).toBe("resources/1.0");
        expect(a.headers["content-type"]).toBe("text/plain; charset=utf-8");
        expect(a.body).toBe(`no such endpoint: ${path}\n`);
      }
    }
  });
});

describe("an unknown RPC method answers UNIMPLEMENTED in the caller's protocol", () => {
  const paths = ["/trove.resources.v2.StoreService/NoSuchMethod", "/no.such.Service/Method"];

  it("Connect: HTTP 404 with the JSON error code unimplemented", async () => {
    for (const path of paths) {
      const res = await fetch(`${t.url}${path}`, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: "{}",
      });
      expect(res.status).toBe(404);
      expect(res.headers.get("content-type")).toBe("application/json");
      expect(await res.json()).toEqual({ code: "unimplemented", message: `${path.slice(1)} is not implemented` });
    }
  });

  it("Connect streaming: an end-stream message with the error unimplemented", async () => {
    const res = await fetch(`${t.url}${paths[0]}`, {
      method: "POST",
      headers: { "Content-Type": "application/connect+json" },
      body: Buffer.from([0, 0, 0, 0, 2, 0x7b, 0x7d]),
    });
    expect(res.status).toBe(200);
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes[0]).toBe(2);
    expect(JSON.parse(bytes.subarray(5).toString("utf8")).error.code).toBe("unimplemented");
  });

  it("gRPC: trailers-only grpc-status 12", async () => {
    for (const path of paths) {
      const a = await h2(
        { ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" },
        Buffer.from([0, 0, 0, 0, 0]),
      );
      expect(a.status).toBe(200);
      expect(a.endStream).toBe(true);
      expect(a.headers["grpc-status"]).toBe("12");
    }
  });

  it("gRPC-Web: grpc-status 12", async () => {
    const res = await fetch(`${t.url}${paths[0]}`, {
      method: "POST",
      headers: { "Content-Type": "application/grpc-web+proto" },
      body: Buffer.from([0, 0, 0, 0, 0]),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("grpc-status")).toBe("12");
  });
});

describe("RPC read limits follow the largest resource", () => {
  const limit = rpcReadMaxBytes(1024 * 1024);

  it("Connect: a declared body above the limit answers resource_exhausted without sending it", async () => {
    const a = await http1(
      `POST /trove.resources.v2.StoreService/ListStores HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${limit + 1}`,
    );
    expect(a.status).toBe(429);
    expect(JSON.parse(a.body).code).toBe("resource_exhausted");
  });

  it("gRPC: a message announced above the limit ends with RESOURCE_EXHAUSTED", async () => {
    const prefix = Buffer.alloc(5);
    prefix.writeUInt32BE(limit + 1, 1);
    const a = await h2(
      {
        ":method": "POST",
        ":path": "/trove.resources.v2.ResourceService/Write",
        "content-type": "application/grpc",
        te: "trailers",
      },
      prefix,
    );
    expect(a.headers["grpc-status"]).toBe("8");
  });
});
