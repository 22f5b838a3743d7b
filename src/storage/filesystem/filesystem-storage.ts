// Filesystem stores (docs/filesystem-stores.md): a decorator around any StoragePort. A store of
// type `filesystem` serves the plain files of a folder; its metadata (tags, MD5, event ids,
// tombstones) stays in the inner adapter, its contents only in the folder. Writes are assembled
// in filesystem-temp, flushed and renamed into place; external changes are reconciled into the
// index by a Scanner per store. Every other store, and everything else, passes through unchanged.

import { randomUUID } from "node:crypto";
import { mkdir, rename, rm, stat, unlink } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join } from "node:path";
import { BadRequestError, NotFoundError, PreconditionFailedError, UnavailableError } from "../../domain/errors.js";
import { checkRestoreParent, restorableFile } from "../../domain/history.js";
import { parentOf } from "../../domain/path.js";
import { isExpiredTombstone, planCreateStore, planDelete, planMakeDirectory, planPutFile } from "../../domain/rules.js";
import { keepsVersions, keepVersionsMillis, type StoreConfig } from "../../domain/store.js";
import { makeDirectory } from "../local/make-directory.js";
import {
  type BlobInfo,
  type DeleteResult,
  type EndedVersionsOptions,
  type GetStoreNodeOptions,
  type InsightsStorage,
  type ListOptions,
  type NodeRecord,
  type Preconditions,
  putEach,
  type ReportRecord,
  type RestoreTarget,
  type SnapshotHold,
  type StorageLogger,
  type StoragePort,
  type StoreNode,
  type StoreRecord,
  silentStorageLogger,
  type VersionRecord,
  type WriteBlobOptions,
  type WriteResult,
} from "../port.js";
import {
  assemble,
  checkDirectories,
  deletedName,
  emptyDirectory,
  isWithin,
  kindOf,
  lstatOf,
  openVersion,
  syncDirectory,
  tooLongAsBadRequest,
  versionOf,
} from "./folder.js";
import { HISTORY_DIR, KeptCopies } from "./kept-copies.js";
import { Reconciler, type SkipReason } from "./reconciler.js";
import type { ScanLease } from "./scan-lease.js";
import { Scanner, type ScanSummary } from "./scanner.js";

export interface FilesystemStorageOptions {
  logger?: StorageLogger;
  now?: () => number;
  /**
   * Where a filesystem store's filesystem-temp is by default: `<tempRoot>/<store>`. Default: a
   * `filesystem` directory in the inner adapter's own filesystem-temp (inside Trove's data
   * directory on SQLite), else in the system's temporary directory.
   */
  tempRoot?: string;
  /** How often each folder is walked in full, in milliseconds (default 60 s). */
  rescanInterval?: number;
  /** Quiet time after a change notification before the changed paths are read (default 100 ms). */
  settleDelay?: number;
  /** Whether this instance may scan a store now (default: always; the seam for a lease, issue 17 item 7). */
  mayScan?: (store: string) => boolean | Promise<boolean>;
  /** Counts an entry of a folder that is not served (a refused name, a link, a special file). */
  skipped?: (reason: SkipReason) => void;
  /**
   * One scanner among the instances that serve a store (issue 17, item 7): without it, this
   * instance scans every filesystem store it serves; with it, only those whose lease it holds.
   */
  scanLease?: ScanLease;
  /** Told of each full scan this instance made (metrics). */
  scanned?: (summary: ScanSummary) => void;
  /** A scan logs a progress line every this many entries (default 10,000; docs/filesystem-stores.md). */
  progressEvery?: number;
  /**
   * Called by a write that replaces or removes a file of the folder, once the replaced state's
   * bytes are kept and before the file is replaced (the crash test's seam: test/filesystem/history.test.ts).
   */
  afterKeep?: (store: string, path: string) => void | Promise<void>;
  /**
   * Where the kept copies of each store go, in `<historyRoot>/<store>` (docs/history.md,
   * "Filesystem stores"). Default: `history` in the inner adapter's data directory (SQLite), else
   * `trove-history` in each store's filesystem-temp (MongoDB: shared by the instances).
   */
  historyRoot?: string;
}

/** With other instances on the folder, what start-up removes from filesystem-temp: untouched for an hour. */
const SHARED_TEMP_AGE = 3_600_000;
/**
 * How often (by the purge's clock) the kept copies of a store are swept: a sweep lists the store's
 * files. A copy outlives the versions that need it by this much at most.
 */
const COPIES_SWEEP_INTERVAL = 600_000;
/** A copy is removed this long after the last state that needed it ended, past keep-versions (clock steps between writes and the purge). */
const COPIES_MARGIN = 60_000;

/** A filesystem store this instance serves: its folder, its index reconciler and its scanner. */
interface Folder {
  config: StoreConfig;
  temp: string;
  reconciler: Reconciler;
  scanner: Scanner;
  /** With a scan lease: performance.now() until which this instance may scan (0: not the holder). */
  scanUntil: number;
  /** The kept bytes of its states, in its history area (docs/history.md, "Filesystem stores"). */
  copies: KeptCopies;
  /** The purge's time from which its copies are swept again. */
  nextSweep: number;
}

/** Contents assembled in a store's filesystem-temp, waiting for putFile. */
interface Upload {
  store: string;
  file: string;
}

export function createFilesystemStorage(inner: StoragePort, options: FilesystemStorageOptions = {}): FilesystemStorage {
  return new FilesystemStorage(inner, options);
}

export class FilesystemStorage implements StoragePort {
  readonly backend: string;
  readonly insights: InsightsStorage;
  private readonly inner: StoragePort;
  private readonly logger: StorageLogger;
  private readonly now: () => number;
  private readonly tempRoot: string;
  private readonly historyRoot: string | undefined;
  private readonly options: FilesystemStorageOptions;
  private readonly folders = new Map<string, Folder>();
  private readonly uploads = new Map<string, Upload>();
  /**
   * Blobs received for a store that was not a filesystem store when the core read it just before
   * the upload (getStoreNode attaches every filesystem store it meets): their putFile goes to the
   * inner adapter without reading the store again, which kept a PUT on MongoDB at its round trips
   * (test/mongodb/round-trips.test.ts). Removed at putFile or discardBlob.
   */
  private readonly plainUploads = new Map<string, string>();
  /** Start-up: every filesystem store attached, its filesystem-temp emptied, its rescan started. */
  private readonly ready: Promise<void>;
  private closed = false;
  private leaseTimer: NodeJS.Timeout | undefined;
  /** The lease round under way (one at a time). */
  private leaseRound: Promise<void> | undefined;

  constructor(inner: StoragePort, options: FilesystemStorageOptions) {
    this.inner = inner;
    this.backend = inner.backend;
    this.insights = inner.insights;
    this.options = options;
    this.logger = options.logger ?? silentStorageLogger;
    this.now = options.now ?? Date.now;
    const innerTemp = inner.reportedSettings()["filesystem-temp"];
    this.tempRoot = options.tempRoot ?? join(innerTemp ?? join(tmpdir(), "trove"), "filesystem");
    const blobs = inner.reportedSettings()["filesystem-location"];
    this.historyRoot =
      options.historyRoot ?? (blobs !== undefined && isAbsolute(blobs) ? join(dirname(blobs), "history") : undefined);
    this.ready = this.start();
    const lease = options.scanLease;
    if (lease) {
      this.leaseTimer = setInterval(() => void this.followStores().then(() => this.holdLeases()), lease.duration / 3);
      this.leaseTimer.unref();
    }
  }

  /**
   * With a scan lease: attaches the filesystem stores that other instances created since, and
   * detaches those they deleted. An instance competes for the lease of the folders it serves
   * only, and would otherwise learn of a store made elsewhere only at a request for it: slot 1 of
   * `trove serve --workers`, the only one that may scan, never scanned a store another worker made.
   */
  private async followStores(): Promise<void> {
    let stores: StoreRecord[];
    try {
      await this.ready;
      stores = await this.inner.listStores();
    } catch (err) {
      this.logger.warn({ err }, "filesystem stores not followed: the stores could not be listed");
      return;
    }
    const listed = new Map<string, StoreConfig>();
    for (const record of stores) {
      if (!record.deleted && record.config.type === "filesystem") listed.set(record.config.name, record.config);
    }
    for (const [name, folder] of [...this.folders]) {
      const config = listed.get(name);
      if (config && config.settings["filesystem-location"] === folder.config.settings["filesystem-location"]) {
        // Its settings as another instance may have updated them (keep-versions: whether to keep copies).
        folder.config = config;
        continue;
      }
      // Read again: a store this instance created after the listing is not gone.
      const now = await this.inner.getStore(name).catch(() => undefined);
      const location = now && !now.deleted ? now.config.settings["filesystem-location"] : undefined;
      if (location !== folder.config.settings["filesystem-location"] && this.folders.get(name) === folder) {
        await this.detach(name);
      }
    }
    for (const config of listed.values()) {
      if (!this.closed && !this.folders.has(config.name)) this.attach(config);
    }
  }

  /**
   * Takes or renews the scan lease of every filesystem store this instance serves, and resumes
   * or pauses each scanner accordingly: a paused one has no watch open and walks nothing.
   */
  private holdLeases(only?: Folder): Promise<void> {
    const lease = this.options.scanLease;
    if (!lease || this.closed) return Promise.resolve();
    const round = (this.leaseRound ?? Promise.resolve()).then(async () => {
      for (const folder of only ? [only] : [...this.folders.values()]) {
        if (this.closed || this.folders.get(folder.config.name) !== folder) continue;
        const sent = performance.now();
        let held = false;
        try {
          held = await lease.hold(folder.config.name);
        } catch (err) {
          this.logger.warn(
            { err, store: folder.config.name },
            "the scan lease of a filesystem store could not be renewed",
          );
        }
        if (this.closed || this.folders.get(folder.config.name) !== folder) continue;
        const was = folder.scanUntil > performance.now();
        folder.scanUntil = held ? sent + (lease.duration * 2) / 3 : 0;
        if (held && folder.scanner.isPaused) {
          this.logger.info(
            { store: folder.config.name },
            "this instance scans the filesystem store (scan lease taken)",
          );
          folder.scanner.resume();
        } else if (!held && !folder.scanner.isPaused) {
          if (was)
            this.logger.info(
              { store: folder.config.name },
              "another instance scans the filesystem store (scan lease lost)",
            );
          folder.scanner.pause();
        }
      }
    });
    this.leaseRound = round.finally(() => {
      if (this.leaseRound === guarded) this.leaseRound = undefined;
    });
    const guarded = this.leaseRound;
    return round;
  }

  /** Resolves once the filesystem stores found at start-up are attached (their first rescan runs on). */
  whenStarted(): Promise<void> {
    return this.ready;
  }

  /** A full rescan of a filesystem store's folder, resolved when it has ended (operations, tests). */
  async rescan(store: string): Promise<void> {
    await this.ready;
    const folder = this.folders.get(store);
    if (!folder) throw new NotFoundError(`filesystem store ${store} not found`);
    await folder.scanner.rescan();
  }

  private async start(): Promise<void> {
    let stores: StoreRecord[];
    try {
      stores = await this.inner.listStores();
    } catch (err) {
      this.logger.warn({ err }, "filesystem stores not started: the stores could not be listed");
      return;
    }
    for (const record of stores) {
      if (record.config.type !== "filesystem" || this.folders.has(record.config.name)) continue;
      const temp = this.tempOf(record.config);
      // Uploads a crash cut short are only ever here, never in the folder.
      await makeDirectory(temp).catch((err) =>
        this.logger.warn({ err, store: record.config.name, temp }, "filesystem-temp could not be created"),
      );
      // Shared with other instances (a scan lease): their uploads in flight are left alone.
      await emptyDirectory(temp, this.options.scanLease ? SHARED_TEMP_AGE : undefined);
      this.attach(record.config);
    }
  }

  /** The kept copies of a store, whose filesystem-temp is `temp`. */
  private copiesIn(store: string, temp: string): KeptCopies {
    return new KeptCopies(this.historyRoot === undefined ? join(temp, HISTORY_DIR) : join(this.historyRoot, store));
  }

  /** The kept copies of a store's states while it keeps versions. */
  private copiesOf(folder: Folder): KeptCopies | undefined {
    return keepsVersions(folder.config) ? folder.copies : undefined;
  }

  private tempOf(config: StoreConfig): string {
    return config.settings["filesystem-temp"] ?? join(this.tempRoot, config.name);
  }

  /** Starts serving a filesystem store (idempotent). */
  private attach(config: StoreConfig): Folder {
    const existing = this.folders.get(config.name);
    if (existing) return existing;
    const location = config.settings["filesystem-location"] ?? "";
    const reconciler = new Reconciler({
      inner: this.inner,
      store: config.name,
      location,
      now: this.now,
      logger: this.logger,
      skipped: this.options.skipped,
      copies: () => this.copiesOf(folder),
    });
    const { mayScan, scanLease } = this.options;
    const scanner = new Scanner({
      reconciler,
      logger: this.logger,
      rescanInterval: this.options.rescanInterval,
      settleDelay: this.options.settleDelay,
      progressEvery: this.options.progressEvery,
      scanned: this.options.scanned,
      // With a lease, nothing is watched or walked until this instance holds it.
      paused: scanLease !== undefined,
      mayScan: () => {
        if (scanLease && !(performance.now() < folder.scanUntil)) return false;
        return mayScan ? mayScan(config.name) : true;
      },
    });
    const temp = this.tempOf(config);
    const folder: Folder = {
      config,
      temp,
      reconciler,
      scanner,
      scanUntil: 0,
      copies: this.copiesIn(config.name, temp),
      nextSweep: 0,
    };
    this.folders.set(config.name, folder);
    if (!this.closed) {
      scanner.start();
      void this.holdLeases(folder);
    }
    return folder;
  }

  private async detach(name: string): Promise<Folder | undefined> {
    const folder = this.folders.get(name);
    if (!folder) return undefined;
    this.folders.delete(name);
    await folder.scanner.stop();
    await this.leaseRound;
    if (folder.scanUntil > 0) {
      folder.scanUntil = 0;
      await this.options.scanLease
        ?.release(name)
        .catch((err) =>
          this.logger.warn({ err, store: name }, "the scan lease of a filesystem store could not be released"),
        );
    }
    return folder;
  }

  /** The folder of a store known to be a filesystem store by its configuration (read by any instance). */
  private folderOf(config: StoreConfig): Folder {
    return this.folders.get(config.name) ?? this.attach(config);
  }

  /** The folder of a live filesystem store, or undefined for any other store. */
  private async folderByName(store: string): Promise<Folder | undefined> {
    const known = this.folders.get(store);
    if (known) return known;
    const record = await this.inner.getStore(store);
    return record && !record.deleted && record.config.type === "filesystem" ? this.attach(record.config) : undefined;
  }

  reportedSettings(): Record<string, string> {
    return this.inner.reportedSettings();
  }

  listStores(): Promise<StoreRecord[]> {
    return this.inner.listStores();
  }

  getStore(name: string): Promise<StoreRecord | undefined> {
    return this.inner.getStore(name);
  }

  async createStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    if (config.type !== "filesystem") return this.inner.createStore(config, now);
    await this.ready;
    const existing = await this.inner.getStore(config.name);
    planCreateStore(existing, config.name);
    const settings = { ...config.settings, "filesystem-temp": this.tempOf(config) };
    await this.checkFolder(config.name, settings);
    const record = await this.inner.createStore({ ...config, settings }, now);
    this.attach(record.config);
    return record;
  }

  async updateStore(config: StoreConfig, now: number): Promise<StoreRecord> {
    if (config.type !== "filesystem") return this.inner.updateStore(config, now);
    await this.ready;
    const settings = { ...config.settings, "filesystem-temp": this.tempOf(config) };
    const current = await this.inner.getStore(config.name);
    if (current && !current.deleted && current.config.settings["filesystem-temp"] !== settings["filesystem-temp"]) {
      await this.checkFolder(config.name, settings);
    }
    const folder = this.folders.get(config.name);
    const update = () => this.inner.updateStore({ ...config, settings }, now);
    const record = folder ? await folder.reconciler.lock.run(update) : await update();
    if (folder) {
      folder.config = record.config;
      folder.temp = this.tempOf(record.config);
      const moved = this.copiesIn(config.name, folder.temp);
      if (moved.dir !== folder.copies.dir) {
        // The kept copies move with filesystem-temp (the same file system: the folder's).
        await rename(folder.copies.dir, moved.dir).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== "ENOENT")
            this.logger.warn({ err, store: config.name }, "the kept copies could not move to the new filesystem-temp");
        });
        folder.copies = moved;
      }
    }
    return record;
  }

  /**
   * Deletes the store: its index, events and tombstones go, its folder stays as it is (the files
   * belong to the team; the store only stops serving them).
   */
  async deleteStore(name: string, now: number): Promise<StoreRecord> {
    await this.ready;
    const folder = await this.detach(name);
    if (!folder) return this.inner.deleteStore(name, now);
    let record: StoreRecord;
    try {
      record = await folder.reconciler.lock.run(() => this.inner.deleteStore(name, now));
    } catch (err) {
      // Not deleted: it is served as before.
      this.attach(folder.config);
      throw err;
    }
    await emptyDirectory(folder.temp);
    await folder.copies.clear().catch(() => {});
    return record;
  }

  /** The checks of a new (or changed) filesystem store's directories; BadRequestError with the reason. */
  private async checkFolder(name: string, settings: Record<string, string>): Promise<void> {
    const location = settings["filesystem-location"] ?? "";
    const temp = settings["filesystem-temp"] ?? "";
    // Trove's own data (SQLite: the directory of its blobs) is never served.
    const blobs = this.inner.reportedSettings()["filesystem-location"];
    if (blobs !== undefined && isAbsolute(blobs) && isWithin(dirname(blobs), location)) {
      throw new BadRequestError(
        `filesystem-location ${location} holds Trove's own data directory (${dirname(blobs)}): choose a folder outside it`,
      );
    }
    await checkDirectories(location, temp);
    for (const other of await this.inner.listStores()) {
      const theirs = other.config.settings["filesystem-location"];
      if (other.config.type !== "filesystem" || other.config.name === name || theirs === undefined) continue;
      if (isWithin(location, theirs) || isWithin(theirs, location)) {
        throw new BadRequestError(
          `filesystem-location ${location} overlaps the folder of filesystem store ${other.config.name} (${theirs})`,
        );
      }
    }
  }

  getNode(store: string, path: string): Promise<NodeRecord | undefined> {
    return this.inner.getNode(store, path);
  }

  /** A store of another type answers as the inner storage does (at once where it can); a filesystem store is reconciled first. */
  getStoreNode(
    store: string,
    path: string,
    options: GetStoreNodeOptions,
  ): StoreNode | undefined | Promise<StoreNode | undefined> {
    const found = this.inner.getStoreNode(store, path, options);
    if (found instanceof Promise) return found.then((f) => this.reconciled(store, path, options, f));
    return found?.config.type !== "filesystem" ? found : this.reconciled(store, path, options, found);
  }

  /** The node of a filesystem store once the index holds what its folder holds at the path. */
  private async reconciled(
    store: string,
    path: string,
    options: GetStoreNodeOptions,
    found: StoreNode | undefined,
  ): Promise<StoreNode | undefined> {
    if (found?.config.type !== "filesystem") return found;
    const folder = this.folderOf(found.config);
    if (await this.inLine(folder, path, found.node)) return found;
    const result = await folder.reconciler.sync(path);
    if (result.kind === "directory") folder.scanner.notify(path);
    if (result.unsettled) folder.scanner.notify(path);
    return this.inner.getStoreNode(store, path, options);
  }

  /** Whether the index holds what the folder holds at a path (one lstat; files by their version). */
  private async inLine(folder: Folder, path: string, node: NodeRecord | undefined): Promise<boolean> {
    if (path === "") return true;
    const st = await lstatOf(folder.reconciler.fileOf(path));
    const live = node && !node.deleted ? node : undefined;
    switch (kindOf(st)) {
      case "file":
        return live !== undefined && !live.directory && st !== undefined && live.blob === versionOf(st);
      case "directory":
        return live?.directory === true;
      default:
        return live === undefined;
    }
  }

  listNodes(store: string, dir: string, options: ListOptions): AsyncIterable<NodeRecord[]> {
    return this.inner.listNodes(store, dir, options);
  }

  /**
   * Files of a store that is no filesystem store here, each received as such (writeBlob's plain
   * uploads), go together to the inner adapter's putFiles. Anything else (a filesystem store's
   * folder, an inner adapter without putFiles) goes one file at a time, as putFile.
   */
  async putFiles(
    store: string,
    files: readonly { path: string; blob: BlobInfo; type: string; pre: Preconditions }[],
    now: number,
    user?: string,
  ): Promise<({ result: WriteResult } | { error: unknown })[]> {
    const plain =
      this.inner.putFiles !== undefined &&
      !this.folders.has(store) &&
      files.every((file) => !this.uploads.has(file.blob.blob) && this.plainUploads.get(file.blob.blob) === store);
    if (!plain || this.inner.putFiles === undefined) return putEach(this, store, files, now, user);
    for (const file of files) this.plainUploads.delete(file.blob.blob);
    const marked = files.map((file) => ({ ...file, pre: { ...file.pre, notInFolder: true } }));
    const answers = await this.inner.putFiles(store, marked, now, user);
    // A store that is a filesystem store after all (made by another instance): small contents go
    // again one by one, into its folder, as putFile's do; larger ones are to be sent again.
    const again = answers.map((answer, i) =>
      "error" in answer && answer.error instanceof UnavailableError && (files[i] as (typeof files)[number]).blob.inline
        ? putEach(this, store, [files[i] as (typeof files)[number]], now, user).then(([only]) => only ?? answer)
        : answer,
    );
    return Promise.all(again);
  }

  async putFile(
    store: string,
    path: string,
    blob: BlobInfo,
    type: string,
    pre: Preconditions,
    now: number,
    user?: string,
  ): Promise<WriteResult> {
    let upload = this.uploads.get(blob.blob);
    this.uploads.delete(blob.blob);
    const plainFor = this.plainUploads.get(blob.blob);
    this.plainUploads.delete(blob.blob);
    let folder: Folder | undefined;
    if (!upload && plainFor === store && !this.folders.has(store)) {
      // No read of the store here: the storage refuses the write if it is a filesystem store
      // after all (one this instance has not served yet, e.g. made by another instance).
      try {
        return await this.inner.putFile(store, path, blob, type, { ...pre, notInFolder: true }, now, user);
      } catch (err) {
        folder = err instanceof UnavailableError && blob.inline ? await this.folderByName(store) : undefined;
        if (!folder) throw err;
      }
    } else {
      folder = await this.folderByName(store);
    }
    if (!folder && !upload)
      return this.inner.putFile(store, path, blob, type, { ...pre, notInFolder: true }, now, user);
    const inline = blob.inline;
    if (folder && !upload && plainFor === store && inline) {
      // Small contents received before this instance knew the store as a filesystem store (the
      // core does not check before a small upload, which would have attached the folder): into
      // the folder's temp, then as any upload to it.
      const contents = (async function* () {
        yield inline;
      })();
      await makeDirectory(folder.temp);
      upload = { store, file: (await assemble(folder.temp, contents, Number.MAX_SAFE_INTEGER)).temp };
    }
    if (!folder || !upload || upload.store !== store) {
      if (upload) await unlink(upload.file).catch(() => {});
      else await this.inner.discardBlob(blob);
      throw new UnavailableError(`store ${store} changed while its contents were received: send them again`);
    }
    const { reconciler } = folder;
    const file = reconciler.fileOf(path);
    return reconciler.lock.run(async () => {
      let version: string;
      let created: boolean;
      let linked: string | undefined;
      const copies = this.copiesOf(folder);
      try {
        await reconciler.syncLocked(path);
        const { target, parent } = await this.current(folder, path, now);
        ({ created } = planPutFile(path, target, parent, pre));
        version = versionOf(await stat(upload.file, { bigint: true }));
        if (copies) {
          // History: the new state's bytes and the replaced state's, kept before the rename.
          await copies.copy(upload.file, blob, now);
          if (target && !target.deleted) linked = await copies.keep(file, target, now);
          await this.options.afterKeep?.(store, path);
        }
        await rename(upload.file, file);
      } catch (err) {
        await copies?.undo(linked);
        await unlink(upload.file).catch(() => {});
        throw tooLongAsBadRequest(err, path);
      }
      await syncDirectory(dirname(file));
      await copies?.kept(linked, now);
      const stored = { blob: version, size: blob.size, md5: blob.md5, inline: null };
      try {
        // Created or replaced as the client's preconditions were checked, before the rename.
        return { ...(await this.inner.putFile(store, path, stored, type, pre, now, user)), created };
      } catch (err) {
        // Another instance's scanner (the lock is per process) may have recorded this very file
        // between the rename and here, giving it a new tag: the write is still this one.
        if (err instanceof PreconditionFailedError && (await this.inner.getNode(store, path))?.blob === version) {
          return { ...(await this.inner.putFile(store, path, stored, type, {}, now, user)), created };
        }
        // The file is in place: the index records what the folder holds, and the caller learns of the failure.
        await reconciler.syncLocked(path).catch(() => {});
        throw err;
      }
    });
  }

  async makeDirectory(
    store: string,
    path: string,
    pre: Preconditions,
    now: number,
    user?: string,
  ): Promise<WriteResult> {
    const folder = await this.folderByName(store);
    if (!folder) return this.inner.makeDirectory(store, path, pre, now, user);
    const { reconciler } = folder;
    return reconciler.lock.run(async () => {
      await reconciler.syncLocked(path);
      const { target, parent } = await this.current(folder, path, now);
      const { created } = planMakeDirectory(path, target, path === "" ? undefined : parent, pre);
      if (created) {
        await mkdir(reconciler.fileOf(path)).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== "EEXIST") throw tooLongAsBadRequest(err, path);
        });
      }
      // As planned: another instance's scanner may have recorded the new directory already.
      return { ...(await this.inner.makeDirectory(store, path, pre, now, user)), created };
    });
  }

  async deleteTree(store: string, path: string, pre: Preconditions, now: number, user?: string): Promise<DeleteResult> {
    const folder = await this.folderByName(store);
    if (!folder) return this.inner.deleteTree(store, path, pre, now, user);
    const { reconciler } = folder;
    let moved: string | undefined;
    const result = await reconciler.lock.run(async () => {
      await reconciler.syncLocked(path);
      const { target } = await this.current(folder, path, now);
      planDelete(path, target, pre.ifMatch);
      const file = reconciler.fileOf(path);
      const linked = await this.keepBelow(folder, path, target, now);
      // A directory leaves the tree in one rename; its contents are removed after the commit.
      try {
        if (target?.directory) {
          moved = join(folder.temp, deletedName());
          await rename(file, moved);
        } else {
          await unlink(file);
        }
      } catch (err) {
        moved = undefined;
        if ((err as NodeJS.ErrnoException).code !== "ENOENT") {
          for (const copy of linked) await folder.copies.undo(copy);
          throw err;
        }
      }
      for (const copy of linked) await folder.copies.kept(copy, now);
      const before = (await this.inner.getStore(store))?.lastEventId ?? 0;
      try {
        return await this.inner.deleteTree(store, path, pre, now, user);
      } catch (err) {
        // Another instance's scanner (the lock is per process) may have recorded this very removal
        // first: the delete is still this one, and answers as its preconditions decided.
        const node = target && (await this.inner.getNode(store, path));
        if (node?.deleted && node.eventId > before) {
          return { node, count: await this.deletedSince(store, path, before) };
        }
        await reconciler.syncLocked(path).catch(() => {});
        throw err;
      }
    });
    if (moved) {
      await rm(moved, { recursive: true, force: true }).catch((err) =>
        this.logger.warn({ err, store, moved }, "could not remove a deleted directory from filesystem-temp"),
      );
    }
    return result;
  }

  /**
   * History: before a delete, the bytes of the file it removes, or of every file below the
   * directory, are kept (each checked to be the recorded state). Returns the copies linked to
   * files still in the folder, to undo if the removal fails.
   */
  private async keepBelow(
    folder: Folder,
    path: string,
    target: NodeRecord | undefined,
    now: number,
  ): Promise<string[]> {
    const copies = this.copiesOf(folder);
    const linked: string[] = [];
    if (!copies || !target || target.deleted) return linked;
    const keep = async (node: NodeRecord) => {
      const copy = await copies.keep(folder.reconciler.fileOf(node.path), node, now);
      if (copy) linked.push(copy);
    };
    try {
      if (!target.directory) await keep(target);
      else
        for await (const batch of this.inner.listNodes(folder.config.name, path, {
          recursive: true,
          includeDeleted: false,
        })) {
          for (const node of batch) if (!node.directory) await keep(node);
        }
      await this.options.afterKeep?.(folder.config.name, path);
    } catch (err) {
      for (const copy of linked) await copies.undo(copy);
      throw err;
    }
    return linked;
  }

  /** How many nodes at and below a path were deleted after an event id (a delete another instance recorded). */
  private async deletedSince(store: string, path: string, after: number): Promise<number> {
    let count = 1;
    try {
      for await (const batch of this.inner.listNodes(store, path, { recursive: true, includeDeleted: true })) {
        for (const node of batch) if (node.path !== path && node.deleted && node.eventId > after) count++;
      }
    } catch {
      // The count is informative; the delete happened.
    }
    return count;
  }

  /** The target of a write and its parent as the rules see them (expired tombstones absent). */
  private async current(
    folder: Folder,
    path: string,
    now: number,
  ): Promise<{ target: NodeRecord | undefined; parent: NodeRecord | undefined }> {
    const store = folder.config.name;
    const record = await this.inner.getStore(store);
    if (!record || record.deleted) throw new NotFoundError(`store ${store} not found`);
    // The settings this write goes by (another instance may have changed keep-versions).
    folder.config = record.config;
    const visible = (node: NodeRecord | undefined) =>
      node && !isExpiredTombstone(node, record.config, now) ? node : undefined;
    const target = visible(await this.inner.getNode(store, path));
    const parentPath = parentOf(path);
    const parent = parentPath === undefined ? undefined : visible(await this.inner.getNode(store, parentPath));
    return { target, parent };
  }

  async writeBlob(source: AsyncIterable<Uint8Array>, options: WriteBlobOptions): Promise<BlobInfo> {
    // The filesystem stores known at start-up are attached by then.
    await this.ready;
    const folder = options.store === undefined ? undefined : this.folders.get(options.store);
    if (!folder) {
      const info = await this.inner.writeBlob(source, options);
      if (options.store !== undefined) {
        // Bounded: an entry lost here only costs its putFile the store's read.
        if (this.plainUploads.size >= 10_000) this.plainUploads.clear();
        this.plainUploads.set(info.blob, options.store);
      }
      return info;
    }
    await this.ready;
    const assembled = await assemble(folder.temp, source, options.maxSize);
    const blob = randomUUID();
    this.uploads.set(blob, { store: folder.config.name, file: assembled.temp });
    return { blob, size: assembled.size, md5: assembled.md5, inline: null };
  }

  async *readBlob(node: NodeRecord): AsyncIterable<Uint8Array> {
    const folder = this.folders.get(node.store);
    if (!folder || node.directory) {
      yield* this.inner.readBlob(node);
      return;
    }
    yield* await this.contentsOf(folder, node);
  }

  /**
   * The bytes of a state of a file: the folder's file while it is that state, else the copy Trove
   * kept of them (docs/history.md, "Filesystem stores"). NotFoundError with the reason otherwise.
   */
  private async contentsOf(folder: Folder, node: NodeRecord): Promise<AsyncIterable<Uint8Array>> {
    const contents =
      (await openVersion(folder.reconciler.fileOf(node.path), node.blob)) ?? (await folder.copies.open(node));
    if (contents) return contents;
    const current = await this.inner.getNode(node.store, node.path);
    if (current?.tag !== node.tag) {
      throw new NotFoundError(
        `the contents of /${node.path} as version ${node.tag} were not kept: the folder of store ${node.store} holds other bytes now, and Trove kept no copy of these (edited outside Trove before Trove kept one, or with keep-versions 0)`,
      );
    }
    // Changed in the folder since the node was read: record it, so that the next read is right.
    await folder.reconciler.sync(node.path).catch(() => {});
    throw new NotFoundError(`/${node.path} changed in the folder of store ${node.store}`);
  }

  async discardBlob(blob: BlobInfo): Promise<void> {
    this.plainUploads.delete(blob.blob);
    const upload = this.uploads.get(blob.blob);
    if (!upload) return this.inner.discardBlob(blob);
    this.uploads.delete(blob.blob);
    await unlink(upload.file).catch((err) =>
      this.logger.warn({ err, file: upload.file }, "could not remove a discarded upload from filesystem-temp"),
    );
  }

  changesSince(store: string, afterEventId: number, limit: number): Promise<NodeRecord[]> {
    return this.inner.changesSince(store, afterEventId, limit);
  }

  onChange(listener: (store: string) => void): () => void {
    return this.inner.onChange(listener);
  }

  async purgeExpired(now: number): Promise<number> {
    let purged = await this.inner.purgeExpired(now);
    for (const folder of [...this.folders.values()]) {
      try {
        purged += await this.sweepCopies(folder, now);
      } catch (err) {
        this.logger.warn(
          { err, store: folder.config.name },
          "the kept copies of a filesystem store could not be swept",
        );
      }
    }
    return purged;
  }

  /**
   * The purge of kept copies: all of them once the store keeps no versions; else those no live
   * file has whose last state ended longer ago than keep-versions (the versions that needed them
   * are purged by then), at most every COPIES_SWEEP_INTERVAL.
   */
  private async sweepCopies(folder: Folder, now: number): Promise<number> {
    const record = await this.inner.getStore(folder.config.name);
    if (!record || record.deleted || this.folders.get(record.config.name) !== folder) return 0;
    folder.config = record.config;
    if (!keepsVersions(folder.config)) {
      await folder.copies.clear();
      return 0;
    }
    if (now < folder.nextSweep) return 0;
    folder.nextSweep = now + COPIES_SWEEP_INTERVAL;
    const live = new Set<string>();
    const store = folder.config.name;
    for await (const batch of this.inner.listNodes(store, "", { recursive: true, includeDeleted: false })) {
      for (const node of batch) if (!node.directory) live.add(folder.copies.fileOf(node));
    }
    const cutoff = now - keepVersionsMillis(folder.config) - COPIES_MARGIN;
    return folder.copies.sweep(live, cutoff, (task) => folder.reconciler.lock.run(task));
  }

  ping(): Promise<void> {
    return this.inner.ping();
  }

  // History lives in the inner storage; a filesystem store's outside edits: docs/history.md.
  listVersions(store: string, path: string, options: { batchSize?: number }): AsyncIterable<VersionRecord[]> {
    return this.inner.listVersions(store, path, options);
  }
  getVersion(store: string, path: string, tag: string): Promise<VersionRecord | undefined> {
    return this.inner.getVersion(store, path, tag);
  }
  getNodeAsOf(store: string, path: string, eventId: number): Promise<VersionRecord | undefined> {
    return this.inner.getNodeAsOf(store, path, eventId);
  }
  listNodesAsOf(store: string, dir: string, eventId: number, options: ListOptions): AsyncIterable<VersionRecord[]> {
    return this.inner.listNodesAsOf(store, dir, eventId, options);
  }
  eventAt(store: string, time: number): Promise<number> {
    return this.inner.eventAt(store, time);
  }
  /**
   * A filesystem store's restore is an upload of the kept bytes: assembled in filesystem-temp from
   * the state's copy (or the folder's file while it is that state), then written as putFile
   * writes, with the state's content type. NotFoundError when its bytes were not kept.
   */
  async restoreVersion(
    store: string,
    path: string,
    tag: string,
    pre: Preconditions,
    now: number,
    user?: string,
  ): Promise<WriteResult> {
    const folder = await this.folderByName(store);
    if (!folder) return this.inner.restoreVersion(store, path, tag, pre, now, user);
    const state = restorableFile(await this.inner.getVersion(store, path, tag), store, path, tag);
    const parentPath = parentOf(path) ?? "";
    checkRestoreParent(path, (await this.current(folder, parentPath, now)).target);
    await makeDirectory(folder.temp);
    const assembled = await assemble(folder.temp, await this.contentsOf(folder, state), state.size);
    if (assembled.md5 !== state.md5 || assembled.size !== state.size) {
      await unlink(assembled.temp).catch(() => {});
      throw new NotFoundError(
        `the kept contents of /${path} as version ${tag} in store ${store} changed: not restored`,
      );
    }
    const blob = randomUUID();
    this.uploads.set(blob, { store, file: assembled.temp });
    return this.putFile(
      store,
      path,
      { blob, size: state.size, md5: state.md5, inline: null },
      state.type,
      pre,
      now,
      user,
    );
  }
  holdSnapshot(store: string): Promise<SnapshotHold | undefined> {
    return this.inner.holdSnapshot(store);
  }
  listEndedVersions(store: string, upTo: number, options: EndedVersionsOptions): AsyncIterable<VersionRecord[]> {
    return this.inner.listEndedVersions(store, upTo, options);
  }
  // A restore writes the index only: a filesystem store's folder is the operator's (docs/backup.md).
  restoreTarget(): Promise<RestoreTarget> {
    return this.inner.restoreTarget();
  }
  beginRestore(archive: string): Promise<void> {
    return this.inner.beginRestore(archive);
  }
  finishRestore(): Promise<void> {
    return this.inner.finishRestore();
  }
  importStore(store: StoreRecord): Promise<void> {
    return this.inner.importStore(store);
  }
  importNodes(store: string, nodes: readonly NodeRecord[]): Promise<void> {
    return this.inner.importNodes(store, nodes);
  }
  importVersions(store: string, versions: readonly VersionRecord[]): Promise<void> {
    return this.inner.importVersions(store, versions);
  }
  importReport(report: ReportRecord): Promise<void> {
    return this.inner.importReport(report);
  }

  async close(): Promise<void> {
    this.closed = true;
    clearInterval(this.leaseTimer);
    await this.ready;
    for (const name of [...this.folders.keys()]) await this.detach(name);
    await this.inner.close();
  }
}
