// `trove restore FILE` when its target fails under it (issue 28, "How": a full disk on the target,
// MongoDB going away mid-restore): the CLI's exit code and the reason it prints, the target left
// marked as an unfinished restore (trove serve refuses it), and the same restore run again once
// the target is back finishing the job, with what a client observes equal to the source's.

import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MongoClient } from "mongodb";
import { afterEach, describe, expect, it } from "vitest";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { type FerretDb, startFerretDb } from "../support/ferretdb.js";
import { describeWithFerretDb } from "../support/mongodb.js";
import { tmpfsMountable } from "../support/tmpfs.js";
import { dump, fillStore } from "./dump.js";
import { trove } from "./run-cli.js";

const T0 = 1_800_000_000_000;
const TMPFS = tmpfsMountable();
if (!TMPFS) {
  console.warn(
    "test/backup/restore-faults.test.ts: cannot mount a tmpfs (needs root and mount): the full-disk restore is SKIPPED",
  );
}

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "trove-restore-faults-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** An archive of a data directory holding `files` files (fillStore), and what a client observes of it. */
async function archiveOf(files: number): Promise<{ archive: string; expected: unknown }> {
  const dir = await tempDir();
  const data = join(dir, "source");
  const source = await SqliteStorage.open({ dataDir: data });
  await fillStore(source, files, T0);
  const expected = await dump(source);
  await source.close();
  const archive = join(dir, "backup.tar");
  const made = await trove(["backup", "--data", data, "-o", archive, "-q"]);
  expect(made).toMatchObject({ code: 0, stderr: "" });
  return { archive, expected };
}

/** What `trove serve` says of a target marked as being restored: exit 7 and the reason. */
async function serveRefuses(args: string[]): Promise<void> {
  // On MongoDB too, a data directory of its own (the development issuer's key): never the checkout's .trove-data.
  const data = args.includes("--data") ? [] : ["--data", await tempDir()];
  const served = await trove(["serve", ...args, ...data, "--port", "0", "--log-level", "silent"]);
  expect(served.code).toBe(7);
  expect(served.stderr).toMatch(/the restore has not finished: run the same trove restore again/);
}

describe.runIf(TMPFS)("trove restore FILE --data onto a full disk (8 MiB tmpfs)", () => {
  it("fails with exit 1 naming the cause (no space left), leaves the target marked (serve refuses it), and the same restore run again once there is room finishes it (issue 28, How: a full disk on the target)", async () => {
    // 300 files, 60 of them 200,000 bytes: an archive of 12 MB, larger than the disk.
    const { archive, expected } = await archiveOf(300);
    const mount = await tempDir();
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=8m", "tmpfs", mount]);
    cleanups.push(async () => {
      execFileSync("umount", [mount]);
    });
    const target = join(mount, "data");

    const full = await trove(["restore", archive, "--data", target, "-q"]);
    expect(full.code).toBe(1);
    expect(full.stderr).toMatch(
      /^trove restore: no space left on the target: .*; make room and run the same trove restore again to finish it\n$/,
    );
    await serveRefuses(["--data", target]);

    // Room on the same filesystem, what the first run wrote kept.
    execFileSync("mount", ["-o", "remount,size=64m", mount]);
    const again = await trove(["restore", archive, "--data", target, "-q"]);
    expect(again).toMatchObject({ code: 0, stderr: "" });
    const restored = await SqliteStorage.open({ dataDir: target });
    try {
      expect(await restored.restoreTarget()).toEqual({ state: "used", reason: "it holds 1 store" });
      expect(await dump(restored)).toEqual(expected);
    } finally {
      await restored.close();
    }
  }, 300_000);
});

describeWithFerretDb("trove restore FILE --mongodb-url while MongoDB goes away (FerretDB killed)", () => {
  it("fails with exit 7 naming the cause (MongoDB unavailable), leaves the database marked (serve refuses it), and the same restore run again once FerretDB is back finishes it (issue 28, How: MongoDB going away mid-restore)", async () => {
    // 300 files, 60 of them 200,000 bytes in GridFS: the kill comes after the fifth.
    const { archive, expected } = await archiveOf(300);
    const dataDir = await tempDir();
    await mkdir(join(dataDir, "ferret"));
    const ferret: FerretDb = await startFerretDb({ dataDir: join(dataDir, "ferret") });
    cleanups.push(() => ferret.dispose());
    const database = "trove_restore_faults";
    const target = ["--mongodb-url", ferret.url, "--mongodb-database", database];

    const restore = trove(["restore", archive, ...target, "-q"]);
    // Killed once five blobs are stored whole: the restore is past its start, and 55 blobs and
    // every node part are still to come, which it cannot write without the database.
    const watcher = new MongoClient(ferret.url, { serverSelectionTimeoutMS: 2000 });
    try {
      const files = watcher.db(database).collection("blobs.files");
      while ((await files.countDocuments({})) < 5) await new Promise((r) => setTimeout(r, 20));
    } finally {
      await watcher.close();
    }
    await ferret.kill();
    const cut = await restore;
    expect(cut.code).toBe(7);
    expect(cut.stderr).toMatch(
      /^trove restore: MongoDB unavailable: .*; the target stays marked as being restored: run the same trove restore again once it is back\n$/,
    );

    await ferret.start();
    await serveRefuses(target);
    const again = await trove(["restore", archive, ...target, "-q"]);
    expect(again).toMatchObject({ code: 0, stderr: "" });
    const restored = await MongoStorage.open({ url: ferret.url, database });
    try {
      expect(await restored.restoreTarget()).toEqual({ state: "used", reason: "it holds 1 store" });
      expect(await dump(restored)).toEqual(expected);
    } finally {
      await restored.close();
    }
  }, 600_000);
});
