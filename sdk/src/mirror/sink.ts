// Where a mirror puts what it copies: a local directory (DirectorySink) or
// anything that implements MirrorSink.

/** What a mirror remembers between runs: its cursor and the tag of everything it holds. */
export interface MirrorState {
  version: 1;
  store: string;
  /** The mirrored subtree ("" for the whole store). */
  path: string;
  /** The last event applied: a restarted mirror continues after it. */
  eventId: number;
  /** Relative path ("" for the mirrored directory itself) -> its tag, and whether it is a directory. */
  entries: Record<string, { tag: string; directory: boolean }>;
}

export interface MirrorSink {
  /** Prepares the sink (e.g. creates the directory, drops temporary leftovers). */
  open?(): Promise<void>;
  loadState(): Promise<MirrorState | undefined>;
  saveState(state: MirrorState): Promise<void>;
  /** Replaces the file at `path` (relative, "/"-separated) with `body`, atomically. Parents may be missing. */
  writeFile(path: string, body: ReadableStream<Uint8Array>, info: { tag: string; type: string }): Promise<void>;
  /** Creates the directory at `path` and its parents; a file of that name is replaced. */
  makeDirectory(path: string): Promise<void>;
  /** Removes the file or directory (with its contents) at `path`; "" empties the mirror. Absent is fine. */
  remove(path: string): Promise<void>;
  /** What the sink holds (path -> is a directory), so that a full resync finds strays and gaps. */
  listPaths?(): Promise<Map<string, boolean>>;
}
