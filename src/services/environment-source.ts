// An environment of a project's store as report generation reads it (ResourceSource): the
// files below the environment's top-level directory, each opened only when the builder asks.

import { NotFoundError } from "../domain/errors.js";
import type { ResourceSource, SourceResource } from "../insights/resource-source.js";
import type { NodeRecord, StoragePort } from "../storage/port.js";

export interface EnvironmentSourceOptions {
  storage: StoragePort;
  store: string;
  /** The environment's directory: its name. */
  directory: string;
  /** Last promotions by environment path, when the report asks for them. */
  promotions?: ReadonlyMap<string, { date: number; by: string }>;
}

export function environmentSource(options: EnvironmentSourceOptions): ResourceSource {
  const { storage, store, directory, promotions } = options;
  // readBlob reads inline contents too (a listing carries none).
  const contents = async function* (node: NodeRecord): AsyncIterable<Uint8Array> {
    try {
      yield* storage.readBlob(node);
    } catch (err) {
      // Replaced since it was listed: read what is there now.
      if (!(err instanceof NotFoundError)) throw err;
      const now = (await storage.getStoreNode(store, node.path, { contents: true }))?.node;
      if (!now || now.deleted || now.directory) throw err;
      yield* storage.readBlob(now);
    }
  };
  return {
    async *list(): AsyncIterable<SourceResource> {
      const prefix = directory.length;
      for await (const batch of storage.listNodes(store, directory, { recursive: true, includeDeleted: false })) {
        for (const node of batch) {
          if (node.directory || node.deleted) continue;
          const path = node.path.slice(prefix);
          yield {
            path,
            size: node.size,
            created: node.created,
            lastModified: node.modified,
            open: () => contents(node),
            promotion: promotions?.get(path),
          };
        }
      }
    },
  };
}
