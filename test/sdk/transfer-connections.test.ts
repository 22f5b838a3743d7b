// Issue 31 (folder transfers at rclone's speed): the CLI's push, pull and mirror of a tree of
// more than a thousand files, run as child processes against a live server behind a TCP proxy
// that counts the connections the client opens. A push reuses its connections instead of opening
// one per file; push, pull and mirror --once leave no abort listener behind (the issue's
// MaxListenersExceededWarning); pull's summary counts the listing's time too.

import type { ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer as createHttpServer, type Server as HttpServer, request } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createRestClient, push, type TroveRestClient } from "../../sdk/src/index.js";
import { startServer, type TestServer } from "../support/server.js";
import { ensureSdkBuilt } from "./build.js";
import { type CliResult, runTrove, startTcpProxy, type TcpProxy } from "./support.js";

// Over a thousand files each way, on a machine that other suites load.
vi.setConfig({ testTimeout: 240_000 });

const FILES = 1_100;
const FOLDERS = 10;

let work: string;
let server: TestServer;
let rest: TroveRestClient;
const children = new Set<ChildProcess>();
let proxy: TcpProxy;

function trove(args: string[], url = proxy.url, extra: Record<string, string> = {}): Promise<CliResult> {
  const env = { PATH: process.env.PATH, HOME: work, XDG_CONFIG_HOME: join(work, ".config"), TROVE_URL: url, ...extra };
  return runTrove(args, { env, cwd: work, children });
}

/**
 * Runs the CLI with a hook that records the most abort listeners any one AbortSignal held at
 * once. Node 20 printed MaxListenersExceededWarning past 10 (the issue saw 2,000-4,400 on one
 * signal); Node 24 no longer warns for AbortSignal (its limit is 0), so stderr alone cannot
 * tell: the count can.
 */
async function troveCountingListeners(args: string[]): Promise<CliResult & { maxAbortListeners: number }> {
  const hook = join(work, "count-abort-listeners.mjs");
  await writeFile(
    hook,
    `import { getEventListeners } from "node:events";
import { writeFileSync } from "node:fs";
let max = 0;
const add = EventTarget.prototype.addEventListener;
EventTarget.prototype.addEventListener = function (type, ...rest) {
  add.call(this, type, ...rest);
  if (type === "abort" && this instanceof AbortSignal) max = Math.max(max, getEventListeners(this, "abort").length);
};
process.on("exit", () => writeFileSync(process.env.TROVE_TEST_LISTENERS, String(max)));
`,
  );
  const count = join(work, `listeners-${Math.random().toString(36).slice(2)}.txt`);
  const r = await trove(args, proxy.url, {
    NODE_OPTIONS: `--import ${pathToFileURL(hook).href}`,
    TROVE_TEST_LISTENERS: count,
  });
  return { ...r, maxAbortListeners: Number(await readFile(count, "utf8")) };
}

/** Node 20's MaxListenersExceededWarning threshold: more on one signal is the issue's pile-up. */
const MAX_ABORT_LISTENERS = 10;

/** FILES files of 2-3 KiB in FOLDERS folders: path -> contents. */
async function makeTree(dir: string): Promise<void> {
  for (let f = 0; f < FOLDERS; f++) {
    await mkdir(join(dir, `folder${f}`), { recursive: true });
    for (let i = 0; i < FILES / FOLDERS; i++) {
      await writeFile(join(dir, `folder${f}`, `file${i}.txt`), `${f}/${i} `.repeat(300 + i));
    }
  }
}

/** Every file below `dir`, relative path -> contents. */
async function filesOf(dir: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const e of await readdir(dir, { recursive: true, withFileTypes: true })) {
    if (e.isFile())
      out.set(join(e.parentPath, e.name).slice(dir.length + 1), await readFile(join(e.parentPath, e.name), "utf8"));
  }
  return out;
}

const NO_WARNING = /MaxListenersExceededWarning|Warning:/;

beforeAll(async () => {
  await ensureSdkBuilt();
  work = await mkdtemp(join(tmpdir(), "trove-transfer-connections-"));
  server = await startServer();
  rest = createRestClient({ baseUrl: server.url });
  proxy = await startTcpProxy(server.port);
}, 180_000);

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  await proxy?.close();
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("issue 31: push, pull and mirror of more than a thousand files", () => {
  let source: string;
  let expected: Map<string, string>;

  beforeAll(async () => {
    source = join(work, "source");
    await makeTree(source);
    expected = await filesOf(source);
    expect(expected.size).toBe(FILES);
    // What pull and mirror copy, put there by the SDK's push() (not the CLI under test).
    await rest.stores.create("many");
    await push({ client: rest, store: "many", path: "tree", directory: source, transfers: 8, state: false });
  }, 240_000);

  it("item 1, 2 and h2c: a push sends every request on one connection (not one per file) and piles no abort listeners on a signal (MaxListenersExceededWarning)", async () => {
    const before = proxy.connections();
    const pushed = await troveCountingListeners(["push", source, "many/pushed", "--transfers", "8"]);
    expect(pushed.stderr).not.toMatch(NO_WARNING);
    expect(pushed.maxAbortListeners).toBeGreaterThan(0);
    expect(pushed.maxAbortListeners).toBeLessThanOrEqual(MAX_ABORT_LISTENERS);
    expect(pushed.code).toBe(0);
    expect(pushed.stderr).toMatch(new RegExp(`^trove push: ${FILES} files transferred, 0 skipped`, "m"));
    // One h2c connection for the whole push (docs/cli.md, "One HTTP/2 connection"); with fetch's
    // pool it was a few dozen, and before keep-alive worked nearly one per upload (979 for 1,000).
    expect(proxy.connections() - before).toBe(1);
  });

  it("item 2: a pull of them piles no abort listeners on a signal (MaxListenersExceededWarning) and copies every byte", async () => {
    const target = join(work, "pulled");
    const pulled = await troveCountingListeners(["pull", "many/tree", target, "--transfers", "8"]);
    expect(pulled.stderr).not.toMatch(NO_WARNING);
    expect(pulled.maxAbortListeners).toBeGreaterThan(0);
    expect(pulled.maxAbortListeners).toBeLessThanOrEqual(MAX_ABORT_LISTENERS);
    expect(pulled.code).toBe(0);
    expect(pulled.stderr).toMatch(new RegExp(`^trove pull: ${FILES} files transferred, 0 skipped`, "m"));
    expect(await filesOf(target)).toEqual(expected);
  });

  it("item 2: a first mirror --once of them piles no abort listeners on a signal (MaxListenersExceededWarning) and copies every byte", async () => {
    const mirrored = join(work, "mirrored");
    const mirror = await troveCountingListeners(["mirror", "many/tree", mirrored, "--once", "--follow", "poll"]);
    expect(mirror.stderr).not.toMatch(NO_WARNING);
    expect(mirror.maxAbortListeners).toBeGreaterThan(0);
    expect(mirror.maxAbortListeners).toBeLessThanOrEqual(MAX_ABORT_LISTENERS);
    expect(mirror.code).toBe(0);
    expect(mirror.stderr).toMatch(new RegExp(`^trove mirror: ${FILES} files written, 0 deleted`, "m"));
    expect(await filesOf(mirrored)).toEqual(expected);
  });

  it("item 4: pull's summary counts the whole run: a listing the server answers after 1.5 s gives at least 1.5 s, not 0.0 s", async () => {
    await rest.stores.create("slow");
    await rest.put("slow", "a.txt", "a");
    const target = join(work, "slow-pull");
    expect((await trove(["pull", "slow", target])).code).toBe(0);
    // A proxy that holds listings back: the pull then has nothing to copy, and waited all the same.
    const slow: HttpServer = createHttpServer((req, res) => {
      const delay = (req.url ?? "").split("?")[0]?.endsWith("/") ? 1_500 : 0;
      setTimeout(() => {
        const up = request(
          { host: "127.0.0.1", port: server.port, method: req.method, path: req.url, headers: req.headers },
          (answer) => {
            res.writeHead(answer.statusCode ?? 502, answer.headers);
            answer.pipe(res);
          },
        );
        up.on("error", () => res.destroy());
        req.pipe(up);
      }, delay);
    });
    await new Promise<void>((resolve) => slow.listen(0, "127.0.0.1", resolve));
    try {
      const address = slow.address();
      if (address === null || typeof address === "string") throw new Error("no port");
      const again = await trove(["pull", "slow", target], `http://127.0.0.1:${address.port}`);
      expect(again.code).toBe(0);
      const m = /^trove pull: 0 files transferred, 1 skipped, 0 deleted, 0 B, (\d+\.\d) s$/m.exec(again.stderr);
      expect(m, again.stderr).not.toBeNull();
      expect(Number(m?.[1])).toBeGreaterThanOrEqual(1.5);
    } finally {
      slow.closeAllConnections();
      await new Promise((resolve) => slow.close(resolve));
    }
  });
});
