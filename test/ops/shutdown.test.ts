// Graceful shutdown (issue 13, item 8), as a client and an operator see it: `trove serve` in a
// child process gets SIGTERM while an upload (a slow PUT body), a long poll, a WatchChanges
// stream and a gRPC health Watch are in flight. The log says the shutdown began, new connections
// are refused, health goes NOT_SERVING, the long poll answers 204 at once, the watch ends with
// UNAVAILABLE, the upload completes, the log says it drained cleanly, and the exit code is 0.
// Then: a drain timeout that cuts an upload, and a second signal that stops at once.

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import * as http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ChangeService } from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { afterEach, describe, expect, it } from "vitest";
import { fetchDevToken, freePort } from "../support/child-server.js";

const CLI = fileURLToPath(new URL("../../bin/trove.js", import.meta.url));
const PROTO_DIR = fileURLToPath(new URL("../../proto", import.meta.url));
const HealthClient = (
  grpc.loadPackageDefinition(
    protoLoader.loadSync(["grpc/health/v1/health.proto"], { includeDirs: [PROTO_DIR], enums: String }),
  ) as {
    grpc: { health: { v1: { Health: grpc.ServiceClientConstructor } } };
  }
).grpc.health.v1.Health;

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

interface Served {
  url: string;
  port: number;
  dataDir: string;
  authorization: string;
  child: ChildProcess;
  logs: LogLine[];
  /** Resolves with the first log line whose message matches. */
  logged(message: RegExp): Promise<LogLine>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const children: ChildProcess[] = [];
const dirs: string[] = [];

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await gone;
    }
  }
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

async function serve(args: string[] = [], reuse?: string): Promise<Served> {
  const dataDir = reuse ?? (await mkdtemp(join(tmpdir(), "trove-shutdown-")));
  dirs.push(dataDir);
  const port = await freePort();
  const child = spawn(
    process.execPath,
    // One process's shutdown, its log lines and exit codes; several workers': test/ops/workers.test.ts.
    [CLI, "serve", "--workers", "1", "--port", String(port), "--data", dataDir, "--token-lifetime", "86400", ...args],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  children.push(child);
  const logs: LogLine[] = [];
  const listeners = new Set<() => void>();
  let rest = "";
  child.stdout?.setEncoding("utf8").on("data", (s: string) => {
    rest += s;
    const lines = rest.split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) if (line.startsWith("{")) logs.push(JSON.parse(line) as LogLine);
    for (const l of [...listeners]) l();
  });
  child.stderr?.resume();
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const logged = (message: RegExp) =>
    new Promise<LogLine>((resolve, reject) => {
      const look = () => {
        const line = logs.find((l) => message.test(l.msg));
        if (line) {
          listeners.delete(look);
          resolve(line);
        } else if (child.exitCode !== null || child.signalCode !== null) {
          listeners.delete(look);
          reject(new Error(`no log line ${message} before the exit: ${JSON.stringify(logs.map((l) => l.msg))}`));
        }
      };
      listeners.add(look);
      void exited.then(look);
      look();
    });
  await logged(/listening on/);
  const url = `http://127.0.0.1:${port}`;
  const authorization = `Bearer ${await fetchDevToken({ url, dataDir })}`;
  return { url, port, dataDir, authorization, child, logs, logged, exited };
}

/** A PUT whose body is sent by the test, chunk by chunk; `response` settles with the answer. */
function slowUpload(s: Served, path: string) {
  const agent = new http.Agent({ keepAlive: true });
  const req = http.request(`${s.url}/resources/v2/data/home/${path}`, {
    method: "PUT",
    agent,
    headers: { authorization: s.authorization, "content-type": "text/plain" },
  });
  const response = new Promise<{ status: number; connection: string | undefined; body: string }>((resolve, reject) => {
    req.once("response", (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (c: string) => {
        body += c;
      });
      res.once("end", () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body }));
      res.once("error", reject);
    });
    req.once("error", reject);
  });
  response.catch(() => {});
  const write = (chunk: string) => new Promise<void>((resolve) => req.write(chunk, () => resolve()));
  return { req, response, write, end: (chunk: string) => req.end(chunk), agent };
}

/** A request on a new connection, so that the server has read everything sent before it. */
async function roundTrip(s: Served): Promise<void> {
  const res = await fetch(`${s.url}/healthz`, { headers: { connection: "close" } });
  expect(res.status).toBe(200);
  await res.text();
}

function connectRefused(s: Served): Promise<string> {
  return new Promise((resolve) => {
    const req = http.get(`${s.url}/healthz`, { agent: false }, (res) => {
      res.resume();
      resolve(`answered ${res.statusCode}`);
    });
    req.once("error", (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
  });
}

describe("graceful shutdown of trove serve", () => {
  it("on SIGTERM: refuses new connections, goes NOT_SERVING, answers the long poll (204), ends the watch (UNAVAILABLE), finishes the upload, exits 0", async () => {
    const s = await serve();
    const headers = { authorization: s.authorization };
    const status = await fetch(`${s.url}/resources/v2/poll`, { headers });
    const [, eventId] = /^RESET home (\d+)$/m.exec(await status.text()) ?? [];
    expect(eventId).toBeDefined();

    // In flight: a gRPC health Watch, a WatchChanges stream, a long poll and an upload.
    const health = new HealthClient(`127.0.0.1:${s.port}`, grpc.credentials.createInsecure());
    const healthStatuses: string[] = [];
    const healthCall = (
      health as unknown as { Watch(req: { service: string }): grpc.ClientReadableStream<{ status: string }> }
    ).Watch({ service: "" });
    const healthEnd = new Promise<grpc.ServiceError>((resolve) => healthCall.once("error", resolve));
    const firstHealth = new Promise<void>((resolve) =>
      healthCall.on("data", (m: { status: string }) => {
        healthStatuses.push(m.status);
        resolve();
      }),
    );
    await firstHealth;

    const changes = createClient(ChangeService, createGrpcTransport({ baseUrl: s.url }));
    const watch = (async () => {
      let heartbeats = 0;
      try {
        for await (const m of changes.watchChanges(
          { cursors: [{ store: "home", eventId: BigInt(eventId as string) }], heartbeatMillis: 100 },
          { headers },
        )) {
          if (m.heartbeat) heartbeats++;
        }
        return { ended: "OK", heartbeats };
      } catch (err) {
        return { ended: ConnectError.from(err), heartbeats };
      }
    })();

    const poll = fetch(`${s.url}/resources/v2/poll?store=home:${eventId}&wait=60`, { headers });
    const upload = slowUpload(s, "slow.txt");
    await upload.write("first half, ");
    await roundTrip(s);

    s.child.kill("SIGTERM");
    const began = await s.logged(/^shutdown began$/);
    expect(began.cause).toBe("SIGTERM");
    expect(began.timeoutMs).toBe(10_000);
    expect(await connectRefused(s)).toBe("ECONNREFUSED");

    // The long poll answers at once: while the upload is still waiting for its second half.
    const polled = await poll;
    expect(polled.status).toBe(204);
    const watched = await watch;
    expect(watched.ended).toBeInstanceOf(ConnectError);
    expect((watched.ended as ConnectError).code).toBe(Code.Unavailable);
    expect((watched.ended as ConnectError).rawMessage).toMatch(/shutting down/);
    const healthError = await healthEnd;
    expect(healthError.code).toBe(grpc.status.UNAVAILABLE);
    expect(healthStatuses).toEqual(["SERVING", "NOT_SERVING"]);
    health.close();

    upload.end("second half");
    const answer = await upload.response;
    expect(answer.status).toBe(201);
    expect(answer.connection).toBe("close");
    upload.agent.destroy();

    expect(await s.exited).toEqual({ code: 0, signal: null });
    const last = s.logs.at(-1) as LogLine;
    expect(last.msg).toBe("shutdown complete: drained cleanly");
    expect(last.drained).toBe(true);
    // The upload was stored: the same data served again has it.
    const again = await serve([], s.dataDir);
    const read = await fetch(`${again.url}/resources/v2/data/home/slow.txt`, {
      headers: { authorization: again.authorization },
    });
    expect(read.status).toBe(200);
    expect(await read.text()).toBe("first half, second half");
  }, 120_000);

  it("cuts what is still in flight when the drain timeout runs out, says so, and exits 0", async () => {
    const s = await serve(["--shutdown-timeout", "1"]);
    const upload = slowUpload(s, "never-finished.txt");
    await upload.write("a start and nothing more");
    await roundTrip(s);
    s.child.kill("SIGTERM");
    expect((await s.logged(/^shutdown began$/)).timeoutMs).toBe(1000);
    await expect(upload.response).rejects.toThrow();
    expect(await s.exited).toEqual({ code: 0, signal: null });
    const last = s.logs.at(-1) as LogLine;
    expect(last.msg).toBe("shutdown complete: the drain timeout (1 s) cut 1 connection");
    expect(last.cut).toBe(1);
    upload.agent.destroy();
  }, 120_000);

  it("stops at once on a second signal, with a non-zero exit code", async () => {
    const s = await serve();
    const upload = slowUpload(s, "interrupted.txt");
    await upload.write("a start");
    await roundTrip(s);
    s.child.kill("SIGINT");
    expect((await s.logged(/^shutdown began$/)).cause).toBe("SIGINT");
    s.child.kill("SIGINT");
    expect(await s.exited).toEqual({ code: 130, signal: null });
    expect(s.logs.some((l) => l.msg === "second signal: stopping at once, cutting every connection")).toBe(true);
    expect(s.logs.some((l) => /^shutdown complete/.test(l.msg))).toBe(false);
    await expect(upload.response).rejects.toThrow();
    upload.agent.destroy();
  }, 120_000);
});
