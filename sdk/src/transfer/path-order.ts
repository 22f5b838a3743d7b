// The order in which push and pull meet paths: the server's listing order (byte order of the
// UTF-8 path, docs/rest.md), so that the listing, the directory walk and the local state can be
// read side by side, one entry of each at a time, with nothing held for the whole tree.

import { type Dirent, lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { entryOf } from "./local-tree.js";
import type { TreeEntry } from "./plan.js";

/**
 * Compares two paths in the byte order of their UTF-8 encodings (= code point order). JavaScript
 * compares UTF-16 code units, which differs only where a surrogate pair (above U+FFFF) meets a
 * character from U+E000 to U+FFFF: those are mapped so that the pair sorts after.
 */
export function comparePaths(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x - y;
  }
  return a.length - b.length;
}

/** `path` is `root` or below it. */
export function within(path: string, root: string): boolean {
  return path === root || (path.length > root.length && path.startsWith(root) && path[root.length] === "/");
}

/** A local entry in path order. */
export interface LocalEntry extends TreeEntry {
  path: string;
}

interface Pending {
  /** What orders it: the name, or the name and "/" for a directory's contents. */
  key: string;
  dirent: Dirent;
  contents: boolean;
}

/**
 * Everything below `root`, in path order, without following symbolic links (they, sockets, FIFOs
 * and devices are entries of kind "other"). A directory comes before the entries that sort
 * between its name and its contents ("a", "a-b", "a.c", "a/x"): each directory is read once and
 * held as a sorted list of its names and, for its subdirectories, of their contents, so memory is
 * that of the directories on the current path, not of the tree. Synchronous calls: nothing else is
 * in flight while a transfer walks its directory, and an `lstat` is cheaper than the promise
 * around it (docs/benchmarks.md, issue 31, session 13).
 */
export function* walkLocal(root: string): Generator<LocalEntry> {
  function* walk(dir: string, prefix: string): Generator<LocalEntry> {
    const pending: Pending[] = [];
    for (const dirent of readdirSync(dir, { withFileTypes: true })) {
      pending.push({ key: dirent.name, dirent, contents: false });
      if (dirent.isDirectory()) pending.push({ key: `${dirent.name}/`, dirent, contents: true });
    }
    pending.sort((a, b) => comparePaths(a.key, b.key));
    for (const { dirent, contents } of pending) {
      const path = prefix === "" ? dirent.name : `${prefix}/${dirent.name}`;
      const full = join(dir, dirent.name);
      if (contents) yield* walk(full, path);
      else if (dirent.isDirectory()) yield { path, kind: "directory" };
      else if (dirent.isFile()) yield { path, ...entryOf(lstatSync(full, { bigint: true })) };
      else yield { path, kind: "other" };
    }
  }
  yield* walk(root, "");
}
