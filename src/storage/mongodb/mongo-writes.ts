// Writes of resources and directories under the store's lease: what they read (sent with the
// lease's announcement when allowed), the domain's rules, then, batch by batch in event-id order,
// the versions of the states they replace (when the store keeps versions) and the nodes, the node
// itself last (the commit); the contents they replaced are removed only after the release, and
// only when nothing refers to them any more.

import { type AnyBulkWriteOperation, type Collection, MongoBulkWriteError } from "mongodb";
import { NotFoundError } from "../../domain/errors.js";
import { newTag } from "../../domain/etag.js";
import { ancestorsOf, parentOf } from "../../domain/path.js";
import { isExpiredTombstone, planDelete, planMakeDirectory, planPutFile } from "../../domain/rules.js";
import {
  hasRecursiveTags,
  heldForSnapshot,
  keepDeletedMillis,
  keepsVersions,
  type StoreConfig,
  type StoreType,
} from "../../domain/store.js";
import { INLINE_MAX } from "../local/blob-files.js";
import type { BlobInfo, DeleteResult, Preconditions, WriteResult } from "../port.js";
import { refuseOutsideFolder } from "../port.js";
import {
  configOf,
  inGridFS,
  isHeld,
  type MongoCollections,
  type NodeDoc,
  nodeKey,
  type StoreDoc,
  toNode,
  type VersionDoc,
  versionOf,
} from "./mongo-collections.js";
import type { MongoContents } from "./mongo-contents.js";
import type { StoreLease } from "./mongo-store-lease.js";
import type { StoreWriteLock } from "./mongo-write-lock.js";

/** The TTL index removes a tombstone this long after the purge should have: the purge raises purgedEventId first. */
const TTL_GRACE = 24 * 3_600_000;

/**
 * Nodes read by path; null where there is none. A node read without its contents has no `inline`
 * at all (undefined), one read with them has its bytes or null.
 */
export type NodeReads = Map<string, NodeDoc | null>;

/** One node write of an operation, with the state it replaces. */
export interface NodeWrite {
  op: AnyBulkWriteOperation<NodeDoc>;
  /** The node as read under the lease before this write; null or undefined when there was none. */
  replaces: NodeDoc | null | undefined;
  /** The event of the state this write makes: the replaced state's endedEventId. */
  eventId: number;
}

/** A directory's node as created now, over the state with tag `replacedTag` (a tombstone) or none. */
export function directoryDoc(
  store: string,
  path: string,
  now: number,
  eventId: number,
  user = "",
  replacedTag = "",
): NodeDoc {
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
    user,
    replacedTag,
  };
}

/**
 * Writes versions, each once: an insert of a version already there (written by a write that died,
 * or lost its lease, before its node's write) is the same state, so it is replaced, to record the
 * end this write gives it.
 */
export async function recordVersions(versions: Collection<VersionDoc>, docs: readonly VersionDoc[]): Promise<void> {
  await insertOrReplace(versions, docs);
}

/**
 * Inserts documents in one unordered insertMany; those whose _id is already there are replaced
 * (recordVersions, and a restore run again: mongo-restore.ts). One round trip when none is.
 */
export async function insertOrReplace<T extends { _id: string }>(
  collection: Collection<T>,
  docs: readonly T[],
): Promise<void> {
  if (docs.length === 0) return;
  try {
    await collection.insertMany([...docs] as never[], { ordered: false });
  } catch (err) {
    if (!(err instanceof MongoBulkWriteError)) throw err;
    const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
    if (errors.length === 0 || errors.some((e) => e.code !== 11000)) throw err;
    const again = errors.map((e) => docs[e.index] as T);
    await collection.bulkWrite(
      again.map(({ _id, ...replacement }) => ({ replaceOne: { filter: { _id }, replacement } }) as never),
      { ordered: false },
    );
  }
}

/** The configuration of a live store; NotFoundError for a deleted one. */
export function liveConfig(s: StoreDoc): StoreConfig {
  if (s.deleted) throw new NotFoundError(`store ${s._id} not found`);
  return configOf(s);
}

/** The configuration of a live store as a write under its lease sees it: kept states while a backup holds it. */
export function writingConfig(s: StoreDoc): StoreConfig {
  const config = liveConfig(s);
  return isHeld(s) ? heldForSnapshot(config) : config;
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
    user = "",
  ): Promise<WriteResult> {
    let replaced: NodeDoc | null = null;
    let kept = false;
    // Until the node's write is sent, a failure means the write did not happen and the blob is
    // ours to discard; from then on it may be referenced, and only the orphan sweep may remove it.
    let sent = false;
    const own = [path, parentOf(path) ?? ""];
    const writing = this.lock.run(
      store,
      async (s, lease, early) => {
        const config = writingConfig(s);
        refuseOutsideFolder(config, pre);
        const ancestors = this.ancestorsToRetag(config, path);
        const read = await this.readNodes(store, [...own, ...ancestors], early, path);
        const target = this.current(read, path, config, now);
        const parent = this.current(read, parentOf(path) ?? "", config, now);
        const { created } = planPutFile(path, target, parent, pre);
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
          user,
          replacedTag: read.get(path)?.tag ?? "",
        };
        // The ancestors first, in the same ordered bulk write: the node's write is the commit, and
        // nothing that can fail follows it.
        sent = true;
        kept = keepsVersions(config);
        await this.writeInOrder(
          [
            ...this.retag(store, ancestors, eventId + 1, read, user),
            {
              op: { replaceOne: { filter: { _id: nodeKey(store, path) }, replacement: doc, upsert: true } },
              replaces: read.get(path),
              eventId,
            },
          ],
          lease,
          kept ? now : undefined,
        );
        replaced = target ?? null;
        return { node: toNode(doc), created };
      },
      { early: this.readEarly(store, own, path, path), reserve: this.idsFor(store, path) },
    );
    let result: WriteResult;
    try {
      result = await writing;
    } catch (err) {
      if (!sent) await this.contents.discardBlob(blob);
      throw err;
    }
    // A version now points at the replaced contents; else they go, unless a version of an
    // earlier state (or a restore) shares them.
    const old = replaced as NodeDoc | null;
    if (old && inGridFS(old) && !kept) await this.contents.removeUnreferenced([old.blob], `/${path} in store ${store}`);
    this.committed(store);
    return result;
  }

  async makeDirectory(store: string, path: string, pre: Preconditions, now: number, user = ""): Promise<WriteResult> {
    const parentPath = path === "" ? undefined : (parentOf(path) ?? "");
    const own = [path, ...(parentPath === undefined ? [] : [parentPath])];
    const result = await this.lock.run(
      store,
      async (s, lease, early) => {
        const config = writingConfig(s);
        const ancestors = this.ancestorsToRetag(config, path);
        const read = await this.readNodes(store, [...own, ...ancestors], early);
        const target = this.current(read, path, config, now);
        const parent = parentPath === undefined ? undefined : this.current(read, parentPath, config, now);
        const { created } = planMakeDirectory(path, target, parent, pre);
        if (!created) return { node: toNode(target as NodeDoc), created };
        const eventId = await lease.allocate(1 + ancestors.length);
        const doc = directoryDoc(store, path, now, eventId, user, read.get(path)?.tag ?? "");
        // The ancestors first, the directory last (the commit), in one ordered bulk write. What it
        // replaces is a tombstone, or nothing.
        await this.writeInOrder(
          [
            ...this.retag(store, ancestors, eventId + 1, read, user),
            {
              op: { replaceOne: { filter: { _id: nodeKey(store, path) }, replacement: doc, upsert: true } },
              replaces: read.get(path),
              eventId,
            },
          ],
          lease,
          keepsVersions(config) ? now : undefined,
        );
        return { node: toNode(doc), created };
      },
      { early: this.readEarly(store, own, path), reserve: this.idsFor(store, path) },
    );
    if (result.created) this.committed(store);
    return result;
  }

  async deleteTree(store: string, path: string, pre: Preconditions, now: number, user = ""): Promise<DeleteResult> {
    const removed: NodeDoc[] = [];
    let kept = false;
    const result = await this.lock.run(
      store,
      async (s, lease, early) => {
        const config = writingConfig(s);
        const ancestors = this.ancestorsToRetag(config, path);
        const read = await this.readNodes(store, [path, ...ancestors], early, path);
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
        const writes: NodeWrite[] = ordered.map((n) => {
          eventId += 1;
          const fields = {
            deleted: true,
            tag: newTag(),
            prevTag: n.tag,
            replacedTag: n.tag,
            blob: "",
            inline: null,
            modified: now,
            eventId,
            user,
            expireAt,
          };
          if (n === self) tombstone = { ...self, ...fields };
          return {
            op: { updateOne: { filter: { _id: nodeKey(store, n.path) }, update: { $set: fields } } },
            replaces: n,
            eventId,
          };
        });
        // The ancestors first, then the tombstones in event-id order (the target's last).
        kept = keepsVersions(config);
        await this.writeInOrder(
          [...this.retag(store, ancestors, eventId + 1, read, user), ...writes],
          lease,
          kept ? now : undefined,
        );
        removed.push(...ordered);
        // The target as written: its tombstone is exactly what the last update set.
        return { node: toNode(tombstone), count: ordered.length };
      },
      // A directory's subtree is not known yet: allocate reserves the rest once it is read.
      { early: this.readEarly(store, [path], path, path), reserve: this.idsFor(store, path) },
    );
    if (!kept) {
      await this.contents.removeUnreferenced(
        removed.filter(inGridFS).map((n) => n.blob),
        `/${path} in store ${store}`,
      );
    }
    this.committed(store);
    return result;
  }

  /**
   * The nodes at these paths, by path, without their contents but `withContents`'s (the node a
   * write replaces: its version keeps them): one findOne by _id each, sent together (one round
   * trip; `_id: {$in}` would make FerretDB scan the collection).
   */
  async readNodes(
    store: string,
    paths: readonly string[],
    have?: NodeReads,
    withContents?: string,
  ): Promise<NodeReads> {
    const read: NodeReads = new Map(have);
    const missing = [...new Set(paths)].filter((p) => !read.has(p));
    const docs = await Promise.all(
      missing.map((p) =>
        this.c.nodes.findOne({ _id: nodeKey(store, p) }, p === withContents ? {} : { projection: { inline: 0 } }),
      ),
    );
    missing.forEach((p, i) => {
      const d = docs[i];
      read.set(p, d ? (p === withContents ? { ...d, inline: d.inline ?? null } : d) : null);
    });
    return read;
  }

  /**
   * What a write of `path` reads, sent with the lease's announcement when that is allowed
   * (StoreLeases.acquire): the path, its parent, and on a sync-recursive store its ancestors.
   */
  readEarly(store: string, paths: readonly string[], path: string, withContents?: string): () => Promise<NodeReads> {
    return () => {
      const type = this.lock.knownType(store);
      const all = type ? [...paths, ...this.ancestorsToRetag({ type }, path)] : paths;
      return this.readNodes(store, all, undefined, withContents);
    };
  }

  /**
   * How many event ids a write of one node at `path` takes (the node, and on a sync-recursive
   * store its ancestors), reserved with the lease's announcement. The store's type as last seen
   * under a lease; unknown, as if sync-recursive. A guess: what is not used is given back on
   * release, and allocate reserves more if it was short.
   */
  idsFor(store: string, path: string): number {
    const type = this.lock.knownType(store);
    return 1 + (type ? this.ancestorsToRetag({ type }, path).length : ancestorsOf(path).length);
  }

  /** The node at a path among those read, with an expired tombstone treated as absent. */
  current(read: NodeReads, path: string, config: StoreConfig, now: number): NodeDoc | undefined {
    const doc = read.get(path);
    if (!doc) return undefined;
    return isExpiredTombstone(doc, config, now) ? undefined : doc;
  }

  ancestorsToRetag(config: { type: StoreType }, path: string): string[] {
    return hasRecursiveTags(config.type) ? ancestorsOf(path) : [];
  }

  /**
   * On sync-recursive stores, every ancestor directory gets a new tag and event, nearest first:
   * the updates, to be written before the node they are for (their tags as read under the lease).
   */
  retag(store: string, ancestors: readonly string[], firstEventId: number, read: NodeReads, user: string): NodeWrite[] {
    return ancestors.map((path, i) => ({
      op: {
        updateOne: {
          filter: { _id: nodeKey(store, path) },
          update: {
            $set: {
              prevTag: read.get(path)?.tag ?? "",
              replacedTag: read.get(path)?.tag ?? "",
              tag: newTag(),
              eventId: firstEventId + i,
              user,
            },
          },
        },
      },
      replaces: read.get(path),
      eventId: firstEventId + i,
    }));
  }

  /**
   * Ordered bulk writes in batches of 32: FerretDB (v1, SQLite backend) stalls
   * on one large update batch (measured: 50 updates 0.4 s, 100 never returned).
   * The lease is kept (renewed when due) before each batch. With `keepingAt` (the store keeps
   * versions; the time of the change), each batch's replaced states are written as versions
   * first: a crash between the two leaves versions of states still current, which every read
   * ignores and the next write of the path writes again (docs/history.md, "MongoDB").
   */
  async writeInOrder(writes: readonly NodeWrite[], lease: StoreLease, keepingAt: number | undefined): Promise<void> {
    for (let i = 0; i < writes.length; i += 32) {
      const batch = writes.slice(i, i + 32);
      if (keepingAt !== undefined) {
        const replaced = batch.filter((w): w is NodeWrite & { replaces: NodeDoc } => !!w.replaces);
        if (replaced.length > 0) {
          const states = await this.withContents(replaced.map((w) => w.replaces));
          await lease.keep();
          await recordVersions(
            this.c.versions,
            states.map((d, j) => versionOf(d, (replaced[j] as NodeWrite).eventId, keepingAt)),
          );
        }
      }
      await lease.keep();
      await this.c.nodes.bulkWrite(
        batch.map((w) => w.op),
        { ordered: true },
      );
    }
  }

  /**
   * The nodes with their inline contents, read for those read without them (the files below a
   * deleted directory): the versions keep the contents their states had.
   */
  private async withContents(docs: readonly NodeDoc[]): Promise<NodeDoc[]> {
    const needs = (d: NodeDoc) =>
      d.inline === undefined && !d.directory && !d.deleted && d.size > 0 && d.size <= INLINE_MAX;
    const read = await Promise.all(
      docs.map((d) =>
        needs(d)
          ? this.c.nodes.findOne({ _id: nodeKey(d.store, d.path) }, { projection: { inline: 1, blob: 1 } })
          : null,
      ),
    );
    return docs.map((d, i) => {
      const found = read[i];
      if (!needs(d)) return { ...d, inline: d.inline ?? null };
      return { ...d, inline: found?.blob === d.blob ? (found.inline ?? null) : null };
    });
  }
}
