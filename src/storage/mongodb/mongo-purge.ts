// The purge (every minute, on every instance, idempotent): tombstones past their store's
// keep-deleted (the feed's bound raised first), past epochs of the write leases, now and then the
// orphaned GridFS files (mongo-blob-sweep.ts), and expired reports (mongo-insights.ts).

import { keepDeletedMillis, type StoreType } from "../../domain/store.js";
import { BlobSweep } from "./mongo-blob-sweep.js";
import { IN_GRIDFS, type MongoCollections, type StoreDoc } from "./mongo-collections.js";
import { guard } from "./mongo-driver.js";
import type { MongoInsights } from "./mongo-insights.js";
import type { StoreLeases } from "./mongo-store-lease.js";
import type { StoreWriteLock } from "./mongo-write-lock.js";

/** GridFS files older than this that nothing refers to are orphans (mongo-blob-sweep.ts). */
const ORPHAN_AGE = 3_600_000;
/** How often the purge of one instance also sweeps orphaned GridFS files. */
const SWEEP_INTERVAL = 10 * 60_000;

export class MongoPurge {
  private readonly blobSweep: BlobSweep;
  /** Date.now() from which the next purge also sweeps orphaned GridFS files. */
  private nextSweep = 0;

  constructor(
    private readonly c: MongoCollections,
    private readonly lock: StoreWriteLock,
    private readonly leases: StoreLeases,
    private readonly insights: MongoInsights,
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
    const expired = (s: StoreDoc) => {
      const config = { name: s._id, type: s.type as StoreType, settings: s.settings };
      return { store: s._id, deleted: true, modified: { $lte: now - keepDeletedMillis(config) } };
    };
    // A store whose lease stays busy is purged next time; the others are not held up by it.
    let failure: unknown;
    for (const s of await guard(() => this.c.stores.find({ deleted: false }).toArray())) {
      if (!(await guard(() => this.c.nodes.findOne(expired(s), { projection: { _id: 1 } })))) continue;
      // Under the lease: on FerretDB a delete reads, then deletes by _id, so a tombstone written
      // over by a new resource in between would go with it; and purgedEventId is in the store
      // document, which only lease holders may update.
      const purging = this.lock.run(s._id, async (doc, lease) => {
        let count = 0;
        if (doc.deleted) return count;
        const filter = expired(doc);
        for (;;) {
          const docs = await this.c.nodes
            .find(filter, { projection: { _id: 1, eventId: 1 } })
            .sort({ eventId: 1 })
            .limit(1000)
            .toArray();
          const last = docs.at(-1);
          if (!last) break;
          // Raise the bound first: a crash between the two writes costs a needless RESET, never a silent skip.
          await lease.keep();
          const raised = await this.c.stores.updateOne(lease.fence, { $max: { purgedEventId: last.eventId } });
          if (raised.matchedCount === 0) throw lease.lost();
          const res = await this.c.nodes.deleteMany({ ...filter, _id: { $in: docs.map((d) => d._id) } });
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
    await guard(() => this.leases.collectGarbage());
    if (Date.now() >= this.nextSweep) {
      this.nextSweep = Date.now() + SWEEP_INTERVAL;
      await guard(() => this.blobSweep.sweep());
    }
    purged += await this.insights.purgeExpired(now);
    if (failure !== undefined) throw failure;
    return purged;
  }

  /** The blob UUIDs among `ids` that a node or a report refers to (GridFS contents only). */
  private async referencedBlobs(ids: string[]): Promise<Set<string>> {
    const nodes = await this.c.nodes.find({ blob: { $in: ids }, ...IN_GRIDFS }, { projection: { blob: 1 } }).toArray();
    const reports = await this.insights.referencedBlobs(ids);
    return new Set([...nodes.map((n) => n.blob), ...reports]);
  }
}
