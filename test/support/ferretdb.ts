// Fault injection for the MongoDB adapter: a FerretDB process of the test's own, which the test
// stops (SIGTERM), kills (SIGKILL) and restarts on the same port and data, and a TCP proxy
// between Trove and the database that can stall or cut every connection at a chosen moment.
// FerretDB comes from TROVE_TEST_FERRETDB_BIN (set by .ci/run), else .ci/run's cache or PATH
// (tools.ts); a suite that needs it is declared with describeWithFerretDb (mongodb.ts).

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "./child-server.js";
import { FERRETDB, findTool, installHint } from "./tools.js";

/** The FerretDB binary, if there is one. */
export const FERRETDB_BIN = findTool(FERRETDB);

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
  if (!FERRETDB_BIN) throw new Error(installHint(FERRETDB));
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
   * Starts a record of the commands sent from now on (their names, e.g. "find", "update",
   * "insert"), heartbeats and handshakes left out; `recorded()` returns it.
   */
  record(): void;
  recorded(): string[];
  /**
   * Calls `fault` just before the `n`-th command from now (1-based, heartbeats and handshakes
   * not counted) is forwarded; if `fault` cuts the connections, that command never reaches the
   * database. Returns a promise of that command's name, settled when it comes.
   */
  failCommand(n: number, fault: () => void): Promise<string>;
  /** Forgets a failCommand that has not come yet. */
  clearFault(): void;
  close(): Promise<void>;
}

/** A TCP proxy in front of `target` (a port on 127.0.0.1) that can stall or cut connections. */
export async function startFaultProxy(target: number): Promise<FaultProxy> {
  const pairs = new Set<{ client: net.Socket; server: net.Socket; held: Buffer[] }>();
  let stalled = false;
  let refusing = false;
  let recording: string[] | undefined;
  let trigger: { left: number; fault: () => void; hit: (name: string) => void } | undefined;

  /** Whether the command starting this message is one to count; calls the fault when due. */
  const command = (message: Buffer): void => {
    const name = commandName(message);
    if (name === undefined || NOT_COUNTED.has(name)) return;
    recording?.push(name);
    if (trigger && --trigger.left === 0) {
      const { fault, hit } = trigger;
      trigger = undefined;
      fault();
      hit(name);
    }
  };

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
    // Client-to-server bytes are cut into wire-protocol messages (a 4-byte length first), so
    // a fault can land exactly before a chosen command.
    let pending: Buffer = Buffer.alloc(0);
    let rest = 0;
    const forward = (bytes: Buffer) => {
      if (bytes.length === 0 || !pairs.has(pair)) return;
      if (stalled) pair.held.push(bytes);
      else upstream.write(bytes);
    };
    client.on("data", (chunk: Buffer) => {
      let data: Buffer = pending.length > 0 ? Buffer.concat([pending, chunk]) : chunk;
      pending = Buffer.alloc(0);
      while (data.length > 0 && pairs.has(pair)) {
        if (rest > 0) {
          const take = Math.min(rest, data.length);
          forward(data.subarray(0, take));
          rest -= take;
          data = data.subarray(take);
          continue;
        }
        // A new message: wait for its header and the command name (within the first 64 bytes).
        const length = data.length >= 4 ? data.readInt32LE(0) : 0;
        if (data.length < Math.min(length || 64, 64)) {
          pending = data;
          return;
        }
        command(data.subarray(0, Math.min(length, data.length)));
        rest = length;
      }
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
    record() {
      recording = [];
    },
    recorded() {
      const names = recording ?? [];
      recording = undefined;
      return names;
    },
    clearFault() {
      trigger = undefined;
    },
    failCommand(n, fault) {
      return new Promise<string>((hit) => {
        trigger = { left: n, fault, hit };
      });
    },
    async close() {
      cut();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Commands that are not a step of an operation: handshakes, heartbeats, authentication. */
const NOT_COUNTED = new Set([
  "hello",
  "isMaster",
  "ismaster",
  "ping",
  "saslStart",
  "saslContinue",
  "endSessions",
  "buildInfo",
  "buildinfo",
]);

/** The command name of an OP_MSG (opcode 2013) or OP_QUERY (2004) message, if it has one. */
function commandName(message: Buffer): string | undefined {
  if (message.length < 27) return undefined;
  const opcode = message.readInt32LE(12);
  let at: number;
  if (opcode === 2013) {
    // header (16), flagBits (4), section kind 0 (1), document length (4), element type (1)
    if (message[20] !== 0) return undefined;
    at = 26;
  } else if (opcode === 2004) {
    // header, flags, full collection name (cstring), skip, return, then the document
    const end = message.indexOf(0, 20);
    if (end < 0) return undefined;
    at = end + 1 + 8 + 4 + 1;
  } else {
    return undefined;
  }
  const end = message.indexOf(0, at);
  return end < 0 ? undefined : message.toString("latin1", at, end);
}

export { freePort };
