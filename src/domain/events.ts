// The change feed's rules: where a follower stands in a store, and how a
// change is named.

export interface FeedState {
  deleted: boolean;
  lastEventId: number;
  purgedEventId: number;
}

/** Either the follower must relist and restart from `reset`, or it gets the events after `since`. */
export type FeedPosition = { reset: number } | { since: number };

export function positionOf(store: FeedState | undefined, cursor: number): FeedPosition {
  // A store that does not exist: relist (which answers 404) and start from 0.
  if (!store) return { reset: 0 };
  if (store.deleted) return { reset: store.lastEventId };
  // Events up to purgedEventId may be gone; a cursor beyond the last id is from another life of the store.
  if (cursor < store.purgedEventId || cursor > store.lastEventId) return { reset: store.lastEventId };
  return { since: cursor };
}

/** idr://{store}/{path}, each segment percent-encoded. */
export function idrUri(store: string, path: string): string {
  return `idr://${store}/${path.split("/").map(encodeURIComponent).join("/")}`;
}

export function operationOf(node: { deleted: boolean }): "modify" | "delete" {
  return node.deleted ? "delete" : "modify";
}
