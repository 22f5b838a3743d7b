// The storage port: everything the services need from a backend, in domain
// terms. Each write is atomic on its own; no operation needs a multi-document
// transaction (see docs/storage.md).

import { isServerStateError, UnavailableError } from "../domain/errors.js";
import type { TagConditions } from "../domain/rules.js";
import type { StoreConfig } from "../domain/store.js";

/** A resource, a directory, or the tombstone of either. */
export interface NodeRecord {
  store: string;
  /** Path without leading or trailing slash; "" for the root directory. */
  path: string;
  directory: boolean;
  deleted: boolean;
  tag: string;
  /** Tag before the latest change; "" when the latest change created it. */
  prevTag: string;
  type: string;
  size: number;
  /** Base64 MD5 of the contents; "" for directories. */
  md5: string;
  /** Blob UUID; "" for directories and tombstones. */
  blob: string;
  created: number;
  modified: number;
  /** Id of the change event that produced this state. */
  eventId: number;
  /** Contents kept with the metadata, for small resources. */
  inline: Uint8Array | null;
  /**
   * The subject of the token whose change made this state (docs/history.md); "" or absent when
   * not known (made before history, or by Trove itself).
   */
  user?: string;
}

/**
 * Where an adapter reports what it recovered from by itself (a replaced blob it could not remove,
 * a reconnection): pino's logger fits it. Adapters never log on the request path otherwise.
 */
export interface StorageLogger {
  warn(details: object, message: string): void;
  info(details: object, message: string): void;
}

/** A logger that drops everything: the default of adapters opened without one. */
export const silentStorageLogger: StorageLogger = { warn() {}, info() {} };

export interface StoreRecord {
  config: StoreConfig;
  deleted: boolean;
  /** Id of the store's most recent change event. */
  lastEventId: number;
  /** Events up to this id may have been purged from history. */
  purgedEventId: number;
  /**
   * The oldest event whose states are all kept (docs/history.md): a path's state at any event from
   * this one on can be read (getNodeAsOf, listNodesAsOf); before it, some may be gone. Set to the
   * store's last event id when keep-versions turns history on, raised by the purge of versions.
   * With keep-versions 0 it is meaningless: the services use the last event id instead.
   */
  historyFrom: number;
  created: number;
  modified: number;
  /** Tag of the root directory. */
  rootTag: string;
}

/** Contents that have been received and stored, not yet referenced by any resource. */
export interface BlobInfo {
  blob: string;
  size: number;
  md5: string;
  /** Present when the contents are small enough to live with the metadata. */
  inline: Uint8Array | null;
}

/** A write's conditions: If-Match and If-None-Match (domain/rules.ts), and where its contents are. */
export interface Preconditions extends TagConditions {
  /**
   * putFile only: the contents are not in a filesystem store's folder (the wrapper that keeps
   * folders did not know the store as one). Checked with the store's type where the write is
   * decided: a filesystem store refuses with UnavailableError and nothing changes.
   */
  notInFolder?: boolean;
}

/** putFile's check of `notInFolder`, made with the store's configuration as the write reads it. */
export function refuseOutsideFolder(config: StoreConfig, pre: Preconditions): void {
  if (pre.notInFolder && config.type === "filesystem") {
    throw new UnavailableError(
      `store ${config.name} is a filesystem store, and the contents were not received into its folder: send them again`,
    );
  }
}

/**
 * putFiles as a series of putFile calls, in order: for an adapter that cannot commit several
 * files together. Each file's refusal is its own; a refusal of the server's state ends the series.
 */
export async function putEach(
  storage: Pick<StoragePort, "putFile">,
  store: string,
  files: readonly { path: string; blob: BlobInfo; type: string; pre: Preconditions }[],
  now: number,
  user?: string,
): Promise<({ result: WriteResult } | { error: unknown })[]> {
  const answers: ({ result: WriteResult } | { error: unknown })[] = [];
  for (const file of files) {
    try {
      answers.push({ result: await storage.putFile(store, file.path, file.blob, file.type, file.pre, now, user) });
    } catch (error) {
      // The server's state, not the file's: the series ends; those before stay written.
      if (isServerStateError(error)) throw error;
      answers.push({ error });
    }
  }
  return answers;
}

export interface ListOptions {
  recursive: boolean;
  includeDeleted: boolean;
  /** Entries per batch. */
  batchSize?: number;
  /**
   * listNodesAsOf only: each state carries its inline contents (`inline`, as getNode gives them;
   * larger ones stay for readBlob), so that a reader of every state (a backup) reads a store in one
   * statement per batch instead of one read per resource. Inline contents are at most INLINE_MAX
   * (64 KiB) each: a batch holds at most `batchSize` times that.
   */
  contents?: boolean;
}

/** What a read of one path needs: the live store's configuration and the node at the path. */
export interface StoreNode {
  config: StoreConfig;
  /** The node at the path, tombstones included; undefined when there is none. */
  node: NodeRecord | undefined;
}

export interface GetStoreNodeOptions {
  /**
   * Whether the caller needs the contents kept with the metadata. When false, an adapter may
   * leave `inline` null to save copying them (a HEAD or a 304 sends none); `readBlob` must
   * still return the contents of a node read that way.
   */
  contents: boolean;
}

/**
 * One state of a path (docs/history.md): the current node, or a version kept when a change
 * replaced it. Its life is [eventId, endedEventId): it was the path's state from the event that
 * made it until the one that replaced it.
 */
export interface VersionRecord extends NodeRecord {
  /** The subject of the token whose change made this state; "" when not known (made before history). */
  user: string;
  /** Id of the event that replaced this state; 0 for the current one. */
  endedEventId: number;
  /** When it was replaced, Unix milliseconds; 0 for the current one. */
  ended: number;
}

export interface WriteResult {
  node: NodeRecord;
  created: boolean;
}

export interface DeleteResult {
  node: NodeRecord;
  count: number;
}

export interface WriteBlobOptions {
  /** Reject (TooLargeError) contents larger than this. */
  maxSize: number;
  /**
   * The store the contents are for, when known: a filesystem store assembles them in its
   * filesystem-temp, on the same file system as its folder (docs/filesystem-stores.md).
   */
  store?: string;
  /**
   * The UUID to store the contents under instead of a new one: a restore keeps the archive's
   * (docs/backup.md). Contents already stored under it are replaced.
   */
  blob?: string;
}

/** A content-insights project: its environments are top-level directories of its store. */
export interface ProjectRecord {
  /** Lower-case UUID. */
  id: string;
  name: string;
  account: string;
  store: string;
  created: number;
  creator: string;
}

export interface EnvironmentRecord {
  /** Lower-case UUID. */
  id: string;
  projectId: string;
  /** Also the name of the top-level directory of the project's store. */
  name: string;
  created: number;
  creator: string;
}

/** The last promotion of a resource into an environment. */
export interface PromotionRecord {
  environmentId: string;
  /** Path within the environment, starting with "/". */
  path: string;
  date: number;
  by: string;
}

export type ReportStatusValue = "generating" | "generated" | "failed";

/**
 * A report and its generation job in one record: a report that is "generating" is a job, claimed
 * by a worker with a lease (`leaseOwner` until `leaseExpires`); an expired lease may be claimed
 * again by any worker of any instance.
 */
export interface ReportRecord {
  /** Lower-case UUID. */
  id: string;
  projectId: string;
  environmentId: string;
  creator: string;
  /** When the report was requested. */
  created: number;
  additionalFields: string[];
  status: ReportStatusValue;
  /** When it became generated or failed; 0 while generating. */
  finished: number;
  /** From this instant on the report answers 404, and its data may be purged. */
  expiresAt: number;
  /** Why it failed, or why the last attempt failed; "" when none. */
  reason: string;
  /** Generation attempts started so far. */
  attempts: number;
  /** Worker holding the job; "" when none. */
  leaseOwner: string;
  /** The lease is over at this instant; a job with leaseExpires <= now may be claimed. */
  leaseExpires: number;
  /** The stored report document (JSON), once generated. */
  document: BlobInfo | null;
  /**
   * The event of the project's store the report describes (docs/insights.md, "A report as of a
   * moment"); 0 or absent: the environment as it is when generated. An adapter reads 0 back as
   * absent, and so a report stored before this field existed.
   */
  asOfEventId?: number;
}

/** Fields a lease holder may change on its job (see `updateReportJob`). */
export type ReportJobUpdate = Partial<
  Pick<ReportRecord, "status" | "finished" | "expiresAt" | "reason" | "leaseExpires" | "leaseOwner" | "document">
>;

/**
 * The resources part of the port: stores, their resources and directories, contents (blobs),
 * and the change feed.
 */
export interface ResourceStorage {
  listStores(): Promise<StoreRecord[]>;
  /** The store, or its tombstone, or undefined. */
  getStore(name: string): Promise<StoreRecord | undefined>;
  /** Throws AlreadyExistsError when a live store of that name exists. */
  createStore(config: StoreConfig, now: number): Promise<StoreRecord>;
  /** Throws NotFoundError for an unknown store. */
  updateStore(config: StoreConfig, now: number): Promise<StoreRecord>;
  /** Deletes the store and all its resources; keeps a tombstone of the store. */
  deleteStore(name: string, now: number): Promise<StoreRecord>;

  /** The node at a path, tombstones included. */
  getNode(store: string, path: string): Promise<NodeRecord | undefined>;
  /**
   * The configuration of a live store together with the node at a path in it, in one read where
   * the backend can (every GET needs both); undefined when the store does not exist or is deleted.
   * Answered at once, without a promise, where the backend reads synchronously (SQLite): a small
   * read is then served with no asynchronous hop (issue 32); a networked backend (MongoDB) answers
   * a promise. Callers `await` it, or test for a Promise where the hop matters.
   */
  getStoreNode(
    store: string,
    path: string,
    options: GetStoreNodeOptions,
  ): StoreNode | undefined | Promise<StoreNode | undefined>;
  /**
   * Children (or all descendants) of a directory in path order, in batches, without their
   * contents (`inline` null: a listing never carries them; `readBlob` reads them).
   */
  listNodes(store: string, dir: string, options: ListOptions): AsyncIterable<NodeRecord[]>;

  /**
   * Creates or replaces a file. The blob must come from writeBlob, and belongs to the adapter
   * from this call on: when the write certainly did not happen (a precondition, a missing
   * parent) the adapter discards it; when it may have happened (the database went away during
   * the commit) it keeps it, and the orphan sweep removes it if nothing refers to it. Once the
   * node is committed, nothing that follows (removing the replaced contents, releasing a lease)
   * makes this call fail: such failures are logged and left to the sweep.
   */
  putFile(
    store: string,
    path: string,
    blob: BlobInfo,
    type: string,
    pre: Preconditions,
    now: number,
    user?: string,
  ): Promise<WriteResult>;
  /**
   * Several files of one store written as putFile writes each, in order, where the adapter can
   * commit them together (SQLite: one transaction, each file in a savepoint of its own). Each
   * file's outcome is its own: a refused file (a precondition, a missing parent) leaves the others
   * written, and its blob is discarded as putFile's would be. Rejects only when none was written
   * (the commit failed: every blob then follows putFile's rule). Optional: without it, the core
   * calls putFile for each file (ResourceCore.writeEach).
   */
  putFiles?(
    store: string,
    files: readonly { path: string; blob: BlobInfo; type: string; pre: Preconditions }[],
    now: number,
    user?: string,
  ): Promise<({ result: WriteResult } | { error: unknown })[]>;
  makeDirectory(store: string, path: string, pre: Preconditions, now: number, user?: string): Promise<WriteResult>;
  /**
   * Deletes a file, or a directory with everything below it, leaving tombstones. Once they are
   * committed, a failure to remove the contents does not fail the call (see putFile).
   */
  deleteTree(store: string, path: string, pre: Preconditions, now: number, user?: string): Promise<DeleteResult>;

  /** Receives contents, computing size and MD5 as they flow. */
  writeBlob(source: AsyncIterable<Uint8Array>, options: WriteBlobOptions): Promise<BlobInfo>;
  /**
   * The contents of a file node, also of one read without its contents; throws NotFoundError
   * when the blob is gone (the node was replaced or deleted since it was read). A chunk may be
   * lent from a pool (storage/chunk-pool.ts): a consumer that is done with it (its bytes sent,
   * nothing holding a view) may `giveBack` it for the next read; one that keeps it need not.
   */
  readBlob(node: NodeRecord): AsyncIterable<Uint8Array>;
  /**
   * Removes a blob that was never handed to putFile or a report (e.g. the body failed its
   * Content-MD5 check). Never throws: a blob it cannot remove is left to the orphan sweep.
   */
  discardBlob(blob: BlobInfo): Promise<void>;

  /**
   * Nodes whose latest change came after `afterEventId`, in event-id order, at
   * most `limit`. An event id never becomes visible before a smaller one of the
   * same store (no holes for a follower).
   */
  changesSince(store: string, afterEventId: number, limit: number): Promise<NodeRecord[]>;
  /**
   * Calls `listener` with the store's name after every committed change made
   * through this adapter (and, where the backend can tell, by other processes).
   * Returns a function that removes the listener.
   */
  onChange(listener: (store: string) => void): () => void;
}

/**
 * History (docs/history.md): with a store's keep-versions above 0, every write that replaces a
 * node's state (a file's contents, a deletion, a directory's new tag, a path made again over its
 * tombstone) keeps the state it replaced as a version, in the same atomic write as the change
 * (on MongoDB: the version first, then the node, so that a crash between them loses nothing).
 * `user` of every write (putFile, makeDirectory, deleteTree, restoreVersion) is recorded on the
 * state it makes. Blobs are shared, never copied: a blob stays while a node or a version points
 * at it.
 */
export interface HistoryStorage {
  /**
   * The states of a path, newest first: the current node (tombstone included) first, then the
   * kept versions by descending eventId; in batches of at most `batchSize`. Nothing when the path
   * has neither.
   */
  listVersions(store: string, path: string, options: { batchSize?: number }): AsyncIterable<VersionRecord[]>;
  /** The state of a path with that tag, current or kept; undefined when there is none. */
  getVersion(store: string, path: string, tag: string): Promise<VersionRecord | undefined>;
  /**
   * The state of a path at event `eventId`: the one whose life [eventId, endedEventId) holds it,
   * a tombstone included; undefined when the path had no node then. The caller checks the
   * store's historyFrom first.
   */
  getNodeAsOf(store: string, path: string, eventId: number): Promise<VersionRecord | undefined>;
  /** listNodes as of an event: the states at `eventId` of a directory's children (or descendants), in path order. */
  listNodesAsOf(store: string, dir: string, eventId: number, options: ListOptions): AsyncIterable<VersionRecord[]>;
  /** The id of the store's last event made at or before `time` (Unix ms); 0 when there is none. */
  eventAt(store: string, time: number): Promise<number>;
  /**
   * Makes a kept state of a file (`tag`) current again, as one new change with a new tag and its
   * own event, its blob shared with the version. The same rules as putFile: `pre.ifMatch` is
   * checked against the current state, the parent directory must be live (NotFoundError
   * otherwise), a directory in the way is refused. NotFoundError when no file state of the path
   * has that tag (unknown, purged, or the tag of a tombstone or a directory).
   */
  restoreVersion(
    store: string,
    path: string,
    tag: string,
    pre: Preconditions,
    now: number,
    user?: string,
  ): Promise<WriteResult>;
}

/**
 * A backup's hold on a live store (docs/backup.md, "Consistency"): from the moment it is taken,
 * every write to the store keeps the states it replaces as versions whatever the store's
 * keep-versions, and the purge leaves the store's versions and tombstones alone, so the store's
 * states at `eventId` stay readable (getNodeAsOf, listNodesAsOf) and their blobs stay stored
 * until the hold ends. It is recorded in the database, so that every process and instance writing
 * the store sees it; it lapses by itself `HOLD_MS` after it was taken or last renewed (a backup
 * that died), and with it the versions it kept go at the next purge. Its times are the adapter's
clock (Date.now()), as the MongoDB leases'.
 */
export interface SnapshotHold {
  store: string;
  /** The store's last committed event when the hold began: the snapshot's event id. */
  eventId: number;
  /**
   * Pushes the lapse back to HOLD_MS from now: true while the hold is still this one's; false once
   * another backup of the store has taken it (it may release it before this one ends, and the
   * purge then take states this one reads: docs/backup.md, "Consistency").
   */
  renew(): Promise<boolean>;
  /** Ends the hold (unless another backup has renewed it since); never throws. */
  release(): Promise<void>;
}

/** How long a snapshot hold lasts without a renewal. */
export const HOLD_MS = 30 * 60 * 1000;

export interface EndedVersionsOptions {
  batchSize?: number;
  contents?: boolean;
}

/** What a backup reads besides the history part: a store held at an event, and its ended versions. */
export interface BackupStorage {
  /** Holds a live store for a snapshot (SnapshotHold); undefined when the store is not live. */
  holdSnapshot(store: string): Promise<SnapshotHold | undefined>;
  /**
   * The kept versions of a store that ended at or before `upTo` (its history before a snapshot at
   * `upTo`), in path order and, within a path, by ascending eventId; in batches of at most
   * `batchSize`; with their inline contents when `contents` (as ListOptions.contents).
   */
  listEndedVersions(store: string, upTo: number, options: EndedVersionsOptions): AsyncIterable<VersionRecord[]>;
}

/** Where a restore stands on a backend (RestoreStorage.restoreTarget). */
export type RestoreTarget =
  | { state: "empty" }
  | { state: "restoring"; archive: string }
  | { state: "used"; reason: string };

/**
 * What a restore writes (docs/backup.md, "Restore"): the archive's records as they are, names,
 * ids, tags, blob UUIDs and event ids kept. Each write is idempotent (an upsert by the record's
 * key), so a restore cut short is finished by running it again. Contents come first, through
 * writeBlob with the archive's `blob` UUID (inline ones travel in the records).
 */
export interface RestoreStorage {
  /** Whether the backend is empty, being restored (from the archive named), or holds data (and what). */
  restoreTarget(): Promise<RestoreTarget>;
  /** Marks the backend as being restored from `archive`: a server refuses to start on it until finishRestore. */
  beginRestore(archive: string): Promise<void>;
  finishRestore(): Promise<void>;
  /** A live store with its event counters (lastEventId: the snapshot's); its nodes come with importNodes. */
  importStore(store: StoreRecord): Promise<void>;
  /** Nodes as they are (tombstones included), each with its inline contents or a blob already written. */
  importNodes(store: string, nodes: readonly NodeRecord[]): Promise<void>;
  importVersions(store: string, versions: readonly VersionRecord[]): Promise<void>;
  /** A report as it is, its document's contents inline or written already. */
  importReport(report: ReportRecord): Promise<void>;
}

/** The content-insights part of the port: projects, environments, promotion records, reports and their jobs. */
export interface InsightsStorage {
  /** Throws AlreadyExistsError when the account already has a project of that name. */
  createProject(project: ProjectRecord): Promise<ProjectRecord>;
  getProject(id: string): Promise<ProjectRecord | undefined>;
  /** Every project, ordered by account then name. */
  listProjects(): Promise<ProjectRecord[]>;
  /** Throws AlreadyExistsError when the project already has an environment of that name. */
  createEnvironment(environment: EnvironmentRecord): Promise<EnvironmentRecord>;
  getEnvironment(id: string): Promise<EnvironmentRecord | undefined>;
  /** The project's environments, ordered by name. */
  listEnvironments(projectId: string): Promise<EnvironmentRecord[]>;
  /** Records (replaces) the last promotion of a resource into an environment. */
  recordPromotion(promotion: PromotionRecord): Promise<void>;
  /** The last promotion of every promoted resource of an environment. */
  listPromotions(environmentId: string): AsyncIterable<PromotionRecord>;

  /** Stores a new report (status "generating", a job no one holds yet). */
  createReport(report: ReportRecord): Promise<void>;
  /** The report, expired or not (the caller decides what an expired one answers). */
  getReport(id: string): Promise<ReportRecord | undefined>;
  /** The reports of an environment of a project, expired or not, newest first. */
  listReports(projectId: string, environmentId: string): Promise<ReportRecord[]>;
  /**
   * Atomically takes the oldest "generating" report whose lease is over (leaseExpires <= now):
   * sets leaseOwner, leaseExpires = now + leaseMs, attempts + 1; undefined when there is none.
   */
  claimReportJob(owner: string, now: number, leaseMs: number): Promise<ReportRecord | undefined>;
  /**
   * Applies `update` only while `owner` holds the job (leaseOwner = owner and status
   * "generating"); returns whether it did. Finishing a report is one such update; a document
   * blob handed to it belongs to the adapter from then on (as putFile's does).
   */
  updateReportJob(id: string, owner: string, update: ReportJobUpdate): Promise<boolean>;
  /** The stored report document; throws NotFoundError when it is gone. */
  readReportDocument(report: ReportRecord): AsyncIterable<Uint8Array>;
}

/**
 * What an adapter provides: the resources part (itself), the insights part, and what concerns
 * the backend as a whole.
 */
/**
 * The other processes on the same data directory (`trove serve --workers`): what one process
 * commits, the others are told, so their parked polls and report watchers wake as this one's do.
 * A topic names the kind of key ("store": a store's name; "report": a report id; "job": a report
 * job was stored). Publishing never throws and never waits.
 */
export interface PeerChannel {
  publish(topic: string, key: string): void;
  /** Calls `listener` with every key another process published on `topic`; returns the unsubscribe. */
  subscribe(topic: string, listener: (key: string) => void): () => void;
}

/**
 * Turns at a shared database's write lock, handed to the processes that ask in the order they
 * asked (the primary of `trove serve --workers` keeps the queue). The database's own lock still
 * guards every write; the turns make the workers wait for it in order, without blocking, instead
 * of in SQLite's busy handler (which sleeps the whole event loop and favours no one).
 */
export interface WriteTurns {
  /** Asks for the turn: `granted` is called once this process holds it, and must end with `release`. */
  take(granted: () => void): void;
  release(): void;
}

export interface StoragePort extends ResourceStorage, HistoryStorage, BackupStorage, RestoreStorage {
  /** Projects, environments, promotions and reports, kept by the same backend. */
  readonly insights: InsightsStorage;
  /** Settings that describe the deployment, reported in every store listing. */
  reportedSettings(): Record<string, string>;
  /**
   * Removes tombstones older than their store's keep-deleted, versions that ended longer ago than
   * their store's keep-versions (raising its historyFrom past them, and removing blobs nothing
   * points at any more), and reports (with their documents) whose expiresAt has passed; returns
   * how many records went.
   */
  purgeExpired(now: number): Promise<number>;
  /** The backend's name, "sqlite" or "mongodb" (metrics, the start-up line). */
  readonly backend: string;
  /**
   * Resolves when the backend answers a trivial request (readiness, health): SQLite is open and
   * answers a query; MongoDB answers a ping within PING_TIMEOUT_MS. Rejects with UnavailableError,
   * whose message says why, otherwise.
   */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** How long a readiness ping may wait for the backend. */
export const PING_TIMEOUT_MS = 2000;
