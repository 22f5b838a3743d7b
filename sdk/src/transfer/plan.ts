// What a push or a pull has to do at each path, decided from the two sides' entries there alone
// (no I/O): which files differ (same size and same MD5 means equal), which directories are
// missing, what the destination holds that the source has not, and which names conflict. Paths
// come one at a time in path order (path-order.ts), so nothing is held for the whole tree.

import { comparePaths, within } from "./path-order.js";

/** One entry of a tree, by its path relative to the tree's root ("a/b.txt"). */
export interface TreeEntry {
  /** "other": a symbolic link or a special file (local trees only); never followed or copied. */
  kind: "file" | "directory" | "other";
  size?: number;
  /** Base64 MD5 of a file: from the listing (remote), or hashed when it matters (local). */
  md5?: string;
  /** The remote entry's tag (its ETag, unquoted), for If-Match. */
  tag?: string;
  /** A local file's `{mtimeNs}:{ctimeNs}:{ino}` (local-state.ts). */
  stamp?: string;
  /** A local file's modification time, ms since the epoch. */
  mtimeMs?: number;
}

export interface PlannedCopy {
  path: string;
  size: number;
  /** The source's MD5, when known. */
  md5?: string;
  /** The source's tag (a pull checks the download against it). */
  tag?: string;
  /** The destination file this copy replaces (its tag goes in If-Match); undefined: a new file. */
  replaces?: TreeEntry;
}

export interface PlannedRemoval {
  path: string;
  entry: TreeEntry;
}

/** What to do at one path. */
export type Step =
  /** A source entry that is neither a file nor a directory (a symbolic link): not copied. */
  | { type: "skip"; path: string }
  /** A file equal on both sides. */
  | { type: "unchanged"; path: string }
  /** A directory to create; `replacing`: the destination's entry of another kind, removed first. */
  | { type: "mkdir"; path: string; replacing?: TreeEntry }
  /** A file to copy; `replacing` as for mkdir. */
  | { type: "copy"; copy: PlannedCopy; replacing?: TreeEntry }
  /** What the destination has and the source has not (with `delete` only); a directory once. */
  | { type: "remove"; removal: PlannedRemoval }
  /** Same name, different kinds, without `delete`: the transfer is refused. */
  | { type: "conflict"; path: string; source: TreeEntry["kind"]; destination: TreeEntry["kind"] };

/** Equal: same size, and same MD5 when both are known. */
function sameFile(a: TreeEntry, b: TreeEntry): boolean {
  if (a.size !== b.size) return false;
  return a.md5 === undefined || b.md5 === undefined || a.md5 === "" || b.md5 === "" || a.md5 === b.md5;
}

/**
 * Paths below which entries are left alone, dropped once the walk has passed them: the entries
 * below a path come together in path order, after the path itself.
 */
class Roots {
  private roots: string[] = [];

  add(path: string): void {
    this.roots.push(path);
  }

  covers(path: string): boolean {
    if (this.roots.length === 0) return false;
    this.roots = this.roots.filter((root) => within(path, root) || comparePaths(path, `${root}/`) < 0);
    return this.roots.some((root) => within(path, root));
  }
}

/**
 * rclone's `copy` (and, with `delete`, `sync`): the destination ends up with every file of the
 * source. Entries below a skipped source entry (a symbolic link) are left alone on both sides;
 * below a destination entry replaced by one of another kind, they go with it. `step` must be
 * called for every path either side has, in path order.
 */
export class Planner {
  private readonly skipped = new Roots();
  private readonly replaced = new Roots();
  private readonly removed = new Roots();

  constructor(private readonly options: { delete: boolean }) {}

  step(path: string, source: TreeEntry | undefined, destination: TreeEntry | undefined): Step | undefined {
    if (this.skipped.covers(path)) return undefined;
    // Below a replaced destination entry, the destination has nothing left.
    const there = this.replaced.covers(path) ? undefined : destination;
    if (source === undefined) {
      if (there === undefined || !this.options.delete || this.removed.covers(path)) return undefined;
      this.removed.add(path);
      return { type: "remove", removal: { path, entry: there } };
    }
    if (source.kind === "other") {
      this.skipped.add(path);
      return { type: "skip", path };
    }
    let replacing: TreeEntry | undefined;
    if (there !== undefined && there.kind !== source.kind) {
      if (!this.options.delete) return { type: "conflict", path, source: source.kind, destination: there.kind };
      replacing = there;
      this.replaced.add(path);
    }
    const d = replacing ? undefined : there;
    if (source.kind === "directory") {
      if (d !== undefined) return undefined;
      return replacing ? { type: "mkdir", path, replacing } : { type: "mkdir", path };
    }
    const copy: PlannedCopy = { path, size: source.size ?? 0 };
    if (source.md5) copy.md5 = source.md5;
    if (source.tag) copy.tag = source.tag;
    if (d === undefined) return replacing ? { type: "copy", copy, replacing } : { type: "copy", copy };
    if (sameFile(source, d)) return { type: "unchanged", path };
    return { type: "copy", copy: { ...copy, replaces: d } };
  }
}
