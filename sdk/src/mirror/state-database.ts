// A mirror's state (its identity, cursor and the tag of every entry it holds) in an SQLite
// database (node:sqlite), read and written one entry at a time: a mirror of 100,000 files holds
// none of them in memory, and a batch of changes writes only what changed (docs/cli.md, "The
// marker"). DirectorySink keeps it in a file beside the directory; a sink that keeps its state as
// one record (loadState/saveState) gets one in memory, filled from that record.
//
// Paths are compared as SQLite compares TEXT (memcmp of UTF-8): the order of the server's
// listings (docs/rest.md), so the entries can be walked beside a listing.

import { renameSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import type { DatabaseSync, StatementSync } from "node:sqlite";
import type { MirrorState } from "./sink.js";

export interface MirrorEntry {
  tag: string;
  directory: boolean;
}

/** What makes a sink a mirror's own, and where it resumes. */
export interface MirrorIdentity {
  store: string;
  path: string;
  url?: string | undefined;
  eventId: number;
}

const require = createRequire(import.meta.url);

/** node:sqlite, loaded on first use; its "experimental" warning of Node 22 is not the user's concern. */
function sqlite(): typeof import("node:sqlite") {
  const emit = process.emitWarning;
  process.emitWarning = ((warning: string | Error, ...rest: unknown[]) => {
    if (String(warning).includes("SQLite")) return;
    (emit as (...args: unknown[]) => void).call(process, warning, ...rest);
  }) as typeof process.emitWarning;
  try {
    return require("node:sqlite") as typeof import("node:sqlite");
  } finally {
    process.emitWarning = emit;
  }
}

/** The parent path of a relative path ("" for a top-level name; undefined for "" itself). */
function parentOf(path: string): string | null {
  if (path === "") return null;
  const slash = path.lastIndexOf("/");
  return slash < 0 ? "" : path.slice(0, slash);
}

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS entries (
    path TEXT PRIMARY KEY,
    parent TEXT,
    tag TEXT NOT NULL,
    directory INTEGER NOT NULL
  ) WITHOUT ROWID;
  CREATE INDEX IF NOT EXISTS entries_by_parent ON entries (parent, path);
`;

/** Rows read at once by `pages`. */
export const PAGE = 512;

/** The format of the database: a database of another one is not resumed. */
const FORMAT = "2";

/**
 * The entries and identity of one mirror. Every change is made in a transaction that `commit`
 * ends (a mirror commits after each batch of events and each resync, with the cursor): a mirror
 * that stops in between resumes from the last commit, as it did from the last marker.
 */
export class MirrorDatabase {
  private db: DatabaseSync;
  private readonly statements = new Map<string, StatementSync>();
  private inTransaction = false;
  private closed = false;

  private constructor(
    private file: string,
    private readonly removeOnClose?: string,
    /** Where a new database goes with its first commit (until then it is at `file`). */
    private pendingFinal?: string,
  ) {
    this.db = MirrorDatabase.connect(file);
  }

  private static connect(file: string): DatabaseSync {
    const { DatabaseSync } = sqlite();
    const db = new DatabaseSync(file);
    try {
      // WAL: a commit appends, and a reader (a dry run's copy) sees the last commit. A crash loses
      // at most the batch in progress; a power loss may also lose the last commits, never mix them.
      db.exec("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -2048;");
      db.exec("PRAGMA temp_store = FILE;");
      db.exec(SCHEMA);
    } catch (err) {
      db.close();
      throw err;
    }
    return db;
  }

  /**
   * Opens (or creates) the database in `file`; in memory without one. `removeOnClose`: a
   * directory removed once it is closed (a dry run's copy).
   */
  static open(file?: string, removeOnClose?: string): MirrorDatabase {
    return new MirrorDatabase(file ?? ":memory:", removeOnClose);
  }

  /**
   * A new database at `file` that its first commit moves to `final` (closed, renamed, opened
   * again); closed before that, it is removed: a mirror refused, or stopped before its first
   * copy was complete, leaves no marker.
   */
  static create(file: string, final: string): MirrorDatabase {
    return new MirrorDatabase(file, undefined, final);
  }

  /** A database in memory holding a state kept as one record (a sink's loadState). */
  static fromState(state: MirrorState | undefined): MirrorDatabase {
    const out = MirrorDatabase.open();
    if (state) out.importState(state);
    return out;
  }

  /** Takes over a state kept as one record (the JSON marker of earlier versions), committed. */
  importState(state: MirrorState): void {
    this.clear();
    this.setIdentity(state);
    for (const [path, entry] of Object.entries(state.entries ?? {})) this.set(path, entry);
    this.commit();
  }

  private statement(sql: string): StatementSync {
    let s = this.statements.get(sql);
    if (s === undefined) {
      s = this.db.prepare(sql);
      this.statements.set(sql, s);
    }
    return s;
  }

  /** Runs a statement that changes something, inside the open transaction. */
  private write(sql: string, ...params: (string | number | null)[]): void {
    if (!this.inTransaction) {
      this.db.exec("BEGIN");
      this.inTransaction = true;
    }
    this.statement(sql).run(...params);
  }

  identity(): MirrorIdentity | undefined {
    const rows = this.statement("SELECT key, value FROM meta").all() as { key: string; value: string }[];
    const meta = new Map(rows.map((r) => [r.key, r.value]));
    const store = meta.get("store");
    const path = meta.get("path");
    if (meta.get("format") !== FORMAT || store === undefined || path === undefined) return undefined;
    return { store, path, url: meta.get("url"), eventId: Number(meta.get("eventId") ?? -1) };
  }

  setIdentity(identity: MirrorIdentity): void {
    const set = "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value";
    this.write(set, "format", FORMAT);
    this.write(set, "store", identity.store);
    this.write(set, "path", identity.path);
    if (identity.url === undefined) this.write("DELETE FROM meta WHERE key = 'url'");
    else this.write(set, "url", identity.url);
    this.setEventId(identity.eventId);
  }

  setEventId(eventId: number): void {
    this.write(
      "INSERT INTO meta (key, value) VALUES ('eventId', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
      String(eventId),
    );
  }

  get(path: string): MirrorEntry | undefined {
    const row = this.statement("SELECT tag, directory FROM entries WHERE path = ?").get(path) as
      | { tag: string; directory: number }
      | undefined;
    return row && { tag: row.tag, directory: row.directory === 1 };
  }

  set(path: string, entry: MirrorEntry): void {
    this.write(
      "INSERT INTO entries (path, parent, tag, directory) VALUES (?, ?, ?, ?) ON CONFLICT (path) DO UPDATE SET tag = excluded.tag, directory = excluded.directory",
      path,
      parentOf(path),
      entry.tag,
      entry.directory ? 1 : 0,
    );
  }

  delete(path: string): void {
    this.write("DELETE FROM entries WHERE path = ?", path);
  }

  /** Forgets `path` and everything below it ("": everything). */
  deleteTree(path: string): void {
    if (path === "") this.write("DELETE FROM entries");
    else this.write("DELETE FROM entries WHERE path = ? OR (path >= ? AND path < ?)", path, `${path}/`, `${path}0`);
  }

  /** Forgets every entry and the identity. */
  clear(): void {
    this.write("DELETE FROM entries");
    this.write("DELETE FROM meta");
  }

  /** Whether an entry other than the mirrored directory itself is known. */
  holdsAny(): boolean {
    return this.statement("SELECT 1 FROM entries WHERE path <> '' LIMIT 1").get() !== undefined;
  }

  /** The entries directly in `dir` (one directory's, not the tree's), in path order. */
  children(dir: string): [string, MirrorEntry][] {
    const rows = this.statement("SELECT path, tag, directory FROM entries WHERE parent = ? ORDER BY path").all(dir) as {
      path: string;
      tag: string;
      directory: number;
    }[];
    return rows.map((r) => [r.path, { tag: r.tag, directory: r.directory === 1 }]);
  }

  /** Every entry, in path order, read as it is iterated (nothing may change meanwhile). */
  *entries(): Generator<[string, MirrorEntry]> {
    const rows = this.db.prepare("SELECT path, tag, directory FROM entries ORDER BY path").iterate() as Iterable<{
      path: string;
      tag: string;
      directory: number;
    }>;
    for (const r of rows) yield [r.path, { tag: r.tag, directory: r.directory === 1 }];
  }

  /** The state as one record, for a sink that keeps it so (saveState). */
  toState(): MirrorState {
    const identity = this.identity();
    const entries: MirrorState["entries"] = {};
    for (const [path, entry] of this.entries()) entries[path] = entry;
    return {
      version: 1,
      store: identity?.store ?? "",
      path: identity?.path ?? "",
      ...(identity?.url === undefined ? {} : { url: identity.url }),
      eventId: identity?.eventId ?? -1,
      entries,
    };
  }

  /** Runs SQL of the mirror's own (its resync's scratch tables), inside the open transaction. */
  run(sql: string, ...params: (string | number | null)[]): void {
    this.write(sql, ...params);
  }

  /**
   * The rows `SELECT columns FROM from WHERE where` of the mirror's own tables, in path order, in
   * pages of `PAGE` (the paging clause is added here): a page read at once, and what the caller
   * writes between pages is free to touch the tables read.
   */
  *pages<T extends { path: string }>(columns: string, from: string, where = "true"): Generator<T> {
    const sql = `SELECT ${columns} FROM ${from} WHERE (${where}) AND path > ? ORDER BY path LIMIT ${PAGE}`;
    for (let after = ""; ; ) {
      const page = this.statement(sql).all(after) as unknown as T[];
      yield* page;
      if (page.length < PAGE) return;
      after = (page[page.length - 1] as T).path;
    }
  }

  /** One row of a query of the mirror's own. */
  row<T>(sql: string, ...params: (string | number | null)[]): T | undefined {
    return this.statement(sql).get(...params) as T | undefined;
  }

  commit(): void {
    if (this.inTransaction) this.db.exec("COMMIT");
    this.inTransaction = false;
    const final = this.pendingFinal;
    if (final === undefined) return;
    this.pendingFinal = undefined;
    // Closed first: its write-ahead log is folded in and removed, so no -wal file has the old name.
    this.db.close();
    this.statements.clear();
    renameSync(this.file, final);
    this.file = final;
    this.db = MirrorDatabase.connect(final);
  }

  /** Drops what was not committed, and closes. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.inTransaction) this.db.exec("ROLLBACK");
    this.inTransaction = false;
    this.db.close();
    if (this.removeOnClose !== undefined) rmSync(this.removeOnClose, { recursive: true, force: true });
    if (this.pendingFinal !== undefined) {
      for (const suffix of ["", "-wal", "-shm"]) rmSync(`${this.file}${suffix}`, { force: true });
    }
  }
}
