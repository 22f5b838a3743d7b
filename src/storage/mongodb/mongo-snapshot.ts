// Backups on MongoDB (docs/backup.md, "Consistency"): a store's snapshot hold in its document, so
// that every instance writing the store sees it under the store's lease, and the versions that
// ended by the snapshot's event, read with one cursor.

import { type EndedVersionsOptions, HOLD_MS, type SnapshotHold, type VersionRecord } from "../port.js";
import { contentsProjection, type MongoCollections, toVersion } from "./mongo-collections.js";
import { guard } from "./mongo-driver.js";
import type { StoreWriteLock } from "./mongo-write-lock.js";

export class MongoSnapshots {
  constructor(
    private readonly c: MongoCollections,
    private readonly lock: StoreWriteLock,
  ) {}

  async hold(store: string): Promise<SnapshotHold | undefined> {
    const set = await guard(() =>
      this.c.stores.findOneAndUpdate(
        { _id: store, deleted: false },
        { $max: { snapshotUntil: Date.now() + HOLD_MS } },
        { returnDocument: "after" },
      ),
    );
    if (!set) return undefined;
    let until = set.snapshotUntil ?? 0;
    // Taking the lease once waits for the write that holds it now (which may not have seen the
    // hold); every later holder reads the store document after the hold was set and keeps what
    // it replaces. So the committed event read under the lease is the snapshot's.
    const eventId = await this.lock.run(store, async (doc) => doc.lastEventId);
    return {
      store,
      eventId,
      renew: async () => {
        const next = Math.max(until + 1, Date.now() + HOLD_MS);
        const r = await guard(() =>
          this.c.stores.updateOne({ _id: store, snapshotUntil: until }, { $set: { snapshotUntil: next } }),
        );
        if (r.modifiedCount > 0) until = next;
        return r.modifiedCount > 0;
      },
      release: async () => {
        await guard(() =>
          this.c.stores.updateOne({ _id: store, snapshotUntil: until }, { $set: { snapshotUntil: 0 } }),
        ).catch(() => {
          // It lapses by itself: HOLD_MS at most.
        });
      },
    };
  }

  async *listEnded(store: string, upTo: number, options: EndedVersionsOptions): AsyncIterable<VersionRecord[]> {
    const limit = Math.max(1, options.batchSize ?? 1000);
    const cursor = this.c.versions
      .find({ store, endedEventId: { $lte: upTo } }, { projection: contentsProjection(options.contents) })
      .sort({ path: 1, eventId: 1 })
      .batchSize(limit);
    try {
      let batch: VersionRecord[] = [];
      for await (const doc of cursor) {
        batch.push(toVersion(doc));
        if (batch.length >= limit) {
          yield batch;
          batch = [];
        }
      }
      if (batch.length > 0) yield batch;
    } finally {
      await cursor.close().catch(() => {});
    }
  }
}
