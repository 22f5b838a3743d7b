// Issue 17, item 6, at the storage port: indexing a folder at start-up logs its progress, and a
// rescan of an unchanged tree reads no file's contents (what makes a rescan of 100,000 files cost
// about one lstat each: bench/filesystem-scan.js, docs/benchmarks.md).

import { createHash } from "node:crypto";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { createFilesystemStorage, type FilesystemStorage } from "../../src/storage/filesystem/filesystem-storage.js";
import type { ScanSummary } from "../../src/storage/filesystem/scanner.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { cleanUp, sh, tempDir } from "./support.js";

const NEVER = 3_600_000;
const DIRECTORIES = 4;
const FILES_PER_DIRECTORY = 60;
const ENTRIES = DIRECTORIES * (FILES_PER_DIRECTORY + 1);

let dataDir: string;
let folder: string;
let storage: FilesystemStorage | undefined;
let lines: Array<{ message: string; details: Record<string, unknown> }>;
let scans: ScanSummary[];

beforeEach(async () => {
  dataDir = await tempDir("data");
  folder = await tempDir("folder");
  lines = [];
  scans = [];
  for (let d = 0; d < DIRECTORIES; d++) {
    await mkdir(join(folder, `d${d}`));
    for (let f = 0; f < FILES_PER_DIRECTORY; f++)
      await writeFile(join(folder, `d${d}`, `f${f}.txt`), `file ${d}-${f}\n`);
  }
});

afterEach(async () => {
  await storage?.close();
  storage = undefined;
  await cleanUp(dataDir, folder);
});

/** The storage on the data directory (a restart opens the same index), rescanned only when asked; its log captured. */
async function open(): Promise<FilesystemStorage> {
  const inner = await SqliteStorage.open({ dataDir });
  const capture = (details: object, message: string) =>
    lines.push({ message, details: details as Record<string, unknown> });
  storage = createFilesystemStorage(inner, {
    logger: { info: capture, warn: capture },
    settleDelay: NEVER,
    rescanInterval: NEVER,
    progressEvery: 50,
    scanned: (summary) => scans.push(summary),
  });
  return storage;
}

/** A filesystem store on the folder, its first scan done. */
async function openStore(): Promise<FilesystemStorage> {
  storage = await open();
  await storage.createStore(
    { name: "team", type: "filesystem", settings: { "keep-deleted": "1h", "filesystem-location": folder } },
    Date.now(),
  );
  // The scan that createStore started is the first; this one waits for it and runs after it.
  await storage.rescan("team");
  return storage;
}

describe("filesystem stores at scale (issue 17, item 6)", () => {
  test("indexing a folder logs its progress every N entries, and a summary; an unchanged rescan logs nothing", async () => {
    const s = await openStore();
    const progress = lines.filter((l) => l.message === "filesystem store scan in progress");
    expect(progress.map((l) => l.details.entries)).toEqual([50, 100, 150, 200]);
    for (const line of progress) expect(line.details).toMatchObject({ store: "team", first: true });
    const summary = lines.find((l) => l.message === "filesystem store scanned");
    expect(summary?.details).toMatchObject({
      store: "team",
      entries: ENTRIES,
      directories: DIRECTORIES + 1,
      read: DIRECTORIES * FILES_PER_DIRECTORY,
      recorded: ENTRIES,
      first: true,
    });
    // Every file indexed, with its MD5.
    expect((await s.getNode("team", "d3/f59.txt"))?.md5).toBe(createHash("md5").update("file 3-59\n").digest("base64"));
    // The second scan found the tree unchanged: silent.
    expect(lines.filter((l) => l.message.startsWith("filesystem store scan"))).toHaveLength(progress.length + 1);
  });

  test("the start-up rescan of an unchanged tree reads no file's contents", async () => {
    let s = await openStore();
    const before = await s.getNode("team", "d2/f7.txt");
    const last = (await s.getStore("team"))?.lastEventId ?? 0;
    await s.close();
    storage = undefined;
    // While Trove is down, every file's bytes are replaced in place by others of the same length,
    // its modification time put back to the nanosecond (touch -r): only reading a file would
    // tell. The rescan at the next start reads none.
    await sh(
      folder,
      `for f in d*/*.txt; do touch -r "$f" ../ref-$$; printf X | dd of="$f" bs=1 count=1 conv=notrunc 2>/dev/null; touch -r ../ref-$$ "$f"; done; rm -f ../ref-$$`,
    );
    scans.length = 0;
    s = await open();
    await s.whenStarted();
    // Resolves after a scan that starts after the call: the start-up scan has ended by then.
    await s.rescan("team");
    expect(scans).toHaveLength(2);
    for (const scan of scans) expect(scan).toMatchObject({ store: "team", entries: ENTRIES, read: 0, recorded: 0 });
    expect(scans[0]?.first).toBe(true);
    expect(await s.changesSince("team", last, 10)).toEqual([]);
    expect(await s.getNode("team", "d2/f7.txt")).toEqual(before);
  });
});
