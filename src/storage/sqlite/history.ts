// History on the embedded backend (docs/history.md): the states a write replaces, kept as rows
// of `versions` in the write's own transaction; a path's states, one by tag, a path or a listing
// as of an event, the event of a time; and which kept state a restore may bring back.

import { restorableFile } from "../../domain/history.js";
import { comparePaths, descendantRange } from "../../domain/path.js";
import { keepsVersions, type StoreConfig } from "../../domain/store.js";
import { keysetPages } from "../keyset-pages.js";
import type { ListOptions, VersionRecord } from "../port.js";
import { currentState, rawNode, rawVersion, toNode, toVersion } from "./rows.js";
import type { Statements } from "./schema.js";

/** How many of the nodes' events after a candidate eventAt reads at a time, looking for its re-tags. */
const EVENTS_AFTER = 64;

export class SqliteHistory {
  constructor(private readonly stmt: Statements) {}

  /**
   * Inside a write's transaction, before it overwrites the node at `path`: keeps that node's
   * state as a version ended by `endedEventId` (the event of the state that replaces it) at
   * `now`, when the store keeps versions. Nothing when there is no node.
   */
  keepReplaced(config: StoreConfig, path: string, endedEventId: number, now: number): void {
    if (keepsVersions(config)) this.stmt.keepVersion.run(endedEventId, now, config.name, path);
  }

  /**
   * The states of a path, newest first: the current node (without its contents, as in a
   * listing: readBlob finds them), then the kept versions by descending event.
   */
  async *listVersions(store: string, path: string, options: { batchSize?: number }): AsyncIterable<VersionRecord[]> {
    const limit = Math.max(1, options.batchSize ?? 1000);
    const row = this.stmt.nodeMetadata.get(store, path);
    const current = row && currentState(rawNode(store, path, row, 0));
    let batch: VersionRecord[] = current ? [current] : [];
    // A version with the node's own event is the node (MongoDB's crash window): below it only.
    let before = current ? current.eventId : Number.MAX_SAFE_INTEGER;
    for (let done = false; !done; ) {
      const want = limit - batch.length;
      if (want > 0) {
        const rows = this.stmt.versionsBefore.all(store, path, before, want);
        for (const r of rows) batch.push(rawVersion(store, path, r, 1));
        before = batch.at(-1)?.eventId ?? before;
        done = rows.length < want;
      }
      if (batch.length > 0) yield batch;
      batch = [];
    }
  }

  /** The state of a path with that tag, current or kept, with its contents. */
  getVersion(store: string, path: string, tag: string): VersionRecord | undefined {
    const node = this.stmt.getNode.get(store, path);
    if (node?.tag === tag) return currentState(toNode(node));
    const row = this.stmt.versionByTag.get(store, path, tag);
    return row && row.event_id !== node?.event_id ? toVersion(row) : undefined;
  }

  /** The state whose life [eventId, endedEventId) holds `eventId`, with its contents. */
  getNodeAsOf(store: string, path: string, eventId: number): VersionRecord | undefined {
    const node = this.stmt.getNode.get(store, path);
    if (node && node.event_id <= eventId) return currentState(toNode(node));
    // Lives do not overlap: only the latest state made by then can hold the event.
    const row = this.stmt.versionAtOrBefore.get(store, path, eventId);
    return row && row.ended_event_id > eventId ? toVersion(row) : undefined;
  }

  /**
   * listNodes as of an event, in keyset pages of the states then: the nodes and kept file states
   * (statesAsOf in schema.ts) merged with the kept directory states (dirStatesAsOf), which are
   * read up to the last path of the first (or `limit` of them when that is the end).
   */
  listNodesAsOf(store: string, dir: string, eventId: number, options: ListOptions): AsyncIterable<VersionRecord[]> {
    const { low, high } = descendantRange(dir);
    const s = this.stmt;
    const contents = options.contents === true;
    // Kept directory states have no contents: dirStates never reads the column.
    const [states, dirStates] = !options.recursive
      ? [contents ? s.childrenAsOfWithContents : s.childrenAsOf, s.childDirsAsOf]
      : dir === ""
        ? [contents ? s.belowRootAsOfWithContents : s.belowRootAsOf, s.dirsBelowRootAsOf]
        : [contents ? s.descendantsAsOfWithContents : s.descendantsAsOf, s.descendantDirsAsOf];
    const page = (after: string, limit: number) => {
      const params = { store, dir, after, high, event: eventId, limit };
      const found = states.all(params).map((r) => rawVersion(store, r[0] as string, r, 1));
      const until = found.length === limit ? found.at(-1)?.path : undefined;
      const dirs: VersionRecord[] = [];
      for (let from = after; dirs.length < limit; ) {
        const visited = dirStates.all({ ...params, after: from });
        for (const r of visited) if (r[1] !== null) dirs.push(rawVersion(store, r[1] as string, r, 2));
        from = visited.at(-1)?.[0] as string;
        if (visited.length < limit || (until !== undefined && comparePaths(from, until) > 0)) break;
      }
      return dirs.length === 0 ? found : mergeByPath(found, dirs).slice(0, limit);
    };
    // keysetPages hands back the records page gives it: states, typed as nodes there.
    return keysetPages(page, options.recursive ? low : "", options) as AsyncIterable<VersionRecord[]>;
  }

  /**
   * The store's last event made at or before `time`. A state's `modified` is the time of its
   * event, but for a directory re-tagged by a change below it (its time is then the `ended` of
   * the state it replaced, when that one is kept); a re-tag's events come last in their change.
   * So: the latest of the events whose time is known, then the re-tags that directly follow it
   * among the nodes (the change's re-tags that nothing has replaced since).
   */
  eventAt(store: string, time: number): number {
    let event = Math.max(
      this.stmt.nodeEventAt.get(store, time) ?? 0,
      this.stmt.versionEventAt.get(store, time) ?? 0,
      this.stmt.endedEventAt.get(store, time) ?? 0,
    );
    if (event === 0) return 0;
    for (;;) {
      const rows = this.stmt.eventsAfter.all(store, event, EVENTS_AFTER);
      for (const [next, retag] of rows as Array<[number, number]>) {
        if (next !== event + 1 || retag !== 1) return event;
        event = next;
      }
      if (rows.length < EVENTS_AFTER) return event;
    }
  }

  /**
   * Inside a restore's transaction: the file state of `path` with `tag`, current or kept, with its
   * contents; NotFoundError when there is none (unknown, purged, or a tombstone's or directory's).
   */
  restorable(store: string, path: string, tag: string): VersionRecord {
    return restorableFile(this.getVersion(store, path, tag), store, path, tag);
  }
}

/** Two lists of states in path order, with no path in both, as one. */
function mergeByPath(a: VersionRecord[], b: VersionRecord[]): VersionRecord[] {
  const merged: VersionRecord[] = [];
  let i = 0;
  let j = 0;
  for (let x = a[0], y = b[0]; x && y; x = a[i], y = b[j]) {
    if (comparePaths(x.path, y.path) < 0) {
      merged.push(x);
      i++;
    } else {
      merged.push(y);
      j++;
    }
  }
  return merged.concat(a.slice(i), b.slice(j));
}
