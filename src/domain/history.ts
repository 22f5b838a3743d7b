// History rules (docs/history.md), free of I/O: what a moment names, which moment a store can
// still show, and what a subtree restore does to each path.

import { BadRequestError, HistoryPurgedError, NotFoundError } from "./errors.js";
import { parentOf } from "./path.js";
import { keepsVersions, type StoreConfig } from "./store.js";

/** A moment as a client names it: an event id, or a time (Unix ms) standing for the last event at or before it. */
export type Moment = { event: number } | { time: number };

// RFC 3339 date-time: a zone is required, so that one text is one instant wherever it is read.
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i;

/** Parses `as-of`, `restore-as-of` or `as_of`: a whole number (an event id) or an ISO 8601 date-time with a zone. */
export function parseMoment(text: string, what = "as-of"): Moment {
  if (/^\d{1,15}$/.test(text)) return { event: Number(text) };
  if (DATE_TIME.test(text)) {
    const time = Date.parse(text);
    if (!Number.isNaN(time)) return { time };
  }
  throw new BadRequestError(
    `${what} ${JSON.stringify(text)} is neither an event id (a whole number) nor an ISO 8601 date-time with a time zone (e.g. 2026-11-27T15:00:00Z)`,
  );
}

/** What the checks of a moment need to know of the store. */
export interface StoreHistory {
  config: StoreConfig;
  lastEventId: number;
  historyFrom: number;
}

/** The oldest event whose states a store can show: its history horizon, or its last event when it keeps no history. */
export function historyHorizon(store: StoreHistory): number {
  return keepsVersions(store.config) ? Math.min(store.historyFrom, store.lastEventId) : store.lastEventId;
}

/**
 * The event a moment stands for, checked against the store: an event that has not happened is a
 * bad request; one before the history horizon is gone (410). `eventAtTime` is the store's last
 * event at or before the moment's time, for a moment given as a time.
 */
export function momentEvent(store: StoreHistory, moment: Moment, eventAtTime: number | undefined): number {
  const name = store.config.name;
  let event: number;
  if ("event" in moment) {
    event = moment.event;
    if (event > store.lastEventId) {
      throw new BadRequestError(
        `event ${event} has not happened in store ${name}: its last event is ${store.lastEventId}`,
      );
    }
  } else {
    event = eventAtTime ?? 0;
  }
  const horizon = historyHorizon(store);
  if (event < horizon) {
    const at = "event" in moment ? `event ${event}` : `${new Date(moment.time).toISOString()} (event ${event})`;
    throw new HistoryPurgedError(
      keepsVersions(store.config)
        ? `store ${name} keeps its history from event ${horizon} on (keep-versions ${store.config.settings["keep-versions"]}): ${at} is older`
        : `store ${name} keeps no history (keep-versions 0): only its current state, event ${horizon}, can be read, not ${at}`,
    );
  }
  return event;
}

/** A state of a path as a subtree restore compares them: then (at the moment) or now. */
export interface PathState {
  path: string;
  directory: boolean;
  deleted: boolean;
  tag: string;
  /** The contents, by MD5 and size: a filesystem store gives a restored file a blob of its own. */
  md5: string;
  size: number;
  type: string;
}

/** One change of a subtree restore, in the order it is made. */
export interface RestoreAction {
  path: string;
  operation: "create" | "modify" | "delete";
  directory: boolean;
  /** For a file made current again: the tag of its state at the moment. */
  versionTag?: string;
  /** The tag the path has now (If-Match of the change); undefined when it is absent now. */
  currentTag?: string;
}

function live(s: PathState | undefined): PathState | undefined {
  return s && !s.deleted ? s : undefined;
}

/**
 * What a subtree restore does to one path, given its state at the moment (`then`) and now, in
 * path order (a parent before what is below it). `deletedBelow` holds the directories this
 * restore deleted: what was below them is gone already. Returns the changes, in order: the path
 * deleted first when it must go or change kind, then made again as it was.
 */
export function restoreActions(
  path: string,
  thenState: PathState | undefined,
  nowState: PathState | undefined,
  deletedBelow: ReadonlySet<string>,
): RestoreAction[] {
  const then = live(thenState);
  let now = live(nowState);
  for (let at = path.lastIndexOf("/"); at > 0; at = path.lastIndexOf("/", at - 1)) {
    if (deletedBelow.has(path.slice(0, at))) now = undefined;
  }
  const actions: RestoreAction[] = [];
  if (now && (!then || then.directory !== now.directory)) {
    actions.push({ path, operation: "delete", directory: now.directory, currentTag: now.tag });
    now = undefined;
  }
  if (!then) return actions;
  if (then.directory) {
    if (!now) actions.push({ path, operation: "create", directory: true });
    return actions;
  }
  if (!now) {
    actions.push({ path, operation: "create", directory: false, versionTag: then.tag });
  } else if (now.md5 !== then.md5 || now.size !== then.size || now.type !== then.type) {
    actions.push({ path, operation: "modify", directory: false, versionTag: then.tag, currentTag: now.tag });
  }
  return actions;
}

/** A state a version read or a restore names by its tag: only a file's contents. NotFoundError otherwise. */
export function restorableFile<T extends { directory: boolean; deleted: boolean }>(
  state: T | undefined | null,
  store: string,
  path: string,
  tag: string,
): T {
  if (!state || state.directory || state.deleted) {
    throw new NotFoundError(
      `/${path} in store ${store} has no version ${tag}: unknown, purged, or not contents (a deletion or a directory)`,
    );
  }
  return state;
}

/** The restore of one resource needs its parent directory live (a subtree restore brings it back). */
export function checkRestoreParent(
  path: string,
  parent: { directory: boolean; deleted: boolean } | undefined | null,
): void {
  if (parent && !parent.deleted && parent.directory) return;
  const parentPath = parentOf(path) ?? "";
  throw new NotFoundError(
    `parent directory /${parentPath === "" ? "" : `${parentPath}/`} of /${path} not found: restore the directory as of a moment to bring it back`,
  );
}
