// The start-up check of the data directory (docs/operations.md, "Data directory"): made if
// missing (`mkdir -p`, each directory once), a directory, and one this process can write in; else
// one plain reason, which `trove serve` prints on one line before it exits 1.

import { randomBytes } from "node:crypto";
import { closeSync, constants, lstatSync, openSync, statSync, unlinkSync } from "node:fs";
import { dirname, join, resolve, sep } from "node:path";
import { OWNER_DIR } from "../storage/local/blob-files.js";
import { makeDirectorySync, type SystemError } from "../storage/local/make-directory.js";

/** A data directory that cannot be used: `reason` in plain words, `path` as it was given. */
export class DataDirError extends Error {
  override name = "DataDirError";
  constructor(
    readonly path: string,
    readonly reason: string,
  ) {
    super(`data directory ${printable(path)} cannot be used: ${reason}`);
  }
}

export function isDataDirError(err: unknown): err is DataDirError {
  return err instanceof DataDirError;
}

/** The path on one line whatever it holds (a newline in a name would split the error's line). */
function printable(path: string): string {
  return /[\u0000-\u001f\u007f]/.test(path) ? JSON.stringify(path) : path;
}

/** The most bytes of one name, and of a whole path with its terminating NUL (Linux: NAME_MAX, PATH_MAX). */
const NAME_MAX = 255;
const PATH_MAX = 4096;

/** Whether `path` is there, following symbolic links. */
function exists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

/** Why `err`, from making the directory `err.path` (the target or one above it), refused it, in plain words. */
function reasonOf(err: SystemError, target: string): string {
  const at = typeof err.path === "string" ? resolve(err.path) : target;
  const making = at === target ? "" : ` (making ${at})`;
  switch (err.code) {
    case "ENOTDIR": {
      if (at !== target) return `${at} is not a directory`;
      // mkdir of the target said ENOTDIR: it is not there, a name above it is a file.
      for (let up = dirname(target); !exists(target) && up !== dirname(up); up = dirname(up)) {
        if (exists(up)) return `${up} is not a directory`;
      }
      return "is not a directory";
    }
    case "ENOENT": {
      let link = false;
      try {
        link = lstatSync(at).isSymbolicLink();
      } catch {}
      if (link) return at === target ? "is a symbolic link to nothing" : `${at} is a symbolic link to nothing`;
      // Its parent is there (procfs, sysfs ... answer ENOENT to mkdir), or could not be made.
      return at === target
        ? `no such file or directory (${dirname(target)} does not let it be created)`
        : `no such file or directory (its parent ${at} cannot be created)`;
    }
    case "ENAMETOOLONG":
      if (Buffer.byteLength(target) >= PATH_MAX) return `name too long (the path is over ${PATH_MAX - 1} bytes)`;
      return target.split(sep).some((name) => Buffer.byteLength(name) > NAME_MAX)
        ? `name too long (a name in it is over ${NAME_MAX} bytes)`
        : "name too long";
    default:
      return `${plain(err)}${making}`;
  }
}

/** Why a file could not be created in the directory, in plain words. */
function plain(err: SystemError): string {
  switch (err.code) {
    case "EROFS":
      return "read-only file system";
    case "EACCES":
      return "permission denied";
    case "EPERM":
      return "operation not permitted";
    case "ENOSPC":
      return "no space left on device";
    case "EDQUOT":
      return "disk quota exceeded";
    case "ELOOP":
      return "too many levels of symbolic links";
    case "ENOENT":
      return "files cannot be created in it";
    default:
      return `${err.code}: ${err.message}`;
  }
}

/**
 * Makes the data directory if it is missing (owner-only, each missing directory above it too),
 * then proves it can be written: a file is created in it and removed. Throws DataDirError.
 */
export function checkDataDir(path: string): void {
  const target = resolve(path);
  const refused = (err: unknown) => typeof (err as NodeJS.ErrnoException).code === "string";
  try {
    makeDirectorySync(target, OWNER_DIR);
  } catch (err) {
    throw refused(err) ? new DataDirError(path, reasonOf(err as SystemError, target)) : err;
  }
  const probe = join(target, `.trove-write-check-${process.pid}-${randomBytes(4).toString("hex")}`);
  try {
    closeSync(openSync(probe, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, 0o600));
  } catch (err) {
    throw refused(err) ? new DataDirError(path, plain(err as SystemError)) : err;
  }
  unlinkSync(probe);
}
