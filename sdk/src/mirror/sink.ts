// Where a mirror puts what it copies: a local directory (DirectorySink) or
// anything that implements MirrorSink.

import type { MirrorDatabase } from "./state-database.js";

/**
 * What a mirror remembers between runs: its cursor and the tag of everything it holds. For a
 * directory it is also the marker that makes the directory this mirror's own.
 */
export interface MirrorState {
  version: 1;
  store: string;
  /** The mirrored subtree ("" for the whole store). */
  path: string;
  /** The server's base URL: a cursor of another server is not resumed. */
  url?: string;
  /** The last event applied: a restarted mirror continues after it. */
  eventId: number;
  /** Relative path ("" for the mirrored directory itself) -> its tag, and whether it is a directory. */
  entries: Record<string, { tag: string; directory: boolean }>;
}

/**
 * A sink keeps the mirror's state either as one record (`loadState` and `saveState`: the whole
 * state, every entry's tag, read at the start and written after each batch) or in a database
 * (`openStateDatabase`: one entry read or written at a time, so that memory does not grow with
 * the tree). DirectorySink does the latter.
 */
export interface MirrorSink {
  /** Prepares the sink (e.g. creates the directory, drops temporary leftovers). */
  open?(): Promise<void>;
  loadState?(): Promise<MirrorState | undefined>;
  saveState?(state: MirrorState): Promise<void>;
  /**
   * The state as a database, instead of loadState/saveState. With `dryRun`, nothing the mirror
   * writes to it may last (nor may it be created): a copy, or one in memory.
   */
  openStateDatabase?(options: { dryRun: boolean }): Promise<MirrorDatabase>;
  /** Replaces the file at `path` (relative, "/"-separated) with `body`, atomically. Parents may be missing. */
  writeFile(path: string, body: ReadableStream<Uint8Array>, info: { tag: string; type: string }): Promise<void>;
  /**
   * Optional: as `writeFile`, for a body already in memory (files of up to 256 KiB, most of a
   * store's); without it, those are given to `writeFile` as a stream too.
   */
  writeBytes?(path: string, body: Uint8Array, info: { tag: string; type: string }): Promise<void>;
  /** Creates the directory at `path` and its parents; a file of that name is replaced. */
  makeDirectory(path: string): Promise<void>;
  /** Removes the file or directory (with its contents) at `path`; "" empties the mirror. Absent is fine. */
  remove(path: string): Promise<void>;
  /**
   * What the sink holds (path -> is a directory), so that a full resync finds strays and gaps,
   * and so that a mirror refuses a sink that holds something but is not its own. Called before
   * `open`: a sink that does not exist yet holds nothing.
   */
  listPaths?(): Promise<Map<string, boolean>>;
  /** As `listPaths` (and preferred to it), one entry at a time, in any order: nothing held for the tree. */
  eachPath?(): AsyncIterable<[path: string, directory: boolean]>;
  /** Called once the mirror stops (after `open`; not in a dry run): e.g. drops temporary files. */
  close?(): Promise<void>;
  /** Where the state is kept, for messages. */
  readonly stateLocation?: string;
}
