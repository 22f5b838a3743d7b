// History from the client's side (docs/history.md, issue 27): `trove log`, `get --version` and
// `--as-of`, `ls --as-of`, `restore --version` and `restore DIR/ --as-of [--dry-run]`, run as
// child processes against a real `trove serve` child with its development issuer (every change
// is made with its token, whose subject is the user history records), and the SDK's REST and
// Connect clients for what only a program sees (HistoryPurgedError).

import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import {
  createRestClient,
  createTroveClient,
  devIssuer,
  fromConnectError,
  HistoryPurgedError,
  type TroveRestClient,
} from "../../sdk/src/index.js";
import { readDevCredentials } from "../../src/auth/dev-issuer.js";
import { type ChildServer, startChildServer } from "../support/child-server.js";
import { ensureSdkBuilt } from "./build.js";
import { type CliResult, rejection, runTrove } from "./support.js";

// Each case runs several child processes; on a busy machine each takes up to a second.
vi.setConfig({ testTimeout: 120_000 });

let work: string;
let server: ChildServer;
let rest: TroveRestClient;
/** The development issuer's client id: the subject of its tokens, the user of every change made here. */
let user: string;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  await ensureSdkBuilt();
  work = await mkdtemp(join(tmpdir(), "trove-history-"));
  server = await startChildServer();
  user = (await readDevCredentials(server.dataDir)).clientId;
  rest = createRestClient({
    baseUrl: server.url,
    auth: await devIssuer({ baseUrl: server.url, dataDir: server.dataDir }),
  });
}, 120_000);

afterAll(async () => {
  for (const child of children) child.kill("SIGKILL");
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

/** `trove ARGS` with the server's address and its development issuer's credentials (--data). */
function trove(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return runTrove(args, {
    env: {
      PATH: process.env.PATH,
      HOME: work,
      XDG_CONFIG_HOME: join(work, ".config"),
      TROVE_URL: server.url,
      TROVE_DATA: server.dataDir,
      ...env,
    },
    cwd: work,
    children,
  });
}

/** The last event of a store: the reset event a poll without cursors answers. */
async function lastEvent(store: string): Promise<number> {
  const reset = (await rest.poll()).find((e) => e.kind === "reset" && e.store === store);
  if (!reset) throw new Error(`no reset event for store ${store}`);
  return reset.eventId;
}

/**
 * A time at which the store's last event is the one just made: read after that change's answer
 * (the server's clock is this machine's), and returned once the clock has moved past it, so that
 * the next change is made later.
 */
async function momentNow(): Promise<string> {
  const now = Date.now();
  while (Date.now() <= now) await new Promise((r) => setTimeout(r, 1));
  return new Date(now).toISOString();
}

/** The same instant written with a +02:00 offset. */
function withOffset(iso: string): string {
  const shifted = new Date(Date.parse(iso) + 2 * 3600_000).toISOString();
  return `${shifted.slice(0, -1)}+02:00`;
}

function lines(text: string): string[] {
  return text.split("\n").filter((l) => l !== "");
}

/** One `trove log` line's columns (two or more spaces apart; no column is empty). */
function logColumns(line: string): string[] {
  return line.split(/ {2,}/);
}

async function local(...path: string[]): Promise<string> {
  const file = join(work, ...path);
  await mkdir(join(file, ".."), { recursive: true });
  return file;
}

describe("trove log, get --version, restore --version", () => {
  const v1 = Buffer.concat([Buffer.from([0, 255, 1, 254, 0x80, 0xc3]), Buffer.from(" version one\r\n")]);
  const v2 = randomBytes(200_000);

  it("log lists every state newest first, the deletion included, each with the user who made it", async () => {
    expect(await trove(["mkdir", "-p", "home/notes"])).toMatchObject({ code: 0 });
    await writeFile(await local("notes", "v1.bin"), v1);
    await writeFile(await local("notes", "v2.bin"), v2);
    const put1 = await trove(["put", join(work, "notes", "v1.bin"), "home/notes/a.bin"]);
    expect(put1).toMatchObject({ code: 0, stdout: expect.stringMatching(/^created home\/notes\/a\.bin \S+\n$/) });
    const put2 = await trove(["put", join(work, "notes", "v2.bin"), "home/notes/a.bin"]);
    expect(put2).toMatchObject({ code: 0, stdout: expect.stringMatching(/^updated home\/notes\/a\.bin \S+\n$/) });
    expect(await trove(["rm", "home/notes/a.bin"])).toEqual({ code: 0, stdout: "", stderr: "" });
    const [tag1, tag2] = [put1, put2].map((p) => p.stdout.trim().split(" ")[2]);

    const log = await trove(["log", "home/notes/a.bin"]);
    expect(log).toMatchObject({ code: 0, stderr: "" });
    const rows = lines(log.stdout).map(logColumns);
    expect(rows).toHaveLength(3);
    const [deletion, second, first] = rows as [string[], string[], string[]];
    // Each line says what the server's versions say, in the columns of trove log.
    const versions = await rest.listVersions("home", "notes/a.bin");
    expect(rows).toEqual(
      versions.map((v) => [
        v.tag,
        v.lastModified.toISOString(),
        v.user,
        String(v.size),
        v.operation,
        `event ${v.event}`,
        ...(v.current ? ["(current)"] : []),
      ]),
    );
    expect(deletion).toEqual([
      expect.any(String),
      expect.any(String),
      user,
      expect.stringMatching(/^\d+$/),
      "delete",
      expect.any(String),
      "(current)",
    ]);
    expect(second).toEqual([tag2, expect.any(String), user, String(v2.length), "modify", expect.any(String)]);
    expect(first).toEqual([tag1, expect.any(String), user, String(v1.length), "modify", expect.any(String)]);
    const events = rows.map((r) => Number(/^event (\d+)$/.exec(r[5] as string)?.[1]));
    expect(events[0]).toBeGreaterThan(events[1] as number);
    expect(events[1]).toBeGreaterThan(events[2] as number);
    for (const r of rows) expect(r[1]).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    expect(Date.parse(deletion[1] as string)).toBeGreaterThanOrEqual(Date.parse(second[1] as string));

    // --json: the SDK's versions, as JSON.
    const json = await trove(["log", "home/notes/a.bin", "--json"]);
    expect(json.code).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual(JSON.parse(JSON.stringify(await rest.listVersions("home", "notes/a.bin"))));
    expect(
      (JSON.parse(json.stdout) as Array<{ tag: string; user: string; event: number }>).map((v) => v.event),
    ).toEqual(events);
  });

  it("get --version writes that state's bytes exactly; a deletion's tag or an unknown one exits 3", async () => {
    const [, second, first] = lines((await trove(["log", "home/notes/a.bin"])).stdout).map(logColumns);
    const out1 = join(work, "notes", "got-v1.bin");
    expect(await trove(["get", "home/notes/a.bin", out1, "--version", first?.[0] as string])).toEqual({
      code: 0,
      stdout: "",
      stderr: "",
    });
    expect(await readFile(out1)).toEqual(v1);
    const out2 = join(work, "notes", "got-v2.bin");
    expect(await trove(["get", "home/notes/a.bin", "-o", out2, "--version", second?.[0] as string])).toEqual({
      code: 0,
      stdout: "",
      stderr: "",
    });
    expect(await readFile(out2)).toEqual(v2);
    // The current state is a deletion: the plain get says so; its tag names no contents.
    expect(await trove(["get", "home/notes/a.bin"])).toEqual({
      code: 3,
      stdout: "",
      stderr: "trove get: 404 deleted\n",
    });
    const unknown = await trove(["get", "home/notes/a.bin", "--version", "nope"]);
    expect(unknown).toMatchObject({ code: 3, stdout: "" });
    expect(unknown.stderr).toMatch(/^trove get: 404 .*has no version nope.*\n$/);
    // A tag is 12 base64url characters: one in 64 begins with "-", and is still the option's value.
    const dashed = await trove(["get", "home/notes/a.bin", "-o", out2, "--version", "-Zz9-_"]);
    expect(dashed).toMatchObject({ code: 3, stdout: "" });
    expect(dashed.stderr).toMatch(/^trove get: 404 .*has no version -Zz9-_.*\n$/);
    expect(await readFile(out2)).toEqual(v2);
  });

  it("restore --version makes an old version current again as a new change by the caller; --if-match guards it", async () => {
    const [, , first] = lines((await trove(["log", "home/notes/a.bin"])).stdout).map(logColumns);
    const tag1 = first?.[0] as string;
    const before = await lastEvent("home");
    const stale = await trove(["restore", "home/notes/a.bin", "--version", tag1, "--if-match", "stale"]);
    expect(stale).toMatchObject({ code: 4, stdout: "", stderr: expect.stringMatching(/^trove restore: 412 /) });
    expect(await lastEvent("home")).toBe(before);

    const restored = await trove(["restore", "home/notes/a.bin", "--version", tag1]);
    expect(restored).toMatchObject({ code: 0, stderr: "" });
    const [, address, tag] = restored.stdout.trim().split(" ");
    expect(restored.stdout).toBe(`restored home/notes/a.bin ${tag}\n`);
    expect(address).toBe("home/notes/a.bin");
    expect(tag).not.toBe(tag1);
    const out = join(work, "notes", "restored.bin");
    expect(await trove(["get", "home/notes/a.bin", out])).toMatchObject({ code: 0 });
    expect(await readFile(out)).toEqual(v1);

    const rows = lines((await trove(["log", "home/notes/a.bin"])).stdout).map(logColumns);
    expect(rows).toHaveLength(4);
    expect(rows[0]).toEqual([
      tag,
      expect.any(String),
      user,
      String(v1.length),
      "modify",
      expect.stringMatching(/^event \d+$/),
      "(current)",
    ]);
    expect(rows.slice(1).map((r) => r.at(-1))).not.toContain("(current)");
    expect(Number(rows[0]?.[5]?.slice("event ".length))).toBeGreaterThan(before);
  });
});

describe("ls --as-of, get --as-of, restore DIR/ --as-of [--dry-run]", () => {
  const files: Record<string, Buffer> = {
    "index.html": Buffer.from("<h1>one</h1>\n"),
    "css/a.css": Buffer.from("body { margin: 0 }\n"),
    "img/logo.bin": randomBytes(300_000),
    "deep/x/y.txt": Buffer.from("deep\n"),
  };
  const index2 = Buffer.from("<h1>two</h1>\n");
  const newText = Buffer.from("made after the moment\n");
  /** After the push and an empty directory: the moment to go back to. */
  let pushed: number;
  let pushedAt: string;
  /** After the overwrite, the new file and the deletion of css/, before site/ itself was deleted. */
  let changed: number;

  beforeAll(async () => {
    for (const [path, bytes] of Object.entries(files)) await writeFile(await local("site", ...path.split("/")), bytes);
    expect(await trove(["push", join(work, "site"), "home/site", "-q"])).toMatchObject({ code: 0 });
    expect(await trove(["mkdir", "home/site/empty"])).toMatchObject({ code: 0 });
    pushed = await lastEvent("home");
    pushedAt = await momentNow();

    await writeFile(join(work, "index2.html"), index2);
    await writeFile(join(work, "new.txt"), newText);
    expect(await trove(["put", join(work, "index2.html"), "home/site/index.html"])).toMatchObject({ code: 0 });
    expect(await trove(["put", join(work, "new.txt"), "home/site/"])).toMatchObject({ code: 0 });
    expect(await trove(["rm", "home/site/css"])).toMatchObject({ code: 0 });
    changed = await lastEvent("home");
    expect(await trove(["rm", "home/site"])).toMatchObject({ code: 0 });
  }, 120_000);

  const thenNames = [
    "css/",
    "css/a.css",
    "deep/",
    "deep/x/",
    "deep/x/y.txt",
    "empty/",
    "img/",
    "img/logo.bin",
    "index.html",
  ];

  it("ls -r --as-of shows the directory as it was, by event id and by time (Z or an offset); now it is gone", async () => {
    const byEvent = await trove(["ls", "-r", "home/site/", "--as-of", String(pushed)]);
    expect(byEvent).toMatchObject({ code: 0, stderr: "" });
    expect(lines(byEvent.stdout).sort()).toEqual(thenNames);
    expect(await trove(["ls", "-r", "home/site/", "--as-of", pushedAt])).toEqual(byEvent);
    expect(await trove(["ls", "-r", "home/site", "--as-of", withOffset(pushedAt)])).toEqual(byEvent);
    const later = await trove(["ls", "home/site/", "--as-of", String(changed)]);
    expect(lines(later.stdout).sort()).toEqual(["deep/", "empty/", "img/", "index.html", "new.txt"]);
    // -l: the sizes then.
    const long = await trove(["ls", "-l", "home/site/img", "--as-of", String(pushed)]);
    expect(long.stdout).toMatch(/^\S+ {2}300000 {2}\S+ {2}\S+ {2}logo\.bin\n$/);
    expect(await trove(["ls", "home/site/"])).toMatchObject({
      code: 3,
      stderr: expect.stringMatching(/^trove ls: 404 /),
    });
  });

  it("get --as-of writes the contents a resource had then, byte for byte; before it existed exits 3", async () => {
    const logo = join(work, "logo-then.bin");
    expect(await trove(["get", "home/site/img/logo.bin", logo, "--as-of", String(pushed)])).toEqual({
      code: 0,
      stdout: "",
      stderr: "",
    });
    expect(await readFile(logo)).toEqual(files["img/logo.bin"]);
    expect((await trove(["get", "home/site/index.html", "--as-of", withOffset(pushedAt)])).stdout).toBe(
      "<h1>one</h1>\n",
    );
    expect((await trove(["get", "home/site/index.html", "--as-of", String(changed)])).stdout).toBe("<h1>two</h1>\n");
    const absent = await trove(["get", "home/site/new.txt", "--as-of", String(pushed)]);
    expect(absent).toMatchObject({ code: 3, stdout: "", stderr: expect.stringMatching(/^trove get: 404 /) });
    const dir = await trove(["get", "home/site/img", "--as-of", String(pushed)]);
    expect(dir).toEqual({
      code: 2,
      stdout: "",
      stderr: `trove get: home/site/img is a directory, not a resource: list it with trove ls home/site/img/ --as-of ${pushed}\n`,
    });
  });

  it("restore --dry-run lists the changes and makes none; restore makes them, and every file is back byte for byte", async () => {
    const expected = [
      "create home/site/",
      "create home/site/css/",
      "create home/site/css/a.css",
      "create home/site/deep/",
      "create home/site/deep/x/",
      "create home/site/deep/x/y.txt",
      "create home/site/empty/",
      "create home/site/img/",
      "create home/site/img/logo.bin",
      "create home/site/index.html",
    ];
    const before = await lastEvent("home");
    const dry = await trove(["restore", "home/site/", "--as-of", String(pushed), "--dry-run"]);
    expect(dry.code).toBe(0);
    expect(lines(dry.stdout).sort()).toEqual(expected.map((l) => `would ${l}`).sort());
    expect(dry.stderr).toBe(
      `trove restore: dry run: home/site/ as of event ${pushed}: 10 to create, 0 to modify, 0 to delete; nothing changed\n`,
    );
    expect(await lastEvent("home")).toBe(before);
    expect(await trove(["ls", "home/site/"])).toMatchObject({ code: 3 });

    const done = await trove(["restore", "home/site/", "--as-of", pushedAt]);
    expect(done).toMatchObject({ code: 0 });
    // The same changes, in the same order, as the dry run listed.
    expect(lines(done.stdout)).toEqual(lines(dry.stdout).map((l) => l.replace(/^would /, "")));
    expect(done.stderr).toBe(`trove restore: home/site/ as of event ${pushed}: 10 created, 0 modified, 0 deleted\n`);
    expect(await lastEvent("home")).toBeGreaterThan(before);

    for (const [path, bytes] of Object.entries(files)) {
      const got = await rest.get("home", `site/${path}`);
      expect(got.notModified ? undefined : got.body, path).toEqual(bytes);
    }
    const shape = (entries: Awaited<ReturnType<TroveRestClient["list"]>>["entries"]) =>
      entries.map((e) => ({ name: e.name, directory: e.directory, size: e.size, md5: e.md5, type: e.type }));
    const now = await rest.list("home", "site", { recursive: true });
    const then = await rest.list("home", "site", { recursive: true, asOf: pushed });
    expect(shape(now.entries)).toEqual(shape(then.entries));
    expect(lines((await trove(["ls", "-r", "home/site/"])).stdout).sort()).toEqual(thenNames);
    // Each restored file is a change by the caller.
    const [current] = await rest.listVersions("home", "site/img/logo.bin");
    expect(current).toMatchObject({ user, current: true, operation: "modify", size: 300_000 });
  });

  it("restore --as-of a moment with other differences deletes, modifies and creates; run again it changes nothing", async () => {
    const r = await trove(["restore", "home/site/", "--as-of", String(changed)]);
    expect(r).toEqual({
      code: 0,
      stdout: "delete home/site/css/\nmodify home/site/index.html\ncreate home/site/new.txt\n",
      stderr: `trove restore: home/site/ as of event ${changed}: 1 created, 1 modified, 1 deleted\n`,
    });
    expect((await trove(["get", "home/site/index.html"])).stdout).toBe("<h1>two</h1>\n");
    expect((await trove(["get", "home/site/new.txt"])).stdout).toBe(newText.toString());
    expect(await trove(["ls", "home/site/css/"])).toMatchObject({ code: 3 });

    const before = await lastEvent("home");
    expect(await trove(["restore", "home/site", "--as-of", String(changed)])).toEqual({
      code: 0,
      stdout: "",
      stderr: `trove restore: home/site/ as of event ${changed}: 0 created, 0 modified, 0 deleted\n`,
    });
    expect(await lastEvent("home")).toBe(before);
  });

  it("restore --json answers the SDK's SubtreeRestore", async () => {
    const r = await trove(["restore", "home/site/", "--as-of", String(changed), "--dry-run", "--json"]);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ store: "home", path: "site", asOf: changed, dryRun: true, changes: [] });
  });
});

describe("bad input changes nothing", () => {
  it("a malformed moment, or options that do not go together, is a usage error (exit 2) with the reason", async () => {
    const before = await lastEvent("home");
    const reason = (text: string) =>
      `--as-of ${JSON.stringify(text)} is neither an event id (a whole number) nor an ISO 8601 date-time with a time zone (e.g. 2026-11-27T15:00:00Z)`;
    const cases: Array<[string[], string]> = [
      [["ls", "home/", "--as-of", "yesterday"], `trove ls: ${reason("yesterday")}`],
      [["get", "home/a.txt", "--as-of", "2026-11-27T15:00:00"], `trove get: ${reason("2026-11-27T15:00:00")}`],
      [["restore", "home/site/", "--as-of", "1.5"], `trove restore: ${reason("1.5")}`],
      [["restore", "home/site/", "--as-of", "2026-11-27", "--dry-run"], `trove restore: ${reason("2026-11-27")}`],
      [
        ["get", "home/a.txt", "--as-of", "3", "--version", "t1"],
        "trove get: --version and --as-of do not go together: a tag names one state already",
      ],
      [
        ["restore", "home/site/"],
        "trove restore: give --version TAG (a version of a resource) or --as-of T (a directory as it was at T)",
      ],
      [
        ["restore", "home/site/", "--version", "t1"],
        "trove restore: home/site/ is a directory: versions are kept of resources; take a directory back with --as-of T",
      ],
      [
        ["restore", "home/a.txt", "--version", "t1", "--as-of", "3"],
        "trove restore: --version and --as-of do not go together: --version restores a resource, --as-of a directory",
      ],
      [
        ["restore", "home/a.txt", "--version", "t1", "--dry-run"],
        "trove restore: --dry-run goes with --as-of (the restore of a directory)",
      ],
      [
        ["restore", "home/site/", "--as-of", "3", "--if-match", "t1"],
        "trove restore: --if-match goes with --version: a directory's restore checks each path it changes",
      ],
      [["get", "home/a.txt", "--version", ""], "trove get: --version needs a tag (trove log lists them)"],
      [
        ["log", "home/notes/"],
        "trove log: home/notes/ is a directory: versions are kept of resources; see it as it was with trove ls home/notes/ --as-of T",
      ],
      [
        ["log", "home/notes"],
        "trove log: home/notes/ is a directory: versions are kept of resources; see it as it was with trove ls home/notes/ --as-of T",
      ],
    ];
    for (const [args, message] of cases) {
      expect(await trove(args), args.join(" ")).toEqual({ code: 2, stdout: "", stderr: `${message}\n` });
    }
    expect(await lastEvent("home")).toBe(before);
  });

  it("a moment after the last event is a bad request (exit 1) with the server's reason", async () => {
    const last = await lastEvent("home");
    const r = await trove(["ls", "home/", "--as-of", String(last + 1000)]);
    expect(r).toEqual({
      code: 1,
      stdout: "",
      stderr: `trove ls: 400 event ${last + 1000} has not happened in store home: its last event is ${last}\n`,
    });
  });

  it("a malformed moment over Connect: INVALID_ARGUMENT naming the proto field as_of (REST names its query parameter)", async () => {
    const connect = createTroveClient({
      baseUrl: server.url,
      auth: await devIssuer({ baseUrl: server.url, dataDir: server.dataDir }),
    });
    try {
      const before = await lastEvent("home");
      const read = async () => {
        for await (const _ of connect.resources.read({ store: "home", path: "site", asOf: "yesterday" })) {
          // the first message is the error
        }
      };
      const err = await rejection(read());
      expect(err).toMatchObject({ code: Code.InvalidArgument });
      expect((err as Error).message).toMatch(/as_of "yesterday" is neither an event id/);
      const restore = await rejection(connect.resources.restore({ store: "home", path: "site", asOf: "soon" }));
      expect((restore as Error).message).toMatch(/as_of "soon" is neither an event id/);
      expect(await lastEvent("home")).toBe(before);
    } finally {
      connect.close();
    }
  });

  it("trove help restore is trove restore --help; both describe --as-of, --dry-run and --version", async () => {
    const help = await trove(["help", "restore"]);
    expect(help).toEqual(await trove(["restore", "--help"]));
    expect(help.code).toBe(0);
    for (const option of ["--version TAG", "--as-of T", "--dry-run", "--if-match TAG"])
      expect(help.stdout).toContain(option);
    expect(await trove(["help", "log"])).toEqual(await trove(["log", "--help"]));
    expect(await trove(["help", "nope"])).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^trove: unknown command "nope"/),
    });
  });
});

describe("a moment before the history horizon", () => {
  it("exits 3 with the server's 410 reason, which names the horizon; the SDK throws HistoryPurgedError on REST and Connect", async () => {
    const created = await trove(["stores", "create", "flat", "--set", "keep-versions=0"]);
    expect(created).toMatchObject({ code: 0, stdout: expect.stringContaining("  keep-versions=0\n") });
    await writeFile(join(work, "flat.txt"), "one");
    for (let i = 0; i < 3; i++)
      expect(await trove(["put", join(work, "flat.txt"), "flat/"])).toMatchObject({ code: 0 });
    const last = await lastEvent("flat");
    const reason = `store flat keeps no history (keep-versions 0): only its current state, event ${last}, can be read, not event ${last - 1}`;
    const before = await trove(["get", "flat/flat.txt", "--as-of", String(last - 1)]);
    expect(before).toEqual({ code: 3, stdout: "", stderr: `trove get: 410 ${reason}\n` });
    expect(await trove(["ls", "flat/", "--as-of", String(last - 1)])).toEqual({
      code: 3,
      stdout: "",
      stderr: `trove ls: 410 ${reason}\n`,
    });
    expect(await trove(["restore", "flat/", "--as-of", String(last - 1), "--dry-run"])).toEqual({
      code: 3,
      stdout: "",
      stderr: `trove restore: 410 ${reason}\n`,
    });
    // The current state is still readable as of the last event.
    expect(await trove(["ls", "flat/", "--as-of", String(last)])).toEqual({
      code: 0,
      stdout: "flat.txt\n",
      stderr: "",
    });
    expect(await lastEvent("flat")).toBe(last);

    const gone = await rejection(rest.list("flat", "", { asOf: last - 1 }));
    expect(gone).toBeInstanceOf(HistoryPurgedError);
    expect(gone).toMatchObject({ status: 410, reason });
    const connect = createTroveClient({
      baseUrl: server.url,
      auth: await devIssuer({ baseUrl: server.url, dataDir: server.dataDir }),
    });
    try {
      const listing = async () => {
        for await (const _ of connect.resources.list({ store: "flat", path: "", asOf: String(last - 1) })) {
          // the first message is the error
        }
      };
      const err = fromConnectError(await rejection(listing()));
      expect(err).toBeInstanceOf(HistoryPurgedError);
      expect(err).toMatchObject({ status: 410, reason });
    } finally {
      connect.close();
    }
  });
});
