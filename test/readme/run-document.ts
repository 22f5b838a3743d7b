// Runs the code blocks of one document in the order written, as a reader copies them, against a
// fresh `trove serve` of its own, and checks what the text says they print (snippets.ts). The
// reader's directory is a temporary one (HOME too) beside the checkout: node_modules, examples/
// and proto/ are links to the checkout's, so `npx trove`, `@trove/sdk` and the example project
// resolve as in a checkout; the server's data is its ./.trove-data. The only change made to a
// block is the server's address (the documents' 127.0.0.1:13242 becomes the test server's), and
// TROVE_URL points the client commands there.

import { execFile, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdir, mkdtemp, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureSdkBuilt, ROOT } from "../sdk/build.js";
import { type ChildServer, startChildServer } from "../support/child-server.js";
import { type Block, expectPrinted, type ParseOptions, parseDocument, printsOf, stepsOf } from "./snippets.js";

const exec = promisify(execFile);

const ADDRESS_IN_DOCS = "127.0.0.1:13242";
const BLOCK_TIMEOUT = 90_000;

export interface DocumentOptions extends ParseOptions {
  /**
   * Blocks that are not run, each with the reason: they install, start a server of their own,
   * need an external issuer or Docker, never end, or only work in an interactive shell. Every
   * rule must match a block of the document.
   */
  notRun: Array<[RegExp, string]>;
}

/** The checkout's `git status --porcelain`, ignored files included (a stray .trove-data is one). */
async function checkoutStatus(): Promise<Set<string>> {
  const { stdout } = await exec("git", ["status", "--porcelain", "--untracked-files=all", "--ignored"], {
    cwd: ROOT,
    maxBuffer: 64 * 1024 * 1024,
  });
  return new Set(stdout.split("\n").filter((l) => l !== ""));
}

/**
 * Whether a new line of `git status` can be the blocks' doing: a path under the directories the
 * reader's directory links to, or one with a name the blocks use (invoice.json, .trove-data, …).
 * Other changes are other people's: the checkout may be edited while the tests run.
 */
function writtenByBlocks(statusLine: string, blocks: Block[]): boolean {
  const path = statusLine.slice(3).replace(/^.* -> /, "");
  if (/^(examples|proto)\//.test(path)) return true;
  const names = new Set(blocks.flatMap((b) => b.code.match(/[\w.-]+/g) ?? []));
  return path.split("/").some((segment) => segment !== "" && names.has(segment));
}

/** Registers the tests of one document: every runnable block in order, each one a test. */
export function describeDocument(file: string, options: DocumentOptions): void {
  // Tests are registered synchronously: the document is read when the test file loads.
  const text = readFileSync(join(ROOT, file), "utf8");
  const blocks = parseDocument(file, text, options);
  const reasons = new Map<Block, string>();
  for (const b of blocks) {
    const rule = options.notRun.find(([p]) => p.test(b.code));
    if (rule) reasons.set(b, rule[1]);
  }
  const runnable = blocks.filter((b) => !reasons.has(b));

  describe(file, () => {
    let work: string;
    let server: ChildServer;
    let token: string;
    let statusBefore: Set<string>;
    let failed: string | undefined;

    /** The reader's environment: the checkout's Node and bins first (Node 24, `trove`), HOME here. */
    const env = (): NodeJS.ProcessEnv => ({
      PATH: `${join(ROOT, "node_modules", ".bin")}:${process.env.PATH}`,
      HOME: work,
      TROVE_URL: server.url,
      npm_config_update_notifier: "false",
      npm_config_fund: "false",
    });
    /** What the block printed, in the documents' words: their address, the reader's directory as `.`. */
    const asDocs = (output: string) =>
      output.replaceAll(server.url.replace("http://", ""), ADDRESS_IN_DOCS).replaceAll(work, ".");
    const live = (code: string) => code.replaceAll(`http://${ADDRESS_IN_DOCS}`, server.url);

    beforeAll(async () => {
      await ensureSdkBuilt();
      statusBefore = await checkoutStatus();
      work = await mkdtemp(join(tmpdir(), "trove-docs-"));
      for (const linked of ["node_modules", "examples", "proto"]) await symlink(join(ROOT, linked), join(work, linked));
      await writeFile(join(work, "package.json"), JSON.stringify({ name: "reader", private: true, type: "module" }));
      await mkdir(join(work, ".trove-data"));
      server = await startChildServer({ dataDir: join(work, ".trove-data") });
      token = server.authorization.replace(/^Bearer /, "");
    }, 120_000);

    afterAll(async () => {
      await server?.stop();
      if (work) await rm(work, { recursive: true, force: true });
    });

    it("every block is run, or not run for a reason; every not-run rule matches a block", () => {
      expect(runnable.length).toBeGreaterThan(0);
      for (const [pattern, reason] of options.notRun) {
        expect(
          blocks.some((b) => pattern.test(b.code)),
          `not-run rule ${pattern} (${reason}) matches no block`,
        ).toBe(true);
      }
    });

    it("every shell block parses (bash -n)", async () => {
      for (const b of blocks.filter((x) => x.lang === "sh")) {
        await exec("bash", ["-n", "-c", b.code]).catch((e: { stderr: string }) => {
          throw new Error(`${b.where} does not parse:\n${e.stderr}`);
        });
      }
    });

    it("every TypeScript and JavaScript block type-checks against the SDK's declarations", async () => {
      try {
        await compile(work, blocks);
      } catch (err) {
        failed = "the type-check";
        throw err;
      }
    }, 120_000);

    for (const block of blocks) {
      const reason = reasons.get(block);
      if (reason) {
        it.skip(`${block.where} (${block.lang}) is not run: ${reason}`, () => {});
        continue;
      }
      it(
        `${block.where} (${block.lang}) runs and prints what the text says`,
        async (ctx) => {
          if (failed) ctx.skip(`after ${failed}, which failed`);
          try {
            if (block.lang === "sh") await runShell(block);
            else await runScript(block);
          } catch (err) {
            failed = block.where;
            throw err;
          }
        },
        BLOCK_TIMEOUT,
      );
    }

    it("wrote nothing into the checkout", async () => {
      const added = [...(await checkoutStatus())].filter((l) => !statusBefore.has(l));
      expect(
        added.filter((l) => writtenByBlocks(l, runnable)),
        "new in the checkout's git status while the blocks ran",
      ).toEqual([]);
    });

    /** Shell state (variables, working directory) carried from one step to the next. */
    const state = () => join(work, ".shell-state");

    async function runShell(block: Block): Promise<void> {
      let output = "";
      for (const step of stepsOf(block)) {
        // Line 1 is the prelude, so the step's line k is the script's line k + 1.
        const script = [
          `set -euo pipefail; exec 2>&1; __known=" $(compgen -v | tr '\\n' ' ') "; [ -f ${state()} ] && source ${state()}; trap 'echo "${block.file}:$((${step.line} + LINENO - 2)): exit $?"' ERR`,
          live(step.code),
          `{ for __v in $(compgen -v); do case "$__known" in *" $__v "*) ;; *) [[ $__v == __* || $__v == BASH* ]] || declare -p "$__v";; esac; done; echo "cd $(printf %q "$PWD")"; } > ${state()}`,
        ].join("\n");
        const printed = await run("bash", ["-c", script], step.where);
        show(step.where, printed);
        output += printed;
        expectPrinted(step.prints, asDocs(printed));
      }
      expectPrinted(block.output, asDocs(output));
    }

    async function runScript(block: Block): Promise<void> {
      const file = join(
        work,
        block.lang === "ts" ? "out" : "snippets",
        `${nameOf(block)}.${block.lang === "ts" ? "js" : "mjs"}`,
      );
      await writeFile(file, live(await readFile(file, "utf8")));
      const prints = printsOf(block);
      const untilSigint = /process\.(once|on)\("SIGINT"/.test(block.code);
      if (untilSigint && prints.length === 0) {
        throw new Error(`${block.where} runs until SIGINT: it must say what it prints (// prints), to be stopped then`);
      }
      // As the documents say to run them: TROVE_TOKEN=$(npx trove token) node file.
      const printed = await run(process.execPath, [file], block.where, { TROVE_TOKEN: token }, (sofar) => {
        if (!untilSigint) return false;
        try {
          expectPrinted(prints, asDocs(sofar));
          return true;
        } catch {
          return false;
        }
      });
      show(block.where, printed);
      expectPrinted(prints, asDocs(printed));
      expectPrinted(block.output, asDocs(printed));
    }

    /** TROVE_DOCS_SHOW=1 shows what each block printed, to write its expected output. */
    function show(where: string, printed: string): void {
      if (process.env.TROVE_DOCS_SHOW) process.stdout.write(`--- ${where}\n${asDocs(printed)}\n`);
    }

    /**
     * Runs a command in the reader's directory; its stdout and stderr together. It fails with the
     * block's location when the command exits with another code than 0. `interruptWhen` sends
     * SIGINT once it holds for what was printed so far.
     */
    function run(
      command: string,
      args: string[],
      where: string,
      extraEnv: NodeJS.ProcessEnv = {},
      interruptWhen?: (sofar: string) => boolean,
    ): Promise<string> {
      return new Promise((resolve, reject) => {
        const child = spawn(command, args, {
          cwd: work,
          env: { ...env(), ...extraEnv },
          stdio: ["ignore", "pipe", "pipe"],
        });
        let output = "";
        let interrupted = false;
        const take = (s: string) => {
          output += s;
          if (interruptWhen && !interrupted && interruptWhen(output)) {
            interrupted = true;
            child.kill("SIGINT");
          }
        };
        child.stdout.setEncoding("utf8").on("data", take);
        child.stderr.setEncoding("utf8").on("data", take);
        const timer = setTimeout(() => child.kill("SIGKILL"), BLOCK_TIMEOUT - 5000);
        child.on("error", reject);
        child.on("close", (code, signal) => {
          clearTimeout(timer);
          if (code === 0) resolve(output);
          else {
            const shown = output.length > 6000 ? `…${output.slice(-6000)}` : output;
            reject(
              new Error(`${where} failed (${signal ? `killed by ${signal}` : `exit ${code}`}):\n${asDocs(shown)}`),
            );
          }
        });
      });
    }
  });
}

function nameOf(block: Block): string {
  return `${block.file
    .replace(/\.md$/, "")
    .replace(/[^A-Za-z0-9]+/g, "-")
    .replace(/^-+/, "")}-${block.line}`;
}

/**
 * Writes every TypeScript and JavaScript block as a module of its own (top-level await, own
 * names), exactly as written, and type-checks them against the SDK's declarations as a user's
 * project resolves @trove/sdk (strict, NodeNext; JavaScript with checkJs). TypeScript is compiled
 * to out/.
 */
async function compile(work: string, blocks: Block[]): Promise<void> {
  const code = blocks.filter((b) => b.lang !== "sh");
  if (code.length === 0) return;
  await mkdir(join(work, "snippets"), { recursive: true });
  for (const b of code) {
    await writeFile(
      join(work, "snippets", `${nameOf(b)}.${b.lang === "ts" ? "ts" : "mjs"}`),
      `${b.code}\nexport {};\n`,
    );
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
    throw new Error(`the TypeScript and JavaScript blocks do not type-check:\n${e.stdout}`);
  });
}
