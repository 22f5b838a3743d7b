// What a push or a pull has to do, decided from the two trees alone (no I/O): which files
// differ (same size and same MD5 means equal), which directories are missing, what the
// destination holds that the source has not, and which names cannot be used safely.

import { isSafeRelativePath } from "../mirror/directory-sink.js";

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

export type Tree = Map<string, TreeEntry>;

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

export interface Plan {
  /** Destination entries of another kind than the source's (with `delete` only): removed first. */
  replaced: PlannedRemoval[];
  /** Directories to create, parents before children. */
  directories: string[];
  copies: PlannedCopy[];
  /** Files equal on both sides. */
  unchanged: string[];
  /** Source entries that are neither files nor directories (symbolic links): not copied. */
  skipped: string[];
  /** What the destination has and the source has not (with `delete` only); a directory once, with its contents. */
  removals: PlannedRemoval[];
  /** Same name, different kinds, without `delete`: the transfer is refused. */
  conflicts: { path: string; source: TreeEntry["kind"]; destination: TreeEntry["kind"] }[];
}

/** Names of a listing that are not safe relative paths ("..", "/abs", "a//b", "a\\b"). */
export function unsafeNames(tree: Tree): string[] {
  return [...tree.keys()].filter((name) => !isSafeRelativePath(name));
}

/** Whether `path` is `ancestor` or below it. */
function within(path: string, ancestor: string): boolean {
  return path === ancestor || path.startsWith(`${ancestor}/`);
}

/** The files whose local MD5 is needed and not known: a file of the same size on the other side. */
export function needsHash(local: Tree, remote: Tree): string[] {
  const out: string[] = [];
  for (const [path, entry] of local) {
    const other = remote.get(path);
    if (entry.kind === "file" && entry.md5 === undefined && other?.kind === "file" && other.size === entry.size) {
      out.push(path);
    }
  }
  return out;
}

/** Equal: same size, and same MD5 when both are known. */
function sameFile(a: TreeEntry, b: TreeEntry): boolean {
  if (a.size !== b.size) return false;
  return a.md5 === undefined || b.md5 === undefined || a.md5 === "" || b.md5 === "" || a.md5 === b.md5;
}

const depth = (path: string) => path.split("/").length;
const byDepth = (a: string, b: string) => depth(a) - depth(b) || (a < b ? -1 : a > b ? 1 : 0);

/**
 * rclone's `copy` (and, with `delete`, `sync`): the destination ends up with every file of the
 * source. Entries below a skipped source entry (a symbolic link) are left alone on both sides.
 */
export function planTransfer(source: Tree, destination: Tree, options: { delete: boolean }): Plan {
  const plan: Plan = {
    replaced: [],
    directories: [],
    copies: [],
    unchanged: [],
    skipped: [],
    removals: [],
    conflicts: [],
  };
  const skippedRoots = [...source].filter(([, e]) => e.kind === "other").map(([p]) => p);
  const isSkipped = (path: string) => skippedRoots.some((root) => within(path, root));
  const replacedRoots: string[] = [];
  const isReplaced = (path: string) => replacedRoots.some((root) => within(path, root));

  // Kind conflicts, parents first so that a replaced directory takes its contents along.
  for (const path of [...source.keys()].sort(byDepth)) {
    const s = source.get(path) as TreeEntry;
    const d = destination.get(path);
    if (s.kind === "other" || d === undefined || d.kind === s.kind || isReplaced(path)) continue;
    if (options.delete) {
      plan.replaced.push({ path, entry: d });
      replacedRoots.push(path);
    } else {
      plan.conflicts.push({ path, source: s.kind, destination: d.kind });
    }
  }

  for (const path of [...source.keys()].sort(byDepth)) {
    const s = source.get(path) as TreeEntry;
    if (s.kind === "other") {
      plan.skipped.push(path);
      continue;
    }
    if (isSkipped(path)) continue;
    const d = isReplaced(path) ? undefined : destination.get(path);
    if (s.kind === "directory") {
      if (d === undefined) plan.directories.push(path);
      continue;
    }
    const copy: PlannedCopy = { path, size: s.size ?? 0 };
    if (s.md5) copy.md5 = s.md5;
    if (s.tag) copy.tag = s.tag;
    if (d === undefined) plan.copies.push(copy);
    else if (d.kind === "file" && sameFile(s, d)) plan.unchanged.push(path);
    else if (d.kind === "file") plan.copies.push({ ...copy, replaces: d });
  }

  if (options.delete) {
    const removedRoots: string[] = [];
    for (const path of [...destination.keys()].sort(byDepth)) {
      if (source.has(path) || isSkipped(path) || isReplaced(path)) continue;
      if (removedRoots.some((root) => within(path, root))) continue;
      removedRoots.push(path);
      plan.removals.push({ path, entry: destination.get(path) as TreeEntry });
    }
  }
  return plan;
}
