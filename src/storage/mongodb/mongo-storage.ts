// MongoDB backend: metadata in collections, contents in GridFS (the blob UUID
// is the GridFS _id), small contents inline. No multi-document transaction:
// writers of one store take its lease (mongo-store-lease.ts), write in event-id
// order, and publish a committed watermark that readers of the feed respect.
// Several stateless Trove instances can share one database (docs/mongodb.md).

import { createHash, randomUUID } from "node:crypto";
import {
  type AnyBulkWriteOperation,
  type Collection,
  type Db,
  GridFSBucket,
  type MongoClient,
  MongoError,
} from "mongodb";
import { AlreadyExistsError, NotFoundError, TooLargeError, UnavailableError } from "../../domain/errors.js";
import { newTag } from "../../domain/etag.js";
import { ancestorsOf, descendantRange, parentOf } from "../../domain/path.js";
import { isExpiredTombstone, planDelete, planMakeDirectory, planPutFile } from "../../domain/rules.js";
import { hasRecursiveTags, keepDeletedMillis, type StoreConfig, type StoreType } from "../../domain/store.js";
import { keysetPages } from "../keyset-pages.js";
import { INLINE_MAX } from "../local/blob-files.js";
import type {
  BlobInfo,
  DeleteResult,
  GetStoreNodeOptions,
  ListOptions,
  NodeRecord,
  PeerChannel,
  Preconditions,
  StorageLogger,
  StoragePort,
  StoreNode,
  StoreRecord,
  VersionRecord,
  WriteBlobOptions,
  WriteResult,
} from "../port.js";
import { PING_TIMEOUT_MS, refuseOutsideFolder, silentStorageLogger } from "../port.js";
import { connectionUser, redactConnectionUrl } from "./connection-url.js";
import { BlobSweep } from "./mongo-blob-sweep.js";
import { type MongoConnection, openMongoConnection } from "./mongo-connection.js";
import { binaryBytes, domainError, guard, guardMethods, readGridFS, removeGridFS } from "./mongo-driver.js";
import { MongoInsights } from "./mongo-insights.js";
import { MongoScanLease } from "./mongo-scan-lease.js";
import { type LeaseFields, type StoreLease, StoreLeases } from "./mongo-store-lease.js";

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
 * One per store, never removed (a deleted store keeps its event ids). On FerretDB an update
 * rewrites the whole document, so concurrent updates of one store document can undo each other:
 * every update of it is made under the store's lease, filtered on the lease's fence.
 */
interface StoreDoc extends LeaseFields {
  type: string;
  settings: Record<string, string>;
  deleted: boolean;
  purgedEventId: number;
  created: number;
  modified: number;
}

/**
 * A node's _id is "{store}/{path}" (store names contain no "/"): lookups by _id
 * are fast on every MongoDB-compatible server, FerretDB included.
 */
export function nodeKey(store: string, path: string): string {
  return `${store}/${path}`;
}

interface NodeDoc {
  _id?: string;
  store: string;
  path: string;
  parent: string | null;
  directory: boolean;
  deleted: boolean;
  tag: string;
  prevTag: string;
  type: string;
  size: number;
  md5: string;
  blob: string;
  inline: Uint8Array | null;
  created: number;
  modified: number;
  eventId: number;
  /** Tombstones only: when the TTL index may remove the document (a backstop behind the purge). */
  expireAt?: Date;
}

/** Contents go to GridFS exactly when they are larger than INLINE_MAX (writeBlob decides by size). */
function inGridFS(n: { blob: string; directory: boolean; deleted: boolean; size: number }): boolean {
  return !n.directory && !n.deleted && n.blob !== "" && n.size > INLINE_MAX;
}

/** The TTL index removes a tombstone this long after the purge should have: the purge raises purgedEventId first. */
const TTL_GRACE = 24 * 3_600_000;

/**
 * A store's write lease, in ms: how long the other instances wait for a holder that died. Held
 * only while one write runs (and renewed every third of it by long ones), so it can be short.
 */
export const DEFAULT_LEASE = 5000;

/** Nodes removed per deleteMany when a store goes: the lease is renewed between batches. */
const REMOVE_BATCH = 5000;

/** GridFS files older than this that nothing refers to are orphans (mongo-blob-sweep.ts). */
const ORPHAN_AGE = 3_600_000;
/** How often the purge of one instance also sweeps orphaned GridFS files. */
const SWEEP_INTERVAL = 10 * 60_000;

/** What a read of one path needs of its store's document. */
const STORE_CONFIG = { type: 1, settings: 1, deleted: 1 } as const;

/** Where an index may leave out a node: only contents in GridFS can be orphaned. */
const IN_GRIDFS = { size: { $gt: INLINE_MAX } };

/** Nodes read by path; null where there is none. */
type NodeReads = Map<string, NodeDoc | null>;

function toNode(d: NodeDoc): NodeRecord {
  return {
    store: d.store,
    path: d.path,
    directory: d.directory,
    deleted: d.deleted,
    tag: d.tag,
    prevTag: d.prevTag,
    type: d.type,
    size: d.size,
    md5: d.md5,
    blob: d.blob,
    inline: binaryBytes(d.inline),
    created: d.created,
    modified: d.modified,
    eventId: d.eventId,
  };
}

export class MongoStorage implements StoragePort {
  readonly backend = "mongodb";
  private readonly stores: Collection<StoreDoc>;
  private readonly nodes: Collection<NodeDoc>;
  private readonly bucket: GridFSBucket;
  /** Projects, environments, promotions and reports (mongo-insights.ts). */
  readonly insights: MongoInsights;
  /** The stores' write leases (mongo-store-lease.ts). */
  private readonly leases: StoreLeases;
  private readonly blobSweep: BlobSweep;
  /** Date.now() from which the next purge also sweeps orphaned GridFS files. */
  private nextSweep = 0;
  private readonly listeners = new Set<(store: string) => void>();
  private readonly localLocks = new Map<string, Promise<void>>();
  private readonly seen = new Map<string, number>();
  /**
   * Each store's type as its document last said under a lease taken here: which nodes a write
   * reads together with taking the lease (a guess; what is used is checked against the document).
   */
  private readonly knownTypes = new Map<string, StoreType>();
  private watchTimer: NodeJS.Timeout | undefined;
  /** Whether the deployment enforces the TTL index (MongoDB does; FerretDB does not). */
  ttlIndex = false;
  private readonly lease: number;
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
    this.stores = db.collection<StoreDoc>("stores");
    this.nodes = db.collection<NodeDoc>("nodes");
    this.bucket = new GridFSBucket(db, { bucketName: "blobs" });
    this.log = options.logger ?? silentStorageLogger;
    this.insights = guardMethods(new MongoInsights(db, this.bucket, this.log));
    this.lease = options.lease ?? DEFAULT_LEASE;
    this.lockTimeout = options.lockTimeout ?? 10_000;
    this.leases = new StoreLeases(db, { lease: this.lease, lockTimeout: this.lockTimeout });
    this.blobSweep = new BlobSweep(db, this.bucket, {
      age: ORPHAN_AGE,
      referenced: (ids) => this.referencedBlobs(ids),
    });
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
    await this.guard(async () => {
      await this.nodes.createIndex({ store: 1, path: 1 }, { unique: true, name: "store_path" });
      await this.nodes.createIndex({ store: 1, parent: 1, path: 1 }, { name: "children" });
      await this.nodes.createIndex({ store: 1, eventId: 1 }, { name: "events" });
      await this.nodes.createIndex({ store: 1, deleted: 1, modified: 1 }, { name: "tombstones" });
      try {
        await this.nodes.createIndex({ expireAt: 1 }, { expireAfterSeconds: 0, name: "tombstone_ttl" });
        this.ttlIndex = true;
      } catch (err) {
        // FerretDB has no TTL indexes: the purge alone removes tombstones there (docs/mongodb.md).
        if (!(err instanceof MongoError && /not implemented|not supported/i.test(err.message))) throw err;
      }
      // Only for the sweep of orphaned GridFS files, so only over the nodes whose contents are in
      // GridFS. FerretDB has no partial indexes (nor uses secondary indexes in queries): none there.
      const partial = await this.createPartialIndex(this.nodes, { blob: 1 }, "blob", IN_GRIDFS);
      await this.insights.ensureIndexes(this.ttlIndex, partial);
      await this.leases.ensureIndexes();
      await this.blobSweep.ensureIndexes();
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

  async listStores(): Promise<StoreRecord[]> {
    return this.guard(async () => {
      const docs = await this.stores.find({ deleted: false }).sort({ _id: 1 }).toArray();
      return Promise.all(docs.map((d) => this.toStore(d)));
    });
  }

  async getStore(name: string): Promise<StoreRecord | undefined> {
    return this.guard(async () => {
      // The root's tag is read with the store's document (one round trip), used if it is live.
      const [doc, root] = await Promise.all([
        this.stores.findOne({ _id: name }),
        this.nodes.findOne({ _id: nodeKey(name, "") }, { projection: { tag: 1 } }),
      ]);
      return doc ? this.toStore(doc, root) : undefined;
    });
  }

  // Store operations answer with a record built from what they wrote, not read back after the
  // commit: a read that failed there would turn a committed change into an error.

  async createStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    const existing = await this.guard(() => this.stores.findOne({ _id: config.name }, { projection: { deleted: 1 } }));
    if (existing && !existing.deleted) throw new AlreadyExistsError(`store ${config.name} already exists`);
    let record: StoreRecord;
    if (existing) {
      record = await this.reviveStore(config, now);
    } else {
      record = await this.guard(async () => {
        const eventId = 1;
        const root = this.directoryDoc(config.name, "", now, eventId);
        await this.nodes.replaceOne({ _id: nodeKey(config.name, "") }, root, { upsert: true });
        try {
          await this.stores.insertOne({
            _id: config.name,
            type: config.type,
            settings: config.settings,
            deleted: false,
            lastEventId: eventId,
            committedEventId: eventId,
            purgedEventId: 0,
            created: now,
            modified: now,
          });
        } catch (err) {
          if (err instanceof MongoError && err.code === 11000)
            throw new AlreadyExistsError(`store ${config.name} already exists`);
          throw err;
        }
        const created: StoreRecord = {
          config,
          deleted: false,
          lastEventId: eventId,
          purgedEventId: 0,
          created: now,
          modified: now,
          rootTag: root.tag,
          historyFrom: 0,
        };
        return created;
      });
    }
    this.committed(config.name);
    return record;
  }

  /** A store created again under a deleted one's name continues its event ids. */
  private async reviveStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    const { blobs, record } = await this.withStoreLock(config.name, async (s, lease) => {
      if (!s.deleted) throw new AlreadyExistsError(`store ${config.name} already exists`);
      // Leftovers of a deletion that died half-way must not come back with the new store.
      const leftovers = await this.removeStoreNodes(config.name, lease);
      const eventId = await lease.allocate(1);
      const root = this.directoryDoc(config.name, "", now, eventId);
      await this.nodes.replaceOne({ _id: nodeKey(config.name, "") }, root, { upsert: true });
      const revived = await this.stores.updateOne(
        { ...lease.fence, deleted: true },
        { $set: { type: config.type, settings: config.settings, deleted: false, created: now, modified: now } },
      );
      if (revived.matchedCount === 0) throw lease.lost();
      const record: StoreRecord = {
        config,
        deleted: false,
        lastEventId: eventId,
        purgedEventId: s.purgedEventId,
        created: now,
        modified: now,
        rootTag: root.tag,
        historyFrom: 0,
      };
      return { blobs: leftovers, record };
    });
    await this.removeReplaced(blobs, `store ${config.name}`);
    return record;
  }

  async updateStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    const record = await this.withStoreLock(config.name, async (s, lease) => {
      this.liveConfig(s);
      const root = await this.nodes.findOne({ _id: nodeKey(config.name, "") }, { projection: { tag: 1 } });
      const res = await this.stores.updateOne(lease.fence, {
        $set: { type: config.type, settings: config.settings, modified: now },
      });
      if (res.matchedCount === 0) throw lease.lost();
      this.knownTypes.set(config.name, config.type);
      const updated: StoreRecord = {
        config,
        deleted: false,
        lastEventId: s.committedEventId,
        purgedEventId: s.purgedEventId,
        created: s.created,
        modified: now,
        rootTag: root?.tag ?? "",
        historyFrom: 0,
      };
      return updated;
    });
    this.committed(config.name);
    return record;
  }

  async deleteStore(name: string, now: number): Promise<StoreRecord> {
    const { blobs, record } = await this.withStoreLock(name, async (store, lease) => {
      if (store.deleted) throw new NotFoundError(`store ${name} not found`);
      const eventId = await lease.allocate(1);
      // The store is marked first: from then on nothing of it is visible, even if the rest never
      // happens. That is the commit; nodes left behind are removed when the name is used again.
      const res = await this.stores.updateOne(lease.fence, {
        $set: { deleted: true, modified: now, purgedEventId: eventId },
      });
      if (res.matchedCount === 0) throw lease.lost();
      const deleted: StoreRecord = {
        config: { name, type: store.type as StoreType, settings: store.settings },
        deleted: true,
        lastEventId: eventId,
        purgedEventId: eventId,
        created: store.created,
        modified: now,
        rootTag: "",
        historyFrom: 0,
      };
      const removed = await this.removeStoreNodes(name, lease).catch((err: unknown) => {
        this.log.warn(
          { store: name, err: (err as Error).message },
          "store deleted; some of its nodes remain until the name is used again",
        );
        return [];
      });
      return { blobs: removed, record: deleted };
    });
    await this.removeReplaced(blobs, `store ${name}`);
    this.committed(name);
    return record;
  }

  async getNode(store: string, path: string): Promise<NodeRecord | undefined> {
    return this.guard(async () => {
      const doc = await this.nodes.findOne({ _id: nodeKey(store, path) });
      return doc ? toNode(doc) : undefined;
    });
  }

  // The store's document and the node, both by _id and sent together: one round trip, two
  // commands. One command would need `_id: {$in: [...]}` (with the configuration copied into the
  // root node), which FerretDB cannot answer from its index: it scans the whole collection
  // (explain: filterPushdown false), so every GET would cost a scan of every store's nodes there.
  // Nothing is cached: what is answered is what the database held when the request came.
  async getStoreNode(store: string, path: string, options: GetStoreNodeOptions): Promise<StoreNode | undefined> {
    return this.guard(async () => {
      const [doc, node] = await Promise.all([
        this.stores.findOne({ _id: store }, { projection: STORE_CONFIG }),
        this.nodes.findOne({ _id: nodeKey(store, path) }, options.contents ? {} : { projection: { inline: 0 } }),
      ]);
      if (!doc || doc.deleted) return undefined;
      const config = { name: doc._id, type: doc.type as StoreType, settings: doc.settings };
      return { config, node: node ? toNode(node) : undefined };
    });
  }

  listNodes(store: string, dir: string, options: ListOptions): AsyncIterable<NodeRecord[]> {
    const { low, high } = descendantRange(dir);
    const page = async (after: string, limit: number) => {
      const path = options.recursive && dir !== "" ? { $gt: after, $lt: high } : { $gt: after };
      const filter = options.recursive ? { store, path } : { store, parent: dir, path };
      const docs = await this.guard(() =>
        this.nodes
          .find(filter, { projection: { inline: 0 } })
          .sort({ path: 1 })
          .limit(limit)
          .toArray(),
      );
      return docs.map((d) => toNode({ ...d, inline: null }));
    };
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
    let replaced: NodeDoc | null = null;
    // Until the node's write is sent, a failure means the write did not happen and the blob is
    // ours to discard; from then on it may be referenced, and only the orphan sweep may remove it.
    let sent = false;
    const own = [path, parentOf(path) ?? ""];
    const writing = this.withStoreLock(
      store,
      async (s, lease, early) => {
        const config = this.liveConfig(s);
        refuseOutsideFolder(config, pre);
        const ancestors = this.ancestorsToRetag(config, path);
        const read = await this.readNodes(store, [...own, ...ancestors], early);
        const target = this.current(read, path, config, now);
        const parent = this.current(read, parentOf(path) ?? "", config, now);
        const { created } = planPutFile(path, target, parent, pre.ifMatch);
        const eventId = await lease.allocate(1 + ancestors.length);
        const doc: NodeDoc = {
          store,
          path,
          parent: parentOf(path) ?? null,
          directory: false,
          deleted: false,
          tag: newTag(),
          prevTag: target && !target.deleted ? target.tag : "",
          type,
          size: blob.size,
          md5: blob.md5,
          blob: blob.blob,
          inline: blob.inline,
          created: created ? now : (target?.created ?? now),
          modified: now,
          eventId,
        };
        // The ancestors first, in the same ordered bulk write: the node's write is the commit, and
        // nothing that can fail follows it.
        sent = true;
        await this.writeInOrder(
          [
            ...this.retag(store, ancestors, eventId + 1, read),
            { replaceOne: { filter: { _id: nodeKey(store, path) }, replacement: doc, upsert: true } },
          ],
          lease,
        );
        replaced = target ?? null;
        return { node: toNode(doc), created };
      },
      { early: this.readEarly(store, own, path), reserve: this.idsFor(store, path) },
    );
    let result: WriteResult;
    try {
      result = await writing;
    } catch (err) {
      if (!sent) await this.discardBlob(blob);
      throw err;
    }
    const old = replaced as NodeDoc | null;
    if (old && inGridFS(old)) await this.removeReplaced([old.blob], `/${path} in store ${store}`);
    this.committed(store);
    return result;
  }

  async makeDirectory(store: string, path: string, pre: Preconditions, now: number): Promise<WriteResult> {
    const parentPath = path === "" ? undefined : (parentOf(path) ?? "");
    const own = [path, ...(parentPath === undefined ? [] : [parentPath])];
    const result = await this.withStoreLock(
      store,
      async (s, lease, early) => {
        const config = this.liveConfig(s);
        const ancestors = this.ancestorsToRetag(config, path);
        const read = await this.readNodes(store, [...own, ...ancestors], early);
        const target = this.current(read, path, config, now);
        const parent = parentPath === undefined ? undefined : this.current(read, parentPath, config, now);
        const { created } = planMakeDirectory(path, target, parent, pre.ifMatch);
        if (!created) return { node: toNode(target as NodeDoc), created };
        const eventId = await lease.allocate(1 + ancestors.length);
        const doc = this.directoryDoc(store, path, now, eventId);
        // The ancestors first, the directory last (the commit), in one ordered bulk write.
        await this.writeInOrder(
          [
            ...this.retag(store, ancestors, eventId + 1, read),
            { replaceOne: { filter: { _id: nodeKey(store, path) }, replacement: doc, upsert: true } },
          ],
          lease,
        );
        return { node: toNode(doc), created };
      },
      { early: this.readEarly(store, own, path), reserve: this.idsFor(store, path) },
    );
    if (result.created) this.committed(store);
    return result;
  }

  async deleteTree(store: string, path: string, pre: Preconditions, now: number): Promise<DeleteResult> {
    const removed: NodeDoc[] = [];
    const result = await this.withStoreLock(
      store,
      async (s, lease, early) => {
        const config = this.liveConfig(s);
        const ancestors = this.ancestorsToRetag(config, path);
        const read = await this.readNodes(store, [path, ...ancestors], early);
        const target = this.current(read, path, config, now);
        planDelete(path, target, pre.ifMatch);
        const self = target as NodeDoc;
        const below = self.directory
          ? await this.nodes
              .find(
                { store, path: { $gt: `${path}/`, $lt: `${path}0` }, deleted: false },
                { projection: { inline: 0 } },
              )
              .sort({ path: 1 })
              .toArray()
          : [];
        const ordered = [...below, self];
        let eventId = (await lease.allocate(ordered.length + ancestors.length)) - 1;
        const expireAt = new Date(now + keepDeletedMillis(config) + TTL_GRACE);
        let tombstone: NodeDoc = self;
        const ops: AnyBulkWriteOperation<NodeDoc>[] = ordered.map((n) => {
          eventId += 1;
          const fields = {
            deleted: true,
            tag: newTag(),
            prevTag: n.tag,
            blob: "",
            inline: null,
            modified: now,
            eventId,
            expireAt,
          };
          if (n === self) tombstone = { ...self, ...fields };
          return { updateOne: { filter: { _id: nodeKey(store, n.path) }, update: { $set: fields } } };
        });
        // The ancestors first, then the tombstones in event-id order (the target's last).
        await this.writeInOrder([...this.retag(store, ancestors, eventId + 1, read), ...ops], lease);
        removed.push(...ordered);
        // The target as written: its tombstone is exactly what the last update set.
        return { node: toNode(tombstone), count: ordered.length };
      },
      // A directory's subtree is not known yet: allocate reserves the rest once it is read.
      { early: this.readEarly(store, [path], path), reserve: this.idsFor(store, path) },
    );
    await this.removeReplaced(
      removed.filter(inGridFS).map((n) => n.blob),
      `/${path} in store ${store}`,
    );
    this.committed(store);
    return result;
  }

  async writeBlob(source: AsyncIterable<Uint8Array>, options: WriteBlobOptions): Promise<BlobInfo> {
    const blob = randomUUID();
    const hash = createHash("md5");
    let size = 0;
    let held: Buffer[] = [];
    let upload: ReturnType<GridFSBucket["openUploadStreamWithId"]> | undefined;
    const write = (chunk: Uint8Array) =>
      new Promise<void>((resolve, reject) => {
        (upload as NonNullable<typeof upload>).write(chunk, (err) => (err ? reject(err) : resolve()));
      });
    try {
      for await (const chunk of source) {
        size += chunk.byteLength;
        if (size > options.maxSize)
          throw new TooLargeError(`contents larger than the limit of ${options.maxSize} bytes`);
        hash.update(chunk);
        if (upload) {
          await write(chunk);
        } else {
          held.push(Buffer.from(chunk));
          if (size > INLINE_MAX) {
            upload = this.bucket.openUploadStreamWithId(blob as never, blob);
            // Failures come through write's and end's callbacks; an unheard 'error' event would
            // end the process.
            upload.on("error", () => {});
            await write(Buffer.concat(held));
            held = [];
          }
        }
      }
      const md5 = hash.digest("base64");
      if (!upload) return { blob, size, md5, inline: Buffer.concat(held) };
      const stream = upload;
      await this.guard(
        () =>
          new Promise<void>((resolve, reject) => {
            stream.once("error", reject);
            // end's callback is also how a failure of the last chunk or of the files document
            // is told: ignoring its error would acknowledge contents that were never stored.
            stream.end((err?: Error | null) => (err ? reject(err) : resolve()));
          }),
      );
      // The files document is written last, and recorded on the stream only once it is: the
      // proof that every chunk is there (the stream reports only the first of several errors).
      if (!stream.gridFSFile)
        throw new UnavailableError(`MongoDB unavailable: the contents of blob ${blob} were not all stored`);
      return { blob, size, md5, inline: null };
    } catch (err) {
      if (upload) await upload.abort().catch(() => {});
      throw domainError(err);
    }
  }

  async *readBlob(node: NodeRecord): AsyncIterable<Uint8Array> {
    if (node.inline) {
      yield node.inline;
      return;
    }
    if (node.size === 0) return;
    if (node.size <= INLINE_MAX && !node.directory) {
      // Read without its contents (getStoreNode): they are inline. The blob UUID names this
      // version of the contents; a node that changed since has other contents, or none.
      const doc = await this.nodes.findOne(
        { _id: nodeKey(node.store, node.path) },
        { projection: { inline: 1, blob: 1 } },
      );
      const inline = doc?.blob === node.blob ? binaryBytes(doc.inline) : null;
      if (!inline) throw new NotFoundError(`blob ${node.blob} not found`);
      yield inline;
      return;
    }
    yield* readGridFS(this.bucket, node.blob);
  }

  async discardBlob(blob: BlobInfo): Promise<void> {
    if (blob.inline) return;
    try {
      await this.removeBlob(blob.blob);
    } catch (err) {
      this.log.warn(
        { blob: blob.blob, err: (err as Error).message },
        "could not remove an unused blob: the orphan sweep will",
      );
    }
  }

  async changesSince(store: string, afterEventId: number, limit: number): Promise<NodeRecord[]> {
    return this.guard(async () => {
      const s = await this.stores.findOne({ _id: store }, { projection: { committedEventId: 1 } });
      if (!s) return [];
      // Only up to the watermark: every event at or below it is written.
      const docs = await this.nodes
        .find({ store, eventId: { $gt: afterEventId, $lte: s.committedEventId } }, { projection: { inline: 0 } })
        .sort({ eventId: 1 })
        .limit(limit)
        .toArray();
      return docs.map((d) => toNode({ ...d, inline: null }));
    });
  }

  onChange(listener: (store: string) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
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
    const expired = (s: StoreDoc) => {
      const config = { name: s._id, type: s.type as StoreType, settings: s.settings };
      return { store: s._id, deleted: true, modified: { $lte: now - keepDeletedMillis(config) } };
    };
    // A store whose lease stays busy is purged next time; the others are not held up by it.
    let failure: unknown;
    for (const s of await this.guard(() => this.stores.find({ deleted: false }).toArray())) {
      if (!(await this.guard(() => this.nodes.findOne(expired(s), { projection: { _id: 1 } })))) continue;
      // Under the lease: on FerretDB a delete reads, then deletes by _id, so a tombstone written
      // over by a new resource in between would go with it; and purgedEventId is in the store
      // document, which only lease holders may update.
      const purging = this.withStoreLock(s._id, async (doc, lease) => {
        let count = 0;
        if (doc.deleted) return count;
        const filter = expired(doc);
        for (;;) {
          const docs = await this.nodes
            .find(filter, { projection: { _id: 1, eventId: 1 } })
            .sort({ eventId: 1 })
            .limit(1000)
            .toArray();
          const last = docs.at(-1);
          if (!last) break;
          // Raise the bound first: a crash between the two writes costs a needless RESET, never a silent skip.
          await lease.keep();
          const raised = await this.stores.updateOne(lease.fence, { $max: { purgedEventId: last.eventId } });
          if (raised.matchedCount === 0) throw lease.lost();
          const res = await this.nodes.deleteMany({ ...filter, _id: { $in: docs.map((d) => d._id) } });
          count += res.deletedCount;
          if (docs.length < 1000) break;
        }
        return count;
      });
      purged += await purging.catch((err: unknown) => {
        failure ??= err;
        return 0;
      });
    }
    await this.guard(() => this.leases.collectGarbage());
    if (Date.now() >= this.nextSweep) {
      this.nextSweep = Date.now() + SWEEP_INTERVAL;
      await this.guard(() => this.blobSweep.sweep());
    }
    purged += await this.insights.purgeExpired(now);
    if (failure !== undefined) throw failure;
    return purged;
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

  private async toStore(d: StoreDoc, read?: { tag: string } | null): Promise<StoreRecord> {
    const root = d.deleted
      ? null
      : read !== undefined
        ? read
        : await this.nodes.findOne({ _id: nodeKey(d._id, "") }, { projection: { tag: 1 } });
    return {
      config: { name: d._id, type: d.type as StoreType, settings: d.settings },
      deleted: d.deleted,
      // Followers see only what is committed.
      lastEventId: d.committedEventId,
      purgedEventId: d.purgedEventId,
      created: d.created,
      modified: d.modified,
      rootTag: root?.tag ?? "",
      historyFrom: 0,
    };
  }

  private liveConfig(s: StoreDoc): StoreConfig {
    if (s.deleted) throw new NotFoundError(`store ${s._id} not found`);
    return { name: s._id, type: s.type as StoreType, settings: s.settings };
  }

  /**
   * The nodes at these paths (without their contents), by path: one findOne by _id each, sent
   * together (one round trip; `_id: {$in}` would make FerretDB scan the collection).
   */
  private async readNodes(store: string, paths: readonly string[], have?: NodeReads): Promise<NodeReads> {
    const read: NodeReads = new Map(have);
    const missing = [...new Set(paths)].filter((p) => !read.has(p));
    const docs = await Promise.all(
      missing.map((p) => this.nodes.findOne({ _id: nodeKey(store, p) }, { projection: { inline: 0 } })),
    );
    missing.forEach((p, i) => {
      const d = docs[i];
      read.set(p, d ? { ...d, inline: null } : null);
    });
    return read;
  }

  /**
   * What a write of `path` reads, sent with the lease's announcement when that is allowed
   * (StoreLeases.acquire): the path, its parent, and on a sync-recursive store its ancestors.
   */
  private readEarly(store: string, paths: readonly string[], path: string): () => Promise<NodeReads> {
    return () => {
      const type = this.knownTypes.get(store);
      return this.readNodes(store, type ? [...paths, ...this.ancestorsToRetag({ type }, path)] : paths);
    };
  }

  /**
   * How many event ids a write of one node at `path` takes (the node, and on a sync-recursive
   * store its ancestors), reserved with the lease's announcement. The store's type as last seen
   * under a lease; unknown, as if sync-recursive. A guess: what is not used is given back on
   * release, and allocate reserves more if it was short.
   */
  private idsFor(store: string, path: string): number {
    const type = this.knownTypes.get(store);
    return 1 + (type ? this.ancestorsToRetag({ type }, path).length : ancestorsOf(path).length);
  }

  /** The node at a path among those read, with an expired tombstone treated as absent. */
  private current(read: NodeReads, path: string, config: StoreConfig, now: number): NodeDoc | undefined {
    const doc = read.get(path);
    if (!doc) return undefined;
    return isExpiredTombstone(doc, config, now) ? undefined : doc;
  }

  private ancestorsToRetag(config: { type: StoreType }, path: string): string[] {
    return hasRecursiveTags(config.type) ? ancestorsOf(path) : [];
  }

  /**
   * On sync-recursive stores, every ancestor directory gets a new tag and event, nearest first:
   * the updates, to be written before the node they are for (their tags as read under the lease).
   */
  private retag(
    store: string,
    ancestors: readonly string[],
    firstEventId: number,
    read: NodeReads,
  ): AnyBulkWriteOperation<NodeDoc>[] {
    return ancestors.map((path, i) => ({
      updateOne: {
        filter: { _id: nodeKey(store, path) },
        update: { $set: { prevTag: read.get(path)?.tag ?? "", tag: newTag(), eventId: firstEventId + i } },
      },
    }));
  }

  /**
   * Ordered bulk writes in batches of 32: FerretDB (v1, SQLite backend) stalls
   * on one large update batch (measured: 50 updates 0.4 s, 100 never returned).
   * The lease is kept (renewed when due) before each batch.
   */
  private async writeInOrder(ops: AnyBulkWriteOperation<NodeDoc>[], lease: StoreLease): Promise<void> {
    for (let i = 0; i < ops.length; i += 32) {
      await lease.keep();
      await this.nodes.bulkWrite(ops.slice(i, i + 32), { ordered: true });
    }
  }

  private directoryDoc(store: string, path: string, now: number, eventId: number): NodeDoc {
    return {
      store,
      path,
      parent: parentOf(path) ?? null,
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

  /** Removes every node of a store, under its lease; returns the GridFS blobs to remove once it is released. */
  private async removeStoreNodes(store: string, lease: StoreLease): Promise<string[]> {
    const docs = await this.nodes
      .find({ store }, { projection: { _id: 1, blob: 1, size: 1, directory: 1, deleted: 1 } })
      .toArray();
    for (let i = 0; i < docs.length; i += REMOVE_BATCH) {
      await lease.keep();
      await this.nodes.deleteMany({ _id: { $in: docs.slice(i, i + REMOVE_BATCH).map((d) => d._id as string) } });
    }
    return docs.filter(inGridFS).map((d) => d.blob);
  }

  /** The blob UUIDs among `ids` that a node or a report refers to (GridFS contents only). */
  private async referencedBlobs(ids: string[]): Promise<Set<string>> {
    const nodes = await this.nodes.find({ blob: { $in: ids }, ...IN_GRIDFS }, { projection: { blob: 1 } }).toArray();
    const reports = await this.insights.referencedBlobs(ids);
    return new Set([...nodes.map((n) => n.blob), ...reports]);
  }

  /** Creates a partial index; false where the server has none (FerretDB). */
  private async createPartialIndex<D extends object>(
    collection: Collection<D>,
    key: Record<string, 1>,
    name: string,
    partialFilterExpression: Record<string, unknown>,
  ): Promise<boolean> {
    try {
      await collection.createIndex(key, { name, partialFilterExpression });
      return true;
    } catch (err) {
      if (err instanceof MongoError && /not implemented|not supported/i.test(err.message)) return false;
      throw err;
    }
  }

  private async removeBlob(blob: string): Promise<void> {
    await removeGridFS(this.bucket, blob);
  }

  /**
   * Removes the contents a committed write replaced or deleted. The write stands whatever
   * happens here: a blob that cannot be removed now is logged and left to the orphan sweep.
   */
  private async removeReplaced(blobs: readonly string[], what: string): Promise<void> {
    for (const blob of blobs) {
      try {
        await this.removeBlob(blob);
      } catch (err) {
        this.log.warn(
          { blob, err: (err as Error).message },
          `could not remove the replaced contents of ${what}: the orphan sweep will`,
        );
        return;
      }
    }
  }

  /**
   * Runs `fn` holding the store's lease: one writer per store across every
   * instance, so event ids are written in order. `lease.allocate(n)` reserves n
   * event ids and returns the first; on release the committed watermark moves up
   * to the last one allocated. Store-document updates in `fn` filter on
   * `lease.fence`; long operations call `lease.keep()` between write batches.
   */
  private async withStoreLock<T, E = never>(
    store: string,
    fn: (doc: StoreDoc, lease: StoreLease, early: E | undefined) => Promise<T>,
    options: { early?: () => Promise<E>; reserve?: number } = {},
  ): Promise<T> {
    // In-process writers queue here instead of polling the database for the lease.
    const previous = this.localLocks.get(store) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => {
      release = r;
    });
    const chained = previous.then(() => mine);
    this.localLocks.set(store, chained);
    await previous;
    try {
      return await this.guard(async () => {
        const { doc, lease, early: read } = await this.leases.acquire(store, options);
        let result: T;
        try {
          const s = doc as StoreDoc;
          if (!s.deleted) this.knownTypes.set(store, s.type as StoreType);
          result = await fn(s, lease, read);
        } catch (err) {
          // The operation's own failure is the answer; a release that fails is tried again.
          await this.leases.release(lease).catch(() => this.leases.releaseLater(lease, this.log));
          throw err;
        }
        // Committed: the answer is success whatever the release does. An unreleased lease runs
        // out, and whoever takes it next publishes what this one allocated (mongo-store-lease.ts).
        await this.leases.release(lease).catch((err: unknown) => {
          this.log.warn({ store, err: (err as Error).message }, "could not release a store's write lease");
          this.leases.releaseLater(lease, this.log);
        });
        return result;
      });
    } finally {
      release();
      if (this.localLocks.get(store) === chained) this.localLocks.delete(store);
    }
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
        const docs = await this.stores.find({}, { projection: { committedEventId: 1 } }).toArray();
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

  /** Turns driver connection failures into UnavailableError (503 / gRPC Unavailable). */
  private guard<T>(fn: () => Promise<T>): Promise<T> {
    return guard(fn);
  }
}
