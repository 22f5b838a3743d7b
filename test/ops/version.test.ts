// Versions (issue 13, item 9): `trove --version` of the server package and of the SDK's client
// commands print their package versions, each `--help` mentions it, and the start-up log line of
// `trove serve` carries the version and the storage backend (sqlite; mongodb on a FerretDB).

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { ensureSdkBuilt, ROOT, ROOT_BIN, SDK, SDK_BIN } from "../sdk/build.js";
import { freePort } from "../support/child-server.js";
import { type FerretDb, startFerretDb } from "../support/ferretdb.js";
import { describeWithFerretDb } from "../support/mongodb.js";

interface Result {
  code: number | null;
  stdout: string;
}

function run(bin: string, args: string[]): Promise<Result> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { stdio: ["ignore", "pipe", "inherit"] });
    let stdout = "";
    child.stdout.setEncoding("utf8").on("data", (s: string) => {
      stdout += s;
    });
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout }));
  });
}

async function versionOf(packageDir: string): Promise<string> {
  return (JSON.parse(await readFile(join(packageDir, "package.json"), "utf8")) as { version: string }).version;
}

let serverVersion: string;
let sdkVersion: string;

beforeAll(async () => {
  await ensureSdkBuilt();
  serverVersion = await versionOf(ROOT);
  sdkVersion = await versionOf(SDK);
}, 180_000);

describe("trove --version", () => {
  it("prints the server's version, and the client commands' (@trove/sdk), from the server package", async () => {
    for (const flag of ["--version", "-V", "version"]) {
      const result = await run(ROOT_BIN, [flag]);
      expect(result.code).toBe(0);
      expect(result.stdout).toBe(`trove ${serverVersion}\n@trove/sdk ${sdkVersion} (client commands)\n`);
    }
    const help = await run(ROOT_BIN, ["--help"]);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/"trove --version" prints the version/);
  });

  it("prints the SDK's version from the SDK's own bin", async () => {
    for (const flag of ["--version", "-V", "version"]) {
      const result = await run(SDK_BIN, [flag]);
      expect(result.code).toBe(0);
      expect(result.stdout).toBe(`@trove/sdk ${sdkVersion}\n`);
    }
    const help = await run(SDK_BIN, ["--help"]);
    expect(help.stdout).toMatch(/"trove --version" prints the version/);
  });
});

const children: ChildProcess[] = [];
const dirs: string[] = [];
let ferret: FerretDb | undefined;

afterEach(async () => {
  for (const child of children.splice(0)) {
    if (child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child.once("exit", r));
      child.kill("SIGKILL");
      await gone;
    }
  }
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
  await ferret?.dispose();
  ferret = undefined;
});

/** The JSON log line of `trove serve` that says where it listens. */
async function startupLine(args: string[]): Promise<Record<string, unknown>> {
  const dataDir = await mkdtemp(join(tmpdir(), "trove-version-"));
  dirs.push(dataDir);
  const port = await freePort();
  const child = spawn(process.execPath, [ROOT_BIN, "serve", "--port", String(port), "--data", dataDir, ...args], {
    stdio: ["ignore", "pipe", "ignore"],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    let rest = "";
    child.stdout?.setEncoding("utf8").on("data", (s: string) => {
      rest += s;
      for (const line of rest.split("\n")) {
        if (!line.startsWith("{")) continue;
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (/listening on/.test(String(parsed.msg))) resolve(parsed);
      }
    });
    child.once("exit", (code) => reject(new Error(`trove serve exited with ${code} before listening`)));
  });
}

describe("the start-up log line", () => {
  it("carries the version and the storage backend (sqlite)", async () => {
    const line = await startupLine([]);
    expect(line.version).toBe(serverVersion);
    expect(line.storage).toBe("sqlite");
    expect(line.synchronous).toBe("normal");
    expect(line.msg).toMatch(
      new RegExp(`^Trove ${serverVersion.replace(/\./g, "\\.")} listening on .* \\(storage: sqlite\\)$`),
    );
  });

  it("says the embedded store's commit durability: --sqlite-synchronous full (issue 14, PUT durability)", async () => {
    expect((await startupLine(["--sqlite-synchronous", "full"])).synchronous).toBe("full");
    const child = spawn(process.execPath, [ROOT_BIN, "serve", "--sqlite-synchronous", "always"], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    children.push(child);
    let stderr = "";
    child.stderr?.setEncoding("utf8").on("data", (s: string) => {
      stderr += s;
    });
    const code = await new Promise((resolve) => child.once("exit", resolve));
    expect({ code, stderr }).toEqual({
      code: 2,
      stderr: 'trove serve: unknown --sqlite-synchronous "always": use normal or full\n',
    });
  });

  describeWithFerretDb("on MongoDB", () => {
    it("carries the storage backend mongodb on MongoDB (FerretDB)", async () => {
      ferret = await startFerretDb();
      const line = await startupLine(["--mongodb-url", ferret.url]);
      expect(line.version).toBe(serverVersion);
      expect(line.storage).toBe("mongodb");
      expect(line.msg).toMatch(/\(storage: mongodb\)$/);
    }, 60_000);
  });
});
