// The writes of the embedded backend, each one transaction (BEGIN IMMEDIATE, which also
// serializes event-id allocation with the commit): stores, putFile, makeDirectory, deleteTree,
// restoreVersion. Each keeps the states it replaces as versions, in the same transaction, when
// the store keeps versions (history.ts). After the commit: listeners told, replaced contents
// removed when nothing refers to them any more.

import type Database from "better-sqlite3";
import { NotFoundError } from "../../domain/errors.js";
import { newTag } from "../../domain/etag.js";
import { checkRestoreParent } from "../../domain/history.js";
import { ancestorsOf, descendantRange, parentOf } from "../../domain/path.js";
import { isExpiredTombstone, planCreateStore, planDelete, planMakeDirectory, planPutFile } from "../../domain/rules.js";
import { hasRecursiveTags, keepsVersions, type StoreConfig } from "../../domain/store.js";
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
import type { SqliteHistory } from "./history.js";
import type { SqliteReads } from "./reads.js";
import { type NodeRow, newDirectory, type Replaced, rawNode, toConfig, toNode, upsertParams } from "./rows.js";
import type { Statements } from "./schema.js";
import { isSqliteError, type SqliteWrites } from "./sqlite-errors.js";

export interface SqliteNodeWritesOptions {
  db: Database.Database;
  stmt: Statements;
  reads: SqliteReads;
  history: SqliteHistory;
  turns: SqliteWrites;
  contents: SqliteContents;
  reserve: SpaceReserve;
  /** A commit changed the store: tells the listeners and the peers; never throws. */
  changed(store: string): void;
}

/** One file of putFiles. */
type PutFileInput = { path: string; blob: BlobInfo; type: string; pre: Preconditions };

export class SqliteNodeWrites {
  private readonly stmt: Statements;
  private readonly reads: SqliteReads;
  private readonly history: SqliteHistory;
  private readonly turns: SqliteWrites;
  private readonly contents: SqliteContents;
  private readonly reserve: SpaceReserve;
  private readonly changed: (store: string) => void;
  private readonly tx;

  constructor(options: SqliteNodeWritesOptions) {
    this.stmt = options.stmt;
    this.reads = options.reads;
    this.history = options.history;
    this.turns = options.turns;
    this.contents = options.contents;
    this.reserve = options.reserve;
    this.changed = options.changed;
    const db = options.db;
    const putOne = db.transaction(
      (store: string, path: string, blob: BlobInfo, type: string, pre: Preconditions, now: number, user: string) =>
        this.putFileTx(store, path, blob, type, pre, now, user),
    );
    // Made once: db.transaction() builds four wrapper functions on every call.
    this.tx = {
      createStore: db.transaction((config: StoreConfig, now: number) => this.createStoreTx(config, now)).immediate,
      updateStore: db.transaction((config: StoreConfig, now: number) => this.updateStoreTx(config, now)).immediate,
      deleteStore: db.transaction((name: string, now: number) => this.deleteStoreTx(name, now)).immediate,
      putFile: db.transaction(
        (store: string, path: string, blob: BlobInfo, type: string, pre: Preconditions, now: number, user: string) =>
          this.putFileTx(store, path, blob, type, pre, now, user),
      ).immediate,
      // Each file in a savepoint of its own (better-sqlite3 nests a transaction function called
      // inside another as a savepoint): a refused file is rolled back alone, the others commit.
      putFiles: db.transaction((store: string, files: readonly PutFileInput[], now: number, user: string) =>
        files.map((file) => {
          try {
            return { outcome: putOne(store, file.path, file.blob, file.type, file.pre, now, user) };
          } catch (error) {
            // The database's own failure (a full disk, I/O) ends the transaction: nothing commits.
            if (isSqliteError(error)) throw error;
            return { error };
          }
        }),
      ).immediate,
      makeDirectory: db.transaction((store: string, path: string, pre: Preconditions, now: number, user: string) =>
        this.makeDirectoryTx(store, path, pre, now, user),
      ).immediate,
      deleteTree: db.transaction((store: string, path: string, pre: Preconditions, now: number, user: string) =>
        this.deleteTreeTx(store, path, pre, now, user),
      ).immediate,
      restoreVersion: db.transaction(
        (store: string, path: string, tag: string, pre: Preconditions, now: number, user: string) =>
          this.restoreVersionTx(store, path, tag, pre, now, user),
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
    this.stmt.upsertNode.run(upsertParams(newDirectory(config.name, "", now, eventId, "")));
    // Nothing before the store's first event: a store made again shows none of its former life.
    this.stmt.setHistoryFrom.run(eventId, config.name);
  }

  async updateStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    await this.turns.write(() => this.tx.updateStore(config, now));
    this.changed(config.name);
    return this.reads.mustGetStore(config.name);
  }

  private updateStoreTx(config: StoreConfig, now: number): void {
    const existing = this.stmt.getStore.get(config.name);
    if (!existing || existing.deleted === 1) throw new NotFoundError(`store ${config.name} not found`);
    const params = { name: config.name, type: config.type, settings: JSON.stringify(config.settings), now };
    this.stmt.updateStore.run(params);
    // History turned on: every state from the store's last event on is kept (docs/history.md).
    if (keepsVersions(config) && !keepsVersions(toConfig(existing.name, existing.type, existing.settings))) {
      this.stmt.startHistory.run(config.name);
    }
  }

  async deleteStore(name: string, now: number): Promise<StoreRecord> {
    const removed = await this.turns.free(() => this.tx.deleteStore(name, now));
    this.changed(name);
    await this.contents.removeReplaced(removed);
    return this.reads.mustGetStore(name);
  }

  private deleteStoreTx(name: string, now: number): Replaced[] {
    const existing = this.stmt.getStore.get(name);
    if (!existing || existing.deleted === 1) throw new NotFoundError(`store ${name} not found`);
    this.stmt.buryStore.run({ name, now });
    const nodes = this.stmt.deleteStoreNodes.all(name).map((r) => ({ blob: r.blob, inlined: r.inline !== null }));
    const versions = this.stmt.deleteStoreVersions.all(name).map((r) => ({ blob: r.blob, inlined: r.inlined === 1 }));
    return [...nodes, ...versions];
  }

  async putFile(
    store: string,
    path: string,
    blob: BlobInfo,
    type: string,
    pre: Preconditions,
    now: number,
    user = "",
  ): Promise<WriteResult> {
    let outcome: ReturnType<typeof this.tx.putFile>;
    try {
      outcome = await this.turns.write(() => this.tx.putFile(store, path, blob, type, pre, now, user));
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

  /** putFile for several files of one store in one transaction (StoragePort.putFiles). */
  async putFiles(
    store: string,
    files: readonly PutFileInput[],
    now: number,
    user = "",
  ): Promise<({ result: WriteResult } | { error: unknown })[]> {
    let outcomes: ReturnType<typeof this.tx.putFiles>;
    try {
      outcomes = await this.turns.write(() => this.tx.putFiles(store, files, now, user));
    } catch (err) {
      // Nothing committed: every blob is ours to discard, as after a failed putFile.
      for (const file of files) await this.contents.discardUnreferenced(file.blob);
      throw err;
    }
    const replaced: Replaced[] = [];
    const answers: ({ result: WriteResult } | { error: unknown })[] = [];
    for (const [i, outcome] of outcomes.entries()) {
      if ("error" in outcome) {
        // Rolled back to its savepoint: its blob is unreferenced unless the same one was written twice.
        await this.contents.discardUnreferenced((files[i] as PutFileInput).blob);
        answers.push({ error: outcome.error });
        continue;
      }
      if (outcome.outcome.replaced) replaced.push(outcome.outcome.replaced);
      answers.push({ result: outcome.outcome.result });
    }
    if (answers.some((answer) => "result" in answer)) this.changed(store);
    await this.contents.removeReplaced(replaced);
    return answers;
  }

  private putFileTx(
    store: string,
    path: string,
    blob: BlobInfo,
    type: string,
    pre: Preconditions,
    now: number,
    user: string,
  ): { result: WriteResult; replaced: Replaced | undefined } {
    const config = this.reads.liveStore(store);
    refuseOutsideFolder(config, pre);
    const stored = this.storedMetadata(store, path);
    const target = stored && this.visible(stored, config, now);
    const parent = this.currentMetadata(store, parentOf(path) ?? "", config, now);
    const { created } = planPutFile(path, target?.node, parent?.node, pre);
    return this.writeFile(config, path, target, { ...blob, type }, created, now, user, stored !== undefined);
  }

  /**
   * The file state a planned write makes (putFile's, or a restore's with a kept state's contents):
   * a new tag and event, the replaced state kept when the store keeps versions, ancestors
   * re-tagged. `replaced`: the contents that no longer have a node, unless a version keeps them.
   */
  private writeFile(
    config: StoreConfig,
    path: string,
    target: { node: NodeRecord; inlined: boolean } | undefined,
    contents: BlobInfo & { type: string },
    created: boolean,
    now: number,
    user: string,
    /** The path has a row (a live node or a tombstone, expired or not): its state is kept. A new path keeps nothing. */
    hasRow: boolean,
  ): { result: WriteResult; replaced: Replaced | undefined } {
    const store = config.name;
    const eventId = this.allocate(store, 1 + this.ancestorCount(config, path));
    // The stored row, as getNode would read it back.
    const node: NodeRecord = {
      store,
      path,
      directory: false,
      deleted: false,
      tag: newTag(),
      prevTag: target && !target.node.deleted ? target.node.tag : "",
      type: contents.type,
      size: contents.size,
      md5: contents.md5,
      blob: contents.blob,
      inline: contents.inline,
      created: created ? now : (target?.node.created ?? now),
      modified: now,
      eventId,
      user,
    };
    // (The statement copies the path's row; without one it would find nothing: 0.1 ms a write, a
    // fifth of a push's server CPU into a new folder, docs/benchmarks.md session 20.)
    if (hasRow) this.history.keepReplaced(config, path, eventId, now);
    this.stmt.upsertNode.run(upsertParams(node));
    this.retagAncestors(config, path, eventId + 1, now, user);
    const replaced = target && !keepsVersions(config) ? { blob: target.node.blob, inlined: target.inlined } : undefined;
    return { result: { node, created }, replaced };
  }

  /**
   * Makes a kept state of a file current again (docs/history.md): as putFile with the state's
   * contents (its blob shared, never copied), after the state is found. The replaced contents go
   * as a putFile's do; nothing is discarded on a refusal, as the blob belongs to the version.
   */
  async restoreVersion(
    store: string,
    path: string,
    tag: string,
    pre: Preconditions,
    now: number,
    user = "",
  ): Promise<WriteResult> {
    const outcome = await this.turns.write(() => this.tx.restoreVersion(store, path, tag, pre, now, user));
    this.changed(store);
    await this.contents.removeReplaced(outcome.replaced ? [outcome.replaced] : []);
    return outcome.result;
  }

  private restoreVersionTx(
    store: string,
    path: string,
    tag: string,
    pre: Preconditions,
    now: number,
    user: string,
  ): { result: WriteResult; replaced: Replaced | undefined } {
    const config = this.reads.liveStore(store);
    const state = this.history.restorable(store, path, tag);
    const parentPath = parentOf(path) ?? "";
    const parent = this.currentMetadata(store, parentPath, config, now)?.node;
    checkRestoreParent(path, parent);
    const stored = this.storedMetadata(store, path);
    const target = stored && this.visible(stored, config, now);
    const { created } = planPutFile(path, target?.node, parent, pre);
    const contents = { blob: state.blob, size: state.size, md5: state.md5, inline: state.inline, type: state.type };
    // A replaced blob that the restored state shares is still referenced: removeReplaced keeps it.
    return this.writeFile(config, path, target, contents, created, now, user, stored !== undefined);
  }

  async makeDirectory(store: string, path: string, pre: Preconditions, now: number, user = ""): Promise<WriteResult> {
    const result = await this.turns.write(() => this.tx.makeDirectory(store, path, pre, now, user));
    if (result.created) this.changed(store);
    this.reserve.restore();
    return result;
  }

  private makeDirectoryTx(store: string, path: string, pre: Preconditions, now: number, user: string): WriteResult {
    const config = this.reads.liveStore(store);
    const target = this.currentMetadata(store, path, config, now)?.node;
    const parent = path === "" ? undefined : this.currentMetadata(store, parentOf(path) ?? "", config, now)?.node;
    const { created } = planMakeDirectory(path, target, parent, pre);
    if (created) {
      const eventId = this.allocate(store, 1 + this.ancestorCount(config, path));
      // Over a tombstone (the only node a new directory can replace): the tombstone is kept.
      this.history.keepReplaced(config, path, eventId, now);
      this.stmt.upsertNode.run(upsertParams(newDirectory(store, path, now, eventId, user)));
      this.retagAncestors(config, path, eventId + 1, now, user);
    }
    return { node: this.reads.mustGetNode(store, path), created };
  }

  async deleteTree(store: string, path: string, pre: Preconditions, now: number, user = ""): Promise<DeleteResult> {
    const { result, removed } = await this.turns.free(() => this.tx.deleteTree(store, path, pre, now, user));
    this.changed(store);
    await this.contents.removeReplaced(removed);
    return result;
  }

  private deleteTreeTx(
    store: string,
    path: string,
    pre: Preconditions,
    now: number,
    user: string,
  ): { result: DeleteResult; removed: Replaced[] } {
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
      this.history.keepReplaced(config, row.path, eventId, now);
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
          user,
        }),
      );
    }
    this.retagAncestors(config, path, eventId + 1, now, user);
    // Kept as versions, the deleted contents stay; else they go once nothing points at them.
    const removed = keepsVersions(config) ? [] : ordered.map((r) => ({ blob: r.blob, inlined: r.inline !== null }));
    return { result: { node: this.reads.mustGetNode(store, path), count: ordered.length }, removed };
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
    const stored = this.storedMetadata(store, path);
    return stored && this.visible(stored, config, now);
  }

  /** The path's row as stored, an expired tombstone included. */
  private storedMetadata(store: string, path: string): { node: NodeRecord; inlined: boolean } | undefined {
    const row = this.stmt.nodeMetadata.get(store, path);
    return row ? { node: rawNode(store, path, row, 0), inlined: row[8] === 1 } : undefined;
  }

  /** A stored row as the rules see it: an expired tombstone is no longer there. */
  private visible(
    stored: { node: NodeRecord; inlined: boolean },
    config: StoreConfig,
    now: number,
  ): { node: NodeRecord; inlined: boolean } | undefined {
    return isExpiredTombstone(stored.node, config, now) ? undefined : stored;
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

  /**
   * On sync-recursive stores, every ancestor directory gets a new tag (and an event), made by the
   * change's user; its earlier state is kept when the store keeps versions.
   */
  private retagAncestors(config: StoreConfig, path: string, firstEventId: number, now: number, user: string): void {
    if (!hasRecursiveTags(config.type)) return;
    let eventId = firstEventId;
    for (const dir of ancestorsOf(path)) {
      this.history.keepReplaced(config, dir, eventId, now);
      this.stmt.retag.run({ store: config.name, path: dir, tag: newTag(), eventId, user });
      eventId += 1;
    }
  }
}
