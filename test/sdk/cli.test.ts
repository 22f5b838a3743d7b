// The SDK's `trove` command run as a child process against real servers: every
// command's --help, outputs, exit codes, configuration sources, and the server
// package's `trove` dispatching client commands to it.

import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { createRestClient, type TroveRestClient } from "../../sdk/src/index.js";
import { startServer, type TestServer } from "../support/server.js";
import { ensureSdkBuilt, ROOT_BIN } from "./build.js";
import { type DevServer, runTrove, startDevServer } from "./support.js";

let home: string;

// Each case starts several child processes; on a busy machine each takes up to a second.
vi.setConfig({ testTimeout: 120_000 });

function trove(args: string[], options: { env?: Record<string, string>; input?: string; bin?: string } = {}) {
  const env = { PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: join(home, ".config"), ...options.env };
  return runTrove(args, { env, cwd: home, bin: options.bin, input: options.input });
}

afterAll(async () => {
  if (home) await rm(home, { recursive: true, force: true });
});

const COMMANDS = [
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

describe("trove CLI (@trove/sdk bin)", () => {
  let server: TestServer;
  let rest: TroveRestClient;
  let env: Record<string, string>;

  beforeAll(async () => {
    await ensureSdkBuilt();
    home = await mkdtemp(join(tmpdir(), "trove-cli-home-"));
    server = await startServer({ pollWait: 1000 });
    rest = createRestClient({ baseUrl: server.url });
    env = { TROVE_URL: server.url };
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
  });

  it("--help on every command answers its usage and exits 0; the shared options are described once, in trove --help", async () => {
    for (const command of COMMANDS) {
      const r = await trove([command, "--help"]);
      expect(r.code, command).toBe(0);
      expect(r.stdout, command).toMatch(new RegExp(`^Usage: trove ${command}`));
      expect(r.stdout, command).toMatch(/and the exit codes are the same for every command: see trove --help\.\n$/);
      expect(r.stdout, command).not.toContain("TROVE_CLIENT_SECRET");
      expect(r.stdout, command).not.toContain("Exit codes");
    }
    const top = await trove(["--help"]);
    expect(top.code).toBe(0);
    for (const command of COMMANDS) expect(top.stdout).toContain(`  ${command} `);
    expect(top.stdout.match(/--client-secret S +TROVE_CLIENT_SECRET/g)).toHaveLength(1);
    expect(top.stdout).toContain("Exit codes (every command; docs/cli.md lists each case):\n  0  ok\n");
    expect(top.stdout).toContain("  7  server unreachable or unavailable\n");
  });

  it("usage errors exit 2: no command, an unknown command or option, a missing argument", async () => {
    expect((await trove([])).code).toBe(2);
    const unknown = await trove(["frobnicate"]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown command "frobnicate"');
    const badFlag = await trove(["ls", "home", "--nope"], { env });
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toMatch(/^trove ls: .*--nope/);
    const missing = await trove(["get"], { env });
    expect(missing).toMatchObject({ code: 2, stderr: "trove get: missing an address STORE/PATH\n" });
  });

  it("serve says that the server is the trove package; report without an action is a usage error", async () => {
    const serve = await trove(["serve"]);
    expect(serve.code).toBe(2);
    expect(serve.stderr).toContain("the server is not part of @trove/sdk");
    expect(serve.stderr).toContain("`trove` package");
    const report = await trove(["report"]);
    expect(report).toMatchObject({
      code: 2,
      stdout: "",
      stderr: "trove report: missing ACTION: create, status, list, download, query or diff\n",
    });
  });

  it("mkdir -p, put from a file and from stdin, get to stdout and to a file, ls, rm", async () => {
    expect((await trove(["mkdir", "-p", "home/cli/a/b"], { env })).code).toBe(0);
    const file = join(home, "note.txt");
    await writeFile(file, "from a file");
    const put = await trove(["put", file, "home/cli/a/"], { env });
    expect(put.code).toBe(0);
    const head = await rest.head("home", "cli/a/note.txt");
    expect(put.stdout).toBe(`created home/cli/a/note.txt ${head.notModified ? "" : head.tag}\n`);
    const piped = await trove(["put", "-", "home/cli/a/b/stdin.json", "--type", "application/json"], {
      env,
      input: '{"x":1}',
    });
    expect(piped.stdout).toMatch(/^created home\/cli\/a\/b\/stdin\.json \S+\n$/);
    expect((await trove(["get", "home/cli/a/b/stdin.json"], { env })).stdout).toBe('{"x":1}');
    const dest = join(home, "out.txt");
    const saved = await trove(["get", "home/cli/a/note.txt", dest], { env });
    expect(saved).toMatchObject({ code: 0, stdout: "", stderr: "" });
    expect(await readFile(dest, "utf8")).toBe("from a file");

    const tag = head.notModified ? "" : head.tag;
    const unchanged = await trove(["get", "home/cli/a/note.txt", join(home, "unchanged.txt"), "--if-none-match", tag], {
      env,
    });
    expect(unchanged).toMatchObject({
      code: 0,
      stdout: "",
      stderr: `not modified: home/cli/a/note.txt has tag ${tag}\n`,
    });
    await expect(readFile(join(home, "unchanged.txt"))).rejects.toThrow(/ENOENT/);

    expect((await trove(["ls", "home/cli/a"], { env })).stdout).toBe("b/\nnote.txt\n");
    expect((await trove(["ls", "-r", "home/cli"], { env })).stdout).toBe("a/\na/b/\na/b/stdin.json\na/note.txt\n");
    const json = JSON.parse((await trove(["ls", "--json", "home/cli/a/b/"], { env })).stdout) as Array<{
      name: string;
      type: string;
      size: number;
    }>;
    expect(json).toMatchObject([{ name: "stdin.json", type: "application/json", size: 7 }]);
    const long = (await trove(["ls", "-l", "home/cli/a/b"], { env })).stdout;
    expect(long).toMatch(/^application\/json\s+7\s+\d{4}-\d\d-\d\dT\S+Z\s+\S+\s+stdin\.json\n$/);

    expect((await trove(["rm", "home/cli/a/b"], { env })).code).toBe(0);
    expect((await trove(["ls", "--deleted", "-l", "home/cli/a"], { env })).stdout).toMatch(/b\/\s+deleted/);
  });

  it("ls -l and stores line their columns up, each as wide as its widest cell in the listing", async () => {
    await rest.mkdir("home", "cols");
    await rest.put("home", "cols/a.json", "{}", { contentType: "application/json" });
    await rest.put("home", "cols/big.txt", "x".repeat(12345), { contentType: "text/plain" });
    await rest.mkdir("home", "cols/sub");
    const long = await trove(["ls", "-l", "home/cols"], { env });
    expect(long.code).toBe(0);
    const lines = long.stdout.split("\n").filter((l) => l !== "");
    expect(lines.map((l) => l.split(/\s+/)[0])).toEqual(["application/json", "text/plain", "dir"]);
    const at = (pattern: RegExp) => lines.map((l) => l.search(pattern));
    const dates = at(/\d{4}-\d\d-\d\dT/);
    expect(new Set(dates).size).toBe(1);
    // Sizes are right-aligned: each ends two spaces before the date.
    expect(lines.map((l, i) => l.slice(0, dates[i]).trimEnd().length)).toEqual(dates.map((d) => d - 2));
    expect(lines.map((l, i) => l.slice(0, dates[i]).trimEnd().split(" ").pop())).toEqual(["2", "12345", "-"]);
    expect(new Set(at(/(a\.json|big\.txt|sub\/)$/)).size).toBe(1);
    for (const l of lines) expect(l).toBe(l.trimEnd());

    await rest.stores.create("cols-store-with-a-long-name", { type: "snapshot" });
    const stores = (await trove(["stores"], { env })).stdout.split("\n").filter((l) => l !== "");
    expect(stores.length).toBeGreaterThanOrEqual(2);
    expect(new Set(stores.map((l) => l.search(/ (recursive|snapshot) /))).size).toBe(1);
    expect(new Set(stores.map((l) => l.search(/ sync\S* /))).size).toBe(1);
    await rest.stores.delete("cols-store-with-a-long-name");
  });

  it("get of a directory says it is one, exits 2 and suggests ls; nothing is written", async () => {
    await rest.mkdir("home", "gdir");
    const out = join(home, "gdir.out");
    const cases: Array<[string, string]> = [
      ["home/gdir", "home/gdir is a directory, not a resource: list it with trove ls home/gdir/"],
      ["home/gdir/", "home/gdir/ is a directory, not a resource: list it with trove ls home/gdir/"],
      ["home", "home/ is a directory, not a resource: list it with trove ls home/"],
    ];
    for (const [arg, reason] of cases) {
      const r = await trove(["get", arg, out], { env });
      expect(r, arg).toEqual({ code: 2, stdout: "", stderr: `trove get: ${reason}\n` });
      expect((await trove(["get", arg], { env })).stdout, arg).toBe("");
    }
    await expect(readFile(out)).rejects.toThrow(/ENOENT/);
  });

  it("put FILE STORE/DIR puts the file inside an existing directory, as cp does", async () => {
    await rest.mkdir("home", "pdir");
    const file = join(home, "inside.txt");
    await writeFile(file, "inside");
    const r = await trove(["put", file, "home/pdir"], { env });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^created home\/pdir\/inside\.txt \S+\n$/);
    expect((await rest.get("home", "pdir/inside.txt", { as: "text" })) as { body?: string }).toMatchObject({
      body: "inside",
    });
    const named = await trove(["put", file, "home/pdir/renamed.txt"], { env });
    expect(named.stdout).toMatch(/^created home\/pdir\/renamed\.txt \S+\n$/);
    const again = await trove(["put", file, "home/pdir/renamed.txt"], { env });
    expect(again.stdout).toMatch(/^updated home\/pdir\/renamed\.txt \S+\n$/);
    const stdin = await trove(["put", "-", "home/pdir"], { env, input: "x" });
    expect(stdin).toEqual({
      code: 2,
      stdout: "",
      stderr: "trove put: home/pdir is a directory: uploading stdin needs the resource's full STORE/PATH\n",
    });
    expect((await rest.list("home", "pdir")).entries.map((e) => e.name)).toEqual(["inside.txt", "renamed.txt"]);
  });

  it("watch --once returns after one poll on a quiet store: exit 0, nothing printed", async () => {
    await rest.stores.create("quiet");
    const r = await trove(["watch", "quiet", "--once", "--wait", "1"], { env });
    expect(r).toEqual({ code: 0, stdout: "", stderr: "" });
    await rest.stores.delete("quiet");
  });

  it("project show prints text, and JSON with --json", async () => {
    const created = await trove(["project", "create", "cli-shown", "--account", "acme"], { env });
    expect(created).toMatchObject({ code: 0, stderr: "" });
    const id = created.stdout.trim();
    const envId = (await trove(["project", "env", "cli-shown", "production"], { env })).stdout.trim();
    const text = await trove(["project", "show", "cli-shown"], { env });
    expect(text.code).toBe(0);
    expect(text.stdout).toMatch(
      new RegExp(
        `^id {11}${id}\nname {9}cli-shown\naccount {6}acme\nstore {8}\\S+\ncreated {6}\\S+\ncreator {6}.*\nenvironments:\n  ${envId}  production\n$`,
      ),
    );
    const json = JSON.parse((await trove(["project", "show", "cli-shown", "--json"], { env })).stdout);
    expect(json).toMatchObject({ id, name: "cli-shown", environments: [{ id: envId, name: "production" }] });
  });

  it("exit codes: 3 not found and deleted, 4 precondition failed, 6 forbidden, 7 unreachable, 1 bad request", async () => {
    await rest.mkdir("home", "codes");
    const first = await rest.put("home", "codes/x.txt", "1");
    await rest.put("home", "codes/x.txt", "2");
    const stale = await trove(["put", "-", "home/codes/x.txt", "--if-match", first.tag], { env, input: "3" });
    expect(stale.code).toBe(4);
    expect(stale.stderr).toMatch(/^trove put: 412 /);
    expect((await trove(["rm", "home/codes/x.txt", "--if-match", first.tag], { env })).code).toBe(4);
    const missing = await trove(["get", "home/codes/none.txt"], { env });
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/^trove get: 404 /);
    await rest.delete("home", "codes/x.txt");
    const deleted = await trove(["get", "home/codes/x.txt"], { env });
    expect(deleted).toMatchObject({ code: 3, stderr: "trove get: 404 deleted\n" });
    expect((await trove(["put", "-", "home/nowhere/x.txt"], { env, input: "x" })).code).toBe(3);
    await rest.put("home", "codes/f.txt", "f");
    expect((await trove(["mkdir", "home/codes/f.txt"], { env })).code).toBe(6);
    expect((await trove(["stores", "create", "home"], { env })).code).toBe(6);
    const bad = await trove(["get", "home/codes/y.txt", "--override-mime", "not a type"], { env });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^trove get: 400 /);
    const closed = await startServer();
    const url = closed.url;
    await closed.stop();
    const unreachable = await trove(["ls", "home"], { env: { TROVE_URL: url } });
    expect(unreachable.code).toBe(7);
    expect(unreachable.stderr).toMatch(/^trove ls: cannot reach http:\/\/127\.0\.0\.1:\d+/);
  });

  it("stores: create with settings, list, get, update, delete", async () => {
    const created = await trove(["stores", "create", "cli-store", "--type", "snapshot", "--set", "keep-deleted=2d"], {
      env,
    });
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^cli-store {2}snapshot {2}sync,sync-snapshot {2}\S+\n/);
    expect(created.stdout).toContain("  keep-deleted=2d\n");
    const list = await trove(["stores"], { env });
    // Sorted by name; other cases may have added stores (a project's).
    const names = list.stdout
      .trimEnd()
      .split("\n")
      .map((l) => l.split("  ")[0]);
    expect(names).toEqual(expect.arrayContaining(["cli-store", "home"]));
    expect(names).toEqual([...names].sort());
    const json = JSON.parse((await trove(["stores", "get", "cli-store", "--json"], { env })).stdout);
    expect(json).toMatchObject({ name: "cli-store", type: "snapshot", settings: { "keep-deleted": "2d" } });
    const updated = await trove(["stores", "update", "cli-store", "--set", "keep-deleted=3h"], { env });
    expect(updated.stdout).toContain("  keep-deleted=3h\n");
    expect((await trove(["stores", "delete", "cli-store"], { env })).code).toBe(0);
    expect((await trove(["stores", "get", "cli-store"], { env })).code).toBe(3);
  });

  it("issue 30 (CLI habits): connection options before the command work as after it, as git, kubectl and rclone take them", async () => {
    await rest.mkdir("home", "global");
    await rest.put("home", "global/a.txt", "a");
    // No TROVE_URL: the server comes from the option alone, in either place, with = or a space.
    const before = await trove(["--url", server.url, "ls", "home/global/"]);
    expect(before).toEqual({ code: 0, stdout: "a.txt\n", stderr: "" });
    expect(await trove([`--url=${server.url}`, "-q", "ls", "home/global/"])).toEqual(before);
    expect(await trove(["ls", "home/global/", "--url", server.url])).toEqual(before);
    // Given in both places, the value after the command wins.
    expect(await trove(["--url", "http://127.0.0.1:1", "ls", "home/global/", "--url", server.url])).toEqual(before);
    const unreachable = await trove(["--url", "http://127.0.0.1:1", "ls", "home/global/"]);
    expect(unreachable.code).toBe(7);
    expect(unreachable.stderr).toMatch(/^trove ls: cannot reach http:\/\/127\.0\.0\.1:1/);
    // An option of a command before the command is a usage error that says so; nothing is sent.
    expect(await trove(["-l", "ls", "home/global/"], { env })).toEqual({
      code: 2,
      stdout: "",
      stderr: "trove: unknown option -l before the command: give the command first, or only the connection options\n",
    });
    expect(await trove(["--url"], { env })).toEqual({
      code: 2,
      stdout: "",
      stderr: "trove: option --url needs a value\n",
    });
    // -h before a command is that command's help; alone, the top-level help.
    expect(await trove(["-h", "ls"])).toEqual(await trove(["ls", "--help"]));
    const top = await trove(["--url", server.url, "--help"]);
    expect(top.code).toBe(0);
    expect(top.stdout).toContain("trove --url URL ls home/ is trove ls home/ --url URL");
  });

  it("issue 30: put --no-clobber (-n) creates, and refuses with exit 4 where something exists; nothing changes", async () => {
    await rest.mkdir("home", "noclobber");
    const file = join(home, "nc.txt");
    await writeFile(file, "mine");
    const created = await trove(["put", "--no-clobber", file, "home/noclobber/"], { env });
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^created home\/noclobber\/nc\.txt \S+\n$/);
    const tag = created.stdout.trim().split(" ")[2];
    await writeFile(file, "changed");
    for (const flag of ["--no-clobber", "-n"]) {
      expect(await trove(["put", flag, file, "home/noclobber/nc.txt"], { env })).toEqual({
        code: 4,
        stdout: "",
        stderr: `trove put: 412 If-None-Match * given but /noclobber/nc.txt exists (current ETag "${tag}")\n`,
      });
    }
    expect((await trove(["get", "home/noclobber/nc.txt"], { env })).stdout).toBe("mine");
    // A deleted resource does not exist: -n creates it again.
    await rest.delete("home", "noclobber/nc.txt");
    expect((await trove(["put", "-n", file, "home/noclobber/nc.txt"], { env })).stdout).toMatch(/^created /);
  });

  it("issue 30 (CLI habits): trove help COMMAND prints that command's help, also after connection options", async () => {
    const put = await trove(["help", "put"]);
    expect(put.code).toBe(0);
    expect(put.stdout).toMatch(/^Usage: trove put FILE\|- STORE\/PATH/);
    expect(put).toEqual(await trove(["put", "--help"]));
    expect(await trove(["--url", server.url, "help", "put"])).toEqual(put);
  });

  it("issue 30 (CLI habits): stores show NAME is stores get NAME", async () => {
    const get = await trove(["stores", "get", "home"], { env });
    expect(get.code).toBe(0);
    expect(get.stdout).toMatch(/^home {2}recursive {2}\S+ {2}\S+\n/);
    expect(await trove(["stores", "show", "home"], { env })).toEqual(get);
    expect(await trove(["stores", "show", "home", "--json"], { env })).toEqual(
      await trove(["stores", "get", "home", "--json"], { env }),
    );
    expect((await trove(["stores", "show", "no-such-store"], { env })).code).toBe(3);
    expect(await trove(["stores", "frob", "home"], { env })).toEqual({
      code: 2,
      stdout: "",
      stderr: 'trove stores: unknown action "frob": list, get, show, create, update or delete\n',
    });
  });

  it("issue 30 (CLI habits): ls of a file lists the file, one line, as ls does; a missing one still exits 3", async () => {
    await rest.mkdir("home", "lsfile");
    await rest.put("home", "lsfile/invoice.json", '{"n":1}', { contentType: "application/json" });
    await rest.put("home", "lsfile/gone.txt", "x");
    await rest.delete("home", "lsfile/gone.txt");
    expect(await trove(["ls", "home/lsfile/invoice.json"], { env })).toEqual({
      code: 0,
      stdout: "home/lsfile/invoice.json\n",
      stderr: "",
    });
    const long = await trove(["ls", "-l", "home/lsfile/invoice.json"], { env });
    const head = await rest.head("home", "lsfile/invoice.json");
    const tag = head.notModified ? "" : head.tag;
    expect(long.stdout).toMatch(
      new RegExp(`^application/json {2}7 {2}\\d{4}-\\d\\d-\\d\\dT\\S+Z {2}${tag} {2}home/lsfile/invoice\\.json\n$`),
    );
    const json = JSON.parse((await trove(["ls", "--json", "home/lsfile/invoice.json"], { env })).stdout);
    expect(json).toMatchObject([{ name: "invoice.json", type: "application/json", size: 7, tag, directory: false }]);
    // -r of a file is the file, as ls -R of a file is.
    expect((await trove(["ls", "-r", "home/lsfile/invoice.json"], { env })).stdout).toBe("home/lsfile/invoice.json\n");
    // A deleted file is not listed, but with --deleted.
    const deleted = await trove(["ls", "home/lsfile/gone.txt"], { env });
    expect(deleted.code).toBe(3);
    expect(deleted.stdout).toBe("");
    expect((await trove(["ls", "-l", "--deleted", "home/lsfile/gone.txt"], { env })).stdout).toMatch(
      /home\/lsfile\/gone\.txt {2}deleted\n$/,
    );
    const missing = await trove(["ls", "home/lsfile/nope.json"], { env });
    expect(missing.code).toBe(3);
    expect(missing.stdout).toBe("");
    expect(missing.stderr).toMatch(/^trove ls: 404 /);
    // A directory named with a / after a file's name stays the directory listing's 404.
    expect((await trove(["ls", "home/lsfile/invoice.json/"], { env })).code).toBe(3);
  });

  it("watch prints change events as they arrive, in the poll format", async () => {
    await rest.mkdir("home", "watched");
    const status = await rest.poll();
    const last = status.find((e) => e.store === "home")?.eventId as number;
    const watching = trove(["watch", "home", "--from", String(last), "--once", "--wait", "5"], { env });
    await new Promise((r) => setTimeout(r, 700));
    const put = await rest.put("home", "watched/w.txt", "w", { contentType: "text/plain" });
    const r = await watching;
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      new RegExp(`^CHANGE\\|\\d+\\|idr://home/watched/w\\.txt\\|modify\\|\\|${put.tag}\\|text/plain$`, "m"),
    );
    const from = Number(/^CHANGE\|(\d+)\|/m.exec(r.stdout)?.[1]) - 1;
    const replay = await trove(["watch", "home", "--from", String(from), "--once", "--json"], { env });
    const first = JSON.parse(replay.stdout.split("\n")[0] as string);
    expect(first).toMatchObject({ kind: "change", store: "home", path: "watched/w.txt", tag: put.tag });
  });

  it("mirror --once copies a store; run again it resumes from its cursor; output is quiet without a TTY", async () => {
    await rest.stores.create("cli-mirror");
    await rest.mkdir("cli-mirror", "d");
    await rest.put("cli-mirror", "d/one.txt", "one");
    await rest.put("cli-mirror", "two.bin", new Uint8Array(3 * 1024 * 1024).fill(5));
    const dir = join(home, "mirror");
    const first = await trove(["mirror", "cli-mirror", dir, "--once"], { env });
    // No progress bar without a TTY: only the summary line.
    expect(first).toMatchObject({ code: 0, stdout: "" });
    expect(first.stderr).toMatch(/^trove mirror: 2 files written, 0 deleted, 3\.0 MiB, \d+\.\d s, cursor \d+\n$/);
    expect(await readFile(join(dir, "d", "one.txt"), "utf8")).toBe("one");
    expect((await readFile(join(dir, "two.bin"))).length).toBe(3 * 1024 * 1024);
    await rest.put("cli-mirror", "d/one.txt", "ONE");
    const second = await trove(["mirror", "cli-mirror", dir, "--once", "--json"], { env });
    const events = second.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; resumed?: boolean; path?: string });
    expect(events[0]).toMatchObject({ type: "start", resumed: true });
    expect(events.filter((e) => e.type === "write").map((e) => e.path)).toEqual(["d/one.txt"]);
    expect(events.some((e) => e.type === "sync")).toBe(false);
    expect(await readFile(join(dir, "d", "one.txt"), "utf8")).toBe("ONE");
    // Issue 31, -q prints nothing but errors: no summary line either.
    await rest.put("cli-mirror", "d/one.txt", "One");
    const quiet = await trove(["mirror", "cli-mirror", dir, "--once", "-q"], { env });
    expect(quiet).toEqual({ code: 0, stdout: "", stderr: "" });
    expect(await readFile(join(dir, "d", "one.txt"), "utf8")).toBe("One");
  });

  it("a large upload and download without a TTY draw no progress bar", async () => {
    const big = join(home, "big.bin");
    await writeFile(big, Buffer.alloc(8 * 1024 * 1024, 1));
    const up = await trove(["put", big, "home/"], { env });
    expect(up.code).toBe(0);
    expect(up.stderr).toBe("");
    const down = await trove(["get", "home/big.bin", join(home, "big-copy.bin")], { env });
    expect(down).toMatchObject({ code: 0, stderr: "" });
    expect((await readFile(join(home, "big-copy.bin"))).equals(await readFile(big))).toBe(true);
  });

  it("takes the server from --url, TROVE_URL or the config file, in that order", async () => {
    const config = join(home, "config.json");
    await writeFile(config, JSON.stringify({ url: server.url }));
    expect((await trove(["ls", "home", "--config", config])).code).toBe(0);
    await writeFile(join(home, ".config", "trove", "config.json"), JSON.stringify({ url: server.url })).catch(
      async () => {
        const { mkdir } = await import("node:fs/promises");
        await mkdir(join(home, ".config", "trove"), { recursive: true });
        await writeFile(join(home, ".config", "trove", "config.json"), JSON.stringify({ url: server.url }));
      },
    );
    expect((await trove(["ls", "home"])).code).toBe(0);
    expect((await trove(["ls", "home"], { env: { TROVE_URL: "http://127.0.0.1:9" } })).code).toBe(7);
    expect((await trove(["ls", "home", "--url", server.url], { env: { TROVE_URL: "http://127.0.0.1:9" } })).code).toBe(
      0,
    );
    const broken = join(home, "broken.json");
    await writeFile(broken, "{ nope");
    const r = await trove(["ls", "home", "--config", broken]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("is not JSON");
    await rm(join(home, ".config"), { recursive: true, force: true });
  });

  it("the server package's trove dispatches client commands to the SDK's CLI", async () => {
    await rest.put("home", "dispatched.txt", "via the root bin");
    const r = await trove(["get", "home/dispatched.txt"], { env, bin: ROOT_BIN });
    expect(r).toMatchObject({ code: 0, stdout: "via the root bin" });
    const help = await trove(["--help"], { bin: ROOT_BIN });
    expect(help.stdout).toContain("\nServer:\n  serve     run the Trove server ");
    expect(help.stdout).toContain("\nClient commands (@trove/sdk):\n");
    expect((await trove(["report"], { bin: ROOT_BIN })).stderr).toContain("trove report: missing ACTION");
  });
});

describe("trove CLI against a server that needs tokens", () => {
  let server: DevServer;

  beforeAll(async () => {
    await ensureSdkBuilt();
    home ??= await mkdtemp(join(tmpdir(), "trove-cli-home-"));
    server = await startDevServer();
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
  });

  it("without credentials: exit 5 and the server's reason", async () => {
    const r = await trove(["ls", "home"], { env: { TROVE_URL: server.url } });
    expect(r.code).toBe(5);
    expect(r.stderr).toMatch(/^trove ls: 401 /);
  });

  it("client credentials from the environment; token prints one that works", async () => {
    const env = { TROVE_URL: server.url, TROVE_CLIENT_ID: server.clientId, TROVE_CLIENT_SECRET: server.clientSecret };
    expect((await trove(["ls", "home"], { env })).code).toBe(0);
    const token = (await trove(["token"], { env })).stdout.trim();
    expect(token.split(".")).toHaveLength(3);
    const res = await fetch(`${server.url}/resources/v2/stores`, { headers: { Authorization: `Bearer ${token}` } });
    expect(res.status).toBe(200);
    const wrong = await trove(["ls", "home"], { env: { ...env, TROVE_CLIENT_SECRET: "wrong" } });
    expect(wrong.code).toBe(5);
    expect(wrong.stderr).toContain("token endpoint refused");
  });

  it("the development issuer's credentials from --data, as the server's own trove token does", async () => {
    const r = await trove(["token", "--url", server.url, "--data", server.issuerDir]);
    expect(r.code).toBe(0);
    const viaTokenFlag = await trove(["stores", "--url", server.url, "--token", r.stdout.trim()]);
    expect(viaTokenFlag.stdout).toMatch(/^home {2}recursive/);
    expect((await trove(["ls", "home", "--url", server.url, "--data", server.issuerDir])).code).toBe(0);
    const none = await trove(["token", "--url", server.url, "--data", join(home, "nothing")]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("no credentials");
  });
});
