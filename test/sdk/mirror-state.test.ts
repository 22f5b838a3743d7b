// Issue 31, session 18: a mirror's state (identity, cursor, the tag of every entry) is an SQLite
// database beside DIR, read and written one entry at a time, so a mirror's memory does not grow
// with the tree (docs/cli.md, "The marker"). What a user of an earlier version has must go on
// working: its JSON marker is taken over (resumed, not copied again), and a marker that is not a
// database is a clear error that changes nothing.

import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRestClient, type MirrorEvent, mirror, type TroveRestClient } from "../../sdk/src/index.js";
import { startServer, type TestServer } from "../support/server.js";
import { ensureSdkBuilt } from "./build.js";
import { readMirrorMarker, runTrove } from "./support.js";

let server: TestServer;
let rest: TroveRestClient;
let work: string;

beforeAll(async () => {
  server = await startServer({ pollWait: 1000 });
  rest = createRestClient({ baseUrl: server.url });
  work = await mkdtemp(join(tmpdir(), "trove-mirror-state-"));
});

afterAll(async () => {
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

async function lastEventId(store: string): Promise<number> {
  return (await rest.poll()).find((e) => e.store === store)?.eventId ?? -1;
}

/** Runs `mirror --once` into `target`; its events. */
async function once(store: string, target: string, cursorFile?: string): Promise<MirrorEvent[]> {
  const events: MirrorEvent[] = [];
  const m = mirror({ client: rest, store, target, once: true, cursorFile, onEvent: (e) => events.push(e) });
  await m.done;
  return events;
}

/** A store with a/1.txt, a/2.txt and b.txt. */
async function seed(store: string): Promise<void> {
  await rest.stores.create(store);
  await rest.mkdir(store, "a");
  await rest.put(store, "a/1.txt", "one");
  await rest.put(store, "a/2.txt", "two");
  await rest.put(store, "b.txt", "bee");
}

/** The JSON marker an earlier version wrote for a copy of `store` (every entry, with its tag). */
async function jsonMarkerOf(store: string): Promise<Record<string, unknown>> {
  const listing = await rest.list(store, "", { recursive: true });
  const entries: Record<string, { tag: string; directory: boolean }> = { "": { tag: listing.tag, directory: true } };
  for (const e of listing.entries) entries[e.name] = { tag: e.tag, directory: e.directory };
  return { version: 1, store, path: "", url: server.url, eventId: await lastEventId(store), entries };
}

describe("issue 31: the mirror's state, an SQLite database beside DIR", () => {
  it("a first copy writes the marker .DIR.trove-mirror.db with every entry's tag and the cursor; nothing else beside DIR", async () => {
    await seed("state-first");
    const parent = join(work, "first");
    await mkdir(parent);
    const target = join(parent, "out");
    await once("state-first", target);
    const marker = readMirrorMarker(join(parent, ".out.trove-mirror.db"));
    const listing = await rest.list("state-first", "", { recursive: true });
    expect(marker).toMatchObject({ store: "state-first", path: "", url: server.url });
    expect(marker.eventId).toBe(await lastEventId("state-first"));
    expect(Object.keys(marker.entries).sort()).toEqual(["", "a", "a/1.txt", "a/2.txt", "b.txt"]);
    for (const e of listing.entries) expect(marker.entries[e.name]).toEqual({ tag: e.tag, directory: e.directory });
    expect((await readdir(parent)).sort()).toEqual([".out.trove-mirror.db", "out"]);
  });

  it("the JSON marker of an earlier version is taken over: resumed from its cursor (no listing), the .json gone", async () => {
    await seed("state-legacy");
    const parent = join(work, "legacy");
    const target = join(parent, "out");
    await mkdir(join(target, "a"), { recursive: true });
    await writeFile(join(target, "a", "1.txt"), "one");
    await writeFile(join(target, "a", "2.txt"), "two");
    await writeFile(join(target, "b.txt"), "bee");
    await writeFile(join(parent, ".out.trove-mirror.json"), JSON.stringify(await jsonMarkerOf("state-legacy")));
    await rest.put("state-legacy", "b.txt", "changed");

    const events = await once("state-legacy", target);
    expect(events[0]).toMatchObject({ type: "start", resumed: true });
    expect(events.some((e) => e.type === "sync")).toBe(false);
    expect(events.filter((e) => e.type === "write").map((e) => (e as { path: string }).path)).toEqual(["b.txt"]);
    expect(await readFile(join(target, "b.txt"), "utf8")).toBe("changed");
    expect((await readdir(parent)).sort()).toEqual([".out.trove-mirror.db", "out"]);
    const marker = readMirrorMarker(join(parent, ".out.trove-mirror.db"));
    expect(marker.eventId).toBe(await lastEventId("state-legacy"));
    expect(marker.entries["b.txt"]?.tag).toBe((await rest.head("state-legacy", "b.txt")).tag);
  });

  it("a cursor file of an earlier version (JSON) is converted in place, and resumed", async () => {
    await seed("state-cursor");
    const parent = join(work, "cursor");
    const target = join(parent, "out");
    const cursorFile = join(parent, "my-cursor");
    await once("state-cursor", target);
    // What an earlier version left: the JSON in the cursor file, no database.
    await rm(join(parent, ".out.trove-mirror.db"));
    await writeFile(cursorFile, JSON.stringify(await jsonMarkerOf("state-cursor")));
    await rest.delete("state-cursor", "a/2.txt");

    const events = await once("state-cursor", target, cursorFile);
    expect(events[0]).toMatchObject({ type: "start", resumed: true });
    expect(events.filter((e) => e.type === "remove").map((e) => (e as { path: string }).path)).toEqual(["a/2.txt"]);
    expect(existsSync(join(target, "a", "2.txt"))).toBe(false);
    expect((await readFile(cursorFile)).subarray(0, 15).toString()).toBe("SQLite format 3");
    expect(readMirrorMarker(cursorFile).eventId).toBe(await lastEventId("state-cursor"));
    expect((await readdir(parent)).sort()).toEqual(["my-cursor", "out"]);
  });

  it("a marker that is not a database: the mirror fails naming it, and neither it nor DIR is changed", async () => {
    await seed("state-garbage");
    const parent = join(work, "garbage");
    const target = join(parent, "out");
    await mkdir(target, { recursive: true });
    await writeFile(join(target, "keep.txt"), "mine");
    await writeFile(join(parent, ".out.trove-mirror.db"), "not a database at all, but long enough to be read as one");
    const m = mirror({ client: rest, store: "state-garbage", target, once: true });
    await expect(m.done).rejects.toThrow(
      `the mirror's marker ${join(parent, ".out.trove-mirror.db")} is not a mirror's database (file is not a database)`,
    );
    expect(await readFile(join(parent, ".out.trove-mirror.db"), "utf8")).toBe(
      "not a database at all, but long enough to be read as one",
    );
    expect(await readdir(target)).toEqual(["keep.txt"]);
    expect((await readdir(parent)).sort()).toEqual([".out.trove-mirror.db", "out"]);

    // The CLI: exit 1 with the same reason on stderr, nothing changed.
    await ensureSdkBuilt();
    const cli = await runTrove(["mirror", "state-garbage", "out", "--once"], {
      cwd: parent,
      env: { PATH: process.env.PATH, HOME: work, TROVE_URL: server.url },
    });
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain(
      `the mirror's marker ${join(parent, ".out.trove-mirror.db")} is not a mirror's database (file is not a database): move it away to start the mirror over`,
    );
    expect(await readdir(target)).toEqual(["keep.txt"]);
    expect((await readdir(parent)).sort()).toEqual([".out.trove-mirror.db", "out"]);
  }, 120_000);

  it("a full resync of 3,000 entries after a reset: strays removed, a kind changed, same tags skipped, the rest copied", async () => {
    // sync-snapshot store: a reset relists the whole tree and compares it in the database's scratch tables.
    await rest.stores.create("state-many", { type: "snapshot" });
    for (let d = 0; d < 30; d++) {
      await rest.mkdir("state-many", `d${d}`);
      for (let f = 0; f < 100; f++) await rest.put("state-many", `d${d}/f${f}.txt`, `${d}/${f}`);
    }
    const parent = join(work, "many");
    const target = join(parent, "out");
    const first = await once("state-many", target);
    expect(first.find((e) => e.type === "synced")).toMatchObject({ written: 3000, removed: 0 });
    // Local strays (a file, a directory with contents), a file where the store has a directory.
    await writeFile(join(target, "stray.txt"), "stray");
    await mkdir(join(target, "strays", "deeper"), { recursive: true });
    await writeFile(join(target, "strays", "deeper", "x.txt"), "x");
    await rm(join(target, "d7"), { recursive: true });
    await writeFile(join(target, "d7"), "a file now");
    await rest.put("state-many", "d3/f5.txt", "changed");
    // The store deleted and created again: a reset.
    await rest.stores.delete("state-many");
    await rest.stores.create("state-many", { type: "snapshot" });
    for (let d = 0; d < 30; d++) {
      await rest.mkdir("state-many", `d${d}`);
      for (let f = 0; f < 100; f++) await rest.put("state-many", `d${d}/f${f}.txt`, `${d}/${f}`);
    }
    const second = await once("state-many", target);
    const synced = second.find((e) => e.type === "synced");
    // Tags are new after the re-creation: every file is copied again; the strays and the file d7 go.
    expect(synced).toMatchObject({ removed: 3 });
    expect(existsSync(join(target, "stray.txt"))).toBe(false);
    expect(existsSync(join(target, "strays"))).toBe(false);
    expect((await readdir(join(target, "d7"))).length).toBe(100);
    expect(await readFile(join(target, "d3", "f5.txt"), "utf8")).toBe("3/5");
    const marker = readMirrorMarker(join(parent, ".out.trove-mirror.db"));
    expect(Object.keys(marker.entries)).toHaveLength(1 + 30 + 3000);
    // Nothing changed since: a third run copies nothing.
    const third = await once("state-many", target);
    expect(third.filter((e) => e.type === "write")).toEqual([]);
  }, 180_000);
});
