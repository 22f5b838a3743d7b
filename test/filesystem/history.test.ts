// Issue 27 on filesystem stores (docs/history.md, "Filesystem stores"): with keep-versions above 0
// the bytes of every state Trove records are kept in <filesystem-temp>/trove-history/, so that
// changes made through Trove and edits made outside it (at scan granularity) can be read and
// restored byte for byte through the REST extensions; a state whose bytes Trove never kept is
// listed and answers 404 with the reason; a crash between keeping the bytes and the rename loses
// nothing acknowledged; the purge removes the copies no longer needed and nothing else.

import { createHash, randomUUID } from "node:crypto";
import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { MongoClient } from "mongodb";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { createFilesystemStorage, type FilesystemStorage } from "../../src/storage/filesystem/filesystem-storage.js";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import type { NodeRecord, StoragePort } from "../../src/storage/port.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { bytes, DATA, listingEntries, type RestClient, STORES, versionElements } from "../rest/rest-client.js";
import { describeWithMongoDb } from "../support/mongodb.js";
import {
  cleanUp,
  createFolderStore,
  eventsUntil,
  type FolderServer,
  getFile,
  latestEvent,
  serverChildren,
  sh,
  startFolderServer,
  stopChild,
  tempDir,
  treeOf,
  until,
} from "./support.js";

vi.setConfig({ testTimeout: 90_000 });

let dataDir: string;
let folder: string;

beforeEach(async () => {
  dataDir = await tempDir("data");
  folder = await tempDir("folder");
});

afterEach(async () => {
  await cleanUp(dataDir, folder);
});

/** Where a store's kept copies are on SQLite: in the data directory. */
const historyOf = (dir: string, store: string) => join(dir, "history", store);

const unquote = (etag: string | null) => (etag ?? "").replace(/^"|"$/g, "");

/** The attributes of each `version` element of a resource, newest first. */
function versions(client: RestClient, path: string): Promise<Array<Record<string, string>>> {
  return versionElements(client, `${DATA}/team/${path}?versions=true`);
}

async function put(client: RestClient, path: string, body: string): Promise<string> {
  const reply = await client.fetch("PUT", `${DATA}/team/${path}`, { body: bytes(body) });
  expect([200, 201], reply.text).toContain(reply.status);
  return unquote(reply.headers.get("etag"));
}

describe("filesystem store history over REST (issue 27: every backend)", () => {
  let trove: FolderServer;

  beforeEach(async () => {
    trove = await startFolderServer(dataDir);
    const reply = await createFolderStore(trove.client, "team", folder, { "keep-versions": "1d" });
    expect(reply.status, reply.text).toBe(201);
  });

  afterEach(async () => {
    await trove.close();
  });

  test("PUT, PUT, DELETE through Trove: ?versions=true lists every state, ?version= and ?as-of= serve the replaced bytes, PUT ?restore= puts them back in the folder (issue 27 items 2-3)", async () => {
    const one = await put(trove.client, "a.txt", "one");
    const afterOne = await latestEvent(trove.client, "team");
    // A time between the two writes (a few ms apart, so that they fall in different milliseconds).
    await new Promise((resolve) => setTimeout(resolve, 5));
    const between = new Date().toISOString();
    await new Promise((resolve) => setTimeout(resolve, 5));
    const two = await put(trove.client, "a.txt", "two, longer");
    expect((await trove.client.fetch("DELETE", `${DATA}/team/a.txt`)).status).toBe(200);

    const listed = await versions(trove.client, "a.txt");
    expect(
      listed.map((v) => [v.operation, v.tag === "" ? "" : v.tag === one ? "one" : v.tag === two ? "two" : "?"]),
    ).toEqual([
      ["delete", "?"],
      ["modify", "two"],
      ["modify", "one"],
    ]);

    const old = await trove.client.fetch("GET", `${DATA}/team/a.txt?version=${one}`);
    expect(old.status, old.text).toBe(200);
    expect(old.text).toBe("one");
    expect(unquote(old.headers.get("etag"))).toBe(one);
    const byTime = await trove.client.fetch("GET", `${DATA}/team/a.txt?as-of=${between}`);
    expect(byTime.status, byTime.text).toBe(200);
    expect(byTime.text).toBe("one");
    const then = await trove.client.fetch("GET", `${DATA}/team/a.txt?as-of=${afterOne}`);
    expect(then.status).toBe(200);
    expect(then.text).toBe("one");
    const listing = await trove.client.fetch("GET", `${DATA}/team/?as-of=${afterOne}`);
    expect(listing.status).toBe(200);
    expect(listingEntries(listing.text).map((e) => [e.name, e.tag])).toEqual([["a.txt", one]]);

    const restored = await trove.client.fetch("PUT", `${DATA}/team/a.txt?restore=${two}`);
    expect(restored.status, restored.text).toBe(201);
    expect(await readFile(join(folder, "a.txt"), "utf8")).toBe("two, longer");
    const now = await getFile(trove.client, "team", "a.txt");
    expect(now.bytes.toString()).toBe("two, longer");
    expect(unquote(now.etag)).not.toBe(two);
    // The copies are by contents: "one" and "two, longer", once each, whatever the states.
    expect((await readdir(historyOf(dataDir, "team"))).sort()).toHaveLength(2);
  });

  test("restore refusals on a filesystem store: unknown tag 404, stale If-Match 412, parent gone 404 with the reason; the folder unchanged (issue 27: bad input)", async () => {
    expect((await trove.client.fetch("PUT", `${DATA}/team/d/`)).status).toBe(201);
    const one = await put(trove.client, "d/a.txt", "one");
    await put(trove.client, "d/a.txt", "two");
    const before = await treeOf(folder);

    const unknown = await trove.client.fetch("PUT", `${DATA}/team/d/a.txt?restore=nope`);
    expect(unknown.status).toBe(404);
    expect(unknown.text).toMatch(/has no version nope/);
    const stale = await trove.client.fetch("PUT", `${DATA}/team/d/a.txt?restore=${one}`, {
      headers: { "If-Match": `"${one}"` },
    });
    expect(stale.status).toBe(412);
    expect(await treeOf(folder)).toEqual(before);

    expect((await trove.client.fetch("DELETE", `${DATA}/team/d/`)).status).toBe(200);
    const orphan = await trove.client.fetch("PUT", `${DATA}/team/d/a.txt?restore=${one}`);
    expect(orphan.status).toBe(404);
    expect(orphan.text).toMatch(/^parent directory \/d\/ of \/d\/a\.txt not found: restore the directory/);
    expect(await treeOf(folder)).toEqual(new Map());
  });

  test("files recorded before history was on: a PUT over one and a DELETE of their directory through Trove hard-link their bytes before replacing them, and the versions read back (issue 27 item 2)", async () => {
    const settings = (keep: string) => ({
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "team", settings: { "keep-versions": keep } }),
    });
    expect((await trove.client.fetch("PUT", `${STORES}/team`, settings("0"))).status).toBeLessThan(300);
    expect((await trove.client.fetch("PUT", `${DATA}/team/d/`)).status).toBe(201);
    const a = await put(trove.client, "d/a.txt", "alpha");
    const b = await put(trove.client, "d/b.txt", "beta");
    const inodes = [(await stat(join(folder, "d", "a.txt"))).ino, (await stat(join(folder, "d", "b.txt"))).ino];
    expect((await trove.client.fetch("PUT", `${STORES}/team`, settings("1d"))).status).toBeLessThan(300);
    expect(await readdir(historyOf(dataDir, "team")).catch(() => [])).toEqual([]);

    await put(trove.client, "d/a.txt", "alpha, again");
    expect((await trove.client.fetch("DELETE", `${DATA}/team/d/`)).status).toBe(200);
    expect((await trove.client.fetch("GET", `${DATA}/team/d/a.txt?version=${a}`)).text).toBe("alpha");
    expect((await trove.client.fetch("GET", `${DATA}/team/d/b.txt?version=${b}`)).text).toBe("beta");
    // The very files, linked: their inodes are the history area's now.
    const kept = await Promise.all(
      (await readdir(historyOf(dataDir, "team"))).map(
        async (n) => (await stat(join(historyOf(dataDir, "team"), n))).ino,
      ),
    );
    expect(kept).toEqual(expect.arrayContaining(inodes));
  });

  test("each state the scanner records of outside edits is kept: two edits in place, each seen by the scanner, both read back by their versions (issue 27: scan granularity)", async () => {
    const after = await latestEvent(trove.client, "team");
    // Made whole by a rename (as most editors save), then edited in place by one write of the same length.
    await sh(folder, "printf 'first edit' > .memo.tmp && mv .memo.tmp memo.txt");
    const first = await eventsUntil(trove.client, "team", after, (e) => e.some((x) => x.path === "memo.txt"));
    const firstTag = first.find((x) => x.path === "memo.txt")?.tag ?? "";
    await sh(folder, "printf 'later edit' 1<> memo.txt");
    const second = await eventsUntil(trove.client, "team", first.at(-1)?.id ?? after, (e) =>
      e.some((x) => x.path === "memo.txt"),
    );
    const secondTag = second.find((x) => x.path === "memo.txt")?.tag ?? "";
    await writeFile(join(folder, "memo.txt"), "");
    expect((await trove.client.fetch("GET", `${DATA}/team/memo.txt?version=${firstTag}`)).text).toBe("first edit");
    expect((await trove.client.fetch("GET", `${DATA}/team/memo.txt?version=${secondTag}`)).text).toBe("later edit");
  });

  test("an outside overwrite in place, then PUT ?restore= of the previous version: the folder holds the previous bytes again, byte for byte (issue 27: outside edits)", async () => {
    const original = Buffer.from(Array.from({ length: 100_000 }, (_, i) => (i * 7) % 256));
    const reply = await trove.client.fetch("PUT", `${DATA}/team/letter.bin`, { body: original });
    expect(reply.status).toBe(201);
    const tag = unquote(reply.headers.get("etag"));
    // In place: the same inode, other bytes (as an editor that writes over the file does).
    await sh(folder, "printf 'overwritten outside' 1<> letter.bin && truncate -s 19 letter.bin");
    const seen = await getFile(trove.client, "team", "letter.bin");
    expect(seen.bytes.toString()).toBe("overwritten outside");
    // Two writes outside (printf, truncate): the scanner may have recorded the state between them too.
    const tags = (await versions(trove.client, "letter.bin")).map((v) => v.tag);
    expect([tags[0], tags.at(-1)]).toEqual([unquote(seen.etag), tag]);

    const old = await trove.client.fetch("GET", `${DATA}/team/letter.bin?version=${tag}`);
    expect(old.status).toBe(200);
    expect(old.bytes.equals(original)).toBe(true);
    const restored = await trove.client.fetch("PUT", `${DATA}/team/letter.bin?restore=${tag}`, {
      headers: { "If-Match": seen.etag ?? "" },
    });
    expect(restored.status, restored.text).toBe(200);
    expect((await readFile(join(folder, "letter.bin"))).equals(original)).toBe(true);
    expect((await getFile(trove.client, "team", "letter.bin")).bytes.equals(original)).toBe(true);
  });

  test("an outside rm -r of a directory, then PUT ?restore-as-of= of the subtree brings every file back byte for byte (issue 27: outside edits)", async () => {
    expect((await trove.client.fetch("PUT", `${DATA}/team/letters/`)).status).toBe(201);
    await put(trove.client, "letters/a.txt", "alpha");
    // Made outside Trove and recorded by a read: its bytes are kept when recorded.
    await writeFile(join(folder, "letters", "b.txt"), "beta, from an editor");
    expect((await getFile(trove.client, "team", "letters/b.txt")).status).toBe(200);
    const before = await latestEvent(trove.client, "team");
    const tree = await treeOf(folder);

    await sh(folder, "rm -r letters");
    expect((await trove.client.fetch("GET", `${DATA}/team/letters/`)).status).toBe(404);

    const dry = await trove.client.fetch("PUT", `${DATA}/team/?restore-as-of=${before}&dry-run=true`);
    expect(dry.status, dry.text).toBe(200);
    expect(await treeOf(folder)).toEqual(new Map());
    const done = await trove.client.fetch("PUT", `${DATA}/team/?restore-as-of=${before}`);
    expect(done.status, done.text).toBe(200);
    expect(await treeOf(folder)).toEqual(tree);
    // Once restored, a second restore changes nothing (contents compared by MD5 and size).
    const again = await trove.client.fetch("PUT", `${DATA}/team/?restore-as-of=${before}&dry-run=true`);
    expect(again.status).toBe(200);
    expect(again.text).not.toContain("<change");
  });

  test("a state whose bytes Trove never kept is listed, and its read and restore answer 404 with the reason on REST and Connect; nothing changes (issue 27: what Trove keeps of outside edits)", async () => {
    // Recorded with keep-versions 0 (no copy), then history on, then overwritten in place outside.
    const off = await trove.client.fetch("PUT", `${STORES}/team`, {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "team", settings: { "keep-versions": "0" } }),
    });
    expect([200, 201], off.text).toContain(off.status);
    const tag = await put(trove.client, "a.txt", "never kept");
    const on = await trove.client.fetch("PUT", `${STORES}/team`, {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "team", settings: { "keep-versions": "1d" } }),
    });
    expect([200, 201], on.text).toContain(on.status);
    // One write over the same length, in place: one state.
    await sh(folder, "printf 'in place!!' 1<> a.txt");
    const now = await getFile(trove.client, "team", "a.txt");
    expect(now.bytes.toString()).toBe("in place!!");
    expect((await versions(trove.client, "a.txt")).map((v) => v.tag)).toEqual([unquote(now.etag), tag]);

    const reason = /^the contents of \/a\.txt as version \S+ were not kept: .*Trove kept no copy of these/;
    const read = await trove.client.fetch("GET", `${DATA}/team/a.txt?version=${tag}`);
    expect(read.status).toBe(404);
    expect(read.text).toMatch(reason);
    const restore = await trove.client.fetch("PUT", `${DATA}/team/a.txt?restore=${tag}`);
    expect(restore.status).toBe(404);
    expect(restore.text).toMatch(reason);
    const grpc = createClient(ResourceService, createConnectTransport({ baseUrl: trove.url, httpVersion: "1.1" }));
    const error = await (async () => {
      for await (const _ of grpc.read({ store: "team", path: "a.txt", version: tag })) {
      }
    })().catch((err: unknown) => err);
    expect(error).toBeInstanceOf(ConnectError);
    expect((error as ConnectError).code).toBe(Code.NotFound);
    expect((error as ConnectError).rawMessage).toMatch(reason);

    expect(await readFile(join(folder, "a.txt"), "utf8")).toBe("in place!!");
    expect(unquote((await getFile(trove.client, "team", "a.txt")).etag)).toBe(unquote(now.etag));
  });
});

describe("a crash between keeping the bytes and the rename (issue 27: crash-safe)", () => {
  const children = serverChildren(() => dataDir);
  const startChild = children.start;

  afterEach(async () => {
    await children.stopAll();
  });

  test("SIGKILL after the replaced bytes are kept, before the rename: the acknowledged state is served and its version readable after the restart; nothing of the PUT is in the folder", async () => {
    const first = await startChild();
    expect((await createFolderStore(first.client, "team", folder, { "keep-versions": "1d" })).status).toBe(201);
    const one = await put(first.client, "a.txt", "one");
    const two = await put(first.client, "a.txt", "two");
    const sizes = async () => (await readdir(historyOf(dataDir, "team"))).map((n) => n.split("-")[1]).sort();
    expect(await sizes()).toEqual(["3", "3"]);
    await stopChild(first.child);

    const crashing = await startChild("crash-after-keep");
    const exited = new Promise((resolve) => crashing.child.once("exit", (_code, signal) => resolve(signal)));
    const reply = await crashing.client
      .fetch("PUT", `${DATA}/team/a.txt`, { body: bytes("three") })
      .catch(() => undefined);
    expect(reply).toBeUndefined();
    expect(await exited).toBe("SIGKILL");
    expect(await readFile(join(folder, "a.txt"), "utf8")).toBe("two");

    const second = await startChild();
    const now = await getFile(second.client, "team", "a.txt");
    expect(now.bytes.toString()).toBe("two");
    expect(unquote(now.etag)).toBe(two);
    expect((await versions(second.client, "a.txt")).map((v) => v.tag)).toEqual([two, one]);
    expect((await second.client.fetch("GET", `${DATA}/team/a.txt?version=${one}`)).text).toBe("one");
    // An outside overwrite after the restart: the acknowledged "two" stays restorable.
    await sh(folder, "printf 'later' > a.txt");
    await until(async () => (await getFile(second.client, "team", "a.txt")).bytes.toString() === "later", "the edit");
    const back = await second.client.fetch("PUT", `${DATA}/team/a.txt?restore=${two}`);
    expect(back.status, back.text).toBe(200);
    expect(await readFile(join(folder, "a.txt"), "utf8")).toBe("two");
    expect((await treeOf(folder)).size).toBe(1);
    await stopChild(second.child);

    // The crash's orphan, the copy of "three" (5 bytes), no state has: the purge removes it, and
    // the copies of "later" and "two" (live) remain until keep-versions has passed.
    expect(await sizes()).toEqual(["3", "3", "5", "5"]);
    const storage = createFilesystemStorage(await SqliteStorage.open({ dataDir }), { rescanInterval: 3_600_000 });
    try {
      await storage.whenStarted();
      await storage.purgeExpired(Date.now() + 2 * 86_400_000);
      expect(await sizes()).toEqual(["3"]);
      expect((await readdir(historyOf(dataDir, "team")))[0]).toMatch(/^b8a9f715dbb64fd5c56e7783c6820a61-3$/);
    } finally {
      await storage.close();
    }
  });
});

/** A PUT as the resource service makes it, on the storage port: the store told to writeBlob. */
async function writeTo(storage: StoragePort, path: string, contents: string, now: number) {
  const blob = await storage.writeBlob(
    (async function* () {
      yield Buffer.from(contents);
    })(),
    { maxSize: 1024, store: "team" },
  );
  return (await storage.putFile("team", path, blob, "text/plain", {}, now)).node;
}

async function bytesOf(storage: StoragePort, node: NodeRecord | undefined): Promise<string> {
  if (!node) throw new Error("no state");
  const chunks: Buffer[] = [];
  for await (const chunk of storage.readBlob(node)) chunks.push(Buffer.from(chunk));
  return Buffer.concat(chunks).toString();
}

describe("the purge of kept copies (issue 27: retention)", () => {
  const T0 = Date.now();
  const HOUR = 3_600_000;
  let storage: FilesystemStorage;

  beforeEach(async () => {
    storage = createFilesystemStorage(await SqliteStorage.open({ dataDir }), { rescanInterval: 3_600_000 });
    await storage.whenStarted();
    await storage.createStore(
      {
        name: "team",
        type: "filesystem",
        settings: { "filesystem-location": folder, "keep-deleted": "1d", "keep-versions": "1h" },
      },
      T0,
    );
  });

  afterEach(async () => {
    await storage.close();
  });

  const write = (path: string, contents: string, now: number) => writeTo(storage, path, contents, now);

  test("copies past keep-versions go; the live files' copies and those still needed stay (issue 27 item 7)", async () => {
    await write("a.txt", "first", T0);
    await write("a.txt", "second", T0 + HOUR / 2);
    await write("b.txt", "first", T0 + HOUR / 2);
    await write("c.txt", "kept a while", T0);
    await storage.deleteTree("team", "c.txt", {}, T0 + 2 * HOUR);
    const dir = historyOf(dataDir, "team");
    // Copies are named <MD5 hex>-<size>: the three contents have sizes 5, 6 and 12.
    const sizes = async () => (await readdir(dir)).map((n) => Number(n.split("-")[1])).sort((a, b) => a - b);
    expect(await sizes()).toEqual([5, 6, 12]);

    // 2.5 h on: "first" ended 2 h ago (its version is purged) but b.txt has it now; "kept a while"
    // ended half an hour ago: its version is still there, and reads from the copy.
    await storage.purgeExpired(T0 + 2.5 * HOUR);
    expect(await sizes()).toEqual([5, 6, 12]);
    const tombstone = await storage.getNode("team", "c.txt");
    const c = await storage.getNodeAsOf("team", "c.txt", (tombstone?.eventId ?? 0) - 1);
    expect(c?.deleted).toBe(false);
    expect(await bytesOf(storage, c)).toBe("kept a while");

    // Two days on: only the live files' bytes stay.
    await storage.purgeExpired(T0 + 48 * HOUR);
    expect(await sizes()).toEqual([5, 6]);
  });

  test("keep-versions 0 removes every copy at the next purge", async () => {
    await write("a.txt", "first", T0);
    await write("a.txt", "second", T0 + 1000);
    expect(await readdir(historyOf(dataDir, "team"))).toHaveLength(2);
    await storage.updateStore(
      {
        name: "team",
        type: "filesystem",
        settings: { "filesystem-location": folder, "keep-deleted": "1d", "keep-versions": "0" },
      },
      T0 + 2000,
    );
    await storage.purgeExpired(T0 + 3000);
    expect(await readdir(historyOf(dataDir, "team")).catch(() => [])).toEqual([]);
    expect(await readFile(join(folder, "a.txt"), "utf8")).toBe("second");
  });
});

describeWithMongoDb("filesystem store history on MongoDB (issue 27: every backend)", (url) => {
  const database = `trove_test_${randomUUID().replaceAll("-", "")}`;
  let temp: string;
  let storage: FilesystemStorage;

  beforeEach(async () => {
    temp = await tempDir("temp");
    storage = createFilesystemStorage(await MongoStorage.open({ url, database }), {
      rescanInterval: 3_600_000,
      tempRoot: temp,
    });
    await storage.whenStarted();
    const settings = { "filesystem-location": folder, "keep-deleted": "1d", "keep-versions": "1h" };
    await storage.createStore({ name: "team", type: "filesystem", settings }, Date.now());
  });

  afterEach(async () => {
    await storage.close();
    const client = new MongoClient(url);
    try {
      await client.db(database).dropDatabase();
    } finally {
      await client.close();
    }
    await cleanUp(temp);
  });

  test("an outside overwrite in place, then restoreVersion of the previous state: the folder holds its bytes again; copies in filesystem-temp/trove-history", async () => {
    const now = Date.now();
    const one = await writeTo(storage, "a.txt", "one", now);
    const two = await writeTo(storage, "a.txt", "two!", now + 1000);
    await sh(folder, "printf 'outside' 1<> a.txt");
    const seen = (await storage.getStoreNode("team", "a.txt", { contents: false }))?.node;
    expect(seen?.md5).toBe(createHash("md5").update("outside").digest("base64"));

    expect(await bytesOf(storage, await storage.getVersion("team", "a.txt", one.tag))).toBe("one");
    expect(await bytesOf(storage, await storage.getVersion("team", "a.txt", two.tag))).toBe("two!");
    await storage.restoreVersion("team", "a.txt", two.tag, { ifMatch: [seen?.tag ?? ""] }, now + 2000);
    expect(await readFile(join(folder, "a.txt"), "utf8")).toBe("two!");
    expect((await readdir(join(temp, "team", "trove-history"))).map((n) => n.split("-")[1]).sort()).toEqual([
      "3",
      "4",
      "7",
    ]);
  });
});
