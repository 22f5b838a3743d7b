// Listings read in keyset pages (`path > last ORDER BY path LIMIT n`): memory
// stays bounded, and no database cursor is held across awaits.

import type { ListOptions, NodeRecord } from "./port.js";

/** Pages of a listing from `page(after, limit)`, tombstones dropped unless asked for. */
export async function* keysetPages(
  page: (after: string, limit: number) => NodeRecord[] | Promise<NodeRecord[]>,
  start: string,
  options: ListOptions,
): AsyncIterable<NodeRecord[]> {
  const limit = options.batchSize ?? 1000;
  for (let after = start; ; ) {
    const nodes = await page(after, limit);
    const last = nodes.at(-1);
    if (!last) return;
    after = last.path;
    const visible = options.includeDeleted ? nodes : nodes.filter((n) => !n.deleted);
    if (visible.length > 0) yield visible;
    if (nodes.length < limit) return;
  }
}
