// What a push or pull remembers of the local side between runs, so that a run whose local side
// did not change reads no file contents: each file's size, modification and change times (ns),
// inode and MD5. Kept in the user's cache directory (`$XDG_CACHE_HOME/trove/transfers/`, by
// default `~/.cache/trove/transfers/`), one file per local directory named by the SHA-256 of its
// absolute path: never in DIR (never pushed, never deleted by a pull) and never beside it (a push
// writes nothing in the tree it reads). Written to a temporary file and renamed. The server side
// is not remembered: every run lists it and compares MD5s, so a same-size edit there is always seen.

import { createHash, randomUUID } from "node:crypto";
import { mkdir, open, readFile, rename, rm } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import type { Tree } from "./plan.js";

/**
 * A file whose modification time is this close to (or after) the moment its MD5 was recorded is
 * hashed again: an edit in the same clock tick as the record would leave every stamp unchanged
 * (git's "racily clean" files).
 */
export const RACY_MS = 2_000;

const VERSION = 1;

interface RecordedFile {
  size: number;
  /** `{mtimeNs}:{ctimeNs}:{ino}` */
  stamp: string;
  md5: string;
}

interface StateFile {
  version: number;
  /** The local directory's absolute path (a file of another is not trusted). */
  root: string;
  /** When the MD5s were recorded (ms since the epoch). */
  recordedAt: number;
  files: Record<string, RecordedFile>;
}

/** Where states are kept unless a transfer names another directory. */
export function defaultStateDirectory(env: NodeJS.ProcessEnv = process.env): string {
  return join(env.XDG_CACHE_HOME || join(homedir(), ".cache"), "trove", "transfers");
}

/** The state file of the local directory `root` (absolute) in `directory`. */
export function stateFileOf(root: string, directory = defaultStateDirectory()): string {
  return join(directory, `${createHash("sha256").update(root).digest("hex").slice(0, 32)}.json`);
}

/**
 * Gives each local file the MD5 recorded for it when nothing about it changed since: same size,
 * same modification and change times and inode, and modified at least RACY_MS before the record.
 * A missing or unreadable state file trusts nothing.
 */
export async function applyLocalState(file: string, root: string, local: Tree): Promise<void> {
  let state: StateFile;
  try {
    state = JSON.parse(await readFile(file, "utf8")) as StateFile;
  } catch {
    return;
  }
  if (state?.version !== VERSION || state.root !== root) return;
  if (typeof state.files !== "object" || typeof state.recordedAt !== "number") return;
  for (const [path, entry] of local) {
    const known = Object.hasOwn(state.files, path) ? state.files[path] : undefined;
    if (entry.kind !== "file" || known === undefined || entry.stamp === undefined) continue;
    if (known.size !== entry.size || known.stamp !== entry.stamp || typeof known.md5 !== "string") continue;
    if ((entry.mtimeMs ?? Number.POSITIVE_INFINITY) > state.recordedAt - RACY_MS) continue;
    entry.md5 = known.md5;
  }
}

/**
 * Records the local files whose MD5 is known. `recordedAt` must be taken before the stamps were
 * read, so that an edit made meanwhile counts as racy.
 */
export async function saveLocalState(file: string, root: string, local: Tree, recordedAt: number): Promise<void> {
  const tmp = `${file}.${randomUUID()}.tmp`;
  try {
    await mkdir(dirname(file), { recursive: true, mode: 0o700 });
    const out = await open(tmp, "wx", 0o600);
    try {
      // The StateFile as JSON.stringify writes it, in pieces of about 64 KiB: the whole text (and
      // an object of every file before it) was the peak of a pull of 100,000 files (issue 31).
      let text = `{"version":${VERSION},"root":${JSON.stringify(root)},"recordedAt":${recordedAt},"files":{`;
      let first = true;
      for (const [path, entry] of local) {
        if (entry.kind !== "file" || entry.md5 === undefined || entry.md5 === "" || entry.stamp === undefined) continue;
        const recorded: RecordedFile = { size: entry.size ?? 0, stamp: entry.stamp, md5: entry.md5 };
        text += `${first ? "" : ","}${JSON.stringify(path)}:${JSON.stringify(recorded)}`;
        first = false;
        if (text.length >= 64 * 1024) {
          await out.write(text);
          text = "";
        }
      }
      await out.write(`${text}}}`);
    } finally {
      await out.close();
    }
    await rename(tmp, file);
  } catch {
    // Only speed is lost: the next run hashes what it needs.
    await rm(tmp, { force: true });
  }
}

/** The stamp of a file's lstat (bigint): what must not change for its recorded MD5 to hold. */
export function stampOf(st: { mtimeNs: bigint; ctimeNs: bigint; ino: bigint }): string {
  return `${st.mtimeNs}:${st.ctimeNs}:${st.ino}`;
}
