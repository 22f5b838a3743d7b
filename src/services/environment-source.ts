// An environment of a project's store as report generation and comparisons read it
// (ResourceSource): the files below the environment's top-level directory, now or as of an
// earlier event of the store (docs/history.md), each opened only when the builder asks.

import { HistoryPurgedError, NotFoundError } from "../domain/errors.js";
import { momentEvent } from "../domain/history.js";
import type { ResourceSource, SourceResource } from "../insights/resource-source.js";
import type { NodeRecord, StoragePort } from "../storage/port.js";

export interface EnvironmentSourceOptions {
  storage: StoragePort;
  store: string;
  /** The environment's directory: its name. */
  directory: string;
  /** Last promotions by environment path, when the report asks for them. */
  promotions?: ReadonlyMap<string, { date: number; by: string }>;
  /** The event of the store to read the environment as of; 0 or absent: now. */
  asOfEventId?: number;
}

/**
 * Throws HistoryPurgedError (with the reason) when the store no longer keeps its states at
 * `eventId`: the purge raised its history horizon past it, or its history was turned off.
 */
export async function requireKeptMoment(storage: StoragePort, store: string, eventId: number): Promise<void> {
  const record = await storage.getStore(store);
  if (!record || record.deleted) throw new NotFoundError(`store ${store} not found`);
  try {
    momentEvent(record, { event: eventId }, undefined);
  } catch (err) {
    if (err instanceof HistoryPurgedError) {
      throw new HistoryPurgedError(`the environment as of event ${eventId} can no longer be read: ${err.message}`);
    }
    throw err;
  }
}

export function environmentSource(options: EnvironmentSourceOptions): ResourceSource {
  const { storage, store, directory, promotions } = options;
  const asOf = options.asOfEventId ?? 0;
  // readBlob reads inline contents too (a listing carries none).
  const contents = async function* (node: NodeRecord): AsyncIterable<Uint8Array> {
    try {
      yield* storage.readBlob(node);
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      if (asOf > 0) {
        // An earlier state's contents are gone only when the purge took its version: then the
        // moment is gone as a whole (HistoryPurgedError); otherwise the entry has a problem.
        await requireKeptMoment(storage, store, asOf);
        throw err;
      }
      // Replaced since it was listed: read what is there now.
      const now = (await storage.getStoreNode(store, node.path, { contents: true }))?.node;
      if (!now || now.deleted || now.directory) throw err;
      yield* storage.readBlob(now);
    }
  };
  const listing = (): AsyncIterable<NodeRecord[]> =>
    asOf > 0
      ? storage.listNodesAsOf(store, directory, asOf, { recursive: true, includeDeleted: false })
      : storage.listNodes(store, directory, { recursive: true, includeDeleted: false });
  return {
    async *list(): AsyncIterable<SourceResource> {
      const prefix = directory.length;
      if (asOf > 0) await requireKeptMoment(storage, store, asOf);
      for await (const batch of listing()) {
        for (const node of batch) {
          if (node.directory || node.deleted) continue;
          const path = node.path.slice(prefix);
          yield {
            path,
            size: node.size,
            created: node.created,
            lastModified: node.modified,
            md5: node.md5,
            open: () => contents(node),
            promotion: promotionThen(promotions?.get(path), node, asOf),
          };
        }
      }
      // The purge may have run while the states were listed: a listing it cut short is refused.
      if (asOf > 0) await requireKeptMoment(storage, store, asOf);
    },
  };
}

/**
 * The last promotion of a resource as a report then would have shown it. Promotion records are
 * not kept in history: each replaces the one before. A record made after the state the report
 * reads (a later promotion) says nothing of then, and the one it replaced is gone: none is shown.
 */
function promotionThen(
  promotion: { date: number; by: string } | undefined,
  state: NodeRecord,
  asOf: number,
): { date: number; by: string } | undefined {
  if (promotion === undefined || asOf === 0) return promotion;
  return promotion.date <= state.modified ? promotion : undefined;
}
