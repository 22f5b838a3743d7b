// Shared pieces of the SDK suites: a server with its development issuer (a real
// client-credentials token endpoint), a fetch that counts token requests, a rejection helper,
// a TCP proxy that counts connections and can make HTTP/2 ones go silent, and an HTTP proxy that
// can hold requests back and rewrite directory listings.

import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer as createHttpServer, request, type Server } from "node:http";
import { type AddressInfo, connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { openDevIssuer } from "../../src/auth/dev-issuer.js";
import { startServer, type TestServer } from "../support/server.js";
import { SDK_BIN } from "./build.js";

export interface DevServer extends TestServer {
  clientId: string;
  clientSecret: string;
  tokenUrl: string;
  /** The data directory holding dev-issuer.json. */
  issuerDir: string;
}

/** A server that accepts only tokens of its development issuer, served under /auth/. */
export async function startDevServer(options: { pollWait?: number } = {}): Promise<DevServer> {
  const issuerDir = await mkdtemp(join(tmpdir(), "trove-sdk-issuer-"));
  const issuer = await openDevIssuer({ dataDir: issuerDir });
  const server = await startServer({ auth: issuer.authenticator, devIssuer: issuer, ...options });
  return {
    ...server,
    clientId: issuer.clientId,
    clientSecret: issuer.clientSecret,
    tokenUrl: `${server.url}/auth/token`,
    issuerDir,
    async stop() {
      await server.stop();
      await rm(issuerDir, { recursive: true, force: true });
    },
  };
}

/** fetch that counts the requests whose URL ends with /token. */
export function countingFetch(): { fetch: typeof fetch; tokenRequests: () => number } {
  let count = 0;
  return {
    fetch: (input, init) => {
      if (String(input instanceof Request ? input.url : input).endsWith("/token")) count += 1;
      return fetch(input, init);
    },
    tokenRequests: () => count,
  };
}

export async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error("the call succeeded");
}

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** A `trove` child process that is still running: what it printed so far, and its end. */
export interface RunningTrove {
  child: ChildProcess;
  result: Promise<CliResult>;
  stdout(): string;
  stderr(): string;
}

/**
 * Starts a `trove` bin (the SDK's unless `bin`) in a child process with `env` only, `input` on its
 * stdin (then closed). The child is in `children` until it exits, so that a test's teardown can
 * kill what is left.
 */
export function startTrove(
  args: string[],
  options: {
    env: Record<string, string | undefined>;
    cwd: string;
    bin?: string;
    input?: string;
    children?: Set<ChildProcess>;
  },
): RunningTrove {
  const child = spawn(process.execPath, [options.bin ?? SDK_BIN, ...args], {
    env: options.env,
    cwd: options.cwd,
    stdio: ["pipe", "pipe", "pipe"],
  });
  options.children?.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => {
    stdout += s;
  });
  child.stderr.setEncoding("utf8").on("data", (s: string) => {
    stderr += s;
  });
  child.stdin.end(options.input ?? "");
  const result = new Promise<CliResult>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      options.children?.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
  return { child, result, stdout: () => stdout, stderr: () => stderr };
}

/** Runs a `trove` bin to its end (startTrove's options). */
export function runTrove(args: string[], options: Parameters<typeof startTrove>[1]): Promise<CliResult> {
  return startTrove(args, options).result;
}

/** Waits for what a child process prints or writes; the bound only ends a test that would hang. */
export async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 120_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export interface TcpProxy {
  url: string;
  /** Connections opened through the proxy, and those of them that began with the HTTP/2 preface. */
  connections(): number;
  http2Connections(): number;
  /**
   * Stops forwarding the bytes of the HTTP/2 connections open now, either way, without closing
   * anything: as a connection lost without a FIN or RST looks to the client. Others flow.
   */
  silenceHttp2(): void;
  close(): Promise<void>;
}

/** A TCP proxy on 127.0.0.1 in front of `port` (what a client sees of its connections). */
export async function startTcpProxy(port: number): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const h2: Array<[Socket, Socket]> = [];
  let connections = 0;
  let http2Connections = 0;
  const proxy = createServer((client) => {
    connections += 1;
    const upstream = connect(port, "127.0.0.1");
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.once("data", (first: Buffer) => {
      if (first.subarray(0, 3).toString("latin1") === "PRI") {
        http2Connections += 1;
        h2.push([client, upstream]);
      }
      upstream.write(first);
      client.pipe(upstream).pipe(client);
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(proxy.address() as { port: number }).port}`,
    connections: () => connections,
    http2Connections: () => http2Connections,
    silenceHttp2() {
      for (const [client, upstream] of h2.splice(0)) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => proxy.close(resolve));
    },
  };
}

export interface RewritingProxyOptions {
  /** Called before each request is passed on; the request waits for it. */
  before?: (method: string, url: string) => Promise<void>;
  /** Rewrites the text of each directory listing (a GET of a path ending in "/"). */
  listing?: (xml: string) => string;
}

/**
 * An HTTP/1.1 proxy to `target` on 127.0.0.1 (so h2c clients fall back to HTTP/1.1 through it);
 * it is added to `servers`, for the suite to close. Resolves with its base URL.
 */
export async function startRewritingProxy(
  target: string,
  options: RewritingProxyOptions,
  servers: Set<Server>,
): Promise<string> {
  const to = new URL(target);
  const proxy = createHttpServer((req, res) => {
    const method = req.method ?? "GET";
    const url = req.url ?? "/";
    (options.before?.(method, url) ?? Promise.resolve()).then(
      () => {
        const up = request({ host: to.hostname, port: to.port, method, path: url, headers: req.headers }, (answer) => {
          const isListing = method === "GET" && new URL(url, target).pathname.endsWith("/");
          if (!isListing || !options.listing) {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
            return;
          }
          const chunks: Buffer[] = [];
          answer.on("data", (c: Buffer) => chunks.push(c));
          answer.on("end", () => {
            const body = (options.listing as (xml: string) => string)(Buffer.concat(chunks).toString("utf8"));
            const headers = { ...answer.headers, "content-length": String(Buffer.byteLength(body)) };
            delete headers["transfer-encoding"];
            res.writeHead(answer.statusCode ?? 502, headers);
            res.end(body);
          });
        });
        up.on("error", () => res.destroy());
        req.pipe(up);
      },
      () => res.destroy(),
    );
  });
  servers.add(proxy);
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
}

/** What a mirror's marker (its SQLite database) says, read as a client of the file would. */
export function readMirrorMarker(file: string): {
  store: string;
  path: string;
  url: string | undefined;
  eventId: number;
  entries: Record<string, { tag: string; directory: boolean }>;
} {
  // Read-write, so that closing it leaves no -wal or -shm file behind (a read-only reader of a
  // database in WAL mode does); the file must exist.
  if (!existsSync(file)) throw new Error(`no marker ${file}`);
  const db = new DatabaseSync(file);
  try {
    const meta = new Map(
      (db.prepare("SELECT key, value FROM meta").all() as { key: string; value: string }[]).map((r) => [
        r.key,
        r.value,
      ]),
    );
    const entries: Record<string, { tag: string; directory: boolean }> = {};
    for (const r of db.prepare("SELECT path, tag, directory FROM entries ORDER BY path").all() as {
      path: string;
      tag: string;
      directory: number;
    }[]) {
      entries[r.path] = { tag: r.tag, directory: r.directory === 1 };
    }
    return {
      store: meta.get("store") ?? "",
      path: meta.get("path") ?? "",
      url: meta.get("url"),
      eventId: Number(meta.get("eventId") ?? -1),
      entries,
    };
  } finally {
    db.close();
  }
}
