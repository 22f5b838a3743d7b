// Backup and restore through the storage port (docs/backup.md): what a restored backend holds,
// compared field by field with the backend it was taken from, on SQLite and, through FerretDB,
// MongoDB (issue 28, "Tests").

import { randomBytes, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MongoClient } from "mongodb";
import { afterEach, describe, expect, it } from "vitest";
import { ArchiveError, writeArchive } from "../../src/backup/archive.js";
import { backupParts } from "../../src/backup/backup.js";
import { RestoreRefusedError, restoreArchive } from "../../src/backup/restore.js";
import { MongoStorage } from "../../src/storage/mongodb/mongo-storage.js";
import type { StoragePort } from "../../src/storage/port.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { describeWithMongoDb } from "../support/mongodb.js";
import { collect, dump, once } from "./dump.js";

const T0 = 1_800_000_000_000;
const opened: Array<() => Promise<void>> = [];

afterEach(async () => {
  for (const close of opened.splice(0).reverse()) await close();
});

async function sqlite(): Promise<SqliteStorage> {
  const dataDir = await mkdtemp(join(tmpdir(), "trove-backup-"));
  const storage = await SqliteStorage.open({ dataDir });
  opened.push(async () => {
    await storage.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  return storage;
}

async function put(storage: StoragePort, store: string, path: string, data: Uint8Array | string, now = T0) {
  const bytes = typeof data === "string" ? Buffer.from(data) : data;
  const blob = await storage.writeBlob(once(bytes), { maxSize: 1 << 30 });
  return storage.putFile(store, path, blob, "application/json", {}, now, "ann");
}

async function* streamOf(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  for (let i = 0; i < bytes.byteLength; i += 64 * 1024) yield bytes.subarray(i, i + 64 * 1024);
}

async function backup(storage: StoragePort): Promise<Buffer> {
  const { parts, describe } = backupParts(storage);
  return collect(writeArchive(parts, { troveVersion: "test", created: T0, describe }));
}

const big = randomBytes(200 * 1024);

/** A backend with something of everything: stores with and without history, large and small contents, tombstones, versions, insights. */
async function fill(storage: StoragePort): Promise<void> {
  await storage.createStore({ name: "plain", type: "recursive", settings: { "keep-deleted": "7d" } }, T0);
  await storage.makeDirectory("plain", "dir", {}, T0, "ann");
  await put(storage, "plain", "dir/a.json", '{"a":1}');
  await put(storage, "plain", "dir/big.bin", big);
  await put(storage, "plain", "gone.json", "{}");
  await storage.deleteTree("plain", "gone.json", {}, T0 + 1, "bob");
  await storage.createStore(
    { name: "kept", type: "snapshot", settings: { "keep-deleted": "7d", "keep-versions": "30d" } },
    T0,
  );
  await put(storage, "kept", "t.json", "one");
  await put(storage, "kept", "t.json", big, T0 + 2);
  await put(storage, "kept", "t.json", "three", T0 + 3);
  const project = { id: randomUUID(), name: "p", account: "acme", store: "kept", created: T0, creator: "ann" };
  await storage.insights.createProject(project);
  const env = { id: randomUUID(), projectId: project.id, name: "dev", created: T0, creator: "ann" };
  await storage.insights.createEnvironment(env);
  await storage.insights.recordPromotion({ environmentId: env.id, path: "/t.json", date: T0, by: "ann" });
  const report = {
    id: randomUUID(),
    projectId: project.id,
    environmentId: env.id,
    creator: "ann",
    created: T0,
    additionalFields: ["x"],
    status: "generating" as const,
    finished: 0,
    expiresAt: T0 + 86_400_000 * 3650,
    reason: "",
    attempts: 0,
    leaseOwner: "",
    leaseExpires: 0,
    document: null,
  };
  await storage.insights.createReport(report);
  const claimed = await storage.insights.claimReportJob("w", T0, 1000);
  expect(claimed?.id).toBe(report.id);
  const document = await storage.writeBlob(once(Buffer.from('{"report":true}')), { maxSize: 1 << 20 });
  expect(
    await storage.insights.updateReportJob(report.id, "w", {
      status: "generated",
      finished: T0 + 5,
      document,
      leaseOwner: "",
      leaseExpires: 0,
    }),
  ).toBe(true);
}

function roundTrip(name: string, source: () => Promise<StoragePort>, middle: () => Promise<StoragePort>) {
  it(`${name}: byte-identical listings, contents, tags, MD5s, event ids, deleted states, versions, projects and reports (issue 28, Tests 2)`, async () => {
    const a = await source();
    await fill(a);
    const expected = await dump(a);
    const b = await middle();
    await restoreArchive(b, streamOf(await backup(a)));
    expect(await dump(b)).toEqual(expected);
    const c = await sqlite();
    await restoreArchive(c, streamOf(await backup(b)));
    expect(await dump(c)).toEqual(expected);
    // The restored stores continue their event ids.
    const { node } = await put(c, "plain", "after.json", "{}");
    const before = (expected as { stores: Array<{ record: { config: { name: string }; lastEventId: number } }> })
      .stores;
    expect(node.eventId).toBe((before.find((s) => s.record.config.name === "plain")?.record.lastEventId ?? 0) + 1);
  });
}

describe("backup and restore through the storage port (docs/backup.md)", () => {
  roundTrip("embedded -> embedded -> embedded", sqlite, sqlite);

  it("writers during a backup: the restored backend holds exactly the writes acknowledged before each store's snapshot id (issue 28, Tests 1)", async () => {
    const a = await sqlite();
    await fill(a);
    const expected = await dump(a);
    const { parts, describe } = backupParts(a);
    const out: Buffer[] = [];
    const writing = writeArchive(parts, { troveVersion: "test", created: T0, describe })[Symbol.asyncIterator]();
    // The kind entry (header, body, padding), then the first store's header: its hold is taken.
    for (let i = 0; i < 4; i++) out.push(Buffer.from(((await writing.next()).value as Uint8Array) ?? []));
    // "kept" is the first store (by name): acknowledged after its snapshot id, none of these is in the archive.
    await put(a, "kept", "t.json", "four", T0 + 10);
    await put(a, "kept", "new.json", "new", T0 + 10);
    await a.deleteTree("kept", "t.json", {}, T0 + 11);
    for (;;) {
      const r = await writing.next();
      if (r.done) break;
      out.push(Buffer.from(r.value));
    }
    const b = await sqlite();
    const manifest = await restoreArchive(b, streamOf(Buffer.concat(out)));
    const kept = manifest.contents.stores.find((s) => s.name === "kept");
    const before = (expected as { stores: Array<{ record: { config: { name: string }; lastEventId: number } }> })
      .stores;
    expect(kept?.snapshotEventId).toBe(before.find((s) => s.record.config.name === "kept")?.record.lastEventId);
    expect(await dump(b)).toEqual(expected);
  });

  it("a non-empty target is refused, saying why, and nothing is written (issue 28, What users get 3)", async () => {
    const a = await sqlite();
    await fill(a);
    const archive = await backup(a);
    const b = await sqlite();
    await b.createStore({ name: "mine", type: "recursive", settings: {} }, T0);
    const before = await dump(b);
    await expect(restoreArchive(b, streamOf(archive))).rejects.toThrow(
      new RestoreRefusedError("the target is not empty: it holds 1 store; a restore goes into an empty one"),
    );
    expect(await dump(b)).toEqual(before);
  });

  it("a damaged archive: the restore fails naming the part, the target stays marked as being restored, and running it again with a good archive finishes the job (issue 28, What users get 3)", async () => {
    const a = await sqlite();
    await fill(a);
    const archive = await backup(a);
    const bad = Buffer.from(archive);
    const at = bad.indexOf(big.subarray(0, 64));
    bad.writeUInt8(bad.readUInt8(at + 10) ^ 1, at + 10);
    const b = await sqlite();
    const failed = await restoreArchive(b, streamOf(bad)).catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(ArchiveError);
    expect((failed as ArchiveError).part).toMatch(/^blobs\//);
    expect(await b.restoreTarget()).toEqual({ state: "restoring", archive: `${T0}/test` });
    // Cut short too: a truncated one.
    const truncated = await restoreArchive(b, streamOf(archive.subarray(0, archive.byteLength - 3000))).catch(
      (e: unknown) => e,
    );
    expect((truncated as ArchiveError).message).toMatch(/truncated|incomplete/);
    expect(await b.restoreTarget()).toEqual({ state: "restoring", archive: `${T0}/test` });
    await restoreArchive(b, streamOf(archive));
    expect(await b.restoreTarget()).toEqual({ state: "used", reason: "it holds 2 stores" });
    expect(await dump(b)).toEqual(await dump(a));
  });
});

describeWithMongoDb("backup and restore with MongoDB (docs/backup.md)", (url) => {
  /** A fresh database, dropped afterwards. */
  async function mongo(): Promise<StoragePort> {
    const database = `trove_backup_${randomBytes(6).toString("hex")}`;
    const storage = await MongoStorage.open({ url, database });
    opened.push(async () => {
      await storage.close();
      const client = new MongoClient(url);
      try {
        await client.db(database).dropDatabase();
      } finally {
        await client.close();
      }
    });
    return storage;
  }
  roundTrip("embedded -> MongoDB -> embedded", sqlite, mongo);

  it("a restore into MongoDB cut short by a truncated archive stays marked, and running it again with the whole archive finishes the job (issue 28, What users get 3)", async () => {
    const a = await sqlite();
    await fill(a);
    const archive = await backup(a);
    const b = await mongo();
    const cut = await restoreArchive(b, streamOf(archive.subarray(0, archive.byteLength - 3000))).catch(
      (e: unknown) => e,
    );
    expect(cut).toBeInstanceOf(ArchiveError);
    expect(await b.restoreTarget()).toEqual({ state: "restoring", archive: `${T0}/test` });
    await restoreArchive(b, streamOf(archive));
    expect(await b.restoreTarget()).toEqual({ state: "used", reason: "it holds 2 stores" });
    expect(await dump(b)).toEqual(await dump(a));
  });
});
