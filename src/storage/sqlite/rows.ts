// The SQLite adapter's rows as the port's records, and back: stores, nodes, and the raw
// (array) rows of the hot reads, whose column lists live here beside the code that reads them.

import { newTag } from "../../domain/etag.js";
import { parentOf } from "../../domain/path.js";
import type { StoreConfig, StoreType } from "../../domain/store.js";
import type { NodeRecord, StoreRecord, VersionRecord } from "../port.js";

export interface NodeRow {
  store: string;
  path: string;
  directory: number;
  deleted: number;
  tag: string;
  prev_tag: string;
  type: string;
  size: number;
  md5: string;
  blob: string;
  inline: Buffer | null;
  created: number;
  modified: number;
  event_id: number;
  user: string;
}

/** A kept state: a node's columns, and the event and time that ended it. */
export interface VersionRow extends NodeRow {
  ended_event_id: number;
  ended: number;
}

export interface StoreRow {
  name: string;
  type: string;
  settings: string;
  deleted: number;
  last_event_id: number;
  purged_event_id: number;
  history_from: number;
  created: number;
  modified: number;
  root_tag: string | null;
}

export function toNode(row: NodeRow): NodeRecord {
  return {
    store: row.store,
    path: row.path,
    directory: row.directory === 1,
    deleted: row.deleted === 1,
    tag: row.tag,
    prevTag: row.prev_tag,
    type: row.type,
    size: row.size,
    md5: row.md5,
    blob: row.blob,
    inline: row.inline,
    created: row.created,
    modified: row.modified,
    eventId: row.event_id,
    user: row.user,
  };
}

export function toVersion(row: VersionRow): VersionRecord {
  return { ...toNode(row), user: row.user, endedEventId: row.ended_event_id, ended: row.ended };
}

/** The current node as a state of its path: one that no event has ended yet. */
export function currentState(node: NodeRecord): VersionRecord {
  return { ...node, user: node.user ?? "", endedEventId: 0, ended: 0 };
}

// The hot reads return rows as arrays (better-sqlite3's raw mode): a keyed row object costs the
// interning of every column name of every row, more than the SQLite lookup itself.
export const NODE_COLUMNS = "n.directory, n.deleted, n.tag, n.prev_tag, n.type, n.size, n.md5, n.blob";
/** The columns after the contents: the times, the event that made the state, and its user. */
export const NODE_TIMES = "n.created, n.modified, n.event_id, n.user";
/**
 * getStoreNode's store and node in one statement, one read transaction (bound: path, store). The
 * key comes in as a one-row table rather than as parameters in the join: SQLite 3.54 (better-sqlite3
 * 13) marks a bound parameter that a join compares with an indexed column as one whose new value
 * may change the plan (STAT4), so every execution re-prepared the statement: 7-8 µs more per read,
 * four fifths of the read, and 40 % of a GET's CPU (docs/benchmarks.md, "SQLite binding").
 */
export const STORE_NODE_KEY = "WITH k(path, store) AS (VALUES (?, ?))";
export const STORE_NODE_FROM =
  "FROM k JOIN stores s ON s.name = k.store LEFT JOIN nodes n ON n.store = s.name AND n.path = k.path WHERE s.deleted = 0";
/**
 * A listing's raw columns: the path, then rawNode's from column 1, contents left out (readBlob
 * finds inline ones by path and blob). Keyed rows cost a 1,000-entry listing about a fifth of its
 * CPU (issue 14).
 */
export const LISTED_RAW = listedRaw(false);
/** LISTED_RAW, with the inline contents in their column when `contents` (ListOptions.contents). */
export function listedRaw(contents: boolean): string {
  return `n.path, ${NODE_COLUMNS}, ${contents ? "n.inline" : "NULL"}, ${NODE_TIMES}`;
}
/** A listing's raw columns of a kept state (versions aliased `n`): listedRaw, then its end (rawVersion). */
export function versionRaw(contents: boolean): string {
  return `${listedRaw(contents)}, n.ended_event_id, n.ended`;
}
export const VERSION_RAW = versionRaw(false);
/** The current nodes' rows in a listing of states: listedRaw with the end of a state not ended. */
export function currentRaw(contents: boolean): string {
  return `${listedRaw(contents)}, 0, 0`;
}

/**
 * A node from a raw row, starting at column `at`: NODE_COLUMNS, then the inline contents (a
 * Buffer, or null; a number when the query asked only whether there are any), then NODE_TIMES.
 */
export function rawNode(store: string, path: string, r: readonly unknown[], at: number): NodeRecord {
  const inline = r[at + 8];
  return {
    store,
    path,
    directory: r[at] === 1,
    deleted: r[at + 1] === 1,
    tag: r[at + 2] as string,
    prevTag: r[at + 3] as string,
    type: r[at + 4] as string,
    size: r[at + 5] as number,
    md5: r[at + 6] as string,
    blob: r[at + 7] as string,
    inline: inline instanceof Uint8Array ? inline : null,
    created: r[at + 9] as number,
    modified: r[at + 10] as number,
    eventId: r[at + 11] as number,
    user: r[at + 12] as string,
  };
}

/** A state from a raw row starting at `at`: rawNode's columns, then the event and time that ended it. */
export function rawVersion(store: string, path: string, r: readonly unknown[], at: number): VersionRecord {
  const node = rawNode(store, path, r, at);
  return { ...node, user: node.user ?? "", endedEventId: r[at + 13] as number, ended: r[at + 14] as number };
}

/** The upsertNode parameters that store a node. */
export function upsertParams(n: NodeRecord): unknown[] {
  return [
    n.store,
    n.path,
    parentOf(n.path) ?? null,
    n.directory ? 1 : 0,
    n.deleted ? 1 : 0,
    n.tag,
    n.prevTag,
    n.type,
    n.size,
    n.md5,
    n.blob,
    n.inline,
    n.created,
    n.modified,
    n.eventId,
    n.user ?? "",
  ];
}

export function newDirectory(store: string, path: string, now: number, eventId: number, user: string): NodeRecord {
  return {
    store,
    path,
    directory: true,
    deleted: false,
    tag: newTag(),
    prevTag: "",
    type: "",
    size: 0,
    md5: "",
    blob: "",
    inline: null,
    created: now,
    modified: now,
    eventId,
    user,
  };
}

// Parsed settings by their stored text, for the reads and writes of nodes (every one needs its
// store's keep-deleted): a pure function of the text, so never stale; frozen, as they are shared.
const parsedSettings = new Map<string, Readonly<Record<string, string>>>();

export function toConfig(name: string, type: string, settings: string): StoreConfig {
  let parsed = parsedSettings.get(settings);
  if (parsed === undefined) {
    if (parsedSettings.size >= 1000) parsedSettings.clear();
    parsed = Object.freeze(JSON.parse(settings) as Record<string, string>);
    parsedSettings.set(settings, parsed);
  }
  return { name, type: type as StoreType, settings: parsed as Record<string, string> };
}

export function toStore(row: StoreRow): StoreRecord {
  return {
    config: toConfig(row.name, row.type, row.settings),
    deleted: row.deleted === 1,
    lastEventId: row.last_event_id,
    purgedEventId: row.purged_event_id,
    created: row.created,
    modified: row.modified,
    rootTag: row.root_tag ?? "",
    historyFrom: row.history_from,
  };
}

/** The contents a write replaced or removed: their blob file goes once nothing refers to it. */
export interface Replaced {
  blob: string;
  /** The contents were inline: there is no file. */
  inlined: boolean;
}
