// What a failed SQLite write means: a full disk (or the database's size cap) is the domain's
// InsufficientStorageError; everything else passes through unchanged.

import { statfsSync } from "node:fs";
import { InsufficientStorageError } from "../../domain/errors.js";

/**
 * Write errors that SQLite reports under another name than SQLITE_FULL when the disk is full
 * (growing the -shm file, truncating, syncing): full only when the disk says so too, since EIO
 * gives the same codes.
 */
const WRITE_IO_ERRORS = new Set([
  "SQLITE_IOERR_WRITE",
  "SQLITE_IOERR_SHMSIZE",
  "SQLITE_IOERR_TRUNCATE",
  "SQLITE_IOERR_FSYNC",
]);

/** Free space below which a write I/O error is taken for a full disk. */
const NEARLY_FULL = 1 << 20;

/** An error of SQLite itself (better-sqlite3's SqliteError: a code SQLITE_*), not a refusal of the rules. */
export function isSqliteError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && code.startsWith("SQLITE_");
}

/** Whether an error of a write to the database in `dataDir` means the disk or the cap is full. */
export function isDatabaseFull(err: unknown, dataDir: string): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (code === "SQLITE_FULL") return true;
  if (typeof code !== "string" || !WRITE_IO_ERRORS.has(code)) return false;
  try {
    const disk = statfsSync(dataDir);
    return disk.bavail * disk.bsize < NEARLY_FULL;
  } catch {
    return false;
  }
}

/** `err` as the domain sees it: InsufficientStorageError for a full disk, else unchanged. */
export function databaseError(err: unknown, dataDir: string): unknown {
  return isDatabaseFull(err, dataDir) ? new InsufficientStorageError() : err;
}

/** How the insights module runs its writes: with a full disk translated, and deletes given room. */
export interface SqliteWrites {
  /**
   * Runs a write; a full disk becomes InsufficientStorageError. Workers on one directory wait
   * for each other's write lock without blocking the event loop (SqliteStorage.write).
   */
  write<T>(run: () => T): Promise<T>;
  /** Runs a write that frees space: on a full disk, releases the reserve and retries once. */
  free<T>(run: () => T): Promise<T>;
}
