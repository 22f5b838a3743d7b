// The SQLite adapter's tables, applied at every open (a data directory made by an earlier
// version gains what it lacks), and every statement the adapter runs, prepared once.

import type Database from "better-sqlite3";
import {
  currentRaw,
  LISTED_RAW,
  NODE_COLUMNS,
  NODE_TIMES,
  type NodeRow,
  STORE_NODE_FROM,
  STORE_NODE_KEY,
  type StoreRow,
  VERSION_RAW,
  type VersionRow,
  versionRaw,
} from "./rows.js";

/**
 * A state whose `modified` is the time of the event that made it: every state but a re-tagged
 * live directory's. Written identically in the partial indexes and the queries that use them
 * (SQLite uses a partial index only for a query that repeats its condition).
 */
const NOT_RETAG = "(directory = 0 OR deleted = 1 OR prev_tag = '')";
/** A state whose contents are a blob file (not inline, not a directory or tombstone). */
const BLOB_FILE = "inline IS NULL AND blob != ''";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS stores (
  name TEXT PRIMARY KEY,
  type TEXT NOT NULL,
  settings TEXT NOT NULL,
  deleted INTEGER NOT NULL DEFAULT 0,
  last_event_id INTEGER NOT NULL DEFAULT 0,
  purged_event_id INTEGER NOT NULL DEFAULT 0,
  created INTEGER NOT NULL,
  modified INTEGER NOT NULL,
  history_from INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS nodes (
  store TEXT NOT NULL,
  path TEXT NOT NULL,
  parent TEXT,
  directory INTEGER NOT NULL,
  deleted INTEGER NOT NULL DEFAULT 0,
  tag TEXT NOT NULL,
  prev_tag TEXT NOT NULL DEFAULT '',
  type TEXT NOT NULL DEFAULT '',
  size INTEGER NOT NULL DEFAULT 0,
  md5 TEXT NOT NULL DEFAULT '',
  blob TEXT NOT NULL DEFAULT '',
  inline BLOB,
  created INTEGER NOT NULL,
  modified INTEGER NOT NULL,
  event_id INTEGER NOT NULL,
  user TEXT NOT NULL DEFAULT '',
  UNIQUE (store, path)
);
CREATE INDEX IF NOT EXISTS nodes_children ON nodes (store, parent, path);
CREATE INDEX IF NOT EXISTS nodes_events ON nodes (store, event_id);
CREATE INDEX IF NOT EXISTS nodes_tombstones ON nodes (deleted, modified) WHERE deleted = 1;
CREATE TABLE IF NOT EXISTS versions (
  store TEXT NOT NULL,
  path TEXT NOT NULL,
  parent TEXT,
  directory INTEGER NOT NULL,
  deleted INTEGER NOT NULL,
  tag TEXT NOT NULL,
  prev_tag TEXT NOT NULL,
  type TEXT NOT NULL,
  size INTEGER NOT NULL,
  md5 TEXT NOT NULL,
  blob TEXT NOT NULL,
  inline BLOB,
  created INTEGER NOT NULL,
  modified INTEGER NOT NULL,
  event_id INTEGER NOT NULL,
  user TEXT NOT NULL,
  ended_event_id INTEGER NOT NULL,
  ended INTEGER NOT NULL
);
`;

/**
 * Columns added since the first release, with their definitions: a database made before gains
 * them in place (ALTER TABLE ADD COLUMN), with what their rows mean. `fill` runs once, right after.
 */
const ADDED_COLUMNS: ReadonlyArray<{ table: string; column: string; definition: string; fill?: string }> = [
  { table: "nodes", column: "user", definition: "TEXT NOT NULL DEFAULT ''" },
  {
    table: "stores",
    column: "history_from",
    definition: "INTEGER NOT NULL DEFAULT 0",
    // No state before now was kept: a store's history starts at its last event.
    fill: "UPDATE stores SET history_from = last_event_id",
  },
  // A backup's snapshot hold (snapshot.ts): until when, Unix ms; 0 for none.
  { table: "stores", column: "snapshot_until", definition: "INTEGER NOT NULL DEFAULT 0" },
];

/**
 * The indexes of history (docs/history.md, "SQLite"), made after the columns they name exist.
 * A "re-tag state" is a live directory whose tag a change below it replaced (prev_tag set): its
 * `modified` is that of an earlier change, so the indexes of times leave it out.
 */
const INDEXES = `
CREATE UNIQUE INDEX IF NOT EXISTS versions_states ON versions (store, path, event_id DESC);
DROP INDEX IF EXISTS versions_children;
DROP INDEX IF EXISTS versions_file_paths;
DROP INDEX IF EXISTS versions_file_children;
CREATE INDEX IF NOT EXISTS versions_file_lives ON versions (store, path, event_id, ended_event_id) WHERE directory = 0;
CREATE INDEX IF NOT EXISTS versions_file_child_lives ON versions (store, parent, path, event_id, ended_event_id) WHERE directory = 0;
CREATE INDEX IF NOT EXISTS versions_dir_paths ON versions (store, path) WHERE directory = 1;
CREATE INDEX IF NOT EXISTS versions_dir_children ON versions (store, parent, path) WHERE directory = 1;
CREATE INDEX IF NOT EXISTS versions_ended ON versions (store, ended, ended_event_id);
CREATE INDEX IF NOT EXISTS versions_times ON versions (store, modified, event_id) WHERE ${NOT_RETAG};
CREATE INDEX IF NOT EXISTS versions_blobs ON versions (blob) WHERE ${BLOB_FILE};
CREATE INDEX IF NOT EXISTS nodes_times ON nodes (store, modified, event_id) WHERE ${NOT_RETAG};
CREATE INDEX IF NOT EXISTS nodes_blobs ON nodes (blob) WHERE ${BLOB_FILE};
`;

/** Creates what the database lacks of the adapter's tables, columns and indexes, in one transaction. */
export function applySchema(db: Database.Database): void {
  db.transaction(() => {
    db.exec(SCHEMA);
    for (const { table, column, definition, fill } of ADDED_COLUMNS) {
      const columns = db.prepare<[], { name: string }>(`PRAGMA table_info(${table})`).all();
      if (columns.some((c) => c.name === column)) continue;
      db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${definition}`);
      if (fill) db.exec(fill);
    }
    db.exec(INDEXES);
  }).immediate();
}

/** A prepared statement: its bound parameters, and the row it returns. */
type Stmt<P extends unknown[] = unknown[], R = unknown> = Database.Statement<P, R>;
/** A statement bound by name. */
type Named<R = unknown> = Database.Statement<[Record<string, unknown>], R>;

/** Every statement of the resources part, prepared once (insights prepare their own). */
export interface Statements {
  getStore: Stmt<[string], StoreRow>;
  listStores: Stmt<[], StoreRow>;
  insertStore: Stmt;
  reviveStore: Stmt;
  updateStore: Stmt;
  /** Turning keep-versions on: the store's states are kept from its last event on. */
  startHistory: Stmt<[string]>;
  setHistoryFrom: Stmt<[number, string]>;
  raiseHistoryFrom: Stmt<[number, string]>;
  buryStore: Stmt;
  nextEventId: Stmt<[number, string], number>;
  getNode: Stmt<[string, string], NodeRow>;
  storeNode: Stmt<[string, string], unknown[]>;
  storeNodeMetadata: Stmt<[string, string], unknown[]>;
  nodeMetadata: Stmt<[string, string], unknown[]>;
  inlineOf: Stmt<[string, string, string], unknown[]>;
  liveStoreConfig: Stmt<[string], unknown[]>;
  upsertNode: Stmt<unknown[]>;
  retag: Stmt;
  children: Stmt<[string, string, string, number], unknown[]>;
  descendants: Stmt<[string, string, string, number], unknown[]>;
  belowRoot: Stmt<[string, string, number], unknown[]>;
  liveSubtree: Stmt<[string, string, string, string], NodeRow>;
  deleteStoreNodes: Stmt<[string], { blob: string; inline: Buffer | null }>;
  expiredTombstones: Stmt<[string, number], { path: string; event_id: number }>;
  deleteNode: Stmt;
  raisePurged: Stmt;
  changesSince: Stmt<[string, number, number], NodeRow>;
  blobInUse: Stmt<[string, string], number>;
  blobFiles: Stmt<[], string>;
  /** Keeps the node at a path as a version (bound: ended event id, ended, store, path); nothing when there is none. */
  keepVersion: Stmt<[number, number, string, string]>;
  /** A path's kept states before an event, newest first (raw, VERSION_RAW; bound: store, path, event, limit). */
  versionsBefore: Stmt<[string, string, number, number], unknown[]>;
  versionByTag: Stmt<[string, string, string], VersionRow>;
  /** A path's latest kept state made at or before an event (bound: store, path, event). */
  versionAtOrBefore: Stmt<[string, string, number], VersionRow>;
  versionInlineOf: Stmt<[string, string, string], unknown[]>;
  childrenAsOf: Named<unknown[]>;
  descendantsAsOf: Named<unknown[]>;
  belowRootAsOf: Named<unknown[]>;
  /** The three above with the inline contents in their column (ListOptions.contents: a backup's read). */
  childrenAsOfWithContents: Named<unknown[]>;
  descendantsAsOfWithContents: Named<unknown[]>;
  belowRootAsOfWithContents: Named<unknown[]>;
  childDirsAsOf: Named<unknown[]>;
  descendantDirsAsOf: Named<unknown[]>;
  dirsBelowRootAsOf: Named<unknown[]>;
  nodeEventAt: Stmt<[string, number], number>;
  versionEventAt: Stmt<[string, number], number>;
  endedEventAt: Stmt<[string, number], number>;
  /** The nodes' events after one, in order, and whether each is a re-tag (bound: store, event, limit). */
  eventsAfter: Stmt<[string, number, number], unknown[]>;
  deleteStoreVersions: Stmt<[string], { blob: string; inlined: number }>;
  /** Removes up to 1,000 of a store's versions ended at or before a time (bound: store, time). */
  purgeVersions: Stmt<[string, number], { blob: string; inlined: number; ended_event_id: number }>;
}

/**
 * A key in a statement that orders or limits its rows: the bound parameter compared with an
 * indexed column goes through a scalar subquery, and the limit through an expression. SQLite 3.54
 * marks a parameter compared by equality with an indexed column of such a statement (and a bound
 * LIMIT) as one whose value may change the plan, and prepares the statement again on every
 * execution: 8-20 µs more per execution, 10 times an empty poll of the feed (docs/runtime.md,
 * "The re-prepared join"). A range bound (`path > ?`, `event_id <= ?`) is not marked.
 */
const KEY = "(SELECT ?)";
const LIMIT = "LIMIT ? + 0";
/** KEY of a named parameter. */
function key(name: string): string {
  return `(SELECT @${name})`;
}

/**
 * The states of a listing as of an event (named: store, dir or after/high, event, limit): the
 * nodes made at or before it, and the kept file states (tombstones included) whose life holds
 * it, merged in path order; directories' kept states are dirStatesAsOf's. SQLite never holds a
 * version whose event is its node's (MongoDB's crash window): the write and the versions it keeps
 * commit together, so this does not look for one (a third of its cost). The kept states are read
 * by the index that holds their lives (named: the planner took `versions_states`, which does not),
 * so that only those whose life holds the event are read from the table, past their contents.
 */
function statesAsOf(where: (alias: string, after: string) => string, contents = false): string {
  return `SELECT ${currentRaw(contents)} FROM nodes n WHERE n.store = ${key("store")} AND ${where("n", "@after")} AND n.event_id <= @event
    UNION ALL
    SELECT ${versionRaw(contents)} FROM versions n INDEXED BY ${where === CHILDREN ? "versions_file_child_lives" : "versions_file_lives"}
      WHERE n.store = ${key("store")} AND n.directory = 0 AND ${where("n", "@after")}
      AND n.event_id <= @event AND n.ended_event_id > @event
    ORDER BY 1 LIMIT @limit + 0`;
}

/**
 * The kept directory states of a listing as of an event (named: store, dir or after/high, event,
 * limit). A directory keeps a state per change below it, so walking them all would cost a listing
 * the store's writes rather than its tree: this visits each directory path once (the next path
 * after the last, one seek in `versions_dir_*`) and seeks its latest state made by the event,
 * which is the one whose life may hold it (lives do not overlap). One row per path visited, up to
 * `limit`: its path, then VERSION_RAW, NULL when no kept state of it holds the event (its node
 * does, or it did not exist then); the caller goes on from the last path visited.
 */
function dirStatesAsOf(where: (alias: string, after: string) => string): string {
  const next = (after: string) =>
    `(SELECT d.path FROM versions d WHERE d.store = ${key("store")} AND d.directory = 1 AND ${where("d", after)} ORDER BY d.path LIMIT 1)`;
  return `WITH RECURSIVE dirs(path) AS (
      SELECT ${next("@after")}
      UNION ALL
      SELECT ${next("dirs.path")} FROM dirs WHERE dirs.path IS NOT NULL
      LIMIT @limit + 0
    )
    SELECT dirs.path, ${VERSION_RAW} FROM dirs LEFT JOIN versions n ON n.rowid = (
      SELECT s.rowid FROM versions s WHERE s.store = ${key("store")} AND s.path = dirs.path AND s.directory = 1
        AND s.event_id <= @event ORDER BY s.event_id DESC LIMIT 1
    ) AND n.ended_event_id > @event
    WHERE dirs.path IS NOT NULL`;
}

/** The three ranges of a listing as of an event: a directory's children, below a directory, below the root. */
const CHILDREN = (a: string, after: string) => `${a}.parent = ${key("dir")} AND ${a}.path > ${after}`;
const DESCENDANTS = (a: string, after: string) => `${a}.path > ${after} AND ${a}.path < @high`;
const BELOW_ROOT = (a: string, after: string) => `${a}.path > ${after}`;

/** A node row's columns in order (upsertParams), also the first columns of a version row. */
export const NODE_ROW =
  "store, path, parent, directory, deleted, tag, prev_tag, type, size, md5, blob, inline, created, modified, event_id, user";

export function prepareStatements(db: Database.Database): Statements {
  const storeColumns = `s.*, (SELECT tag FROM nodes WHERE store = s.name AND path = '') AS root_tag`;
  return {
    getStore: db.prepare<[string], StoreRow>(`SELECT ${storeColumns} FROM stores s WHERE name = ?`),
    listStores: db.prepare<[], StoreRow>(`SELECT ${storeColumns} FROM stores s WHERE deleted = 0 ORDER BY name`),
    insertStore: db.prepare(
      "INSERT INTO stores (name, type, settings, created, modified) VALUES (@name, @type, @settings, @now, @now)",
    ),
    reviveStore: db.prepare(
      "UPDATE stores SET type = @type, settings = @settings, deleted = 0, purged_event_id = last_event_id, created = @now, modified = @now WHERE name = @name",
    ),
    updateStore: db.prepare(
      "UPDATE stores SET type = @type, settings = @settings, modified = @now WHERE name = @name AND deleted = 0",
    ),
    startHistory: db.prepare<[string]>("UPDATE stores SET history_from = last_event_id WHERE name = ?"),
    setHistoryFrom: db.prepare<[number, string]>("UPDATE stores SET history_from = ? WHERE name = ?"),
    raiseHistoryFrom: db.prepare<[number, string]>(
      "UPDATE stores SET history_from = MAX(history_from, ?) WHERE name = ?",
    ),
    buryStore: db.prepare(
      // Deleting a store is an event of its own: every cursor taken before it is stale (RESET).
      "UPDATE stores SET deleted = 1, modified = @now, last_event_id = last_event_id + 1, purged_event_id = last_event_id + 1 WHERE name = @name",
    ),
    nextEventId: db
      .prepare<[number, string], number>(
        "UPDATE stores SET last_event_id = last_event_id + ? WHERE name = ? AND deleted = 0 RETURNING last_event_id",
      )
      .pluck(true),
    getNode: db.prepare<[string, string], NodeRow>("SELECT * FROM nodes WHERE store = ? AND path = ?"),
    // Store and node in one statement, one read transaction (raw: type, settings, then rawNode's columns).
    storeNode: db
      .prepare<[string, string], unknown[]>(
        `${STORE_NODE_KEY} SELECT s.type, s.settings, ${NODE_COLUMNS}, n.inline, ${NODE_TIMES} ${STORE_NODE_FROM}`,
      )
      .raw(true),
    storeNodeMetadata: db
      .prepare<[string, string], unknown[]>(
        `${STORE_NODE_KEY} SELECT s.type, s.settings, ${NODE_COLUMNS}, NULL, ${NODE_TIMES} ${STORE_NODE_FROM}`,
      )
      .raw(true),
    // A node without its contents, but with whether it has inline ones (rawNode's columns).
    nodeMetadata: db
      .prepare<[string, string], unknown[]>(
        `SELECT ${NODE_COLUMNS}, n.inline IS NOT NULL, ${NODE_TIMES} FROM nodes n WHERE n.store = ? AND n.path = ?`,
      )
      .raw(true),
    inlineOf: db
      .prepare<[string, string, string], unknown[]>(
        "SELECT inline FROM nodes WHERE store = ? AND path = ? AND blob = ?",
      )
      .raw(true),
    liveStoreConfig: db
      .prepare<[string], unknown[]>("SELECT type, settings, snapshot_until FROM stores WHERE name = ? AND deleted = 0")
      .raw(true),
    // Positional parameters (upsertParams): binding sixteen by name costs more than the rest.
    upsertNode: db.prepare<unknown[]>(
      `INSERT INTO nodes (${NODE_ROW})
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (store, path) DO UPDATE SET directory = excluded.directory, deleted = excluded.deleted, tag = excluded.tag,
           prev_tag = excluded.prev_tag, type = excluded.type, size = excluded.size, md5 = excluded.md5, blob = excluded.blob,
           inline = excluded.inline, created = excluded.created, modified = excluded.modified, event_id = excluded.event_id,
           user = excluded.user`,
    ),
    retag: db.prepare(
      "UPDATE nodes SET prev_tag = tag, tag = @tag, event_id = @eventId, user = @user WHERE store = @store AND path = @path",
    ),
    // Listings: raw rows of the path then rawNode's columns, without the contents.
    children: db
      .prepare<[string, string, string, number], unknown[]>(
        `SELECT ${LISTED_RAW} FROM nodes n WHERE n.store = ${KEY} AND n.parent = ${KEY} AND n.path > ? ORDER BY n.path ${LIMIT}`,
      )
      .raw(true),
    descendants: db
      .prepare<[string, string, string, number], unknown[]>(
        `SELECT ${LISTED_RAW} FROM nodes n WHERE n.store = ${KEY} AND n.path > ? AND n.path < ? ORDER BY n.path ${LIMIT}`,
      )
      .raw(true),
    // Below the root: every path but "". No upper bound: descendantRange's U+10FFFF would leave out names starting with it.
    belowRoot: db
      .prepare<[string, string, number], unknown[]>(
        `SELECT ${LISTED_RAW} FROM nodes n WHERE n.store = ${KEY} AND n.path > ? ORDER BY n.path ${LIMIT}`,
      )
      .raw(true),
    liveSubtree: db.prepare<[string, string, string, string], NodeRow>(
      "SELECT * FROM nodes WHERE store = ? AND (path = ? OR (path >= ? AND path < ?)) AND deleted = 0 ORDER BY path",
    ),
    deleteStoreNodes: db.prepare<[string], { blob: string; inline: Buffer | null }>(
      "DELETE FROM nodes WHERE store = ? RETURNING blob, inline",
    ),
    expiredTombstones: db.prepare<[string, number], { path: string; event_id: number }>(
      `SELECT path, event_id FROM nodes WHERE deleted = 1 AND store = ${KEY} AND modified <= ? ORDER BY modified LIMIT 1000`,
    ),
    deleteNode: db.prepare("DELETE FROM nodes WHERE store = ? AND path = ? AND deleted = 1 AND event_id = ?"),
    raisePurged: db.prepare("UPDATE stores SET purged_event_id = MAX(purged_event_id, ?) WHERE name = ?"),
    changesSince: db.prepare<[string, number, number], NodeRow>(
      `SELECT store, path, directory, deleted, tag, prev_tag, type, size, md5, blob, NULL AS inline, created, modified, event_id, user
         FROM nodes WHERE store = ${KEY} AND event_id > ? ORDER BY event_id ${LIMIT}`,
    ),
    // A blob file is live while a node or a version points at it (a restore shares it).
    blobInUse: db
      .prepare<[string, string], number>(
        `SELECT 1 FROM nodes WHERE blob = ${KEY} AND ${BLOB_FILE} UNION ALL SELECT 1 FROM versions WHERE blob = ${KEY} AND ${BLOB_FILE} LIMIT 1`,
      )
      .pluck(),
    blobFiles: db
      .prepare<[], string>(
        `SELECT blob FROM nodes WHERE ${BLOB_FILE} UNION SELECT blob FROM versions WHERE ${BLOB_FILE}`,
      )
      .pluck(),
    keepVersion: db.prepare<[number, number, string, string]>(
      `INSERT INTO versions (${NODE_ROW}, ended_event_id, ended) SELECT ${NODE_ROW}, ?, ? FROM nodes WHERE store = ? AND path = ?`,
    ),
    versionsBefore: db
      .prepare<[string, string, number, number], unknown[]>(
        `SELECT ${VERSION_RAW} FROM versions n WHERE n.store = ${KEY} AND n.path = ${KEY} AND n.event_id < ? ORDER BY n.event_id DESC ${LIMIT}`,
      )
      .raw(true),
    versionByTag: db.prepare<[string, string, string], VersionRow>(
      `SELECT * FROM versions WHERE store = ${KEY} AND path = ${KEY} AND tag = ${KEY} ORDER BY event_id DESC LIMIT 1`,
    ),
    versionAtOrBefore: db.prepare<[string, string, number], VersionRow>(
      `SELECT * FROM versions WHERE store = ${KEY} AND path = ${KEY} AND event_id <= ? ORDER BY event_id DESC LIMIT 1`,
    ),
    versionInlineOf: db
      .prepare<[string, string, string], unknown[]>(
        `SELECT inline FROM versions WHERE store = ${KEY} AND path = ${KEY} AND blob = ${KEY} AND inline IS NOT NULL LIMIT 1`,
      )
      .raw(true),
    childrenAsOf: db.prepare<[Record<string, unknown>], unknown[]>(statesAsOf(CHILDREN)).raw(true),
    descendantsAsOf: db.prepare<[Record<string, unknown>], unknown[]>(statesAsOf(DESCENDANTS)).raw(true),
    belowRootAsOf: db.prepare<[Record<string, unknown>], unknown[]>(statesAsOf(BELOW_ROOT)).raw(true),
    childrenAsOfWithContents: db.prepare<[Record<string, unknown>], unknown[]>(statesAsOf(CHILDREN, true)).raw(true),
    descendantsAsOfWithContents: db
      .prepare<[Record<string, unknown>], unknown[]>(statesAsOf(DESCENDANTS, true))
      .raw(true),
    belowRootAsOfWithContents: db.prepare<[Record<string, unknown>], unknown[]>(statesAsOf(BELOW_ROOT, true)).raw(true),
    childDirsAsOf: db.prepare<[Record<string, unknown>], unknown[]>(dirStatesAsOf(CHILDREN)).raw(true),
    descendantDirsAsOf: db.prepare<[Record<string, unknown>], unknown[]>(dirStatesAsOf(DESCENDANTS)).raw(true),
    dirsBelowRootAsOf: db.prepare<[Record<string, unknown>], unknown[]>(dirStatesAsOf(BELOW_ROOT)).raw(true),
    // The last event at or before a time: the time order of each index, ties to the larger event.
    nodeEventAt: db
      .prepare<[string, number], number>(
        `SELECT event_id FROM nodes WHERE store = ${KEY} AND modified <= ? AND ${NOT_RETAG} ORDER BY modified DESC, event_id DESC LIMIT 1`,
      )
      .pluck(),
    versionEventAt: db
      .prepare<[string, number], number>(
        `SELECT event_id FROM versions WHERE store = ${KEY} AND modified <= ? AND ${NOT_RETAG} ORDER BY modified DESC, event_id DESC LIMIT 1`,
      )
      .pluck(),
    endedEventAt: db
      .prepare<[string, number], number>(
        `SELECT ended_event_id FROM versions WHERE store = ${KEY} AND ended <= ? ORDER BY ended DESC, ended_event_id DESC LIMIT 1`,
      )
      .pluck(),
    eventsAfter: db
      .prepare<[string, number, number], unknown[]>(
        `SELECT event_id, NOT ${NOT_RETAG} FROM nodes WHERE store = ${KEY} AND event_id > ? ORDER BY event_id ${LIMIT}`,
      )
      .raw(true),
    deleteStoreVersions: db.prepare<[string], { blob: string; inlined: number }>(
      "DELETE FROM versions WHERE store = ? RETURNING blob, inline IS NOT NULL AS inlined",
    ),
    purgeVersions: db.prepare<[string, number], { blob: string; inlined: number; ended_event_id: number }>(
      `DELETE FROM versions WHERE rowid IN (SELECT rowid FROM versions WHERE store = ${KEY} AND ended <= ? ORDER BY ended LIMIT 1000)
         RETURNING blob, inline IS NOT NULL AS inlined, ended_event_id`,
    ),
  };
}
