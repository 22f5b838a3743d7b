// Servers with filesystem stores for the tests of issue 17: a real Trove server on SQLite (its
// data directory kept across restarts when asked), a folder made by the test, and what a
// follower sees: change events from the REST long poll.

import { type ChildProcess, execFile, spawn } from "node:child_process";
import { lstat, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { pino } from "pino";
import { expect } from "vitest";
import { createTroveServer, type TroveServer, type TroveServerOptions } from "../../src/server/server.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { DATA, type RestClient, restClient, STORES } from "../rest/rest-client.js";

export const run = promisify(execFile);

/** A shell command run by another program (sh -c), in `cwd`. */
export async function sh(cwd: string, command: string): Promise<string> {
  const { stdout } = await run("sh", ["-c", command], { cwd });
  return stdout;
}

export interface FolderServer {
  url: string;
  port: number;
  client: RestClient;
  dataDir: string;
  server: TroveServer;
  /** Stops the server; keeps the data directory. */
  close(): Promise<void>;
}

/** A Trove server on SQLite in `dataDir` (a restart opens the same one). */
export async function startFolderServer(
  dataDir: string,
  options: Partial<Omit<TroveServerOptions, "storage" | "auth">> = {},
): Promise<FolderServer> {
  const storage = await SqliteStorage.open({ dataDir });
  const server = createTroveServer({
    logger: pino({ level: "silent" }),
    ...options,
    filesystem: { settleDelay: 50, ...options.filesystem },
    auth: "anonymous",
    storage,
  });
  const { port } = await server.listen(0, "127.0.0.1");
  const url = `http://127.0.0.1:${port}`;
  return { url, port, client: restClient({ url, port }), dataDir, server, close: () => server.close() };
}

/** A new temporary directory (removed by `cleanUp`). */
export async function tempDir(prefix: string): Promise<string> {
  return mkdtemp(join(tmpdir(), `trove-fs-${prefix}-`));
}

export async function cleanUp(...dirs: string[]): Promise<void> {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
}

/** Creates a filesystem store through the REST face; answers the reply. */
export async function createFolderStore(client: RestClient, name: string, location: string, extra = {}) {
  return client.fetch("POST", STORES, {
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({
      name,
      type: "filesystem",
      settings: { "filesystem-location": location, "keep-deleted": "1h", ...extra },
    }),
  });
}

export interface ChangeLine {
  id: number;
  path: string;
  operation: string;
  previousTag: string;
  tag: string;
  type: string;
}

/** The change events of a store after `after`, from the REST long poll (waits up to a second for the first). */
export async function changesAfter(client: RestClient, store: string, after: number): Promise<ChangeLine[]> {
  const reply = await client.fetch("GET", `/resources/v2/poll?store=${store}:${after}&wait=1`);
  if (reply.status === 204) return [];
  expect(reply.status, reply.text).toBe(200);
  return reply.text
    .split("\n")
    .filter((line) => line.startsWith("CHANGE|"))
    .map((line) => {
      const [, id, uri, operation, previousTag, tag, type] = line.split("|");
      const prefix = `idr://${store}/`;
      return {
        id: Number(id),
        path: decodeURIComponent((uri ?? "").slice(prefix.length)),
        operation: operation ?? "",
        previousTag: previousTag ?? "",
        tag: tag ?? "",
        type: type ?? "",
      };
    });
}

/** The id of a store's latest event (the answer of a poll without cursors). */
export async function latestEvent(client: RestClient, store: string): Promise<number> {
  const reply = await client.fetch("GET", "/resources/v2/poll");
  const line = reply.text.split("\n").find((l) => l.includes(`|idr://${store}/`) || l.startsWith(`RESET ${store} `));
  const found = line?.match(/^RESET \S+ (\d+)$/) ?? line?.match(/^CHANGE\|(\d+)\|/);
  return found ? Number(found[1]) : 0;
}

/** Follows a store's events from `after` until `done` holds for those seen so far (generous timeout). */
export async function eventsUntil(
  client: RestClient,
  store: string,
  after: number,
  done: (events: ChangeLine[]) => boolean,
  timeoutMs = 20_000,
): Promise<ChangeLine[]> {
  const seen: ChangeLine[] = [];
  let cursor = after;
  const end = Date.now() + timeoutMs;
  while (!done(seen)) {
    if (Date.now() > end) throw new Error(`events after ${after} never met the condition: ${JSON.stringify(seen)}`);
    const batch = await changesAfter(client, store, cursor);
    seen.push(...batch);
    cursor = batch.at(-1)?.id ?? cursor;
  }
  return seen;
}

/** Waits until `check` resolves true, polling (generous timeout, no timing assertion). */
export async function until(check: () => Promise<boolean>, what: string, timeoutMs = 20_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** GET of a resource of a store: status, bytes and ETag. */
export async function getFile(client: RestClient, store: string, path: string) {
  const reply = await client.fetch("GET", `${DATA}/${store}/${path}`);
  return { status: reply.status, bytes: reply.bytes, etag: reply.headers.get("etag") };
}

/** Every file and directory below `dir` (relative paths, directories with a trailing /) with the files' bytes. */
export async function treeOf(dir: string, skip: (name: string) => boolean = () => false): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  async function walk(rel: string): Promise<void> {
    for (const name of (await readdir(join(dir, rel))).sort()) {
      if (skip(name)) continue;
      const path = rel === "" ? name : `${rel}/${name}`;
      const st = await lstat(join(dir, path));
      if (st.isDirectory()) {
        out.set(`${path}/`, "");
        await walk(path);
      } else if (st.isFile()) {
        out.set(path, (await readFile(join(dir, path))).toString("base64"));
      }
    }
  }
  await walk("");
  return out;
}

const CHILD = fileURLToPath(new URL("./server-child.mjs", import.meta.url));

/**
 * Trove servers in child processes (server-child.mjs, the built dist/) on one data directory, for
 * the crash tests: `start` waits until one listens; `stopAll` kills (SIGKILL) those still running.
 */
export function serverChildren(dataDir: () => string) {
  const children = new Set<ChildProcess>();
  return {
    async start(...args: string[]): Promise<{ child: ChildProcess; client: RestClient; port: number }> {
      const child = spawn(process.execPath, [CHILD, dataDir(), ...args], { stdio: ["ignore", "pipe", "pipe"] });
      children.add(child);
      let stderr = "";
      child.stderr?.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      const port = await new Promise<number>((resolve, reject) => {
        let out = "";
        child.stdout?.on("data", (chunk: Buffer) => {
          out += chunk.toString();
          const found = /listening (\d+)/.exec(out);
          if (found) resolve(Number(found[1]));
        });
        child.once("exit", (code) => reject(new Error(`the server exited (${code}) before listening: ${stderr}`)));
      });
      return { child, port, client: restClient({ url: `http://127.0.0.1:${port}`, port }) };
    },
    async stopAll(): Promise<void> {
      for (const child of children) {
        if (child.exitCode === null && child.signalCode === null) {
          child.kill("SIGKILL");
          await new Promise((resolve) => child.once("exit", resolve));
        }
      }
      children.clear();
    },
  };
}

/** Stops a child server (SIGTERM) and waits for it to exit. */
export async function stopChild(child: ChildProcess): Promise<void> {
  child.kill("SIGTERM");
  await new Promise((resolve) => child.once("exit", resolve));
}
