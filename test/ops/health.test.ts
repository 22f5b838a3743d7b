// Health and readiness as probes see them (issue 13, item 1): GET /healthz and /readyz without a
// token, grpc.health.v1.Health through a stock @grpc/grpc-js client (the .proto loaded at run
// time) and through the real grpc-health-probe binary, and the transitions while MongoDB (a
// FerretDB of the test's own) goes away and comes back.

import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { pino } from "pino";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureHomeStore } from "../../src/server/main.js";
import { createTroveServer, type TroveServer } from "../../src/server/server.js";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import { type AuthServer, type Issuer, startAuthServer, startIssuer } from "../auth/support.js";
import { type FerretDb, startFerretDb } from "../support/ferretdb.js";
import { describeWithFerretDb } from "../support/mongodb.js";
import { describeWithTool, GRPC_HEALTH_PROBE } from "../support/tools.js";

const PROTO_DIR = fileURLToPath(new URL("../../proto", import.meta.url));
const definition = protoLoader.loadSync(["grpc/health/v1/health.proto"], { includeDirs: [PROTO_DIR], enums: String });
const HealthClient = (
  grpc.loadPackageDefinition(definition) as unknown as {
    grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
  }
).grpc.health.v1.Health;

interface HealthClient extends grpc.Client {
  Check(
    req: { service: string },
    cb: (err: grpc.ServiceError | null, res?: { status: string }) => void,
  ): grpc.ClientUnaryCall;
  Watch(req: { service: string }): grpc.ClientReadableStream<{ status: string }>;
}

const SERVICES = [
  "trove.resources.v2.ResourceService",
  "trove.resources.v2.StoreService",
  "trove.resources.v2.ChangeService",
  "trove.insights.v1.ProjectService",
  "trove.insights.v1.ReportService",
  "trove.admin.v1.BackupService",
];

function healthClient(port: number): HealthClient {
  return new HealthClient(`127.0.0.1:${port}`, grpc.credentials.createInsecure()) as unknown as HealthClient;
}

function check(client: HealthClient, service: string): Promise<string> {
  return new Promise((resolve, reject) =>
    client.Check({ service }, (err, res) => (err ? reject(err) : resolve(res?.status ?? ""))),
  );
}

/** A Watch whose messages are collected; `next(status)` waits until that status has arrived. */
function watch(client: HealthClient, service: string) {
  const statuses: string[] = [];
  let ended: grpc.ServiceError | undefined;
  const waiters = new Set<() => void>();
  const call = client.Watch({ service });
  const notify = () => {
    for (const w of [...waiters]) w();
  };
  call.on("data", (m: { status: string }) => {
    statuses.push(m.status);
    notify();
  });
  call.on("error", (err: grpc.ServiceError) => {
    ended = err;
    notify();
  });
  return {
    statuses,
    get error() {
      return ended;
    },
    call,
    /** Resolves once `status` is the latest message (or rejects when the stream ended first). */
    until(status: string): Promise<void> {
      return new Promise((resolve, reject) => {
        const look = () => {
          if (statuses.at(-1) === status) {
            waiters.delete(look);
            resolve();
          } else if (ended) {
            waiters.delete(look);
            reject(ended);
          }
        };
        waiters.add(look);
        look();
      });
    },
  };
}

interface ProbeResult {
  code: number;
  output: string;
}

function probe(bin: string, port: number, ...args: string[]): Promise<ProbeResult> {
  return new Promise((resolve) => {
    execFile(
      bin,
      [`-addr=127.0.0.1:${port}`, "-connect-timeout=5s", "-rpc-timeout=5s", ...args],
      (err, stdout, stderr) => {
        const code = err ? Number((err as NodeJS.ErrnoException & { code?: unknown }).code) : 0;
        resolve({ code, output: `${stdout}${stderr}` });
      },
    );
  });
}

/** Asks again until `fn` answers what `done` accepts (bounded, so a broken server fails the test). */
async function eventually<T>(fn: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  let last: T | undefined;
  for (let i = 0; i < 600; i++) {
    last = await fn();
    if (done(last)) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  return last as T;
}

describe("health and readiness over HTTP and gRPC", () => {
  let issuer: Issuer;
  let server: AuthServer;
  let client: HealthClient;

  beforeAll(async () => {
    issuer = await startIssuer();
    server = await startAuthServer(issuer);
    client = healthClient(server.port);
  });

  afterAll(async () => {
    client?.close();
    await server?.stop();
    await issuer?.stop();
  });

  it("answers /healthz and /readyz without a token, with the Server header, while other paths need one", async () => {
    expect((await server.call("GET", "/resources/v2/stores", undefined)).status).toBe(401);
    for (const [path, text] of [
      ["/healthz", "ok\n"],
      ["/readyz", "ready\n"],
    ]) {
      const res = await server.call("GET", path as string, undefined);
      expect(res.status).toBe(200);
      expect(res.headers.get("server")).toBe("resources/1.0");
      expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
      expect(res.headers.get("cache-control")).toBe("no-store");
      expect(await res.text()).toBe(text);
      const head = await server.call("HEAD", path as string, undefined);
      expect(head.status).toBe(200);
      expect(await head.text()).toBe("");
      // A token changes nothing, not even a bad one.
      expect((await server.call("GET", path as string, "not-a-token")).status).toBe(200);
      const post = await server.call("POST", path as string, undefined, { body: "x" });
      expect(post.status).toBe(405);
      expect(post.headers.get("allow")).toBe("GET, HEAD");
      expect(await post.text()).toMatch(/use GET/);
    }
  });

  it("answers grpc.health.v1.Health Check for the server and each Trove service, NOT_FOUND for others (grpc-js)", async () => {
    expect(await check(client, "")).toBe("SERVING");
    for (const service of SERVICES) expect(await check(client, service)).toBe("SERVING");
    const err = await check(client, "trove.nothing.v1.NoService").catch((e: grpc.ServiceError) => e);
    expect((err as grpc.ServiceError).code).toBe(grpc.status.NOT_FOUND);
    expect((err as grpc.ServiceError).details).toBe("unknown service trove.nothing.v1.NoService");
  });

  it("streams the status at once on Watch, and SERVICE_UNKNOWN for an unknown service (grpc-js)", async () => {
    const all = watch(client, "");
    await all.until("SERVING");
    const one = watch(client, SERVICES[0] as string);
    await one.until("SERVING");
    const unknown = watch(client, "trove.nothing.v1.NoService");
    await unknown.until("SERVICE_UNKNOWN");
    for (const w of [all, one, unknown]) {
      const ended = new Promise((r) => w.call.on("error", r));
      w.call.cancel();
      expect(((await ended) as grpc.ServiceError).code).toBe(grpc.status.CANCELLED);
    }
    expect(all.statuses).toEqual(["SERVING"]);
  });
});

describeWithTool(GRPC_HEALTH_PROBE, "health as grpc-health-probe sees it", (bin) => {
  let issuer: Issuer;
  let server: AuthServer;

  beforeAll(async () => {
    issuer = await startIssuer();
    server = await startAuthServer(issuer);
  });

  afterAll(async () => {
    await server?.stop();
    await issuer?.stop();
  });

  it("reports SERVING for the server and each Trove service, without a token, and fails for an unknown service", async () => {
    const overall = await probe(bin, server.port);
    expect(overall.output).toMatch(/status: SERVING/);
    expect(overall.code).toBe(0);
    for (const service of SERVICES) {
      const one = await probe(bin, server.port, `-service=${service}`);
      expect(one.output).toMatch(/status: SERVING/);
      expect(one.code).toBe(0);
    }
    const unknown = await probe(bin, server.port, "-service=trove.nothing.v1.NoService");
    expect(unknown.code).not.toBe(0);
    expect(unknown.output).toMatch(/NotFound|unknown service/);
  });
});

describeWithTool(GRPC_HEALTH_PROBE, "health on MongoDB", (bin) => {
  describeWithFerretDb("health while MongoDB goes away and comes back (FerretDB)", () => {
    let ferret: FerretDb | undefined;
    let server: TroveServer | undefined;
    let client: HealthClient | undefined;

    afterEach(async () => {
      client?.close();
      await server?.close().catch(() => {});
      await ferret?.dispose();
    });

    it("goes NOT_SERVING (/readyz 503 with the reason) while FerretDB is stopped, and SERVING when it returns", async () => {
      ferret = await startFerretDb();
      const storage = await MongoStorage.open({ url: ferret.url, database: "trove", serverSelectionTimeout: 1000 });
      await ensureHomeStore(storage, Date.now());
      server = createTroveServer({
        storage,
        logger: pino({ level: "silent" }),
        auth: "anonymous",
        healthInterval: 200,
      });
      const { port } = await server.listen(0, "127.0.0.1");
      const url = `http://127.0.0.1:${port}`;
      client = healthClient(port);
      const stream = watch(client, "");
      const oneService = watch(client, SERVICES[0] as string);
      await stream.until("SERVING");
      expect((await fetch(`${url}/readyz`)).status).toBe(200);

      await ferret.stop();
      await stream.until("NOT_SERVING");
      await oneService.until("NOT_SERVING");
      const down = await fetch(`${url}/readyz`);
      expect(down.status).toBe(503);
      expect(down.headers.get("server")).toBe("resources/1.0");
      expect(await down.text()).toMatch(/^not ready: storage unavailable: MongoDB unavailable/);
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      expect(await check(client, "")).toBe("NOT_SERVING");
      const probed = await probe(bin, port);
      expect(probed.output).toMatch(/NOT_SERVING/);
      expect(probed.code).toBe(4);

      await ferret.start();
      await stream.until("SERVING");
      await oneService.until("SERVING");
      const up = await eventually(
        () => fetch(`${url}/readyz`).then(async (r) => ({ status: r.status, text: await r.text() })),
        (r) => r.status === 200,
      );
      expect(up).toEqual({ status: 200, text: "ready\n" });
      expect(await check(client, "")).toBe("SERVING");
      expect((await probe(bin, port)).code).toBe(0);
      expect(stream.statuses).toEqual(["SERVING", "NOT_SERVING", "SERVING"]);
      stream.call.cancel();
      oneService.call.cancel();
    }, 120_000);
  });
});
