// `trove serve --workers 2` in a child process (from dist/), and connections known to be held by one
// worker or the other: the client's end of a connection (its local port) is found in
// /proc/net/tcp, and the worker process whose fds hold that socket's inode owns it. Shared by the
// tests of --workers over HTTP/1.1 (test/ops/workers.test.ts) and HTTP/2 and gRPC
// (test/ops/workers-rpc.test.ts).

import type { ChildProcess } from "node:child_process";
import { readdir, readFile, readlink, rm } from "node:fs/promises";
import * as http from "node:http";
import { availableParallelism } from "node:os";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { expect } from "vitest";
import { type ChildServer, startChildServer, workerPids } from "./child-server.js";

export { workerPids };

/** Idle keep-alive connections and HTTP/2 sessions stay open for the whole test (the defaults close them after 15 s and 120 s). */
export const WORKERS_ARGS = ["--workers", "2", "--keep-alive-timeout", "600", "--session-idle-timeout", "600"];

export interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
  /** The client's end of the connection that carried the request. */
  localPort: number;
}

export interface SendInit {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** false: a connection of its own, closed after the answer. */
  agent?: http.Agent | false;
}

export function send(url: string, init: SendInit = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      url,
      { method: init.method ?? "GET", headers: init.headers, agent: init.agent ?? false },
      (res) => {
        const localPort = res.socket?.localPort ?? 0;
        let body = "";
        res.setEncoding("utf8").on("data", (c: string) => {
          body += c;
        });
        res.once("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body, localPort }));
        res.once("error", reject);
      },
    );
    req.once("error", reject);
    req.end(init.body);
  });
}

/** The quoted ETag header without its quotes, as poll events carry it. */
export function tagOf(a: Answer): string {
  const etag = a.headers.etag;
  if (typeof etag !== "string") throw new Error(`no ETag in the answer (${a.status}): ${a.body}`);
  return etag.replaceAll('"', "");
}

/** Whether a process exists and is not a zombie. */
export async function alive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
  if (stat === "") return false;
  return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
}

/** Which of `pids` holds the server's end of the connection from client port `clientPort`. */
export async function ownerOf(serverPort: number, clientPort: number, pids: number[]): Promise<number | undefined> {
  let inode: string | undefined;
  for (const line of (await readFile("/proc/net/tcp", "utf8")).split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    const local = Number.parseInt((f[1] as string).split(":")[1] as string, 16);
    const remote = Number.parseInt((f[2] as string).split(":")[1] as string, 16);
    if (local === serverPort && remote === clientPort && f[3] === "01") inode = f[9];
  }
  if (inode === undefined) return undefined;
  for (const pid of pids) {
    for (const fd of await readdir(`/proc/${pid}/fd`).catch(() => [] as string[])) {
      if ((await readlink(`/proc/${pid}/fd/${fd}`).catch(() => "")) === `socket:[${inode}]`) return pid;
    }
  }
  return undefined;
}

/** Waits for `probe` to answer a value; `seen` says what was there instead when it times out. */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined>,
  seen: () => unknown = () => "",
  timeout = 30_000,
): Promise<T> {
  const deadline = Date.now() + timeout;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(seen())}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** One keep-alive connection, known to be held by the worker `pid`. */
export class Pinned {
  readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  localPort = 0;
  pid = 0;

  constructor(readonly s: ChildServer) {}

  /** `path` on this connection; throws if the server closed it and another had to be opened. */
  async request(path: string, init: Omit<SendInit, "agent"> = {}): Promise<Answer> {
    const a = await send(`${this.s.url}${path}`, { ...init, agent: this.agent });
    if (this.localPort !== 0 && a.localPort !== this.localPort) {
      throw new Error(`the connection to worker ${this.pid} was closed: a request went out on another one`);
    }
    this.localPort = a.localPort;
    return a;
  }

  close(): void {
    this.agent.destroy();
  }
}

/** Everything a test started: connections closed, servers stopped, worker processes gone. */
export const opened: Pinned[] = [];
/** HTTP/2 sessions (held or not): closed by cleanUp. */
export const sessions: Array<{ close(): void }> = [];
export const servers: ChildServer[] = [];
export const workers = new Set<number>();
export const dirs: string[] = [];
export const children: ChildProcess[] = [];

export async function cleanUp(): Promise<void> {
  for (const c of opened.splice(0)) c.close();
  for (const session of sessions.splice(0)) session.close();
  for (const child of children.splice(0)) {
    if (child.exitCode !== null || child.signalCode !== null) continue;
    const gone = new Promise((r) => child.once("exit", r));
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
    await gone;
    clearTimeout(timer);
  }
  for (const s of servers.splice(0)) await s.stop();
  // The primary stops its workers; any left (a primary that had to be killed) are ended here.
  for (const pid of [...workers]) {
    workers.delete(pid);
    const cmdline = await readFile(`/proc/${pid}/cmdline`, "utf8").catch(() => "");
    if (cmdline.includes("trove.js") && (await alive(pid))) process.kill(pid, "SIGKILL");
  }
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
}

/** How many workers `trove serve` starts without --workers: TROVE_WORKERS where set (CI's second run sets 1), else one per core. */
export function defaultWorkers(): number {
  const env = process.env.TROVE_WORKERS;
  return env === undefined || env === "auto" ? availableParallelism() : Number(env);
}

/**
 * `trove serve` with WORKERS_ARGS (and `args`, more of them), once both workers answer; with
 * `defaults`, without --workers (one worker per core, issue 32), once every worker answers. The
 * pids are the workers', or the one process's when it serves alone.
 */
export async function startWorkers(
  options: { dataDir?: string; args?: string[]; defaults?: boolean } = {},
): Promise<{ s: ChildServer; pids: number[] }> {
  const base = options.defaults ? WORKERS_ARGS.slice(2) : WORKERS_ARGS;
  const count = options.defaults ? defaultWorkers() : 2;
  const s = await startChildServer({ args: [...base, ...(options.args ?? [])], dataDir: options.dataDir });
  servers.push(s);
  let found: number[] = [];
  const pids =
    count === 1
      ? [s.pid]
      : await until(
          `${count} worker processes`,
          async () => {
            found = await workerPids(s.pid);
            for (const pid of found) workers.add(pid);
            return found.length === count ? found : undefined;
          },
          () => ({ found, stderr: s.stderr() }),
        );
  // Slot 1 starts first, the others once it listens: wait until each one answers.
  let refused: unknown;
  const serving = await until(
    "every worker serving",
    () =>
      onePerWorker(s, pids).catch((err: Error) => {
        refused = err.message;
        return undefined;
      }),
    () => ({ refused, stderr: s.stderr() }),
  );
  for (const c of serving) c.close();
  return { s, pids };
}

/** `perWorker` keep-alive connections held by each of `pids`: new connections until each has its share. */
export async function pin(s: ChildServer, pids: number[], perWorker: number): Promise<Map<number, Pinned[]>> {
  const held = new Map<number, Pinned[]>(pids.map((pid) => [pid, []]));
  for (let tries = 0; [...held.values()].some((list) => list.length < perWorker); tries++) {
    if (tries > 40 * perWorker * pids.length) {
      throw new Error(
        `no fair share of connections after ${tries} tries: ${[...held].map(([p, l]) => `${p}:${l.length}`)}`,
      );
    }
    const c = new Pinned(s);
    opened.push(c);
    expect((await c.request("/healthz")).status).toBe(200);
    const owner = await ownerOf(s.port, c.localPort, pids);
    const list = owner === undefined ? undefined : held.get(owner);
    if (owner !== undefined && list !== undefined && list.length < perWorker) {
      c.pid = owner;
      list.push(c);
    } else {
      c.close();
    }
  }
  return held;
}

/** One connection on each worker, in the order of `pids`. */
export async function onePerWorker(s: ChildServer, pids: number[]): Promise<Pinned[]> {
  const held = await pin(s, pids, 1);
  return pids.map((pid) => held.get(pid)?.[0] as Pinned);
}

export function auth(s: ChildServer, more: Record<string, string> = {}): Record<string, string> {
  return { authorization: s.authorization, ...more };
}

export async function createStore(s: ChildServer, name: string, type = "snapshot"): Promise<void> {
  const res = await send(`${s.url}/resources/v2/stores`, {
    method: "POST",
    headers: auth(s, { "content-type": "application/json" }),
    body: JSON.stringify({ name, type }),
  });
  expect(res.status).toBe(201);
}

/** The store's last event id, from the poll without parameters (`RESET {store} {id}`). */
export async function lastEventId(s: ChildServer, store: string): Promise<number> {
  const res = await send(`${s.url}/resources/v2/poll`, { headers: auth(s) });
  expect(res.status).toBe(200);
  const match = new RegExp(`^RESET ${store} (\\d+)$`, "m").exec(res.body);
  if (!match) throw new Error(`no RESET line for ${store}: ${res.body}`);
  return Number(match[1]);
}

export interface Change {
  id: number;
  path: string;
  op: string;
  previous: string;
  tag: string;
  type: string;
}

export function changesOf(store: string, body: string): Change[] {
  return body
    .split("\n")
    .filter((l) => l !== "")
    .map((line) => {
      const f = line.split("|");
      const prefix = `idr://${store}/`;
      if (f.length !== 7 || f[0] !== "CHANGE" || !f[2]?.startsWith(prefix))
        throw new Error(`not a change of ${store}: ${line}`);
      return {
        id: Number(f[1]),
        path: decodeURIComponent(f[2].slice(prefix.length)),
        op: f[3] as string,
        previous: f[4] as string,
        tag: f[5] as string,
        type: f[6] as string,
      };
    });
}

/** GET /metrics on a connection of its own, parsed; `name`'s samples whose labels include `labels`, summed. */
export async function metricSum(s: ChildServer, name: string, labels: Record<string, string> = {}, c?: Pinned) {
  const res = c ? await c.request("/metrics") : await send(`${s.url}/metrics`);
  expect(res.status).toBe(200);
  const family = parsePrometheusTextFormat(res.body).find((f) => f.name === name);
  if (!family) throw new Error(`no ${name} in the scrape`);
  return family.metrics
    .filter((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))
    .reduce((sum, m) => sum + Number(m.value), 0);
}

/** Waits until the workers together hold `n` armed change waiters (parked polls), as /metrics sums them. */
export function parked(s: ChildServer, n: number): Promise<true> {
  let waiters: number | undefined;
  return until(
    `${n} parked polls`,
    async () => {
      waiters = await metricSum(s, "trove_change_waiters");
      return waiters === n ? true : undefined;
    },
    () => ({ waiters }),
  );
}

/**
 * The client ends (local ports) of this process's established TCP connections to the server's
 * `serverPort`: the sockets among /proc/self/fd, found in /proc/net/tcp. For clients that do not
 * show their connection (@grpc/grpc-js, the SDK's session manager): the port that appears when
 * one connects is its own.
 */
export async function ownConnections(serverPort: number): Promise<Set<number>> {
  const inodes = new Set<string>();
  for (const fd of await readdir("/proc/self/fd").catch(() => [] as string[])) {
    const match = /^socket:\[(\d+)\]$/.exec(await readlink(`/proc/self/fd/${fd}`).catch(() => ""));
    if (match) inodes.add(match[1] as string);
  }
  const ports = new Set<number>();
  for (const line of (await readFile("/proc/net/tcp", "utf8")).split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    const local = Number.parseInt((f[1] as string).split(":")[1] as string, 16);
    const remote = Number.parseInt((f[2] as string).split(":")[1] as string, 16);
    if (remote === serverPort && f[3] === "01" && inodes.has(f[9] as string)) ports.add(local);
  }
  return ports;
}

/**
 * Runs `connect` (which opens one new connection to the server and answers once it has been used)
 * and answers that connection's local port, the one port of this process's connections to
 * `serverPort` that was not there before.
 */
export async function newConnection(serverPort: number, connect: () => Promise<void>): Promise<number> {
  const before = await ownConnections(serverPort);
  await connect();
  const appeared = [...(await ownConnections(serverPort))].filter((port) => !before.has(port));
  if (appeared.length !== 1) {
    throw new Error(`expected one new connection to port ${serverPort}, found ${appeared.length}: ${appeared}`);
  }
  return appeared[0] as number;
}

/** A client whose calls go over one HTTP/2 session (one connection), from `localPort`. */
export interface Session<T> {
  client: T;
  localPort: number;
  close(): void;
}

/** A session known to be held by the worker `pid`. */
export interface HeldSession<T> extends Session<T> {
  pid: number;
}

/**
 * One session held by each of `pids`, in their order: sessions opened with `open` (each one used
 * once, so that its worker has it) until every worker holds one; the others are closed.
 */
export async function sessionPerWorker<T>(
  s: ChildServer,
  pids: number[],
  what: string,
  open: () => Promise<Session<T>>,
): Promise<HeldSession<T>[]> {
  const held = new Map<number, HeldSession<T>>();
  const owners: Array<number | undefined> = [];
  for (let tries = 0; held.size < pids.length; tries++) {
    if (tries >= 40 * pids.length) {
      throw new Error(
        `no ${what} session on each of the workers ${pids} after ${tries} sessions (their owners: ${owners}; held: ${[...held.keys()]})`,
      );
    }
    const session = await open();
    sessions.push(session);
    // The primary hands an accepted connection to a worker: found once the handle has arrived.
    const owner = await until(
      `the worker holding the ${what} session from port ${session.localPort}`,
      () => ownerOf(s.port, session.localPort, pids),
      () => ({ pids }),
      10_000,
    ).catch(() => undefined);
    owners.push(owner);
    if (owner !== undefined && !held.has(owner)) held.set(owner, { ...session, pid: owner });
    else session.close();
  }
  return pids.map((pid) => held.get(pid) as HeldSession<T>);
}

/** Throws unless the session's connection is still open and held by the same worker. */
export async function expectStillHeld(s: ChildServer, session: HeldSession<unknown>): Promise<void> {
  const owner = await ownerOf(s.port, session.localPort, [session.pid]);
  if (owner !== session.pid) {
    throw new Error(`the session from port ${session.localPort} is no longer held by worker ${session.pid}`);
  }
}
