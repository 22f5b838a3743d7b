// Stores: created (or created again under a deleted one's name, continuing its event ids),
// reconfigured (turning history on sets the history horizon), and deleted (the store marked
// first, then its nodes and versions removed under its lease).
// Store operations answer with a record built from what they wrote, not read back after the
// commit: a read that failed there would turn a committed change into an error.

import { MongoError } from "mongodb";
import { AlreadyExistsError, NotFoundError } from "../../domain/errors.js";
import { keepsVersions, type StoreConfig, type StoreType } from "../../domain/store.js";
import type { StorageLogger, StoreRecord } from "../port.js";
import { inGridFS, type MongoCollections, nodeKey } from "./mongo-collections.js";
import type { MongoContents } from "./mongo-contents.js";
import { guard } from "./mongo-driver.js";
import type { StoreLease } from "./mongo-store-lease.js";
import type { StoreWriteLock } from "./mongo-write-lock.js";
import { directoryDoc, liveConfig } from "./mongo-writes.js";

/** Nodes (or versions) removed per deleteMany when a store goes: the lease is renewed between batches. */
const REMOVE_BATCH = 5000;

/** The fields of a node or a version that removing a store's looks at. */
interface StateFields {
  _id: string;
  store: string;
  blob: string;
  size: number;
  directory: boolean;
  deleted: boolean;
}

export class MongoStores {
  constructor(
    private readonly c: MongoCollections,
    private readonly lock: StoreWriteLock,
    private readonly contents: MongoContents,
    private readonly log: StorageLogger,
    /** Tells the listeners (and the other workers) that a change of the store is committed. */
    private readonly committed: (store: string) => void,
  ) {}

  async createStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    const existing = await guard(() => this.c.stores.findOne({ _id: config.name }, { projection: { deleted: 1 } }));
    if (existing && !existing.deleted) throw new AlreadyExistsError(`store ${config.name} already exists`);
    let record: StoreRecord;
    if (existing) {
      record = await this.reviveStore(config, now);
    } else {
      record = await guard(async () => {
        const eventId = 1;
        const root = directoryDoc(config.name, "", now, eventId);
        await this.c.nodes.replaceOne({ _id: nodeKey(config.name, "") }, root, { upsert: true });
        try {
          await this.c.stores.insertOne({
            _id: config.name,
            type: config.type,
            settings: config.settings,
            deleted: false,
            lastEventId: eventId,
            committedEventId: eventId,
            purgedEventId: 0,
            // Nothing of it was before: every moment from its first event on is whole.
            historyFrom: 0,
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
    const { blobs, record } = await this.lock.run(config.name, async (s, lease) => {
      if (!s.deleted) throw new AlreadyExistsError(`store ${config.name} already exists`);
      // Leftovers of a deletion that died half-way must not come back with the new store.
      const leftovers = await this.removeStoreData(config.name, lease);
      const eventId = await lease.allocate(1);
      const root = directoryDoc(config.name, "", now, eventId);
      await this.c.nodes.replaceOne({ _id: nodeKey(config.name, "") }, root, { upsert: true });
      // The deleted store's states are gone: its history starts with this store.
      const revived = await this.c.stores.updateOne(
        { ...lease.fence, deleted: true },
        {
          $set: {
            type: config.type,
            settings: config.settings,
            deleted: false,
            historyFrom: eventId,
            created: now,
            modified: now,
          },
        },
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
        historyFrom: eventId,
      };
      return { blobs: leftovers, record };
    });
    await this.contents.removeReplaced(blobs, `store ${config.name}`);
    return record;
  }

  async updateStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    const record = await this.lock.run(config.name, async (s, lease) => {
      const before = liveConfig(s);
      const root = await this.c.nodes.findOne({ _id: nodeKey(config.name, "") }, { projection: { tag: 1 } });
      // Turning history on: every state from the last committed event on is kept from now.
      const historyFrom = !keepsVersions(before) && keepsVersions(config) ? s.committedEventId : (s.historyFrom ?? 0);
      const res = await this.c.stores.updateOne(lease.fence, {
        $set: { type: config.type, settings: config.settings, historyFrom, modified: now },
      });
      if (res.matchedCount === 0) throw lease.lost();
      this.lock.rememberType(config.name, config.type);
      const updated: StoreRecord = {
        config,
        deleted: false,
        lastEventId: s.committedEventId,
        purgedEventId: s.purgedEventId,
        created: s.created,
        modified: now,
        rootTag: root?.tag ?? "",
        historyFrom,
      };
      return updated;
    });
    this.committed(config.name);
    return record;
  }

  async deleteStore(name: string, now: number): Promise<StoreRecord> {
    const { blobs, record } = await this.lock.run(name, async (store, lease) => {
      if (store.deleted) throw new NotFoundError(`store ${name} not found`);
      const eventId = await lease.allocate(1);
      // The store is marked first: from then on nothing of it is visible, even if the rest never
      // happens. That is the commit; nodes left behind are removed when the name is used again.
      const res = await this.c.stores.updateOne(lease.fence, {
        $set: { deleted: true, modified: now, purgedEventId: eventId, historyFrom: eventId },
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
        historyFrom: eventId,
      };
      const removed = await this.removeStoreData(name, lease).catch((err: unknown) => {
        this.log.warn(
          { store: name, err: (err as Error).message },
          "store deleted; some of its nodes or versions remain until the name is used again",
        );
        return [];
      });
      return { blobs: removed, record: deleted };
    });
    await this.contents.removeReplaced(blobs, `store ${name}`);
    this.committed(name);
    return record;
  }

  /**
   * Removes every node and version of a store, under its lease; returns the GridFS blobs to
   * remove once it is released (no other store's node or version can share them).
   */
  private async removeStoreData(store: string, lease: StoreLease): Promise<string[]> {
    const blobs: string[] = [];
    for (const name of ["nodes", "versions"]) {
      // What this needs of either collection's documents.
      const collection = this.c.db.collection<StateFields>(name);
      const docs = await collection
        .find({ store }, { projection: { _id: 1, blob: 1, size: 1, directory: 1, deleted: 1 } })
        .toArray();
      for (let i = 0; i < docs.length; i += REMOVE_BATCH) {
        await lease.keep();
        await collection.deleteMany({ _id: { $in: docs.slice(i, i + REMOVE_BATCH).map((d) => d._id) } });
      }
      blobs.push(...docs.filter(inGridFS).map((d) => d.blob));
    }
    return [...new Set(blobs)];
  }
}
