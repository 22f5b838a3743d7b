// Reads of the current state: stores, a node, a store with a node (every GET: one round trip),
// listings in keyset pages, and the change feed up to the committed watermark.

import { descendantRange } from "../../domain/path.js";
import type { StoreType } from "../../domain/store.js";
import { keysetPages } from "../keyset-pages.js";
import type { GetStoreNodeOptions, ListOptions, NodeRecord, StoreNode, StoreRecord } from "../port.js";
import { type MongoCollections, nodeKey, STORE_CONFIG, type StoreDoc, toNode } from "./mongo-collections.js";
import { guard } from "./mongo-driver.js";

export class MongoReads {
  constructor(private readonly c: MongoCollections) {}

  async listStores(): Promise<StoreRecord[]> {
    return guard(async () => {
      const docs = await this.c.stores.find({ deleted: false }).sort({ _id: 1 }).toArray();
      return Promise.all(docs.map((d) => this.toStore(d)));
    });
  }

  async getStore(name: string): Promise<StoreRecord | undefined> {
    return guard(async () => {
      // The root's tag is read with the store's document (one round trip), used if it is live.
      const [doc, root] = await Promise.all([
        this.c.stores.findOne({ _id: name }),
        this.c.nodes.findOne({ _id: nodeKey(name, "") }, { projection: { tag: 1 } }),
      ]);
      return doc ? this.toStore(doc, root) : undefined;
    });
  }

  async getNode(store: string, path: string): Promise<NodeRecord | undefined> {
    return guard(async () => {
      const doc = await this.c.nodes.findOne({ _id: nodeKey(store, path) });
      return doc ? toNode(doc) : undefined;
    });
  }

  // The store's document and the node, both by _id and sent together: one round trip, two
  // commands. One command would need `_id: {$in: [...]}` (with the configuration copied into the
  // root node), which FerretDB cannot answer from its index: it scans the whole collection
  // (explain: filterPushdown false), so every GET would cost a scan of every store's nodes there.
  // Nothing is cached: what is answered is what the database held when the request came.
  async getStoreNode(store: string, path: string, options: GetStoreNodeOptions): Promise<StoreNode | undefined> {
    return guard(async () => {
      const [doc, node] = await Promise.all([
        this.c.stores.findOne({ _id: store }, { projection: STORE_CONFIG }),
        this.c.nodes.findOne({ _id: nodeKey(store, path) }, options.contents ? {} : { projection: { inline: 0 } }),
      ]);
      if (!doc || doc.deleted) return undefined;
      const config = { name: doc._id, type: doc.type as StoreType, settings: doc.settings };
      return { config, node: node ? toNode(node) : undefined };
    });
  }

  listNodes(store: string, dir: string, options: ListOptions): AsyncIterable<NodeRecord[]> {
    const { low, high } = descendantRange(dir);
    const page = async (after: string, limit: number) => {
      const path = options.recursive && dir !== "" ? { $gt: after, $lt: high } : { $gt: after };
      const filter = options.recursive ? { store, path } : { store, parent: dir, path };
      const docs = await guard(() =>
        this.c.nodes
          .find(filter, { projection: { inline: 0 } })
          .sort({ path: 1 })
          .limit(limit)
          .toArray(),
      );
      return docs.map((d) => toNode({ ...d, inline: null }));
    };
    return keysetPages(page, options.recursive ? low : "", options);
  }

  async changesSince(store: string, afterEventId: number, limit: number): Promise<NodeRecord[]> {
    return guard(async () => {
      const s = await this.c.stores.findOne({ _id: store }, { projection: { committedEventId: 1 } });
      if (!s) return [];
      // Only up to the watermark: every event at or below it is written.
      const docs = await this.c.nodes
        .find({ store, eventId: { $gt: afterEventId, $lte: s.committedEventId } }, { projection: { inline: 0 } })
        .sort({ eventId: 1 })
        .limit(limit)
        .toArray();
      return docs.map((d) => toNode({ ...d, inline: null }));
    });
  }

  /** The store's record from its document, with its root's tag (read here unless given). */
  async toStore(d: StoreDoc, read?: { tag: string } | null): Promise<StoreRecord> {
    const root = d.deleted
      ? null
      : read !== undefined
        ? read
        : await this.c.nodes.findOne({ _id: nodeKey(d._id, "") }, { projection: { tag: 1 } });
    return {
      config: { name: d._id, type: d.type as StoreType, settings: d.settings },
      deleted: d.deleted,
      // Followers see only what is committed.
      lastEventId: d.committedEventId,
      purgedEventId: d.purgedEventId,
      created: d.created,
      modified: d.modified,
      rootTag: root?.tag ?? "",
      historyFrom: d.historyFrom ?? 0,
    };
  }
}
