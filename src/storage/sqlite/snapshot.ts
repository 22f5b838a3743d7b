// Backups on the embedded backend (docs/backup.md, "Consistency"): a store's snapshot hold, kept
// in its row so that every process writing the directory (`--workers`) sees it, and the versions
// that ended by the snapshot's event, read in keyset pages.

import type Database from "better-sqlite3";
import { type EndedVersionsOptions, HOLD_MS, type SnapshotHold, type VersionRecord } from "../port.js";
import { rawVersion, versionRaw } from "./rows.js";
import type { SqliteWrites } from "./sqlite-errors.js";

export class SqliteSnapshots {
  private readonly stmt;

  constructor(
    db: Database.Database,
    private readonly turns: SqliteWrites,
  ) {
    this.stmt = {
      // A new hold's lapse differs from any hold's before it, so that a release ends only its own.
      hold: db.prepare<[number, string], { last_event_id: number; snapshot_until: number }>(
        `UPDATE stores SET snapshot_until = MAX(snapshot_until + 1, ?) WHERE name = ? AND deleted = 0
         RETURNING last_event_id, snapshot_until`,
      ),
      renew: db.prepare<[number, string, number]>(
        "UPDATE stores SET snapshot_until = ? WHERE name = ? AND snapshot_until = ?",
      ),
      release: db.prepare<[string, number]>(
        "UPDATE stores SET snapshot_until = 0 WHERE name = ? AND snapshot_until = ?",
      ),
      held: db.prepare<[number], string>("SELECT name FROM stores WHERE snapshot_until > ?").pluck(),
      ended: ended(db, false),
      endedWithContents: ended(db, true),
      nextPath: db
        .prepare<[string, string], string>(
          "SELECT path FROM versions WHERE store = (SELECT ?) AND path > (SELECT ?) ORDER BY path LIMIT 1",
        )
        .pluck(),
    };
  }

  /** The stores whose hold has not lapsed: the purge leaves them alone. */
  heldStores(): Set<string> {
    return new Set(this.stmt.held.all(Date.now()));
  }

  async hold(store: string): Promise<SnapshotHold | undefined> {
    const row = await this.turns.write(() => this.stmt.hold.get(Date.now() + HOLD_MS, store));
    if (!row) return undefined;
    let until = row.snapshot_until;
    return {
      store,
      eventId: row.last_event_id,
      renew: async () => {
        const next = Math.max(until + 1, Date.now() + HOLD_MS);
        const changed = await this.turns.write(() => this.stmt.renew.run(next, store, until).changes);
        if (changed > 0) until = next;
        return changed > 0;
      },
      release: async () => {
        try {
          await this.turns.write(() => this.stmt.release.run(store, until));
        } catch {
          // It lapses by itself: HOLD_MS at most.
        }
      },
    };
  }

  /**
   * The versions ended by `upTo`, by path then event, each page a seek: the rest of the current
   * path's states (`versions_states`), then the next path that has any. One query over `path > ?
   * OR (path = ? AND event_id > ?)` scanned the store's versions from the start on every page, and
   * read each row's `ended_event_id` past its inline contents: 108 s for 300,000 versions, up to
   * 0.7 s a page on the event loop (issue 28).
   */
  async *listEnded(store: string, upTo: number, options: EndedVersionsOptions): AsyncIterable<VersionRecord[]> {
    const limit = Math.max(1, options.batchSize ?? 1000);
    const statement = options.contents ? this.stmt.endedWithContents : this.stmt.ended;
    let batch: VersionRecord[] = [];
    for (let path: string | undefined = "", event = -1; path !== undefined; ) {
      const want = limit - batch.length;
      const rows = statement.all(store, path, event, upTo, want);
      for (const r of rows) batch.push(rawVersion(store, r[0] as string, r, 1));
      if (rows.length === want) {
        event = (batch.at(-1) as VersionRecord).eventId;
        yield batch;
        batch = [];
      } else {
        path = this.stmt.nextPath.get(store, path);
        event = -1;
      }
    }
    if (batch.length > 0) yield batch;
  }
}

/** A path's versions ended by an event, after an event of theirs, in event order; with their inline contents when asked. */
function ended(db: Database.Database, contents: boolean) {
  return db
    .prepare<[string, string, number, number, number], unknown[]>(
      `SELECT ${versionRaw(contents)} FROM versions n WHERE n.store = (SELECT ?) AND n.path = (SELECT ?) AND n.event_id > ?
         AND n.ended_event_id <= ? ORDER BY n.event_id LIMIT (SELECT ?)`,
    )
    .raw(true);
}
