// No work for anyone without credentials (issue 12, item 1): a 300 MB body without a token is
// refused on every face before it is read, in the face's own protocol, and the server's memory
// (a `trove serve` child process, measured in /proc) does not grow with it.

import * as http2 from "node:http2";
import * as net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ChildServer, procStatusBytes, startChildServer } from "../support/child-server.js";

const BODY = 300 * 1024 * 1024;
const MiB = 1024 * 1024;
const LIST_STORES = "/trove.resources.v2.StoreService/ListStores";
/** A gRPC message prefix announcing nearly 2 GiB. */
const GRPC_PREFIX = Buffer.from([0, 0x7f, 0xff, 0xff, 0xff]);

let server: ChildServer;
beforeAll(async () => {
  // One process (--workers 1): the test reads its memory in /proc.
  server = await startChildServer({ args: ["--workers", "1"] });
  // Each face's refusal once with a small body, so that what its first use loads and compiles is
  // not counted as growth from a flood below (it came to 20.6 MiB once at load 20 without this).
  for (const [path, type] of [
    [LIST_STORES, "application/json"],
    [LIST_STORES, "application/proto"],
    [LIST_STORES, "application/grpc-web+proto"],
    ["/resources/v2/data/home/warm-up.bin", "application/octet-stream"],
  ] as const) {
    const res = await fetch(`${server.url}${path}`, {
      method: path === LIST_STORES ? "POST" : "PUT",
      headers: { "content-type": type },
      body: Buffer.alloc(1024),
    });
    await res.arrayBuffer();
    if (res.status !== 401 && res.status !== 200) throw new Error(`warm-up ${path} ${type}: ${res.status}`);
  }
  await new Promise<void>((resolve, reject) => {
    const session = http2.connect(server.url);
    session.on("error", reject);
    const req = session.request({
      ":method": "POST",
      ":path": LIST_STORES,
      "content-type": "application/grpc",
      te: "trailers",
    });
    req.on("error", reject);
    req.on("close", () => session.close(() => resolve()));
    req.resume();
    req.end(Buffer.concat([GRPC_PREFIX, Buffer.alloc(1024)]));
  });
}, 60_000);
afterAll(async () => {
  await server?.stop();
});

interface Observed {
  /** Everything the server sent back (HTTP/1.1: the raw response). */
  answer: string;
  /** Largest RSS growth of the server while the body was being sent. */
  growth: number;
}

/** Samples the server's RSS while `attack` runs. */
async function watchMemory(attack: () => Promise<string>): Promise<Observed> {
  const before = await procStatusBytes(server.pid, "VmRSS");
  let peak = before;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      peak = Math.max(peak, await procStatusBytes(server.pid, "VmRSS"));
      await new Promise((r) => setTimeout(r, 10));
    }
  })();
  try {
    const answer = await attack();
    return { answer, growth: peak - before };
  } finally {
    sampling = false;
    await sampler;
  }
}

/** Sends `head` then up to 300 MB over HTTP/1.1, as fast as the server takes it; resolves when the server closes. */
function floodHttp1(head: string | Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(server.port, "127.0.0.1");
    const block = Buffer.alloc(MiB, 0x20);
    let sent = 0;
    let answer = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close after ${sent} bytes; answer so far: ${JSON.stringify(answer)}`));
    }, 60_000);
    const pump = () => {
      while (sent < BODY && !socket.destroyed) {
        sent += block.length;
        if (!socket.write(block)) return;
      }
    };
    socket.on("data", (d: Buffer) => {
      answer += d.toString("latin1");
    });
    socket.on("drain", pump);
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(answer);
    });
    socket.write(head);
    pump();
  });
}

const post = (path: string, headers: Record<string, string>, length = BODY) =>
  `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("")}Content-Length: ${length}\r\n\r\n`;

describe("a 300 MB body without a token is refused before it is read", () => {
  it("Connect JSON: 401 with WWW-Authenticate and code unauthenticated; RSS grows by less than 20 MiB", async () => {
    const { answer, growth } = await watchMemory(() =>
      floodHttp1(post(LIST_STORES, { "Content-Type": "application/json" })),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(answer).toMatch(/\r\nWWW-Authenticate: Bearer realm="trove"/i);
    expect(answer).toMatch(/\r\nContent-Type: application\/json\r\n/i);
    expect(answer).toContain('"code":"unauthenticated"');
    expect(growth).toBeLessThan(20 * MiB);
  });

  it("Connect proto: 401 with code unauthenticated; RSS grows by less than 20 MiB", async () => {
    const { answer, growth } = await watchMemory(() =>
      floodHttp1(post(LIST_STORES, { "Content-Type": "application/proto" })),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(answer).toContain('"code":"unauthenticated"');
    expect(growth).toBeLessThan(20 * MiB);
  });

  it("gRPC-Web: trailers-only grpc-status 16 (UNAUTHENTICATED); RSS grows by less than 20 MiB", async () => {
    const head = Buffer.concat([
      Buffer.from(post(LIST_STORES, { "Content-Type": "application/grpc-web+proto" })),
      GRPC_PREFIX,
    ]);
    const { answer, growth } = await watchMemory(() => floodHttp1(head));
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer).toMatch(/\r\ngrpc-status: 16\r\n/i);
    expect(answer).toMatch(/\r\nContent-Length: 0\r\n/i);
    expect(growth).toBeLessThan(20 * MiB);
  });

  it("gRPC: one HEADERS frame with grpc-status 16 and END_STREAM; RSS grows by less than 20 MiB", async () => {
    const { answer, growth } = await watchMemory(
      () =>
        new Promise((resolve, reject) => {
          const session = http2.connect(server.url);
          session.on("error", () => {});
          const req = session.request(
            { ":method": "POST", ":path": LIST_STORES, "content-type": "application/grpc", te: "trailers" },
            { endStream: false },
          );
          const block = Buffer.alloc(MiB);
          let sent = 0;
          let answer = "";
          const timer = setTimeout(() => {
            session.destroy();
            reject(new Error(`no end after ${sent} bytes`));
          }, 60_000);
          req.on("response", (headers, flags) => {
            // END_STREAM (0x1) on the response HEADERS: a trailers-only answer.
            answer = `${headers[":status"]} grpc-status=${headers["grpc-status"]} end=${(flags & 1) === 1}`;
          });
          req.on("error", () => {});
          req.on("close", () => {
            clearTimeout(timer);
            session.destroy();
            resolve(answer);
          });
          req.resume();
          const pump = () => {
            while (sent < BODY && !req.closed) {
              sent += block.length;
              if (!req.write(block)) return;
            }
            if (sent >= BODY) req.end();
          };
          req.on("drain", pump);
          req.write(GRPC_PREFIX);
          pump();
        }),
    );
    expect(answer).toBe("200 grpc-status=16 end=true");
    expect(growth).toBeLessThan(20 * MiB);
  });

  it("REST PUT: 401 with WWW-Authenticate; RSS grows by less than 20 MiB", async () => {
    const { answer, growth } = await watchMemory(() =>
      floodHttp1(`PUT /resources/v2/data/home/big.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: ${BODY}\r\n\r\n`),
    );
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(answer).toMatch(/\r\nWWW-Authenticate: Bearer/i);
    expect(answer).toMatch(/\r\nServer: resources\/1\.0\r\n/i);
    expect(growth).toBeLessThan(20 * MiB);
  });

  it("a request that only announces 1 GiB is answered 401 without sending any of it", async () => {
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(server.port, "127.0.0.1");
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error("no answer"));
      }, 10_000);
      let text = "";
      socket.on("data", (d: Buffer) => {
        text += d.toString("latin1");
      });
      socket.on("close", () => {
        clearTimeout(timer);
        resolve(text);
      });
      socket.write(post(LIST_STORES, { "Content-Type": "application/json" }, 1024 ** 3));
    });
    expect(answer).toMatch(/^HTTP\/1\.1 401 /);
    expect(answer).toContain('"code":"unauthenticated"');
  });
});
