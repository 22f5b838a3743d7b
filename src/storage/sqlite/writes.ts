// The writes of the embedded backend, each one transaction (BEGIN IMMEDIATE, which also
// serializes event-id allocation with the commit): stores, putFile, makeDirectory, deleteTree.
// After the commit: listeners told, replaced contents removed when nothing refers to them.

import type Database from "better-sqlite3";
import { NotFoundError } from "../../domain/errors.js";
import { newTag } from "../../domain/etag.js";
import { ancestorsOf, descendantRange, parentOf } from "../../domain/path.js";
import { isExpiredTombstone, planCreateStore, planDelete, planMakeDirectory, planPutFile } from "../../domain/rules.js";
import { hasRecursiveTags, type StoreConfig } from "../../domain/store.js";
import type { SpaceReserve } from "../local/space-reserve.js";
import {
  type BlobInfo,
  type DeleteResult,
  type NodeRecord,
  type Preconditions,
  refuseOutsideFolder,
  type StoreRecord,
  type WriteResult,
} from "../port.js";
import type { SqliteContents } from "./contents.js";
import type { SqliteReads } from "./reads.js";
import { type NodeRow, newDirectory, type Replaced, rawNode, toNode, upsertParams } from "./rows.js";
import type { Statements } from "./schema.js";
import type { SqliteWrites } from "./sqlite-errors.js";

export interface SqliteNodeWritesOptions {
  db: Database.Database;
  stmt: Statements;
  reads: SqliteReads;
  turns: SqliteWrites;
  contents: SqliteContents;
  reserve: SpaceReserve;
  /** A commit changed the store: tells the listeners and the peers; never throws. */
  changed(store: string): void;
}

export class SqliteNodeWrites {
  private readonly stmt: Statements;
  private readonly reads: SqliteReads;
  private readonly turns: SqliteWrites;
  private readonly contents: SqliteContents;
  private readonly reserve: SpaceReserve;
  private readonly changed: (store: string) => void;
  private readonly tx;

  constructor(options: SqliteNodeWritesOptions) {
    this.stmt = options.stmt;
    this.reads = options.reads;
    this.turns = options.turns;
    this.contents = options.contents;
    this.reserve = options.reserve;
    this.changed = options.changed;
    const db = options.db;
    // Made once: db.transaction() builds four wrapper functions on every call.
    this.tx = {
      createStore: db.transaction((config: StoreConfig, now: number) => this.createStoreTx(config, now)).immediate,
      deleteStore: db.transaction((name: string, now: number) => this.deleteStoreTx(name, now)).immediate,
      putFile: db.transaction(
        (store: string, path: string, blob: BlobInfo, type: string, pre: Preconditions, now: number) =>
          this.putFileTx(store, path, blob, type, pre, now),
      ).immediate,
      makeDirectory: db.transaction((store: string, path: string, pre: Preconditions, now: number) =>
        this.makeDirectoryTx(store, path, pre, now),
      ).immediate,
      deleteTree: db.transaction((store: string, path: string, pre: Preconditions, now: number) =>
        this.deleteTreeTx(store, path, pre, now),
      ).immediate,
    };
  }

  async createStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    await this.turns.write(() => this.tx.createStore(config, now));
    this.changed(config.name);
    this.reserve.restore();
    return this.reads.mustGetStore(config.name);
  }

  private createStoreTx(config: StoreConfig, now: number): void {
    const existing = this.stmt.getStore.get(config.name);
    planCreateStore(existing && { deleted: existing.deleted === 1 }, config.name);
    const params = { name: config.name, type: config.type, settings: JSON.stringify(config.settings), now };
    if (existing) this.stmt.reviveStore.run(params);
    else this.stmt.insertStore.run(params);
    const eventId = this.allocate(config.name, 1);
    this.stmt.upsertNode.run(upsertParams(newDirectory(config.name, "", now, eventId)));
  }

  async updateStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    const params = { name: config.name, type: config.type, settings: JSON.stringify(config.settings), now };
    if ((await this.turns.write(() => this.stmt.updateStore.run(params))).changes === 0)
      throw new NotFoundError(`store ${config.name} not found`);
    this.changed(config.name);
    return this.reads.mustGetStore(config.name);
  }

  async deleteStore(name: string, now: number): Promise<StoreRecord> {
    const removed = await this.turns.free(() => this.tx.deleteStore(name, now));
    this.changed(name);
    await this.contents.removeReplaced(removed.map((r) => ({ blob: r.blob, inlined: r.inline !== null })));
    return this.reads.mustGetStore(name);
  }

  private deleteStoreTx(name: string, now: number): Array<{ blob: string; inline: Buffer | null }> {
    const existing = this.stmt.getStore.get(name);
    if (!existing || existing.deleted === 1) throw new NotFoundError(`store ${name} not found`);
    this.stmt.buryStore.run({ name, now });
    return this.stmt.deleteStoreNodes.all(name);
  }

  async putFile(
    store: string,
    path: string,
    blob: BlobInfo,
    type: string,
    pre: Preconditions,
    now: number,
  ): Promise<WriteResult> {
    let outcome: ReturnType<typeof this.tx.putFile>;
    try {
      outcome = await this.turns.write(() => this.tx.putFile(store, path, blob, type, pre, now));
    } catch (err) {
      // The transaction rolled back: the blob is ours to discard (port.ts), unless a node refers
      // to it all the same, which only a commit that reported failure could have done.
      await this.contents.discardUnreferenced(blob);
      throw err;
    }
    // Committed: from here on, nothing fails the call (removeReplaced logs what it cannot remove).
    this.changed(store);
    await this.contents.removeReplaced(outcome.replaced ? [outcome.replaced] : []);
    return outcome.result;
  }

  private putFileTx(
    store: string,
    path: string,
    blob: BlobInfo,
    type: string,
    pre: Preconditions,
    now: number,
  ): { result: WriteResult; replaced: Replaced | undefined } {
    const config = this.reads.liveStore(store);
    refuseOutsideFolder(config, pre);
    const target = this.currentMetadata(store, path, config, now);
    const parent = this.currentMetadata(store, parentOf(path) ?? "", config, now);
    const { created } = planPutFile(path, target?.node, parent?.node, pre.ifMatch);
    const eventId = this.allocate(store, 1 + this.ancestorCount(config, path));
    // The stored row, as getNode would read it back.
    const node: NodeRecord = {
      store,
      path,
      directory: false,
      deleted: false,
      tag: newTag(),
      prevTag: target && !target.node.deleted ? target.node.tag : "",
      type,
      size: blob.size,
      md5: blob.md5,
      blob: blob.blob,
      inline: blob.inline,
      created: created ? now : (target?.node.created ?? now),
      modified: now,
      eventId,
    };
    this.stmt.upsertNode.run(upsertParams(node));
    this.retagAncestors(config, path, eventId + 1);
    const replaced = target && { blob: target.node.blob, inlined: target.inlined };
    return { result: { node, created }, replaced };
  }

  async makeDirectory(store: string, path: string, pre: Preconditions, now: number): Promise<WriteResult> {
    const result = await this.turns.write(() => this.tx.makeDirectory(store, path, pre, now));
    if (result.created) this.changed(store);
    this.reserve.restore();
    return result;
  }

  private makeDirectoryTx(store: string, path: string, pre: Preconditions, now: number): WriteResult {
    const config = this.reads.liveStore(store);
    const target = this.currentMetadata(store, path, config, now)?.node;
    const parent = path === "" ? undefined : this.currentMetadata(store, parentOf(path) ?? "", config, now)?.node;
    const { created } = planMakeDirectory(path, target, parent, pre.ifMatch);
    if (created) {
      const eventId = this.allocate(store, 1 + this.ancestorCount(config, path));
      this.stmt.upsertNode.run(upsertParams(newDirectory(store, path, now, eventId)));
      this.retagAncestors(config, path, eventId + 1);
    }
    return { node: this.reads.mustGetNode(store, path), created };
  }

  async deleteTree(store: string, path: string, pre: Preconditions, now: number): Promise<DeleteResult> {
    const { result, removed } = await this.turns.free(() => this.tx.deleteTree(store, path, pre, now));
    this.changed(store);
    await this.contents.removeReplaced(removed.map((r) => ({ blob: r.blob, inlined: r.inline !== null })));
    return result;
  }

  private deleteTreeTx(
    store: string,
    path: string,
    pre: Preconditions,
    now: number,
  ): { result: DeleteResult; removed: NodeRow[] } {
    const config = this.reads.liveStore(store);
    const target = this.currentMetadata(store, path, config, now)?.node;
    planDelete(path, target, pre.ifMatch);
    const { low, high } = descendantRange(path);
    // The node itself sorts first ("a" < "a/..."); its delete event comes after those of its contents.
    const doomed = target?.directory
      ? this.stmt.liveSubtree.all(store, path, low, high)
      : [this.stmt.getNode.get(store, path)];
    const ordered = [...doomed.slice(1), doomed[0]].filter((r): r is NodeRow => r !== undefined);
    let eventId = this.allocate(store, ordered.length + this.ancestorCount(config, path)) - 1;
    for (const row of ordered) {
      eventId += 1;
      this.stmt.upsertNode.run(
        upsertParams({
          ...toNode(row),
          deleted: true,
          tag: newTag(),
          prevTag: row.tag,
          blob: "",
          inline: null,
          modified: now,
          eventId,
        }),
      );
    }
    this.retagAncestors(config, path, eventId + 1);
    return { result: { node: this.reads.mustGetNode(store, path), count: ordered.length }, removed: ordered };
  }

  /**
   * The node at a path without its contents, with an expired tombstone treated as absent, and
   * whether its contents are inline (its blob then has no file to remove).
   */
  private currentMetadata(
    store: string,
    path: string,
    config: StoreConfig,
    now: number,
  ): { node: NodeRecord; inlined: boolean } | undefined {
    const row = this.stmt.nodeMetadata.get(store, path);
    if (!row) return undefined;
    const node = rawNode(store, path, row, 0);
    return isExpiredTombstone(node, config, now) ? undefined : { node, inlined: row[8] === 1 };
  }

  /** Reserves `count` event ids; returns the first. */
  private allocate(store: string, count: number): number {
    const last = this.stmt.nextEventId.get(count, store);
    if (last === undefined) throw new NotFoundError(`store ${store} not found`);
    return last - count + 1;
  }

  private ancestorCount(config: StoreConfig, path: string): number {
    return hasRecursiveTags(config.type) ? ancestorsOf(path).length : 0;
  }

  /** On sync-recursive stores, every ancestor directory gets a new tag (and an event). */
  private retagAncestors(config: StoreConfig, path: string, firstEventId: number): void {
    if (!hasRecursiveTags(config.type)) return;
    let eventId = firstEventId;
    for (const dir of ancestorsOf(path)) {
      this.stmt.retag.run({ store: config.name, path: dir, tag: newTag(), eventId });
      eventId += 1;
    }
  }
}
