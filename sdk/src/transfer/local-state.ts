// What a push or pull remembers of the local side between runs, so that a run whose local side
// did not change reads no file contents: each file's size, modification and change times (ns),
// inode and MD5. Kept in the user's cache directory (`$XDG_CACHE_HOME/trove/transfers/`, by
// default `~/.cache/trove/transfers/`), one file per local directory named by the SHA-256 of its
// absolute path: never in DIR (never pushed, never deleted by a pull) and never beside it (a push
// writes nothing in the tree it reads). Written to a temporary file and renamed. The server side
// is not remembered: every run lists it and compares MD5s, so a same-size edit there is always seen.

import { createHash, randomUUID } from "node:crypto";
import { mkdirSync, renameSync, rmSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { comparePaths } from "./path-order.js";
import type { TreeEntry } from "./plan.js";
import { LineWriter, readLines } from "./spool.js";

/**
 * A file whose modification time is this close to (or after) the moment its MD5 was recorded is
 * hashed again: an edit in the same clock tick as the record would leave every stamp unchanged
 * (git's "racily clean" files). 2 s is FAT's resolution, the coarsest a disk may have; it applies
 * to a file whose modification time is a whole second (a file system that keeps no fraction).
 */
export const RACY_MS = 2_000;

/**
 * The margin for a file whose modification time has a fraction of a second, kept by a file system
 * to the nanosecond: the clock that stamps files then ticks every few milliseconds at most (Linux's
 * coarse clock: 1/HZ, 10 ms at HZ=100; NTFS 100 ns, APFS 1 ns). Without it, the files a pull
 * downloaded in its last 2 s were hashed again by the next run (most of a fast pull's: session 19).
 */
export const FINE_RACY_MS = 100;

/** The racy margin of a file by its stamp (`{mtimeNs}:...`): RACY_MS for a whole second, else FINE_RACY_MS. */
export function racyMarginOf(stamp: string): number {
  const colon = stamp.indexOf(":");
  // The nanoseconds within the second: none on a file system of whole seconds.
  return Number(stamp.slice(0, colon < 0 ? stamp.length : colon).slice(-9)) === 0 ? RACY_MS : FINE_RACY_MS;
}

/**
 * Version 2 (issue 31, session 17): JSON lines in path order, so that a run reads the state side
 * by side with its directory walk and writes the next one as it goes, holding no record of the
 * tree. Version 1 (one JSON object) is not read: after the upgrade, one run hashes what it needs.
 */
const VERSION = 2;

/** The first line of a state file. */
interface StateHeader {
  version: number;
  /** The local directory's absolute path (a file of another is not trusted). */
  root: string;
}

/**
 * Each next line: path, size, stamp (`{mtimeNs}:{ctimeNs}:{ino}`), base64 MD5, and when the stamp
 * and the MD5 were taken (ms since the epoch; 0: when the state file was written, its
 * modification time, as git takes its index file's for "racily clean" entries), in path order.
 */
export type RecordedFile = [path: string, size: number, stamp: string, md5: string, at: number];

const isRecord = (v: unknown): v is RecordedFile =>
  Array.isArray(v) &&
  v.length === 5 &&
  typeof v[0] === "string" &&
  typeof v[1] === "number" &&
  typeof v[2] === "string" &&
  typeof v[3] === "string" &&
  typeof v[4] === "number";

/** Where states are kept unless a transfer names another directory. */
export function defaultStateDirectory(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "trove", "transfers");
}

/** The state file of the local directory `root` (absolute) in `directory`. */
export function stateFileOf(root: string, directory = defaultStateDirectory()): string {
  return join(directory, `${createHash("sha256").update(root).digest("hex").slice(0, 32)}.json`);
}

/**
 * The state a previous run recorded, read in path order: `md5Of` must be asked for paths in that
 * order. A missing, unreadable, foreign or malformed file trusts nothing (from where it fails).
 */
export class RecordedState {
  private lines: Generator<unknown> | undefined;
  private next: RecordedFile | undefined;
  /** When the file was written (its modification time), for the records taken "at 0". */
  private written = 0;

  constructor(file: string, root: string) {
    try {
      this.written = statSync(file).mtimeMs;
      const lines = readLines(file);
      const header = lines.next().value as StateHeader | undefined;
      if (header?.version !== VERSION || header.root !== root) {
        lines.return(undefined);
        return;
      }
      this.lines = lines;
      this.advance();
    } catch {
      this.stop();
    }
  }

  private advance(): void {
    try {
      const line = this.lines?.next();
      if (line === undefined || line.done || !isRecord(line.value)) this.stop();
      else this.next = line.value;
    } catch {
      this.stop();
    }
  }

  private stop(): void {
    this.lines?.return(undefined);
    this.lines = undefined;
    this.next = undefined;
  }

  /**
   * The MD5 recorded for the file at `path` when nothing about it changed since: same size, same
   * modification and change times and inode, and modified at least its racy margin before the
   * record (racyMarginOf: 2 s on a file system of whole seconds, 100 ms on one of nanoseconds).
   */
  md5Of(path: string, entry: TreeEntry): string | undefined {
    while (this.next !== undefined && comparePaths(this.next[0], path) < 0) this.advance();
    const known = this.next;
    if (known === undefined || known[0] !== path) return undefined;
    this.advance();
    if (entry.kind !== "file" || known[1] !== entry.size || known[2] !== entry.stamp) return undefined;
    const at = known[4] === 0 ? this.written : known[4];
    if ((entry.mtimeMs ?? Number.POSITIVE_INFINITY) > at - racyMarginOf(entry.stamp)) return undefined;
    return known[3];
  }

  close(): void {
    this.stop();
  }
}

/**
 * The next state, written as a run goes: records must come in path order. Written to a temporary
 * file and renamed by `commit`; anything that fails only costs speed (the next run hashes).
 */
export class StateWriter {
  private readonly tmp: string;
  private out: LineWriter | undefined;

  constructor(
    private readonly file: string,
    root: string,
  ) {
    this.tmp = `${file}.${randomUUID()}.tmp`;
    try {
      mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
      this.out = new LineWriter(this.tmp);
      this.out.write({ version: VERSION, root } satisfies StateHeader);
    } catch {
      this.abandon();
    }
  }

  /**
   * A local file whose MD5 is known, `at` the moment its stamp was read (before its MD5 was), or
   * 0: the moment this state is written (a file this run wrote and stamped itself). Nothing is
   * recorded for a path with no local file (`entry` undefined) or a file whose MD5 is not known.
   */
  record(path: string, entry: TreeEntry | undefined, at: number): void {
    if (this.out === undefined || entry?.kind !== "file" || !entry.md5 || entry.stamp === undefined) return;
    try {
      this.out.write([path, entry.size ?? 0, entry.stamp, entry.md5, at] satisfies RecordedFile);
    } catch {
      this.abandon();
    }
  }

  commit(): void {
    if (this.out === undefined) return;
    try {
      this.out.close();
      this.out = undefined;
      renameSync(this.tmp, this.file);
    } catch {
      this.abandon();
    }
  }

  abandon(): void {
    try {
      this.out?.discard();
    } catch {
      // closing is all that was left
    }
    this.out = undefined;
    rmSync(this.tmp, { force: true });
  }
}

/** The stamp of a file's lstat (bigint): what must not change for its recorded MD5 to hold. */
export function stampOf(st: { mtimeNs: bigint; ctimeNs: bigint; ino: bigint }): string {
  return `${st.mtimeNs}:${st.ctimeNs}:${st.ino}`;
}
