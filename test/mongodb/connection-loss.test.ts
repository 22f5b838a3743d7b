// MongoDB going away and coming back (issue 4): requests fail with 503 and a
// clear reason (gRPC Unavailable), the server keeps running, and it recovers by
// itself. Starts its own FerretDB (TROVE_TEST_FERRETDB_BIN, set by .ci/run).

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { pino } from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { ResourceService } from "../../src/gen/trove/resources/v2/resources_pb.js";
import { ensureHomeStore } from "../../src/server/main.js";
import { createTroveServer, type TroveServer } from "../../src/server/server.js";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import { freePort } from "../support/child-server.js";

const FERRETDB = process.env.TROVE_TEST_FERRETDB_BIN;
if (!FERRETDB) console.warn("MongoDB connection-loss test NOT RUN: set TROVE_TEST_FERRETDB_BIN (bash .ci/run does)");

let ferret: ChildProcess | undefined;
let server: TroveServer | undefined;
let dir = "";

async function startFerret(port: number): Promise<void> {
  ferret = spawn(
    FERRETDB as string,
    [
      "--handler=sqlite",
      `--sqlite-url=file:${dir}/`,
      `--state-dir=${dir}`,
      `--listen-addr=127.0.0.1:${port}`,
      "--debug-addr=-",
      "--telemetry=disable",
      "--log-level=error",
    ],
    { stdio: "ignore" },
  );
  const net = await import("node:net");
  for (let i = 0; i < 100; i++) {
    const open = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, "127.0.0.1");
      s.once("connect", () => {
        s.destroy();
        resolve(true);
      });
      s.once("error", () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("FerretDB did not start");
}

async function stopFerret(): Promise<void> {
  const f = ferret;
  ferret = undefined;
  if (!f || f.exitCode !== null) return;
  const exited = new Promise((r) => f.once("exit", r));
  f.kill("SIGTERM");
  await exited;
}

afterEach(async () => {
  await server?.close().catch(() => {});
  await stopFerret();
  if (dir) await rm(dir, { recursive: true, force: true });
});

describe.runIf(FERRETDB)("MongoDB connection loss", () => {
  it("answers 503 with a reason (gRPC Unavailable) while MongoDB is down, and recovers by itself", async () => {
    dir = await mkdtemp(join(tmpdir(), "trove-ferret-"));
    const port = await freePort();
    await startFerret(port);
    const storage = await MongoStorage.open({
      url: `mongodb://127.0.0.1:${port}/`,
      database: "trove",
      serverSelectionTimeout: 1000,
    });
    await ensureHomeStore(storage, Date.now());
    server = createTroveServer({ storage, logger: pino({ level: "silent" }), auth: "anonymous" });
    const { port: trovePort } = await server.listen(0, "127.0.0.1");
    const url = `http://127.0.0.1:${trovePort}`;
    const put = await fetch(`${url}/resources/v2/data/home/kept.txt`, { method: "PUT", body: "still here" });
    expect(put.status).toBe(201);

    await stopFerret();
    const down = await fetch(`${url}/resources/v2/data/home/kept.txt`);
    expect(down.status).toBe(503);
    expect(down.headers.get("server")).toBe("resources/1.0");
    expect(down.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(await down.text()).toMatch(/^MongoDB unavailable/);
    const write = await fetch(`${url}/resources/v2/data/home/new.txt`, { method: "PUT", body: "x" });
    expect(write.status).toBe(503);
    const client = createClient(ResourceService, createGrpcTransport({ baseUrl: url }));
    await expect(client.stat({ store: "home", path: "kept.txt" })).rejects.toSatisfy(
      (err) => err instanceof ConnectError && err.code === Code.Unavailable,
    );

    await startFerret(port);
    let status = 0;
    for (let i = 0; i < 100 && status !== 200; i++) {
      const res = await fetch(`${url}/resources/v2/data/home/kept.txt`);
      status = res.status;
      if (status === 200) expect(await res.text()).toBe("still here");
      else await new Promise((r) => setTimeout(r, 200));
    }
    expect(status).toBe(200);
    expect((await fetch(`${url}/resources/v2/data/home/new.txt`, { method: "PUT", body: "x" })).status).toBe(201);
  }, 60_000);
});
