// The storage contract for the embedded SQLite adapter, then what only it does:
// a data directory that outlives the process.

import { randomBytes, randomUUID } from "node:crypto";
import { mkdir, mkdtemp, readdir, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Database from "better-sqlite3";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { measuredStorage } from "../../src/server/metrics-storage.js";
import { ReadOnlySwitch, readOnlyStorage } from "../../src/services/read-only.js";
import { createFilesystemStorage } from "../../src/storage/filesystem/filesystem-storage.js";
import type { NodeRecord, ReportRecord, StoragePort, VersionRecord } from "../../src/storage/port.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { asServed } from "./as-served.js";
import { type AdapterUnderTest, storageContract } from "./contract.js";

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => e.name);
}

async function openAdapter(): Promise<AdapterUnderTest> {
  const dataDir = await mkdtemp(join(tmpdir(), "trove-sqlite-"));
  const storage = await SqliteStorage.open({ dataDir });
  return {
    storage,
    async cleanup() {
      await storage.close();
      await rm(dataDir, { recursive: true, force: true });
    },
    async storedBlobs() {
      return [...(await filesUnder(join(dataDir, "blobs"))), ...(await filesUnder(join(dataDir, "tmp")))];
    },
  };
}

storageContract("sqlite", openAdapter);
storageContract("sqlite inside FilesystemStorage", () => asServed(openAdapter));

async function readAll(storage: StoragePort, node: NodeRecord): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of storage.readBlob(node)) parts.push(Buffer.from(chunk));
  return Buffer.concat(parts);
}

async function* once(data: Uint8Array): AsyncIterable<Uint8Array> {
  yield data;
}

describe("SqliteStorage", () => {
  const T0 = 1_700_000_000_000;
  let dataDir: string;
  let storage: SqliteStorage | undefined;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "trove-sqlite-"));
  });

  afterEach(async () => {
    await storage?.close();
    storage = undefined;
    await rm(dataDir, { recursive: true, force: true });
  });

  it.each(["normal", "full"] as const)(
    "keeps stores, nodes and blobs across close and reopen (synchronous %s)",
    async (synchronous) => {
      storage = await SqliteStorage.open({ dataDir, synchronous });
      await storage.createStore({ name: "s", type: "recursive", settings: { "keep-deleted": "1d" } }, T0);
      await storage.makeDirectory("s", "d", {}, T0);
      const large = randomBytes(200_000);
      const bigBlob = await storage.writeBlob(once(large), { maxSize: 1_000_000 });
      await storage.putFile("s", "d/big.bin", bigBlob, "application/octet-stream", {}, T0);
      const smallBlob = await storage.writeBlob(once(Buffer.from("small")), { maxSize: 1_000_000 });
      await storage.putFile("s", "d/small.txt", smallBlob, "text/plain", {}, T0);
      await storage.makeDirectory("s", "gone", {}, T0);
      await storage.deleteTree("s", "gone", {}, T0);
      const storeBefore = await storage.getStore("s");
      const nodesBefore = await Promise.all(
        ["", "d", "d/big.bin", "d/small.txt", "gone"].map((p) => storage?.getNode("s", p)),
      );
      await storage.close();

      storage = await SqliteStorage.open({ dataDir, synchronous });
      expect(await storage.getStore("s")).toEqual(storeBefore);
      const nodesAfter = await Promise.all(
        ["", "d", "d/big.bin", "d/small.txt", "gone"].map((p) => storage?.getNode("s", p)),
      );
      expect(nodesAfter).toEqual(nodesBefore);
      const big = nodesAfter[2] as NodeRecord;
      expect((await readAll(storage, big)).equals(large)).toBe(true);
      expect((await readAll(storage, nodesAfter[3] as NodeRecord)).toString()).toBe("small");
      const { node } = await storage.makeDirectory("s", "e", {}, T0 + 1);
      expect(node.eventId).toBeGreaterThan(storeBefore?.lastEventId ?? Number.POSITIVE_INFINITY);
    },
  );

  it("removes temporary upload files left in <data>/tmp when it opens, and keeps finished blobs", async () => {
    storage = await SqliteStorage.open({ dataDir });
    await storage.createStore({ name: "s", type: "snapshot", settings: { "keep-deleted": "1d" } }, T0);
    const blob = await storage.writeBlob(once(randomBytes(100_000)), { maxSize: 1_000_000 });
    await storage.putFile("s", "big.bin", blob, "application/octet-stream", {}, T0);
    await storage.close();
    storage = undefined;

    await writeFile(join(dataDir, "tmp", "4f1c1b8e-dead-4bee-8c1a-000000000000"), randomBytes(70_000));
    await mkdir(join(dataDir, "tmp", "stray"), { recursive: true });
    await writeFile(join(dataDir, "tmp", "stray", "partial"), "x");

    storage = await SqliteStorage.open({ dataDir });
    expect(await readdir(join(dataDir, "tmp"))).toEqual([]);
    const node = await storage.getNode("s", "big.bin");
    expect(node && (await readAll(storage, node)).byteLength).toBe(100_000);
  });

  it("opens a data directory made before the insights tables existed, and adds them", async () => {
    storage = await SqliteStorage.open({ dataDir });
    await storage.createStore({ name: "s", type: "snapshot", settings: { "keep-deleted": "1d" } }, T0);
    const blob = await storage.writeBlob(once(Buffer.from("kept")), { maxSize: 1_000_000 });
    const { node } = await storage.putFile("s", "a.txt", blob, "text/plain", {}, T0);
    await storage.close();
    storage = undefined;
    // What the previous version left: the stores and nodes tables only.
    const db = new Database(join(dataDir, "trove.db"));
    for (const table of ["projects", "environments", "promotions", "reports"]) db.exec(`DROP TABLE ${table}`);
    db.close();

    storage = await SqliteStorage.open({ dataDir });
    expect(await storage.getNode("s", "a.txt")).toEqual(node);
    const project = {
      id: "6f1c1b8e-0000-4bee-8c1a-000000000001",
      name: "p",
      account: "a",
      store: "s",
      created: T0,
      creator: "ann",
    };
    await storage.insights.createProject(project);
    await storage.close();
    storage = await SqliteStorage.open({ dataDir });
    expect(await storage.insights.listProjects()).toEqual([project]);
  });

  it("keeps projects, environments, promotions and reports with their documents across reopen", async () => {
    storage = await SqliteStorage.open({ dataDir });
    const project = {
      id: "6f1c1b8e-0000-4bee-8c1a-000000000001",
      name: "p",
      account: "a",
      store: "s",
      created: T0,
      creator: "ann",
    };
    const environment = {
      id: "6f1c1b8e-0000-4bee-8c1a-000000000002",
      projectId: project.id,
      name: "prod",
      created: T0,
      creator: "ann",
    };
    await storage.insights.createProject(project);
    await storage.insights.createEnvironment(environment);
    await storage.insights.recordPromotion({ environmentId: environment.id, path: "/a.template", date: T0, by: "bob" });
    const id = "6f1c1b8e-0000-4bee-8c1a-000000000003";
    await storage.insights.createReport({
      id,
      projectId: project.id,
      environmentId: environment.id,
      creator: "ann",
      created: T0,
      additionalFields: ["lastPromotedBy"],
      status: "generating",
      finished: 0,
      expiresAt: T0 + 1000,
      reason: "",
      attempts: 0,
      leaseOwner: "",
      leaseExpires: 0,
      document: null,
    });
    await storage.insights.claimReportJob("w", T0, 1000);
    const data = randomBytes(100_000);
    const document = await storage.writeBlob(once(data), { maxSize: 1_000_000 });
    await storage.insights.updateReportJob(id, "w", { status: "generated", finished: T0, document });
    const before = await storage.insights.getReport(id);
    await storage.close();

    storage = await SqliteStorage.open({ dataDir });
    expect(await storage.insights.getProject(project.id)).toEqual(project);
    expect(await storage.insights.listEnvironments(project.id)).toEqual([environment]);
    const promotions = [];
    for await (const p of storage.insights.listPromotions(environment.id)) promotions.push(p);
    expect(promotions).toEqual([{ environmentId: environment.id, path: "/a.template", date: T0, by: "bob" }]);
    const after = await storage.insights.getReport(id);
    expect(after).toEqual(before);
    const parts: Buffer[] = [];
    for await (const chunk of storage.insights.readReportDocument(after as NonNullable<typeof after>))
      parts.push(Buffer.from(chunk));
    expect(Buffer.concat(parts).equals(data)).toBe(true);
  });

  it("one process owns a data directory: a second opener is refused with the reason, the first keeps serving", async () => {
    storage = await SqliteStorage.open({ dataDir });
    await storage.createStore({ name: "s", type: "recursive", settings: { "keep-deleted": "1d" } }, T0);
    await expect(SqliteStorage.open({ dataDir, busyTimeout: 50 })).rejects.toThrow(
      /data directory .* is in use by another process/,
    );
    // No shared-memory WAL index: the exclusive lock keeps it in the owner's memory.
    await expect(stat(join(dataDir, "trove.db-shm"))).rejects.toMatchObject({ code: "ENOENT" });
    expect((await storage.getStore("s"))?.config.name).toBe("s");
    await storage.close();
    storage = await SqliteStorage.open({ dataDir });
    expect((await storage.getStore("s"))?.config.name).toBe("s");
  });

  it("reports its data locations and driver among the settings", async () => {
    storage = await SqliteStorage.open({ dataDir, busyTimeout: 1234 });
    const settings = storage.reportedSettings();
    expect(settings).toMatchObject({
      "filesystem-location": join(dataDir, "blobs"),
      "filesystem-temp": join(dataDir, "tmp"),
      "database-driver": "better-sqlite3",
      "database-dialect": "sqlite",
      "database-connection-url": `file:${join(dataDir, "trove.db")}`,
      "database-lock-timeout": "1234",
    });
    expect((await stat(join(dataDir, "trove.db"))).isFile()).toBe(true);
  });

  it("the purge removes blob files over an hour old that nothing refers to, and keeps every other", async () => {
    storage = await SqliteStorage.open({ dataDir });
    await storage.createStore({ name: "s", type: "snapshot", settings: {} }, T0);
    const big = () => once(randomBytes(100 * 1024));
    // What a process killed between the rename and the metadata write leaves: a file nobody refers to.
    const orphan = await storage.writeBlob(big(), { maxSize: 1 << 20 });
    const young = await storage.writeBlob(big(), { maxSize: 1 << 20 });
    const contents = await storage.writeBlob(big(), { maxSize: 1 << 20 });
    await storage.putFile("s", "a.bin", contents, "application/octet-stream", {}, T0);
    const report: ReportRecord = {
      id: randomUUID(),
      projectId: randomUUID(),
      environmentId: randomUUID(),
      creator: "ann",
      created: T0,
      additionalFields: [],
      status: "generating",
      finished: 0,
      expiresAt: T0 + 90 * 86_400_000,
      reason: "",
      attempts: 0,
      leaseOwner: "",
      leaseExpires: 0,
      document: null,
    };
    await storage.insights.createReport(report);
    await storage.insights.claimReportJob("w", T0, 30_000);
    const document = await storage.writeBlob(big(), { maxSize: 1 << 20 });
    expect(
      await storage.insights.updateReportJob(report.id, "w", { status: "generated", finished: T0, document }),
    ).toBe(true);
    const old = new Date(Date.now() - 2 * 3_600_000);
    for (const b of [orphan, contents, document]) {
      await utimes(join(dataDir, "blobs", b.blob.slice(0, 2), b.blob), old, old);
    }
    expect(await filesUnder(join(dataDir, "blobs"))).toHaveLength(4);

    await storage.purgeExpired(T0);
    expect((await filesUnder(join(dataDir, "blobs"))).sort()).toEqual(
      [young.blob, contents.blob, document.blob].sort(),
    );
    const node = await storage.getNode("s", "a.bin");
    expect((await readAll(storage, node as NodeRecord)).byteLength).toBe(100 * 1024);
  });
});

describe("a small read with no asynchronous hop (issue 32 item 3, step 4a)", () => {
  it("SQLite's getStoreNode answers at once, alone and as a server wraps it (measured port, read-only switch, FilesystemStorage), with the node and its inline contents; the measured port counts it", async () => {
    const dataDir = await mkdtemp(join(tmpdir(), "trove-sqlite-"));
    const inner = await SqliteStorage.open({ dataDir });
    const operations: string[] = [];
    const measured = measuredStorage(inner, {
      operation: (name, _s, ok) => operations.push(`${name} ${ok}`),
      changed() {},
    });
    const served = createFilesystemStorage(readOnlyStorage(measured, new ReadOnlySwitch()));
    try {
      await served.whenStarted();
      await served.createStore({ name: "s", type: "recursive", settings: {} }, 1);
      const blob = await served.writeBlob(once(Buffer.from("small")), { maxSize: 1000 });
      await served.putFile("s", "a.txt", blob, "text/plain", {}, 2);
      operations.length = 0;
      for (const storage of [inner, served]) {
        const found = storage.getStoreNode("s", "a.txt", { contents: true });
        expect(found).not.toBeInstanceOf(Promise);
        const node = (found as Awaited<typeof found>)?.node;
        expect([node?.path, Buffer.from(node?.inline ?? []).toString()]).toEqual(["a.txt", "small"]);
        // A store that does not exist: undefined, at once too.
        expect(storage.getStoreNode("nope", "a.txt", { contents: true })).toBeUndefined();
      }
      expect(operations).toEqual(["getStoreNode true", "getStoreNode true"]);
    } finally {
      await served.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe("SqliteStorage history", () => {
  const T0 = 1_700_000_000_000;
  let dataDir: string;
  let storage: SqliteStorage | undefined;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), "trove-sqlite-"));
  });

  afterEach(async () => {
    await storage?.close();
    storage = undefined;
    await rm(dataDir, { recursive: true, force: true });
  });

  it("opens a data directory made before history: gains the columns and tables, each store's history starts at its last event", async () => {
    storage = await SqliteStorage.open({ dataDir });
    const settings = { "keep-deleted": "7d", "keep-versions": "30d" };
    await storage.createStore({ name: "s", type: "snapshot", settings }, T0);
    const blob = await storage.writeBlob(once(Buffer.from("one")), { maxSize: 1_000_000 });
    const { node: first } = await storage.putFile("s", "a.txt", blob, "text/plain", {}, T0);
    await storage.close();
    storage = undefined;
    // What the previous version left: no versions table, no user, no history horizon.
    const db = new Database(join(dataDir, "trove.db"));
    db.exec(`DROP TABLE versions; DROP INDEX nodes_times; DROP INDEX nodes_blobs;
      ALTER TABLE nodes DROP COLUMN user; ALTER TABLE stores DROP COLUMN history_from;`);
    db.close();

    storage = await SqliteStorage.open({ dataDir });
    const store = await storage.getStore("s");
    expect(store?.historyFrom).toBe(store?.lastEventId);
    const { user: _, ...before } = first;
    expect(await storage.getNode("s", "a.txt")).toEqual({ ...before, user: "" });
    const again = await storage.writeBlob(once(Buffer.from("two")), { maxSize: 1_000_000 });
    await storage.putFile("s", "a.txt", again, "text/plain", {}, T0 + 1000, "ann");
    const versions: VersionRecord[] = [];
    for await (const batch of storage.listVersions("s", "a.txt", {})) versions.push(...batch);
    expect(versions.map((v) => [v.tag, v.user])).toEqual([
      [(await storage.getNode("s", "a.txt"))?.tag, "ann"],
      [first.tag, ""],
    ]);
    // A second open changes nothing more.
    await storage.close();
    storage = await SqliteStorage.open({ dataDir });
    expect((await storage.getStore("s"))?.historyFrom).toBe(store?.historyFrom);
  });

  it("a version and the change that replaced it commit together: a refused write keeps no version", async () => {
    storage = await SqliteStorage.open({ dataDir });
    await storage.createStore(
      { name: "s", type: "recursive", settings: { "keep-deleted": "7d", "keep-versions": "30d" } },
      T0,
    );
    await storage.makeDirectory("s", "d", {}, T0);
    const blob = await storage.writeBlob(once(Buffer.from("one")), { maxSize: 1_000_000 });
    await storage.putFile("s", "d/a.txt", blob, "text/plain", {}, T0);
    const count = () =>
      Promise.all(
        ["", "d", "d/a.txt"].map(async (p) => {
          let n = 0;
          for await (const batch of (storage as SqliteStorage).listVersions("s", p, {})) n += batch.length;
          return n;
        }),
      );
    const before = await count();
    const stale = await storage.writeBlob(once(Buffer.from("two")), { maxSize: 1_000_000 });
    await expect(
      storage.putFile("s", "d/a.txt", stale, "text/plain", { ifMatch: ["stale"] }, T0 + 1000),
    ).rejects.toThrow();
    await expect(storage.deleteTree("s", "d", { ifMatch: ["stale"] }, T0 + 1000)).rejects.toThrow();
    expect(await count()).toEqual(before);
  });
});

describe("SQLite restore of an archive's records (docs/backup.md; docs/history.md, Recording)", () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), "trove-sqlite-import-"));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("drops a version that is its node's state (MongoDB's crash window), in either order of import: the path lists once", async () => {
    const source = await SqliteStorage.open({ dataDir: join(dir, "source") });
    const states: { nodes: NodeRecord[]; versions: VersionRecord[] } = { nodes: [], versions: [] };
    try {
      await source.createStore({ name: "s", type: "recursive", settings: { "keep-versions": "30d" } }, 1000);
      for (const text of ["one", "two"]) {
        const blob = await source.writeBlob(once(Buffer.from(text)), { maxSize: 1000 });
        await source.putFile("s", "a.txt", blob, "text/plain", {}, 2000);
      }
      for await (const batch of source.listNodes("s", "", { recursive: true, includeDeleted: true })) {
        states.nodes.push(...batch);
      }
      for await (const batch of source.listEndedVersions("s", Number.MAX_SAFE_INTEGER, {})) {
        states.versions.push(...batch);
      }
      const store = await source.getStore("s");
      const node = states.nodes.find((n) => n.path === "a.txt") as NodeRecord;
      // What a MongoDB write that died before its node's write leaves: a version of the current state.
      const crashWindow: VersionRecord = { ...node, user: "", endedEventId: node.eventId + 1, ended: 3000 };
      for (const order of ["nodes first", "versions first"]) {
        const target = await SqliteStorage.open({ dataDir: join(dir, order.replace(" ", "-")) });
        try {
          await target.importStore(store as NonNullable<typeof store>);
          const versions = [...states.versions, crashWindow];
          if (order === "nodes first") {
            await target.importNodes("s", states.nodes);
            await target.importVersions("s", versions);
          } else {
            await target.importVersions("s", versions);
            await target.importNodes("s", states.nodes);
          }
          const tags: string[] = [];
          for await (const batch of target.listVersions("s", "a.txt", {})) tags.push(...batch.map((v) => v.tag));
          expect(tags, order).toEqual([
            node.tag,
            ...states.versions.filter((v) => v.path === "a.txt").map((v) => v.tag),
          ]);
          expect(tags).toHaveLength(2);
          const listed: string[] = [];
          for await (const batch of target.listNodesAsOf("s", "", node.eventId, {
            recursive: true,
            includeDeleted: false,
          })) {
            listed.push(...batch.map((n) => n.path));
          }
          expect(listed, order).toEqual(["a.txt"]);
        } finally {
          await target.close();
        }
      }
    } finally {
      await source.close();
    }
  });
});
