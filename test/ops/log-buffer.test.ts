// The log when nobody reads stdout (docs/operations.md, "Logs"): `trove serve` in a child process
// whose stdout the test stops reading, as a stalled log shipper would. The server must go on
// answering without waiting for its log and without keeping every line in memory: lines beyond
// --log-buffer are dropped and counted in /metrics, and once stdout is read again one warning
// line says how many were lost. Every request's line is either written or counted as dropped.

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import * as http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { fetchDevToken, freePort } from "../support/child-server.js";

const CLI = fileURLToPath(new URL("../../bin/trove.js", import.meta.url));
const REQUESTS = 6000;

interface LogLine {
  level: number;
  msg: string;
  [key: string]: unknown;
}

let child: ChildProcess | undefined;
let dataDir: string | undefined;

afterEach(async () => {
  if (child && child.exitCode === null && child.signalCode === null) {
    const exited = new Promise((r) => child?.once("exit", r));
    child.stdout?.resume();
    child.kill("SIGKILL");
    await exited;
  }
  child = undefined;
  if (dataDir) await rm(dataDir, { recursive: true, force: true });
  dataDir = undefined;
});

function head(agent: http.Agent, url: string, authorization: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: "HEAD", agent, headers: { authorization } }, (res) => {
      res.resume();
      res.once("end", () => resolve(res.statusCode ?? 0));
    });
    req.once("error", reject);
    req.end();
  });
}

async function droppedMetric(url: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("trove_log_lines_dropped_total "));
  if (!line) throw new Error(`no trove_log_lines_dropped_total in /metrics:\n${text.slice(0, 2000)}`);
  return Number(line.split(" ")[1]);
}

it("a stdout nobody reads: every request is answered, lines beyond --log-buffer are dropped and counted, and a warning gives their number once stdout is read again", async () => {
  dataDir = await mkdtemp(join(tmpdir(), "trove-log-buffer-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = spawn(
    process.execPath,
    // One process, its bound and its count (several workers have one each: docs/operations.md, Logs).
    [
      CLI,
      "serve",
      "--workers",
      "1",
      "--port",
      String(port),
      "--data",
      dataDir,
      "--log-level",
      "info",
      "--log-buffer",
      "65536",
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  child = server;
  server.stderr?.resume();
  let text = "";
  const stdout = server.stdout;
  if (!stdout) throw new Error("no stdout");
  stdout.setEncoding("utf8").on("data", (chunk: string) => {
    text += chunk;
  });
  const lines = () =>
    text
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as LogLine);
  for (let i = 0; !lines().some((l) => l.msg.includes("listening")); i++) {
    if (server.exitCode !== null) throw new Error(`trove serve exited with ${server.exitCode}`);
    if (i > 400) throw new Error(`trove serve did not say it listens:\n${text}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const authorization = `Bearer ${await fetchDevToken({ url, dataDir })}`;
  // From here the test reads nothing from the server's stdout: the pipe fills, then the log's buffer.
  stdout.pause();

  const target = `${url}/resources/v2/data/home/`;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
  const statuses = new Map<number, number>();
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < REQUESTS) {
        next += 1;
        const status = await head(agent, target, authorization);
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }
    }),
  );
  agent.destroy();
  expect(Object.fromEntries(statuses)).toEqual({ 200: REQUESTS });
  const droppedWhileStalled = await droppedMetric(url);
  expect(droppedWhileStalled).toBeGreaterThan(0);

  // stdout is read again: what waited is written, then one warning with the number dropped.
  stdout.resume();
  const warned = () => lines().filter((l) => l.msg === "log lines dropped: stdout was not read");
  for (let i = 0; warned().length === 0; i++) {
    if (i > 600) throw new Error(`no warning about dropped lines within 30 s; the log's tail:\n${text.slice(-2000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const dropped = await droppedMetric(url);
  expect(warned().reduce((n, l) => n + (l.dropped as number), 0)).toBe(dropped);
  expect(warned()[0]?.level).toBe(40);
  const written = lines().filter(
    (l) => l.msg === "request" && l.method === "HEAD" && l.url === "/resources/v2/data/home/",
  );
  expect(written.length).toBeGreaterThan(0);
  expect(written.length).toBeLessThan(REQUESTS);
  // Nothing lost silently: each HEAD's line was written or is among the dropped (which may also
  // count the lines of the two /metrics scrapes).
  expect(written.length + dropped).toBeGreaterThanOrEqual(REQUESTS);
  expect(written.length + dropped).toBeLessThanOrEqual(REQUESTS + 2);

  const exited = new Promise<number | null>((r) => server.once("exit", (code) => r(code)));
  server.kill("SIGTERM");
  expect(await exited).toBe(0);
  expect(lines().at(-1)?.msg).toMatch(/^shutdown complete/);
}, 120_000);

it("--log-buffer refuses a size below 64 KiB or above 1 GiB, naming the option", async () => {
  for (const size of ["1000", "2000000000", "8MiB"]) {
    const run = spawn(process.execPath, [CLI, "serve", "--port", "0", "--log-buffer", size], {
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stderr = "";
    run.stderr?.setEncoding("utf8").on("data", (s: string) => {
      stderr += s;
    });
    run.stdout?.resume();
    const code = await new Promise<number | null>((r) => run.once("exit", (c) => r(c)));
    expect(code, stderr).not.toBe(0);
    expect(stderr).toContain(`log-buffer must be a whole number from 65536 to 1073741824, not "${size}"`);
  }
});
