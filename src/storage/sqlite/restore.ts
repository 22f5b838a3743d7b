// Restores on the embedded backend (docs/backup.md, "Restore"): the archive's records written as
// they are, each batch one transaction of upserts (a re-run writes them again), and the mark of a
// restore in progress that `trove serve` refuses to start on.

import type Database from "better-sqlite3";
import type { NodeRecord, RestoreTarget, StoreRecord, VersionRecord } from "../port.js";
import { upsertParams } from "./rows.js";
import { NODE_ROW, type Statements } from "./schema.js";
import type { SqliteWrites } from "./sqlite-errors.js";

const MARK = "CREATE TABLE IF NOT EXISTS restore_in_progress (archive TEXT NOT NULL)";

export class SqliteRestore {
  private readonly stmt;
  private readonly nodes: (rows: readonly NodeRecord[]) => void;
  private readonly versions: (rows: readonly VersionRecord[]) => void;

  constructor(
    private readonly db: Database.Database,
    statements: Statements,
    private readonly turns: SqliteWrites,
  ) {
    db.exec(MARK);
    this.stmt = {
      mark: db.prepare<[], string>("SELECT archive FROM restore_in_progress LIMIT 1").pluck(),
      stores: db.prepare<[], number>("SELECT count(*) FROM stores").pluck(),
      projects: db.prepare<[], number>("SELECT count(*) FROM projects").pluck(),
      store: db.prepare(
        `INSERT OR REPLACE INTO stores (name, type, settings, deleted, last_event_id, purged_event_id, created, modified, history_from)
         VALUES (@name, @type, @settings, 0, @lastEventId, @purgedEventId, @created, @modified, @historyFrom)`,
      ),
      version: db.prepare<unknown[]>(
        `INSERT OR REPLACE INTO versions (${NODE_ROW}, ended_event_id, ended)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      ),
      // SQLite never holds a version of a current state (docs/history.md, "Recording"), which a
      // MongoDB archive may carry (its crash window): such a version is the node, and is dropped.
      isNode: db
        .prepare<[string, string, number], number>("SELECT 1 FROM nodes WHERE store = ? AND path = ? AND event_id = ?")
        .pluck(),
      dropNodeVersion: db.prepare<[string, string, number]>(
        "DELETE FROM versions WHERE store = ? AND path = ? AND event_id = ?",
      ),
    };
    this.nodes = db.transaction((rows: readonly NodeRecord[]) => {
      for (const n of rows) {
        statements.upsertNode.run(upsertParams(n));
        this.stmt.dropNodeVersion.run(n.store, n.path, n.eventId);
      }
    });
    this.versions = db.transaction((rows: readonly VersionRecord[]) => {
      for (const v of rows) {
        if (this.stmt.isNode.get(v.store, v.path, v.eventId) === undefined) {
          this.stmt.version.run(...upsertParams(v), v.endedEventId, v.ended);
        }
      }
    });
  }

  target(): RestoreTarget {
    const archive = this.stmt.mark.get();
    if (archive !== undefined) return { state: "restoring", archive };
    const stores = this.stmt.stores.get() ?? 0;
    if (stores > 0) return { state: "used", reason: `it holds ${stores} store${stores === 1 ? "" : "s"}` };
    const projects = this.stmt.projects.get() ?? 0;
    if (projects > 0) return { state: "used", reason: `it holds ${projects} project${projects === 1 ? "" : "s"}` };
    return { state: "empty" };
  }

  async begin(archive: string): Promise<void> {
    await this.turns.write(() =>
      this.db.transaction(() => {
        this.db.exec("DELETE FROM restore_in_progress");
        this.db.prepare("INSERT INTO restore_in_progress (archive) VALUES (?)").run(archive);
      })(),
    );
  }

  async finish(): Promise<void> {
    await this.turns.write(() => this.db.exec("DELETE FROM restore_in_progress"));
  }

  async store(s: StoreRecord): Promise<void> {
    await this.turns.write(() =>
      this.stmt.store.run({
        name: s.config.name,
        type: s.config.type,
        settings: JSON.stringify(s.config.settings),
        lastEventId: s.lastEventId,
        purgedEventId: s.purgedEventId,
        created: s.created,
        modified: s.modified,
        historyFrom: s.historyFrom,
      }),
    );
  }

  async importNodes(nodes: readonly NodeRecord[]): Promise<void> {
    await this.turns.write(() => this.nodes(nodes));
  }

  async importVersions(versions: readonly VersionRecord[]): Promise<void> {
    await this.turns.write(() => this.versions(versions));
  }
}
