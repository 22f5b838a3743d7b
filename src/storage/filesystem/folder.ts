// The folder of a filesystem store on disk: the version of a file (what tells an unchanged file
// without reading it), hashing, uploads assembled in filesystem-temp and renamed into place, and
// the checks a new store's directories must pass. Symbolic links are never followed.

import { createHash, randomUUID } from "node:crypto";
import type { BigIntStats } from "node:fs";
import { constants } from "node:fs";
import { lstat, open, readdir, realpath, rename, rm, stat, unlink } from "node:fs/promises";
import { join, relative, sep } from "node:path";
import { BadRequestError, InsufficientStorageError, TooLargeError } from "../../domain/errors.js";
import { isDiskFull } from "../local/blob-files.js";
import { makeDirectory } from "../local/make-directory.js";

const READ_CHUNK = 64 * 1024;

/** What is at a path of the folder, as Trove sees it: symbolic links and special files are "other". */
export type EntryKind = "file" | "directory" | "other" | "absent";

export function kindOf(st: BigIntStats | undefined): EntryKind {
  if (!st) return "absent";
  if (st.isSymbolicLink()) return "other";
  if (st.isFile()) return "file";
  if (st.isDirectory()) return "directory";
  return "other";
}

/** lstat (never follows a link) with bigint times; undefined when nothing is there. */
export async function lstatOf(file: string): Promise<BigIntStats | undefined> {
  try {
    return await lstat(file, { bigint: true });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // Too long a name for the file system: nothing can be there.
    if (code === "ENOENT" || code === "ENOTDIR" || code === "ENAMETOOLONG") return undefined;
    throw err;
  }
}

/** A write the folder's file system refuses for the length of its name, as the client's error. */
export function tooLongAsBadRequest(err: unknown, path: string): unknown {
  if ((err as NodeJS.ErrnoException | undefined)?.code !== "ENAMETOOLONG") return err;
  return new BadRequestError(
    `/${path} is too long for the folder of this filesystem store: with the folder's own path it exceeds what the file system accepts`,
  );
}

/**
 * The version of a file: a name-based UUID (version 3, MD5) of its inode, size and modification
 * time in nanoseconds. It is the node's `blob`: equal versions mean an unchanged file, which is
 * not read again; a rename over it (new inode), a write (new mtime) or a truncation changes it.
 */
export function versionOf(st: BigIntStats): string {
  const hex = createHash("md5").update(`${st.ino}:${st.size}:${st.mtimeNs}`).digest("hex");
  const variant = ((Number.parseInt(hex[16] as string, 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-3${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}

export interface HashedFile {
  md5: string;
  size: number;
  version: string;
}

/**
 * Reads a file (without following a link) and returns its MD5 and version; undefined when it
 * changed while it was read (a writer is still at work: the next change notification reads it
 * again) or is no longer a file.
 */
export async function hashFile(file: string): Promise<HashedFile | undefined> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR" || code === "ELOOP" || code === "ENAMETOOLONG") return undefined;
    throw err;
  }
  try {
    const before = await handle.stat({ bigint: true });
    if (!before.isFile()) return undefined;
    const hash = createHash("md5");
    let size = 0;
    // Sized to the file (one byte more, to see it grow): a folder of small files is read without
    // a 64 KiB allocation outside the JavaScript heap each (memory stays flat while indexing).
    const buffer = Buffer.allocUnsafe(Number(before.size < READ_CHUNK ? before.size + 1n : READ_CHUNK));
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.byteLength, size);
      if (bytesRead === 0) break;
      hash.update(buffer.subarray(0, bytesRead));
      size += bytesRead;
    }
    const after = await handle.stat({ bigint: true });
    const version = versionOf(before);
    if (versionOf(after) !== version || BigInt(size) !== before.size) return undefined;
    // The path may name another file by now (renamed over while read): the caller compares.
    return { md5: hash.digest("base64"), size, version };
  } finally {
    await handle.close();
  }
}

/**
 * Streams a file's contents as of the version `expected`: undefined when the file at the path is
 * not that version (changed on disk since it was recorded, or a link now), so nothing else is
 * ever served under the recorded tag. Reads exactly the recorded size.
 */
export function openVersion(file: string, expected: string): Promise<AsyncIterable<Uint8Array> | undefined> {
  return openChecked(file, (st) => versionOf(st) === expected);
}

/**
 * Streams a regular file (never through a link) when `accepts` its stats, read on the open file
 * descriptor: exactly the size they give. Undefined when it is absent or not accepted.
 */
export async function openChecked(
  file: string,
  accepts: (st: BigIntStats) => boolean,
): Promise<AsyncIterable<Uint8Array> | undefined> {
  let handle: Awaited<ReturnType<typeof open>>;
  try {
    handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR" || code === "ELOOP" || code === "EISDIR" || code === "ENAMETOOLONG")
      return undefined;
    throw err;
  }
  const st = await handle.stat({ bigint: true }).catch(async (err) => {
    await handle.close();
    throw err;
  });
  if (!st.isFile() || !accepts(st)) {
    await handle.close();
    return undefined;
  }
  const size = Number(st.size);
  return (async function* () {
    try {
      for (let at = 0; at < size; ) {
        const buffer = Buffer.allocUnsafe(Math.min(READ_CHUNK, size - at));
        const { bytesRead } = await handle.read(buffer, 0, buffer.byteLength, at);
        if (bytesRead === 0) break;
        at += bytesRead;
        yield buffer.subarray(0, bytesRead);
      }
    } finally {
      await handle.close();
    }
  })();
}

export interface AssembledUpload {
  /** The file in filesystem-temp. */
  temp: string;
  size: number;
  md5: string;
}

/** Receives contents into a new file of `tempDir`, computing size and MD5, and flushes it to disk. */
export async function assemble(
  tempDir: string,
  source: AsyncIterable<Uint8Array>,
  maxSize: number,
): Promise<AssembledUpload> {
  const temp = join(tempDir, uploadName());
  const hash = createHash("md5");
  let size = 0;
  let handle: Awaited<ReturnType<typeof open>> | undefined;
  try {
    handle = await open(temp, "wx");
    for await (const chunk of source) {
      size += chunk.byteLength;
      if (size > maxSize) throw new TooLargeError(`contents larger than the limit of ${maxSize} bytes`);
      hash.update(chunk);
      await handle.write(chunk);
    }
    await handle.sync();
    await handle.close();
    handle = undefined;
    return { temp, size, md5: hash.digest("base64") };
  } catch (err) {
    await handle?.close().catch(() => {});
    await unlink(temp).catch(() => {});
    throw isDiskFull(err) ? new InsufficientStorageError() : err;
  }
}

/** Flushes a directory's entries (a rename into it) to disk; best effort. */
export async function syncDirectory(dir: string): Promise<void> {
  const handle = await open(dir, constants.O_RDONLY | constants.O_DIRECTORY).catch(() => undefined);
  if (!handle) return;
  await handle.sync().catch(() => {});
  await handle.close().catch(() => {});
}

/** The names of what Trove puts in filesystem-temp: an upload, a deleted directory, a write check. */
const TEMP_ENTRY = /^(upload|deleted|\.trove-write-check)-[0-9a-f-]{36}$/;

export const uploadName = () => `upload-${randomUUID()}`;
export const deletedName = () => `deleted-${randomUUID()}`;

/**
 * Removes what Trove left in filesystem-temp (uploads cut short by a crash, deleted trees), and
 * nothing else: an operator may have pointed filesystem-temp at a directory that holds other things.
 * With `olderThan` (ms), only entries not modified for that long: where other instances share
 * filesystem-temp (a shared file system), an upload in flight there is theirs.
 */
export async function emptyDirectory(dir: string, olderThan?: number): Promise<void> {
  for (const name of await readdir(dir).catch(() => [])) {
    if (!TEMP_ENTRY.test(name)) continue;
    if (olderThan !== undefined) {
      const st = await lstat(join(dir, name)).catch(() => undefined);
      if (!st || Date.now() - st.mtimeMs < olderThan) continue;
    }
    await rm(join(dir, name), { recursive: true, force: true }).catch(() => {});
  }
}

/** Whether `inner` is `outer` or lies below it (both real, absolute paths). */
export function isWithin(inner: string, outer: string): boolean {
  const rel = relative(outer, inner);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !rel.startsWith(sep));
}

/**
 * Checks the directories of a filesystem store before it is created or changed, and makes its
 * filesystem-temp: the location must be an existing, writable directory; filesystem-temp must not
 * lie inside it, and must be on the same file system (uploads are renamed into place). A probe
 * file is assembled in filesystem-temp and renamed into the location and out again, as an upload
 * would be. Throws BadRequestError with the reason; creates nothing else.
 */
export async function checkDirectories(location: string, tempDir: string): Promise<void> {
  let created: string | undefined;
  try {
    await checkAndMake(location, tempDir, (dir) => {
      created = dir;
    });
  } catch (err) {
    // Nothing stays behind of a store that is refused.
    if (created !== undefined) await rm(created, { recursive: true, force: true }).catch(() => {});
    throw err;
  }
}

async function checkAndMake(location: string, tempDir: string, made: (dir: string | undefined) => void): Promise<void> {
  const where = await stat(location).catch((err: NodeJS.ErrnoException) => {
    throw new BadRequestError(`filesystem-location ${location} does not exist (${err.code ?? err.message})`);
  });
  if (!where.isDirectory()) throw new BadRequestError(`filesystem-location ${location} is not a directory`);
  const realLocation = await realpath(location);
  const realTempParent = await realpathOfNearest(tempDir);
  if (isWithin(realTempParent.path, realLocation)) {
    throw new BadRequestError(
      `filesystem-temp ${tempDir} lies inside filesystem-location ${location}: choose a directory outside the served tree`,
    );
  }
  try {
    made(await makeDirectory(tempDir));
  } catch (err) {
    throw new BadRequestError(`filesystem-temp ${tempDir} cannot be created (${(err as NodeJS.ErrnoException).code})`);
  }
  const temp = await stat(tempDir);
  if (!temp.isDirectory()) throw new BadRequestError(`filesystem-temp ${tempDir} is not a directory`);
  if (temp.dev !== where.dev) {
    throw new BadRequestError(
      `filesystem-temp ${tempDir} is on another file system than filesystem-location ${location}: uploads are renamed into place, so choose a filesystem-temp on the same file system`,
    );
  }
  const probe = `.trove-write-check-${randomUUID()}`;
  let assembled: string | undefined;
  try {
    assembled = join(tempDir, probe);
    await (await open(assembled, "wx")).close();
  } catch (err) {
    throw new BadRequestError(`filesystem-temp ${tempDir} is not writable (${(err as NodeJS.ErrnoException).code})`);
  }
  try {
    await rename(assembled, join(location, probe));
    await rename(join(location, probe), assembled);
  } catch (err) {
    throw new BadRequestError(
      `filesystem-location ${location} is not writable (${(err as NodeJS.ErrnoException).code}): Trove writes its resources there`,
    );
  } finally {
    await unlink(assembled).catch(() => {});
    await unlink(join(location, probe)).catch(() => {});
  }
}

/** The real path of a directory, or of its nearest existing ancestor joined with the rest. */
async function realpathOfNearest(dir: string): Promise<{ path: string }> {
  const rest: string[] = [];
  for (let current = dir; ; ) {
    try {
      return { path: join(await realpath(current), ...rest.reverse()) };
    } catch {
      const parent = join(current, "..");
      if (parent === current) return { path: dir };
      rest.push(current.slice(parent === "/" ? 1 : parent.length + 1));
      current = parent;
    }
  }
}
