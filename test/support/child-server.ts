// Starts `trove serve` from the built dist/ in a child process, so that its
// memory can be measured apart from the test's. Needs dist/ (see build-dist.ts).
// Without --issuer it runs its development issuer: `authorization` then holds
// a token from it, as `trove token` would print it.

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import * as net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { devIssuer } from "../../sdk/src/auth.js";

const CLI = fileURLToPath(new URL("../../bin/trove.js", import.meta.url));

/** A token from the development issuer of the server at `url`, as `trove token --data dataDir` gets one. */
export async function fetchDevToken(options: { url: string; dataDir: string }): Promise<string> {
  return (await devIssuer({ baseUrl: options.url, dataDir: options.dataDir })).getToken();
}

export interface ChildServer {
  url: string;
  port: number;
  pid: number;
  dataDir: string;
  /** `Bearer {token}`: the Authorization header value every request to this server needs. */
  authorization: string;
  stop(): Promise<void>;
  /** Ends the process and its workers with SIGKILL, as a crash of the server would; the data directory stays. */
  kill(): Promise<void>;
  /** The last 4000 characters the process (and any process it started) wrote to stderr. */
  stderr(): string;
  /** Settles when the process has ended, with its exit code or the signal that ended it. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export interface ChildServerOptions {
  logLevel?: string;
  /** More `trove serve` arguments, e.g. ["--mongodb-url", url]. */
  args?: string[];
  /** Reuse a data directory (a restart); it is then not removed by stop(). */
  dataDir?: string;
  /**
   * A token for a server started with `--issuer` in `args`. Without it, the server runs its
   * development issuer and the token comes from there (each instance has its own issuer).
   */
  token?: string;
}

/** A port that was free a moment ago: the CLI takes a fixed port. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

async function ready(
  url: string,
  child: ChildProcess,
  output: () => string,
  token: () => Promise<string>,
): Promise<string> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`trove serve exited with ${child.exitCode}: ${output()}`);
    try {
      const authorization = `Bearer ${await token()}`;
      const res = await fetch(`${url}/resources/v2/data/home/`, { method: "HEAD", headers: { authorization } });
      if (res.status === 200) return authorization;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`trove serve did not answer within 20 s: ${output()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function startChildServer(options: ChildServerOptions = {}): Promise<ChildServer> {
  const ownDir = options.dataDir === undefined;
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), "trove-child-")));
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      CLI,
      "serve",
      "--port",
      String(port),
      "--data",
      dataDir,
      "--log-level",
      options.logLevel ?? "silent",
      // Development tokens that outlast any test.
      "--token-lifetime",
      "86400",
      ...(options.args ?? []),
    ],
    { stdio: ["ignore", "ignore", "pipe"] },
  );
  let stderr = "";
  child.stderr?.setEncoding("utf8").on("data", (s: string) => {
    stderr = (stderr + s).slice(-4000);
  });
  const url = `http://127.0.0.1:${port}`;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const token = () => (options.token !== undefined ? Promise.resolve(options.token) : fetchDevToken({ url, dataDir }));
  let authorization: string;
  try {
    authorization = await ready(url, child, () => stderr, token);
  } catch (err) {
    child.kill("SIGKILL");
    if (ownDir) await rm(dataDir, { recursive: true, force: true });
    throw err;
  }
  return {
    url,
    port,
    pid: child.pid as number,
    dataDir,
    authorization,
    exited,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode === null) {
        child.kill("SIGTERM");
        const timer = setTimeout(() => child.kill("SIGKILL"), 5000);
        await exited;
        clearTimeout(timer);
      }
      if (ownDir) await rm(dataDir, { recursive: true, force: true });
    },
    async kill() {
      if (child.exitCode === null && child.signalCode === null) {
        // Several workers (trove serve's default): a worker outlives a killed primary for its
        // graceful stop, and would still hold the data directory when the test starts it again.
        const workers = await workerPids(child.pid as number);
        child.kill("SIGKILL");
        for (const pid of workers) {
          try {
            process.kill(pid, "SIGKILL");
          } catch {
            // already gone
          }
        }
        await exited;
        for (const pid of workers) {
          while ((await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "")).match(/\) [^Z]/)) {
            await new Promise((r) => setTimeout(r, 20));
          }
        }
      }
    },
  };
}

/** The processes a primary of `trove serve` started (its workers), from every thread's children list. */
export async function workerPids(primary: number): Promise<number[]> {
  const tasks = await readdir(`/proc/${primary}/task`).catch(() => [] as string[]);
  const pids = new Set<number>();
  for (const task of tasks) {
    const children = await readFile(`/proc/${primary}/task/${task}/children`, "utf8").catch(() => "");
    for (const pid of children.trim().split(/\s+/)) if (pid) pids.add(Number(pid));
  }
  return [...pids].sort((a, b) => a - b);
}

/** A field of /proc/{pid}/status in bytes, e.g. VmRSS (resident now) or VmHWM (peak resident). */
export async function procStatusBytes(pid: number, field: "VmRSS" | "VmHWM"): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status);
  if (!match) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(match[1]) * 1024;
}
