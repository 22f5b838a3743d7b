// `trove mirror` must not hurt: run as a child process against a live server, it refuses a
// non-empty directory that is not its own mirror (exit 2, nothing touched) unless --force;
// --dry-run lists what it would write and delete and changes nothing; -v reports deletions;
// every run ends with a one-line summary; a restart (after --once, SIGTERM or SIGKILL)
// resumes from the marker's cursor. The SDK's mirror() has the same options.

import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import {
  createRestClient,
  type MirrorEvent,
  MirrorRefusedError,
  mirror,
  type TroveRestClient,
} from "../../sdk/src/index.js";
import { startServer, type TestServer } from "../support/server.js";
import { ensureSdkBuilt, SDK_BIN } from "./build.js";
import { readMirrorMarker } from "./support.js";

// Each case starts several child processes; on a busy machine each takes up to a second.
vi.setConfig({ testTimeout: 120_000 });

interface Result {
  code: number | null;
  stdout: string;
  stderr: string;
}

const SUMMARY =
  /^trove mirror: (\d+) files? written, (\d+) deleted, (\d+ bytes?|[\d.]+ [KMGT]iB), \d+\.\d s, cursor (\d+)$/m;
const DRY_SUMMARY =
  /^trove mirror: dry run: (\d+) files? to write, (\d+) to delete, (\d+ bytes?|[\d.]+ [KMGT]iB), \d+\.\d s, cursor (\d+); nothing changed$/m;

let work: string;
let server: TestServer;
let rest: TroveRestClient;
const children = new Set<ChildProcessWithoutNullStreams>();

function start(args: string[]): {
  child: ChildProcessWithoutNullStreams;
  result: Promise<Result>;
  stderr: () => string;
} {
  const child = spawn(process.execPath, [SDK_BIN, ...args], {
    env: { PATH: process.env.PATH, HOME: work, XDG_CONFIG_HOME: join(work, ".config"), TROVE_URL: server.url },
    cwd: work,
    stdio: ["pipe", "pipe", "pipe"],
  });
  children.add(child);
  let stdout = "";
  let stderr = "";
  child.stdout.setEncoding("utf8").on("data", (s: string) => {
    stdout += s;
  });
  child.stderr.setEncoding("utf8").on("data", (s: string) => {
    stderr += s;
  });
  child.stdin.end();
  const result = new Promise<Result>((resolve, reject) => {
    child.on("error", reject);
    child.on("close", (code) => {
      children.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
  return { child, result, stderr: () => stderr };
}

const trove = (args: string[]) => start(args).result;

/** Every file and directory under `dir` with its contents ("dir" for a directory) and mtime. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(dir, { recursive: true })).sort()) {
    const full = join(dir, name);
    const s = await stat(full);
    out[name] = s.isDirectory() ? "dir" : `${await readFile(full, "utf8")} @${s.mtimeMs}`;
  }
  return out;
}

/** The mirror's marker beside DIR. */
async function marker(parent: string, name: string) {
  return readMirrorMarker(join(parent, `.${name}.trove-mirror.db`));
}

async function lastEventId(store: string): Promise<number> {
  return (await rest.poll()).find((e) => e.store === store)?.eventId ?? -1;
}

async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A fresh directory under the work directory, as a relative path (what a user types). */
let counter = 0;
async function place(): Promise<{ parent: string; rel: string; abs: string; name: string }> {
  counter += 1;
  const parentRel = `case${counter}`;
  await mkdir(join(work, parentRel));
  return {
    parent: join(work, parentRel),
    rel: `${parentRel}/precious`,
    abs: join(work, parentRel, "precious"),
    name: "precious",
  };
}

/** A store with templates/a.txt, templates/b/c.txt and elsewhere.txt. */
async function seed(store: string): Promise<void> {
  await rest.stores.create(store);
  await rest.mkdir(store, "templates");
  await rest.mkdir(store, "templates/b");
  await rest.put(store, "templates/a.txt", "alpha");
  await rest.put(store, "templates/b/c.txt", "charlie!");
  await rest.put(store, "elsewhere.txt", "not mirrored");
}

beforeAll(async () => {
  await ensureSdkBuilt();
  work = await mkdtemp(join(tmpdir(), "trove-mirror-safety-"));
  server = await startServer({ pollWait: 1000 });
  rest = createRestClient({ baseUrl: server.url });
}, 120_000);
afterEach(() => {
  for (const child of children) child.kill("SIGKILL");
});
afterAll(async () => {
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("trove mirror refuses a directory that is not its own", () => {
  it("a non-empty directory without a marker: exit 2 with the reason, precious/notes.txt untouched, nothing written", async () => {
    await seed("refuse");
    const { parent, rel, abs } = await place();
    await mkdir(abs);
    await writeFile(join(abs, "notes.txt"), "my notes");
    const before = await snapshot(parent);
    for (const args of [["--once"], [], ["--dry-run"]]) {
      const r = await trove(["mirror", "refuse/templates", rel, ...args]);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stdout).toBe("");
      expect(r.stderr).toBe(
        `trove mirror: refusing to mirror refuse/templates into ${rel}: it is not empty and is not a mirror of ` +
          `refuse/templates (no marker case${counter}/.precious.trove-mirror.db). Choose an empty directory, or give ` +
          "--force to make it one: whatever refuse/templates does not hold is then deleted from it (--dry-run --force lists what)\n",
      );
      // Not a file more, not a file less, not a byte or an mtime changed; no marker beside it.
      expect(await snapshot(parent)).toEqual(before);
      expect(await readFile(join(abs, "notes.txt"), "utf8")).toBe("my notes");
    }
  });

  it("the mirror of another path is refused too, naming what it mirrors; an empty directory is fine", async () => {
    await seed("other");
    const { parent, rel, abs } = await place();
    expect((await trove(["mirror", "other/templates/b", rel, "--once"])).code).toBe(0);
    expect(await readFile(join(abs, "c.txt"), "utf8")).toBe("charlie!");
    const before = await snapshot(parent);
    const r = await trove(["mirror", "other/templates", rel, "--once"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      `it is the mirror of other/templates/b (marker case${counter}/.precious.trove-mirror.db)`,
    );
    expect(await snapshot(parent)).toEqual(before);

    const empty = join(parent, "empty");
    await mkdir(empty);
    expect((await trove(["mirror", "other/templates", `case${counter}/empty`, "--once"])).code).toBe(0);
    expect(await readFile(join(empty, "a.txt"), "utf8")).toBe("alpha");
  });

  it("--force mirrors into it: what the store does not hold is deleted, each deletion reported at -v, then a summary", async () => {
    await seed("forced");
    const { rel, abs } = await place();
    await mkdir(join(abs, "old"), { recursive: true });
    await writeFile(join(abs, "notes.txt"), "my notes");
    await writeFile(join(abs, "old", "x.txt"), "x");
    await writeFile(join(abs, "a.txt"), "stale contents");
    const r = await trove(["mirror", "forced/templates", rel, "--once", "--force", "-v"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("");
    const lines = r.stderr.trimEnd().split("\n");
    expect(lines[0]).toBe(`trove mirror: copying forced/templates into ${rel}`);
    expect(lines).toContain(`deleted ${rel}/notes.txt`);
    expect(lines).toContain(`deleted ${rel}/old/`);
    expect(lines).toContain(`wrote ${rel}/a.txt (5 bytes)`);
    expect(lines).toContain(`wrote ${rel}/b/c.txt (8 bytes)`);
    expect(lines).toContain(`created ${rel}/b/`);
    const summary = lines.at(-1)?.match(SUMMARY);
    expect(summary?.slice(1)).toEqual(["2", "2", "13 bytes", String(await lastEventId("forced"))]);
    expect(Object.keys(await snapshot(abs))).toEqual(["a.txt", "b", "b/c.txt"]);
    expect(await readFile(join(abs, "a.txt"), "utf8")).toBe("alpha");
  });
});

describe("trove mirror --dry-run", () => {
  it("lists what it would write and delete, changes nothing (not even creating DIR or the marker)", async () => {
    await seed("dry");
    const { parent, rel, abs } = await place();
    // A directory that does not exist yet stays absent.
    const fresh = await trove(["mirror", "dry/templates", rel, "--dry-run"]);
    expect(fresh.code).toBe(0);
    expect(fresh.stdout.split("\n").filter(Boolean).sort()).toEqual([
      `would create ${rel}/b/`,
      `would write ${rel}/a.txt (5 bytes)`,
      `would write ${rel}/b/c.txt (8 bytes)`,
    ]);
    expect(fresh.stderr).toMatch(DRY_SUMMARY);
    expect(fresh.stderr.match(DRY_SUMMARY)?.slice(1)).toEqual(["2", "0", "13 bytes", String(await lastEventId("dry"))]);
    expect(await readdir(parent)).toEqual([]);

    // With --force on a foreign directory: the deletions --force would make.
    await mkdir(join(abs, "sub"), { recursive: true });
    await writeFile(join(abs, "notes.txt"), "my notes");
    await writeFile(join(abs, "sub", "deep.txt"), "deep");
    const before = await snapshot(parent);
    const forced = await trove(["mirror", "dry/templates", rel, "--dry-run", "--force"]);
    expect(forced.code).toBe(0);
    expect(forced.stdout.split("\n").filter(Boolean).sort()).toEqual([
      `would create ${rel}/b/`,
      `would delete ${rel}/notes.txt`,
      `would delete ${rel}/sub/`,
      `would write ${rel}/a.txt (5 bytes)`,
      `would write ${rel}/b/c.txt (8 bytes)`,
    ]);
    expect(forced.stderr.match(DRY_SUMMARY)?.slice(1, 3)).toEqual(["2", "2"]);
    expect(await snapshot(parent)).toEqual(before);
  });

  it("on a mirror with a marker: what the change feed since its cursor would change; the real run then does it", async () => {
    await seed("dryfeed");
    const { parent, rel, abs } = await place();
    expect((await trove(["mirror", "dryfeed/templates", rel, "--once"])).code).toBe(0);
    await rest.put("dryfeed", "templates/a.txt", "alpha, longer");
    await rest.delete("dryfeed", "templates/b");
    await rest.put("dryfeed", "templates/new.txt", "new");
    await rest.put("dryfeed", "elsewhere.txt", "changed, not mirrored");
    const before = await snapshot(parent);
    const dry = await trove(["mirror", "dryfeed/templates", rel, "--dry-run"]);
    expect(dry.code).toBe(0);
    // The feed reports the deletion of b/ and of what it held: each is listed.
    expect(dry.stdout.split("\n").filter(Boolean).sort()).toEqual([
      `would delete ${rel}/b/`,
      `would delete ${rel}/b/c.txt`,
      `would write ${rel}/a.txt (13 bytes)`,
      `would write ${rel}/new.txt (3 bytes)`,
    ]);
    const last = String(await lastEventId("dryfeed"));
    expect(dry.stderr.match(DRY_SUMMARY)?.slice(1)).toEqual(["2", "2", "16 bytes", last]);
    expect(await snapshot(parent)).toEqual(before);

    const real = await trove(["mirror", "dryfeed/templates", rel, "--once", "-v"]);
    expect(real.code).toBe(0);
    expect(real.stderr).toContain(`deleted ${rel}/b/\n`);
    expect(real.stderr).toContain(`deleted ${rel}/b/c.txt\n`);
    expect(real.stderr.match(SUMMARY)?.slice(1)).toEqual(["2", "2", "16 bytes", last]);
    expect(Object.keys(await snapshot(abs))).toEqual(["a.txt", "new.txt"]);
  });
});

describe("trove mirror resumes from its marker", () => {
  it("after --once: the marker holds store, path, server URL and cursor; the next run copies only what changed", async () => {
    await seed("resume");
    const { parent, rel, abs, name } = await place();
    const first = await trove(["mirror", "resume/templates", rel, "--once"]);
    expect(first.code).toBe(0);
    expect(first.stderr.match(SUMMARY)?.slice(1)).toEqual(["2", "0", "13 bytes", String(await lastEventId("resume"))]);
    const saved = await marker(parent, name);
    expect(saved).toMatchObject({
      store: "resume",
      path: "templates",
      url: server.url,
      eventId: await lastEventId("resume"),
    });
    // The marker is not in the directory, and no temporary file is left beside it.
    expect((await readdir(abs)).sort()).toEqual(["a.txt", "b"]);
    expect((await readdir(parent)).sort()).toEqual([".precious.trove-mirror.db", "precious"]);

    await rest.put("resume", "templates/b/c.txt", "changed");
    await rest.delete("resume", "templates/a.txt");
    const second = await trove(["mirror", "resume/templates", rel, "--once", "-v"]);
    expect(second.code).toBe(0);
    const lines = second.stderr.trimEnd().split("\n");
    expect(lines[0]).toBe(`trove mirror: resuming resume/templates in ${rel} from cursor ${saved.eventId}`);
    expect(lines.slice(1, -1).sort()).toEqual([`deleted ${rel}/a.txt`, `wrote ${rel}/b/c.txt (7 bytes)`]);
    expect(lines.at(-1)?.match(SUMMARY)?.slice(1)).toEqual(["1", "1", "7 bytes", String(await lastEventId("resume"))]);
    expect((await marker(parent, name)).eventId).toBe(await lastEventId("resume"));

    const third = await trove(["mirror", "resume/templates", rel, "--once"]);
    expect(third.stderr.match(SUMMARY)?.slice(1, 4)).toEqual(["0", "0", "0 bytes"]);
  });

  it("after a following mirror is stopped by SIGTERM (summary, exit 0) or killed by SIGKILL, a restart resumes", async () => {
    await seed("killed");
    const { parent, rel, abs, name } = await place();
    const following = start(["mirror", "killed/templates", rel, "--follow", "poll", "-v"]);
    await until(() => following.stderr().includes(`wrote ${rel}/b/c.txt`), "the first copy");
    await rest.put("killed", "templates/live.txt", "while following");
    await until(async () => {
      const m = await marker(parent, name).catch(() => undefined);
      return m !== undefined && m.eventId === (await lastEventId("killed"));
    }, "the marker at the store's last event");
    following.child.kill("SIGTERM");
    const stopped = await following.result;
    expect(stopped.code).toBe(0);
    expect(stopped.stderr).toContain(`wrote ${rel}/live.txt (15 bytes)`);
    expect(stopped.stderr.trimEnd().split("\n").at(-1)).toMatch(SUMMARY);

    const again = start(["mirror", "killed/templates", rel, "--follow", "poll", "-v"]);
    await until(() => again.stderr().includes("resuming"), "the restart");
    await rest.put("killed", "templates/second.txt", "2");
    await until(async () => (await marker(parent, name)).eventId === (await lastEventId("killed")), "the marker");
    again.child.kill("SIGKILL");
    expect((await again.result).code).toBe(null);

    await rest.put("killed", "templates/a.txt", "after the kill");
    const resumed = await trove(["mirror", "killed/templates", rel, "--once", "-v"]);
    expect(resumed.code).toBe(0);
    const lines = resumed.stderr.trimEnd().split("\n");
    expect(lines[0]).toMatch(new RegExp(`^trove mirror: resuming killed/templates in ${rel} from cursor \\d+$`));
    expect(lines.slice(1, -1)).toEqual([`wrote ${rel}/a.txt (14 bytes)`]);
    expect(lines.at(-1)?.match(SUMMARY)?.slice(1, 3)).toEqual(["1", "0"]);
    expect(Object.keys(await snapshot(abs)).sort()).toEqual(["a.txt", "b", "b/c.txt", "live.txt", "second.txt"]);
  });

  it("a marker whose directory was emptied since is not trusted: everything is copied again", async () => {
    await seed("emptied");
    const { rel, abs } = await place();
    expect((await trove(["mirror", "emptied/templates", rel, "--once"])).code).toBe(0);
    await rm(abs, { recursive: true });
    const again = await trove(["mirror", "emptied/templates", rel, "--once", "-v"]);
    expect(again.stderr).toContain(`trove mirror: copying emptied/templates into ${rel}`);
    expect(again.stderr.match(SUMMARY)?.slice(1, 3)).toEqual(["2", "0"]);
    expect(await readFile(join(abs, "b", "c.txt"), "utf8")).toBe("charlie!");
  });
});

describe("mirror() in the SDK: force, dryRun, onEvent", () => {
  it("rejects with MirrorRefusedError before changing anything; force and dryRun as the CLI; onEvent sees every event", async () => {
    await seed("sdk");
    const { parent, abs } = await place();
    await mkdir(abs);
    await writeFile(join(abs, "notes.txt"), "my notes");
    const before = await snapshot(parent);
    const refused = mirror({ client: rest, store: "sdk", path: "templates", target: abs, once: true });
    const err = await refused.done.then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(MirrorRefusedError);
    expect(err).toMatchObject({
      code: "ERR_MIRROR_TARGET_NOT_EMPTY",
      store: "sdk",
      path: "templates",
      found: undefined,
    });
    expect(await snapshot(parent)).toEqual(before);

    const dryEvents: MirrorEvent[] = [];
    const dry = mirror({
      client: rest,
      store: "sdk",
      path: "templates",
      target: abs,
      force: true,
      dryRun: true,
      onEvent: (e) => dryEvents.push(e),
    });
    await dry.done;
    expect(dryEvents[0]).toMatchObject({ type: "start", resumed: false, dryRun: true });
    expect(dryEvents.filter((e) => e.type === "remove")).toEqual([
      { type: "remove", path: "notes.txt", directory: false },
    ]);
    expect(dryEvents.at(-2)).toMatchObject({ type: "summary", written: 2, removed: 1, bytes: 13, dryRun: true });
    expect(dryEvents.at(-1)).toMatchObject({ type: "stop" });
    expect(await snapshot(parent)).toEqual(before);

    const events: MirrorEvent[] = [];
    const forced = mirror({
      client: rest,
      store: "sdk",
      path: "templates",
      target: abs,
      force: true,
      once: true,
      onEvent: (e) => events.push(e),
    });
    await forced.done;
    expect(events.at(-2)).toMatchObject({ type: "summary", written: 2, removed: 1, bytes: 13, dryRun: false });
    expect(forced.stats).toMatchObject({ downloads: 2, removals: 1, bytes: 13 });
    await expect(stat(join(abs, "notes.txt"))).rejects.toThrow(/ENOENT/);
  });
});
