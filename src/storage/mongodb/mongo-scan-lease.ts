// The scan lease of filesystem stores on MongoDB (issue 17, item 7; docs/mongodb.md): of the
// instances that serve one folder, the lease's holder alone watches and rescans it. Made
// exclusive, as the store write lease is (mongo-store-lease.ts), by inserting one document per
// epoch with a unique _id ("{store}#{epoch}"): atomic on every MongoDB-compatible server, where a
// conditional update is not (FerretDB v1).

import { randomUUID } from "node:crypto";
import { hostname } from "node:os";
import type { Collection, Db } from "mongodb";
import type { ScanLease } from "../filesystem/scan-lease.js";
import type { StorageLogger } from "../port.js";
import { isDuplicateKey } from "./mongo-driver.js";

/** One epoch of a store's scan lease; the highest epoch of a store is its lease. */
interface ScanLeaseDoc {
  _id: string;
  store: string;
  epoch: number;
  /** The holding process (random per process). */
  owner: string;
  /** For operators (and tests): which instance that is. */
  host: string;
  pid: number;
  /** Until when the holder keeps it without renewing (ms since 1970, its clock). */
  until: number;
  /** Given up (shutdown, store no longer served): free at once. */
  released?: boolean;
}

export interface MongoScanLeaseOptions {
  /** How long a holder keeps the lease without renewing it, in ms (default 30 s). */
  duration?: number;
  logger: StorageLogger;
}

export const DEFAULT_SCAN_LEASE = 30_000;
export const SCAN_LEASES = "filesystemScanLeases";

/**
 * Taking: read the store's highest epoch; if it is released or past its `until`, insert the next
 * epoch; the one instance whose insert lands holds the lease. Renewing: the holder moves its
 * epoch's `until` on (only the holder writes that document), then checks that no later epoch
 * exists: a renewal that came too late (the others saw the lease run out and took the next epoch)
 * loses it. The holder scans only while two thirds of the lease have not passed since its
 * renewal was sent, so a taker, who waits for the whole lease by its own clock, never overlaps it
 * unless the clocks differ by more than a third of the lease.
 */
export class MongoScanLease implements ScanLease {
  readonly duration: number;
  private readonly leases: Collection<ScanLeaseDoc>;
  private readonly logger: StorageLogger;
  private readonly owner = randomUUID();
  /** The epoch this process holds, per store. */
  private readonly held = new Map<string, number>();
  private indexed: Promise<unknown> | undefined;

  constructor(db: Db, options: MongoScanLeaseOptions) {
    this.duration = options.duration ?? DEFAULT_SCAN_LEASE;
    this.leases = db.collection<ScanLeaseDoc>(SCAN_LEASES);
    this.logger = options.logger;
  }

  async hold(store: string): Promise<boolean> {
    this.indexed ??= this.leases.createIndex({ store: 1, epoch: -1 }, { name: "store_epoch" }).catch((err) => {
      this.indexed = undefined;
      throw err;
    });
    await this.indexed;
    const now = Date.now();
    const mine = this.held.get(store);
    if (mine !== undefined) {
      const renewed = await this.leases.updateOne(
        { _id: leaseId(store, mine), owner: this.owner },
        { $set: { until: now + this.duration } },
      );
      const later = await this.leases.findOne({ store, epoch: { $gt: mine } }, { projection: { _id: 1 } });
      if (renewed.matchedCount === 1 && !later) return true;
      this.held.delete(store);
      this.logger.warn({ store, epoch: mine }, "the scan lease of a filesystem store ran out before it was renewed");
      return false;
    }
    const top = await this.leases.find({ store }).sort({ epoch: -1 }).limit(1).next();
    if (top && top.released !== true && top.until > now) return false;
    const epoch = (top?.epoch ?? 0) + 1;
    try {
      await this.leases.insertOne({
        _id: leaseId(store, epoch),
        store,
        epoch,
        owner: this.owner,
        host: hostname(),
        pid: process.pid,
        until: now + this.duration,
      });
    } catch (err) {
      if (isDuplicateKey(err)) return false;
      throw err;
    }
    this.held.set(store, epoch);
    // Earlier epochs are read by nobody any more (a late renewal of one finds it gone, and stops).
    await this.leases.deleteMany({ store, epoch: { $lt: epoch } }).catch(() => {});
    return true;
  }

  async release(store: string): Promise<void> {
    const mine = this.held.get(store);
    if (mine === undefined) return;
    this.held.delete(store);
    await this.leases.updateOne({ _id: leaseId(store, mine), owner: this.owner }, { $set: { released: true } });
  }
}

function leaseId(store: string, epoch: number): string {
  return `${store}#${epoch}`;
}
