// A keep-alive connection's idle timeout after the event loop stalled (issue 28: a writer's PUT
// reset during a backup; docs/security.md, "Limits"). A client reuses a kept-alive connection in
// time, but the server's event loop is busy for longer than the keep-alive timeout: when it comes
// back, Node runs the expired timer before it reads the request waiting in the socket, and used to
// destroy the connection with that request unread (the kernel then answers RST: the client's
// ECONNRESET, with nothing logged and nothing counted). The listener now closes an idle connection
// only after the reads of that turn of the loop, and only when nothing came.
//
// The stall is made here, in the server's own process: the client's request is in the kernel
// before the loop is blocked, and the block outlasts the keep-alive timeout and Node's grace, so
// the timer has run out whatever the machine's load. No timing is asserted.

import * as net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../support/server.js";

let t: TestServer | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

const KEEP_ALIVE_MS = 200;
/** Node adds up to 1 s to the keep-alive timeout before its timer fires (keepAliveTimeoutBuffer). */
const NODE_GRACE_MS = 1000;

/** Blocks this process's event loop, as a long synchronous piece of work would. */
function stall(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

interface RawClient {
  socket: net.Socket;
  /** Resolves with everything received once the server closed or `answers` complete answers came. */
  answers(count: number): Promise<{ text: string; error?: string; closed: boolean }>;
}

function connect(port: number): Promise<RawClient> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    let text = "";
    let error: string | undefined;
    let closed = false;
    const waiters = new Set<() => void>();
    const wake = () => {
      for (const w of waiters) w();
    };
    socket.on("data", (d: Buffer) => {
      text += d.toString("latin1");
      wake();
    });
    socket.on("error", (err: NodeJS.ErrnoException) => {
      error = err.code ?? err.message;
    });
    socket.on("close", () => {
      closed = true;
      wake();
    });
    socket.once("connect", () => {
      socket.off("error", reject);
      resolve({
        socket,
        answers(count) {
          return new Promise((done) => {
            const check = () => {
              const complete = (text.match(/HTTP\/1\.1 \d{3} [^\r]*\r\n(?:[^\r]+\r\n)*\r\n/g) ?? []).length;
              if (closed || complete >= count) {
                waiters.delete(check);
                // The body of the last answer follows its head in the same write (small answers).
                setImmediate(() => done({ text, error, closed }));
              }
            };
            waiters.add(check);
            check();
          });
        },
      });
    });
    socket.once("error", reject);
  });
}

const put = (path: string, body: string) =>
  `PUT /resources/v2/data/home/${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

/** A server with a short keep-alive, and a raw connection to it that one PUT (answered 201) has used. */
async function keptAliveConnection(
  path: string,
  body: string,
): Promise<{ server: TestServer; client: RawClient; first: string }> {
  const server = await startServer({ limits: { keepAliveTimeout: KEEP_ALIVE_MS } });
  t = server;
  const client = await connect(server.port);
  client.socket.write(put(path, body));
  const { text } = await client.answers(1);
  expect(text).toMatch(/^HTTP\/1\.1 201 /);
  return { server, client, first: text };
}

describe("keep-alive idle timeout after a stalled event loop (issue 28, a writer's PUT reset during a backup)", () => {
  it("a PUT sent on a kept-alive connection before the server stalled past its keep-alive timeout is answered 200 and stored, not reset", async () => {
    const { server, client, first } = await keptAliveConnection("stall-first.json", '{"n":1}');
    expect(first).toMatch(/\r\nConnection: keep-alive\r\n/i);

    // The answer is out and the connection idle: the client reuses it at once (the bytes are in
    // the server's socket before the write returns), then the server's loop is busy past the timeout.
    client.socket.write(put("stall-second.json", '{"n":2}'));
    stall(KEEP_ALIVE_MS + NODE_GRACE_MS + 500);

    const second = await client.answers(2);
    expect(second.error).toBeUndefined();
    const answers = second.text.split(/(?=HTTP\/1\.1 )/);
    expect(answers).toHaveLength(2);
    expect(answers[1]).toMatch(/^HTTP\/1\.1 201 /);
    const stored = await fetch(`${server.url}/resources/v2/data/home/stall-second.json`);
    expect(stored.status).toBe(200);
    expect(await stored.text()).toBe('{"n":2}');
    client.socket.destroy();
  }, 30_000);

  it("a kept-alive connection that stays idle past the timeout is still closed, with a FIN and nothing written", async () => {
    const { client, first } = await keptAliveConnection("stall-idle.json", "{}");
    const length = first.length;
    // Nothing more is sent: the server closes the connection by itself.
    const after = await client.answers(2);
    expect(after.closed).toBe(true);
    expect(after.error).toBeUndefined();
    expect(after.text.length).toBe(length);
  }, 30_000);
});
