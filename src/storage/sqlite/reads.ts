// The reads of the embedded backend: stores, one node, a store with one node (a GET's single
// statement), listings in keyset pages, and the change feed.

import { NotFoundError } from "../../domain/errors.js";
import { descendantRange } from "../../domain/path.js";
import { heldForSnapshot, type StoreConfig } from "../../domain/store.js";
import { keysetPages } from "../keyset-pages.js";
import type { GetStoreNodeOptions, ListOptions, NodeRecord, StoreNode, StoreRecord } from "../port.js";
import { rawNode, toConfig, toNode, toStore } from "./rows.js";
import type { Statements } from "./schema.js";

export class SqliteReads {
  constructor(private readonly stmt: Statements) {}

  listStores(): StoreRecord[] {
    return this.stmt.listStores.all().map(toStore);
  }

  getStore(name: string): StoreRecord | undefined {
    const row = this.stmt.getStore.get(name);
    return row && toStore(row);
  }

  mustGetStore(name: string): StoreRecord {
    const store = this.getStore(name);
    if (!store) throw new NotFoundError(`store ${name} not found`);
    return store;
  }

  /**
   * The configuration of a live store as a write sees it (kept states while a backup holds it:
   * snapshot.ts); NotFoundError otherwise.
   */
  liveStore(name: string): StoreConfig {
    const row = this.stmt.liveStoreConfig.get(name);
    if (!row) throw new NotFoundError(`store ${name} not found`);
    const config = toConfig(name, row[0] as string, row[1] as string);
    return (row[2] as number) > Date.now() ? heldForSnapshot(config) : config;
  }

  getNode(store: string, path: string): NodeRecord | undefined {
    const row = this.stmt.getNode.get(store, path);
    return row && toNode(row);
  }

  mustGetNode(store: string, path: string): NodeRecord {
    const node = this.getNode(store, path);
    if (!node) throw new NotFoundError(`/${path} not found`);
    return node;
  }

  getStoreNode(store: string, path: string, options: GetStoreNodeOptions): StoreNode | undefined {
    const row = (options.contents ? this.stmt.storeNode : this.stmt.storeNodeMetadata).get(path, store);
    if (!row) return undefined;
    const config = toConfig(store, row[0] as string, row[1] as string);
    // tag is NOT NULL: null means the LEFT JOIN found no node.
    return { config, node: row[4] === null ? undefined : rawNode(store, path, row, 2) };
  }

  listNodes(store: string, dir: string, options: ListOptions): AsyncIterable<NodeRecord[]> {
    const { low, high } = descendantRange(dir);
    const page = (after: string, limit: number) =>
      (!options.recursive
        ? this.stmt.children.all(store, dir, after, limit)
        : dir === ""
          ? this.stmt.belowRoot.all(store, after, limit)
          : this.stmt.descendants.all(store, after, high, limit)
      ).map((r) => rawNode(store, r[0] as string, r, 1));
    return keysetPages(page, options.recursive ? low : "", options);
  }

  changesSince(store: string, afterEventId: number, limit: number): NodeRecord[] {
    return this.stmt.changesSince.all(store, afterEventId, limit).map(toNode);
  }
}
