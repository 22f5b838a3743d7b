// The embedded backend's background purge: tombstones past their store's keep-deleted, versions
// past its keep-versions (raising its history horizon), reports past their expiry, and (hourly)
// blob files that nothing refers to.

import type Database from "better-sqlite3";
import { keepDeletedMillis, keepVersionsMillis } from "../../domain/store.js";
import type { BlobFiles } from "../local/blob-files.js";
import type { SpaceReserve } from "../local/space-reserve.js";
import type { StorageLogger } from "../port.js";
import type { SqliteContents } from "./contents.js";
import type { SqliteReads } from "./reads.js";
import type { Replaced } from "./rows.js";
import type { Statements } from "./schema.js";
import type { SqliteSnapshots } from "./snapshot.js";
import type { SqliteWrites } from "./sqlite-errors.js";
import type { SqliteInsights } from "./sqlite-insights.js";

/** Blob files older than this that nothing refers to are orphans. */
const ORPHAN_AGE = 3_600_000;
/** How often the purge also sweeps orphaned blob files (a walk of `blobs/`). */
const ORPHAN_SWEEP_INTERVAL = 3_600_000;

export interface SqlitePurgeOptions {
  db: Database.Database;
  stmt: Statements;
  reads: SqliteReads;
  /** The stores a backup holds: their tombstones and versions wait (docs/backup.md). */
  snapshots: SqliteSnapshots;
  turns: SqliteWrites;
  blobs: BlobFiles;
  contents: SqliteContents;
  insights: SqliteInsights;
  reserve: SpaceReserve;
  logger: StorageLogger;
}

export class SqlitePurge {
  private readonly stmt: Statements;
  private readonly reads: SqliteReads;
  private readonly snapshots: SqliteSnapshots;
  private readonly turns: SqliteWrites;
  private readonly blobs: BlobFiles;
  private readonly contents: SqliteContents;
  private readonly insights: SqliteInsights;
  private readonly reserve: SpaceReserve;
  private readonly logger: StorageLogger;
  /** Date.now() from which the next purge also sweeps orphaned blob files. */
  private nextSweep = 0;
  private readonly purgeTombstones: (store: string, rows: ReadonlyArray<{ path: string; event_id: number }>) => number;
  private readonly purgeVersions: (store: string, cutoff: number) => Replaced[];

  constructor(options: SqlitePurgeOptions) {
    this.stmt = options.stmt;
    this.reads = options.reads;
    this.snapshots = options.snapshots;
    this.turns = options.turns;
    this.blobs = options.blobs;
    this.contents = options.contents;
    this.insights = options.insights;
    this.reserve = options.reserve;
    this.logger = options.logger;
    this.purgeTombstones = options.db.transaction(
      (store: string, rows: ReadonlyArray<{ path: string; event_id: number }>) => {
        let removed = 0;
        for (const r of rows) {
          if (this.stmt.deleteNode.run(store, r.path, r.event_id).changes > 0) {
            this.stmt.raisePurged.run(r.event_id, store);
            removed += 1;
          }
        }
        return removed;
      },
    );
    // A batch of versions, and the horizon raised past the latest of them in the same commit: a
    // moment whose state is gone is refused from then on (docs/history.md, Retention).
    this.purgeVersions = options.db.transaction((store: string, cutoff: number) => {
      const rows = this.stmt.purgeVersions.all(store, cutoff);
      let horizon = 0;
      for (const r of rows) horizon = Math.max(horizon, r.ended_event_id);
      if (rows.length > 0) this.stmt.raiseHistoryFrom.run(horizon, store);
      return rows.map((r) => ({ blob: r.blob, inlined: r.inlined === 1 }));
    });
  }

  async purgeExpired(now: number): Promise<number> {
    let purged = 0;
    // Store by store: keep-deleted differs between stores, so the oldest tombstones of one
    // store must not hide the expired tombstones of another.
    const held = this.snapshots.heldStores();
    for (const store of this.reads.listStores()) {
      if (held.has(store.config.name)) continue;
      // Same bound as isExpiredTombstone: modified + keep-deleted <= now.
      const cutoff = now - keepDeletedMillis(store.config);
      for (;;) {
        const rows = this.stmt.expiredTombstones.all(store.config.name, cutoff);
        const removed = await this.turns.free(() => this.purgeTombstones(store.config.name, rows));
        purged += removed;
        if (rows.length < 1000 || removed === 0) break;
      }
      purged += await this.expireVersions(store.config.name, now - keepVersionsMillis(store.config));
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
   * Removes the versions of a store that ended at or before `cutoff` (keep-versions ago; with
   * keep-versions 0, every one: history off keeps nothing), then the blob files that nothing
   * points at any more (a node may share one with a version it was restored from).
   */
  private async expireVersions(store: string, cutoff: number): Promise<number> {
    let purged = 0;
    for (;;) {
      const removed = await this.turns.free(() => this.purgeVersions(store, cutoff));
      purged += removed.length;
      await this.contents.removeReplaced(removed);
      if (removed.length < 1000) return purged;
    }
  }

  /**
   * Removes the blob files over an hour old that no node, version or report refers to: contents whose
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
}
