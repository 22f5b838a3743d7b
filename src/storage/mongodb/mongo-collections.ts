// The MongoDB adapter's collections: the documents they hold, how their _ids are made, and the
// indexes every query needs (created at each start-up; docs/mongodb.md, "What goes where").

import { type Collection, type Db, GridFSBucket, MongoError } from "mongodb";
import type { StoreType } from "../../domain/store.js";
import { INLINE_MAX } from "../local/blob-files.js";
import type { NodeRecord } from "../port.js";
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
  created: number;
  modified: number;
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
  /** Tombstones only: when the TTL index may remove the document (a backstop behind the purge). */
  expireAt?: Date;
}

/** The collections and the GridFS bucket every part of the adapter works on. */
export interface MongoCollections {
  readonly db: Db;
  readonly stores: Collection<StoreDoc>;
  readonly nodes: Collection<NodeDoc>;
  /** GridFS: contents over INLINE_MAX, `_id` = the blob UUID. */
  readonly bucket: GridFSBucket;
}

export function openCollections(db: Db): MongoCollections {
  return {
    db,
    stores: db.collection<StoreDoc>("stores"),
    nodes: db.collection<NodeDoc>("nodes"),
    bucket: new GridFSBucket(db, { bucketName: "blobs" }),
  };
}

/** Contents go to GridFS exactly when they are larger than INLINE_MAX (writeBlob decides by size). */
export function inGridFS(n: { blob: string; directory: boolean; deleted: boolean; size: number }): boolean {
  return !n.directory && !n.deleted && n.blob !== "" && n.size > INLINE_MAX;
}

/** Where an index may leave out a node: only contents in GridFS can be orphaned. */
export const IN_GRIDFS = { size: { $gt: INLINE_MAX } };

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
  };
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
