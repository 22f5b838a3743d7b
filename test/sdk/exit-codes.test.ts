// One exit-code table (EXIT, docs/cli.md) for every command of both bins: the SDK's `trove` and
// the server package's `trove` (which adds `serve`). Each command is run as a child process for
// a usage mistake (2), an unreachable server (7) and something that does not exist (3), and
// the other codes (1, 4, 5, 6, 8) are checked once per bin. A new command without its cases here
// fails the first test.

import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { completionCommands } from "../../sdk/src/cli/main.js";
import { createRestClient } from "../../sdk/src/index.js";
import { freePort } from "../support/child-server.js";
import { startServer, type TestServer } from "../support/server.js";
import { ensureSdkBuilt, ROOT_BIN, SDK_BIN } from "./build.js";
import { type DevServer, runTrove, startDevServer } from "./support.js";

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

let work: string;

function trove(bin: string, args: string[], env: Record<string, string> = {}): Promise<Result> {
  const all = { PATH: process.env.PATH, HOME: work, XDG_CONFIG_HOME: join(work, ".config"), ...env };
  return runTrove(args, { env: all, cwd: work, bin, input: "x" });
}

/** Runs `each` over `items`, a few at a time (each case is a child process). */
async function inBatches<T>(items: T[], each: (item: T) => Promise<void>): Promise<void> {
  for (let i = 0; i < items.length; i += 4) await Promise.all(items.slice(i, i + 4).map(each));
}

/**
 * Per command: arguments that are right but name something that does not exist (3), and
 * arguments for an unreachable server (7). `watch` and `mirror` retry an unreachable server with
 * backoff (they are meant to outlast outages: docs/cli.md), so their unreachable case has
 * --no-retry (issue 30); `completion` and `help` talk to no server.
 */
const CASES: Record<string, { notFound?: string[]; unreachable?: string[] }> = {
  token: { unreachable: ["token", "--client-id", "a", "--client-secret", "b"] },
  ls: { notFound: ["ls", "home/nope"], unreachable: ["ls", "home"] },
  get: { notFound: ["get", "home/nope"], unreachable: ["get", "home/a.txt"] },
  put: { notFound: ["put", "-", "home/nope/a.txt"], unreachable: ["put", "-", "home/a.txt"] },
  rm: { notFound: ["rm", "home/nope"], unreachable: ["rm", "home/a.txt"] },
  mkdir: { notFound: ["mkdir", "home/nope/d"], unreachable: ["mkdir", "home/d"] },
  log: { notFound: ["log", "home/nope"], unreachable: ["log", "home/a.txt"] },
  restore: {
    notFound: ["restore", "home/nope", "--version", "t0"],
    unreachable: ["restore", "home/a.txt", "--version", "t0"],
  },
  stores: { notFound: ["stores", "get", "nope"], unreachable: ["stores"] },
  watch: {
    notFound: ["watch", "nope", "--once", "--wait", "1"],
    unreachable: ["watch", "home", "--once", "--no-retry"],
  },
  mirror: {
    notFound: ["mirror", "nope", "mirrored", "--once"],
    unreachable: ["mirror", "home", "mirrored", "--no-retry"],
  },
  push: { notFound: ["push", "dir", "nope/x"], unreachable: ["push", "dir", "home/x"] },
  pull: { notFound: ["pull", "home/nope", "pulled"], unreachable: ["pull", "home/x", "pulled"] },
  project: { notFound: ["project", "show", "nope"], unreachable: ["project", "list"] },
  report: { notFound: ["report", "list", "nope", "production"], unreachable: ["report", "list", "p", "e"] },
  completion: {},
  help: {},
};

const BINS: Array<[string, string]> = [
  ["the @trove/sdk bin", SDK_BIN],
  ["the server package's bin", ROOT_BIN],
];

let server: TestServer;
let closedUrl: string;
let closedPort: number;

beforeAll(async () => {
  await ensureSdkBuilt();
  work = await mkdtemp(join(tmpdir(), "trove-exit-codes-"));
  await mkdir(join(work, "dir"));
  await writeFile(join(work, "dir", "a.txt"), "a");
  server = await startServer({ pollWait: 1000 });
  closedPort = await freePort();
  closedUrl = `http://127.0.0.1:${closedPort}`;
}, 120_000);
afterAll(async () => {
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("exit codes", () => {
  it("every command of the SDK's CLI has its cases here", () => {
    expect(
      completionCommands()
        .map((c) => c.name)
        .sort(),
    ).toEqual(Object.keys(CASES).sort());
  });

  for (const [name, bin] of BINS) {
    describe(name, () => {
      const commands = () => [...Object.keys(CASES), ...(bin === ROOT_BIN ? ["serve"] : [])];

      it("2 for an unknown option, on every command (serve included)", async () => {
        await inBatches(commands(), async (command) => {
          const r = await trove(bin, [command, "--no-such-option"], { TROVE_URL: server.url });
          expect(r, command).toMatchObject({ code: 2, stdout: "" });
          expect(r.stderr, command).toMatch(new RegExp(`^trove ${command}: Unknown option '--no-such-option'`));
        });
        expect(await trove(bin, ["frobnicate"])).toMatchObject({ code: 2 });
        expect(await trove(bin, [])).toMatchObject({ code: 2 });
      }, 120_000);

      it("7 when the server cannot be reached", async () => {
        const cases = Object.entries(CASES).filter(([, c]) => c.unreachable);
        await inBatches(cases, async ([command, c]) => {
          const r = await trove(bin, [...(c.unreachable as string[]), "--url", closedUrl]);
          expect(r.code, command).toBe(7);
          // (mirror's summary line comes first: every run ends with one, docs/cli.md)
          expect(r.stderr, command).toMatch(
            new RegExp(`^trove ${command}: cannot reach http://127\\.0\\.0\\.1:${closedPort}`, "m"),
          );
        });
      }, 120_000);

      it("3 when the store, resource, directory or project does not exist", async () => {
        const cases = Object.entries(CASES).filter(([, c]) => c.notFound);
        await inBatches(cases, async ([command, c]) => {
          const r = await trove(bin, c.notFound as string[], { TROVE_URL: server.url });
          expect(r.code, `${command}: ${r.stderr}`).toBe(3);
          expect(r.stderr, command).toMatch(new RegExp(`^trove ${command}: `, "m"));
        });
      }, 120_000);

      it("1 error, 4 precondition failed, 6 forbidden, 8 conflict", async () => {
        const rest = createRestClient({ baseUrl: server.url });
        const dir = `codes-${bin === ROOT_BIN ? "root" : "sdk"}`;
        await rest.mkdir("home", dir);
        await rest.put("home", `${dir}/x.txt`, "x");
        const env = { TROVE_URL: server.url };
        expect(await trove(bin, ["get", `home/${dir}/x.txt`, "--override-mime", "not a type"], env)).toMatchObject({
          code: 1,
          stderr: expect.stringMatching(/^trove get: 400 /),
        });
        expect(await trove(bin, ["put", "-", `home/${dir}/x.txt`, "--if-match", "stale"], env)).toMatchObject({
          code: 4,
          stderr: expect.stringMatching(/^trove put: 412 /),
        });
        expect(await trove(bin, ["mkdir", `home/${dir}/x.txt`], env)).toMatchObject({
          code: 6,
          stderr: expect.stringMatching(/^trove mkdir: 403 /),
        });
        const project = ["project", "create", dir, "--account", "acme"];
        expect(await trove(bin, project, env)).toMatchObject({ code: 0 });
        expect(await trove(bin, project, env)).toMatchObject({
          code: 8,
          stderr: expect.stringMatching(/^trove project: 409 /),
        });
        expect((await rest.get("home", `${dir}/x.txt`, { as: "text" })) as { body?: string }).toMatchObject({
          body: "x",
        });
      }, 120_000);
    });
  }

  it("serve: 2 for a bad value, 7 when its MongoDB cannot be reached, 1 when its port is taken", async () => {
    const bad = await trove(ROOT_BIN, ["serve", "--port", "nope"]);
    expect(bad).toEqual({
      code: 2,
      stdout: "",
      stderr: 'trove serve: port must be a whole number from 0 to 65535, not "nope"\n',
    });
    const env = await trove(ROOT_BIN, ["serve"], { TROVE_LOG_LEVEL: "loud" });
    expect(env).toMatchObject({ code: 2, stderr: 'trove serve: unknown log level "loud"\n' });
    const mongo = await trove(ROOT_BIN, [
      "serve",
      "--mongodb-url",
      `mongodb://127.0.0.1:${closedPort}/`,
      "--port",
      "0",
      "--log-level",
      "silent",
    ]);
    expect(mongo.code).toBe(7);
    expect(mongo.stderr).toMatch(/^trove serve: cannot reach MongoDB: /);
    // A port in use: it cannot start, an error (1), with the reason.
    const taken = await trove(ROOT_BIN, [
      "serve",
      "--port",
      new URL(server.url).port,
      "--data",
      join(work, "taken-data"),
      "--log-level",
      "silent",
    ]);
    expect(taken.code).toBe(1);
    expect(taken.stderr).toMatch(/^trove serve: .*EADDRINUSE/);
    // The SDK's bin has no server: a usage mistake.
    expect(await trove(SDK_BIN, ["serve"])).toMatchObject({ code: 2 });
  }, 120_000);
});

describe("exit code 5, from both bins", () => {
  let dev: DevServer;
  beforeAll(async () => {
    dev = await startDevServer();
  }, 120_000);
  afterAll(async () => {
    await dev?.stop();
  });

  it("5 without credentials, or with credentials the token endpoint refuses", async () => {
    for (const [name, bin] of BINS) {
      const none = await trove(bin, ["ls", "home"], { TROVE_URL: dev.url });
      expect(none, name).toMatchObject({ code: 5, stderr: expect.stringMatching(/^trove ls: 401 /) });
      const refused = await trove(bin, ["token", "--client-id", dev.clientId, "--client-secret", "wrong"], {
        TROVE_URL: dev.url,
      });
      expect(refused.code, name).toBe(5);
      const token = await trove(bin, ["token", "--data", dev.issuerDir], { TROVE_URL: dev.url });
      expect(token.code, name).toBe(0);
      expect(token.stdout.trim().split("."), name).toHaveLength(3);
    }
  }, 120_000);
});
