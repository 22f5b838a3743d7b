// Brings the index (the inner adapter's nodes) in line with what a filesystem store's folder holds
// at one path, through the same putFile / makeDirectory / deleteTree writes every face makes, so
// that an external change becomes ordinary change events. One lock per store serializes these
// writes with Trove's own writes to the folder: a version already recorded is never recorded twice.

import { join } from "node:path";
import { UnavailableError } from "../../domain/errors.js";
import { typeFromName } from "../../domain/mime.js";
import { ancestorsOf, joinPath, nameOf } from "../../domain/path.js";
import type { NodeRecord, StorageLogger, StoragePort } from "../port.js";
import { type EntryKind, type HashedFile, hashFile, kindOf, lstatOf, versionOf } from "./folder.js";
import type { KeptCopies } from "./kept-copies.js";

/** Why an entry of the folder is not served: a name Trove's path rules refuse, a symbolic link, a special file. */
export type SkipReason = "name" | "link" | "special";

/** Runs tasks one at a time, in call order. */
export class StoreLock {
  private tail: Promise<unknown> = Promise.resolve();

  run<T>(task: () => Promise<T>): Promise<T> {
    const result = this.tail.then(task, task);
    this.tail = result.catch(() => {});
    return result;
  }
}

export interface ReconcilerOptions {
  inner: StoragePort;
  store: string;
  /** The folder (filesystem-location). */
  location: string;
  now: () => number;
  logger: StorageLogger;
  /** Counts an entry that is not served (once per path). */
  skipped?: (reason: SkipReason) => void;
  /** Where the bytes of each recorded state are kept, when the store keeps versions now (docs/history.md). */
  copies?: () => KeptCopies | undefined;
}

export interface SyncResult {
  /** What the index holds at the path now. */
  kind: "file" | "directory" | "absent";
  /** The file was being written while it was read: not recorded; read it again on its next change. */
  unsettled: boolean;
  /** The file's contents were read (hashed): it was new or changed. */
  read?: boolean;
  /** A change was recorded in the index. */
  recorded?: boolean;
}

const MAX_REPORTED = 10_000;

export class Reconciler {
  readonly store: string;
  readonly location: string;
  readonly lock = new StoreLock();
  private readonly inner: StoragePort;
  private readonly now: () => number;
  private readonly logger: StorageLogger;
  private readonly onSkipped: ((reason: SkipReason) => void) | undefined;
  private readonly copies: () => KeptCopies | undefined;
  /** Paths already reported as skipped: a rescan does not report them again. */
  private readonly reported = new Set<string>();

  constructor(options: ReconcilerOptions) {
    this.inner = options.inner;
    this.store = options.store;
    this.location = options.location;
    this.now = options.now;
    this.logger = options.logger;
    this.onSkipped = options.skipped;
    this.copies = options.copies ?? (() => undefined);
  }

  /** The absolute file name of a store path. */
  fileOf(path: string): string {
    return path === "" ? this.location : join(this.location, ...path.split("/"));
  }

  /** Whether a name (one segment) is one Trove serves; reports it otherwise. */
  acceptsName(path: string, name: string | Buffer): boolean {
    const text = name.toString();
    let ok = typeof name === "string" || Buffer.from(text).equals(name);
    if (ok) {
      try {
        joinPath(path.split("/"));
      } catch {
        ok = false;
      }
    }
    if (!ok) this.skip(path, "name");
    return ok;
  }

  skip(path: string, reason: SkipReason): void {
    const key = `${reason} ${path}`;
    if (this.reported.has(key)) return;
    if (this.reported.size >= MAX_REPORTED) this.reported.clear();
    this.reported.add(key);
    this.logger.warn(
      { store: this.store, path, reason },
      reason === "name"
        ? "a name in the folder of a filesystem store is refused by Trove's path rules: not served"
        : reason === "link"
          ? "a symbolic link in the folder of a filesystem store is never followed: not served"
          : "a special file in the folder of a filesystem store is not served",
    );
    this.onSkipped?.(reason);
  }

  /** Throws UnavailableError when the folder itself is missing (never read as "everything was deleted"). */
  async requireFolder(): Promise<void> {
    const st = await lstatOf(this.location);
    if (kindOf(st) !== "directory") {
      throw new UnavailableError(
        `the folder of filesystem store ${this.store} (${this.location}) is missing or not a directory`,
      );
    }
  }

  /** `syncLocked` under the store's lock. */
  sync(path: string): Promise<SyncResult> {
    return this.lock.run(() => this.syncLocked(path));
  }

  /** Brings a path and each of its ancestors in line with the folder. The caller holds the lock. */
  async syncLocked(path: string): Promise<SyncResult> {
    await this.requireFolder();
    for (const dir of ancestorsOf(path).reverse()) {
      if (dir === "") continue;
      const result = await this.syncEntry(dir);
      if (result.kind !== "directory") return { kind: "absent", unsettled: false };
    }
    return path === "" ? { kind: "directory", unsettled: false } : this.syncEntry(path);
  }

  /**
   * `syncEntry` under the lock: for a walk, whose parent directory is known to be in line.
   * `hashed`: the file's contents as read before (outside the lock, several at a time), used when
   * the file is still that version.
   */
  syncChild(path: string, hashed?: HashedFile): Promise<SyncResult> {
    return this.lock.run(() => this.syncEntry(path, hashed));
  }

  /** Reads a file of the folder ahead of `syncChild` (no lock: nothing is recorded); undefined if it is not a readable file. */
  async readAhead(path: string): Promise<HashedFile | undefined> {
    return hashFile(this.fileOf(path)).catch(() => undefined);
  }

  /** The live node at a path of the index, or undefined. */
  async indexed(path: string): Promise<NodeRecord | undefined> {
    const node = await this.inner.getNode(this.store, path);
    return node && !node.deleted ? node : undefined;
  }

  /** The live children of a directory of the index, in batches. */
  children(dir: string): AsyncIterable<NodeRecord[]> {
    return this.inner.listNodes(this.store, dir, { recursive: false, includeDeleted: false });
  }

  /** One path, its parent already in line. The caller holds the lock. */
  private async syncEntry(path: string, ahead?: HashedFile): Promise<SyncResult> {
    if (!this.acceptsName(path, nameOf(path))) return { kind: "absent", unsettled: false };
    const file = this.fileOf(path);
    const st = await lstatOf(file);
    let kind: EntryKind = kindOf(st);
    if (kind === "other") {
      this.skip(path, st?.isSymbolicLink() ? "link" : "special");
      kind = "absent";
    }
    const node = await this.indexed(path);
    if (kind === "absent") {
      if (!node) return { kind: "absent", unsettled: false };
      await this.ended(node);
      await this.inner.deleteTree(this.store, path, {}, this.now());
      return { kind: "absent", unsettled: false, recorded: true };
    }
    if (kind === "directory") {
      if (node?.directory) return { kind: "directory", unsettled: false };
      if (node) {
        await this.ended(node);
        await this.inner.deleteTree(this.store, path, {}, this.now());
      }
      await this.inner.makeDirectory(this.store, path, {}, this.now());
      return { kind: "directory", unsettled: false, recorded: true };
    }
    if (node && !node.directory && st && node.blob === versionOf(st)) return { kind: "file", unsettled: false };
    // Read ahead as the version the path holds now: the same bytes (else read here, then lstat
    // again: a file that changed while it was read is left for its next change).
    const current = st && ahead?.version === versionOf(st);
    const hashed = current ? ahead : await hashFile(file);
    const again = current ? st : hashed && (await lstatOf(file));
    if (!hashed || !again || kindOf(again) !== "file" || versionOf(again) !== hashed.version) {
      return { kind: node ? (node.directory ? "directory" : "file") : "absent", unsettled: true, read: true };
    }
    // History: the new state's bytes are kept before it is recorded (a copy: an edit in place
    // would change a link), and the state it ends stays needed for keep-versions from now on.
    const copies = this.copies();
    if (copies && !(await copies.copy(file, hashed, this.now(), hashed.version))) {
      return { kind: node ? (node.directory ? "directory" : "file") : "absent", unsettled: true, read: true };
    }
    if (node) await this.ended(node);
    if (node?.directory) await this.inner.deleteTree(this.store, path, {}, this.now());
    const type = node && !node.directory ? node.type : typeFromName(nameOf(path));
    const blob = { blob: hashed.version, size: hashed.size, md5: hashed.md5, inline: null };
    await this.inner.putFile(this.store, path, blob, type, {}, this.now());
    return { kind: "file", unsettled: false, read: true, recorded: true };
  }

  /**
   * A recorded state (a file, or each file below a directory) is about to end: the copy of its
   * bytes, if Trove kept one, is needed for keep-versions from now on.
   */
  private async ended(node: NodeRecord): Promise<void> {
    const copies = this.copies();
    if (!copies) return;
    const now = this.now();
    if (!node.directory) {
      await copies.touch(node, now);
      return;
    }
    for await (const batch of this.inner.listNodes(this.store, node.path, { recursive: true, includeDeleted: false })) {
      for (const below of batch) if (!below.directory) await copies.touch(below, now);
    }
  }
}
