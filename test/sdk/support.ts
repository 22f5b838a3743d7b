// Shared pieces of the SDK suites: a server with its development issuer (a real
// client-credentials token endpoint), a fetch that counts token requests, and a rejection helper.

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
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
