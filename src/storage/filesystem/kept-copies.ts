// The kept copies of a filesystem store (docs/history.md, "Filesystem stores"): with keep-versions
// above 0, the bytes of each state Trove records in the folder are kept in a history area (SQLite:
// `<data directory>/history/<store>/`; MongoDB: `<filesystem-temp>/trove-history/`, shared by the
// instances as filesystem-temp is), one file per contents, named by their MD5
// and size, so that a state the folder no longer holds (replaced through Trove, or overwritten or
// removed outside it) can still be read and restored. Unchanged bytes are never copied twice. A
// copy's modification time is the last time a state with those bytes was recorded, reused or
// ended: the purge removes the copies that no live file has and that no state needed for
// keep-versions.

import { randomUUID } from "node:crypto";
import { constants } from "node:fs";
import { copyFile, link, lstat, open, readdir, rename, rm, unlink, utimes } from "node:fs/promises";
import { join } from "node:path";
import { InsufficientStorageError } from "../../domain/errors.js";
import { isDiskFull } from "../local/blob-files.js";
import { makeDirectory } from "../local/make-directory.js";
import { lstatOf, openChecked, syncDirectory, versionOf } from "./folder.js";

/** The name of the history area in a filesystem store's filesystem-temp, where Trove has no data directory. */
export const HISTORY_DIR = "trove-history";

/** A copy being made (a crash leaves one behind; the sweep removes it an hour later). */
const PART = /^part-[0-9a-f-]{36}$/;
const COPY = /^[0-9a-f]{32}-\d+$/;
const PART_AGE = 3_600_000;

/** The contents of a state as the index records them. */
export interface Contents {
  md5: string;
  size: number;
}

/** A state of a file of the folder: its contents and its version (inode, size, mtime). */
export interface RecordedFile extends Contents {
  blob: string;
}

export class KeptCopies {
  readonly dir: string;

  constructor(dir: string) {
    this.dir = dir;
  }

  /** The file of a copy: the MD5 (hex) and the size of the contents. */
  fileOf(contents: Contents): string {
    return join(this.dir, `${Buffer.from(contents.md5, "base64").toString("hex")}-${contents.size}`);
  }

  /** Streams the kept bytes of a state; undefined when Trove kept none. */
  open(contents: Contents): Promise<AsyncIterable<Uint8Array> | undefined> {
    return openChecked(this.fileOf(contents), (st) => st.size === BigInt(contents.size));
  }

  /** Marks the copy of these contents as needed from now on (a state with them recorded, reused or ended); whether there is one. */
  async touch(contents: Contents, now: number): Promise<boolean> {
    const at = new Date(now);
    try {
      await utimes(this.fileOf(contents), at, at);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Copies a file that holds (or is about to hold) a recorded state: a reflink where the file
   * system makes one, else the bytes. `version`: the file's version, checked after the copy (the
   * file may be written meanwhile: then nothing is kept, and false returned); omitted for an
   * upload of Trove's own, which nobody else writes.
   */
  async copy(file: string, contents: Contents, now: number, version?: string): Promise<boolean> {
    if (await this.touch(contents, now)) return true;
    const made = await this.viaPart(async (part) => {
      await copyFile(file, part, constants.COPYFILE_FICLONE);
      const after = await lstatOf(file);
      const copied = await lstat(part, { bigint: true });
      const whole = copied.size === BigInt(contents.size);
      return whole && (version === undefined || (after !== undefined && versionOf(after) === version));
    }, contents);
    return made !== undefined;
  }

  /**
   * Before Trove replaces or removes a file of the folder: makes sure the bytes of the state the
   * index records for it are kept. Already kept: marked as needed. Else the file is hard-linked
   * (copied across file systems) under its name, after checking that the link is that very state
   * (an unrecorded edit is not kept under another state's name). Returns the copy it linked, which
   * shares the folder file's inode until the file leaves the folder: `undo` it if the file stays.
   */
  async keep(file: string, state: RecordedFile, now: number): Promise<string | undefined> {
    if (await this.touch(state, now)) return undefined;
    let linked = false;
    const made = await this.viaPart(async (part) => {
      await link(file, part).catch(async (err: NodeJS.ErrnoException) => {
        if (err.code !== "EXDEV" && err.code !== "EPERM") throw err;
        await copyFile(file, part, constants.COPYFILE_FICLONE);
      });
      const st = await lstat(part, { bigint: true });
      linked = st.nlink > 1n;
      // A copy has its own inode and mtime: it is the state when the file still is.
      const current = linked ? versionOf(st) : versionOf((await lstatOf(file)) ?? st);
      return current === state.blob && st.size === BigInt(state.size);
    }, state);
    return linked && typeof made === "string" ? made : undefined;
  }

  /**
   * Makes a copy in a new `part-<uuid>` file (`make` says whether it holds the contents), then
   * names it durably. Returns the copy's file when this call placed it, true when a copy of the
   * contents was there already, undefined when the source was not the contents (or is gone).
   */
  private async viaPart(
    make: (part: string) => Promise<boolean>,
    contents: Contents,
  ): Promise<string | true | undefined> {
    await makeDirectory(this.dir);
    const part = join(this.dir, `part-${randomUUID()}`);
    try {
      if (!(await make(part))) {
        await unlink(part);
        return undefined;
      }
      const handle = await open(part, "r");
      await handle.sync().finally(() => handle.close());
      const name = this.fileOf(contents);
      if (await lstatOf(name)) {
        await unlink(part);
        return true;
      }
      await rename(part, name);
      await syncDirectory(this.dir);
      return name;
    } catch (err) {
      await unlink(part).catch(() => {});
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw isDiskFull(err) ? new InsufficientStorageError() : err;
    }
  }

  /** After the file left the folder: the linked copy is needed from now on (its mtime was the file's). */
  async kept(copy: string | undefined, now: number): Promise<void> {
    if (copy === undefined) return;
    const at = new Date(now);
    await utimes(copy, at, at).catch(() => {});
  }

  /** The file a copy was linked from stays in the folder (its replacement failed): the link goes, an edit in place would change it. */
  async undo(copy: string | undefined): Promise<void> {
    if (copy !== undefined) await unlink(copy).catch(() => {});
  }

  /**
   * Removes the copies that no live file has (`live`: fileOf of each) and that were last needed
   * at or before `cutoff`, each checked again under `lock` (a write may have just reused it), and
   * the parts a crash left for over an hour. Returns how many copies went.
   */
  async sweep(
    live: ReadonlySet<string>,
    cutoff: number,
    lock: <T>(task: () => Promise<T>) => Promise<T>,
  ): Promise<number> {
    let removed = 0;
    for (const name of await readdir(this.dir).catch(() => [] as string[])) {
      const file = join(this.dir, name);
      if (PART.test(name)) {
        const st = await lstatOf(file);
        if (st && Number(st.mtimeMs) < Date.now() - PART_AGE) await unlink(file).catch(() => {});
        continue;
      }
      if (!COPY.test(name) || live.has(file)) continue;
      const gone = await lock(async () => {
        const st = await lstatOf(file);
        if (!st || Number(st.mtimeMs) > cutoff) return false;
        await unlink(file);
        return true;
      }).catch(() => false);
      if (gone) removed++;
    }
    return removed;
  }

  /** Removes every copy (history turned off, the store deleted). */
  async clear(): Promise<void> {
    await rm(this.dir, { recursive: true, force: true });
  }
}
