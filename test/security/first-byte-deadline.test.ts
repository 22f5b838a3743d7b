// The first-byte timeout after issue 14 (docs/security.md, "Limits"): the listener keeps the
// connections that sent nothing yet in arrival order with one timer for all of them, instead of a
// timer per socket. Connections that came at different times, some of which spoke in between,
// are each closed at their own deadline when silent, and never once they spoke.

import * as net from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../support/server.js";

let t: TestServer | undefined;
afterEach(async () => {
  await t?.stop();
  t = undefined;
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Client {
  socket: net.Socket;
  closed: Promise<void>;
  isClosed(): boolean;
  received(): string;
}

function connect(port: number): Promise<Client> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, "127.0.0.1");
    let received = "";
    let closed = false;
    const done = new Promise<void>((r) =>
      socket.once("close", () => {
        closed = true;
        r();
      }),
    );
    socket.on("data", (d: Buffer) => {
      received += d.toString("latin1");
    });
    socket.once("error", reject);
    socket.once("connect", () => resolve({ socket, closed: done, isClosed: () => closed, received: () => received }));
  });
}

async function answered(client: Client, count: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if ((client.received().match(/HTTP\/1\.1 \d{3} /g) ?? []).length >= count) return;
    await sleep(20);
  }
  throw new Error(`no answer ${count} on the connection: ${client.received()}`);
}

const GET = "GET /resources/v2/data/home/ HTTP/1.1\r\nHost: x\r\n\r\n";

describe("first-byte timeout, one timer for every silent connection (issue 14)", () => {
  it("silent connections that came at different times are each closed, with nothing written; one that spoke first stays open and answers again", async () => {
    t = await startServer({ limits: { firstByteTimeout: 300, keepAliveTimeout: 60_000 } });
    const { port } = t;
    // The first connection in the map speaks and leaves it: the timer set for its deadline must
    // go on to the others.
    const talker = await connect(port);
    talker.socket.write(GET);
    await answered(talker, 1);
    const silent: Client[] = [];
    for (let i = 0; i < 20; i++) {
      silent.push(await connect(port));
      await sleep(25);
    }
    await Promise.race([
      Promise.all(silent.map((c) => c.closed)),
      sleep(20_000).then(() => {
        throw new Error(`${silent.filter((c) => !c.isClosed()).length} silent connections still open`);
      }),
    ]);
    for (const c of silent) expect(c.received()).toBe("");
    // Well past its own first-byte deadline, the connection that spoke is still served.
    expect(talker.isClosed()).toBe(false);
    talker.socket.write(GET);
    await answered(talker, 2);
    expect(talker.received()).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    talker.socket.destroy();
  }, 60_000);

  it("a connection that sends its first byte within its deadline is served, and one that stays silent beside it is closed", async () => {
    t = await startServer({ limits: { firstByteTimeout: 1000, keepAliveTimeout: 60_000 } });
    const { port } = t;
    const late = await connect(port);
    const silent = await connect(port);
    // Within its deadline, after the timer for both was set.
    await sleep(300);
    late.socket.write(GET);
    await answered(late, 1);
    await Promise.race([
      silent.closed,
      sleep(20_000).then(() => {
        throw new Error("the silent connection is still open");
      }),
    ]);
    expect(silent.received()).toBe("");
    expect(late.isClosed()).toBe(false);
    late.socket.destroy();
  }, 60_000);
});
