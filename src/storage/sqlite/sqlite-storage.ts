// The embedded default backend: metadata in SQLite (better-sqlite3, WAL),
// small contents inline, larger ones as blob files under the data directory.
// A full disk is InsufficientStorageError; deletes have room kept for them (docs/storage.md).

import { chmodSync, closeSync, existsSync, openSync } from "node:fs";
import { join, resolve } from "node:path";
import Database from "better-sqlite3";
import { NotFoundError, UnavailableError } from "../../domain/errors.js";
import { newTag } from "../../domain/etag.js";
import { ancestorsOf, descendantRange, parentOf } from "../../domain/path.js";
import { isExpiredTombstone, planCreateStore, planDelete, planMakeDirectory, planPutFile } from "../../domain/rules.js";
import { hasRecursiveTags, keepDeletedMillis, type StoreConfig, type StoreType } from "../../domain/store.js";
import { keysetPages } from "../keyset-pages.js";
import { BlobFiles, OWNER_DIR, OWNER_FILE } from "../local/blob-files.js";
import { makeDirectorySync } from "../local/make-directory.js";
import { SpaceReserve } from "../local/space-reserve.js";
import {
  type BlobInfo,
  type DeleteResult,
  type GetStoreNodeOptions,
  type ListOptions,
  type NodeRecord,
  type PeerChannel,
  type Preconditions,
  refuseOutsideFolder,
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
import { databaseError, isDatabaseFull, type SqliteWrites } from "./sqlite-errors.js";
import { SqliteInsights } from "./sqlite-insights.js";

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

const SCHEMA = `
CREATE TABLE IF NOT EXISTS stores (
  name TEXT PRIMARY KEY,
  type TEXT NOT NULL,
  settings TEXT NOT NULL,
  deleted INTEGER NOT NULL DEFAULT 0,
  last_event_id INTEGER NOT NULL DEFAULT 0,
  purged_event_id INTEGER NOT NULL DEFAULT 0,
  created INTEGER NOT NULL,
  modified INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS nodes (
  store TEXT NOT NULL,
  path TEXT NOT NULL,
  parent TEXT,
  directory INTEGER NOT NULL,
  deleted INTEGER NOT NULL DEFAULT 0,
  tag TEXT NOT NULL,
  prev_tag TEXT NOT NULL DEFAULT '',
  type TEXT NOT NULL DEFAULT '',
  size INTEGER NOT NULL DEFAULT 0,
  md5 TEXT NOT NULL DEFAULT '',
  blob TEXT NOT NULL DEFAULT '',
  inline BLOB,
  created INTEGER NOT NULL,
  modified INTEGER NOT NULL,
  event_id INTEGER NOT NULL,
  UNIQUE (store, path)
);
CREATE INDEX IF NOT EXISTS nodes_children ON nodes (store, parent, path);
CREATE INDEX IF NOT EXISTS nodes_events ON nodes (store, event_id);
CREATE INDEX IF NOT EXISTS nodes_tombstones ON nodes (deleted, modified) WHERE deleted = 1;
`;

interface NodeRow {
  store: string;
  path: string;
  directory: number;
  deleted: number;
  tag: string;
  prev_tag: string;
  type: string;
  size: number;
  md5: string;
  blob: string;
  inline: Buffer | null;
  created: number;
  modified: number;
  event_id: number;
}

interface StoreRow {
  name: string;
  type: string;
  settings: string;
  deleted: number;
  last_event_id: number;
  purged_event_id: number;
  created: number;
  modified: number;
  root_tag: string | null;
}

function toNode(row: NodeRow): NodeRecord {
  return {
    store: row.store,
    path: row.path,
    directory: row.directory === 1,
    deleted: row.deleted === 1,
    tag: row.tag,
    prevTag: row.prev_tag,
    type: row.type,
    size: row.size,
    md5: row.md5,
    blob: row.blob,
    inline: row.inline,
    created: row.created,
    modified: row.modified,
    eventId: row.event_id,
  };
}

// The hot reads return rows as arrays (better-sqlite3's raw mode): a keyed row object costs the
// interning of every column name of every row, more than the SQLite lookup itself.
const NODE_COLUMNS = "n.directory, n.deleted, n.tag, n.prev_tag, n.type, n.size, n.md5, n.blob";
const NODE_TIMES = "n.created, n.modified, n.event_id";
/**
 * getStoreNode's store and node in one statement, one read transaction (bound: path, store). The
 * key comes in as a one-row table rather than as parameters in the join: SQLite 3.54 (better-sqlite3
 * 13) marks a bound parameter that a join compares with an indexed column as one whose new value
 * may change the plan (STAT4), so every execution re-prepared the statement: 7-8 µs more per read,
 * four fifths of the read, and 40 % of a GET's CPU (docs/benchmarks.md, "SQLite binding").
 */
const STORE_NODE_KEY = "WITH k(path, store) AS (VALUES (?, ?))";
const STORE_NODE_FROM =
  "FROM k JOIN stores s ON s.name = k.store LEFT JOIN nodes n ON n.store = s.name AND n.path = k.path WHERE s.deleted = 0";
/**
 * A listing's raw columns: the path, then rawNode's from column 1, contents left out (readBlob
 * finds inline ones by path and blob). Keyed rows cost a 1,000-entry listing about a fifth of its
 * CPU (issue 14).
 */
const LISTED_RAW = `n.path, ${NODE_COLUMNS}, NULL, ${NODE_TIMES}`;

/**
 * A node from a raw row, starting at column `at`: NODE_COLUMNS, then the inline contents (a
 * Buffer, or null; a number when the query asked only whether there are any), then NODE_TIMES.
 */
function rawNode(store: string, path: string, r: readonly unknown[], at: number): NodeRecord {
  const inline = r[at + 8];
  return {
    store,
    path,
    directory: r[at] === 1,
    deleted: r[at + 1] === 1,
    tag: r[at + 2] as string,
    prevTag: r[at + 3] as string,
    type: r[at + 4] as string,
    size: r[at + 5] as number,
    md5: r[at + 6] as string,
    blob: r[at + 7] as string,
    inline: inline instanceof Uint8Array ? inline : null,
    created: r[at + 9] as number,
    modified: r[at + 10] as number,
    eventId: r[at + 11] as number,
  };
}

/** The upsertNode parameters that store a node. */
function upsertParams(n: NodeRecord): unknown[] {
  return [
    n.store,
    n.path,
    parentOf(n.path) ?? null,
    n.directory ? 1 : 0,
    n.deleted ? 1 : 0,
    n.tag,
    n.prevTag,
    n.type,
    n.size,
    n.md5,
    n.blob,
    n.inline,
    n.created,
    n.modified,
    n.eventId,
  ];
}

function newDirectory(store: string, path: string, now: number, eventId: number): NodeRecord {
  return {
    store,
    path,
    directory: true,
    deleted: false,
    tag: newTag(),
    prevTag: "",
    type: "",
    size: 0,
    md5: "",
    blob: "",
    inline: null,
    created: now,
    modified: now,
    eventId,
  };
}

// Parsed settings by their stored text, for the reads and writes of nodes (every one needs its
// store's keep-deleted): a pure function of the text, so never stale; frozen, as they are shared.
const parsedSettings = new Map<string, Readonly<Record<string, string>>>();

/** Workers: the writes waiting for this process's write turn, and what its checkpoints need. */
interface WriteTurnState {
  queue: Array<{ run: () => unknown; resolve(value: unknown): void; reject(err: unknown): void }>;
  /** The turn was asked for and not yet run. */
  asked: boolean;
  /** Writes since the last checkpoint. */
  commits: number;
  noWait: Database.Statement;
  wait: Database.Statement;
  checkpoint: Database.Statement;
}

/** Workers: a process checkpoints the WAL after this many of its writes, in its turn (SqliteStorage.checkpoint). */
const CHECKPOINT_EVERY = 250;

/** The peers' topic of committed changes: the key is the store's name. */
const PEER_TOPIC = "store";

/** Blob files older than this that nothing refers to are orphans. */
const ORPHAN_AGE = 3_600_000;
/** How often the purge also sweeps orphaned blob files (a walk of `blobs/`). */
const ORPHAN_SWEEP_INTERVAL = 3_600_000;

function toConfig(name: string, type: string, settings: string): StoreConfig {
  let parsed = parsedSettings.get(settings);
  if (parsed === undefined) {
    if (parsedSettings.size >= 1000) parsedSettings.clear();
    parsed = Object.freeze(JSON.parse(settings) as Record<string, string>);
    parsedSettings.set(settings, parsed);
  }
  return { name, type: type as StoreType, settings: parsed as Record<string, string> };
}

function toStore(row: StoreRow): StoreRecord {
  return {
    config: toConfig(row.name, row.type, row.settings),
    deleted: row.deleted === 1,
    lastEventId: row.last_event_id,
    purgedEventId: row.purged_event_id,
    created: row.created,
    modified: row.modified,
    rootTag: row.root_tag ?? "",
    historyFrom: 0,
  };
}

/** The contents a write replaced or removed: their blob file goes once nothing refers to it. */
interface Replaced {
  blob: string;
  /** The contents were inline: there is no file. */
  inlined: boolean;
}

export class SqliteStorage implements StoragePort {
  readonly backend = "sqlite";
  private readonly db: Database.Database;
  private readonly blobs: BlobFiles;
  /** Projects, environments, promotions and reports (sqlite-insights.ts). */
  readonly insights: SqliteInsights;
  private readonly dbFile: string;
  private readonly busyTimeout: number;
  private readonly synchronous: "normal" | "full";
  private readonly stmt;
  private readonly tx;
  private readonly listeners = new Set<(store: string) => void>();
  private readonly peers: { channel: PeerChannel; turns: WriteTurns; slot: number } | undefined;
  /** With peers: the writes waiting for this process's turn (`locked`), and the WAL's checkpoints. */
  private readonly turns: WriteTurnState | undefined;
  /** Stops listening to the peers' commits (close). */
  private unsubscribePeers: (() => void) | undefined;
  /** Date.now() from which the next purge also sweeps orphaned blob files. */
  private nextSweep = 0;
  private readonly dataDir: string;
  private readonly logger: StorageLogger;
  private readonly reserve: SpaceReserve;
  /** With maxDatabaseBytes: the cap in pages, and the part of it that writes other than deletes may use. */
  private readonly pageCap: { all: number; writes: number } | undefined;

  private constructor(options: SqliteStorageOptions) {
    const dir = resolve(options.dataDir);
    // Owner-only whatever the umask, and also for a directory made by an earlier version.
    makeDirectorySync(dir, OWNER_DIR);
    chmodSync(dir, OWNER_DIR);
    this.dataDir = dir;
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
    this.turns = this.peers && {
      queue: [],
      asked: false,
      commits: 0,
      noWait: this.db.prepare("PRAGMA busy_timeout = 0"),
      wait: this.db.prepare(`PRAGMA busy_timeout = ${this.busyTimeout}`),
      checkpoint: this.db.prepare("PRAGMA wal_checkpoint(RESTART)"),
    };
    this.synchronous = options.synchronous ?? "normal";
    this.db.pragma(`synchronous = ${this.synchronous === "full" ? "FULL" : "NORMAL"}`);
    this.db.exec(SCHEMA);
    if (options.maxDatabaseBytes !== undefined) {
      const pageSize = this.db.pragma("page_size", { simple: true }) as number;
      const all = Math.max(1, Math.floor(options.maxDatabaseBytes / pageSize));
      this.pageCap = { all, writes: Math.max(1, all - Math.ceil(reserveBytes / pageSize)) };
      this.db.pragma(`max_page_count = ${this.pageCap.writes}`);
    }
    this.blobs = new BlobFiles(dir, this.synchronous === "full", this.peers?.slot);
    const writes: SqliteWrites = { write: (run) => this.write(run), free: (run) => this.free(run) };
    this.insights = new SqliteInsights(this.db, this.blobs, writes, this.logger);
    const db = this.db;
    const storeColumns = `s.*, (SELECT tag FROM nodes WHERE store = s.name AND path = '') AS root_tag`;
    this.stmt = {
      getStore: db.prepare<[string], StoreRow>(`SELECT ${storeColumns} FROM stores s WHERE name = ?`),
      listStores: db.prepare<[], StoreRow>(`SELECT ${storeColumns} FROM stores s WHERE deleted = 0 ORDER BY name`),
      insertStore: db.prepare(
        "INSERT INTO stores (name, type, settings, created, modified) VALUES (@name, @type, @settings, @now, @now)",
      ),
      reviveStore: db.prepare(
        "UPDATE stores SET type = @type, settings = @settings, deleted = 0, purged_event_id = last_event_id, created = @now, modified = @now WHERE name = @name",
      ),
      updateStore: db.prepare(
        "UPDATE stores SET type = @type, settings = @settings, modified = @now WHERE name = @name AND deleted = 0",
      ),
      buryStore: db.prepare(
        // Deleting a store is an event of its own: every cursor taken before it is stale (RESET).
        "UPDATE stores SET deleted = 1, modified = @now, last_event_id = last_event_id + 1, purged_event_id = last_event_id + 1 WHERE name = @name",
      ),
      nextEventId: db
        .prepare<[number, string], number>(
          "UPDATE stores SET last_event_id = last_event_id + ? WHERE name = ? AND deleted = 0 RETURNING last_event_id",
        )
        .pluck(true),
      getNode: db.prepare<[string, string], NodeRow>("SELECT * FROM nodes WHERE store = ? AND path = ?"),
      // Store and node in one statement, one read transaction (raw: type, settings, then rawNode's columns).
      storeNode: db
        .prepare<[string, string], unknown[]>(
          `${STORE_NODE_KEY} SELECT s.type, s.settings, ${NODE_COLUMNS}, n.inline, ${NODE_TIMES} ${STORE_NODE_FROM}`,
        )
        .raw(true),
      storeNodeMetadata: db
        .prepare<[string, string], unknown[]>(
          `${STORE_NODE_KEY} SELECT s.type, s.settings, ${NODE_COLUMNS}, NULL, ${NODE_TIMES} ${STORE_NODE_FROM}`,
        )
        .raw(true),
      // A node without its contents, but with whether it has inline ones (rawNode's columns).
      nodeMetadata: db
        .prepare<[string, string], unknown[]>(
          `SELECT ${NODE_COLUMNS}, n.inline IS NOT NULL, ${NODE_TIMES} FROM nodes n WHERE n.store = ? AND n.path = ?`,
        )
        .raw(true),
      inlineOf: db
        .prepare<[string, string, string], unknown[]>(
          "SELECT inline FROM nodes WHERE store = ? AND path = ? AND blob = ?",
        )
        .raw(true),
      liveStoreConfig: db
        .prepare<[string], unknown[]>("SELECT type, settings FROM stores WHERE name = ? AND deleted = 0")
        .raw(true),
      // Positional parameters (upsertParams): binding fifteen by name costs more than the rest.
      upsertNode: db.prepare<unknown[]>(
        `INSERT INTO nodes (store, path, parent, directory, deleted, tag, prev_tag, type, size, md5, blob, inline, created, modified, event_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (store, path) DO UPDATE SET directory = excluded.directory, deleted = excluded.deleted, tag = excluded.tag,
           prev_tag = excluded.prev_tag, type = excluded.type, size = excluded.size, md5 = excluded.md5, blob = excluded.blob,
           inline = excluded.inline, created = excluded.created, modified = excluded.modified, event_id = excluded.event_id`,
      ),
      retag: db.prepare(
        "UPDATE nodes SET prev_tag = tag, tag = @tag, event_id = @eventId WHERE store = @store AND path = @path",
      ),
      // Listings: raw rows of the path then rawNode's columns, without the contents.
      children: db
        .prepare<[string, string, string, number], unknown[]>(
          `SELECT ${LISTED_RAW} FROM nodes n WHERE n.store = ? AND n.parent = ? AND n.path > ? ORDER BY n.path LIMIT ?`,
        )
        .raw(true),
      descendants: db
        .prepare<[string, string, string, number], unknown[]>(
          `SELECT ${LISTED_RAW} FROM nodes n WHERE n.store = ? AND n.path > ? AND n.path < ? ORDER BY n.path LIMIT ?`,
        )
        .raw(true),
      // Below the root: every path but "". No upper bound: descendantRange's U+10FFFF would leave out names starting with it.
      belowRoot: db
        .prepare<[string, string, number], unknown[]>(
          `SELECT ${LISTED_RAW} FROM nodes n WHERE n.store = ? AND n.path > ? ORDER BY n.path LIMIT ?`,
        )
        .raw(true),
      liveSubtree: db.prepare<[string, string, string, string], NodeRow>(
        "SELECT * FROM nodes WHERE store = ? AND (path = ? OR (path >= ? AND path < ?)) AND deleted = 0 ORDER BY path",
      ),
      deleteStoreNodes: db.prepare<[string], { blob: string; inline: Buffer | null }>(
        "DELETE FROM nodes WHERE store = ? RETURNING blob, inline",
      ),
      expiredTombstones: db.prepare<[string, number], { path: string; event_id: number }>(
        "SELECT path, event_id FROM nodes WHERE deleted = 1 AND store = ? AND modified <= ? ORDER BY modified LIMIT 1000",
      ),
      deleteNode: db.prepare("DELETE FROM nodes WHERE store = ? AND path = ? AND deleted = 1 AND event_id = ?"),
      raisePurged: db.prepare("UPDATE stores SET purged_event_id = MAX(purged_event_id, ?) WHERE name = ?"),
      changesSince: db.prepare<[string, number, number], NodeRow>(
        `SELECT store, path, directory, deleted, tag, prev_tag, type, size, md5, blob, NULL AS inline, created, modified, event_id
         FROM nodes WHERE store = ? AND event_id > ? ORDER BY event_id LIMIT ?`,
      ),
      blobInUse: db.prepare<[string], { n: number }>("SELECT 1 AS n FROM nodes WHERE blob = ? LIMIT 1"),
      blobFiles: db.prepare<[], string>("SELECT blob FROM nodes WHERE inline IS NULL AND blob != ''").pluck(),
    };
    // Made once: db.transaction() builds four wrapper functions on every call.
    this.tx = {
      createStore: db.transaction((config: StoreConfig, now: number) => this.createStoreTx(config, now)).immediate,
      deleteStore: db.transaction((name: string, now: number) => this.deleteStoreTx(name, now)).immediate,
      putFile: db.transaction(
        (store: string, path: string, blob: BlobInfo, type: string, pre: Preconditions, now: number) =>
          this.putFileTx(store, path, blob, type, pre, now),
      ).immediate,
      makeDirectory: db.transaction((store: string, path: string, pre: Preconditions, now: number) =>
        this.makeDirectoryTx(store, path, pre, now),
      ).immediate,
      deleteTree: db.transaction((store: string, path: string, pre: Preconditions, now: number) =>
        this.deleteTreeTx(store, path, pre, now),
      ).immediate,
      purge: db.transaction((store: string, rows: ReadonlyArray<{ path: string; event_id: number }>) => {
        let removed = 0;
        for (const r of rows) {
          if (this.stmt.deleteNode.run(store, r.path, r.event_id).changes > 0) {
            this.stmt.raisePurged.run(r.event_id, store);
            removed += 1;
          }
        }
        return removed;
      }),
    };
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
    return this.stmt.listStores.all().map(toStore);
  }

  async getStore(name: string): Promise<StoreRecord | undefined> {
    const row = this.stmt.getStore.get(name);
    return row && toStore(row);
  }

  async createStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    await this.write(() => this.tx.createStore(config, now));
    this.changed(config.name);
    this.reserve.restore();
    return this.mustGetStore(config.name);
  }

  private createStoreTx(config: StoreConfig, now: number): void {
    const existing = this.stmt.getStore.get(config.name);
    planCreateStore(existing && { deleted: existing.deleted === 1 }, config.name);
    const params = { name: config.name, type: config.type, settings: JSON.stringify(config.settings), now };
    if (existing) this.stmt.reviveStore.run(params);
    else this.stmt.insertStore.run(params);
    const eventId = this.allocate(config.name, 1);
    this.stmt.upsertNode.run(upsertParams(newDirectory(config.name, "", now, eventId)));
  }

  async updateStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    const params = { name: config.name, type: config.type, settings: JSON.stringify(config.settings), now };
    if ((await this.write(() => this.stmt.updateStore.run(params))).changes === 0)
      throw new NotFoundError(`store ${config.name} not found`);
    this.changed(config.name);
    return this.mustGetStore(config.name);
  }

  async deleteStore(name: string, now: number): Promise<StoreRecord> {
    const removed = await this.free(() => this.tx.deleteStore(name, now));
    this.changed(name);
    await this.removeBlobs(removed.map((r) => ({ blob: r.blob, inlined: r.inline !== null })));
    return this.mustGetStore(name);
  }

  private deleteStoreTx(name: string, now: number): Array<{ blob: string; inline: Buffer | null }> {
    const existing = this.stmt.getStore.get(name);
    if (!existing || existing.deleted === 1) throw new NotFoundError(`store ${name} not found`);
    this.stmt.buryStore.run({ name, now });
    return this.stmt.deleteStoreNodes.all(name);
  }

  async getNode(store: string, path: string): Promise<NodeRecord | undefined> {
    const row = this.stmt.getNode.get(store, path);
    return row && toNode(row);
  }

  async getStoreNode(store: string, path: string, options: GetStoreNodeOptions): Promise<StoreNode | undefined> {
    const row = (options.contents ? this.stmt.storeNode : this.stmt.storeNodeMetadata).get(path, store);
    if (!row) return undefined;
    const config = toConfig(store, row[0] as string, row[1] as string);
    // tag is NOT NULL: null means the LEFT JOIN found no node.
    return { config, node: row[4] === null ? undefined : rawNode(store, path, row, 2) };
  }

  listNodes(store: string, dir: string, options: ListOptions): AsyncIterable<NodeRecord[]> {
    const { low, high } = descendantRange(dir);
    const page = (after: string, limit: number) =>
      (!options.recursive
        ? this.stmt.children.all(store, dir, after, limit)
        : dir === ""
          ? this.stmt.belowRoot.all(store, after, limit)
          : this.stmt.descendants.all(store, after, high, limit)
      ).map((r) => rawNode(store, r[0] as string, r, 1));
    return keysetPages(page, options.recursive ? low : "", options);
  }

  async putFile(
    store: string,
    path: string,
    blob: BlobInfo,
    type: string,
    pre: Preconditions,
    now: number,
  ): Promise<WriteResult> {
    let outcome: ReturnType<typeof this.tx.putFile>;
    try {
      outcome = await this.write(() => this.tx.putFile(store, path, blob, type, pre, now));
    } catch (err) {
      // The transaction rolled back: the blob is ours to discard (port.ts), unless a node refers
      // to it all the same, which only a commit that reported failure could have done.
      await this.discardUnreferenced(blob);
      throw err;
    }
    // Committed: from here on, nothing fails the call (removeBlobs logs what it cannot remove).
    this.changed(store);
    await this.removeBlobs(outcome.replaced ? [outcome.replaced] : []);
    return outcome.result;
  }

  private putFileTx(
    store: string,
    path: string,
    blob: BlobInfo,
    type: string,
    pre: Preconditions,
    now: number,
  ): { result: WriteResult; replaced: Replaced | undefined } {
    const config = this.liveStore(store);
    refuseOutsideFolder(config, pre);
    const target = this.currentMetadata(store, path, config, now);
    const parent = this.currentMetadata(store, parentOf(path) ?? "", config, now);
    const { created } = planPutFile(path, target?.node, parent?.node, pre.ifMatch);
    const eventId = this.allocate(store, 1 + this.ancestorCount(config, path));
    // The stored row, as getNode would read it back.
    const node: NodeRecord = {
      store,
      path,
      directory: false,
      deleted: false,
      tag: newTag(),
      prevTag: target && !target.node.deleted ? target.node.tag : "",
      type,
      size: blob.size,
      md5: blob.md5,
      blob: blob.blob,
      inline: blob.inline,
      created: created ? now : (target?.node.created ?? now),
      modified: now,
      eventId,
    };
    this.stmt.upsertNode.run(upsertParams(node));
    this.retagAncestors(config, path, eventId + 1);
    const replaced = target && { blob: target.node.blob, inlined: target.inlined };
    return { result: { node, created }, replaced };
  }

  async makeDirectory(store: string, path: string, pre: Preconditions, now: number): Promise<WriteResult> {
    const result = await this.write(() => this.tx.makeDirectory(store, path, pre, now));
    if (result.created) this.changed(store);
    this.reserve.restore();
    return result;
  }

  private makeDirectoryTx(store: string, path: string, pre: Preconditions, now: number): WriteResult {
    const config = this.liveStore(store);
    const target = this.currentMetadata(store, path, config, now)?.node;
    const parent = path === "" ? undefined : this.currentMetadata(store, parentOf(path) ?? "", config, now)?.node;
    const { created } = planMakeDirectory(path, target, parent, pre.ifMatch);
    if (created) {
      const eventId = this.allocate(store, 1 + this.ancestorCount(config, path));
      this.stmt.upsertNode.run(upsertParams(newDirectory(store, path, now, eventId)));
      this.retagAncestors(config, path, eventId + 1);
    }
    return { node: this.mustGetNode(store, path), created };
  }

  async deleteTree(store: string, path: string, pre: Preconditions, now: number): Promise<DeleteResult> {
    const { result, removed } = await this.free(() => this.tx.deleteTree(store, path, pre, now));
    this.changed(store);
    await this.removeBlobs(removed.map((r) => ({ blob: r.blob, inlined: r.inline !== null })));
    return result;
  }

  private deleteTreeTx(
    store: string,
    path: string,
    pre: Preconditions,
    now: number,
  ): { result: DeleteResult; removed: NodeRow[] } {
    const config = this.liveStore(store);
    const target = this.currentMetadata(store, path, config, now)?.node;
    planDelete(path, target, pre.ifMatch);
    const { low, high } = descendantRange(path);
    // The node itself sorts first ("a" < "a/..."); its delete event comes after those of its contents.
    const doomed = target?.directory
      ? this.stmt.liveSubtree.all(store, path, low, high)
      : [this.stmt.getNode.get(store, path)];
    const ordered = [...doomed.slice(1), doomed[0]].filter((r): r is NodeRow => r !== undefined);
    let eventId = this.allocate(store, ordered.length + this.ancestorCount(config, path)) - 1;
    for (const row of ordered) {
      eventId += 1;
      this.stmt.upsertNode.run(
        upsertParams({
          ...toNode(row),
          deleted: true,
          tag: newTag(),
          prevTag: row.tag,
          blob: "",
          inline: null,
          modified: now,
          eventId,
        }),
      );
    }
    this.retagAncestors(config, path, eventId + 1);
    return { result: { node: this.mustGetNode(store, path), count: ordered.length }, removed: ordered };
  }

  writeBlob(source: AsyncIterable<Uint8Array>, options: WriteBlobOptions): Promise<BlobInfo> {
    return this.blobs.write(source, options);
  }

  async *readBlob(node: NodeRecord): AsyncIterable<Uint8Array> {
    if (node.inline) {
      yield node.inline;
      return;
    }
    if (node.size === 0) return;
    // Read without its contents (getStoreNode): they may be inline all the same. The blob UUID
    // names this version of the contents; when the node has changed since, the file is gone too.
    const inline = this.stmt.inlineOf.get(node.store, node.path, node.blob)?.[0];
    if (inline instanceof Uint8Array) {
      yield inline;
      return;
    }
    yield* this.blobs.read(node.blob, node.size);
  }

  async discardBlob(blob: BlobInfo): Promise<void> {
    if (blob.inline) return;
    try {
      await this.blobs.remove(blob.blob);
    } catch (err) {
      this.logger.warn({ err, blob: blob.blob }, "could not remove a discarded blob; the orphan sweep will");
    }
  }

  /** Discards a blob that putFile was given, unless a node refers to it; never throws. */
  private async discardUnreferenced(blob: BlobInfo): Promise<void> {
    if (blob.inline) return;
    try {
      if (this.stmt.blobInUse.get(blob.blob)) return;
    } catch (err) {
      this.logger.warn(
        { err, blob: blob.blob },
        "could not tell whether a blob is referenced; left to the orphan sweep",
      );
      return;
    }
    await this.discardBlob(blob);
  }

  async changesSince(store: string, afterEventId: number, limit: number): Promise<NodeRecord[]> {
    return this.stmt.changesSince.all(store, afterEventId, limit).map(toNode);
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

  /**
   * Runs a write in this process's turn at the write lock; errors as SQLite reports them. Alone
   * on the directory the lock is always free: the write runs at once. Workers (peers) ask their
   * primary for the turn and, once granted, run every write that queued meanwhile, each its own
   * transaction, then give the turn back: they wait in order and without blocking, where
   * SQLite's busy handler would sleep the whole event loop (1, 2, 5, 10 ... 100 ms at a time)
   * and let the luckiest worker win. SQLite's lock still guards each write.
   */
  private locked<T>(run: () => T): Promise<T> {
    const turns = this.turns;
    if (turns === undefined) {
      try {
        return Promise.resolve(run());
      } catch (err) {
        return Promise.reject(err);
      }
    }
    return new Promise<T>((resolve, reject) => {
      turns.queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
      if (turns.asked) return;
      turns.asked = true;
      this.peers?.turns.take(() => this.runTurn());
    });
  }

  /** This process holds the turn: its queued writes, a checkpoint when one is due, then the turn back. */
  private runTurn(): void {
    const turns = this.turns;
    if (!turns) return;
    try {
      for (let write = turns.queue.shift(); write; write = turns.queue.shift()) {
        try {
          write.resolve(write.run());
          turns.commits += 1;
        } catch (err) {
          write.reject(err);
        }
      }
      if (turns.commits >= CHECKPOINT_EVERY) this.checkpoint(turns);
    } finally {
      turns.asked = false;
      this.peers?.turns.release();
    }
  }

  /**
   * Workers: checkpoints the WAL into the database while this process holds the write turn
   * (RESTART), so that the copy completes and the next write starts the WAL from its beginning.
   * SQLite's automatic checkpoint (PASSIVE, after a commit; off for workers) lets the other
   * processes go on writing while it copies: under a steady load from two workers it never caught
   * up, the WAL grew without end (99 MB in 10 s of PUTs, measured) and every commit paid another
   * attempt. Without waiting (busy_timeout 0): a reader still on an older snapshot leaves some
   * frames to the next checkpoint. Never throws: the writes before it have committed.
   */
  private checkpoint(turns: WriteTurnState): void {
    turns.commits = 0;
    try {
      turns.noWait.get();
      try {
        turns.checkpoint.get();
      } finally {
        turns.wait.get();
      }
    } catch (err) {
      this.logger.warn({ err }, "a checkpoint of the WAL failed; the next one will try again");
    }
  }

  /** Runs a write; a full disk (or cap) becomes InsufficientStorageError. */
  private async write<T>(run: () => T): Promise<T> {
    try {
      return await this.locked(run);
    } catch (err) {
      throw databaseError(err, this.dataDir);
    }
  }

  /**
   * Runs a write that frees space (a delete, the purge): when the disk (or cap) is full, releases
   * the room kept for deletes and tries once more, so that space can be freed through the API.
   */
  private async free<T>(run: () => T): Promise<T> {
    try {
      return await this.locked(run);
    } catch (err) {
      if (!isDatabaseFull(err, this.dataDir) || !this.releaseReserve()) throw databaseError(err, this.dataDir);
    }
    try {
      return await this.write(run);
    } finally {
      // Clamped by SQLite to the current size: what the delete used stays usable, no more.
      if (this.pageCap) this.db.pragma(`max_page_count = ${this.pageCap.writes}`);
    }
  }

  /** Releases the reserve file and the reserved part of the cap; whether there was anything to release. */
  private releaseReserve(): boolean {
    let released = this.reserve.release();
    if (this.pageCap) {
      const current = this.db.pragma("max_page_count", { simple: true }) as number;
      if (current < this.pageCap.all) {
        this.db.pragma(`max_page_count = ${this.pageCap.all}`);
        released = true;
      }
    }
    return released;
  }

  // History (docs/history.md, storage/port.ts HistoryStorage): being built (issue 27).
  listVersions(_store: string, _path: string, _options: { batchSize?: number }): AsyncIterable<VersionRecord[]> {
    throw new Error("history is not implemented yet by this adapter");
  }
  async getVersion(_store: string, _path: string, _tag: string): Promise<VersionRecord | undefined> {
    throw new Error("history is not implemented yet by this adapter");
  }
  async getNodeAsOf(_store: string, _path: string, _eventId: number): Promise<VersionRecord | undefined> {
    throw new Error("history is not implemented yet by this adapter");
  }
  listNodesAsOf(_store: string, _dir: string, _eventId: number, _options: ListOptions): AsyncIterable<VersionRecord[]> {
    throw new Error("history is not implemented yet by this adapter");
  }
  async eventAt(_store: string, _time: number): Promise<number> {
    throw new Error("history is not implemented yet by this adapter");
  }
  async restoreVersion(
    _store: string,
    _path: string,
    _tag: string,
    _pre: Preconditions,
    _now: number,
    _user?: string,
  ): Promise<WriteResult> {
    throw new Error("history is not implemented yet by this adapter");
  }

  async purgeExpired(now: number): Promise<number> {
    let purged = 0;
    // Store by store: keep-deleted differs between stores, so the oldest tombstones of one
    // store must not hide the expired tombstones of another.
    for (const store of await this.listStores()) {
      // Same bound as isExpiredTombstone: modified + keep-deleted <= now.
      const cutoff = now - keepDeletedMillis(store.config);
      for (;;) {
        const rows = this.stmt.expiredTombstones.all(store.config.name, cutoff);
        const removed = await this.free(() => this.tx.purge(store.config.name, rows));
        purged += removed;
        if (rows.length < 1000 || removed === 0) break;
      }
    }
    if (Date.now() >= this.nextSweep) {
      this.nextSweep = Date.now() + ORPHAN_SWEEP_INTERVAL;
      await this.sweepOrphanBlobs();
    }
    purged += await this.insights.purgeExpired(now);
    this.reserve.restore();
    return purged;
  }

  /**
   * Removes the blob files over an hour old that no node and no report refers to: contents whose
   * metadata write never happened (the process died between the rename and the write). Nothing
   * will refer to such a file later: every write uploads a file of its own and refers to it
   * within seconds. One query for what is referenced, then one walk of `blobs/`.
   */
  private async sweepOrphanBlobs(): Promise<number> {
    const cutoff = Date.now() - ORPHAN_AGE;
    const referenced = new Set([...this.stmt.blobFiles.all(), ...this.insights.documentFiles()]);
    let removed = 0;
    for await (const file of this.blobs.files()) {
      if (file.modified >= cutoff || referenced.has(file.blob)) continue;
      try {
        await this.blobs.remove(file.blob);
        removed += 1;
      } catch (err) {
        this.logger.warn({ err, blob: file.blob }, "could not remove an orphaned blob");
      }
    }
    return removed;
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

  private mustGetStore(name: string): StoreRecord {
    const row = this.stmt.getStore.get(name);
    if (!row) throw new NotFoundError(`store ${name} not found`);
    return toStore(row);
  }

  private mustGetNode(store: string, path: string): NodeRecord {
    const row = this.stmt.getNode.get(store, path);
    if (!row) throw new NotFoundError(`/${path} not found`);
    return toNode(row);
  }

  private liveStore(name: string): StoreConfig {
    const row = this.stmt.liveStoreConfig.get(name);
    if (!row) throw new NotFoundError(`store ${name} not found`);
    return toConfig(name, row[0] as string, row[1] as string);
  }

  /**
   * The node at a path without its contents, with an expired tombstone treated as absent, and
   * whether its contents are inline (its blob then has no file to remove).
   */
  private currentMetadata(
    store: string,
    path: string,
    config: StoreConfig,
    now: number,
  ): { node: NodeRecord; inlined: boolean } | undefined {
    const row = this.stmt.nodeMetadata.get(store, path);
    if (!row) return undefined;
    const node = rawNode(store, path, row, 0);
    return isExpiredTombstone(node, config, now) ? undefined : { node, inlined: row[8] === 1 };
  }

  /** Reserves `count` event ids; returns the first. */
  private allocate(store: string, count: number): number {
    const last = this.stmt.nextEventId.get(count, store);
    if (last === undefined) throw new NotFoundError(`store ${store} not found`);
    return last - count + 1;
  }

  private ancestorCount(config: StoreConfig, path: string): number {
    return hasRecursiveTags(config.type) ? ancestorsOf(path).length : 0;
  }

  /** On sync-recursive stores, every ancestor directory gets a new tag (and an event). */
  private retagAncestors(config: StoreConfig, path: string, firstEventId: number): void {
    if (!hasRecursiveTags(config.type)) return;
    let eventId = firstEventId;
    for (const dir of ancestorsOf(path)) {
      this.stmt.retag.run({ store: config.name, path: dir, tag: newTag(), eventId });
      eventId += 1;
    }
  }

  /**
   * Removes the files of contents that a committed write replaced or deleted. Runs after the
   * commit, so it never throws: a file it cannot remove is logged and left to the orphan sweep.
   */
  private async removeBlobs(rows: readonly Replaced[]): Promise<void> {
    for (const { blob, inlined } of rows) {
      if (blob === "" || inlined) continue;
      try {
        if (!this.stmt.blobInUse.get(blob)) await this.blobs.remove(blob);
      } catch (err) {
        this.logger.warn({ err, blob }, "could not remove replaced contents; the orphan sweep will");
      }
    }
    // Space may have been freed: the moment to write the reserve again if it was used.
    this.reserve.restore();
  }
}
