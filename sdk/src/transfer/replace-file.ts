// A local file replaced by one buffer, atomically: written to a temporary name, renamed into
// place, and its stamp read from the still-open file. What pull() and a mirror's directory do
// for every file of up to WHOLE_FILE_BYTES, with synchronous calls: for files of a few KiB the
// thread pool's hand-offs (open, write, close, rename, lstat: five round trips, each a promise)
// cost more than the calls themselves (docs/benchmarks.md, issue 31, session 13).

import { type BigIntStats, closeSync, fstatSync, mkdirSync, openSync, renameSync, rmSync, writeSync } from "node:fs";
import { dirname } from "node:path";

export interface ReplaceFileOptions {
  /** Create the destination's missing parents (a mirror's sink); otherwise they must exist. */
  makeParents?: boolean;
  /** Replace a directory at the destination, with its contents (a mirror's sink). */
  replaceDirectory?: boolean;
}

/**
 * Writes `bytes` to `tmp` (which must not exist), renames it to `dest` and returns the file's
 * stat as it is under its final name (the rename changes its change time: the stamp is read
 * after it, from the open file, so no second lookup by name). A failure removes `tmp` and leaves
 * `dest` as it was. No fsync, as before: a crash may lose the file, never leave a part of it
 * under `dest` (docs/cli.md).
 */
export function replaceFileSync(
  tmp: string,
  dest: string,
  bytes: Uint8Array,
  options: ReplaceFileOptions = {},
): BigIntStats {
  const fd = openSync(tmp, "wx");
  let renamed = false;
  try {
    for (let at = 0; at < bytes.byteLength; ) at += writeSync(fd, bytes, at);
    try {
      renameSync(tmp, dest);
    } catch (err) {
      // Only when the common case fails: no lookups for the thousands of files that just fit.
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "ENOENT" && options.makeParents) mkdirSync(dirname(dest), { recursive: true });
      else if ((code === "EISDIR" || code === "ENOTEMPTY" || code === "EEXIST") && options.replaceDirectory) {
        rmSync(dest, { recursive: true, force: true });
      } else throw err;
      renameSync(tmp, dest);
    }
    renamed = true;
    return fstatSync(fd, { bigint: true });
  } finally {
    closeSync(fd);
    if (!renamed) rmSync(tmp, { force: true });
  }
}
