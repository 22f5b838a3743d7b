// Blobs as immutable files under a directory, named by UUID: written to a
// temporary file, fsynced, then renamed into place. Small contents stay in
// memory and are returned inline, to be kept with the metadata. A full disk is an
// InsufficientStorageError, and leaves no temporary file behind.

import { createHash, randomUUID } from "node:crypto";
import { createReadStream } from "node:fs";
import { chmod, mkdir, open, readdir, rename, rm, stat, unlink } from "node:fs/promises";
import { join } from "node:path";
import { InsufficientStorageError, NotFoundError, TooLargeError } from "../../domain/errors.js";
import type { BlobInfo, WriteBlobOptions } from "../port.js";

export const INLINE_MAX = 64 * 1024;
const READ_CHUNK = 64 * 1024;

/** Whether a file system error means the disk (or the user's quota) is full. */
export function isDiskFull(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === "ENOSPC" || code === "EDQUOT";
}

/** A full disk as the domain's error; anything else unchanged. */
function fullDiskAsInsufficientStorage(err: unknown): unknown {
  return isDiskFull(err) ? new InsufficientStorageError() : err;
}

/** Modes of what Trove keeps on disk: owner-only, set explicitly so that the umask does not matter. */
export const OWNER_DIR = 0o700;
export const OWNER_FILE = 0o600;

export class BlobFiles {
  readonly blobDir: string;
  readonly tempDir: string;

  /**
   * `syncDirectories`: after the rename of a blob file into its shard, fsync the shard directory
   * too, so the file's name survives a power loss (with SQLite's synchronous=FULL).
   */
  constructor(
    root: string,
    private readonly syncDirectories = false,
  ) {
    this.blobDir = join(root, "blobs");
    this.tempDir = join(root, "tmp");
  }

  /** Creates the directories and removes temporary files left by a process that died mid-upload. */
  async init(): Promise<void> {
    try {
      await mkdir(this.blobDir, { recursive: true, mode: OWNER_DIR });
      await chmod(this.blobDir, OWNER_DIR);
      // The shard directories (at most 256) of an older data directory; their files sit below them.
      for (const shard of await readdir(this.blobDir)) await chmod(join(this.blobDir, shard), OWNER_DIR);
      await rm(this.tempDir, { recursive: true, force: true });
      await mkdir(this.tempDir, { recursive: true, mode: OWNER_DIR });
      await chmod(this.tempDir, OWNER_DIR);
    } catch (err) {
      throw fullDiskAsInsufficientStorage(err);
    }
  }

  pathOf(blob: string): string {
    return join(this.blobDir, blob.slice(0, 2), blob);
  }

  async write(source: AsyncIterable<Uint8Array>, options: WriteBlobOptions): Promise<BlobInfo> {
    const blob = randomUUID();
    const hash = createHash("md5");
    let size = 0;
    let held: Buffer[] = [];
    let file: Awaited<ReturnType<typeof open>> | undefined;
    const temp = join(this.tempDir, blob);
    try {
      for await (const chunk of source) {
        size += chunk.byteLength;
        if (size > options.maxSize)
          throw new TooLargeError(`contents larger than the limit of ${options.maxSize} bytes`);
        hash.update(chunk);
        if (file) {
          await file.write(chunk);
        } else {
          held.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if (size > INLINE_MAX) {
            file = await open(temp, "wx", OWNER_FILE);
            await file.chmod(OWNER_FILE);
            await file.write(Buffer.concat(held));
            held = [];
          }
        }
      }
      const md5 = hash.digest("base64");
      if (!file) return { blob, size, md5, inline: Buffer.concat(held) };
      await file.sync();
      await file.close();
      file = undefined;
      const final = this.pathOf(blob);
      const shard = join(this.blobDir, blob.slice(0, 2));
      if ((await mkdir(shard, { recursive: true, mode: OWNER_DIR })) !== undefined) await chmod(shard, OWNER_DIR);
      await rename(temp, final);
      if (this.syncDirectories) {
        const dir = await open(shard, "r");
        try {
          await dir.sync();
        } finally {
          await dir.close();
        }
      }
      return { blob, size, md5, inline: null };
    } catch (err) {
      await file?.close().catch(() => {});
      await unlink(temp).catch(() => {});
      throw fullDiskAsInsufficientStorage(err);
    }
  }

  async *read(blob: string): AsyncIterable<Uint8Array> {
    const stream = createReadStream(this.pathOf(blob), { highWaterMark: READ_CHUNK });
    try {
      for await (const chunk of stream) yield chunk as Buffer;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") throw new NotFoundError(`blob ${blob} not found`);
      throw err;
    } finally {
      stream.destroy();
    }
  }

  /** Every blob file with its last modification (ms since 1970), one directory at a time. */
  async *files(): AsyncIterable<{ blob: string; modified: number }> {
    for (const dir of await readdir(this.blobDir).catch(() => [])) {
      for (const blob of await readdir(join(this.blobDir, dir)).catch(() => [])) {
        const s = await stat(join(this.blobDir, dir, blob)).catch(() => undefined);
        if (s?.isFile()) yield { blob, modified: s.mtimeMs };
      }
    }
  }

  async remove(blob: string): Promise<void> {
    await unlink(this.pathOf(blob)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "ENOENT") throw err;
    });
  }
}
