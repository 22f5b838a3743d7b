// What push() and pull() share: their options, actions, summary and errors, and the runner
// that carries out a Plan on one side (the server for a push, a directory for a pull) with a
// bounded number of transfers at once.

import { stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import type { TroveRestClient } from "../rest/client.js";
import { type Cancellation, createCancellation, eachLimited, fileBudget } from "../rest/in-flight.js";
import type { ListingEntry } from "../rest/xml.js";
import { NotFoundError, PreconditionFailedError, type TroveError } from "../trove-errors.js";
import { applyLocalState, saveLocalState, stateFileOf } from "./local-state.js";
import { md5File, readLocalTree } from "./local-tree.js";
import {
  needsHash,
  type Plan,
  type PlannedCopy,
  type PlannedRemoval,
  planTransfer,
  type Tree,
  type TreeEntry,
  unsafeNames,
} from "./plan.js";

/** The most transfers at once that `transfers` accepts. */
export const MAX_TRANSFERS = 64;

export interface TransferOptions {
  client: TroveRestClient;
  store: string;
  /** The remote directory ("" or omitted: the store's root). */
  path?: string;
  /** The local directory. */
  directory: string;
  /** Files transferred (and hashed) at once: 1 to 64, default 4. */
  transfers?: number;
  /**
   * At most this many bytes of file contents in flight at once, whatever `transfers` is (default
   * 4 MiB, BYTES_IN_FLIGHT); a file counts with its size, a streamed one (over WHOLE_FILE_BYTES)
   * with 1 MiB at most, and one larger than the whole budget goes alone.
   */
  bytesInFlight?: number;
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
}

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

/**
 * Carries out `plan` on `destination`: kind conflicts removed, directories created (parents
 * first), files copied, extras deleted. Resolves with the summary; rejects with a
 * TransferChangedError (summary included) when files changed meanwhile, or with the first
 * other error (what is in flight is cancelled).
 */
export async function runPlan(
  plan: Plan,
  destination: Destination,
  options: TransferOptions,
  cancellation: Cancellation,
  started: number = performance.now(),
  copied: Map<string, TreeEntry> = new Map(),
): Promise<TransferSummary> {
  const limit = transfersOf(options);
  const dryRun = options.dryRun === true;
  const { signal, run } = cancellation;
  const abort = (err: unknown) => cancellation.abort(err);
  const summary: TransferSummary = {
    dryRun,
    transferred: 0,
    skipped: plan.unchanged.length + plan.skipped.length,
    deleted: 0,
    directories: 0,
    bytes: 0,
    hashed: 0,
    ms: 0,
    failures: [],
  };
  const progress: TransferProgress = {
    bytes: 0,
    totalBytes: plan.copies.reduce((sum, c) => sum + c.size, 0),
    files: 0,
    totalFiles: plan.copies.length,
  };
  const act = async (action: TransferAction) => {
    signal.throwIfAborted();
    await options.onAction?.(action);
  };
  const remove = async (item: PlannedRemoval, replacing: boolean) => {
    await act({ type: "delete", path: item.path, directory: item.entry.kind === "directory", replacing });
    if (dryRun) {
      summary.deleted += 1;
      return;
    }
    try {
      await run((own) => destination.remove(item, own));
      summary.deleted += 1;
    } catch (err) {
      if (err instanceof NotFoundError) return; // already gone: what was wanted
      if (!changedMeanwhile(err)) throw err;
      summary.failures.push({ path: item.path, error: err });
    }
  };

  for (const path of plan.skipped) await act({ type: "skip", path, reason: "not-regular" });
  for (const path of plan.unchanged) await act({ type: "skip", path, reason: "unchanged" });
  await eachLimited(plan.replaced, limit, (item) => remove(item, true), abort);
  // One level at a time: a directory's parent exists before it is created.
  const levels = new Map<number, string[]>();
  for (const path of plan.directories) {
    const depth = path === "" ? 0 : path.split("/").length;
    levels.set(depth, [...(levels.get(depth) ?? []), path]);
  }
  for (const depth of [...levels.keys()].sort((a, b) => a - b)) {
    await eachLimited(
      levels.get(depth) as string[],
      limit,
      async (path) => {
        await act({ type: "mkdir", path });
        if (!dryRun) await run((own) => destination.makeDirectory(path, own));
        summary.directories += 1;
      },
      abort,
    );
  }
  await eachLimited(
    plan.copies,
    limit,
    async (item) => {
      await act({ type: "copy", path: item.path, size: item.size, replace: item.replaces !== undefined });
      if (!dryRun) {
        try {
          const now = await run((own) =>
            destination.copy(
              item,
              (n) => {
                progress.bytes += n;
                options.onProgress?.({ ...progress });
              },
              own,
            ),
          );
          if (now !== undefined) copied.set(item.path, now);
        } catch (err) {
          if (!changedMeanwhile(err)) throw err;
          summary.failures.push({ path: item.path, error: err });
          return;
        }
      }
      summary.transferred += 1;
      summary.bytes += item.size;
      progress.files += 1;
      options.onProgress?.({ ...progress });
    },
    abort,
    fileBudget((item) => item.size, options.bytesInFlight),
  );
  await eachLimited(plan.removals, limit, (item) => remove(item, false), abort);
  summary.ms = Math.round(performance.now() - started);
  summary.failures.sort((a, b) => (a.path < b.path ? -1 : 1));
  if (summary.failures.length > 0) throw new TransferChangedError(summary);
  return summary;
}

/** `path` below the transferred remote directory `base`. */
export function remotePath(base: string, path: string): string {
  return base === "" ? path : path === "" ? base : `${base}/${path}`;
}

/**
 * The remote directory as a Tree, from one recursive listing; with `missingOk`, undefined when
 * it does not exist (a missing store is always an error: NotFoundError).
 */
async function readRemoteTree(
  client: TroveRestClient,
  store: string,
  base: string,
  options: { signal?: AbortSignal; missingOk?: boolean } = {},
): Promise<Tree | undefined> {
  let entries: ListingEntry[];
  try {
    entries = (await client.list(store, base, { recursive: true, signal: options.signal })).entries;
  } catch (err) {
    if (options.missingOk && err instanceof NotFoundError && base !== "") return undefined;
    throw err;
  }
  const tree: Tree = new Map();
  for (const e of entries) {
    tree.set(
      e.name,
      e.directory ? { kind: "directory", tag: e.tag } : { kind: "file", size: e.size ?? 0, md5: e.md5, tag: e.tag },
    );
  }
  return tree;
}

/** The trees' names, checked: a name that could leave the directory refuses the transfer. */
function refuseUnsafeNames(remote: Tree, where: string): void {
  const unsafe = unsafeNames(remote);
  if (unsafe.length > 0) {
    throw new TransferRefusedError(
      `the listing of ${where} holds names that are not safe relative paths: ` +
        `${unsafe.map((n) => JSON.stringify(n)).join(", ")}; nothing was transferred`,
      unsafe,
    );
  }
}

const KIND_NAMES: Record<TreeEntry["kind"], string> = {
  file: "a file",
  directory: "a directory",
  other: "a link or special file",
};

/** Without `delete`, an entry of one kind on one side and another on the other refuses the transfer. */
function refuseConflicts(plan: Plan, source: string, destination: string): void {
  if (plan.conflicts.length === 0) return;
  const what = plan.conflicts.map(
    (c) => `${c.path} (${KIND_NAMES[c.source]} in ${source}, ${KIND_NAMES[c.destination]} in ${destination})`,
  );
  throw new TransferRefusedError(
    `the source and the destination hold different kinds of entries of the same name: ${what.join(", ")}; ` +
      "nothing was transferred (--delete replaces them)",
    plan.conflicts.map((c) => c.path),
  );
}

/** Hashes the local files whose MD5 decides whether they differ, `limit` at once. */
async function hashLocal(
  root: string,
  local: Tree,
  remote: Tree,
  limit: number,
  cancellation: Cancellation,
): Promise<number> {
  const paths = needsHash(local, remote);
  await eachLimited(paths, limit, async (path) => {
    const entry = local.get(path) as TreeEntry;
    entry.md5 = await cancellation.run((own) => md5File(join(root, ...path.split("/")), own, entry.size));
  });
  return paths.length;
}

export interface Survey {
  plan: Plan;
  /** The local tree, with the MD5s known (recorded or hashed). */
  local: Tree;
  /** Local files hashed to compare them. */
  hashed: number;
  /** The local directory, absolute. */
  root: string;
  /** The remote directory, without leading or trailing "/". */
  base: string;
}

/**
 * Reads both sides (one recursive listing, one walk of the directory, the MD5 of the local
 * files whose size matches) and plans. Refuses, before anything is changed: a local path that
 * is not a directory (for a push, also a missing one), a listing with unsafe names, and entries
 * of different kinds without `delete`. The destination's own directory is planned when missing.
 */
export async function survey(
  options: TransferOptions,
  direction: "push" | "pull",
  cancellation: Cancellation,
): Promise<Survey> {
  const { client, store } = options;
  const isPush = direction === "push";
  const limit = transfersOf(options);
  const root = resolve(options.directory);
  const found = await stat(root).catch(() => undefined);
  if (found ? !found.isDirectory() : isPush) throw new TransferRefusedError(`${options.directory} is not a directory`);
  const base = (options.path ?? "").replace(/^\/+|\/+$/g, "");
  const where = `${store}/${base}`;
  // A missing remote directory is created by a push; for a pull it is an error (NotFoundError).
  const remote = await cancellation.run((signal) => readRemoteTree(client, store, base, { signal, missingOk: isPush }));
  if (remote) refuseUnsafeNames(remote, where);
  const local: Tree = found ? readLocalTree(root) : new Map();
  if (options.state !== false) await applyLocalState(stateFileOf(root, options.stateDirectory), root, local);
  const other: Tree = remote ?? new Map();
  const hashed = await hashLocal(root, local, other, limit, cancellation);
  const plan = planTransfer(isPush ? local : other, isPush ? other : local, { delete: options.delete === true });
  refuseConflicts(plan, isPush ? options.directory : where, isPush ? where : options.directory);
  if (isPush ? remote === undefined : found === undefined) plan.directories.unshift("");
  return { plan, local, hashed, root, base };
}

/**
 * Surveys both sides, then carries out the plan on the destination that `destinationOf` gives;
 * every request and hash has a signal of its own, aborted with `options.signal`.
 */
export async function transfer(
  options: TransferOptions,
  direction: "push" | "pull",
  destinationOf: (survey: Survey) => Destination,
): Promise<TransferSummary> {
  // The summary's time is the whole run's: listing and hashing included.
  const started = performance.now();
  const cancellation = createCancellation(options.signal);
  try {
    const found = await survey(options, direction, cancellation);
    const copied = new Map<string, TreeEntry>();
    try {
      const summary = await runPlan(found.plan, destinationOf(found), options, cancellation, started, copied);
      summary.hashed = found.hashed;
      return summary;
    } catch (err) {
      if (err instanceof TransferChangedError) err.summary.hashed = found.hashed;
      throw err;
    } finally {
      if (options.state !== false && options.dryRun !== true) {
        // What each copied file now is on the local side: a push's upload keeps the stamp read
        // before it (an edit meanwhile changes it), a pull's download is stamped after its rename.
        for (const [path, entry] of copied) {
          const before = found.local.get(path);
          found.local.set(path, { ...before, ...entry, kind: "file" });
        }
        await saveLocalState(stateFileOf(found.root, options.stateDirectory), found.root, found.local, Date.now());
      }
    }
  } finally {
    cancellation.dispose();
  }
}
