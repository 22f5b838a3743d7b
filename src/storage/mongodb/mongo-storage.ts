// MongoDB backend: metadata in collections, contents in GridFS (the blob UUID
// is the GridFS _id), small contents inline. No multi-document transaction:
// writers of one store take its lease (mongo-store-lease.ts), write in event-id
// order, and publish a committed watermark that readers of the feed respect.
// Several stateless Trove instances can share one database (docs/mongodb.md).
// This class wires the parts, one job each: collections and indexes (mongo-collections.ts),
// reads (mongo-reads.ts), writes (mongo-writes.ts), history (mongo-history.ts), stores
// (mongo-stores.ts), contents (mongo-contents.ts), the purge and sweep (mongo-purge.ts), the
// store lock (mongo-write-lock.ts).

import type { Db, MongoClient } from "mongodb";
import { UnavailableError } from "../../domain/errors.js";
import type { StoreConfig } from "../../domain/store.js";
import type {
  BlobInfo,
  DeleteResult,
  EndedVersionsOptions,
  GetStoreNodeOptions,
  ListOptions,
  NodeRecord,
  PeerChannel,
  Preconditions,
  ReportRecord,
  RestoreTarget,
  SnapshotHold,
  StorageLogger,
  StoragePort,
  StoreNode,
  StoreRecord,
  VersionRecord,
  WriteBlobOptions,
  WriteResult,
} from "../port.js";
import { PING_TIMEOUT_MS, silentStorageLogger } from "../port.js";
import { connectionUser, redactConnectionUrl } from "./connection-url.js";
import {
  ensureNodeIndexes,
  ensureVersionIndexes,
  type MongoCollections,
  openCollections,
} from "./mongo-collections.js";
import { type MongoConnection, openMongoConnection } from "./mongo-connection.js";
import { MongoContents } from "./mongo-contents.js";
import { guard, guardMethods } from "./mongo-driver.js";
import { MongoHistory } from "./mongo-history.js";
import { MongoInsights } from "./mongo-insights.js";
import { MongoPurge } from "./mongo-purge.js";
import { MongoReads } from "./mongo-reads.js";
import { MongoRestore } from "./mongo-restore.js";
import { MongoScanLease } from "./mongo-scan-lease.js";
import { MongoSnapshots } from "./mongo-snapshot.js";
import { StoreLeases } from "./mongo-store-lease.js";
import { MongoStores } from "./mongo-stores.js";
import { StoreWriteLock } from "./mongo-write-lock.js";
import { MongoWrites } from "./mongo-writes.js";

/** The peers' topic of committed changes, as the embedded store's: the key is the store's name. */
const PEER_TOPIC = "store";

export interface MongoStorageOptions {
  /** mongodb://… connection string. */
  url: string;
  /** Database name (default "trove"). */
  database?: string;
  /** How long a writer may hold a store's lease before another may take it, in ms. */
  lease?: number;
  /** How long a writer waits for a store's lease before giving up, in ms. */
  lockTimeout?: number;
  /** How often other instances' changes are looked for, in ms (the floor of cross-instance wake-ups). */
  watchInterval?: number;
  /** How long the driver looks for a server before an operation fails, in ms. */
  serverSelectionTimeout?: number;
  /** Where failures that were recovered from are reported (default: nowhere). */
  logger?: StorageLogger;
  /**
   * Turns the driver's command monitoring on and is given the client once connected, to listen
   * to its commandStarted / commandSucceeded / commandFailed events: for tests that count round
   * trips (test/mongodb/round-trips.test.ts).
   */
  monitorCommands?: (client: MongoClient) => void;
  /**
   * The other workers of `trove serve --workers` on this database: each commit is told to them at
   * once, and theirs to this one's listeners, where the watch would find them within
   * `watchInterval`. Other instances are still found by the watch.
   */
  peers?: PeerChannel;
}

/**
 * Whether the server answers a filter on anything but _id by reading the whole collection:
 * FerretDB v1 (its SQLite backend pushes down only _id), which says so in buildInfo.
 */
async function scansQueries(db: Db): Promise<boolean> {
  const info = await db.command({ buildInfo: 1 }).catch(() => ({}));
  return typeof (info as { ferretdbVersion?: unknown }).ferretdbVersion === "string";
}

/**
 * A store's write lease, in ms: how long the other instances wait for a holder that died. Held
 * only while one write runs (and renewed every third of it by long ones), so it can be short.
 */
export const DEFAULT_LEASE = 5000;

export class MongoStorage implements StoragePort {
  readonly backend = "mongodb";
  private readonly c: MongoCollections;
  /** Projects, environments, promotions and reports (mongo-insights.ts). */
  readonly insights: MongoInsights;
  /** The stores' write leases (mongo-store-lease.ts). */
  private readonly leases: StoreLeases;
  private readonly reads: MongoReads;
  private readonly writes: MongoWrites;
  private readonly storeWrites: MongoStores;
  private readonly contents: MongoContents;
  private readonly history: MongoHistory;
  private readonly purge: MongoPurge;
  private readonly snapshots: MongoSnapshots;
  private readonly restores: MongoRestore;
  private readonly listeners = new Set<(store: string) => void>();
  private readonly seen = new Map<string, number>();
  private watchTimer: NodeJS.Timeout | undefined;
  /** Whether the deployment enforces the TTL index (MongoDB does; FerretDB does not). */
  ttlIndex = false;
  private readonly lockTimeout: number;
  private readonly log: StorageLogger;
  /** Stops listening to the other workers' commits (close). */
  private unsubscribePeers: (() => void) | undefined;

  private constructor(
    /** The client, repaired and watched (mongo-connection.ts). */
    private readonly connection: MongoConnection,
    private readonly db: Db,
    private readonly options: MongoStorageOptions,
  ) {
    this.c = openCollections(db);
    this.log = options.logger ?? silentStorageLogger;
    this.insights = guardMethods(new MongoInsights(db, this.c.bucket, this.log));
    this.lockTimeout = options.lockTimeout ?? 10_000;
    this.leases = new StoreLeases(db, { lease: options.lease ?? DEFAULT_LEASE, lockTimeout: this.lockTimeout });
    const lock = new StoreWriteLock(this.leases, this.log);
    const committed = (store: string) => this.committed(store);
    this.reads = new MongoReads(this.c);
    this.contents = new MongoContents(this.c, this.log);
    this.writes = new MongoWrites(this.c, lock, this.contents, committed);
    this.storeWrites = new MongoStores(this.c, lock, this.contents, this.log, committed);
    this.history = new MongoHistory(this.c, lock, this.writes, this.contents, committed);
    this.purge = new MongoPurge(this.c, lock, this.leases, this.insights, this.contents);
    this.snapshots = new MongoSnapshots(this.c, lock);
    this.restores = new MongoRestore(this.c);
    guardMethods(this);
  }

  static async open(options: MongoStorageOptions): Promise<MongoStorage> {
    const connection = await openMongoConnection({
      url: options.url,
      serverSelectionTimeout: options.serverSelectionTimeout,
      logger: options.logger,
      clientOptions: options.monitorCommands ? { monitorCommands: true } : undefined,
    });
    options.monitorCommands?.(connection.client);
    const storage = new MongoStorage(connection, connection.client.db(options.database ?? "trove"), options);
    try {
      await storage.ensureIndexes();
    } catch (err) {
      await connection.close().catch(() => {});
      throw err;
    }
    storage.startWatching();
    storage.unsubscribePeers = options.peers?.subscribe(PEER_TOPIC, (store) => storage.changed(store));
    return storage;
  }

  private get client(): MongoClient {
    return this.connection.client;
  }

  /** Creates the indexes every query needs; idempotent, run at each start-up. */
  private async ensureIndexes(): Promise<void> {
    await guard(async () => {
      const { ttlIndex, partial } = await ensureNodeIndexes(this.c);
      this.ttlIndex = ttlIndex;
      await ensureVersionIndexes(this.c, partial);
      this.history.scansQueries = await scansQueries(this.db);
      await this.insights.ensureIndexes(this.ttlIndex, partial);
      await this.leases.ensureIndexes();
      await this.purge.ensureIndexes();
    });
  }

  reportedSettings(): Record<string, string> {
    const user = connectionUser(this.options.url);
    const settings: Record<string, string> = {
      "filesystem-location": `gridfs:${this.db.databaseName}/blobs`,
      "database-driver": "mongodb",
      "database-dialect": "mongodb",
      // Redacted here, at the source: the settings are shown to clients and may be logged.
      "database-connection-url": redactConnectionUrl(this.options.url),
      "database-lock-timeout": String(this.lockTimeout),
      "database-transaction-retries": "0",
      "database-connection-pool-size": String(this.client.options.maxPoolSize),
    };
    if (user?.username) settings["database-username"] = user.username;
    if (user?.hasPassword) settings["database-password"] = "set";
    return settings;
  }

  // Stores (mongo-stores.ts; read by mongo-reads.ts).

  listStores(): Promise<StoreRecord[]> {
    return this.reads.listStores();
  }

  getStore(name: string): Promise<StoreRecord | undefined> {
    return this.reads.getStore(name);
  }

  createStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    return this.storeWrites.createStore(config, now);
  }

  updateStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    return this.storeWrites.updateStore(config, now);
  }

  deleteStore(name: string, now: number): Promise<StoreRecord> {
    return this.storeWrites.deleteStore(name, now);
  }

  // Nodes (mongo-reads.ts, mongo-writes.ts).

  getNode(store: string, path: string): Promise<NodeRecord | undefined> {
    return this.reads.getNode(store, path);
  }

  getStoreNode(store: string, path: string, options: GetStoreNodeOptions): Promise<StoreNode | undefined> {
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

  makeDirectory(store: string, path: string, pre: Preconditions, now: number, user?: string): Promise<WriteResult> {
    return this.writes.makeDirectory(store, path, pre, now, user);
  }

  deleteTree(store: string, path: string, pre: Preconditions, now: number, user?: string): Promise<DeleteResult> {
    return this.writes.deleteTree(store, path, pre, now, user);
  }

  // Contents (mongo-contents.ts).

  writeBlob(source: AsyncIterable<Uint8Array>, options: WriteBlobOptions): Promise<BlobInfo> {
    return this.contents.writeBlob(source, options);
  }

  readBlob(node: NodeRecord): AsyncIterable<Uint8Array> {
    return this.contents.readBlob(node);
  }

  discardBlob(blob: BlobInfo): Promise<void> {
    return this.contents.discardBlob(blob);
  }

  // The change feed.

  changesSince(store: string, afterEventId: number, limit: number): Promise<NodeRecord[]> {
    return this.reads.changesSince(store, afterEventId, limit);
  }

  onChange(listener: (store: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  // History (mongo-history.ts; docs/history.md).

  listVersions(store: string, path: string, options: { batchSize?: number }): AsyncIterable<VersionRecord[]> {
    return this.history.listVersions(store, path, options);
  }

  getVersion(store: string, path: string, tag: string): Promise<VersionRecord | undefined> {
    return this.history.getVersion(store, path, tag);
  }

  getNodeAsOf(store: string, path: string, eventId: number): Promise<VersionRecord | undefined> {
    return this.history.getNodeAsOf(store, path, eventId);
  }

  listNodesAsOf(store: string, dir: string, eventId: number, options: ListOptions): AsyncIterable<VersionRecord[]> {
    return this.history.listNodesAsOf(store, dir, eventId, options);
  }

  eventAt(store: string, time: number): Promise<number> {
    return this.history.eventAt(store, time);
  }

  // Backups (docs/backup.md): mongo-snapshot.ts.
  holdSnapshot(store: string): Promise<SnapshotHold | undefined> {
    return this.snapshots.hold(store);
  }

  listEndedVersions(store: string, upTo: number, options: EndedVersionsOptions): AsyncIterable<VersionRecord[]> {
    return this.snapshots.listEnded(store, upTo, options);
  }

  // Restores (docs/backup.md): mongo-restore.ts.
  restoreTarget(): Promise<RestoreTarget> {
    return this.restores.target();
  }

  async beginRestore(archive: string): Promise<void> {
    if (await this.restores.begin(archive)) this.contents.resumeRestore();
  }

  finishRestore(): Promise<void> {
    return this.restores.finish();
  }

  importStore(store: StoreRecord): Promise<void> {
    return this.restores.store(store);
  }

  importNodes(store: string, nodes: readonly NodeRecord[]): Promise<void> {
    return this.restores.nodes(store, nodes);
  }

  importVersions(store: string, versions: readonly VersionRecord[]): Promise<void> {
    return this.restores.versions(store, versions);
  }

  importReport(report: ReportRecord): Promise<void> {
    return this.insights.importReport(report);
  }

  restoreVersion(
    store: string,
    path: string,
    tag: string,
    pre: Preconditions,
    now: number,
    user?: string,
  ): Promise<WriteResult> {
    return this.history.restoreVersion(store, path, tag, pre, now, user);
  }

  // The purge (mongo-purge.ts).

  purgeExpired(now: number): Promise<number> {
    return this.purge.purgeExpired(now);
  }

  async ping(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new UnavailableError(`MongoDB unavailable: no answer to a ping within ${PING_TIMEOUT_MS} ms`)),
        PING_TIMEOUT_MS,
      );
    });
    try {
      await Promise.race([guard(() => this.db.command({ ping: 1 })), late]);
    } catch (err) {
      throw err instanceof UnavailableError
        ? err
        : new UnavailableError(`MongoDB unavailable: ${(err as Error).message}`);
    } finally {
      clearTimeout(timer);
    }
  }

  /** The scan lease of filesystem stores served by several instances on this database (mongo-scan-lease.ts). */
  scanLease(duration?: number): MongoScanLease {
    return new MongoScanLease(this.db, { duration, logger: this.log });
  }

  async close(): Promise<void> {
    this.unsubscribePeers?.();
    if (this.watchTimer) clearInterval(this.watchTimer);
    await this.connection.close();
  }

  get databaseName(): string {
    return this.db.databaseName;
  }

  /** Drops the whole database: for tests. */
  async dropDatabase(): Promise<void> {
    await this.db.dropDatabase();
  }

  /** A commit of this process changed `store`: its listeners, and the other workers'. */
  private committed(store: string): void {
    this.changed(store);
    this.options.peers?.publish(PEER_TOPIC, store);
  }

  private changed(store: string): void {
    for (const listener of this.listeners) listener(store);
  }

  /** Looks for other instances' commits: the floor of cross-instance wake-ups (change streams need a replica set). */
  private startWatching(): void {
    const interval = this.options.watchInterval ?? 250;
    let busy = false;
    this.watchTimer = setInterval(async () => {
      if (busy || this.listeners.size === 0) return;
      busy = true;
      try {
        const docs = await this.c.stores.find({}, { projection: { committedEventId: 1 } }).toArray();
        for (const d of docs) {
          const before = this.seen.get(d._id);
          this.seen.set(d._id, d.committedEventId);
          if (before !== undefined && before !== d.committedEventId) this.changed(d._id);
        }
      } catch {
        // Unreachable for now: requests report it; the watch retries next tick.
      } finally {
        busy = false;
      }
    }, interval);
    this.watchTimer.unref();
  }
}
