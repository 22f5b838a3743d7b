// Notices changes made to a filesystem store's folder by other programs: one change notification
// (fs.watch, inotify on Linux) per directory, a full rescan at start-up and periodically as the
// floor, and a walk of every directory a notification names. Each difference goes to the
// Reconciler, which records it as ordinary change events. One task at a time per store.

import { type FSWatcher, watch } from "node:fs";
import { opendir } from "node:fs/promises";
import type { StorageLogger } from "../port.js";
import { kindOf, lstatOf, versionOf } from "./folder.js";
import type { Reconciler, SyncResult } from "./reconciler.js";

export interface ScannerOptions {
  reconciler: Reconciler;
  logger: StorageLogger;
  /** How often the whole folder is walked, in milliseconds (default 60 s). */
  rescanInterval?: number;
  /** Quiet time after a notification before the changed paths are read, in milliseconds (default 100). */
  settleDelay?: number;
  /**
   * Whether this instance may scan the store now (default: always). The seam for a lease held by
   * one instance among several (issue 17, item 7): while it answers false, nothing is watched or walked.
   */
  mayScan?: () => boolean | Promise<boolean>;
  /** Starts paused: nothing watched or walked until `resume()` (another instance holds the scan lease). */
  paused?: boolean;
  /** A progress line is logged every this many entries of a scan that records changes, or of the first (default 10,000). */
  progressEvery?: number;
  /** Told of each full scan that ended (metrics, the scan lease's observers). */
  scanned?: (summary: ScanSummary) => void;
}

/** What one full scan did. */
export interface ScanSummary {
  store: string;
  /** Entries of the folder compared with the index (files, directories, skipped entries). */
  entries: number;
  directories: number;
  /** Files whose contents were read (hashed): new or changed ones only. */
  read: number;
  /** Changes recorded in the index (change events). */
  recorded: number;
  /** Milliseconds. */
  duration: number;
  /** The first scan since the scanner started or resumed (at start-up: what changed while Trove was down). */
  first: boolean;
}

/** A scan under way: counts for the progress lines and the summary. */
interface Progress extends ScanSummary {
  started: number;
}

export const DEFAULT_RESCAN_INTERVAL = 60_000;
const DEFAULT_SETTLE_DELAY = 100;
const DEFAULT_PROGRESS_EVERY = 10_000;
/** New or changed files read at once by a walk. */
const READ_AHEAD = 16;
/** Longest a notified path waits for quiet before it is read anyway. */
const MAX_SETTLE = 1000;
/** Most directories watched per store; beyond, changes there are found by the rescans only. */
const MAX_WATCHES = 50_000;

export class Scanner {
  private readonly reconciler: Reconciler;
  private readonly logger: StorageLogger;
  private readonly rescanInterval: number;
  private readonly settleDelay: number;
  private readonly mayScan: () => boolean | Promise<boolean>;
  private readonly watches = new Map<string, FSWatcher>();
  private readonly pending = new Set<string>();
  private fullRequested = false;
  private fullWaiters: Array<() => void> = [];
  private running: Promise<void> | undefined;
  private settleTimer: NodeJS.Timeout | undefined;
  private firstNotified = 0;
  private rescanTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** Another instance scans: no watches open, nothing walked, until resume(). */
  private paused: boolean;
  /** The next full scan is the first since start or resume. */
  private firstPending = true;
  private readonly progressEvery: number;
  private readonly onScanned: ((summary: ScanSummary) => void) | undefined;
  private watchFailureLogged = false;

  constructor(options: ScannerOptions) {
    this.reconciler = options.reconciler;
    this.logger = options.logger;
    this.rescanInterval = options.rescanInterval ?? DEFAULT_RESCAN_INTERVAL;
    this.settleDelay = options.settleDelay ?? DEFAULT_SETTLE_DELAY;
    this.mayScan = options.mayScan ?? (() => true);
    this.paused = options.paused ?? false;
    this.progressEvery = options.progressEvery ?? DEFAULT_PROGRESS_EVERY;
    this.onScanned = options.scanned;
  }

  /** Whether this scanner is paused (another instance scans the folder). */
  get isPaused(): boolean {
    return this.paused;
  }

  /**
   * Stops watching and walking while another instance scans (it lost or never had the scan
   * lease): every change notification is closed, pending paths dropped; the task under way ends
   * at its next entry.
   */
  pause(): void {
    if (this.paused) return;
    this.paused = true;
    clearTimeout(this.settleTimer);
    this.pending.clear();
    this.closeWatches();
  }

  /** Watches and walks again, starting with a full rescan (what changed while another instance scanned). */
  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.firstPending = true;
    this.requestRescan();
  }

  /** Starts watching, with a full rescan first (what changed while Trove was down). */
  start(): void {
    this.requestRescan();
    this.rescanTimer = setInterval(() => this.requestRescan(), this.rescanInterval);
    this.rescanTimer.unref();
  }

  /** Stops watching and rescanning; resolves when the task under way has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.rescanTimer);
    clearTimeout(this.settleTimer);
    this.closeWatches();
    this.pending.clear();
    await this.running;
    for (const resolve of this.fullWaiters.splice(0)) resolve();
  }

  /** A full rescan, resolved once one that started after this call has ended. */
  rescan(): Promise<void> {
    return new Promise((resolve) => {
      this.fullWaiters.push(resolve);
      this.requestRescan();
    });
  }

  /** A path that may have changed (a notification, or a read that found the file changed). */
  notify(path: string): void {
    if (this.stopped) return;
    if (this.paused) return;
    if (this.pending.size === 0) this.firstNotified = Date.now();
    this.pending.add(path);
    clearTimeout(this.settleTimer);
    const wait = Math.max(0, Math.min(this.settleDelay, this.firstNotified + MAX_SETTLE - Date.now()));
    this.settleTimer = setTimeout(() => this.drain(), wait);
    this.settleTimer.unref();
  }

  private closeWatches(): void {
    for (const watcher of this.watches.values()) watcher.close();
    this.watches.clear();
  }

  private requestRescan(): void {
    if (this.stopped || this.paused) {
      for (const resolve of this.fullWaiters.splice(0)) resolve();
      return;
    }
    this.fullRequested = true;
    this.drain();
  }

  private drain(): void {
    if (this.running || this.stopped || this.paused) return;
    this.running = this.work().finally(() => {
      this.running = undefined;
      if (!this.stopped && !this.paused && (this.fullRequested || this.pending.size > 0)) this.drain();
    });
  }

  private async work(): Promise<void> {
    try {
      if (this.paused || !(await this.mayScan())) {
        this.pending.clear();
        this.fullRequested = false;
        for (const resolve of this.fullWaiters.splice(0)) resolve();
        return;
      }
      if (this.fullRequested) {
        this.fullRequested = false;
        const waiters = this.fullWaiters.splice(0);
        try {
          await this.fullRescan();
        } finally {
          for (const resolve of waiters) resolve();
        }
        return;
      }
      const batch = [...this.pending].sort();
      this.pending.clear();
      for (const path of batch) {
        if (this.halted) return;
        await this.syncNotified(path);
      }
    } catch (err) {
      this.logger.warn({ err, store: this.reconciler.store }, "filesystem store scan failed; the next rescan retries");
    }
  }

  /** Stopped, or paused: the task under way ends at its next entry. */
  private get halted(): boolean {
    return this.stopped || this.paused;
  }

  private async fullRescan(): Promise<void> {
    try {
      await this.reconciler.requireFolder();
    } catch (err) {
      this.logger.warn({ err, store: this.reconciler.store }, "filesystem store not scanned");
      return;
    }
    const first = this.firstPending;
    this.firstPending = false;
    const progress: Progress = {
      store: this.reconciler.store,
      entries: 0,
      directories: 1,
      read: 0,
      recorded: 0,
      duration: 0,
      first,
      started: performance.now(),
    };
    await this.walk("", progress);
    if (this.halted) return;
    const { started: _, ...summary } = progress;
    summary.duration = Math.round(performance.now() - progress.started);
    // Periodic rescans that found nothing are silent; an import, or a scan that recorded changes, is told.
    if (first || summary.recorded > 0) this.logger.info(summary, "filesystem store scanned");
    this.onScanned?.(summary);
  }

  /** One entry compared; a progress line every `progressEvery` of a scan that imports or records. */
  private counted(progress: Progress | undefined, result?: SyncResult): void {
    if (!progress) return;
    progress.entries++;
    if (result?.read) progress.read++;
    if (result?.recorded) progress.recorded++;
    if (progress.entries % this.progressEvery === 0 && (progress.first || progress.recorded > 0)) {
      const { started, ...counts } = progress;
      this.logger.info(
        { ...counts, duration: Math.round(performance.now() - started) },
        "filesystem store scan in progress",
      );
    }
  }

  /** A notified path: it and its ancestors in line, then, for a directory, everything below it. */
  private async syncNotified(path: string): Promise<void> {
    const result = await this.reconciler.sync(path);
    if (result.unsettled) this.notify(path);
    if (result.kind === "directory") await this.walk(path);
    else this.unwatchBelow(path);
  }

  /**
   * Walks a directory that the index holds as a directory: each entry compared with its node
   * (a file by its version: size, mtime and inode, never read when unchanged), differences
   * reconciled, then each subdirectory. One directory's entries in memory at a time, streamed.
   */
  private async walk(dir: string, progress?: Progress): Promise<void> {
    if (this.halted) return;
    this.watchDirectory(dir);
    const indexed = new Map<string, { directory: boolean; blob: string }>();
    for await (const batch of this.reconciler.children(dir)) {
      for (const node of batch) indexed.set(node.path, { directory: node.directory, blob: node.blob });
    }
    const subdirectories: string[] = [];
    const toRead: string[] = [];
    let handle: Awaited<ReturnType<typeof opendir>>;
    try {
      handle = await opendir(this.reconciler.fileOf(dir), { encoding: "buffer" as BufferEncoding });
    } catch {
      // Gone since: reconcile the directory itself.
      await this.reconciler.sync(dir);
      return;
    }
    for await (const entry of handle) {
      if (this.halted) return;
      const raw = entry.name as unknown as Buffer;
      const name = raw.toString();
      const path = dir === "" ? name : `${dir}/${name}`;
      const node = indexed.get(path);
      indexed.delete(path);
      if (!this.reconciler.acceptsName(path, raw)) continue;
      if (entry.isSymbolicLink() || !(entry.isFile() || entry.isDirectory())) {
        this.reconciler.skip(path, entry.isSymbolicLink() ? "link" : "special");
        this.counted(progress, node ? await this.reconciler.syncChild(path) : undefined);
        continue;
      }
      if (entry.isDirectory()) {
        const result = node?.directory ? undefined : await this.reconciler.syncChild(path);
        this.counted(progress, result);
        if ((result?.kind ?? "directory") === "directory") subdirectories.push(path);
        continue;
      }
      if (node && !node.directory) {
        const st = await lstatOf(this.reconciler.fileOf(path));
        if (st && kindOf(st) === "file" && versionOf(st) === node.blob) {
          this.counted(progress);
          continue;
        }
      }
      // New or changed files are read several at a time, then recorded one by one in order.
      toRead.push(path);
      if (toRead.length >= READ_AHEAD) await this.readAndSync(toRead.splice(0), progress);
    }
    if (toRead.length > 0 && !this.halted) await this.readAndSync(toRead, progress);
    for (const path of indexed.keys()) {
      if (this.halted) return;
      const result = await this.reconciler.syncChild(path);
      if (progress && result.recorded) progress.recorded++;
      this.unwatchBelow(path);
    }
    for (const path of subdirectories) {
      if (progress) progress.directories++;
      await this.walk(path, progress);
    }
  }

  /** Reads files' contents in parallel (the file system's latency overlaps), then reconciles each, in order. */
  private async readAndSync(paths: string[], progress: Progress | undefined): Promise<void> {
    const read = await Promise.all(paths.map((path) => this.reconciler.readAhead(path)));
    for (const [i, path] of paths.entries()) {
      if (this.halted) return;
      const result = await this.reconciler.syncChild(path, read[i]);
      this.counted(progress, result);
      if (result.unsettled) this.notify(path);
    }
  }

  private watchDirectory(dir: string): void {
    if (this.watches.has(dir) || this.halted || this.watches.size >= MAX_WATCHES) return;
    let watcher: FSWatcher;
    try {
      // Names as bytes: one that is not UTF-8 is reported, never read under a replacement character.
      watcher = watch(this.reconciler.fileOf(dir), { persistent: false, encoding: "buffer" }, (_event, raw) => {
        if (raw === null) return this.notify(dir);
        const name = raw.toString();
        const path = dir === "" ? name : `${dir}/${name}`;
        if (this.reconciler.acceptsName(path, raw)) this.notify(path);
      });
    } catch (err) {
      if (!this.watchFailureLogged) {
        this.watchFailureLogged = true;
        this.logger.warn(
          { err, store: this.reconciler.store },
          "change notifications unavailable for a filesystem store directory (inotify limit?): changes there are found by the periodic rescan",
        );
      }
      return;
    }
    watcher.on("error", () => {
      watcher.close();
      if (this.watches.get(dir) === watcher) this.watches.delete(dir);
      this.notify(dir);
    });
    this.watches.set(dir, watcher);
  }

  /** Stops watching a directory that left the index, and everything below it. */
  private unwatchBelow(path: string): void {
    const prefix = `${path}/`;
    for (const [dir, watcher] of this.watches) {
      if (dir === path || dir.startsWith(prefix)) {
        watcher.close();
        this.watches.delete(dir);
      }
    }
  }
}
