// How the SQLite adapter runs a write: in this process's turn at the database's write lock
// (workers on one data directory take turns, handed out by their primary), with a full disk
// translated, and deletes given the room kept for them.

import type Database from "better-sqlite3";
import type { SpaceReserve } from "../local/space-reserve.js";
import type { StorageLogger, WriteTurns } from "../port.js";
import { databaseError, isDatabaseFull, type SqliteWrites } from "./sqlite-errors.js";

/** Workers: a process checkpoints the WAL after this many of its writes, in its turn (SqliteWriteTurns.checkpoint). */
const CHECKPOINT_EVERY = 250;

export interface SqliteWriteTurnsOptions {
  db: Database.Database;
  dataDir: string;
  busyTimeout: number;
  logger: StorageLogger;
  reserve: SpaceReserve;
  /** With maxDatabaseBytes: the cap in pages, and the part of it that writes other than deletes may use. */
  pageCap: { all: number; writes: number } | undefined;
  /** The primary's turns, with peers (`trove serve --workers`); alone on the directory, none. */
  turns: WriteTurns | undefined;
}

/** Workers: the writes waiting for this process's write turn, and what its checkpoints need. */
interface TurnQueue {
  queue: Array<{ run: () => unknown; resolve(value: unknown): void; reject(err: unknown): void }>;
  /** The turn was asked for and not yet run. */
  asked: boolean;
  /** Writes since the last checkpoint. */
  commits: number;
  noWait: Database.Statement;
  wait: Database.Statement;
  checkpoint: Database.Statement;
}

export class SqliteWriteTurns implements SqliteWrites {
  private readonly db: Database.Database;
  private readonly dataDir: string;
  private readonly logger: StorageLogger;
  private readonly reserve: SpaceReserve;
  private readonly pageCap: { all: number; writes: number } | undefined;
  private readonly turns: WriteTurns | undefined;
  /** With peers: the writes waiting for this process's turn (`locked`), and the WAL's checkpoints. */
  private readonly queue: TurnQueue | undefined;

  constructor(options: SqliteWriteTurnsOptions) {
    this.db = options.db;
    this.dataDir = options.dataDir;
    this.logger = options.logger;
    this.reserve = options.reserve;
    this.pageCap = options.pageCap;
    this.turns = options.turns;
    this.queue = this.turns && {
      queue: [],
      asked: false,
      commits: 0,
      noWait: this.db.prepare("PRAGMA busy_timeout = 0"),
      wait: this.db.prepare(`PRAGMA busy_timeout = ${options.busyTimeout}`),
      checkpoint: this.db.prepare("PRAGMA wal_checkpoint(RESTART)"),
    };
  }

  /** Runs a write; a full disk (or cap) becomes InsufficientStorageError. */
  async write<T>(run: () => T): Promise<T> {
    try {
      return await this.locked(run);
    } catch (err) {
      throw databaseError(err, this.dataDir);
    }
  }

  /**
   * Runs a write that frees space (a delete, the purge): when the disk (or cap) is full, releases
   * the room kept for deletes and tries once more, so that space can be freed through the API.
   */
  async free<T>(run: () => T): Promise<T> {
    try {
      return await this.locked(run);
    } catch (err) {
      if (!isDatabaseFull(err, this.dataDir) || !this.releaseReserve()) throw databaseError(err, this.dataDir);
    }
    try {
      return await this.write(run);
    } finally {
      // Clamped by SQLite to the current size: what the delete used stays usable, no more.
      if (this.pageCap) this.db.pragma(`max_page_count = ${this.pageCap.writes}`);
    }
  }

  /**
   * Runs a write in this process's turn at the write lock; errors as SQLite reports them. Alone
   * on the directory the lock is always free: the write runs at once. Workers (peers) ask their
   * primary for the turn and, once granted, run every write that queued meanwhile, each its own
   * transaction, then give the turn back: they wait in order and without blocking, where
   * SQLite's busy handler would sleep the whole event loop (1, 2, 5, 10 ... 100 ms at a time)
   * and let the luckiest worker win. SQLite's lock still guards each write.
   */
  private locked<T>(run: () => T): Promise<T> {
    const queue = this.queue;
    if (queue === undefined) {
      try {
        return Promise.resolve(run());
      } catch (err) {
        return Promise.reject(err);
      }
    }
    return new Promise<T>((resolve, reject) => {
      queue.queue.push({ run, resolve: resolve as (value: unknown) => void, reject });
      if (queue.asked) return;
      queue.asked = true;
      this.turns?.take(() => this.runTurn());
    });
  }

  /** This process holds the turn: its queued writes, a checkpoint when one is due, then the turn back. */
  private runTurn(): void {
    const queue = this.queue;
    if (!queue) return;
    try {
      for (let write = queue.queue.shift(); write; write = queue.queue.shift()) {
        try {
          write.resolve(write.run());
          queue.commits += 1;
        } catch (err) {
          write.reject(err);
        }
      }
      if (queue.commits >= CHECKPOINT_EVERY) this.checkpoint(queue);
    } finally {
      queue.asked = false;
      this.turns?.release();
    }
  }

  /**
   * Workers: checkpoints the WAL into the database while this process holds the write turn
   * (RESTART), so that the copy completes and the next write starts the WAL from its beginning.
   * SQLite's automatic checkpoint (PASSIVE, after a commit; off for workers) lets the other
   * processes go on writing while it copies: under a steady load from two workers it never caught
   * up, the WAL grew without end (99 MB in 10 s of PUTs, measured) and every commit paid another
   * attempt. Without waiting (busy_timeout 0): a reader still on an older snapshot leaves some
   * frames to the next checkpoint. Never throws: the writes before it have committed.
   */
  private checkpoint(queue: TurnQueue): void {
    queue.commits = 0;
    try {
      queue.noWait.get();
      try {
        queue.checkpoint.get();
      } finally {
        queue.wait.get();
      }
    } catch (err) {
      this.logger.warn({ err }, "a checkpoint of the WAL failed; the next one will try again");
    }
  }

  /** Releases the reserve file and the reserved part of the cap; whether there was anything to release. */
  private releaseReserve(): boolean {
    let released = this.reserve.release();
    if (this.pageCap) {
      const current = this.db.pragma("max_page_count", { simple: true }) as number;
      if (current < this.pageCap.all) {
        this.db.pragma(`max_page_count = ${this.pageCap.all}`);
        released = true;
      }
    }
    return released;
  }
}
