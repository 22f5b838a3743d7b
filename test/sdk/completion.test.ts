// `trove completion bash|zsh|fish`: the scripts are loaded into the real shells and asked for
// completions (bash: `complete -p` and the completion function with COMP_WORDS; fish:
// `complete -C`; zsh: parsed, loaded under compinit and registered for trove), and they list
// exactly the commands, options and actions the CLI accepts, for the SDK's bin and the server's.

import { execFile } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { chmod, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRestClient } from "../../sdk/src/index.js";
import { startServer, type TestServer } from "../support/server.js";
import { ensureSdkBuilt, ROOT_BIN, SDK_BIN } from "./build.js";
import { runTrove } from "./support.js";

const exec = promisify(execFile);

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

function trove(bin: string, args: string[], cwd: string): Promise<Result> {
  return runTrove(args, { env: { PATH: process.env.PATH, HOME: cwd }, cwd, bin });
}

/** A shell on PATH; under CI=true a missing one fails (.ci/run says how to install it). */
function shell(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(delimiter)) {
    try {
      accessSync(join(dir, name), constants.X_OK);
      return join(dir, name);
    } catch {}
  }
  if (process.env.CI === "true") throw new Error(`${name} is not installed: apt-get install ${name}`);
  return undefined;
}

let work: string;
const scripts: Record<string, string> = {};

beforeAll(async () => {
  await ensureSdkBuilt();
  work = await mkdtemp(join(tmpdir(), "trove-completion-"));
  await writeFile(join(work, "fixture.json"), "{}");
  for (const [name, bin] of [
    ["sdk", SDK_BIN],
    ["root", ROOT_BIN],
  ] as const) {
    for (const sh of ["bash", "zsh", "fish"]) {
      const r = await trove(bin, ["completion", sh], work);
      expect(r, `${name} ${sh}`).toMatchObject({ code: 0, stderr: "" });
      scripts[`${name}.${sh}`] = join(work, `${name}.${sh}`);
      await writeFile(join(work, `${name}.${sh}`), r.stdout);
    }
  }
}, 120_000);
afterAll(async () => {
  if (work) await rm(work, { recursive: true, force: true });
});

/** What bash's completion function answers for the words of a command line (the last may be ""). */
async function bashComplete(script: string, words: string[], env?: NodeJS.ProcessEnv): Promise<string[]> {
  const quoted = words.map((w) => `'${w}'`).join(" ");
  const { stdout } = await exec(
    "bash",
    [
      "-c",
      `source "$1"; COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _trove; printf '%s\\n' "\${COMPREPLY[@]}"`,
      "bash",
      script,
    ],
    { cwd: work, ...(env ? { env } : {}) },
  );
  return stdout.split("\n").filter((l) => l !== "");
}

const CLIENT_COMMANDS = [
  "token",
  "ls",
  "get",
  "put",
  "rm",
  "mkdir",
  "log",
  "restore",
  "stores",
  "watch",
  "mirror",
  "project",
  "report",
];

describe("trove completion", () => {
  it("usage: no shell or an unknown one exits 2; --help explains how to load each", async () => {
    expect(await trove(SDK_BIN, ["completion"], work)).toEqual({
      code: 2,
      stdout: "",
      stderr: "trove completion: missing the shell: give one of bash, zsh, fish\n",
    });
    expect(await trove(SDK_BIN, ["completion", "tcsh"], work)).toMatchObject({
      code: 2,
      stderr: 'trove completion: unexpected "tcsh": give one of bash, zsh, fish\n',
    });
    const help = await trove(SDK_BIN, ["completion", "--help"], work);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain("source <(trove completion bash)");
    expect(help.stdout).toContain("trove completion fish | source");
  });

  it("bash: the script parses, registers _trove for trove, and completes commands, options, actions and files", async () => {
    const script = scripts["sdk.bash"] as string;
    await exec("bash", ["-n", script]);
    const { stdout } = await exec("bash", ["-c", `source "$1"; complete -p trove`, "bash", script]);
    expect(stdout).toBe("complete -F _trove trove\n");

    const commands = await bashComplete(script, ["trove", ""]);
    for (const c of [...CLIENT_COMMANDS, "completion", "--help", "--version"]) expect(commands).toContain(c);
    expect(commands).not.toContain("serve");
    expect(await bashComplete(script, ["trove", "st"])).toEqual(["stores"]);
    expect(await bashComplete(script, ["trove", "stores", ""])).toEqual([
      "list",
      "get",
      "show",
      "create",
      "update",
      "delete",
    ]);
    expect(await bashComplete(script, ["trove", "project", ""])).toEqual(["list", "create", "show", "env", "promote"]);
    expect(await bashComplete(script, ["trove", "completion", ""])).toEqual(["bash", "zsh", "fish"]);
    expect(await bashComplete(script, ["trove", "ls", "--rec"])).toEqual(["--recursive"]);
    expect(await bashComplete(script, ["trove", "ls", "home", "--cl"])).toEqual(["--client-id", "--client-secret"]);
    // A local path, and the value of an option that takes one, complete as files.
    expect(await bashComplete(script, ["trove", "put", "fix"])).toEqual(["fixture.json"]);
    expect(await bashComplete(script, ["trove", "ls", "home", "--config", "fix"])).toEqual(["fixture.json"]);
    expect(await bashComplete(script, ["trove", "nonsense", ""])).toEqual([]);
  });

  it("bash: history's commands and options (log, restore, get and ls --as-of), and help's command names", async () => {
    const script = scripts["sdk.bash"] as string;
    expect(await bashComplete(script, ["trove", "lo"])).toEqual(["log"]);
    expect(await bashComplete(script, ["trove", "res"])).toEqual(["restore"]);
    const restore = await bashComplete(script, ["trove", "restore", "home/site/", "--"]);
    for (const o of ["--version", "--if-match", "--as-of", "--dry-run", "--json", "--url"])
      expect(restore).toContain(o);
    expect(await bashComplete(script, ["trove", "restore", "--d"])).toEqual(["--dry-run", "--data"]);
    expect(await bashComplete(script, ["trove", "log", "--j"])).toEqual(["--json"]);
    expect(await bashComplete(script, ["trove", "get", "--ver"])).toEqual(["--version"]);
    expect(await bashComplete(script, ["trove", "get", "--as"])).toEqual(["--as-of"]);
    expect(await bashComplete(script, ["trove", "ls", "home", "--as"])).toEqual(["--as-of"]);
    expect(await bashComplete(script, ["trove", "help", "re"])).toEqual(["restore", "report"]);
    const help = await bashComplete(script, ["trove", "help", ""]);
    for (const c of [...CLIENT_COMMANDS, "completion"]) expect(help).toContain(c);
    expect(await bashComplete(scripts["root.bash"] as string, ["trove", "help", "se"])).toEqual(["serve"]);
  });

  it("bash, server package: serve and its options too", async () => {
    const script = scripts["root.bash"] as string;
    await exec("bash", ["-n", script]);
    expect(await bashComplete(script, ["trove", "se"])).toEqual(["serve"]);
    expect(await bashComplete(script, ["trove", "serve", "--mongodb-"])).toEqual([
      "--mongodb-url",
      "--mongodb-database",
    ]);
    expect(await bashComplete(script, ["trove", "serve", "--no-"])).toEqual(["--no-report-worker"]);
    expect(await bashComplete(script, ["trove", "serve", "--data", "fix"])).toEqual(["fixture.json"]);
    // serve takes no connection options: they are the client commands'.
    expect(await bashComplete(script, ["trove", "serve", "--client-"])).toEqual([]);
  });

  it("serve's completed options are the ones serve accepts", async () => {
    const script = scripts["root.bash"] as string;
    const options = (await bashComplete(script, ["trove", "serve", "-"])).filter((o) => o.startsWith("--"));
    expect(options.length).toBeGreaterThan(15);
    for (const option of options) {
      if (option === "--help") continue;
      // A bad --port last, so that no server starts: an accepted option fails on a value, never as unknown.
      const value = option === "--no-report-worker" ? [] : [""];
      const r = await trove(ROOT_BIN, ["serve", option, ...value, "--port", "nope"], work);
      expect(r.stderr, option).not.toMatch(/Unknown option/);
      expect(r.code, option).toBe(2);
    }
  }, 180_000);

  it("the actions completed are the ones each command accepts (its unknown-action error lists them)", async () => {
    const script = scripts["sdk.bash"] as string;
    for (const command of ["stores", "project", "report"]) {
      const r = await trove(
        SDK_BIN,
        [command, "no-such-action", ...(command === "stores" ? ["NAME"] : []), "--url", "http://127.0.0.1:9"],
        work,
      );
      expect(r.code, command).toBe(2);
      const listed = /: ([a-z, ]+) or ([a-z]+)\n$/.exec(r.stderr);
      if (!listed) throw new Error(`${command}: no list of actions in ${JSON.stringify(r.stderr)}`);
      const accepted = [...(listed[1] as string).split(", "), listed[2] as string];
      expect((await bashComplete(script, ["trove", command, ""])).sort(), command).toEqual(accepted.sort());
    }
  });

  it("fish: the script parses and complete -C answers commands, options and actions", async (context) => {
    const fish = shell("fish");
    const script = scripts["sdk.fish"] as string;
    expect(await readText(script)).toContain(
      "complete -c trove -n __trove_needs_command -f -a stores -d 'Lists stores'",
    );
    if (!fish) {
      context.annotate("fish is not installed: only the script's text was checked");
      return;
    }
    await exec(fish, ["--no-execute", script]);
    const complete = async (line: string) => {
      const { stdout } = await exec(fish, ["--no-config", "-c", `source $argv[1]; complete -C '${line}'`, script], {
        cwd: work,
      });
      return stdout
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => l.split("\t")[0]);
    };
    expect(await complete("trove st")).toEqual(["stores"]);
    expect(await complete("trove stores ")).toEqual(
      expect.arrayContaining(["list", "get", "create", "update", "delete"]),
    );
    expect(await complete("trove ls --rec")).toEqual(["--recursive"]);
    expect(await complete("trove put fix")).toEqual(["fixture.json"]);
    const root = scripts["root.fish"] as string;
    const { stdout } = await exec(fish, [
      "--no-config",
      "-c",
      `source $argv[1]; complete -C 'trove serve --mongodb-u'`,
      root,
    ]);
    expect(stdout.split("\t")[0]?.trim()).toBe("--mongodb-url");
  });

  it("zsh: the script parses, and under compinit registers _trove for trove", async (context) => {
    const zsh = shell("zsh");
    const script = scripts["sdk.zsh"] as string;
    const text = await readText(script);
    expect(text.startsWith("#compdef trove\n")).toBe(true);
    expect(text).toContain("'stores:Lists stores'");
    expect(text).toContain("    (stores)\n      opts=(--type --set --json --url");
    if (!zsh) {
      context.annotate("zsh is not installed: only the script's text was checked");
      return;
    }
    await exec(zsh, ["-n", script]);
    const { stdout } = await exec(zsh, [
      "-f",
      "-c",
      `autoload -U compinit && compinit -u -d "$2/.zcompdump"; source "$1"; print -r -- $_comps[trove]; whence -w _trove`,
      "zsh",
      script,
      work,
    ]);
    expect(stdout).toBe("_trove\n_trove: function\n");
  });
});

async function readText(file: string): Promise<string> {
  const { readFile } = await import("node:fs/promises");
  return readFile(file, "utf8");
}

describe("completion of remote STORE/PATH arguments (issue 30): the scripts ask the server through trove", () => {
  let server: TestServer;
  /** Accepts connections and never answers: a server that does not answer in time. */
  let silent: Server;
  const held = new Set<Socket>();
  let env: NodeJS.ProcessEnv;

  beforeAll(async () => {
    server = await startServer();
    const rest = createRestClient({ baseUrl: server.url });
    await rest.mkdir("home", "templates");
    await rest.put("home", "templates/invoice.json", "{}");
    await rest.put("home", "templates/letter.json", "{}");
    await rest.mkdir("home", "themes");
    await rest.stores.create("archive");
    silent = createServer((socket) => {
      held.add(socket);
      socket.on("close", () => held.delete(socket));
    });
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    // `trove` on PATH, as the scripts call it.
    const bin = join(work, "bin");
    await mkdir(bin, { recursive: true });
    await writeFile(join(bin, "trove"), `#!/bin/sh\nexec "${process.execPath}" "${SDK_BIN}" "$@"\n`);
    await chmod(join(bin, "trove"), 0o755);
    env = { PATH: `${bin}${delimiter}${process.env.PATH}`, HOME: work, TROVE_URL: server.url };
  }, 120_000);
  afterAll(async () => {
    for (const socket of held) socket.destroy();
    await new Promise((resolve) => silent?.close(resolve));
    await server?.stop();
  });

  const silentUrl = () => `http://127.0.0.1:${(silent.address() as { port: number }).port}`;

  it("bash: stores, then directories and files under them; store names where a command takes one", async () => {
    const script = scripts["sdk.bash"] as string;
    const complete = (words: string[]) => bashComplete(script, words, env);
    expect(await complete(["trove", "ls", "ho"])).toEqual(["home/"]);
    expect(await complete(["trove", "ls", ""])).toEqual(["archive/", "home/"]);
    expect(await complete(["trove", "ls", "home/t"])).toEqual(["home/templates/", "home/themes/"]);
    expect(await complete(["trove", "get", "home/templates/"])).toEqual([
      "home/templates/invoice.json",
      "home/templates/letter.json",
    ]);
    expect(await complete(["trove", "rm", "--if-match", "t0", "home/templates/l"])).toEqual([
      "home/templates/letter.json",
    ]);
    // The second argument of put and push is the remote one; the first stays a local file.
    expect(await complete(["trove", "put", "fix"])).toEqual(["fixture.json"]);
    expect(await complete(["trove", "put", "fixture.json", "home/th"])).toEqual(["home/themes/"]);
    expect(await complete(["trove", "push", "--transfers", "2", "fixture.json", "home/te"])).toEqual([
      "home/templates/",
    ]);
    expect(await complete(["trove", "pull", "home/te"])).toEqual(["home/templates/"]);
    // Store names alone: stores get|show|update|delete NAME, watch STORE...
    expect(await complete(["trove", "stores", "show", "a"])).toEqual(["archive"]);
    expect(await complete(["trove", "watch", "home", "a"])).toEqual(["archive"]);
    // The connection options on the command line are the ones used.
    expect(await complete(["trove", "ls", "--url", "http://127.0.0.1:1", "ho"])).toEqual([]);
    expect(await complete(["trove", "ls", `--url=${silentUrl()}`, "ho"])).toEqual([]);
    expect(await complete(["trove", "ls", "--url", server.url, "home/the"])).toEqual(["home/themes/"]);
  });

  it("the helper: nothing, quietly (exit 0, no stderr), when the server does not answer or refuses", async () => {
    const run = (args: string[], extra: Record<string, string> = {}) =>
      runTrove(args, { env: { ...env, ...extra }, cwd: work });
    expect(await run(["__complete", "path", "home/te"])).toEqual({ code: 0, stdout: "home/templates/\n", stderr: "" });
    expect(await run(["__complete", "path", "ho"], { TROVE_URL: silentUrl() })).toEqual({
      code: 0,
      stdout: "",
      stderr: "",
    });
    expect(await run(["__complete", "path", "ho"], { TROVE_URL: "http://127.0.0.1:1" })).toEqual({
      code: 0,
      stdout: "",
      stderr: "",
    });
    expect(await run(["__complete", "path", "nostore/x"])).toEqual({ code: 0, stdout: "", stderr: "" });
    expect(await run(["__complete", "store", "h", "--", "ls", "--token", "not-a-token"])).toEqual({
      code: 0,
      stdout: "home\n",
      stderr: "",
    });
    // Not a command of the help, nor of the completion.
    expect((await run(["--help"])).stdout).not.toContain("__complete");
  });

  it("zsh: the completion function adds remote candidates, directories without a suffix", async (context) => {
    const zsh = shell("zsh");
    if (!zsh) {
      context.annotate("zsh is not installed");
      return;
    }
    const script = scripts["sdk.zsh"] as string;
    // compadd and _files stand in for the completion system's: they print what they are given.
    const complete = async (words: string[]) => {
      const { stdout } = await exec(
        zsh,
        [
          "-f",
          "-c",
          `source "$1"; shift; compadd() { print -r -- "compadd $*" }; _files() { print -r -- "_files" }; ` +
            `_describe() { print -r -- "_describe" }; words=("$@"); CURRENT=$#words; PREFIX=$words[-1]; _trove`,
          "zsh",
          script,
          ...words,
        ],
        { cwd: work, env },
      );
      return stdout.split("\n").filter((l) => l !== "");
    };
    expect(await complete(["trove", "ls", "home/t"])).toEqual([
      "compadd -S  -- home/templates/ home/themes/",
      "compadd --",
    ]);
    expect(await complete(["trove", "get", "home/templates/i"])).toEqual([
      "compadd -S  --",
      "compadd -- home/templates/invoice.json",
    ]);
    expect(await complete(["trove", "stores", "get", "ar"])).toEqual(["compadd -S  --", "compadd -- archive"]);
    expect(await complete(["trove", "put", "fix"])).toEqual(["_files"]);
    expect(await complete(["trove", "ls", "--url", silentUrl(), "ho"])).toEqual(["compadd -S  --", "compadd --"]);
    expect(await complete(["trove", "get", "-o", "out.json", "--url", server.url, "home/the"])).toEqual([
      "compadd -S  -- home/themes/",
      "compadd --",
    ]);
  });

  it("fish: complete -C answers remote candidates", async (context) => {
    const fish = shell("fish");
    if (!fish) {
      context.annotate("fish is not installed");
      return;
    }
    const script = scripts["sdk.fish"] as string;
    const complete = async (line: string) => {
      const { stdout } = await exec(fish, ["--no-config", "-c", `source $argv[1]; complete -C '${line}'`, script], {
        cwd: work,
        env,
      });
      return stdout
        .split("\n")
        .filter((l) => l !== "")
        .map((l) => l.split("\t")[0]);
    };
    expect(await complete("trove ls home/t")).toEqual(["home/templates/", "home/themes/"]);
    expect(await complete("trove get home/templates/")).toEqual([
      "home/templates/invoice.json",
      "home/templates/letter.json",
    ]);
    expect(await complete("trove stores show ar")).toEqual(["archive"]);
    expect(await complete("trove put fix")).toEqual(["fixture.json"]);
    expect(await complete(`trove ls --url ${silentUrl()} ho`)).toEqual([]);
    // An option's value is not counted as an argument; the --url given is the one asked.
    expect(await complete(`trove get --output out.json --url ${server.url} home/the`)).toEqual(["home/themes/"]);
  });
});
