// The purge (every minute, on every instance, idempotent): tombstones past their store's
// keep-deleted (the feed's bound raised first), versions past its keep-versions (the history
// horizon raised first, then the blobs nothing refers to any more), past epochs of the write
// leases, now and then the orphaned GridFS files (mongo-blob-sweep.ts), and expired reports
// (mongo-insights.ts).

import { keepDeletedMillis, keepVersionsMillis } from "../../domain/store.js";
import { BlobSweep } from "./mongo-blob-sweep.js";
import { configOf, inGridFS, isHeld, type MongoCollections, type StoreDoc } from "./mongo-collections.js";
import type { MongoContents } from "./mongo-contents.js";
import { guard } from "./mongo-driver.js";
import type { MongoInsights } from "./mongo-insights.js";
import type { StoreLeases } from "./mongo-store-lease.js";
import type { StoreWriteLock } from "./mongo-write-lock.js";

/** GridFS files older than this that nothing refers to are orphans (mongo-blob-sweep.ts). */
const ORPHAN_AGE = 3_600_000;
/** How often the purge of one instance also sweeps orphaned GridFS files. */
const SWEEP_INTERVAL = 10 * 60_000;
/** Tombstones or versions removed per batch (the store's bound raised before each). */
const PURGE_BATCH = 1000;

export class MongoPurge {
  private readonly blobSweep: BlobSweep;
  /** Date.now() from which the next purge also sweeps orphaned GridFS files. */
  private nextSweep = 0;

  constructor(
    private readonly c: MongoCollections,
    private readonly lock: StoreWriteLock,
    private readonly leases: StoreLeases,
    private readonly insights: MongoInsights,
    private readonly contents: MongoContents,
  ) {
    this.blobSweep = new BlobSweep(c.db, c.bucket, {
      age: ORPHAN_AGE,
      referenced: (ids) => this.referencedBlobs(ids),
    });
  }

  async ensureIndexes(): Promise<void> {
    await this.blobSweep.ensureIndexes();
  }

  async purgeExpired(now: number): Promise<number> {
    let purged = 0;
    // A store whose lease stays busy is purged next time; the others are not held up by it.
    let failure: unknown;
    const stores = await guard(() => this.c.stores.find({ deleted: false }).toArray());
    for (const s of stores) {
      for (const purging of [() => this.purgeTombstones(s, now), () => this.purgeVersions(s, now)]) {
        purged += await purging().catch((err: unknown) => {
          failure ??= err;
          return 0;
        });
      }
    }
    await guard(() => this.leases.collectGarbage());
    if (Date.now() >= this.nextSweep) {
      this.nextSweep = Date.now() + SWEEP_INTERVAL;
      await guard(() => this.blobSweep.sweep());
    }
    purged += await this.insights.purgeExpired(now);
    if (failure !== undefined) throw failure;
    return purged;
  }

  /** Removes the store's tombstones older than its keep-deleted; returns how many. */
  private async purgeTombstones(s: StoreDoc, now: number): Promise<number> {
    const expired = (doc: StoreDoc) => ({
      store: doc._id,
      deleted: true,
      modified: { $lte: now - keepDeletedMillis(configOf(doc)) },
    });
    if (!(await guard(() => this.c.nodes.findOne(expired(s), { projection: { _id: 1 } })))) return 0;
    // Under the lease: on FerretDB a delete reads, then deletes by _id, so a tombstone written
    // over by a new resource in between would go with it; and purgedEventId is in the store
    // document, which only lease holders may update.
    return this.lock.run(s._id, async (doc, lease) => {
      let count = 0;
      // A backup holds the store: its snapshot's tombstones stay until it ends (docs/backup.md).
      if (doc.deleted || isHeld(doc)) return count;
      const filter = expired(doc);
      for (;;) {
        const docs = await this.c.nodes
          .find(filter, { projection: { _id: 1, eventId: 1 } })
          .sort({ eventId: 1 })
          .limit(PURGE_BATCH)
          .toArray();
        const last = docs.at(-1);
        if (!last) break;
        // Raise the bound first: a crash between the two writes costs a needless RESET, never a silent skip.
        await lease.keep();
        const raised = await this.c.stores.updateOne(lease.fence, { $max: { purgedEventId: last.eventId } });
        if (raised.matchedCount === 0) throw lease.lost();
        const res = await this.c.nodes.deleteMany({ ...filter, _id: { $in: docs.map((d) => d._id) } });
        count += res.deletedCount;
        if (docs.length < PURGE_BATCH) break;
      }
      return count;
    });
  }

  /**
   * Removes the store's versions that ended longer ago than its keep-versions (all of them when
   * it keeps none), raising its history horizon past them first: a crash in between costs a
   * needless 410, never a moment shown with states missing. Then the blobs they pointed at that
   * nothing refers to any more (a restore shares a version's blob with a node). Returns how many.
   */
  private async purgeVersions(s: StoreDoc, now: number): Promise<number> {
    const ended = (doc: StoreDoc) => {
      const keep = keepVersionsMillis(configOf(doc));
      return keep > 0 ? { store: doc._id, ended: { $lte: now - keep } } : { store: doc._id };
    };
    if (!(await guard(() => this.c.versions.findOne(ended(s), { projection: { _id: 1 } })))) return 0;
    const blobs: string[] = [];
    // Under the lease: historyFrom is in the store document, and a restore reads the version it
    // brings back under the lease, so that its blob is referenced by the node before the check
    // below can miss it.
    const count = await this.lock.run(s._id, async (doc, lease) => {
      let removed = 0;
      if (doc.deleted || isHeld(doc)) return removed;
      const filter = ended(doc);
      for (;;) {
        const docs = await this.c.versions
          .find(filter, { projection: { _id: 1, endedEventId: 1, blob: 1, size: 1, directory: 1, deleted: 1 } })
          .sort({ ended: 1 })
          .limit(PURGE_BATCH)
          .toArray();
        if (docs.length === 0) break;
        await lease.keep();
        const horizon = Math.max(...docs.map((d) => d.endedEventId));
        const raised = await this.c.stores.updateOne(lease.fence, { $max: { historyFrom: horizon } });
        if (raised.matchedCount === 0) throw lease.lost();
        const res = await this.c.versions.deleteMany({ _id: { $in: docs.map((d) => d._id) } });
        removed += res.deletedCount;
        blobs.push(...docs.filter(inGridFS).map((d) => d.blob));
        if (docs.length < PURGE_BATCH) break;
      }
      return removed;
    });
    await this.contents.removeUnreferenced(blobs, `the versions purged from store ${s._id}`);
    return count;
  }

  /** The blob UUIDs among `ids` that a node, a version or a report refers to (GridFS contents only). */
  private async referencedBlobs(ids: string[]): Promise<Set<string>> {
    const states = await this.contents.referenced(ids);
    const reports = await this.insights.referencedBlobs(ids);
    return new Set([...states, ...reports]);
  }
}
