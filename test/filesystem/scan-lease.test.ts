// Issue 17, item 7, at the storage port: with a scan lease, a filesystem store is watched and
// scanned only while this instance holds the lease. Without it, the scanner is paused (no change
// notification open, nothing walked), yet reads still serve external changes; once the lease is
// taken, a full rescan records what changed meanwhile, and notifications are read again. The
// lease here is a shared in-memory one (two instances in one process would share a database the
// same way); the MongoDB lease itself is tested with two processes in
// test/mongodb/filesystem-instances.test.ts.

import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { createFilesystemStorage, type FilesystemStorage } from "../../src/storage/filesystem/filesystem-storage.js";
import type { ScanLease } from "../../src/storage/filesystem/scan-lease.js";
import type { ScanSummary } from "../../src/storage/filesystem/scanner.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { cleanUp, tempDir, until } from "./support.js";

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

/** A lease another instance holds until `free` is set; then it is this instance's. */
class TestLease implements ScanLease {
  readonly duration = 300;
  free = false;
  released: string[] = [];
  async hold(): Promise<boolean> {
    return this.free;
  }
  async release(store: string): Promise<void> {
    this.released.push(store);
  }
}

describe("the scan lease (issue 17, item 7)", () => {
  test("without the lease nothing is scanned or watched, reads still serve changes; with it, a rescan records what changed", async () => {
    const lease = new TestLease();
    const scans: ScanSummary[] = [];
    storage = createFilesystemStorage(await SqliteStorage.open({ dataDir }), {
      settleDelay: 20,
      rescanInterval: 3_600_000,
      scanLease: lease,
      scanned: (summary) => scans.push(summary),
    });
    const s = storage;
    await s.createStore(
      { name: "team", type: "filesystem", settings: { "keep-deleted": "1h", "filesystem-location": folder } },
      Date.now(),
    );
    await writeFile(join(folder, "while-paused.txt"), "x");
    // Several lease rounds pass: no scan, no notification read, nothing recorded.
    await new Promise((r) => setTimeout(r, 1000));
    await s.rescan("team");
    expect(scans).toEqual([]);
    expect(await s.getNode("team", "while-paused.txt")).toBeUndefined();
    // A read reconciles the path it touches, lease or not.
    const read = await s.getStoreNode("team", "read.txt", { contents: false });
    expect(read?.node).toBeUndefined();
    await writeFile(join(folder, "read.txt"), "served");
    expect((await s.getStoreNode("team", "read.txt", { contents: false }))?.node).toMatchObject({
      deleted: false,
      size: 6,
    });

    lease.free = true;
    await until(async () => scans.length > 0, "the first scan after taking the lease");
    expect(scans[0]).toMatchObject({ store: "team", first: true, recorded: 1 });
    expect(await s.getNode("team", "while-paused.txt")).toMatchObject({ deleted: false, size: 1 });
    // Watched now: a change is recorded without any read or rescan.
    await writeFile(join(folder, "notified.txt"), "n");
    await until(async () => (await s.getNode("team", "notified.txt")) !== undefined, "the notification");

    // Lost: paused again, watches closed.
    lease.free = false;
    await new Promise((r) => setTimeout(r, 500));
    await writeFile(join(folder, "after-loss.txt"), "l");
    await new Promise((r) => setTimeout(r, 500));
    expect(await s.getNode("team", "after-loss.txt")).toBeUndefined();

    // Deleting the store releases a lease held.
    lease.free = true;
    await until(async () => (await s.getNode("team", "after-loss.txt")) !== undefined, "the next takeover");
    await s.deleteStore("team", Date.now());
    expect(lease.released).toEqual(["team"]);
  });
});
