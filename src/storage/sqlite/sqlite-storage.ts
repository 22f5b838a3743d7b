// The embedded default backend: metadata in SQLite (better-sqlite3, WAL),
// small contents inline, larger ones as blob files under the data directory.
// A full disk is InsufficientStorageError; deletes have room kept for them (docs/storage.md).

import { chmodSync, closeSync, existsSync, openSync } from "node:fs";
import { join, resolve } from "node:path";
import Database from "better-sqlite3";
import { UnavailableError } from "../../domain/errors.js";
import type { StoreConfig } from "../../domain/store.js";
import { BlobFiles, OWNER_DIR, OWNER_FILE } from "../local/blob-files.js";
import { makeDirectorySync } from "../local/make-directory.js";
import { SpaceReserve } from "../local/space-reserve.js";
import {
  type BlobInfo,
  type DeleteResult,
  type EndedVersionsOptions,
  type GetStoreNodeOptions,
  type ListOptions,
  type NodeRecord,
  type PeerChannel,
  type Preconditions,
  type ReportRecord,
  type RestoreTarget,
  type SnapshotHold,
  type StorageLogger,
  type StoragePort,
  type StoreNode,
  type StoreRecord,
  silentStorageLogger,
  type VersionRecord,
  type WriteBlobOptions,
  type WriteResult,
  type WriteTurns,
} from "../port.js";
import { SqliteContents } from "./contents.js";
import { SqliteHistory } from "./history.js";
import { SqlitePurge } from "./purge.js";
import { SqliteReads } from "./reads.js";
import { SqliteRestore } from "./restore.js";
import { applySchema, prepareStatements } from "./schema.js";
import { SqliteSnapshots } from "./snapshot.js";
import { SqliteInsights } from "./sqlite-insights.js";
import { SqliteWriteTurns } from "./write-turns.js";
import { SqliteNodeWrites } from "./writes.js";

export interface SqliteStorageOptions {
  /** Directory that holds trove.db and the blob files. */
  dataDir: string;
  /** How long a writer waits for the database lock, in milliseconds. */
  busyTimeout?: number;
  /**
   * SQLite's `synchronous` in WAL mode: "normal" (default) makes a commit durable across a crash
   * of the process; "full" also across a power loss or an OS crash, at the cost of an fsync of
   * the WAL per commit (docs/storage.md, Durability).
   */
  synchronous?: "normal" | "full";
  /** Where failures that were recovered from are reported (default: nowhere). */
  logger?: StorageLogger;
  /**
   * Room kept for deletes on a full disk, in bytes: a file `<data>/reserve` of this size, removed
   * when a delete meets a full disk and written again once there is room (default 8 MiB; 0: none).
   */
  reserveBytes?: number;
  /**
   * Largest size of trove.db in bytes (SQLite's max_page_count); beyond it writes are refused as
   * on a full disk. The last `reserveBytes` of it are kept for deletes. Default: no cap.
   */
  maxDatabaseBytes?: number;
  /**
   * The other worker processes on this data directory (`trove serve --workers`), and this one's
   * slot among them (1..N). With peers the database is opened in SQLite's normal locking mode,
   * so that every worker can read and write it; each commit is published to the others (topic
   * "store") and theirs wake this process's listeners. Without (the default) one process holds
   * the directory in the exclusive locking mode: faster reads, and any other process is refused.
   */
  peers?: { channel: PeerChannel; turns: WriteTurns; slot: number };
}

const DEFAULT_RESERVE_BYTES = 8 * 1024 * 1024;

/** The peers' topic of committed changes: the key is the store's name. */
const PEER_TOPIC = "store";

/**
 * The embedded adapter: opens the data directory and wires the modules that do the work, one job
 * each (docs/storage.md): schema.ts, rows.ts, reads.ts, writes.ts, write-turns.ts, contents.ts,
 * history.ts, purge.ts.
 */
export class SqliteStorage implements StoragePort {
  readonly backend = "sqlite";
  private readonly db: Database.Database;
  private readonly blobs: BlobFiles;
  /** Projects, environments, promotions and reports (sqlite-insights.ts). */
  readonly insights: SqliteInsights;
  private readonly dbFile: string;
  private readonly busyTimeout: number;
  private readonly synchronous: "normal" | "full";
  private readonly reads: SqliteReads;
  private readonly writes: SqliteNodeWrites;
  private readonly contents: SqliteContents;
  private readonly history: SqliteHistory;
  private readonly purge: SqlitePurge;
  private readonly snapshots: SqliteSnapshots;
  private readonly restores: SqliteRestore;
  private readonly listeners = new Set<(store: string) => void>();
  private readonly peers: { channel: PeerChannel; turns: WriteTurns; slot: number } | undefined;
  /** Stops listening to the peers' commits (close). */
  private unsubscribePeers: (() => void) | undefined;
  private readonly logger: StorageLogger;
  private readonly reserve: SpaceReserve;

  private constructor(options: SqliteStorageOptions) {
    const dir = resolve(options.dataDir);
    // Owner-only whatever the umask, and also for a directory made by an earlier version.
    makeDirectorySync(dir, OWNER_DIR);
    chmodSync(dir, OWNER_DIR);
    this.logger = options.logger ?? silentStorageLogger;
    const reserveBytes = Math.max(0, options.reserveBytes ?? DEFAULT_RESERVE_BYTES);
    this.reserve = new SpaceReserve(join(dir, "reserve"), reserveBytes, this.logger);
    this.dbFile = join(dir, "trove.db");
    this.busyTimeout = options.busyTimeout ?? 5000;
    // SQLite creates -wal and -shm with the database file's mode: make that one owner-only first.
    closeSync(openSync(this.dbFile, "a", OWNER_FILE));
    chmodSync(this.dbFile, OWNER_FILE);
    this.db = new Database(this.dbFile, { timeout: this.busyTimeout });
    // One process owns the data directory: with the exclusive locking mode set before WAL is
    // entered, SQLite keeps its WAL index in memory (no -shm file) and never takes or releases a
    // file lock again, so a point read costs no fcntl (4 lock calls per read otherwise, the most
    // of a GET's read: docs/benchmarks.md). A second process on the same directory is refused.
    // Workers (peers) share it in the normal locking mode, each read taking its locks; a process
    // in the exclusive mode is refused while they hold it open, and they while it does.
    this.peers = options.peers;
    try {
      if (!this.peers) this.db.pragma("locking_mode = EXCLUSIVE");
      this.db.pragma("journal_mode = WAL");
    } catch (err) {
      this.db.close();
      if ((err as { code?: string }).code === "SQLITE_BUSY") {
        throw new Error(
          `the data directory ${dir} is in use by another process (another trove serve?): stop it, or give this one another --data directory`,
        );
      }
      throw err;
    }
    for (const file of [`${this.dbFile}-wal`, `${this.dbFile}-shm`]) {
      if (existsSync(file)) chmodSync(file, OWNER_FILE);
    }
    if (this.peers) this.db.pragma("wal_autocheckpoint = 0");
    this.synchronous = options.synchronous ?? "normal";
    this.db.pragma(`synchronous = ${this.synchronous === "full" ? "FULL" : "NORMAL"}`);
    applySchema(this.db);
    let pageCap: { all: number; writes: number } | undefined;
    if (options.maxDatabaseBytes !== undefined) {
      const pageSize = this.db.pragma("page_size", { simple: true }) as number;
      const all = Math.max(1, Math.floor(options.maxDatabaseBytes / pageSize));
      pageCap = { all, writes: Math.max(1, all - Math.ceil(reserveBytes / pageSize)) };
      this.db.pragma(`max_page_count = ${pageCap.writes}`);
    }
    this.blobs = new BlobFiles(dir, this.synchronous === "full", this.peers?.slot);
    const turns = new SqliteWriteTurns({
      db: this.db,
      dataDir: dir,
      busyTimeout: this.busyTimeout,
      logger: this.logger,
      reserve: this.reserve,
      pageCap,
      turns: this.peers?.turns,
    });
    this.insights = new SqliteInsights(this.db, this.blobs, turns, this.logger);
    const stmt = prepareStatements(this.db);
    this.reads = new SqliteReads(stmt);
    this.contents = new SqliteContents(stmt, this.blobs, this.reserve, this.logger);
    this.history = new SqliteHistory(stmt);
    this.writes = new SqliteNodeWrites({
      db: this.db,
      stmt,
      reads: this.reads,
      history: this.history,
      turns,
      contents: this.contents,
      reserve: this.reserve,
      changed: (store) => this.changed(store),
    });
    this.snapshots = new SqliteSnapshots(this.db, turns);
    this.restores = new SqliteRestore(this.db, stmt, turns);
    this.purge = new SqlitePurge({
      db: this.db,
      snapshots: this.snapshots,
      stmt,
      reads: this.reads,
      turns,
      blobs: this.blobs,
      contents: this.contents,
      insights: this.insights,
      reserve: this.reserve,
      logger: this.logger,
    });
  }

  static async open(options: SqliteStorageOptions): Promise<SqliteStorage> {
    const storage = new SqliteStorage(options);
    try {
      await storage.blobs.init();
    } catch (err) {
      storage.db.close();
      throw err;
    }
    storage.reserve.restore();
    if (storage.peers) {
      storage.unsubscribePeers = storage.peers.channel.subscribe(PEER_TOPIC, (store) => storage.tellListeners(store));
    }
    return storage;
  }

  reportedSettings(): Record<string, string> {
    return {
      "filesystem-location": this.blobs.blobDir,
      "filesystem-temp": this.blobs.tempDir,
      "database-driver": "better-sqlite3",
      "database-dialect": "sqlite",
      "database-connection-url": `file:${this.dbFile}`,
      "database-lock-timeout": String(this.busyTimeout),
      "database-transaction-retries": "0",
      "database-connection-pool-size": "1",
    };
  }

  async listStores(): Promise<StoreRecord[]> {
    return this.reads.listStores();
  }

  async getStore(name: string): Promise<StoreRecord | undefined> {
    return this.reads.getStore(name);
  }

  createStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    return this.writes.createStore(config, now);
  }

  updateStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    return this.writes.updateStore(config, now);
  }

  deleteStore(name: string, now: number): Promise<StoreRecord> {
    return this.writes.deleteStore(name, now);
  }

  async getNode(store: string, path: string): Promise<NodeRecord | undefined> {
    return this.reads.getNode(store, path);
  }

  /** Answered at once (the port allows it): a GET's read costs no promise (issue 32). */
  getStoreNode(store: string, path: string, options: GetStoreNodeOptions): StoreNode | undefined {
    return this.reads.getStoreNode(store, path, options);
  }

  listNodes(store: string, dir: string, options: ListOptions): AsyncIterable<NodeRecord[]> {
    return this.reads.listNodes(store, dir, options);
  }

  putFile(
    store: string,
    path: string,
    blob: BlobInfo,
    type: string,
    pre: Preconditions,
    now: number,
    user?: string,
  ): Promise<WriteResult> {
    return this.writes.putFile(store, path, blob, type, pre, now, user);
  }

  putFiles(
    store: string,
    files: readonly { path: string; blob: BlobInfo; type: string; pre: Preconditions }[],
    now: number,
    user?: string,
  ): Promise<({ result: WriteResult } | { error: unknown })[]> {
    return this.writes.putFiles(store, files, now, user);
  }

  makeDirectory(store: string, path: string, pre: Preconditions, now: number, user?: string): Promise<WriteResult> {
    return this.writes.makeDirectory(store, path, pre, now, user);
  }

  deleteTree(store: string, path: string, pre: Preconditions, now: number, user?: string): Promise<DeleteResult> {
    return this.writes.deleteTree(store, path, pre, now, user);
  }

  writeBlob(source: AsyncIterable<Uint8Array>, options: WriteBlobOptions): Promise<BlobInfo> {
    return this.contents.write(source, options);
  }

  readBlob(node: NodeRecord): AsyncIterable<Uint8Array> {
    return this.contents.read(node);
  }

  discardBlob(blob: BlobInfo): Promise<void> {
    return this.contents.discard(blob);
  }

  async changesSince(store: string, afterEventId: number, limit: number): Promise<NodeRecord[]> {
    return this.reads.changesSince(store, afterEventId, limit);
  }

  onChange(listener: (store: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** A commit here changed `store`: tells the listeners and the peers; nothing here may throw. */
  private changed(store: string): void {
    this.tellListeners(store);
    this.peers?.channel.publish(PEER_TOPIC, store);
  }

  /** Tells the listeners that a store changed, here or in a peer. */
  private tellListeners(store: string): void {
    for (const listener of this.listeners) {
      try {
        listener(store);
      } catch (err) {
        this.logger.warn({ err, store }, "a change listener failed");
      }
    }
  }

  // History (docs/history.md): history.ts reads it; writes.ts keeps it and restores from it.
  listVersions(store: string, path: string, options: { batchSize?: number }): AsyncIterable<VersionRecord[]> {
    return this.history.listVersions(store, path, options);
  }

  async getVersion(store: string, path: string, tag: string): Promise<VersionRecord | undefined> {
    return this.history.getVersion(store, path, tag);
  }

  async getNodeAsOf(store: string, path: string, eventId: number): Promise<VersionRecord | undefined> {
    return this.history.getNodeAsOf(store, path, eventId);
  }

  listNodesAsOf(store: string, dir: string, eventId: number, options: ListOptions): AsyncIterable<VersionRecord[]> {
    return this.history.listNodesAsOf(store, dir, eventId, options);
  }

  async eventAt(store: string, time: number): Promise<number> {
    return this.history.eventAt(store, time);
  }

  restoreVersion(
    store: string,
    path: string,
    tag: string,
    pre: Preconditions,
    now: number,
    user?: string,
  ): Promise<WriteResult> {
    return this.writes.restoreVersion(store, path, tag, pre, now, user);
  }

  // Backups (docs/backup.md): snapshot.ts.
  holdSnapshot(store: string): Promise<SnapshotHold | undefined> {
    return this.snapshots.hold(store);
  }

  listEndedVersions(store: string, upTo: number, options: EndedVersionsOptions): AsyncIterable<VersionRecord[]> {
    return this.snapshots.listEnded(store, upTo, options);
  }

  // Restores (docs/backup.md): restore.ts.
  async restoreTarget(): Promise<RestoreTarget> {
    return this.restores.target();
  }

  beginRestore(archive: string): Promise<void> {
    return this.restores.begin(archive);
  }

  finishRestore(): Promise<void> {
    return this.restores.finish();
  }

  importStore(store: StoreRecord): Promise<void> {
    return this.restores.store(store);
  }

  importNodes(_store: string, nodes: readonly NodeRecord[]): Promise<void> {
    return this.restores.importNodes(nodes);
  }

  importVersions(_store: string, versions: readonly VersionRecord[]): Promise<void> {
    return this.restores.importVersions(versions);
  }

  importReport(report: ReportRecord): Promise<void> {
    return this.insights.importReport(report);
  }

  purgeExpired(now: number): Promise<number> {
    return this.purge.purgeExpired(now);
  }

  async ping(): Promise<void> {
    try {
      this.db.prepare("SELECT 1").get();
    } catch (err) {
      throw new UnavailableError(`SQLite unavailable: ${(err as Error).message}`);
    }
  }

  async close(): Promise<void> {
    this.unsubscribePeers?.();
    await this.reserve.settled();
    this.db.close();
  }
}
