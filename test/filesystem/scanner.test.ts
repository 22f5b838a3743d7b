// Issue 17, item 3, at the storage port: the full rescan (the floor under change notifications,
// and the start-up scan) records what changed in the folder; a file whose size, inode and
// modification time are unchanged is not read again; a scanner told it may not scan (the seam for
// a lease among instances) records nothing.

import { createHash } from "node:crypto";
import { open, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { createFilesystemStorage, type FilesystemStorage } from "../../src/storage/filesystem/filesystem-storage.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { cleanUp, sh, tempDir } from "./support.js";

const NEVER = 3_600_000;
let dataDir: string;
let folder: string;
let storage: FilesystemStorage | undefined;

beforeEach(async () => {
  dataDir = await tempDir("data");
  folder = await tempDir("folder");
});

afterEach(async () => {
  await storage?.close();
  storage = undefined;
  await cleanUp(dataDir, folder);
});

/** A filesystem store whose notifications are never read (an hour of settle delay): only rescans record changes. */
async function openStore(mayScan: () => boolean = () => true): Promise<FilesystemStorage> {
  const inner = await SqliteStorage.open({ dataDir });
  storage = createFilesystemStorage(inner, { settleDelay: NEVER, rescanInterval: NEVER, mayScan });
  await storage.createStore(
    { name: "team", type: "filesystem", settings: { "keep-deleted": "1h", "filesystem-location": folder } },
    Date.now(),
  );
  await storage.rescan("team");
  return storage;
}

describe("the full rescan (issue 17, item 3)", () => {
  test("records new, changed and removed files and directories as change events", async () => {
    const s = await openStore();
    await writeFile(join(folder, "a.txt"), "a");
    await writeFile(join(folder, "b.txt"), "b");
    await s.rescan("team");
    const a = await s.getNode("team", "a.txt");
    expect(a).toMatchObject({ deleted: false, directory: false, size: 1, type: "text/plain" });
    const last = (await s.getStore("team"))?.lastEventId ?? 0;
    await writeFile(join(folder, "a.txt"), "a, changed");
    await cleanUp(join(folder, "b.txt"));
    await writeFile(join(folder, "c.txt"), "c");
    await s.rescan("team");
    const changes = await s.changesSince("team", last, 100);
    const byPath = new Map(changes.map((n) => [n.path, n]));
    expect(byPath.get("a.txt")).toMatchObject({ deleted: false, size: 10, prevTag: a?.tag });
    expect(byPath.get("b.txt")).toMatchObject({ deleted: true });
    expect(byPath.get("c.txt")).toMatchObject({ deleted: false, size: 1 });
  });

  test("a file whose size, inode and modification time are unchanged is not read again", async () => {
    const s = await openStore();
    await writeFile(join(folder, "same.txt"), "0123456789");
    await s.rescan("team");
    const before = await s.getNode("team", "same.txt");
    // Other bytes of the same length, written in place, with the modification time put back:
    // only reading the file would tell; the rescan does not read it.
    const file = join(folder, "same.txt");
    const reference = join(dataDir, "reference");
    await sh(folder, `touch -r same.txt ${reference}`);
    const handle = await open(file, "r+");
    await handle.write("abcdefghij", 0);
    await handle.close();
    // touch -r copies the times to the nanosecond (utimensat).
    await sh(folder, `touch -r ${reference} same.txt`);
    await s.rescan("team");
    expect(await s.getNode("team", "same.txt")).toEqual(before);
    // A changed modification time is read again.
    await sh(folder, "touch -d '2001-02-03 04:05:06' same.txt");
    await s.rescan("team");
    const after = await s.getNode("team", "same.txt");
    expect(after?.tag).not.toBe(before?.tag);
    expect(after?.md5).toBe(createHash("md5").update("abcdefghij").digest("base64"));
  });

  test("a scanner that may not scan (another instance holds the lease) records nothing", async () => {
    let allowed = true;
    const s = await openStore(() => allowed);
    allowed = false;
    await writeFile(join(folder, "unseen.txt"), "x");
    await s.rescan("team");
    expect(await s.getNode("team", "unseen.txt")).toBeUndefined();
    allowed = true;
    await s.rescan("team");
    expect(await s.getNode("team", "unseen.txt")).toMatchObject({ deleted: false, size: 1 });
  });
});
