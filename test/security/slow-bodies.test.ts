// Slow clients (issue 29, item 4): a request body slower than --min-body-rate is answered 408 and
// closed, on HTTP/1.1 and HTTP/2, and nothing of it is stored; an HTTP/2 session with no open stream
// closes after --session-idle-timeout whatever PINGs it sends; an unfinished header block is held no
// longer than --headers-timeout; an early refusal lets a small body finish before the stream ends.
// Plain Node clients (net, http2); small configured limits; assertions on what the client observes.

import * as http2 from "node:http2";
import * as net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createJwtAuthenticator } from "../../src/auth/verifier.js";
import { AUDIENCE, type Issuer, startIssuer } from "../auth/support.js";
import { sample, scrape, until } from "../support/observe.js";
import { startServer, type TestServer } from "../support/server.js";

/** A raw TCP client: what it received, and whether the server closed the connection. */
function rawClient(port: number): { socket: net.Socket; received: () => string; closed: Promise<void> } {
  const socket = net.connect(port, "127.0.0.1");
  let text = "";
  socket.on("data", (d: Buffer) => {
    text += d.toString("latin1");
  });
  socket.on("error", () => {});
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  return { socket, received: () => text, closed };
}

describe("the minimum request-body rate (issue 29, item 4)", () => {
  let t: TestServer;
  beforeAll(async () => {
    // Windows of 1 s; 1,000 bytes a second.
    t = await startServer({ limits: { headersTimeout: 1000, minBodyRate: 1000 } });
  });
  afterAll(async () => {
    await t.stop();
  });

  it("HTTP/1.1: a body that stops coming is answered 408 with its reason and closed; nothing is stored", async () => {
    const c = rawClient(t.port);
    c.socket.write(
      "PUT /resources/v2/data/home/trickle.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n0123456789",
    );
    await c.closed;
    expect(c.received()).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\n/);
    expect(c.received()).toMatch(/\r\nConnection: close\r\n/i);
    expect(c.received()).toMatch(/\r\n\r\nthe request body came slower than 1000 bytes a second over 1 s\n$/);
    expect((await fetch(`${t.url}/resources/v2/data/home/trickle.txt`)).status).toBe(404);
    const metrics = await scrape(t.url);
    expect(sample(metrics, "trove_limit_refusals_total", { limit: "body_rate" })).toBeGreaterThanOrEqual(1);
  });

  it("HTTP/2: a body that stops coming is answered 408 and its stream ended; nothing is stored", async () => {
    const session = http2.connect(t.url);
    session.on("error", () => {});
    try {
      const req = session.request({
        ":method": "PUT",
        ":path": "/resources/v2/data/home/trickle-h2.txt",
        "content-length": "100000",
      });
      req.on("error", () => {});
      let status = 0;
      let body = "";
      req.once("response", (h) => {
        status = Number(h[":status"]);
      });
      req.setEncoding("utf8");
      req.on("data", (d: string) => {
        body += d;
      });
      const closed = new Promise((resolve) => req.once("close", resolve));
      req.write("0123456789");
      await closed;
      expect(status).toBe(408);
      expect(body).toBe("the request body came slower than 1000 bytes a second over 1 s\n");
    } finally {
      session.destroy();
    }
    expect((await fetch(`${t.url}/resources/v2/data/home/trickle-h2.txt`)).status).toBe(404);
  });

  it("a body that keeps the rate is not cut, however long it takes in all", async () => {
    const slow = await startServer({ limits: { headersTimeout: 1000, minBodyRate: 10 } });
    try {
      const c = rawClient(slow.port);
      const chunks = 8;
      c.socket.write(
        `PUT /resources/v2/data/home/steady.txt HTTP/1.1\r\nHost: x\r\nContent-Length: ${chunks * 1024}\r\nConnection: close\r\n\r\n`,
      );
      // 1 KiB every 300 ms: a hundred times the minimum, for more than two windows.
      for (let i = 0; i < chunks; i++) {
        await new Promise((r) => setTimeout(r, 300));
        c.socket.write("x".repeat(1024));
      }
      await c.closed;
      expect(c.received()).toMatch(/^HTTP\/1\.1 201 Created\r\n/);
      const stored = await fetch(`${slow.url}/resources/v2/data/home/steady.txt`);
      expect([stored.status, (await stored.text()).length]).toEqual([200, chunks * 1024]);
    } finally {
      await slow.stop();
    }
  });
});

describe("HTTP/2 sessions without an open stream (issue 29, item 4)", () => {
  let t: TestServer;
  beforeAll(async () => {
    // The idle timeout long, the head's short: what closes a session below is the rule under test.
    t = await startServer({ limits: { sessionIdleTimeout: 1000, headersTimeout: 1000 } });
  });
  afterAll(async () => {
    await t.stop();
  });

  // Node's own session timeout (the mechanism before issue 29) ignores PINGs too unless the session
  // has a `ping` listener: with the listener's timing reverted this case fails at its metric, and
  // with a `ping` listener added as well it fails at the close (docs/security.md, "Slow clients").
  it("a session that only PINGs is closed after --session-idle-timeout: PINGs are not activity", async () => {
    const session = http2.connect(t.url);
    session.on("error", () => {});
    let pongs = 0;
    const closed = new Promise<void>((resolve) => session.once("close", () => resolve()));
    const pinger = setInterval(() => {
      if (!session.closed && !session.destroyed) session.ping((err) => (err ? undefined : pongs++));
    }, 100);
    try {
      await closed;
      expect(pongs).toBeGreaterThan(0);
    } finally {
      clearInterval(pinger);
      session.destroy();
    }
    const metrics = await scrape(t.url);
    expect(sample(metrics, "trove_limit_refusals_total", { limit: "session_idle" })).toBeGreaterThanOrEqual(1);
  });

  it("an unfinished header block is held no longer than --headers-timeout, whatever the idle timeout", async () => {
    const s = await startServer({ limits: { sessionIdleTimeout: 3_600_000, headersTimeout: 1000 } });
    try {
      const c = rawClient(s.port);
      c.socket.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
      c.socket.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0])); // SETTINGS
      // HEADERS on stream 1 with END_STREAM and without END_HEADERS: `:method: GET`, then nothing.
      c.socket.write(Buffer.from([0, 0, 1, 1, 0x01, 0, 0, 0, 1, 0x82]));
      await c.closed;
      // The server's GOAWAY (frame type 7) came before the close.
      expect(Buffer.from(c.received(), "latin1").includes(Buffer.from([0x07, 0x00, 0x00, 0x00, 0x00, 0x00]))).toBe(
        true,
      );
      const metrics = await scrape(s.url);
      expect(sample(metrics, "trove_limit_refusals_total", { limit: "headers" })).toBe(1);
    } finally {
      await s.stop();
    }
  });

  it("a session with an open stream (a parked poll) is not closed, PINGs or not", async () => {
    const s = await startServer({ limits: { sessionIdleTimeout: 1000, headersTimeout: 1000 }, pollWait: 300_000 });
    const session = http2.connect(s.url);
    session.on("error", () => {});
    try {
      const status = await new Promise<string>((resolve) => {
        const r = session.request({ ":path": "/resources/v2/poll" });
        let text = "";
        r.setEncoding("utf8");
        r.on("data", (d: string) => {
          text += d;
        });
        r.on("end", () => resolve(text));
      });
      const cursor = /^RESET home (\d+)$/m.exec(status)?.[1];
      const poll = session.request({ ":path": `/resources/v2/poll?store=home:${cursor}&wait=300` });
      poll.on("error", () => {});
      await until(() => s.server.notifier.waiterCount === 1, "the parked poll");
      // Three idle timeouts and more: the session stays, the poll stays parked.
      const idleCloses = async () =>
        sample(await scrape(s.url), "trove_limit_refusals_total", {
          limit: "session_idle",
        });
      // Another session, idle, is closed meanwhile: proof that the checks ran.
      const other = http2.connect(s.url);
      other.on("error", () => {});
      await new Promise<void>((resolve) => other.once("close", () => resolve()));
      expect(await idleCloses()).toBe(1);
      expect(session.closed || session.destroyed).toBe(false);
      expect(s.server.notifier.waiterCount).toBe(1);
      poll.close();
    } finally {
      session.destroy();
      await s.stop();
    }
  });
});

describe("an early refusal on HTTP/2 lets a small body finish (issue 29, item 4)", () => {
  let issuer: Issuer;
  let t: TestServer;
  beforeAll(async () => {
    issuer = await startIssuer();
    t = await startServer({
      auth: createJwtAuthenticator({ issuer: issuer.url, audience: AUDIENCE, jwksCooldown: 0 }),
    });
  });
  afterAll(async () => {
    await t?.stop();
    await issuer?.stop();
  });

  it("a PUT without a token whose body comes after the 401 sends it whole: the stream ends normally, not reset", async () => {
    const session = http2.connect(t.url);
    session.on("error", () => {});
    try {
      const req = session.request({
        ":method": "PUT",
        ":path": "/resources/v2/data/home/refused.txt",
        "content-length": "11",
      });
      let body = "";
      let status = 0;
      req.setEncoding("utf8");
      req.on("data", (d: string) => {
        body += d;
      });
      req.on("error", () => {});
      req.once("response", (h) => {
        status = Number(h[":status"]);
      });
      // As a slow curl does: the body goes after the answer has arrived. Its write is cancelled
      // (ECANCELED) if the server reset the stream first.
      const written = new Promise<Error | null | undefined>((resolve) =>
        req.once("end", () =>
          setImmediate(() => {
            req.write("hello world", resolve);
            req.end();
          }),
        ),
      );
      const closed = new Promise((resolve) => req.once("close", resolve));
      await closed;
      expect(status).toBe(401);
      expect(body).toMatch(/token/i);
      expect(await written).toBeFalsy();
      expect(req.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    } finally {
      session.destroy();
    }
    // Nothing was stored.
    const token = await issuer.token({ trove_grants: [{ store: "*", ops: ["read"] }] });
    const read = await fetch(`${t.url}/resources/v2/data/home/refused.txt`, {
      headers: { Authorization: `Bearer ${token}` },
    });
    expect(read.status).toBe(404);
  });

  it("a body announced larger than 64 KiB is not waited for: the stream is reset after the 401", async () => {
    const session = http2.connect(t.url);
    session.on("error", () => {});
    try {
      const req = session.request({
        ":method": "PUT",
        ":path": "/resources/v2/data/home/large.bin",
        "content-length": String(10 * 1024 * 1024),
      });
      req.on("error", () => {});
      let status = 0;
      req.once("response", (h) => {
        status = Number(h[":status"]);
      });
      req.resume();
      await new Promise((resolve) => req.once("close", resolve));
      expect(status).toBe(401);
      // The client never sent its body: the server's reset closed the stream, with NO_ERROR ("stop sending").
      expect(req.rstCode).toBe(http2.constants.NGHTTP2_NO_ERROR);
    } finally {
      session.destroy();
    }
  });
});
