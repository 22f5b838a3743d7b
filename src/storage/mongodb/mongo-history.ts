// History (docs/history.md, "MongoDB"): a path's states, one by tag, a path or a listing as of an
// event, the event of a time, and a kept state made current again. The states a write replaces
// are recorded by the writes themselves (mongo-writes.ts, writeInOrder), versions first.
// A version whose event is the current node's is what a write that died before its node's write
// left: it is the node's own state, and every read here leaves it out.

import { ForbiddenError } from "../../domain/errors.js";
import { newTag } from "../../domain/etag.js";
import { checkRestoreParent, restorableFile } from "../../domain/history.js";
import { comparePaths, descendantRange, parentOf } from "../../domain/path.js";
import { planPutFile } from "../../domain/rules.js";
import { keepsVersions } from "../../domain/store.js";
import { keysetPages } from "../keyset-pages.js";
import type { ListOptions, Preconditions, VersionRecord, WriteResult } from "../port.js";
import {
  contentsProjection,
  currentState,
  inGridFS,
  type MongoCollections,
  type NodeDoc,
  nodeKey,
  toNode,
  toVersion,
  type VersionDoc,
  versionKey,
} from "./mongo-collections.js";
import type { MongoContents } from "./mongo-contents.js";
import { guard } from "./mongo-driver.js";
import type { StoreWriteLock } from "./mongo-write-lock.js";
import { type MongoWrites, type NodeReads, writingConfig } from "./mongo-writes.js";

/** How many of the nodes' events after a candidate eventAt reads at a time, looking for its re-tags. */
const EVENTS_AFTER = 64;
/** How many states back getNodeAsOf follows `replacedTag` by _id before it queries instead. */
const WALK_MAX = 16;

/** Paths in the order MongoDB sorts them (binary UTF-8, which is code-point order), not UTF-16's. */
function byPath(a: { path: string }, b: { path: string }): number {
  return comparePaths(a.path, b.path);
}

/**
 * States whose event's time is their `modified`: all but a directory's re-tag (a live directory
 * whose prevTag is set: a directory is made with none, and a re-tag keeps its `modified`).
 */
const MADE_AT_MODIFIED = { $or: [{ directory: false }, { deleted: true }, { prevTag: "" }] };

export class MongoHistory {
  /**
   * Whether the server answers a filter on anything but _id by reading the whole collection
   * (FerretDB v1): then getNodeAsOf follows the states' links by _id rather than query.
   */
  scansQueries = false;

  constructor(
    private readonly c: MongoCollections,
    private readonly lock: StoreWriteLock,
    private readonly writes: MongoWrites,
    private readonly contents: MongoContents,
    /** Tells the listeners (and the other workers) that a change of the store is committed. */
    private readonly committed: (store: string) => void,
  ) {}

  /**
   * The states of a path, newest first, without their contents (readBlob finds them): the node,
   * then the versions before it. The node is read first: a write in between wrote the version of
   * the state it replaced before its node, so the versions read after it hold that state.
   */
  async *listVersions(store: string, path: string, options: { batchSize?: number }): AsyncIterable<VersionRecord[]> {
    const limit = Math.max(1, options.batchSize ?? 1000);
    const node = await guard(() => this.c.nodes.findOne({ _id: nodeKey(store, path) }, { projection: { inline: 0 } }));
    let batch: VersionRecord[] = node ? [currentState({ ...node, inline: null })] : [];
    let before = node ? node.eventId : Number.MAX_SAFE_INTEGER;
    for (let done = false; !done; ) {
      const want = limit - batch.length;
      if (want > 0) {
        const docs = await guard(() =>
          this.c.versions
            .find({ store, path, eventId: { $lt: before } }, { projection: { inline: 0 } })
            .sort({ eventId: -1 })
            .limit(want)
            .toArray(),
        );
        for (const d of docs) batch.push(toVersion({ ...d, inline: null }));
        before = docs.at(-1)?.eventId ?? before;
        done = docs.length < want;
      }
      if (batch.length > 0) yield batch;
      batch = [];
    }
  }

  /** The state of a path with that tag, current or kept, with its contents. */
  async getVersion(store: string, path: string, tag: string): Promise<VersionRecord | undefined> {
    return guard(async () => {
      const [node, version] = await Promise.all([
        this.c.nodes.findOne({ _id: nodeKey(store, path) }),
        this.c.versions.findOne({ _id: versionKey(store, path, tag) }),
      ]);
      if (node?.tag === tag) return currentState(node);
      if (version) return version.eventId !== node?.eventId ? toVersion(version) : undefined;
      // Read together, the version may have been looked for just before a write recorded it and
      // the node read just after: only then is a second look needed.
      if (!node) return undefined;
      const again = await this.c.versions.findOne({ _id: versionKey(store, path, tag) });
      return again && again.eventId < node.eventId ? toVersion(again) : undefined;
    });
  }

  /** The state whose life [eventId, endedEventId) holds `eventId`, with its contents. */
  async getNodeAsOf(store: string, path: string, eventId: number): Promise<VersionRecord | undefined> {
    return guard(async () => {
      const holding = { store, path, eventId: { $lte: eventId }, endedEventId: { $gt: eventId } };
      if (this.scansQueries) return this.walkBackTo(store, path, eventId, holding);
      // One round trip where the query is answered from the index (store, path, eventId).
      const [node, version] = await Promise.all([
        this.c.nodes.findOne({ _id: nodeKey(store, path) }),
        this.c.versions.findOne(holding),
      ]);
      if (node && node.eventId <= eventId) return currentState(node);
      // A version's event is the node's only when its write died before the node's: then the node
      // is later than eventId, and so is the version.
      if (version) return toVersion(version);
      if (!node) return undefined;
      // As in getVersion: the version may have been recorded between the two reads.
      const again = await this.c.versions.findOne(holding);
      return again ? toVersion(again) : undefined;
    });
  }

  /**
   * getNodeAsOf where a query reads the whole collection: the node, then back from state to state
   * by _id along `replacedTag` (written with each state, so no write is missed: the versions are
   * immutable and older than the node read), at most WALK_MAX; the query only when the links end
   * before the event (a path made again after its tombstone was purged has earlier states nothing
   * links to; a node made before history has no link) or go on too long.
   */
  private async walkBackTo(
    store: string,
    path: string,
    eventId: number,
    holding: Record<string, unknown>,
  ): Promise<VersionRecord | undefined> {
    const node = await this.c.nodes.findOne({ _id: nodeKey(store, path) });
    if (node && node.eventId <= eventId) return currentState(node);
    let link = node?.replacedTag;
    for (let hop = 0; link && hop < WALK_MAX; hop++) {
      const state = await this.c.versions.findOne({ _id: versionKey(store, path, link) });
      if (!state) break;
      if (state.eventId <= eventId) {
        if (state.endedEventId > eventId) return toVersion(state);
        break;
      }
      link = state.replacedTag;
    }
    const version = await this.c.versions.findOne(holding);
    return version ? toVersion(version) : undefined;
  }

  /**
   * listNodes as of an event: each keyset page merges the nodes made by then with the versions
   * whose life holds the event, both read in path order; the nodes are read first (as in
   * listVersions), and where both have a path (a version left by a write that died) the node is
   * the state.
   */
  listNodesAsOf(store: string, dir: string, eventId: number, options: ListOptions): AsyncIterable<VersionRecord[]> {
    const { low, high } = descendantRange(dir);
    const projection = contentsProjection(options.contents);
    const page = async (after: string, limit: number): Promise<VersionRecord[]> => {
      const path = options.recursive && dir !== "" ? { $gt: after, $lt: high } : { $gt: after };
      const where = options.recursive ? { store, path } : { store, parent: dir, path };
      const nodes = await guard(() =>
        this.c.nodes
          .find({ ...where, eventId: { $lte: eventId } }, { projection })
          .sort({ path: 1 })
          .limit(limit)
          .toArray(),
      );
      const versions = await guard(() =>
        this.c.versions
          .find({ ...where, eventId: { $lte: eventId }, endedEventId: { $gt: eventId } }, { projection })
          .sort({ path: 1 })
          .limit(limit)
          .toArray(),
      );
      // The first `limit` paths of the two: each of them is among the first `limit` of its side.
      const states = new Map<string, VersionRecord>();
      for (const v of versions) states.set(v.path, toVersion(v));
      for (const n of nodes) states.set(n.path, currentState(n));
      return [...states.values()].sort(byPath).slice(0, limit);
    };
    // keysetPages hands back the records page gives it: states, typed as nodes there.
    return keysetPages(page, options.recursive ? low : "", options) as AsyncIterable<VersionRecord[]>;
  }

  /**
   * The store's last committed event made at or before `time`. A state's `modified` is the time of
   * its event, but for a directory's re-tag (its time is the `ended` of the state it replaced, when
   * that one is kept). So: the latest of the events whose time is known, then the re-tags that
   * directly follow it among the nodes (a change's re-tags come last in it, and nothing may have
   * replaced them since).
   */
  async eventAt(store: string, time: number): Promise<number> {
    return guard(async () => {
      const s = await this.c.stores.findOne({ _id: store }, { projection: { committedEventId: 1 } });
      if (!s) return 0;
      const upTo = s.committedEventId;
      const made = { store, eventId: { $lte: upTo }, modified: { $lte: time }, ...MADE_AT_MODIFIED };
      const [node, version, ended] = await Promise.all([
        this.c.nodes
          .find(made, { projection: { eventId: 1 } })
          .sort({ eventId: -1 })
          .limit(1)
          .toArray(),
        this.c.versions
          .find(made, { projection: { eventId: 1 } })
          .sort({ eventId: -1 })
          .limit(1)
          .toArray(),
        this.c.versions
          .find({ store, ended: { $lte: time }, endedEventId: { $lte: upTo } }, { projection: { endedEventId: 1 } })
          .sort({ ended: -1, endedEventId: -1 })
          .limit(1)
          .toArray(),
      ]);
      let event = Math.max(node[0]?.eventId ?? 0, version[0]?.eventId ?? 0, ended[0]?.endedEventId ?? 0);
      if (event === 0) return 0;
      for (;;) {
        const next = await this.c.nodes
          .find(
            { store, eventId: { $gt: event, $lte: upTo } },
            { projection: { eventId: 1, directory: 1, deleted: 1, prevTag: 1 } },
          )
          .sort({ eventId: 1 })
          .limit(EVENTS_AFTER)
          .toArray();
        for (const n of next) {
          const retag = n.directory && !n.deleted && n.prevTag !== "";
          if (n.eventId !== event + 1 || !retag) return event;
          event = n.eventId;
        }
        if (next.length < EVENTS_AFTER) return event;
      }
    });
  }

  /**
   * Makes a kept file state current again, as putFile makes a new one: under the store's lease
   * (the state, the node, its parent and the ancestors it re-tags read with the announcement when
   * allowed), checked as putFile checks, then the replaced states' versions (when keeping) and the
   * node pointing at the state's blob (shared, not copied), the ancestors first.
   */
  async restoreVersion(
    store: string,
    path: string,
    tag: string,
    pre: Preconditions,
    now: number,
    user = "",
  ): Promise<WriteResult> {
    let replaced: NodeDoc | null = null;
    let kept = false;
    let shared = "";
    const parentPath = parentOf(path) ?? "";
    const own = [path, parentPath];
    const readEarly = this.writes.readEarly(store, own, path, path);
    const result = await this.lock.run(
      store,
      async (s, lease, early: { nodes: NodeReads; state: VersionDoc | null } | undefined) => {
        const config = writingConfig(s);
        if (path === "") throw new ForbiddenError("the root directory is not a resource");
        const ancestors = this.writes.ancestorsToRetag(config, path);
        const read = await this.writes.readNodes(store, [...own, ...ancestors], early?.nodes, path);
        const existing = read.get(path) ?? null;
        const state = restorableFile<NodeDoc | VersionDoc>(
          existing?.tag === tag ? existing : early ? early.state : await this.versionByTag(store, path, tag),
          store,
          path,
          tag,
        );
        const target = this.writes.current(read, path, config, now);
        const parent = this.writes.current(read, parentPath, config, now);
        checkRestoreParent(path, parent);
        const { created } = planPutFile(path, target, parent, pre);
        const eventId = await lease.allocate(1 + ancestors.length);
        const doc: NodeDoc = {
          store,
          path,
          parent: parentPath,
          directory: false,
          deleted: false,
          tag: newTag(),
          prevTag: target && !target.deleted ? target.tag : "",
          type: state.type,
          size: state.size,
          md5: state.md5,
          blob: state.blob,
          inline: state.inline ?? null,
          created: created ? now : (target?.created ?? now),
          modified: now,
          eventId,
          user,
          replacedTag: existing?.tag ?? "",
        };
        kept = keepsVersions(config);
        await this.writes.writeInOrder(
          [
            ...this.writes.retag(store, ancestors, eventId + 1, read, user),
            {
              op: { replaceOne: { filter: { _id: nodeKey(store, path) }, replacement: doc, upsert: true } },
              replaces: existing,
              eventId,
            },
          ],
          lease,
          kept ? now : undefined,
        );
        replaced = target ?? null;
        shared = state.blob;
        return { node: toNode(doc), created };
      },
      {
        early: async () => {
          const [nodes, state] = await Promise.all([readEarly(), this.versionByTag(store, path, tag)]);
          return { nodes, state };
        },
        reserve: this.writes.idsFor(store, path),
      },
    );
    const old = replaced as NodeDoc | null;
    if (old && inGridFS(old) && !kept && old.blob !== shared) {
      await this.contents.removeUnreferenced([old.blob], `/${path} in store ${store}`);
    }
    this.committed(store);
    return result;
  }

  /** The kept state of a path with that tag, with its contents. */
  private versionByTag(store: string, path: string, tag: string): Promise<VersionDoc | null> {
    return this.c.versions.findOne({ _id: versionKey(store, path, tag) });
  }
}
