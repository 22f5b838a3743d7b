// Every code snippet of README.md and sdk/README.md, as a reader copies it: shell snippets parse
// (bash -n), TypeScript snippets type-check against the SDK's declarations (strict, NodeNext, as
// a user's project resolves @trove/sdk), JavaScript ones type-check (checkJs) and parse; and the
// runnable ones run against a live `trove serve` started here: README.md's shell sequence
// (token, the REST curl walk-through, buf curl, the change feed, content insights, metrics) in
// one bash with `set -euo pipefail`, its JavaScript, and every SDK snippet (the mirror until
// SIGINT). The only change made to a snippet is the server's address (the test's port).

import { execFile, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRestClient } from "../sdk/src/index.js";
import { ensureSdkBuilt, ROOT } from "./sdk/build.js";
import { type ChildServer, startChildServer } from "./support/child-server.js";

const exec = promisify(execFile);

interface Snippet {
  /** e.g. sdk/README.md:63 */
  where: string;
  /** A file name for it: sdk-README-63 */
  name: string;
  lang: string;
  code: string;
}

function snippetsOf(file: string, text: string): Snippet[] {
  const found: Snippet[] = [];
  for (const m of text.matchAll(/^```(\w+)\n([\s\S]*?)^```$/gm)) {
    const line = text.slice(0, m.index).split("\n").length;
    found.push({
      where: `${file}:${line}`,
      name: `${file.replace(/\.md$/, "").replace(/\//g, "-")}-${line}`,
      lang: m[1] as string,
      code: m[2] as string,
    });
  }
  return found;
}

/**
 * Shell snippets that are not run, each for a reason: they install, start a server of their own,
 * need Docker, never end, or load a completion into an interactive shell. Every other shell
 * snippet runs.
 */
const NOT_RUN: Array<[RegExp, string]> = [
  [/^npm install {5}#/m, "installs and starts the server (this test starts one)"],
  [/--issuer https:\/\/login\.example\.com/, "needs an external issuer"],
  [/^docker run/m, "needs Docker and MongoDB"],
  [/^npm test/m, "the development commands (CI runs them)"],
  [/npm pack/, "packs and installs the SDK (test/sdk/pack.test.ts does)"],
  [/until Ctrl-C/, "a mirror that never ends (the SDK mirror snippet is run with SIGINT)"],
  [/completion bash/, "loads completion into an interactive shell (test/sdk/completion.test.ts)"],
];

const PORT_IN_SNIPPETS = "http://127.0.0.1:13242";

let work: string;
let server: ChildServer;
let token: string;
let all: Snippet[];

function env(): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    HOME: work,
    TROVE_URL: server.url,
    TROVE_TOKEN: token,
    npm_config_update_notifier: "false",
  };
}

function live(code: string): string {
  return code.replaceAll(PORT_IN_SNIPPETS, server.url);
}

beforeAll(async () => {
  await ensureSdkBuilt();
  all = [];
  for (const file of ["README.md", "sdk/README.md"]) {
    all.push(...snippetsOf(file, await readFile(join(ROOT, file), "utf8")));
  }
  // A user's project beside a checkout: @trove/sdk and its dependencies resolve from the
  // checkout's node_modules (npx trove is the SDK's bin there), with the example project.
  work = await mkdtemp(join(tmpdir(), "trove-readme-"));
  await symlink(join(ROOT, "node_modules"), join(work, "node_modules"));
  await symlink(join(ROOT, "examples"), join(work, "examples"));
  await symlink(join(ROOT, "proto"), join(work, "proto"));
  await writeFile(join(work, "package.json"), JSON.stringify({ name: "reader", private: true, type: "module" }));
  // The server of the README: data in ./.trove-data, where `trove token` looks by default.
  await mkdir(join(work, ".trove-data"));
  server = await startChildServer({ dataDir: join(work, ".trove-data"), args: ["--poll-wait", "1"] });
  token = server.authorization.replace(/^Bearer /, "");
}, 120_000);

afterAll(async () => {
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("README snippets", () => {
  it("finds the snippets of both READMEs", () => {
    const langs = new Set(all.map((s) => s.lang));
    expect([...langs].sort()).toEqual(["js", "sh", "ts"]);
    expect(all.filter((s) => s.where.startsWith("sdk/") && s.lang === "ts").length).toBeGreaterThanOrEqual(6);
  });

  it("every shell snippet parses (bash -n)", async () => {
    for (const s of all.filter((x) => x.lang === "sh")) {
      await exec("bash", ["-n", "-c", s.code]).catch((e: { stderr: string }) => {
        throw new Error(`${s.where} does not parse:\n${e.stderr}`);
      });
    }
  });

  it("every TypeScript and JavaScript snippet type-checks against the SDK's declarations", async () => {
    await mkdir(join(work, "snippets"), { recursive: true });
    for (const s of all.filter((x) => x.lang === "ts" || x.lang === "js")) {
      // A module each (top-level await, own names), exactly as written.
      await writeFile(join(work, "snippets", `${s.name}.${s.lang === "ts" ? "ts" : "mjs"}`), `${s.code}\nexport {};\n`);
    }
    await writeFile(
      join(work, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          module: "NodeNext",
          moduleResolution: "NodeNext",
          target: "ES2022",
          strict: true,
          allowJs: true,
          checkJs: true,
          outDir: "out",
          skipLibCheck: true,
          types: ["node"],
          typeRoots: [join(ROOT, "node_modules", "@types")],
        },
        include: ["snippets/*.ts", "snippets/*.mjs"],
      }),
    );
    await exec(process.execPath, [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", work], {
      cwd: work,
    }).catch((e: { stdout: string }) => {
      throw new Error(`the snippets do not type-check:\n${e.stdout}`);
    });
    for (const s of all.filter((x) => x.lang === "ts"))
      expect(existsSync(join(work, "out", `${s.name}.js`))).toBe(true);
  }, 120_000);

  it("README.md's shell snippets run in sequence against a live server, as a reader runs them", async () => {
    const runnable = all.filter(
      (s) => s.where.startsWith("README.md") && s.lang === "sh" && !NOT_RUN.some(([p]) => p.test(s.code)),
    );
    expect(runnable.length).toBeGreaterThanOrEqual(6);
    const script = ["set -euo pipefail", ...runnable.map((s) => `# ${s.where}\n${live(s.code)}`)].join("\n");
    const { stdout, stderr } = await exec("bash", ["-c", script], {
      cwd: work,
      env: env(),
      maxBuffer: 64 * 1024 * 1024,
      timeout: 300_000,
    }).catch((e: { stdout: string; stderr: string; code: number }) => {
      throw new Error(`README.md's shell snippets failed (exit ${e.code}):\n${e.stderr}\n${e.stdout.slice(-4000)}`);
    });
    // The walk-through's answers: created, not modified, replaced under If-Match, the XML
    // listing, a deleted resource's 404, a store created and removed.
    expect(stdout).toMatch(/^HTTP\/1\.1 201 /m);
    expect(stdout).toMatch(/^HTTP\/1\.1 304 /m);
    expect(stdout).toMatch(/^HTTP\/1\.1 404 [^\n]*\n(?:[^\n]+\n)*\r?\ndeleted/m);
    expect(stdout).toContain("<store ");
    expect(stdout).toMatch(/^RESET home \d+$/m);
    // Content insights: the report's dependents and its Mermaid graph; metrics.
    expect(stdout).toMatch(/^(graph|flowchart) /m);
    expect(stdout).toMatch(/^trove_requests_total\{/m);
    expect(stderr).not.toMatch(/command not found|unbound variable/);
    // The files the snippets made: invoice.json, in the reader's directory.
    expect(JSON.parse(await readFile(join(work, "invoice.json"), "utf8"))).toEqual({ name: "invoice", pages: 2 });
  }, 300_000);

  it("the JavaScript and TypeScript snippets run against the live server", async () => {
    // What earlier steps of the READMEs leave on the server: templates/invoice.json, and ./site.
    const rest = createRestClient({ baseUrl: server.url, auth: token });
    await rest.mkdir("home", "templates");
    await rest.put("home", "templates/invoice.json", '{"name":"invoice"}', { contentType: "application/json" });
    await mkdir(join(work, "site"), { recursive: true });
    await writeFile(join(work, "site", "index.html"), "<h1>site</h1>");

    const code = all.filter((s) => s.lang === "ts" || s.lang === "js");
    for (const s of code) {
      const source = join(work, "snippets", `${s.name}.${s.lang === "ts" ? "ts" : "mjs"}`);
      const file = s.lang === "ts" ? join(work, "out", `${s.name}.js`) : source;
      await writeFile(file, live(await readFile(file, "utf8")));
      if (s.code.includes('process.once("SIGINT"')) {
        const r = await untilSigint(file, () => existsSync(join(work, "templates", "invoice.json")));
        expect(r, s.where).toMatchObject({ code: 0 });
        expect(r.stdout, s.where).toMatch(/^write /m);
        continue;
      }
      await exec(process.execPath, [file], { cwd: work, env: env(), timeout: 180_000 }).catch(
        (e: { stderr: string; code: number }) => {
          throw new Error(`${s.where} failed (exit ${e.code}):\n${e.stderr}`);
        },
      );
    }
    expect(code.length).toBeGreaterThanOrEqual(7);
    expect(await readFile(join(work, "copy", "index.html"), "utf8")).toBe("<h1>site</h1>");
  }, 300_000);
});

/** Runs a snippet that stops on SIGINT: the signal goes once `ready()` holds. */
function untilSigint(file: string, ready: () => boolean): Promise<{ code: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file], { cwd: work, env: env(), stdio: ["ignore", "pipe", "inherit"] });
    let stdout = "";
    child.stdout.setEncoding("utf8").on("data", (s: string) => {
      stdout += s;
    });
    const deadline = Date.now() + 120_000;
    const timer = setInterval(() => {
      if (ready() || Date.now() > deadline) {
        clearInterval(timer);
        child.kill("SIGINT");
      }
    }, 100);
    child.on("error", reject);
    child.on("close", (code) => {
      clearInterval(timer);
      resolve({ code, stdout });
    });
  });
}
