// Connections that never finish a request are closed (issue 12, item 2): 200 silent or slow
// connections against a `trove serve` child process with short timeouts are all closed, a normal
// GET during the attack still answers, and the server's open descriptors come back to their idle
// count. Long polls, watches and uploads that make progress are not cut by the same timeouts.

import { readdir } from "node:fs/promises";
import * as http from "node:http";
import * as http2 from "node:http2";
import * as net from "node:net";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChangeService } from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TIMEOUT_SLACK_MS } from "../../src/server/limits.js";
import { type ChildServer, startChildServer } from "../support/child-server.js";
import { until } from "../support/observe.js";
import { startServer, type TestServer } from "../support/server.js";

// One process (--workers 1): the tests read its descriptors in /proc.
const SHORT = [
  "--workers",
  "1",
  "--first-byte-timeout",
  "1",
  "--headers-timeout",
  "1",
  "--keep-alive-timeout",
  "1",
  "--session-idle-timeout",
  "1",
  "--poll-wait",
  "3",
  // The slow upload below brings about 13 bytes a second: above this minimum rate (issue 29), which
  // test/security/slow-bodies.test.ts checks on its own.
  "--min-body-rate",
  "1",
];

const openDescriptors = async (pid: number) => (await readdir(`/proc/${pid}/fd`)).length;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `check` holds, for at most `ms` (a generous bound on something that must happen). */
async function eventually(check: () => Promise<boolean> | boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await sleep(100);
  }
  return check();
}

describe("200 slow or silent connections", () => {
  let server: ChildServer;
  beforeAll(async () => {
    server = await startChildServer({ args: SHORT });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it("are all closed, the partial heads answered 408, while a GET still answers; descriptors return to idle", async () => {
    // Idle: no connection of ours left open (keep-alive ones close after 1 s).
    await sleep(1500);
    const idle = await openDescriptors(server.pid);

    const kinds = ["silent", "partial head", "h2 preface only", "one byte"] as const;
    const attackers = Array.from({ length: 200 }, (_, i) => {
      const kind = kinds[i % kinds.length] as (typeof kinds)[number];
      const socket = net.connect(server.port, "127.0.0.1");
      let received = "";
      const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
      socket.on("data", (d: Buffer) => {
        received += d.toString("latin1");
      });
      socket.on("error", () => {});
      socket.once("connect", () => {
        if (kind === "partial head") socket.write("GET /resources/v2/data/home/ HTTP/1.1\r\nHost: x\r\n");
        if (kind === "h2 preface only") socket.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        if (kind === "one byte") socket.write("G");
      });
      return { kind, socket, closed, received: () => received };
    });
    // Slowloris: the partial heads grow by a header byte now and then, never finishing.
    const drip = setInterval(() => {
      for (const a of attackers) if (a.kind === "partial head" && !a.socket.destroyed) a.socket.write("X");
    }, 200);
    try {
      const agent = new http.Agent({ keepAlive: false });
      const status = await new Promise<number>((resolve, reject) => {
        http
          .get(
            `${server.url}/resources/v2/data/home/`,
            { agent, headers: { authorization: server.authorization } },
            (res) => {
              res.resume();
              res.once("end", () => resolve(res.statusCode ?? 0));
            },
          )
          .once("error", reject);
      });
      expect(status).toBe(200);

      const allClosed = await Promise.race([
        Promise.all(attackers.map((a) => a.closed)).then(() => true),
        sleep(20_000).then(() => false),
      ]);
      expect(allClosed).toBe(true);
      for (const a of attackers.filter((x) => x.kind === "partial head")) {
        expect(a.received()).toMatch(/^HTTP\/1\.1 408 Request Timeout\r\nServer: resources\/1\.0\r\n/);
      }
      expect(await eventually(async () => (await openDescriptors(server.pid)) <= idle, 10_000)).toBe(true);
    } finally {
      clearInterval(drip);
      for (const a of attackers) a.socket.destroy();
    }
  });

  it("a long poll, a WatchChanges stream and a slow upload that makes progress outlive the timeouts", async () => {
    const authorization = server.authorization;
    // REST long poll: open for up to 3 s, longer than every timeout.
    const cursor = await fetch(`${server.url}/resources/v2/poll`, { headers: { authorization } });
    const line = (await cursor.text()).trim().split("\n")[0] ?? "";
    const eventId = line.split(" ").at(-1);
    const poll = fetch(`${server.url}/resources/v2/poll?store=home:${eventId}&wait=3`, { headers: { authorization } });

    // gRPC WatchChanges over h2c: the session holds a stream, so it is not idle.
    const transport = createGrpcTransport({ baseUrl: server.url });
    const watch = (async () => {
      const controller = new AbortController();
      const stop = setTimeout(() => controller.abort(), 3000);
      let messages = 0;
      try {
        for await (const _ of createClient(ChangeService, transport).watchChanges(
          { cursors: [] },
          { signal: controller.signal, headers: { authorization } },
        )) {
          messages++;
        }
      } catch (err) {
        if (!controller.signal.aborted) throw err;
      } finally {
        clearTimeout(stop);
      }
      return messages;
    })();

    // A PUT whose body arrives a few bytes every 300 ms for 3 s (above --min-body-rate 1).
    const upload = new Promise<number>((resolve, reject) => {
      const req = http.request(`${server.url}/resources/v2/data/home/slow.txt`, {
        method: "PUT",
        headers: { authorization, "Content-Length": 10 * 4, "Content-Type": "text/plain" },
        agent: new http.Agent({ keepAlive: false }),
      });
      req.once("response", (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.once("error", reject);
      let i = 0;
      const tick = setInterval(() => {
        req.write("abc\n");
        if (++i === 10) {
          clearInterval(tick);
          req.end();
        }
      }, 300);
    });

    // The poll ends with the upload's event (200) or, when the upload lands after its 3 s wait, 204.
    const polled = await poll;
    const text = await polled.text();
    if (polled.status === 200) expect(text).toContain("slow.txt");
    else expect(polled.status).toBe(204);
    expect(await watch).toBeGreaterThan(0);
    expect(await upload).toBe(201);
  });
});

// Clients that never read what the server sends: they never see its FIN, so only the server can
// end their connections. A 3 s headers timeout is checked every 750 ms (Node's default would be
// every 30 s); the server's descriptors are the observation, since these clients read nothing.
describe("200 slow or silent connections that never read", () => {
  let server: ChildServer;
  beforeAll(async () => {
    server = await startChildServer({
      args: [
        "--workers",
        "1",
        "--first-byte-timeout",
        "2",
        "--headers-timeout",
        "3",
        "--keep-alive-timeout",
        "2",
        "--session-idle-timeout",
        "2",
      ],
    });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  it("are closed by the server: its descriptors return to idle, and a dripping client's next write finds the connection gone", async () => {
    await sleep(3500);
    const idle = await openDescriptors(server.pid);

    const kinds = ["silent", "dripping head", "h2 preface only", "unfinished head"] as const;
    const attackers = Array.from({ length: 200 }, (_, i) => {
      const kind = kinds[i % kinds.length] as (typeof kinds)[number];
      const socket = net.connect(server.port, "127.0.0.1");
      // No 'data' listener and no resume(): nothing the server sends is ever read.
      const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
      socket.on("error", () => {});
      socket.once("connect", () => {
        if (kind === "dripping head" || kind === "unfinished head")
          socket.write("GET /resources/v2/data/home/ HTTP/1.1\r\nHost: x\r\n");
        if (kind === "h2 preface only") socket.write("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
      });
      return { kind, socket, closed };
    });
    const drip = setInterval(() => {
      for (const a of attackers) if (a.kind === "dripping head" && !a.socket.destroyed) a.socket.write("X");
    }, 500);
    try {
      const agent = new http.Agent({ keepAlive: false });
      const status = await new Promise<number>((resolve, reject) => {
        http
          .get(
            `${server.url}/resources/v2/data/home/`,
            { agent, headers: { authorization: server.authorization } },
            (res) => {
              res.resume();
              res.once("end", () => resolve(res.statusCode ?? 0));
            },
          )
          .once("error", reject);
      });
      expect(status).toBe(200);
      expect(await openDescriptors(server.pid)).toBeGreaterThanOrEqual(idle + 150);

      // Due within 3 s plus the documented slack (about 5 s); waited for much longer.
      const due = 3000 + Math.max(TIMEOUT_SLACK_MS.headers, TIMEOUT_SLACK_MS.sessionIdle);
      expect(await eventually(async () => (await openDescriptors(server.pid)) <= idle, due + 25_000)).toBe(true);
      const dripping = attackers.filter((a) => a.kind === "dripping head");
      const allDrippingClosed = await Promise.race([
        Promise.all(dripping.map((a) => a.closed)).then(() => true),
        sleep(10_000).then(() => false),
      ]);
      expect(allDrippingClosed).toBe(true);
    } finally {
      clearInterval(drip);
      for (const a of attackers) a.socket.destroy();
    }
  }, 60_000);
});

describe("the connection cap", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startServer({ limits: { maxConnections: 4 } });
  });
  afterAll(async () => {
    await t.stop();
  });

  it("beyond it, HTTP/1.1 gets 503 with Retry-After and a reason, HTTP/2 is closed; below it again, requests answer", async () => {
    const held = await Promise.all(
      Array.from(
        { length: 4 },
        () =>
          new Promise<net.Socket>((resolve) => {
            const s = net.connect(t.port, "127.0.0.1", () => resolve(s));
          }),
      ),
    );
    try {
      const answer = await new Promise<string>((resolve) => {
        const s = net.connect(t.port, "127.0.0.1");
        let text = "";
        s.on("data", (d: Buffer) => {
          text += d.toString("latin1");
        });
        s.on("close", () => resolve(text));
        s.write("GET /resources/v2/data/home/ HTTP/1.1\r\nHost: x\r\n\r\n");
      });
      expect(answer).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
      expect(answer).toMatch(/\r\nServer: resources\/1\.0\r\n/);
      expect(answer).toMatch(/\r\nRetry-After: 1\r\n/);
      expect(answer).toMatch(/\r\n\r\ntoo many connections: this server keeps at most 4 open\n$/);

      // A refused client that never reads and goes on sending: the server still ends the connection
      // (its next write meets a reset), it does not keep the descriptor until the client closes.
      const refusedClosed = await new Promise<boolean>((resolve) => {
        const s = net.connect(t.port, "127.0.0.1");
        s.on("error", () => {});
        const tick = setInterval(() => {
          if (!s.destroyed) s.write("X-Filler: x\r\n");
        }, 200);
        const giveUp = setTimeout(() => {
          clearInterval(tick);
          s.destroy();
          resolve(false);
        }, 15_000);
        s.once("close", () => {
          clearInterval(tick);
          clearTimeout(giveUp);
          resolve(true);
        });
        s.write("GET /resources/v2/data/home/ HTTP/1.1\r\nHost: x\r\n");
      });
      expect(refusedClosed).toBe(true);

      const h2closed = await new Promise<boolean>((resolve) => {
        const session = http2.connect(t.url);
        session.on("error", () => {});
        session.once("close", () => resolve(true));
      });
      expect(h2closed).toBe(true);
    } finally {
      for (const s of held) s.destroy();
    }
    expect(
      await eventually(async () => {
        const res = await fetch(`${t.url}/resources/v2/data/home/`).catch(() => undefined);
        return res?.status === 200;
      }, 10_000),
    ).toBe(true);
  });
});

/** A raw HTTP/1.1 connection: `ask` sends a request and resolves with its whole answer (Content-Length). */
function keepAlive(port: number): { socket: net.Socket; closed: Promise<void>; ask(request: string): Promise<string> } {
  const socket = net.connect(port, "127.0.0.1");
  socket.on("error", () => {});
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  let text = "";
  let waiting: ((answer: string) => void) | undefined;
  socket.on("data", (d: Buffer) => {
    text += d.toString("latin1");
    const head = text.indexOf("\r\n\r\n");
    const length = /\r\ncontent-length: (\d+)\r\n/i.exec(text.slice(0, head + 2))?.[1];
    if (head < 0 || length === undefined || text.length < head + 4 + Number(length)) return;
    const answer = text.slice(0, head + 4 + Number(length));
    text = text.slice(answer.length);
    waiting?.(answer);
  });
  return {
    socket,
    closed,
    ask: (request) =>
      new Promise((resolve) => {
        waiting = resolve;
        socket.write(request);
      }),
  };
}

const GET_HEALTHZ = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
/** An ordinary GET on a connection of its own, after it is answered closed: the metrics, as the server counts them then. */
const GET_METRICS = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";

describe("idle connections at the connection cap (issue 29, item 3: unauthenticated connections get the smallest budget)", () => {
  it("with --max-connections 3 and 3 idle keep-alive connections, a new GET answers 200 and the longest idle one is closed", async () => {
    const t = await startServer({ limits: { maxConnections: 3 } });
    const idle = [keepAlive(t.port), keepAlive(t.port), keepAlive(t.port)];
    try {
      // One after the other: the first has been idle the longest.
      for (const c of idle) expect(await c.ask(GET_HEALTHZ)).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      const answer = await keepAlive(t.port).ask(GET_METRICS);
      expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(answer).toMatch(/\ntrove_limit_refusals_total\{limit="idle_evicted"\} 1\n/);
      expect(answer).toMatch(/\ntrove_limit_refusals_total\{limit="connections"\} 0\n/);
      await idle[0]?.closed;
      // The others were not closed: each still answers on its connection.
      for (const c of idle.slice(1)) expect(await c.ask(GET_HEALTHZ)).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    } finally {
      for (const c of idle) c.socket.destroy();
      await t.stop();
    }
  });

  it("an HTTP/2 session with no open stream is idle too: with --max-connections 2 and 2 such sessions, a new GET answers and the first session gets GOAWAY", async () => {
    const t = await startServer({ limits: { maxConnections: 2 } });
    const sessions = [http2.connect(t.url), http2.connect(t.url)];
    try {
      const goaway: boolean[] = [];
      const closed = sessions.map((session, i) => {
        session.on("error", () => {});
        session.once("goaway", () => {
          goaway[i] = true;
        });
        return new Promise<void>((resolve) => session.once("close", () => resolve()));
      });
      // Each session is established (its PING answered), the first one first.
      for (const session of sessions) await new Promise((resolve) => session.ping(resolve));
      const answer = await keepAlive(t.port).ask(GET_METRICS);
      expect(answer).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(answer).toMatch(/\ntrove_limit_refusals_total\{limit="idle_evicted"\} 1\n/);
      await closed[0];
      expect(goaway[0]).toBe(true);
      expect(sessions[1]?.closed || sessions[1]?.destroyed).toBe(false);
    } finally {
      for (const session of sessions) session.destroy();
      await t.stop();
    }
  });

  it("connections with a request in flight or a head coming are not idle: at the cap a new connection is refused 503 as before", async () => {
    const t = await startServer({ limits: { maxConnections: 3, maxLongLived: 2 }, pollWait: 300_000 });
    const busy = [keepAlive(t.port), keepAlive(t.port), keepAlive(t.port)];
    try {
      const status = await busy[0]?.ask("GET /resources/v2/poll HTTP/1.1\r\nHost: x\r\n\r\n");
      const cursor = /RESET home (\d+)/.exec(status ?? "")?.[1];
      // Two connections had an answer, then began a long poll: a request in flight on each.
      await busy[1]?.ask(GET_HEALTHZ);
      for (const c of busy.slice(0, 2)) {
        c.socket.write(`GET /resources/v2/poll?store=home:${cursor}&wait=300 HTTP/1.1\r\nHost: x\r\n\r\n`);
      }
      // The third is sending its first head.
      busy[2]?.socket.write("GET /healthz HTTP/1.1\r\n");
      await until(() => t.server.notifier.waiterCount === 2, "two parked polls");
      const answer = await keepAlive(t.port).ask(GET_METRICS);
      expect(answer).toMatch(/^HTTP\/1\.1 503 Service Unavailable\r\n/);
      expect(answer).toMatch(/\r\n\r\ntoo many connections: this server keeps at most 3 open\n$/);
      // None of them was closed: the polls are parked, the head is answered once complete.
      expect(t.server.notifier.waiterCount).toBe(2);
      expect(await busy[2]?.ask("Host: x\r\n\r\n")).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    } finally {
      for (const c of busy) c.socket.destroy();
      await t.stop();
    }
  });
});
