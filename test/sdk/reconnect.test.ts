// Issue 30, item 5: `trove watch` and `trove mirror` reconnect when the server goes away, with
// backoff, saying so on stderr, and exit 7 only with --no-retry. The server is a real one, stopped
// and started again on the same port and data directory while the child process runs.

import type { ChildProcess } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createRestClient, type MirrorEvent, mirror } from "../../sdk/src/index.js";
import { ensureHomeStore } from "../../src/server/main.js";
import { createTroveServer } from "../../src/server/server.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { ensureSdkBuilt } from "./build.js";
import { startTcpProxy, startTrove, until } from "./support.js";

vi.setConfig({ testTimeout: 180_000 });

interface Serving {
  url: string;
  port: number;
  stop(): Promise<void>;
}

let work: string;
const children = new Set<ChildProcess>();
const servers = new Set<Serving>();

beforeAll(async () => {
  await ensureSdkBuilt();
  work = await mkdtemp(join(tmpdir(), "trove-reconnect-"));
}, 120_000);

afterEach(async () => {
  for (const child of children) child.kill("SIGKILL");
  children.clear();
  for (const s of servers) await s.stop();
  servers.clear();
});

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

/** A server on `port` (0: any) over the data directory `dataDir`, kept across restarts. */
async function serve(dataDir: string, port = 0): Promise<Serving> {
  const storage = await SqliteStorage.open({ dataDir });
  await ensureHomeStore(storage, Date.now());
  const server = createTroveServer({ logger: pino({ level: "silent" }), auth: "anonymous", storage, pollWait: 2000 });
  const listening = await server.listen(port, "127.0.0.1");
  const serving: Serving = {
    url: `http://127.0.0.1:${listening.port}`,
    port: listening.port,
    async stop() {
      servers.delete(serving);
      await server.close();
    },
  };
  servers.add(serving);
  return serving;
}

function start(args: string[], url: string) {
  const env = { PATH: process.env.PATH, HOME: work, XDG_CONFIG_HOME: join(work, ".config"), TROVE_URL: url };
  return startTrove(args, { env, cwd: work, children });
}

async function lastEvent(url: string): Promise<number> {
  const status = await createRestClient({ baseUrl: url }).poll();
  const home = status.find((e) => e.kind === "reset" && e.store === "home");
  if (!home) throw new Error("no RESET line for home");
  return home.eventId;
}

const RETRYING = /^trove (watch|mirror): cannot reach http:\/\/127\.0\.0\.1:\d+.*; retrying in \d+ ms$/m;

describe("trove watch reconnects (issue 30)", () => {
  it("the server stopped and started again on the same port: watch says so on stderr, retries, and prints every later event once", async () => {
    const dataDir = await mkdtemp(join(work, "watch-"));
    const first = await serve(dataDir);
    const from = await lastEvent(first.url);
    const watch = start(["watch", "home", "--from", String(from), "--wait", "1"], first.url);
    await createRestClient({ baseUrl: first.url }).put("home", "before.txt", "1");
    await until(() => watch.stdout().includes("idr://home/before.txt"), "the event before the outage");

    await first.stop();
    await until(() => RETRYING.test(watch.stderr()), "the retry on stderr");
    const second = await serve(dataDir, first.port);
    await createRestClient({ baseUrl: second.url }).put("home", "after.txt", "2");
    await until(() => watch.stdout().includes("idr://home/after.txt"), "the event after the outage");
    await until(() => watch.stderr().includes(`trove watch: reconnected to ${second.url}\n`), "the reconnection");

    watch.child.kill("SIGTERM");
    const r = await watch.result;
    expect(r.code).toBe(0);
    // The files' events, each once (the root directory's re-tags come between them).
    const files = r.stdout.split("\n").filter((l) => l.includes(".txt|"));
    expect(files.map((l) => l.split("|")[2])).toEqual(["idr://home/before.txt", "idr://home/after.txt"]);
    expect(files.map((l) => l.split("|")[3])).toEqual(["modify", "modify"]);
    const ids = r.stdout
      .trimEnd()
      .split("\n")
      .map((l) => Number(l.split("|")[1]));
    expect(ids).toEqual([...new Set(ids)].sort((a, b) => a - b));
    // Each failure is one line; nothing but retries and the reconnection is said.
    for (const line of r.stderr.trimEnd().split("\n")) {
      expect(line).toMatch(
        /^trove watch: (cannot reach .*; retrying in \d+ ms|reconnected to http:\/\/127\.0\.0\.1:\d+)$/,
      );
    }
  });

  it("a server that cannot be reached at the start is waited for; with --no-retry watch exits 7 at once", async () => {
    const dataDir = await mkdtemp(join(work, "watch-late-"));
    const probe = await serve(dataDir);
    const { port, url } = probe;
    await probe.stop();
    const noRetry = await start(["watch", "home", "--no-retry"], url).result;
    expect(noRetry.code).toBe(7);
    expect(noRetry.stdout).toBe("");
    expect(noRetry.stderr).toMatch(/^trove watch: cannot reach http:\/\/127\.0\.0\.1:\d+[^\n]*\n$/);

    const watch = start(["watch", "home", "--wait", "1"], url);
    await until(() => RETRYING.test(watch.stderr()), "the retry on stderr");
    const server = await serve(dataDir, port);
    await until(() => watch.stderr().includes("trove watch: reconnected to"), "the reconnection");
    await createRestClient({ baseUrl: server.url }).put("home", "late.txt", "x");
    await until(() => watch.stdout().includes("idr://home/late.txt"), "the event");
    watch.child.kill("SIGTERM");
    expect((await watch.result).code).toBe(0);
  });

  it("with --no-retry, a server that goes away ends watch with exit 7 after the events it printed", async () => {
    const dataDir = await mkdtemp(join(work, "watch-noretry-"));
    const server = await serve(dataDir);
    const from = await lastEvent(server.url);
    const watch = start(["watch", "home", "--from", String(from), "--wait", "1", "--no-retry"], server.url);
    await createRestClient({ baseUrl: server.url }).put("home", "one.txt", "1");
    await until(() => watch.stdout().includes("idr://home/one.txt"), "the event");
    await server.stop();
    const r = await watch.result;
    expect(r.code).toBe(7);
    expect(r.stdout.split("\n").filter((l) => l.includes(".txt|"))).toHaveLength(1);
    expect(r.stderr).toMatch(/^trove watch: (cannot reach http:\/\/127\.0\.0\.1:\d+|503 )[^\n]*\n$/);
  });
});

describe("trove mirror reconnects (issue 30)", () => {
  it("the server stopped and started again on the same port: mirror says so on stderr, retries, and copies what changed meanwhile", async () => {
    const dataDir = await mkdtemp(join(work, "mirror-"));
    const first = await serve(dataDir);
    await createRestClient({ baseUrl: first.url }).put("home", "before.txt", "before");
    const target = join(work, "mirrored");
    // The default follow (gRPC WatchChanges when reachable): a watch that hears nothing for 35 s
    // is given up and retried, so a stream the stop left hanging reconnects too (docs/cli.md).
    const m = start(["mirror", "home", target], first.url);
    await until(
      () =>
        readFile(join(target, "before.txt"), "utf8").then(
          (t) => t === "before",
          () => false,
        ),
      "the copy",
    );

    await first.stop();
    await until(() => /^trove mirror: .*; retrying in \d+ ms$/m.test(m.stderr()), "the retry on stderr");
    const second = await serve(dataDir, first.port);
    await createRestClient({ baseUrl: second.url }).put("home", "after.txt", "after");
    await until(
      () =>
        readFile(join(target, "after.txt"), "utf8").then(
          (t) => t === "after",
          () => false,
        ),
      "the change",
    );

    m.child.kill("SIGTERM");
    const r = await m.result;
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^trove mirror: 2 files written, 0 deleted, 11 bytes, [\d.]+ s, cursor \d+$/m);
  });

  it("with --no-retry, a server that goes away ends mirror with exit 7 and its summary", async () => {
    const dataDir = await mkdtemp(join(work, "mirror-noretry-"));
    const server = await serve(dataDir);
    await createRestClient({ baseUrl: server.url }).put("home", "a.txt", "a");
    const target = join(work, "mirrored-noretry");
    const m = start(["mirror", "home", target, "--no-retry", "--follow", "poll"], server.url);
    await until(
      () =>
        readFile(join(target, "a.txt"), "utf8").then(
          (t) => t === "a",
          () => false,
        ),
      "the copy",
    );
    await server.stop();
    const r = await m.result;
    expect(r.code).toBe(7);
    expect(r.stderr).not.toContain("retrying");
    expect(r.stderr).toMatch(
      /^trove mirror: 1 file written, 0 deleted, 1 byte, [\d.]+ s, cursor \d+\ntrove mirror: [^\n]+\n$/m,
    );
  });
});

describe("mirror: a WatchChanges connection that goes silent (issue 31, item 5)", () => {
  it("no message within the silence bound (docs/cli.md: 35 s by default; here 2 s): the connection is dropped, the mirror reconnects on a new one and copies what changed", async () => {
    const dataDir = await mkdtemp(join(work, "silent-"));
    const server = await serve(dataDir);
    const proxy = await startTcpProxy(server.port);
    const rest = createRestClient({ baseUrl: server.url });
    await rest.put("home", "before.txt", "before");
    const target = join(work, "mirrored-silent");
    const events: MirrorEvent[] = [];
    const stop = new AbortController();
    const m = mirror({
      baseUrl: proxy.url,
      store: "home",
      target,
      follow: "watch",
      watchHeartbeatMs: 200,
      watchSilenceMs: 2_000,
      signal: stop.signal,
      onEvent: (e) => events.push(e),
    });
    try {
      // Following: the stream's heartbeats arrive (idle events after the follow event).
      await until(() => {
        const follow = events.findIndex((e) => e.type === "follow" && e.via === "watch");
        return follow >= 0 && events.slice(follow).some((e) => e.type === "idle");
      }, "the watch's first heartbeat");
      expect(await readFile(join(target, "before.txt"), "utf8")).toBe("before");
      expect(proxy.http2Connections()).toBe(1);

      proxy.silenceHttp2();
      await rest.put("home", "after.txt", "after");
      await until(
        () =>
          readFile(join(target, "after.txt"), "utf8").then(
            (t) => t === "after",
            () => false,
          ),
        "the change, after a reconnection",
      );
      const retries = events.filter((e) => e.type === "retry");
      expect(retries.length).toBeGreaterThanOrEqual(1);
      expect(String((retries[0] as { error: Error }).error.message)).toMatch(
        /^no message from http:\/\/127\.0\.0\.1:\d+ in 2 s \(a heartbeat was due every 0\.2 s\); reconnecting on a new connection$/,
      );
      // A new HTTP/2 connection, not the silent one again.
      expect(proxy.http2Connections()).toBeGreaterThanOrEqual(2);
    } finally {
      stop.abort();
      await m.done.catch(() => {});
      await proxy.close();
    }
  });
});
