// Issue 31 (folder transfers at rclone's speed): the CLI's push, pull and mirror of a tree of
// more than a thousand files, run as child processes against a live server behind a TCP proxy
// that counts the connections the client opens. A push reuses its connections instead of opening
// one per file; push, pull and mirror --once leave no abort listener behind (no
// MaxListenersExceededWarning on stderr); pull's summary counts the listing's time too.

import type { ChildProcess } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { createServer as createHttpServer, type Server as HttpServer, request } from "node:http";
import { connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createRestClient, type TroveRestClient } from "../../sdk/src/index.js";
import { startServer, type TestServer } from "../support/server.js";
import { ensureSdkBuilt } from "./build.js";
import { type CliResult, runTrove } from "./support.js";

// Over a thousand files each way, on a machine that other suites load.
vi.setConfig({ testTimeout: 240_000 });

const FILES = 1_100;
const FOLDERS = 10;

let work: string;
let server: TestServer;
let rest: TroveRestClient;
const children = new Set<ChildProcess>();
let proxy: Server;
let proxyUrl: string;
let connections = 0;
const sockets = new Set<Socket>();

function trove(args: string[], url = proxyUrl): Promise<CliResult> {
  const env = { PATH: process.env.PATH, HOME: work, XDG_CONFIG_HOME: join(work, ".config"), TROVE_URL: url };
  return runTrove(args, { env, cwd: work, children });
}

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
  proxy = createServer((client) => {
    connections += 1;
    const upstream = connect(server.port, "127.0.0.1");
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
  const address = proxy.address();
  if (address === null || typeof address === "string") throw new Error("the proxy has no port");
  proxyUrl = `http://127.0.0.1:${address.port}`;
}, 180_000);

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => proxy?.close(resolve));
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("issue 31: push, pull and mirror of more than a thousand files", () => {
  it("item 1 and 2: a push reuses connections (not one per file) and prints no MaxListenersExceededWarning; pull and mirror --once print none either and copy every byte", async () => {
    const source = join(work, "source");
    await makeTree(source);
    await rest.stores.create("many");

    connections = 0;
    const pushed = await trove(["push", source, "many/tree", "--transfers", "8"]);
    expect(pushed.stderr).not.toMatch(NO_WARNING);
    expect(pushed.code).toBe(0);
    expect(pushed.stderr).toMatch(new RegExp(`^trove push: ${FILES} files transferred, 0 skipped`, "m"));
    // Keep-alive: a few connections for the whole push (one per transfer at once, and the
    // listing's); before the fix nearly every upload opened its own (979 for 1,000 files).
    expect(connections).toBeGreaterThan(0);
    expect(connections).toBeLessThanOrEqual(40);

    const target = join(work, "pulled");
    const pulled = await trove(["pull", "many/tree", target, "--transfers", "8"]);
    expect(pulled.stderr).not.toMatch(NO_WARNING);
    expect(pulled.code).toBe(0);
    expect(pulled.stderr).toMatch(new RegExp(`^trove pull: ${FILES} files transferred, 0 skipped`, "m"));

    const mirrored = join(work, "mirrored");
    const mirror = await trove(["mirror", "many/tree", mirrored, "--once", "--follow", "poll"]);
    expect(mirror.stderr).not.toMatch(NO_WARNING);
    expect(mirror.code).toBe(0);
    expect(mirror.stderr).toMatch(new RegExp(`^trove mirror: ${FILES} files written, 0 deleted`, "m"));

    const expected = await filesOf(source);
    expect(expected.size).toBe(FILES);
    expect(await filesOf(target)).toEqual(expected);
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
