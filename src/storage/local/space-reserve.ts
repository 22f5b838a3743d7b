// Room kept on the data directory's disk for deletes: a file of zeros that is removed when a
// delete meets a full disk (a delete must write its tombstones before it frees anything), and
// written again once the disk has room. Nothing here ever fails a request.

import { unlinkSync } from "node:fs";
import { chmod, open, stat, statfs, unlink } from "node:fs/promises";
import { dirname } from "node:path";
import type { StorageLogger } from "../port.js";

/** How long after an attempt to write the reserve the next one may start. */
const RESTORE_INTERVAL = 1000;
const CHUNK = 1 << 20;
/** The data directory's files are readable by the server's user alone (issue 29). */
const RESERVE_MODE = 0o600;

export class SpaceReserve {
  private present = false;
  private pending: Promise<void> | undefined;
  private nextAttempt = 0;
  /** Raised by every release: a write in flight that sees it changed stops and removes its file. */
  private generation = 0;

  constructor(
    readonly file: string,
    readonly bytes: number,
    private readonly logger: StorageLogger,
  ) {}

  /** Whether the reserve file is in place. */
  get held(): boolean {
    return this.present;
  }

  /**
   * Writes the reserve file in the background when it is missing and the disk has room for it
   * twice over; at most one attempt a second (at once after a release). Never throws.
   */
  restore(): void {
    if (this.bytes <= 0 || this.present || this.pending || Date.now() < this.nextAttempt) return;
    this.nextAttempt = Date.now() + RESTORE_INTERVAL;
    this.pending = this.write()
      .catch((err: unknown) => this.logger.warn({ err, file: this.file }, "could not write the space reserve"))
      .finally(() => {
        this.pending = undefined;
      });
  }

  /**
   * Removes the reserve file, synchronously (the caller is between a failed transaction and its
   * retry); returns whether there was one to remove.
   */
  release(): boolean {
    this.generation += 1;
    this.present = false;
    this.nextAttempt = 0;
    try {
      unlinkSync(this.file);
    } catch {
      return false;
    }
    this.logger.warn({ file: this.file }, "the disk is full: space reserve released for a delete");
    return true;
  }

  /** Resolves once no write of the reserve is in flight. */
  async settled(): Promise<void> {
    await this.pending;
  }

  private async write(): Promise<void> {
    const existing = await stat(this.file).catch(() => undefined);
    if (existing && existing.size >= this.bytes) {
      // One written by an earlier version was 0644: the data directory's files are 0600.
      if ((existing.mode & 0o777) !== RESERVE_MODE) await chmod(this.file, RESERVE_MODE);
      this.present = true;
      return;
    }
    const disk = await statfs(dirname(this.file));
    if (disk.bavail * disk.bsize < 2 * this.bytes) return;
    const generation = this.generation;
    const handle = await open(this.file, "w", RESERVE_MODE);
    try {
      // Zeros written, not a sparse file or a length: the blocks must be taken now. No fsync: the
      // file system accounts for the space when write() returns, and a short file left by a crash
      // is written again at the next open.
      const zeros = Buffer.alloc(Math.min(CHUNK, this.bytes));
      for (let left = this.bytes; left > 0; left -= zeros.length) {
        if (generation !== this.generation) throw new Error("released while it was written");
        await handle.write(zeros, 0, Math.min(left, zeros.length));
      }
      await handle.close();
    } catch (err) {
      await handle.close().catch(() => {});
      await unlink(this.file).catch(() => {});
      throw err;
    }
    if (generation === this.generation) this.present = true;
    else await unlink(this.file).catch(() => {});
  }
}
