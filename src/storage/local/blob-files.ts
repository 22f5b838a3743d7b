// Blobs as immutable files under a directory, named by UUID: written to a
// temporary file, fsynced, then renamed into place. Small contents stay in
// memory and are returned inline, to be kept with the metadata. A full disk is an
// InsufficientStorageError, and leaves no temporary file behind.

import { createHash, randomUUID } from "node:crypto";
import { chmod, type FileHandle, mkdir, open, readdir, rename, rm, stat, unlink } from "node:fs/promises";
import { dirname, join } from "node:path";
import { InsufficientStorageError, NotFoundError, TooLargeError } from "../../domain/errors.js";
import { ChunkPool, giveBack } from "../chunk-pool.js";
import type { BlobInfo, WriteBlobOptions } from "../port.js";
import { FileHasher, type FileHashJob } from "./file-hasher.js";

export const INLINE_MAX = 64 * 1024;
/**
 * Largest chunk a read gives, and the most bytes written to a blob file in one call. Measured
 * (docs/benchmarks.md, Apache section): 64 KiB chunks cost a 1 MiB GET about 1.7 ms of CPU, 1 MiB
 * chunks about 0.9 ms; the calls, promises and buffers per chunk were the difference. A reader
 * holds at most two chunks (the one given and the one read ahead), a writer two batches.
 */
const READ_CHUNK = 1024 * 1024;
const WRITE_BATCH = 1024 * 1024;
/**
 * The buffers blob readers read into: chunks are lent to the consumer, who may give them back
 * (chunk-pool.ts). Reads shorter than a quarter of a buffer get a buffer of their own, so that a
 * consumer that keeps a small chunk does not keep a whole pool buffer. Idle, the pool holds at
 * most 8 MiB: two buffers for each of four concurrent large reads.
 */
export const readBuffers = new ChunkPool(READ_CHUNK, 8);
const POOLED_READ = READ_CHUNK / 4;
/** The MD5 of blob files, on a worker thread reading them back while they are written. */
export const fileHasher = new FileHasher();

/** Writes all of `buffers` at the file's position (a short write is continued, as write(2) may end one). */
async function writeAll(file: FileHandle, buffers: Buffer[]): Promise<void> {
  let rest = buffers;
  for (;;) {
    const total = rest.reduce((n, b) => n + b.length, 0);
    const { bytesWritten } = rest.length === 1 ? await file.write(rest[0] as Buffer) : await file.writev(rest);
    if (bytesWritten >= total) return;
    const left = Buffer.concat(rest).subarray(bytesWritten);
    rest = [left];
  }
}

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
   * `workerSlot`: this process is that worker of several on the directory (`trove serve
   * --workers`); its temporary files go to `tmp/w{slot}`, which only it, started again, clears.
   */
  constructor(
    root: string,
    private readonly syncDirectories = false,
    private readonly workerSlot?: number,
  ) {
    this.blobDir = join(root, "blobs");
    this.tempDir = workerSlot === undefined ? join(root, "tmp") : join(root, "tmp", `w${workerSlot}`);
  }

  /**
   * Creates the directories and removes temporary files left by a process that died mid-upload:
   * all of `tmp/` for the directory's only process; a worker's own folder and the files a single
   * process left directly in `tmp/` (none runs beside workers), never another worker's.
   */
  async init(): Promise<void> {
    try {
      await mkdir(this.blobDir, { recursive: true, mode: OWNER_DIR });
      await chmod(this.blobDir, OWNER_DIR);
      // The shard directories (at most 256) of an older data directory; their files sit below them.
      for (const shard of await readdir(this.blobDir)) await chmod(join(this.blobDir, shard), OWNER_DIR);
      if (this.workerSlot !== undefined) {
        const shared = dirname(this.tempDir);
        await mkdir(shared, { recursive: true, mode: OWNER_DIR });
        for (const entry of await readdir(shared, { withFileTypes: true })) {
          if (entry.isFile()) await rm(join(shared, entry.name), { force: true });
        }
      }
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

  /**
   * Streams `source` into a new blob. Contents up to INLINE_MAX are answered inline, hashed here;
   * larger ones go to a temporary file in batches, each written while the next is received, and
   * hashed by the worker thread (file-hasher.ts) as they are written; the file is fsynced (the
   * hash finishing meanwhile) and renamed into place.
   */
  async write(source: AsyncIterable<Uint8Array>, options: WriteBlobOptions): Promise<BlobInfo> {
    const blob = options.blob ?? randomUUID();
    let size = 0;
    let held: Buffer[] = [];
    let heldBytes = 0;
    let file: FileHandle | undefined;
    let hashing: FileHashJob | undefined;
    let written = 0;
    // The batch being written while the next one is received: its failure is seen when awaited.
    let writing: Promise<void> | undefined;
    const temp = join(this.tempDir, blob);
    try {
      for await (const chunk of source) {
        size += chunk.byteLength;
        if (size > options.maxSize)
          throw new TooLargeError(`contents larger than the limit of ${options.maxSize} bytes`);
        held.push(Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));
        heldBytes += chunk.byteLength;
        if (!file && size > INLINE_MAX) {
          file = await open(temp, "wx", OWNER_FILE);
          await file.chmod(OWNER_FILE);
          hashing = fileHasher.start(temp);
        }
        if (file && heldBytes >= WRITE_BATCH) {
          await writing;
          const batch = writeAll(file, held);
          written += heldBytes;
          const end = written;
          const job = hashing;
          writing = batch.then(() => job?.upTo(end));
          writing.catch(() => {}); // awaited before the next batch, at the end, or on failure
          held = [];
          heldBytes = 0;
        }
      }
      if (!file) {
        const inline = Buffer.concat(held);
        return { blob, size, md5: createHash("md5").update(inline).digest("base64"), inline };
      }
      await writing;
      writing = undefined;
      if (held.length > 0) await writeAll(file, held);
      held = [];
      const job = hashing as FileHashJob;
      hashing = undefined;
      const [md5] = await Promise.all([job.digest(size), file.sync()]);
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
      hashing?.drop();
      await writing?.catch(() => {});
      await file?.close().catch(() => {});
      await unlink(temp).catch(() => {});
      throw fullDiskAsInsufficientStorage(err);
    }
  }

  /**
   * The contents of a blob in chunks of up to READ_CHUNK, the next one read while the last is
   * consumed. `size`, when known, sizes the buffers (a 100 KiB blob is one 100 KiB read) and saves
   * the read that would find the end. Each chunk is the consumer's: it may keep it, or give it
   * back (chunk-pool.ts `giveBack`) once nothing reads it any more.
   */
  async *read(blob: string, size?: number): AsyncIterable<Uint8Array> {
    let file: FileHandle;
    try {
      file = await open(this.pathOf(blob), "r");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") throw new NotFoundError(`blob ${blob} not found`);
      throw err;
    }
    const readAt = async (position: number): Promise<Buffer> => {
      const length = size === undefined ? READ_CHUNK : Math.min(READ_CHUNK, size - position);
      if (length <= 0) return Buffer.alloc(0);
      const pooled = length >= POOLED_READ;
      const buffer = pooled ? readBuffers.take(length) : Buffer.allocUnsafe(length);
      let bytesRead: number;
      try {
        ({ bytesRead } = await file.read(buffer, 0, length, position));
      } catch (err) {
        if (pooled) readBuffers.recycle(buffer);
        throw err;
      }
      if (pooled && bytesRead === 0) {
        readBuffers.recycle(buffer);
        return Buffer.alloc(0);
      }
      const chunk = bytesRead === length ? buffer : buffer.subarray(0, bytesRead);
      return pooled ? readBuffers.lend(chunk) : chunk;
    };
    // The chunk read ahead and not yet given: the reader's own, recycled if the consumer stops.
    let ahead: Promise<Buffer> | undefined;
    try {
      let position = 0;
      let next = readAt(0);
      ahead = next;
      for (;;) {
        const chunk = await next;
        ahead = undefined;
        if (chunk.length === 0) return;
        position += chunk.length;
        const last = size === undefined ? chunk.length < READ_CHUNK : position >= size;
        if (!last) {
          next = readAt(position);
          next.catch(() => {}); // awaited on the next turn, or below when the reader stops early
          ahead = next;
        }
        yield chunk;
        if (last) return;
      }
    } finally {
      const unread = await ahead?.catch(() => undefined);
      if (unread && unread.length > 0) giveBack(unread);
      await file.close();
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
