// The MongoDB adapter's collections: the documents they hold, how their _ids are made, and the
// indexes every query needs (created at each start-up; docs/mongodb.md, "What goes where").

import { type Collection, type Db, GridFSBucket, MongoError } from "mongodb";
import type { StoreType } from "../../domain/store.js";
import { INLINE_MAX } from "../local/blob-files.js";
import type { NodeRecord, VersionRecord } from "../port.js";
import { binaryBytes } from "./mongo-driver.js";
import type { LeaseFields } from "./mongo-store-lease.js";

/**
 * One per store, never removed (a deleted store keeps its event ids). On FerretDB an update
 * rewrites the whole document, so concurrent updates of one store document can undo each other:
 * every update of it is made under the store's lease, filtered on the lease's fence.
 */
export interface StoreDoc extends LeaseFields {
  type: string;
  settings: Record<string, string>;
  deleted: boolean;
  purgedEventId: number;
  /**
   * The history horizon (docs/history.md): set when keep-versions turns history on, raised by the
   * purge of versions. Absent in stores made before history: 0.
   */
  historyFrom?: number;
  created: number;
  modified: number;
  /** A backup's snapshot hold (mongo-snapshot.ts): until when, Unix ms; absent or 0 for none. */
  snapshotUntil?: number;
}

/** Whether a backup holds the store (docs/backup.md, "Consistency"). */
export function isHeld(s: StoreDoc): boolean {
  return (s.snapshotUntil ?? 0) > Date.now();
}

/**
 * A node's _id is "{store}/{path}" (store names contain no "/"): lookups by _id
 * are fast on every MongoDB-compatible server, FerretDB included.
 */
export function nodeKey(store: string, path: string): string {
  return `${store}/${path}`;
}

export interface NodeDoc {
  _id?: string;
  store: string;
  path: string;
  parent: string | null;
  directory: boolean;
  deleted: boolean;
  tag: string;
  prevTag: string;
  type: string;
  size: number;
  md5: string;
  blob: string;
  inline: Uint8Array | null;
  created: number;
  modified: number;
  eventId: number;
  /** The subject of the token whose change made this state; absent in nodes made before history. */
  user?: string;
  /**
   * The tag of the state this one replaced (a tombstone's too), "" when it replaced none: the link
   * to its version, by _id (docs/history.md, "MongoDB"). Absent in nodes made before history.
   */
  replacedTag?: string;
  /** Tombstones only: when the TTL index may remove the document (a backstop behind the purge). */
  expireAt?: Date;
}

/**
 * An earlier state of a node (docs/history.md): the node's fields as they were, with the event that
 * ended it and when. Its _id is derived from the store, the path and the state's tag, which names
 * one state of a path as its event id does: writing it again (after a crash between it and the
 * node's write) finds it there, and a state asked for by its tag (a version's contents, a restore)
 * is found by _id, the one lookup FerretDB answers without scanning the collection.
 */
export interface VersionDoc extends Omit<NodeDoc, "_id" | "user" | "expireAt"> {
  _id: string;
  user: string;
  /** The event of the state that replaced this one. */
  endedEventId: number;
  /** When it was replaced, Unix ms. */
  ended: number;
}

/** A version's _id: "{store}/{path}#{tag}" (a tag is base64url, without "#": the last one splits). */
export function versionKey(store: string, path: string, tag: string): string {
  return `${store}/${path}#${tag}`;
}

/** The version of a node's state, ended by `endedEventId` at `ended` (its contents as `d` holds them). */
export function versionOf(d: NodeDoc, endedEventId: number, ended: number): VersionDoc {
  return {
    _id: versionKey(d.store, d.path, d.tag),
    store: d.store,
    path: d.path,
    parent: d.parent,
    directory: d.directory,
    deleted: d.deleted,
    tag: d.tag,
    prevTag: d.prevTag,
    type: d.type,
    size: d.size,
    md5: d.md5,
    blob: d.blob,
    inline: d.inline ?? null,
    created: d.created,
    modified: d.modified,
    eventId: d.eventId,
    user: d.user ?? "",
    ...(d.replacedTag === undefined ? {} : { replacedTag: d.replacedTag }),
    endedEventId,
    ended,
  };
}

/** The collections and the GridFS bucket every part of the adapter works on. */
export interface MongoCollections {
  readonly db: Db;
  readonly stores: Collection<StoreDoc>;
  readonly nodes: Collection<NodeDoc>;
  /** Earlier states of nodes (docs/history.md). */
  readonly versions: Collection<VersionDoc>;
  /** GridFS: contents over INLINE_MAX, `_id` = the blob UUID. */
  readonly bucket: GridFSBucket;
}

export function openCollections(db: Db): MongoCollections {
  return {
    db,
    stores: db.collection<StoreDoc>("stores"),
    nodes: db.collection<NodeDoc>("nodes"),
    versions: db.collection<VersionDoc>("versions"),
    bucket: new GridFSBucket(db, { bucketName: "blobs" }),
  };
}

/** Contents go to GridFS exactly when they are larger than INLINE_MAX (writeBlob decides by size). */
export function inGridFS(n: { blob: string; directory: boolean; deleted: boolean; size: number }): boolean {
  return !n.directory && !n.deleted && n.blob !== "" && n.size > INLINE_MAX;
}

/** Where an index may leave out a node: only contents in GridFS can be orphaned. */
export const IN_GRIDFS = { size: { $gt: INLINE_MAX } };

/** A listing's projection: without the inline contents, unless asked for (ListOptions.contents). */
export function contentsProjection(contents: boolean | undefined): { inline?: 0 } {
  return contents ? {} : { inline: 0 };
}

/** What a read of one path needs of its store's document. */
export const STORE_CONFIG = { type: 1, settings: 1, deleted: 1 } as const;

export function toNode(d: NodeDoc): NodeRecord {
  return {
    store: d.store,
    path: d.path,
    directory: d.directory,
    deleted: d.deleted,
    tag: d.tag,
    prevTag: d.prevTag,
    type: d.type,
    size: d.size,
    md5: d.md5,
    blob: d.blob,
    inline: binaryBytes(d.inline),
    created: d.created,
    modified: d.modified,
    eventId: d.eventId,
    user: d.user ?? "",
  };
}

/** The current node as a state of its path: not ended. */
export function currentState(d: NodeDoc): VersionRecord {
  return { ...toNode(d), user: d.user ?? "", endedEventId: 0, ended: 0 };
}

export function toVersion(d: VersionDoc): VersionRecord {
  return { ...toNode(d), user: d.user, endedEventId: d.endedEventId, ended: d.ended };
}

/** A store document's configuration. */
export function configOf(s: StoreDoc): { name: string; type: StoreType; settings: Record<string, string> } {
  return { name: s._id, type: s.type as StoreType, settings: s.settings };
}

/**
 * Creates the indexes of the nodes collection; idempotent. Returns whether the deployment
 * enforces TTL indexes (MongoDB does; FerretDB does not) and has partial indexes.
 */
export async function ensureNodeIndexes(c: MongoCollections): Promise<{ ttlIndex: boolean; partial: boolean }> {
  await c.nodes.createIndex({ store: 1, path: 1 }, { unique: true, name: "store_path" });
  await c.nodes.createIndex({ store: 1, parent: 1, path: 1 }, { name: "children" });
  await c.nodes.createIndex({ store: 1, eventId: 1 }, { name: "events" });
  await c.nodes.createIndex({ store: 1, deleted: 1, modified: 1 }, { name: "tombstones" });
  let ttlIndex = false;
  try {
    await c.nodes.createIndex({ expireAt: 1 }, { expireAfterSeconds: 0, name: "tombstone_ttl" });
    ttlIndex = true;
  } catch (err) {
    // FerretDB has no TTL indexes: the purge alone removes tombstones there (docs/mongodb.md).
    if (!(err instanceof MongoError && /not implemented|not supported/i.test(err.message))) throw err;
  }
  // Only for the sweep of orphaned GridFS files, so only over the nodes whose contents are in
  // GridFS. FerretDB has no partial indexes (nor uses secondary indexes in queries): none there.
  const partial = await createPartialIndex(c.nodes, { blob: 1 }, "blob", IN_GRIDFS);
  return { ttlIndex, partial };
}

/**
 * Creates the indexes of the versions collection; idempotent. `partial`: whether the deployment
 * has partial indexes (the blob index covers only contents in GridFS, as the nodes' one does).
 */
export async function ensureVersionIndexes(c: MongoCollections, partial: boolean): Promise<void> {
  // A path's states newest first (listVersions, getVersion, getNodeAsOf), descendants as of an
  // event (a range of paths), and a store's versions (deleteStore).
  await c.versions.createIndex({ store: 1, path: 1, eventId: -1 }, { name: "store_path_event" });
  // Children as of an event.
  await c.versions.createIndex({ store: 1, parent: 1, path: 1 }, { name: "children" });
  // The purge (ended + keep-versions <= now, per store) and eventAt's ends of states.
  await c.versions.createIndex({ store: 1, ended: 1, endedEventId: 1 }, { name: "ended" });
  // eventAt's latest state made by a time.
  await c.versions.createIndex({ store: 1, eventId: 1 }, { name: "events" });
  if (partial) await createPartialIndex(c.versions, { blob: 1 }, "blob", IN_GRIDFS);
}

/** Creates a partial index; false where the server has none (FerretDB). */
export async function createPartialIndex<D extends object>(
  collection: Collection<D>,
  key: Record<string, 1>,
  name: string,
  partialFilterExpression: Record<string, unknown>,
): Promise<boolean> {
  try {
    await collection.createIndex(key, { name, partialFilterExpression });
    return true;
  } catch (err) {
    if (err instanceof MongoError && /not implemented|not supported/i.test(err.message)) return false;
    throw err;
  }
}
