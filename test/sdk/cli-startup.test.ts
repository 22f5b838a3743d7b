// Issue 31, "The CLI starts in under 0.2 s": `trove --version`, `trove help` and a client command
// load neither the server (its storage adapters, logging, metrics) nor protobuf and Connect;
// each command's implementation is imported when it runs. The modules a run loaded are recorded
// by a module hook in the child process (bench/cli-startup.js measures the time itself).

import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { ensureSdkBuilt, ROOT, ROOT_BIN, SDK_BIN } from "./build.js";
import { runTrove } from "./support.js";

vi.setConfig({ testTimeout: 120_000 });

let work: string;
let hook: string;
/** A port nothing listens on: a client command fails to connect (exit 7) after loading what it needs. */
let closedPort: number;

beforeAll(async () => {
  await ensureSdkBuilt();
  work = await mkdtemp(join(tmpdir(), "trove-cli-startup-"));
  hook = join(work, "record-modules.mjs");
  await writeFile(
    hook,
    `import { registerHooks } from "node:module";
import { writeFileSync } from "node:fs";
const loaded = [];
registerHooks({ load(url, context, next) { loaded.push(url); return next(url, context); } });
process.on("exit", () => writeFileSync(process.env.TROVE_TEST_MODULES, loaded.join("\\n")));
`,
  );
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  closedPort = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
});

afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

/** Packages only the server, a gRPC/Connect client or report rendering need. */
const HEAVY_PACKAGES = [
  "@connectrpc/",
  "@bufbuild/",
  "mongodb",
  "better-sqlite3",
  "pino",
  "prom-client",
  "jose",
  "yaml",
];

/** The server package's own modules that `trove` loads before it knows the command. */
const SERVER_PACKAGE_AT_START = [
  "cli.js",
  "version.js",
  "backup/command-help.js",
  // serve's options and its --help, from the one option table, and what the table's parsers need.
  "server/config.js",
  "server/capacity.js",
  "server/limits.js",
  "domain/store.js",
  "domain/path.js",
  "domain/errors.js",
];

async function modulesOf(
  bin: string,
  args: string[],
): Promise<{ code: number | null; stdout: string; loaded: string[] }> {
  const list = join(work, `modules-${Math.random().toString(36).slice(2)}.txt`);
  const env = {
    PATH: process.env.PATH,
    HOME: work,
    XDG_CONFIG_HOME: join(work, ".config"),
    NODE_OPTIONS: `--import ${pathToFileURL(hook).href}`,
    TROVE_TEST_MODULES: list,
  };
  const r = await runTrove(args, { env, cwd: work, bin });
  return { code: r.code, stdout: r.stdout, loaded: (await readFile(list, "utf8")).split("\n") };
}

function heavy(loaded: string[]): string[] {
  const serverDist = `${pathToFileURL(join(ROOT, "dist")).href}/`;
  return loaded.filter(
    (url) =>
      HEAVY_PACKAGES.some((p) => url.includes(`/node_modules/${p}`)) ||
      (url.startsWith(serverDist) && !SERVER_PACKAGE_AT_START.includes(url.slice(serverDist.length))),
  );
}

describe("CLI start-up (issue 31: the CLI starts in under 0.2 s)", () => {
  for (const [name, bin] of [
    ["the server package's trove", ROOT_BIN],
    ["@trove/sdk's trove", SDK_BIN],
  ] as const) {
    it(`${name}: --version and help load no server module, protobuf or Connect`, async () => {
      const version = await modulesOf(bin, ["--version"]);
      expect(version.code).toBe(0);
      expect(version.stdout).toMatch(/@trove\/sdk \d/);
      expect(heavy(version.loaded)).toEqual([]);
      const help = await modulesOf(bin, ["help"]);
      expect(help.code).toBe(0);
      expect(help.stdout).toContain("Usage: trove <command> [options]");
      expect(heavy(help.loaded)).toEqual([]);
    });

    it(`${name}: a REST command (ls) loads no server module, protobuf or Connect`, async () => {
      const ls = await modulesOf(bin, ["ls", "home/", "--url", `http://127.0.0.1:${closedPort}`]);
      expect(ls.code).toBe(7);
      // The REST client was loaded and used; fast-xml-parser is not (it parses store lists,
      // versions and restores only, and is loaded when one is first parsed: about 8 MiB less).
      expect(ls.loaded.some((url) => /\/rest\/client\.[jt]s$/.test(url))).toBe(true);
      expect(ls.loaded.filter((url) => url.includes("/node_modules/fast-xml-parser/"))).toEqual([]);
      expect(heavy(ls.loaded)).toEqual([]);
    });
  }

  it("trove serve --help still prints serve's help (its module is loaded when it runs)", async () => {
    const r = await modulesOf(ROOT_BIN, ["serve", "--help"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("Usage: trove serve [options]");
  });
});
