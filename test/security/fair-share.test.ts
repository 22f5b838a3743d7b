// Fair under pressure (issue 29): long-lived work has a budget of its own below the connection cap,
// so short requests keep the rest; the default budgets come from the open-file limit and the memory.
// Small configured limits keep the cases fast; they assert statuses, reasons and which client is refused.

import { execFile } from "node:child_process";
import * as net from "node:net";
import { promisify } from "node:util";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { Health as HealthService } from "@trove/sdk/gen/grpc/health/v1/health_pb.js";
import { ChangeService } from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import {
  ResourceService,
  WriteManyRequestSchema,
  WriteManyResponseSchema,
} from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRestClient, createTroveClient, fromConnectError, TooManyRequestsError } from "../../sdk/src/index.js";
import { createJwtAuthenticator } from "../../src/auth/verifier.js";
import { defaultMaxConnections, defaultMaxLongLived } from "../../src/server/capacity.js";
import { parseServeArgs, type ServeConfig } from "../../src/server/config.js";
import { ADMIN, AUDIENCE, type Issuer, startIssuer } from "../auth/support.js";
import { sample, scrape, until } from "../support/observe.js";
import { startServer, type TestServer } from "../support/server.js";

/** The current event id of the store `home` (a status poll). */
async function cursorOf(url: string, headers: Record<string, string> = {}): Promise<string> {
  const text = await (await fetch(`${url}/resources/v2/poll`, { headers })).text();
  const cursor = /^RESET home (\d+)$/m.exec(text)?.[1];
  if (cursor === undefined) throw new Error(`no cursor in ${JSON.stringify(text)}`);
  return cursor;
}

/** A long poll on its own connection that the test ends by aborting it. */
function park(
  url: string,
  cursor: string,
  headers: Record<string, string> = {},
): { answer: Promise<Response | string>; abort(): void } {
  const controller = new AbortController();
  const answer = fetch(`${url}/resources/v2/poll?store=home:${cursor}&wait=300`, {
    headers,
    signal: controller.signal,
  }).catch((err: Error) => err.name);
  return { answer, abort: () => controller.abort() };
}

/** Larger than the socket buffers between a client that reads nothing and the server: its download stays in flight. */
const BIG = 24 * 1024 * 1024;

/** A GET whose client never reads its answer: the download stays in flight until `close`. */
function heldDownload(port: number, path: string, headers: Record<string, string> = {}): { close(): void } {
  const socket = net.connect(port, "127.0.0.1");
  socket.pause();
  socket.on("error", () => {});
  const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`);
  socket.write(`GET ${path} HTTP/1.1\r\nHost: x\r\n${lines.join("")}\r\n`);
  return { close: () => socket.destroy() };
}

/** A Read of `path` in "home" on `transport`: the error it ends with, or the bytes it read. */
async function readVia(transport: Transport, path: string): Promise<ConnectError | number> {
  try {
    let bytes = 0;
    for await (const m of createClient(ResourceService, transport).read({ store: "home", path })) {
      bytes += m.chunk.byteLength;
    }
    return bytes;
  } catch (err) {
    return ConnectError.from(err);
  }
}

const config = (args: string[], openFiles: number | undefined, memory = 24 * 2 ** 30) =>
  parseServeArgs(args, {}, () => ({ openFiles, memory })) as ServeConfig;

describe("capacity: the default connection budget (issue 29, item 1)", () => {
  it("comes from the open-file limit, less a reserve, and from a quarter of the memory, whichever is smaller", () => {
    // This machine's kind: a 20,000 limit, 24 GiB.
    expect(defaultMaxConnections({ openFiles: 20_000, memory: 24 * 2 ** 30 })).toBe(15_795);
    // systemd's default hard limit, which Node raises the soft one to: memory decides (1 GiB cgroup).
    expect(defaultMaxConnections({ openFiles: 524_288, memory: 2 ** 30 })).toBe(4096);
    // Where the limit cannot be read, POSIX's usual 1,024 is assumed.
    expect(defaultMaxConnections({ openFiles: undefined, memory: 24 * 2 ** 30 })).toBe(614);
    // A tiny limit still serves a few clients.
    expect(defaultMaxConnections({ openFiles: 100, memory: 2 ** 30 })).toBe(64);
  });

  it("leaves room for 10,000 parked polls and streams at the defaults where the limit allows it, and a fifth for short requests", () => {
    // One worker: the totals (several split them, as the last case of the next test shows).
    const c = config(["--workers", "1"], 20_000);
    expect(c.limits.maxConnections).toBe(15_795);
    expect(c.limits.maxLongLived).toBe(12_636);
    expect(c.limits.maxLongLived).toBeGreaterThanOrEqual(10_000);
    expect(c.limits.maxConnections - (c.limits.maxLongLived as number)).toBe(3159);
    expect(defaultMaxLongLived(10)).toBe(8);
    expect(defaultMaxLongLived(1)).toBe(1);
  });

  it("--max-connections and --max-long-lived override the defaults; a long-lived budget not below the connections is refused", () => {
    const c = config(["--workers", "1", "--max-connections", "500", "--max-long-lived", "300"], 20_000);
    expect([c.limits.maxConnections, c.limits.maxLongLived]).toEqual([500, 300]);
    expect(config(["--workers", "1", "--max-connections", "500"], 20_000).limits.maxLongLived).toBe(400);
    expect(() => config(["--max-connections", "500", "--max-long-lived", "500"], 20_000)).toThrow(
      "--max-long-lived (500) must be below --max-connections (500): short requests need the connections left over",
    );
    // Split between workers as --max-connections is.
    const w = config(["--workers", "2", "--max-connections", "500", "--max-long-lived", "301"], 20_000);
    expect([w.limits.maxConnections, w.limits.maxLongLived]).toEqual([250, 151]);
  });

  it("the open-file limit read is the hard limit, the soft one raised at start-up (a process started with ulimit -Sn 1024)", async () => {
    const script = 'import("./src/server/capacity.ts").then((m) => console.log(m.openFileLimit()))';
    const { stdout } = await promisify(execFile)(
      "/bin/sh",
      [
        "-c",
        `ulimit -Sn 1024 && ulimit -Hn && exec "${process.execPath}" --experimental-strip-types --no-warnings -e '${script}'`,
      ],
      { cwd: new URL("../..", import.meta.url).pathname },
    );
    const [hard, read] = stdout.trim().split("\n");
    expect(Number(read)).toBe(hard === "unlimited" ? 1_000_000 : Number(hard));
    expect(Number(read)).toBeGreaterThan(1024);
  });
});

describe("separate budgets: long-lived work never takes the connections short requests need (issue 29, item 2)", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startServer({ limits: { maxConnections: 8, maxLongLived: 3 }, pollWait: 300_000 });
  });
  afterAll(async () => {
    await t.stop();
  });

  it("beyond --max-long-lived a poll answers 503 with Retry-After and a reason, WatchChanges UNAVAILABLE, while GETs and PUTs answer", async () => {
    const cursor = await cursorOf(t.url);
    const polls = Array.from({ length: 3 }, () => park(t.url, cursor));
    try {
      await until(() => t.server.notifier.waiterCount === 3, "three parked polls");
      const refused = await fetch(`${t.url}/resources/v2/poll?store=home:${cursor}&wait=300`);
      expect(refused.status).toBe(503);
      expect(refused.headers.get("retry-after")).toBe("1");
      expect(refused.headers.get("server")).toBe("resources/1.0");
      expect(await refused.text()).toBe(
        "too many long-lived requests (polls, watches, transfers): this server takes at most 3 at once\n",
      );

      const client = createClient(
        ChangeService,
        createGrpcTransport({ baseUrl: t.url, idleConnectionTimeoutMs: 1000 }),
      );
      const watch = async () => {
        for await (const _ of client.watchChanges({ cursors: [{ store: "home", eventId: BigInt(cursor) }] })) break;
      };
      const err = await watch().catch((e: unknown) => ConnectError.from(e));
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.Unavailable);
      expect((err as ConnectError).rawMessage).toBe(
        "too many long-lived requests (polls, watches, transfers): this server takes at most 3 at once",
      );

      const metrics = await scrape(t.url);
      expect(sample(metrics, "trove_long_lived_requests")).toBe(3);
      expect(sample(metrics, "trove_limit_refusals_total", { limit: "long_lived" })).toBe(2);
      // Short requests of anyone: a PUT (its change answers the parked polls), a GET, a listing.
      const put = await fetch(`${t.url}/resources/v2/data/home/short.txt`, { method: "PUT", body: "short" });
      expect(put.status).toBe(201);
      const get = await fetch(`${t.url}/resources/v2/data/home/short.txt`);
      expect([get.status, await get.text()]).toEqual([200, "short"]);
      expect((await fetch(`${t.url}/resources/v2/data/home/`)).status).toBe(200);
    } finally {
      for (const p of polls) p.abort();
    }
    // A place given back is taken again: the released polls' places admit new ones.
    await until(() => t.server.notifier.waiterCount === 0, "the aborted polls to leave");
    const again = park(t.url, await cursorOf(t.url));
    try {
      await until(() => t.server.notifier.waiterCount === 1, "a new parked poll");
    } finally {
      again.abort();
    }
  });

  it("issue 32 item 3.1, long-lived by route row: at the budget a REST report wait and document, a 1 MiB PUT and a chunked PUT answer 503; a status poll, a report status without wait, a small PUT answer", async () => {
    const cursor = await cursorOf(t.url);
    const polls = Array.from({ length: 3 }, () => park(t.url, cursor));
    try {
      await until(() => t.server.notifier.waiterCount === 3, "three parked polls");
      const refusal = "too many long-lived requests (polls, watches, transfers): this server takes at most 3 at once\n";
      const refused = async (path: string, init: RequestInit = {}) => {
        const answer = await fetch(`${t.url}${path}`, init);
        return [answer.status, answer.headers.get("retry-after"), await answer.text()];
      };
      expect(await refused("/insights/v1/reports/r1?wait=30")).toEqual([503, "1", refusal]);
      expect(await refused("/insights/v1/reports/r1/document")).toEqual([503, "1", refusal]);
      const large = new Uint8Array(1024 * 1024);
      expect(await refused("/resources/v2/data/home/large.bin", { method: "PUT", body: large })).toEqual([
        503,
        "1",
        refusal,
      ]);
      const chunked = new ReadableStream<Uint8Array>({
        start(controller) {
          controller.enqueue(new Uint8Array(10));
          controller.close();
        },
      });
      expect(
        await refused("/resources/v1/data/home/chunked.bin", {
          method: "PUT",
          body: chunked,
          duplex: "half",
        } as RequestInit),
      ).toEqual([503, "1", refusal]);
      // Nothing of the refused uploads was stored.
      expect((await fetch(`${t.url}/resources/v2/data/home/large.bin`)).status).toBe(404);
      expect((await fetch(`${t.url}/resources/v2/data/home/chunked.bin`)).status).toBe(404);
      // WriteMany (issue 31) as a REST upload of its length: 1 MiB or more (or of unknown length) waits for a place.
      const resources = createClient(ResourceService, createConnectTransport({ baseUrl: t.url, httpVersion: "1.1" }));
      const failure = await resources
        .writeMany({ store: "home", items: [{ path: "many-large.bin", contents: large }] })
        .catch((e: unknown) => ConnectError.from(e));
      expect(failure).toBeInstanceOf(ConnectError);
      expect([(failure as ConnectError).code, (failure as ConnectError).rawMessage]).toEqual([
        Code.Unavailable,
        refusal.trimEnd(),
      ]);
      expect((await fetch(`${t.url}/resources/v2/data/home/many-large.bin`)).status).toBe(404);
      // A small one of declared length (Connect unary, binary) answers at the budget.
      const request = create(WriteManyRequestSchema, {
        store: "home",
        items: [{ path: "many-small.txt", contents: new TextEncoder().encode("small") }],
      });
      const few = await fetch(`${t.url}/trove.resources.v2.ResourceService/WriteMany`, {
        method: "POST",
        headers: { "content-type": "application/proto", "connect-protocol-version": "1" },
        body: toBinary(WriteManyRequestSchema, request),
      });
      expect(few.status).toBe(200);
      const answer = fromBinary(WriteManyResponseSchema, new Uint8Array(await few.arrayBuffer()));
      expect(answer.results.map((r) => r.write?.created)).toEqual([true]);
      // The same routes when short: a status poll (no cursors), a report without wait (answered: 400, r1 is no report id), a small PUT.
      expect((await fetch(`${t.url}/resources/v2/poll`)).status).toBe(200);
      expect((await fetch(`${t.url}/insights/v1/reports/r1`)).status).toBe(400);
      const small = await fetch(`${t.url}/resources/v2/data/home/small-put.bin`, { method: "PUT", body: "small" });
      expect(small.status).toBe(201);
    } finally {
      for (const p of polls) p.abort();
    }
    await until(() => t.server.notifier.waiterCount === 0, "the aborted polls to leave");
  });
});

describe("large downloads are long-lived work (issue 29, item 2: large transfers)", () => {
  let t: TestServer;
  const longLived = async () => sample(await scrape(t.url), "trove_long_lived_requests");
  beforeAll(async () => {
    t = await startServer({ limits: { maxConnections: 20, maxLongLived: 1 } });
    const put = (name: string, body: Uint8Array | string) =>
      fetch(`${t.url}/resources/v2/data/home/${name}`, { method: "PUT", body });
    expect((await put("big.bin", new Uint8Array(BIG).fill(7))).status).toBe(201);
    expect((await put("small.txt", "small")).status).toBe(201);
  });
  afterAll(async () => {
    await t.stop();
  });

  it("a download of 1 MiB or more beyond --max-long-lived answers 503 + Retry-After (REST v2, v1) or UNAVAILABLE (Connect, gRPC) before any of its bytes; small reads, HEAD and 304 answer", async () => {
    const held = heldDownload(t.port, "/resources/v2/data/home/big.bin");
    try {
      // The held download took the one place: the gauge counts it.
      await until(async () => (await longLived()) === 1, "the held download");
      const reason = "too many long-lived requests (polls, watches, transfers): this server takes at most 1 at once";
      for (const version of ["v2", "v1"]) {
        const refused = await fetch(`${t.url}/resources/${version}/data/home/big.bin`);
        expect(refused.status, version).toBe(503);
        expect(refused.headers.get("retry-after")).toBe("1");
        expect(refused.headers.get("content-length")).toBe(String(Buffer.byteLength(`${reason}\n`)));
        expect(await refused.text()).toBe(`${reason}\n`);
      }
      const transports = {
        connect: createConnectTransport({ baseUrl: t.url, httpVersion: "1.1" }),
        grpc: createGrpcTransport({ baseUrl: t.url, idleConnectionTimeoutMs: 1000 }),
      };
      for (const [name, transport] of Object.entries(transports)) {
        const err = await readVia(transport, "big.bin");
        expect(err, name).toBeInstanceOf(ConnectError);
        expect((err as ConnectError).code, name).toBe(Code.Unavailable);
        expect((err as ConnectError).rawMessage, name).toBe(reason);
        expect((err as ConnectError).metadata.get("retry-after"), name).toBe("1");
        // A small resource is a short request on every face.
        expect(await readVia(transport, "small.txt"), name).toBe(5);
      }
      const small = await fetch(`${t.url}/resources/v2/data/home/small.txt`);
      expect([small.status, await small.text()]).toEqual([200, "small"]);
      // Only sending the contents is long-lived: a HEAD, and a conditional GET answered 304, are not.
      const head = await fetch(`${t.url}/resources/v2/data/home/big.bin`, { method: "HEAD" });
      expect([head.status, head.headers.get("content-length")]).toEqual([200, String(BIG)]);
      const notModified = await fetch(`${t.url}/resources/v2/data/home/big.bin`, {
        headers: { "If-None-Match": head.headers.get("etag") as string },
      });
      expect(notModified.status).toBe(304);
      const metrics = await scrape(t.url);
      expect(sample(metrics, "trove_limit_refusals_total", { limit: "long_lived" })).toBe(4);
      expect(sample(metrics, "trove_long_lived_requests")).toBe(1);
    } finally {
      held.close();
    }
    // The place is given back when the download's connection closes: the next download is whole.
    await until(async () => (await longLived()) === 0, "the held download to end");
    const whole = await fetch(`${t.url}/resources/v2/data/home/big.bin`);
    expect([whole.status, (await whole.arrayBuffer()).byteLength]).toEqual([200, BIG]);
  });
});

describe("a fair share per caller (issue 29, item 3)", () => {
  let issuer: Issuer;
  let t: TestServer;
  let alice: Record<string, string>;
  let bob: Record<string, string>;
  beforeAll(async () => {
    issuer = await startIssuer();
    t = await startServer({
      auth: createJwtAuthenticator({ issuer: issuer.url, audience: AUDIENCE, jwksCooldown: 0 }),
      limits: { maxConnections: 20, maxLongLived: 10, maxLongLivedPerCaller: 2, maxLongLivedUnauthenticated: 1 },
      pollWait: 300_000,
    });
    alice = { Authorization: `Bearer ${await issuer.token({ ...ADMIN, sub: "alice" })}` };
    bob = { Authorization: `Bearer ${await issuer.token({ ...ADMIN, sub: "bob" })}` };
  });
  afterAll(async () => {
    await t?.stop();
    await issuer?.stop();
  });

  it("a subject beyond its cap gets 429 with Retry-After (RESOURCE_EXHAUSTED on gRPC); another subject's polls and its own short requests answer", async () => {
    const cursor = await cursorOf(t.url, alice);
    const polls = [park(t.url, cursor, alice), park(t.url, cursor, alice)];
    const others: Array<ReturnType<typeof park>> = [];
    try {
      await until(() => t.server.notifier.waiterCount === 2, "alice's two parked polls");
      const refused = await fetch(`${t.url}/resources/v2/poll?store=home:${cursor}&wait=300`, { headers: alice });
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toBe("1");
      expect(await refused.text()).toBe(
        "too many long-lived requests (polls, watches, transfers) of alice: one caller may have at most 2 at once\n",
      );
      const grpc = createClient(
        ChangeService,
        createGrpcTransport({ baseUrl: t.url, idleConnectionTimeoutMs: 1000, interceptors: [bearer(alice)] }),
      );
      const err = await grpc
        .poll({ cursors: [{ store: "home", eventId: BigInt(cursor) }], waitMillis: 300_000 })
        .catch((e: unknown) => ConnectError.from(e));
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.ResourceExhausted);

      // Bob is not affected: his polls park.
      others.push(park(t.url, cursor, bob), park(t.url, cursor, bob));
      await until(() => t.server.notifier.waiterCount === 4, "bob's two parked polls");
      // Alice's short requests are not long-lived work: they answer.
      const list = await fetch(`${t.url}/resources/v2/data/home/`, { headers: alice });
      expect(list.status).toBe(200);

      const metrics = await scrape(t.url);
      expect(sample(metrics, "trove_limit_refusals_total", { limit: "long_lived_per_caller" })).toBe(2);
      expect(sample(metrics, "trove_limit_refusals_total", { limit: "long_lived" })).toBe(0);
      expect(sample(metrics, "trove_long_lived_requests")).toBe(4);
    } finally {
      for (const p of [...polls, ...others]) p.abort();
    }
  });

  it("a large download counts against its caller's share: beyond it 429 + Retry-After (RESOURCE_EXHAUSTED on gRPC), another caller's download is whole", async () => {
    await until(async () => sample(await scrape(t.url), "trove_long_lived_requests") === 0, "no long-lived request");
    const big = `${t.url}/resources/v2/data/home/shared-big.bin`;
    const put = await fetch(big, { method: "PUT", body: new Uint8Array(BIG).fill(3), headers: alice });
    expect(put.status).toBe(201);
    const cursor = await cursorOf(t.url, alice);
    // Alice's share (2): one parked poll and one download her client does not read.
    const poll = park(t.url, cursor, alice);
    const held = heldDownload(t.port, "/resources/v2/data/home/shared-big.bin", alice);
    try {
      await until(
        async () => sample(await scrape(t.url), "trove_long_lived_requests") === 2,
        "alice's poll and download",
      );
      const refused = await fetch(big, { headers: alice });
      expect(refused.status).toBe(429);
      expect(refused.headers.get("retry-after")).toBe("1");
      expect(await refused.text()).toBe(
        "too many long-lived requests (polls, watches, transfers) of alice: one caller may have at most 2 at once\n",
      );
      const grpc = createGrpcTransport({
        baseUrl: t.url,
        idleConnectionTimeoutMs: 1000,
        interceptors: [bearer(alice)],
      });
      const err = await readVia(grpc, "shared-big.bin");
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.ResourceExhausted);
      // Bob's share is his own.
      const whole = await fetch(big, { headers: bob });
      expect([whole.status, (await whole.arrayBuffer()).byteLength]).toEqual([200, BIG]);
    } finally {
      held.close();
      poll.abort();
    }
  });

  it("the SDK sees a caller over its share as TooManyRequestsError (429), over REST, Connect and gRPC", async () => {
    // The polls of the case before have left.
    await until(async () => sample(await scrape(t.url), "trove_long_lived_requests") === 0, "no long-lived request");
    const cursor = await cursorOf(t.url, alice);
    const polls = [park(t.url, cursor, alice), park(t.url, cursor, alice)];
    const token = alice.Authorization?.slice("Bearer ".length) as string;
    try {
      await until(() => t.server.notifier.waiterCount === 2, "alice's two parked polls");
      const rest = createRestClient({ baseUrl: t.url, auth: token });
      const restErr = await rest.poll({ cursors: { home: Number(cursor) }, wait: 300 }).catch((e: unknown) => e);
      expect(restErr).toBeInstanceOf(TooManyRequestsError);
      expect((restErr as TooManyRequestsError).status).toBe(429);
      for (const protocol of ["connect", "grpc"] as const) {
        const client = createTroveClient({ baseUrl: t.url, auth: token, protocol });
        try {
          const err = await client.changes
            .poll({ cursors: [{ store: "home", eventId: BigInt(cursor) }], waitMillis: 300_000 })
            .catch((e: unknown) => fromConnectError(e));
          expect(err, protocol).toBeInstanceOf(TooManyRequestsError);
          expect((err as TooManyRequestsError).status).toBe(429);
        } finally {
          client.close();
        }
      }
    } finally {
      for (const p of polls) p.abort();
    }
  });

  it("callers without a token share the smallest budget: a second health Watch is refused RESOURCE_EXHAUSTED", async () => {
    const health = createClient(HealthService, createGrpcTransport({ baseUrl: t.url, idleConnectionTimeoutMs: 1000 }));
    const controller = new AbortController();
    const first = health.watch({ service: "" }, { signal: controller.signal })[Symbol.asyncIterator]();
    try {
      expect((await first.next()).done).toBe(false);
      const err = await (async () => {
        for await (const _ of health.watch({ service: "" })) break;
      })().catch((e: unknown) => ConnectError.from(e));
      expect(err).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code).toBe(Code.ResourceExhausted);
      expect((err as ConnectError).rawMessage).toBe(
        "too many long-lived requests without credentials: unauthenticated callers may have at most 1 at once",
      );
      // The one-shot Check is not long-lived: it answers.
      expect((await health.check({ service: "" })).status).toBe(1);
      const metrics = await scrape(t.url);
      expect(sample(metrics, "trove_limit_refusals_total", { limit: "long_lived_unauthenticated" })).toBe(1);
    } finally {
      controller.abort();
      await first.return?.();
    }
  });
});

/** An interceptor that sends `headers` (the bearer token) with every call. */
function bearer(headers: Record<string, string>): Interceptor {
  return (next) => (req) => {
    for (const [k, v] of Object.entries(headers)) req.header.set(k, v);
    return next(req);
  };
}
