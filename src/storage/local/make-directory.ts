// `mkdir -p` that ends. Node's `mkdir(path, { recursive: true })` retries forever when the kernel
// keeps answering ENOENT for a directory whose parent exists: `/proc/x` (procfs answers ENOENT,
// not EPERM), or a path below a symbolic link to nothing. It steps back to the parent (EEXIST),
// forward again (ENOENT), at some 90 % of a core, in the main thread for mkdirSync, and never
// returns (strace: `mkdir("/proc/nope") = ENOENT`, `mkdir("/proc") = EEXIST`, again and again).
// Here each missing directory is made once, from the deepest one that exists downwards, and the
// first refusal is the answer.

import { mkdirSync, statSync } from "node:fs";
import { mkdir, stat } from "node:fs/promises";
import { dirname, resolve } from "node:path";

/** An error of the system, as Node throws them: `code` (ENOENT, EROFS ...) and the `path` refused. */
export type SystemError = NodeJS.ErrnoException & { code: string; path: string };

function systemError(code: string, message: string, path: string): SystemError {
  return Object.assign(new Error(`${code}: ${message}, mkdir '${path}'`), { code, path, syscall: "mkdir" });
}

/** Makes one directory; true when it was made, false when a directory is already there. */
function makeOne(path: string, mode: number): boolean {
  try {
    mkdirSync(path, { mode });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    // A file, or a symbolic link to something other than a directory; a link to nothing: ENOENT.
    if (!statSync(path).isDirectory()) throw systemError("ENOTDIR", "not a directory", path);
    return false;
  }
}

/**
 * Makes `path` and every missing directory above it, with `mode`; nothing when it is a directory
 * already. Throws the system's error for the first directory that cannot be made, its `path`
 * saying which one: ENOTDIR when that path, or one above it, is not a directory.
 */
export function makeDirectorySync(path: string, mode: number): void {
  const missing: string[] = [];
  for (let at = resolve(path); ; at = dirname(at)) {
    try {
      makeOne(at, mode);
      break;
    } catch (err) {
      // The root itself, or a refusal that a parent would not change (EROFS, EACCES, ENOTDIR ...).
      if ((err as NodeJS.ErrnoException).code !== "ENOENT" || dirname(at) === at) throw err;
      missing.push(at);
    }
  }
  // Each once: an ENOENT now, with its parent there, is final (the file system will not hold it).
  for (const dir of missing.reverse()) makeOne(dir, mode);
}

/** makeOne, off the main thread. */
async function makeOneAsync(path: string, mode: number | undefined): Promise<boolean> {
  try {
    await mkdir(path, { mode });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    if (!(await stat(path)).isDirectory()) throw systemError("ENOTDIR", "not a directory", path);
    return false;
  }
}

/**
 * makeDirectorySync without blocking: `mkdir(path, { recursive: true })` that ends (the same loop
 * in Node's recursive mkdir holds a thread of libuv's pool for ever). Returns the first directory
 * it made, as Node's does, or undefined when `path` was a directory already.
 */
export async function makeDirectory(path: string, mode?: number): Promise<string | undefined> {
  const missing: string[] = [];
  let made: string | undefined;
  for (let at = resolve(path); ; at = dirname(at)) {
    try {
      if (await makeOneAsync(at, mode)) made = at;
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT" || dirname(at) === at) throw err;
      missing.push(at);
    }
  }
  for (const dir of missing.reverse()) {
    await makeOneAsync(dir, mode);
    made ??= dir;
  }
  return made;
}
