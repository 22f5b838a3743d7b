// Fault injection for the MongoDB adapter: a FerretDB process of the test's own, which the test
// stops (SIGTERM), kills (SIGKILL) and restarts on the same port and data, and a TCP proxy
// between Trove and the database that can stall or cut every connection at a chosen moment.
// FerretDB comes from TROVE_TEST_FERRETDB_BIN (set by .ci/run).

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./child-server.js";

export const FERRETDB_BIN = process.env.TROVE_TEST_FERRETDB_BIN;

async function portOpen(port: number): Promise<boolean> {
  return new Promise<boolean>((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

export interface FerretDb {
  /** mongodb://127.0.0.1:{port}/ */
  url: string;
  port: number;
  /** Where FerretDB keeps its SQLite files. */
  dataDir: string;
  /** Whether the process runs. */
  readonly running: boolean;
  /** Starts it again on the same port and data (after stop or kill). */
  start(): Promise<void>;
  /** SIGTERM, and waits for the exit. */
  stop(): Promise<void>;
  /** SIGKILL, as a crash would, and waits for the exit. */
  kill(): Promise<void>;
  /** Stops it and removes its data (unless the data directory was given). */
  dispose(): Promise<void>;
}

export interface FerretDbOptions {
  /** Keep the SQLite files here (e.g. on a small tmpfs); not removed by dispose(). */
  dataDir?: string;
}

/** Starts a FerretDB of the test's own on a free port. */
export async function startFerretDb(options: FerretDbOptions = {}): Promise<FerretDb> {
  if (!FERRETDB_BIN) throw new Error("TROVE_TEST_FERRETDB_BIN is not set");
  const bin = FERRETDB_BIN;
  const ownDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), "trove-ferret-")));
  const stateDir = await mkdtemp(join(tmpdir(), "trove-ferret-state-"));
  const port = await freePort();
  let child: ChildProcess | undefined;

  const end = async (signal: NodeJS.Signals) => {
    const c = child;
    child = undefined;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const exited = new Promise((r) => c.once("exit", r));
    c.kill(signal);
    await exited;
  };

  const db: FerretDb = {
    url: `mongodb://127.0.0.1:${port}/`,
    port,
    dataDir,
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    async start() {
      if (db.running) return;
      const c = spawn(
        bin,
        [
          "--handler=sqlite",
          `--sqlite-url=file:${dataDir}/`,
          `--state-dir=${stateDir}`,
          `--listen-addr=127.0.0.1:${port}`,
          "--debug-addr=-",
          "--telemetry=disable",
          "--log-level=error",
        ],
        { stdio: "ignore" },
      );
      child = c;
      // The port may still be held for a moment by the previous process's sockets: retry.
      for (let i = 0; i < 300; i++) {
        if (c.exitCode !== null) throw new Error(`FerretDB exited with ${c.exitCode}`);
        if (await portOpen(port)) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error("FerretDB did not start within 15 s");
    },
    stop: () => end("SIGTERM"),
    kill: () => end("SIGKILL"),
    async dispose() {
      await end("SIGKILL");
      await rm(stateDir, { recursive: true, force: true });
      if (ownDir) await rm(dataDir, { recursive: true, force: true });
    },
  };
  await db.start();
  return db;
}

export interface FaultProxy {
  /** mongodb://127.0.0.1:{proxy port}/?directConnection=true */
  url: string;
  port: number;
  /** Connections open through the proxy. */
  readonly connections: number;
  /** Stops forwarding in both directions (bytes are held, sockets stay open) until resume(). */
  stall(): void;
  /** Forwards again, held bytes first. */
  resume(): void;
  /** Destroys every open connection (as a database restart or a network cut would). */
  cut(): void;
  /** Refuses (closes at once) new connections until accept(). */
  refuse(): void;
  accept(): void;
  /**
   * Calls `fault` once, just before forwarding the first client-to-server bytes that contain
   * `marker` (a command name, a collection name): the fault then hits that very command. The
   * bytes are forwarded after `fault` returns, unless it cut or stalled the proxy.
   */
  onCommand(marker: string, fault: () => void): void;
  close(): Promise<void>;
}

/** A TCP proxy in front of `target` (a port on 127.0.0.1) that can stall or cut connections. */
export async function startFaultProxy(target: number): Promise<FaultProxy> {
  const pairs = new Set<{ client: net.Socket; server: net.Socket; held: Buffer[] }>();
  let stalled = false;
  let refusing = false;
  let trigger: { marker: Buffer; fault: () => void } | undefined;

  const server = net.createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    const upstream = net.connect(target, "127.0.0.1");
    const pair = { client, server: upstream, held: [] as Buffer[] };
    pairs.add(pair);
    const close = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on("error", close).on("close", close);
    upstream.on("error", close).on("close", close);
    client.on("data", (chunk: Buffer) => {
      if (trigger && chunk.includes(trigger.marker)) {
        const { fault } = trigger;
        trigger = undefined;
        fault();
        if (!pairs.has(pair)) return;
      }
      if (stalled) pair.held.push(chunk);
      else upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (stalled) return void upstream.pause();
      client.write(chunk);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;

  const cut = () => {
    for (const pair of [...pairs]) {
      pairs.delete(pair);
      pair.client.destroy();
      pair.server.destroy();
    }
  };
  return {
    url: `mongodb://127.0.0.1:${port}/?directConnection=true`,
    port,
    get connections() {
      return pairs.size;
    },
    stall() {
      stalled = true;
    },
    resume() {
      stalled = false;
      for (const pair of pairs) {
        for (const chunk of pair.held.splice(0)) pair.server.write(chunk);
        pair.server.resume();
      }
    },
    cut,
    refuse() {
      refusing = true;
    },
    accept() {
      refusing = false;
    },
    onCommand(marker, fault) {
      trigger = { marker: Buffer.from(marker), fault };
    },
    async close() {
      cut();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

export { freePort };
