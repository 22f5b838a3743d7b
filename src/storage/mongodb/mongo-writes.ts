// Writes of resources and directories under the store's lease: what they read (sent with the
// lease's announcement when allowed), the domain's rules, then the nodes in event-id order, the
// node itself last (the commit); the contents they replaced are removed only after the release.

import type { AnyBulkWriteOperation } from "mongodb";
import { NotFoundError } from "../../domain/errors.js";
import { newTag } from "../../domain/etag.js";
import { ancestorsOf, parentOf } from "../../domain/path.js";
import { isExpiredTombstone, planDelete, planMakeDirectory, planPutFile } from "../../domain/rules.js";
import { hasRecursiveTags, keepDeletedMillis, type StoreConfig, type StoreType } from "../../domain/store.js";
import type { BlobInfo, DeleteResult, Preconditions, WriteResult } from "../port.js";
import { refuseOutsideFolder } from "../port.js";
import {
  configOf,
  inGridFS,
  type MongoCollections,
  type NodeDoc,
  nodeKey,
  type StoreDoc,
  toNode,
} from "./mongo-collections.js";
import type { MongoContents } from "./mongo-contents.js";
import type { StoreLease } from "./mongo-store-lease.js";
import type { StoreWriteLock } from "./mongo-write-lock.js";

/** The TTL index removes a tombstone this long after the purge should have: the purge raises purgedEventId first. */
const TTL_GRACE = 24 * 3_600_000;

/** Nodes read by path; null where there is none. */
type NodeReads = Map<string, NodeDoc | null>;

/** A directory's node as created now. */
export function directoryDoc(store: string, path: string, now: number, eventId: number): NodeDoc {
  return {
    store,
    path,
    parent: parentOf(path) ?? null,
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
  };
}

/** The configuration of a live store; NotFoundError for a deleted one. */
export function liveConfig(s: StoreDoc): StoreConfig {
  if (s.deleted) throw new NotFoundError(`store ${s._id} not found`);
  return configOf(s);
}

export class MongoWrites {
  constructor(
    private readonly c: MongoCollections,
    private readonly lock: StoreWriteLock,
    private readonly contents: MongoContents,
    /** Tells the listeners (and the other workers) that a change of the store is committed. */
    private readonly committed: (store: string) => void,
  ) {}

  async putFile(
    store: string,
    path: string,
    blob: BlobInfo,
    type: string,
    pre: Preconditions,
    now: number,
  ): Promise<WriteResult> {
    let replaced: NodeDoc | null = null;
    // Until the node's write is sent, a failure means the write did not happen and the blob is
    // ours to discard; from then on it may be referenced, and only the orphan sweep may remove it.
    let sent = false;
    const own = [path, parentOf(path) ?? ""];
    const writing = this.lock.run(
      store,
      async (s, lease, early) => {
        const config = liveConfig(s);
        refuseOutsideFolder(config, pre);
        const ancestors = this.ancestorsToRetag(config, path);
        const read = await this.readNodes(store, [...own, ...ancestors], early);
        const target = this.current(read, path, config, now);
        const parent = this.current(read, parentOf(path) ?? "", config, now);
        const { created } = planPutFile(path, target, parent, pre.ifMatch);
        const eventId = await lease.allocate(1 + ancestors.length);
        const doc: NodeDoc = {
          store,
          path,
          parent: parentOf(path) ?? null,
          directory: false,
          deleted: false,
          tag: newTag(),
          prevTag: target && !target.deleted ? target.tag : "",
          type,
          size: blob.size,
          md5: blob.md5,
          blob: blob.blob,
          inline: blob.inline,
          created: created ? now : (target?.created ?? now),
          modified: now,
          eventId,
        };
        // The ancestors first, in the same ordered bulk write: the node's write is the commit, and
        // nothing that can fail follows it.
        sent = true;
        await this.writeInOrder(
          [
            ...this.retag(store, ancestors, eventId + 1, read),
            { replaceOne: { filter: { _id: nodeKey(store, path) }, replacement: doc, upsert: true } },
          ],
          lease,
        );
        replaced = target ?? null;
        return { node: toNode(doc), created };
      },
      { early: this.readEarly(store, own, path), reserve: this.idsFor(store, path) },
    );
    let result: WriteResult;
    try {
      result = await writing;
    } catch (err) {
      if (!sent) await this.contents.discardBlob(blob);
      throw err;
    }
    const old = replaced as NodeDoc | null;
    if (old && inGridFS(old)) await this.contents.removeReplaced([old.blob], `/${path} in store ${store}`);
    this.committed(store);
    return result;
  }

  async makeDirectory(store: string, path: string, pre: Preconditions, now: number): Promise<WriteResult> {
    const parentPath = path === "" ? undefined : (parentOf(path) ?? "");
    const own = [path, ...(parentPath === undefined ? [] : [parentPath])];
    const result = await this.lock.run(
      store,
      async (s, lease, early) => {
        const config = liveConfig(s);
        const ancestors = this.ancestorsToRetag(config, path);
        const read = await this.readNodes(store, [...own, ...ancestors], early);
        const target = this.current(read, path, config, now);
        const parent = parentPath === undefined ? undefined : this.current(read, parentPath, config, now);
        const { created } = planMakeDirectory(path, target, parent, pre.ifMatch);
        if (!created) return { node: toNode(target as NodeDoc), created };
        const eventId = await lease.allocate(1 + ancestors.length);
        const doc = directoryDoc(store, path, now, eventId);
        // The ancestors first, the directory last (the commit), in one ordered bulk write.
        await this.writeInOrder(
          [
            ...this.retag(store, ancestors, eventId + 1, read),
            { replaceOne: { filter: { _id: nodeKey(store, path) }, replacement: doc, upsert: true } },
          ],
          lease,
        );
        return { node: toNode(doc), created };
      },
      { early: this.readEarly(store, own, path), reserve: this.idsFor(store, path) },
    );
    if (result.created) this.committed(store);
    return result;
  }

  async deleteTree(store: string, path: string, pre: Preconditions, now: number): Promise<DeleteResult> {
    const removed: NodeDoc[] = [];
    const result = await this.lock.run(
      store,
      async (s, lease, early) => {
        const config = liveConfig(s);
        const ancestors = this.ancestorsToRetag(config, path);
        const read = await this.readNodes(store, [path, ...ancestors], early);
        const target = this.current(read, path, config, now);
        planDelete(path, target, pre.ifMatch);
        const self = target as NodeDoc;
        const below = self.directory
          ? await this.c.nodes
              .find(
                { store, path: { $gt: `${path}/`, $lt: `${path}0` }, deleted: false },
                { projection: { inline: 0 } },
              )
              .sort({ path: 1 })
              .toArray()
          : [];
        const ordered = [...below, self];
        let eventId = (await lease.allocate(ordered.length + ancestors.length)) - 1;
        const expireAt = new Date(now + keepDeletedMillis(config) + TTL_GRACE);
        let tombstone: NodeDoc = self;
        const ops: AnyBulkWriteOperation<NodeDoc>[] = ordered.map((n) => {
          eventId += 1;
          const fields = {
            deleted: true,
            tag: newTag(),
            prevTag: n.tag,
            blob: "",
            inline: null,
            modified: now,
            eventId,
            expireAt,
          };
          if (n === self) tombstone = { ...self, ...fields };
          return { updateOne: { filter: { _id: nodeKey(store, n.path) }, update: { $set: fields } } };
        });
        // The ancestors first, then the tombstones in event-id order (the target's last).
        await this.writeInOrder([...this.retag(store, ancestors, eventId + 1, read), ...ops], lease);
        removed.push(...ordered);
        // The target as written: its tombstone is exactly what the last update set.
        return { node: toNode(tombstone), count: ordered.length };
      },
      // A directory's subtree is not known yet: allocate reserves the rest once it is read.
      { early: this.readEarly(store, [path], path), reserve: this.idsFor(store, path) },
    );
    await this.contents.removeReplaced(
      removed.filter(inGridFS).map((n) => n.blob),
      `/${path} in store ${store}`,
    );
    this.committed(store);
    return result;
  }

  /**
   * The nodes at these paths (without their contents), by path: one findOne by _id each, sent
   * together (one round trip; `_id: {$in}` would make FerretDB scan the collection).
   */
  private async readNodes(store: string, paths: readonly string[], have?: NodeReads): Promise<NodeReads> {
    const read: NodeReads = new Map(have);
    const missing = [...new Set(paths)].filter((p) => !read.has(p));
    const docs = await Promise.all(
      missing.map((p) => this.c.nodes.findOne({ _id: nodeKey(store, p) }, { projection: { inline: 0 } })),
    );
    missing.forEach((p, i) => {
      const d = docs[i];
      read.set(p, d ? { ...d, inline: null } : null);
    });
    return read;
  }

  /**
   * What a write of `path` reads, sent with the lease's announcement when that is allowed
   * (StoreLeases.acquire): the path, its parent, and on a sync-recursive store its ancestors.
   */
  private readEarly(store: string, paths: readonly string[], path: string): () => Promise<NodeReads> {
    return () => {
      const type = this.lock.knownType(store);
      return this.readNodes(store, type ? [...paths, ...this.ancestorsToRetag({ type }, path)] : paths);
    };
  }

  /**
   * How many event ids a write of one node at `path` takes (the node, and on a sync-recursive
   * store its ancestors), reserved with the lease's announcement. The store's type as last seen
   * under a lease; unknown, as if sync-recursive. A guess: what is not used is given back on
   * release, and allocate reserves more if it was short.
   */
  private idsFor(store: string, path: string): number {
    const type = this.lock.knownType(store);
    return 1 + (type ? this.ancestorsToRetag({ type }, path).length : ancestorsOf(path).length);
  }

  /** The node at a path among those read, with an expired tombstone treated as absent. */
  private current(read: NodeReads, path: string, config: StoreConfig, now: number): NodeDoc | undefined {
    const doc = read.get(path);
    if (!doc) return undefined;
    return isExpiredTombstone(doc, config, now) ? undefined : doc;
  }

  private ancestorsToRetag(config: { type: StoreType }, path: string): string[] {
    return hasRecursiveTags(config.type) ? ancestorsOf(path) : [];
  }

  /**
   * On sync-recursive stores, every ancestor directory gets a new tag and event, nearest first:
   * the updates, to be written before the node they are for (their tags as read under the lease).
   */
  private retag(
    store: string,
    ancestors: readonly string[],
    firstEventId: number,
    read: NodeReads,
  ): AnyBulkWriteOperation<NodeDoc>[] {
    return ancestors.map((path, i) => ({
      updateOne: {
        filter: { _id: nodeKey(store, path) },
        update: { $set: { prevTag: read.get(path)?.tag ?? "", tag: newTag(), eventId: firstEventId + i } },
      },
    }));
  }

  /**
   * Ordered bulk writes in batches of 32: FerretDB (v1, SQLite backend) stalls
   * on one large update batch (measured: 50 updates 0.4 s, 100 never returned).
   * The lease is kept (renewed when due) before each batch.
   */
  private async writeInOrder(ops: AnyBulkWriteOperation<NodeDoc>[], lease: StoreLease): Promise<void> {
    for (let i = 0; i < ops.length; i += 32) {
      await lease.keep();
      await this.c.nodes.bulkWrite(ops.slice(i, i + 32), { ordered: true });
    }
  }
}
