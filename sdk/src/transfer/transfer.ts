// What push() and pull() share: their options, actions, summary and errors, the survey of both
// sides into a plan on disk, and the runner that carries it out on one side (the server for a
// push, a directory for a pull) with a bounded number of transfers and bytes at once. Both passes
// read the tree one path at a time: memory does not grow with the tree (issue 31).

import { mkdtempSync, rmSync } from "node:fs";
import { stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { isSafeRelativePath } from "../mirror/directory-sink.js";
import type { TroveRestClient } from "../rest/client.js";
import {
  BATCH_BYTES,
  BATCH_FILES,
  BYTES_IN_FLIGHT,
  type Cancellation,
  createCancellation,
  createLimiter,
  eachLimited,
  fileWeight,
} from "../rest/in-flight.js";
import type { ListingEntry } from "../rest/xml.js";
import { BatchUnsupportedError, NotFoundError, PreconditionFailedError, type TroveError } from "../trove-errors.js";
import { RecordedState, StateWriter, stateFileOf } from "./local-state.js";
import { md5File } from "./local-tree.js";
import { comparePaths, type LocalEntry, walkLocal } from "./path-order.js";
import { type PlannedCopy, type PlannedRemoval, Planner, type Step, type TreeEntry } from "./plan.js";
import { LineWriter, readLines } from "./spool.js";

/** The most transfers at once that `transfers` accepts. */
export const MAX_TRANSFERS = 64;

export interface TransferOptions {
  client: TroveRestClient;
  store: string;
  /** The remote directory ("" or omitted: the store's root). */
  path?: string;
  /** The local directory. */
  directory: string;
  /** Files transferred at once: 1 to 64, default 4 (local files are hashed one at a time, while the sides are compared). */
  transfers?: number;
  /**
   * At most this many bytes of file contents in flight at once, whatever `transfers` is (default
   * 4 MiB, BYTES_IN_FLIGHT); a file counts with its size, a streamed one (over WHOLE_FILE_BYTES)
   * with 1 MiB at most, and one larger than the whole budget goes alone.
   */
  bytesInFlight?: number;
  /**
   * Files of up to 256 KiB go by batches of up to 100 (512 KiB), one request each instead of a
   * request per file (default true; docs/cli.md): a pull's downloads by ResourceService.ReadMany,
   * a push's uploads by ResourceService.WriteMany. A server without them is sent one request per
   * file (GET, PUT).
   */
  batch?: boolean;
  /** rclone's `sync`: also delete what the destination has and the source has not. */
  delete?: boolean;
  /** Report every action (onAction) and the summary, and change nothing. */
  dryRun?: boolean;
  /**
   * Push: replace without If-Match, so a change made on the server since the listing is
   * overwritten. Pull: keep a download whose tag is no longer the listed one.
   */
  force?: boolean;
  signal?: AbortSignal;
  /**
   * Remember each local file's size, times, inode and MD5 (in `stateDirectory`), and trust a
   * recorded MD5 while none of them changed (default true; docs/cli.md).
   */
  state?: boolean;
  /** Where the local states are kept (default `$XDG_CACHE_HOME/trove/transfers`, `~/.cache/trove/transfers`). */
  stateDirectory?: string;
  /** Called before each action is carried out (or, in a dry run, instead); a promise is awaited. */
  onAction?: (action: TransferAction) => void | Promise<void>;
  onProgress?: (progress: TransferProgress) => void;
}

/** Paths are relative to the transferred directory; "" is the destination directory itself. */
export type TransferAction =
  | { type: "mkdir"; path: string }
  | { type: "copy"; path: string; size: number; replace: boolean }
  | { type: "delete"; path: string; directory: boolean; replacing: boolean }
  | { type: "skip"; path: string; reason: "unchanged" | "not-regular" };

export interface TransferProgress {
  bytes: number;
  totalBytes: number;
  files: number;
  totalFiles: number;
}

/** A file left alone because it changed on the server since it was listed. */
export interface TransferFailure {
  path: string;
  /** A PreconditionFailedError (412, or a download whose tag differs) or a NotFoundError (gone). */
  error: TroveError;
  /** The copy of a file the listing did not have (a push's upload found one created meanwhile). */
  created: boolean;
}

export interface TransferSummary {
  dryRun: boolean;
  /** Files copied (in a dry run: to copy). */
  transferred: number;
  /** Files equal on both sides, and local entries that are not regular files (symbolic links). */
  skipped: number;
  /** Entries deleted; a directory counts once, with its contents. */
  deleted: number;
  /** Directories created. */
  directories: number;
  /** Bytes of the files copied. */
  bytes: number;
  /**
   * Local files read to compare them (hashed): those of the same size on both sides whose MD5
   * the local state did not give. 0 when nothing changed locally since the last run.
   */
  hashed: number;
  ms: number;
  failures: TransferFailure[];
}

/** Refused before anything was changed: DIR is not a directory, an unsafe name, a kind conflict. */
export class TransferRefusedError extends Error {
  override name = "TransferRefusedError";
  readonly code = "ERR_TRANSFER_REFUSED";
  constructor(
    message: string,
    /** The relative paths concerned, if any. */
    readonly paths: string[] = [],
  ) {
    super(message);
  }
}

/** Some files changed on the server since they were listed and were left alone; the rest was done. */
export class TransferChangedError extends Error {
  override name = "TransferChangedError";
  readonly failures: TransferFailure[];
  constructor(readonly summary: TransferSummary) {
    const n = summary.failures.length;
    super(
      `${n} file${n === 1 ? "" : "s"} changed on the server since listed, left alone: ` +
        summary.failures.map((f) => f.path).join(", "),
    );
    this.failures = summary.failures;
  }
}

export const isTransferRefusedError = (e: unknown): e is TransferRefusedError => e instanceof TransferRefusedError;
export const isTransferChangedError = (e: unknown): e is TransferChangedError => e instanceof TransferChangedError;

/** How a plan's steps are carried out on the destination. */
export interface Destination {
  /** Creates a directory whose parent exists ("": the destination itself, with its parents). */
  makeDirectory(path: string, signal: AbortSignal): Promise<void>;
  /**
   * Copies one file; `sent` is called with each chunk's size. Resolves with the file as the
   * destination now holds it when known (the MD5, and a local file's stamp), for the local state.
   */
  copy(item: PlannedCopy, sent: (n: number) => void, signal: AbortSignal): Promise<TreeEntry | undefined>;
  remove(item: PlannedRemoval, signal: AbortSignal): Promise<void>;
  /**
   * Copies of several small files in one request, where the destination can (a pull: ReadMany;
   * a push: WriteMany).
   * `accepts` says which copies may go in a batch; `copy` calls `done` once for each file it
   * finishes, with its entry or the error of that file alone, and rejects for a failure of the
   * whole batch (files it did not finish are then not copied). A BatchUnsupportedError before any
   * file is done: the batch's files and every later one are copied one at a time by `copy`.
   */
  batch?: {
    accepts(item: PlannedCopy): boolean;
    copy(
      items: PlannedCopy[],
      sent: (n: number) => void,
      done: (index: number, result: BatchResult) => void,
      signal: AbortSignal,
    ): Promise<void>;
  };
}

/** One file of a batch: what the destination now holds, or why that file was not copied. */
export type BatchResult = { entry: TreeEntry | undefined } | { error: unknown };

export function transfersOf(options: TransferOptions): number {
  const n = options.transfers ?? 4;
  if (!Number.isInteger(n) || n < 1 || n > MAX_TRANSFERS) {
    throw new RangeError(`transfers must be an integer from 1 to ${MAX_TRANSFERS}, not ${n}`);
  }
  return n;
}

/** A change on the server since the listing: reported per file, not fatal. */
function changedMeanwhile(err: unknown): err is TroveError {
  return err instanceof PreconditionFailedError || err instanceof NotFoundError;
}

/** `path` below the transferred remote directory `base`. */
export function remotePath(base: string, path: string): string {
  return base === "" ? path : path === "" ? base : `${base}/${path}`;
}

/** The directory holding `path` ("" for an entry of the transferred directory itself). */
function parentOf(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash < 0 ? "" : path.slice(0, slash);
}

/** One line of a plan on disk: the step at a path, and the local file there (for the next local state). */
interface PlanLine {
  path: string;
  step?: Step;
  /** The local file at this path, with its MD5 when known. */
  local?: TreeEntry;
  /** When the local file's stamp was read (ms since the epoch). */
  at?: number;
}

/** How many names a refusal shows; it counts the others. */
const NAMES_SHOWN = 20;

function namesOf(names: string[], count: number): string {
  const more = count - names.length;
  return names.join(", ") + (more > 0 ? `, and ${more} more` : "");
}

const KIND_NAMES: Record<TreeEntry["kind"], string> = {
  file: "a file",
  directory: "a directory",
  other: "a link or special file",
};

/** What the survey of both sides found; the plan itself is on disk. */
export interface Survey {
  /** The plan's lines (PlanLine) in path order. */
  planFile: string;
  /** The deletions of `delete` (PlannedRemoval), done after the copies. */
  removalsFile: string;
  totalFiles: number;
  totalBytes: number;
  /** Local files hashed to compare them. */
  hashed: number;
  /** The local directory, absolute. */
  root: string;
  /** The remote directory, without leading or trailing "/". */
  base: string;
}

/**
 * Reads both sides side by side in path order (path-order.ts): the recursive listing as it
 * arrives, the directory as it is walked and the local state as it was recorded, hashing a local
 * file only when its MD5 decides (same size as the other side's, nothing recorded), and writes the
 * plan to `spool`, one line per path. Nothing is held for the whole tree (issue 31). Refuses,
 * before anything is changed: a local path that is not a directory (for a push, also a missing
 * one), a listing with unsafe names or out of path order, and entries of different kinds without
 * `delete`. The destination's own directory is planned when missing.
 */
export async function survey(
  options: TransferOptions,
  direction: "push" | "pull",
  cancellation: Cancellation,
  spool: string,
): Promise<Survey> {
  const { client, store } = options;
  const isPush = direction === "push";
  transfersOf(options);
  const root = resolve(options.directory);
  const found = await stat(root).catch(() => undefined);
  if (found ? !found.isDirectory() : isPush) throw new TransferRefusedError(`${options.directory} is not a directory`);
  const base = (options.path ?? "").replace(/^\/+|\/+$/g, "");
  const where = `${store}/${base}`;
  const result: Survey = {
    planFile: join(spool, "plan"),
    removalsFile: join(spool, "removals"),
    totalFiles: 0,
    totalBytes: 0,
    hashed: 0,
    root,
    base,
  };
  // Taken before any stamp is read: an edit made meanwhile is then "racy" (local-state.ts).
  const at = Date.now();
  const plan = new LineWriter(result.planFile);
  const removals = new LineWriter(result.removalsFile);
  const recorded =
    options.state === false ? undefined : new RecordedState(stateFileOf(root, options.stateDirectory), root);
  const planner = new Planner({ delete: options.delete === true });
  const unsafe: string[] = [];
  let unsafeCount = 0;
  const conflicts: string[] = [];
  let conflictCount = 0;
  try {
    await cancellation.run(async (signal) => {
      let batches: AsyncIterable<ListingEntry[]> | undefined;
      try {
        batches = (await client.listStream(store, base, { recursive: true, signal })).batches;
      } catch (err) {
        // A missing remote directory is created by a push; for a pull it is an error (NotFoundError).
        if (!(isPush && err instanceof NotFoundError && base !== "")) throw err;
      }
      if (isPush ? batches === undefined : found === undefined) {
        plan.write({ path: "", step: { type: "mkdir", path: "" } } satisfies PlanLine);
      }
      const remote = batches?.[Symbol.asyncIterator]();
      let batch: ListingEntry[] = [];
      let next = 0;
      let previous: string | undefined;
      const nextRemote = async (): Promise<ListingEntry | undefined> => {
        for (;;) {
          while (next >= batch.length) {
            const got = await remote?.next();
            if (got === undefined || got.done) return undefined;
            batch = got.value;
            next = 0;
          }
          const entry = batch[next++] as ListingEntry;
          if (!isSafeRelativePath(entry.name)) {
            if (unsafeCount++ < NAMES_SHOWN) unsafe.push(JSON.stringify(entry.name));
            continue;
          }
          if (previous !== undefined && comparePaths(entry.name, previous) <= 0) {
            throw new Error(
              `the listing of ${where} is not in path order (${JSON.stringify(entry.name)} after ` +
                `${JSON.stringify(previous)}); nothing was transferred`,
            );
          }
          previous = entry.name;
          return entry;
        }
      };
      const local = found ? walkLocal(root) : undefined;
      let l = local?.next().value as LocalEntry | undefined;
      let r = await nextRemote();
      while (r !== undefined || l !== undefined) {
        signal.throwIfAborted();
        const order = r === undefined ? 1 : l === undefined ? -1 : comparePaths(r.name, l.path);
        const path = order <= 0 ? (r as ListingEntry).name : (l as LocalEntry).path;
        let there: TreeEntry | undefined;
        if (r !== undefined && order <= 0) {
          there = r.directory
            ? { kind: "directory", tag: r.tag }
            : { kind: "file", size: r.size ?? 0, md5: r.md5, tag: r.tag };
        }
        let here: TreeEntry | undefined;
        if (l !== undefined && order >= 0) {
          const { path: _, ...entry } = l;
          here = entry;
          if (here.kind === "file") {
            const md5 = recorded?.md5Of(path, here);
            if (md5 !== undefined) here.md5 = md5;
            else if (there?.kind === "file" && there.size === here.size) {
              here.md5 = await md5File(join(root, ...path.split("/")), signal, here.size);
              result.hashed += 1;
            }
          }
        }
        const step = planner.step(path, isPush ? here : there, isPush ? there : here);
        const line: PlanLine = { path };
        if (step?.type === "conflict") {
          const what = `${path} (${KIND_NAMES[step.source]} in ${isPush ? options.directory : where}, ${KIND_NAMES[step.destination]} in ${isPush ? where : options.directory})`;
          if (conflictCount++ < NAMES_SHOWN) conflicts.push(what);
        } else if (step?.type === "remove") {
          removals.write(step.removal);
        } else if (step !== undefined) {
          line.step = step;
          if (step.type === "copy") {
            result.totalFiles += 1;
            result.totalBytes += step.copy.size;
          }
        }
        // What the next local state records of this path (a file whose MD5 is known, or which a
        // push uploads and so hashes), unless a pull deletes it.
        if (
          here?.kind === "file" &&
          (here.md5 || (isPush && step?.type === "copy")) &&
          !(step?.type === "remove" && !isPush)
        ) {
          line.local = here;
          line.at = at;
        }
        if (line.step !== undefined || line.local !== undefined) plan.write(line);
        if (order <= 0) r = await nextRemote();
        if (order >= 0) l = local?.next().value as LocalEntry | undefined;
      }
    });
    plan.close();
    removals.close();
  } catch (err) {
    plan.discard();
    removals.discard();
    throw err;
  } finally {
    recorded?.close();
  }
  if (unsafeCount > 0) {
    throw new TransferRefusedError(
      `the listing of ${where} holds names that are not safe relative paths: ` +
        `${namesOf(unsafe, unsafeCount)}; nothing was transferred`,
      unsafe.map((n) => JSON.parse(n) as string),
    );
  }
  if (conflictCount > 0) {
    throw new TransferRefusedError(
      `the source and the destination hold different kinds of entries of the same name: ${namesOf(conflicts, conflictCount)}; ` +
        "nothing was transferred (--delete replaces them)",
      conflicts.map((c) => c.slice(0, c.indexOf(" ("))),
    );
  }
  return result;
}

/** A local state's record waiting for a copy to finish, so that records are written in path order. */
interface Slot {
  path: string;
  entry?: TreeEntry;
  at?: number;
  settled: boolean;
  done: Promise<void>;
  settle(entry: TreeEntry | undefined, at: number | undefined): void;
}

/** At most this many records wait behind an unfinished copy; then the plan waits for it. */
const MAX_WAITING_RECORDS = 8192;

/** The next local state's records, written in path order as copies finish in any order. */
class OrderedRecords {
  private queue: Slot[] = [];
  private head = 0;

  constructor(private readonly writer: StateWriter | undefined) {}

  get waiting(): number {
    return this.queue.length - this.head;
  }

  /** The oldest record still waiting. */
  oldest(): Promise<void> {
    return (this.queue[this.head] as Slot).done;
  }

  /** A record known now. */
  add(path: string, entry: TreeEntry | undefined, at: number | undefined): void {
    if (this.writer === undefined) return;
    if (this.waiting === 0) this.writer.record(path, entry, at ?? 0);
    else this.pending(path).settle(entry, at);
  }

  /** A record known once `settle` is called; until then, the later ones wait. */
  pending(path: string): Pick<Slot, "settle"> {
    if (this.writer === undefined) return { settle() {} };
    let resolve: () => void = () => {};
    const slot: Slot = {
      path,
      settled: false,
      done: new Promise<void>((r) => {
        resolve = r;
      }),
      settle: (entry, at) => {
        if (slot.settled) return;
        Object.assign(slot, { entry, at, settled: true });
        resolve();
        this.flush();
      },
    };
    this.queue.push(slot);
    return slot;
  }

  private flush(): void {
    const writer = this.writer as StateWriter;
    while (this.head < this.queue.length && (this.queue[this.head] as Slot).settled) {
      const slot = this.queue[this.head] as Slot;
      writer.record(slot.path, slot.entry, slot.at ?? 0);
      this.head += 1;
    }
    if (this.head === this.queue.length) {
      this.queue = [];
      this.head = 0;
    } else if (this.head > 1024) {
      this.queue = this.queue.slice(this.head);
      this.head = 0;
    }
  }
}

/**
 * Carries out the plan `found` wrote on `destination`, line by line in path order: a file's copy
 * starts once its directory exists, at most `transfers` at once and at most `bytesInFlight` of
 * contents; a destination entry of another kind is removed just before its replacement; the
 * deletions of `delete` come after every copy. The next local state is written as it goes.
 * Resolves with the summary; rejects with a TransferChangedError (summary included) when files
 * changed meanwhile, or with the first other error (what is in flight is cancelled).
 */
export async function carryOut(
  found: Survey,
  destination: Destination,
  options: TransferOptions,
  direction: "push" | "pull",
  cancellation: Cancellation,
  started: number = performance.now(),
): Promise<TransferSummary> {
  const isPush = direction === "push";
  const limit = transfersOf(options);
  const budget = options.bytesInFlight ?? BYTES_IN_FLIGHT;
  const dryRun = options.dryRun === true;
  const { signal, run } = cancellation;
  const summary: TransferSummary = {
    dryRun,
    transferred: 0,
    skipped: 0,
    deleted: 0,
    directories: 0,
    bytes: 0,
    hashed: found.hashed,
    ms: 0,
    failures: [],
  };
  const progress: TransferProgress = { bytes: 0, totalBytes: found.totalBytes, files: 0, totalFiles: found.totalFiles };
  const state =
    options.state === false || dryRun
      ? undefined
      : new StateWriter(stateFileOf(found.root, options.stateDirectory), found.root);
  const records = new OrderedRecords(state);

  let failed: { error: unknown } | undefined;
  const fail = (error: unknown) => {
    if (failed !== undefined) return;
    failed = { error };
    limiter.stop();
    cancellation.abort(error);
  };
  // What is in flight: the plan's reader waits for room.
  const limiter = createLimiter({ count: limit, bytes: budget, onError: fail });
  // Directories whose creation is in flight: what goes in them waits for it.
  const creating = new Map<string, Promise<void>>();

  const act = async (action: TransferAction) => {
    signal.throwIfAborted();
    await options.onAction?.(action);
  };
  /** Removes a destination entry; false when it changed meanwhile (a failure is recorded). */
  const remove = async (item: PlannedRemoval, own: AbortSignal): Promise<boolean> => {
    try {
      await destination.remove(item, own);
      summary.deleted += 1;
    } catch (err) {
      if (err instanceof NotFoundError) return true; // already gone: what was wanted
      if (!changedMeanwhile(err)) throw err;
      summary.failures.push({ path: item.path, error: err, created: false });
      return false;
    }
    return true;
  };
  /** The copy of one file ended: its record, the summary and the progress. */
  const copied = (copy: PlannedCopy) => {
    summary.transferred += 1;
    summary.bytes += copy.size;
    progress.files += 1;
    options.onProgress?.({ ...progress });
  };
  const sent = (n: number) => {
    progress.bytes += n;
    options.onProgress?.({ ...progress });
  };
  /** A copy that failed: reported when the file changed on the source meanwhile, else the run's failure. */
  const notCopied = (copy: PlannedCopy, err: unknown) => {
    if (!changedMeanwhile(err)) throw err;
    summary.failures.push({ path: copy.path, error: err, created: copy.replaces === undefined });
  };
  /**
   * A copied file's record. A push's upload keeps the stamp read before it (an edit meanwhile
   * changes it); a pull's download is stamped after its rename, and recorded as of the moment the
   * state is written (at 0), as before session 17: trusted by a run 2 s later.
   */
  const settleCopied = (record: Pick<Slot, "settle">, line: PlanLine, now: TreeEntry | undefined) => {
    if (isPush) record.settle(line.local && { ...line.local, md5: line.local.md5 || now?.md5 }, line.at);
    else record.settle(now, 0);
  };
  // Small files go by batches (Destination.batch) until the server says it has no batch method.
  let batching = options.batch !== false;
  // The copies waiting to go as one batch, in plan order.
  let group: { copy: PlannedCopy; line: PlanLine; record: Pick<Slot, "settle"> }[] = [];
  let groupBytes = 0;
  /** After a failure: the batch being gathered is not copied, its files keep what the plan read. */
  const dropGroup = () => {
    for (const item of group) item.record.settle(item.line.local, item.line.at);
    group = [];
    groupBytes = 0;
  };
  const flush = async () => {
    const items = group;
    if (items.length === 0) return;
    group = [];
    groupBytes = 0;
    const batch = destination.batch as NonNullable<Destination["batch"]>;
    const settled = new Array<boolean>(items.length).fill(false);
    const unsettled = () => {
      for (const [i, item] of items.entries()) if (!settled[i]) item.record.settle(item.line.local, item.line.at);
    };
    const done = (index: number, result: BatchResult) => {
      const item = items[index];
      if (item === undefined || settled[index]) return;
      settled[index] = true;
      if ("error" in result) {
        item.record.settle(item.line.local, item.line.at);
        notCopied(item.copy, result.error);
        return;
      }
      settleCopied(item.record, item.line, result.entry);
      copied(item.copy);
    };
    const weight = items.reduce((sum, item) => sum + fileWeight(item.copy.size), 0);
    const admitted = await limiter.start(weight, async () => {
      try {
        await Promise.all(new Set(items.map((item) => creating.get(parentOf(item.copy.path)))));
        try {
          await run((own) =>
            batch.copy(
              items.map((item) => item.copy),
              sent,
              done,
              own,
            ),
          );
        } catch (err) {
          if (!(err instanceof BatchUnsupportedError) || settled.includes(true)) throw err;
          // An earlier server (nothing copied): this batch and the rest of the run one request
          // per file, one at a time: the batch holds one of the `transfers` places, not a hundred.
          batching = false;
          for (const [index, item] of items.entries()) {
            let result: BatchResult;
            try {
              result = { entry: await run((own) => destination.copy(item.copy, sent, own)) };
            } catch (error) {
              result = { error };
            }
            done(index, result);
          }
        }
      } finally {
        unsettled();
      }
    });
    if (admitted === undefined) unsettled();
  };
  const replacingAction = (path: string, entry: TreeEntry): TransferAction => ({
    type: "delete",
    path,
    directory: entry.kind === "directory",
    replacing: true,
  });

  try {
    // The plan is read twice: its directories first (a mkdir line records no local file), then
    // the rest. Creating a directory between the files of others made a pull's file creations
    // cost the kernel up to twice as much (ext4 placing them among recently deleted inodes:
    // docs/benchmarks.md, session 17).
    for (const phase of ["directories", "files"] as const) {
      for (const value of readLines(found.planFile)) {
        const line = value as PlanLine;
        const { step } = line;
        if ((phase === "directories") !== (step?.type === "mkdir")) continue;
        // After a failure, only the local files as they are still go to the next state.
        if (failed !== undefined || step === undefined) {
          if (failed !== undefined) dropGroup();
          records.add(line.path, line.local, line.at);
          continue;
        }
        if (records.waiting > MAX_WAITING_RECORDS) {
          // The oldest record may be a file of the batch being gathered: it goes now.
          await flush();
          while (records.waiting > MAX_WAITING_RECORDS) await records.oldest();
        }
        try {
          if (step.type === "skip" || step.type === "unchanged") {
            await act({ type: "skip", path: step.path, reason: step.type === "skip" ? "not-regular" : "unchanged" });
            summary.skipped += 1;
            records.add(line.path, line.local, line.at);
          } else if (step.type === "mkdir") {
            const { path, replacing } = step;
            if (replacing) await act(replacingAction(path, replacing));
            await act({ type: "mkdir", path });
            if (dryRun) {
              if (replacing) summary.deleted += 1;
              summary.directories += 1;
              continue;
            }
            // A pull's local file replaced by a directory is not recorded again.
            if (isPush || replacing === undefined) records.add(line.path, line.local, line.at);
            const parent = path === "" ? undefined : creating.get(parentOf(path));
            const made = await limiter.start(0, async () => {
              await parent;
              if (replacing && !(await run((own) => remove({ path, entry: replacing }, own)))) return;
              await run((own) => destination.makeDirectory(path, own));
              summary.directories += 1;
            });
            if (made !== undefined) {
              const { task } = made;
              creating.set(path, task);
              task.then(
                () => creating.get(path) === task && creating.delete(path),
                () => {},
              );
            }
          } else if (step.type === "copy") {
            const { copy, replacing } = step;
            if (replacing) await act(replacingAction(copy.path, replacing));
            await act({ type: "copy", path: copy.path, size: copy.size, replace: copy.replaces !== undefined });
            if (dryRun) {
              if (replacing) summary.deleted += 1;
              summary.transferred += 1;
              summary.bytes += copy.size;
              continue;
            }
            const record = records.pending(line.path);
            if (replacing === undefined && batching && destination.batch?.accepts(copy)) {
              group.push({ copy, line, record });
              groupBytes += copy.size;
              if (group.length >= BATCH_FILES || groupBytes >= BATCH_BYTES) await flush();
              continue;
            }
            const parent = creating.get(parentOf(copy.path));
            const admitted = await limiter.start(fileWeight(copy.size), async () => {
              try {
                await parent;
                if (replacing && !(await run((own) => remove({ path: copy.path, entry: replacing }, own)))) {
                  record.settle(line.local, line.at);
                  return;
                }
                settleCopied(record, line, await run((own) => destination.copy(copy, sent, own)));
              } catch (err) {
                record.settle(line.local, line.at);
                notCopied(copy, err);
                return;
              }
              copied(copy);
            });
            if (admitted === undefined) record.settle(line.local, line.at);
          }
        } catch (err) {
          fail(err);
          records.add(line.path, line.local, line.at);
        }
      }
    }
    // The last batch; after a failure its files are not copied, and keep what the plan read.
    if (failed === undefined) await flush().catch(fail);
    dropGroup();
    await limiter.idle();
    if (failed === undefined) {
      await eachLimited(
        readLines(found.removalsFile) as Iterable<PlannedRemoval>,
        limit,
        async (item) => {
          await act({ type: "delete", path: item.path, directory: item.entry.kind === "directory", replacing: false });
          if (dryRun) summary.deleted += 1;
          else await run((own) => remove(item, own));
        },
        fail,
      ).catch(() => {});
    }
  } catch (err) {
    fail(err);
  } finally {
    await limiter.idle();
    // Kept after a failure too: every record says what a local file is, copied or not.
    state?.commit();
  }
  if (failed !== undefined) throw failed.error;
  summary.ms = Math.round(performance.now() - started);
  summary.failures.sort((a, b) => comparePaths(a.path, b.path));
  if (summary.failures.length > 0) throw new TransferChangedError(summary);
  return summary;
}

/**
 * Surveys both sides into a plan on disk (in a temporary directory, removed at the end), then
 * carries it out on the destination that `destinationOf` gives; every request and hash has a
 * signal of its own, aborted with `options.signal`.
 */
export async function transfer(
  options: TransferOptions,
  direction: "push" | "pull",
  destinationOf: (survey: Survey) => Destination,
): Promise<TransferSummary> {
  // The summary's time is the whole run's: listing and hashing included.
  const started = performance.now();
  const cancellation = createCancellation(options.signal);
  const spool = mkdtempSync(join(tmpdir(), "trove-transfer-"));
  try {
    const found = await survey(options, direction, cancellation, spool);
    return await carryOut(found, destinationOf(found), options, direction, cancellation, started);
  } finally {
    cancellation.dispose();
    rmSync(spool, { recursive: true, force: true });
  }
}
