// The SQLite adapter's tables, applied at every open (a data directory made by an earlier
// version gains what it lacks), and every statement the adapter runs, prepared once.

import type Database from "better-sqlite3";
import {
  LISTED_RAW,
  NODE_COLUMNS,
  NODE_TIMES,
  type NodeRow,
  STORE_NODE_FROM,
  STORE_NODE_KEY,
  type StoreRow,
} from "./rows.js";

const SCHEMA = `
CREATE TABLE IF NOT EXISTS stores (
  name TEXT PRIMARY KEY,
  type TEXT NOT NULL,
  settings TEXT NOT NULL,
  deleted INTEGER NOT NULL DEFAULT 0,
  last_event_id INTEGER NOT NULL DEFAULT 0,
  purged_event_id INTEGER NOT NULL DEFAULT 0,
  created INTEGER NOT NULL,
  modified INTEGER NOT NULL
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
  UNIQUE (store, path)
);
CREATE INDEX IF NOT EXISTS nodes_children ON nodes (store, parent, path);
CREATE INDEX IF NOT EXISTS nodes_events ON nodes (store, event_id);
CREATE INDEX IF NOT EXISTS nodes_tombstones ON nodes (deleted, modified) WHERE deleted = 1;
`;

/** Creates what the database lacks of the adapter's tables and indexes. */
export function applySchema(db: Database.Database): void {
  db.exec(SCHEMA);
}

/** A prepared statement: its bound parameters, and the row it returns. */
type Stmt<P extends unknown[] = unknown[], R = unknown> = Database.Statement<P, R>;

/** Every statement of the resources part, prepared once (insights prepare their own). */
export interface Statements {
  getStore: Stmt<[string], StoreRow>;
  listStores: Stmt<[], StoreRow>;
  insertStore: Stmt;
  reviveStore: Stmt;
  updateStore: Stmt;
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
  blobInUse: Stmt<[string], { n: number }>;
  blobFiles: Stmt<[], string>;
}

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
      .prepare<[string], unknown[]>("SELECT type, settings FROM stores WHERE name = ? AND deleted = 0")
      .raw(true),
    // Positional parameters (upsertParams): binding fifteen by name costs more than the rest.
    upsertNode: db.prepare<unknown[]>(
      `INSERT INTO nodes (store, path, parent, directory, deleted, tag, prev_tag, type, size, md5, blob, inline, created, modified, event_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (store, path) DO UPDATE SET directory = excluded.directory, deleted = excluded.deleted, tag = excluded.tag,
           prev_tag = excluded.prev_tag, type = excluded.type, size = excluded.size, md5 = excluded.md5, blob = excluded.blob,
           inline = excluded.inline, created = excluded.created, modified = excluded.modified, event_id = excluded.event_id`,
    ),
    retag: db.prepare(
      "UPDATE nodes SET prev_tag = tag, tag = @tag, event_id = @eventId WHERE store = @store AND path = @path",
    ),
    // Listings: raw rows of the path then rawNode's columns, without the contents.
    children: db
      .prepare<[string, string, string, number], unknown[]>(
        `SELECT ${LISTED_RAW} FROM nodes n WHERE n.store = ? AND n.parent = ? AND n.path > ? ORDER BY n.path LIMIT ?`,
      )
      .raw(true),
    descendants: db
      .prepare<[string, string, string, number], unknown[]>(
        `SELECT ${LISTED_RAW} FROM nodes n WHERE n.store = ? AND n.path > ? AND n.path < ? ORDER BY n.path LIMIT ?`,
      )
      .raw(true),
    // Below the root: every path but "". No upper bound: descendantRange's U+10FFFF would leave out names starting with it.
    belowRoot: db
      .prepare<[string, string, number], unknown[]>(
        `SELECT ${LISTED_RAW} FROM nodes n WHERE n.store = ? AND n.path > ? ORDER BY n.path LIMIT ?`,
      )
      .raw(true),
    liveSubtree: db.prepare<[string, string, string, string], NodeRow>(
      "SELECT * FROM nodes WHERE store = ? AND (path = ? OR (path >= ? AND path < ?)) AND deleted = 0 ORDER BY path",
    ),
    deleteStoreNodes: db.prepare<[string], { blob: string; inline: Buffer | null }>(
      "DELETE FROM nodes WHERE store = ? RETURNING blob, inline",
    ),
    expiredTombstones: db.prepare<[string, number], { path: string; event_id: number }>(
      "SELECT path, event_id FROM nodes WHERE deleted = 1 AND store = ? AND modified <= ? ORDER BY modified LIMIT 1000",
    ),
    deleteNode: db.prepare("DELETE FROM nodes WHERE store = ? AND path = ? AND deleted = 1 AND event_id = ?"),
    raisePurged: db.prepare("UPDATE stores SET purged_event_id = MAX(purged_event_id, ?) WHERE name = ?"),
    changesSince: db.prepare<[string, number, number], NodeRow>(
      `SELECT store, path, directory, deleted, tag, prev_tag, type, size, md5, blob, NULL AS inline, created, modified, event_id
         FROM nodes WHERE store = ? AND event_id > ? ORDER BY event_id LIMIT ?`,
    ),
    blobInUse: db.prepare<[string], { n: number }>("SELECT 1 AS n FROM nodes WHERE blob = ? LIMIT 1"),
    blobFiles: db.prepare<[], string>("SELECT blob FROM nodes WHERE inline IS NULL AND blob != ''").pluck(),
  };
}
