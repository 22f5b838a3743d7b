// The default mirror sink: a local directory, each file written to a temporary
// file beside it and renamed into place, and the mirror's state (cursor and the
// tags it holds) in an SQLite database next to the directory, the marker
// (state-database.ts). The JSON marker of earlier versions is taken over.

import { randomUUID } from "node:crypto";
import { copyFileSync, createWriteStream, existsSync, mkdtempSync } from "node:fs";
import { mkdir, open, readdir, readFile, rename, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { replaceFileSync } from "../transfer/replace-file.js";
import type { MirrorSink, MirrorState } from "./sink.js";
import { MirrorDatabase } from "./state-database.js";

export interface DirectorySinkOptions {
  /** The directory kept equal to the store or subtree. It is created if missing. */
  target: string;
  /**
   * Where the state (the marker, an SQLite database) is kept; default `.{name}.trove-mirror.db`
   * beside the target. A file here holding the JSON marker of earlier versions is converted.
   */
  stateFile?: string;
}

/** Whether a relative store path ("a/b.txt") stays below the directory it is joined to. */
export function isSafeRelativePath(path: string): boolean {
  return path.split("/").every((s) => s !== "" && s !== "." && s !== ".." && !s.includes("\\") && !s.includes("\0"));
}

/** A relative store path as a path under `root`; refuses what could leave it. */
export function under(root: string, path: string): string {
  if (path === "") return root;
  if (!isSafeRelativePath(path)) throw new Error(`refusing to write the unsafe path ${JSON.stringify(path)}`);
  return join(root, ...path.split("/"));
}

export class DirectorySink implements MirrorSink {
  readonly root: string;
  readonly stateFile: string;
  /** The JSON marker of earlier versions, taken over once: `.{name}.trove-mirror.json` beside the target. */
  readonly legacyStateFile: string;
  /** Temporary files live here, on the same file system as the target, so rename is atomic. */
  readonly tempDir: string;

  constructor(options: DirectorySinkOptions) {
    this.root = resolve(options.target);
    const parent = dirname(this.root);
    const name = basename(this.root);
    this.stateFile = resolve(options.stateFile ?? join(parent, `.${name}.trove-mirror.db`));
    this.legacyStateFile =
      options.stateFile === undefined ? join(parent, `.${name}.trove-mirror.json`) : this.stateFile;
    this.tempDir = join(parent, `.${name}.trove-tmp`);
  }

  get stateLocation(): string {
    return this.stateFile;
  }

  /** The mirror's own files when they are inside the target (a cursor file chosen there): never content. */
  private own(full: string): boolean {
    const state = this.stateFile;
    return (
      full === state ||
      full === `${state}-wal` ||
      full === `${state}-shm` ||
      full === `${state}-journal` ||
      full === `${state}.new` ||
      full === `${state}.new-wal` ||
      full === `${state}.new-shm` ||
      full === this.legacyStateFile ||
      full === this.tempDir ||
      full.startsWith(`${this.tempDir}/`)
    );
  }

  /** The JSON marker of earlier versions, if there is one (an unreadable one is none). */
  private async legacyState(): Promise<MirrorState | undefined> {
    let text: string;
    try {
      const file = await open(this.legacyStateFile, "r");
      try {
        // A database begins "SQLite format 3"; the old marker is a JSON object.
        const head = Buffer.alloc(1);
        await file.read(head, 0, 1, 0);
        if (head.toString() !== "{") return undefined;
      } finally {
        await file.close();
      }
      text = await readFile(this.legacyStateFile, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    }
    try {
      const state = JSON.parse(text) as MirrorState;
      return state.version === 1 && typeof state.entries === "object" ? state : undefined;
    } catch {
      return undefined; // unreadable: as if there were none
    }
  }

  /** The database in `file`; one that is not a mirror's database is a clear error, nothing changed. */
  private openDatabase(file: string, removeOnClose?: string): MirrorDatabase {
    try {
      return MirrorDatabase.open(file, removeOnClose);
    } catch (err) {
      throw new Error(
        `the mirror's marker ${this.stateFile} is not a mirror's database (${(err as Error).message}): move it away to start the mirror over`,
      );
    }
  }

  async openStateDatabase({ dryRun }: { dryRun: boolean }): Promise<MirrorDatabase> {
    const legacy = await this.legacyState();
    if (dryRun) {
      // Nothing of a dry run may last: the database is read from a copy, removed at the end.
      if (legacy === undefined && existsSync(this.stateFile)) {
        const copy = mkdtempSync(join(tmpdir(), "trove-mirror-dry-run-"));
        const file = join(copy, "state.db");
        copyFileSync(this.stateFile, file);
        if (existsSync(`${this.stateFile}-wal`)) copyFileSync(`${this.stateFile}-wal`, `${file}-wal`);
        return this.openDatabase(file, copy);
      }
      return MirrorDatabase.fromState(legacy);
    }
    await mkdir(dirname(this.stateFile), { recursive: true });
    if (legacy !== undefined && this.legacyStateFile === this.stateFile) {
      // A cursor file of an earlier version: converted in place (a database beside it, renamed over it).
      const tmp = `${this.stateFile}.${randomUUID()}.tmp`;
      const converted = MirrorDatabase.open(tmp);
      converted.importState(legacy);
      converted.close();
      await rename(tmp, this.stateFile);
      return this.openDatabase(this.stateFile);
    }
    if (legacy === undefined && !existsSync(this.stateFile)) {
      // Created under another name, renamed by its first commit: a refused mirror leaves nothing.
      const fresh = `${this.stateFile}.new`;
      for (const suffix of ["", "-wal", "-shm"]) await rm(`${fresh}${suffix}`, { force: true });
      return MirrorDatabase.create(fresh, this.stateFile);
    }
    const db = this.openDatabase(this.stateFile);
    if (legacy !== undefined && db.identity() === undefined) {
      db.importState(legacy);
      // Committed: the old marker goes.
      await rm(this.legacyStateFile, { force: true });
    }
    return db;
  }

  async writeFile(path: string, body: ReadableStream<Uint8Array>): Promise<void> {
    const dest = under(this.root, path);
    await mkdir(this.tempDir, { recursive: true });
    const tmp = join(this.tempDir, randomUUID());
    try {
      await pipeline(Readable.fromWeb(body as import("node:stream/web").ReadableStream), createWriteStream(tmp));
      await mkdir(dirname(dest), { recursive: true });
      const existing = await stat(dest).catch(() => undefined);
      if (existing?.isDirectory()) await rm(dest, { recursive: true, force: true });
      await rename(tmp, dest);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  async writeBytes(path: string, body: Uint8Array): Promise<void> {
    const dest = under(this.root, path);
    // Created once by open() or an earlier write; the open of the temporary file tells if it is gone.
    const tmp = join(this.tempDir, randomUUID());
    try {
      replaceFileSync(tmp, dest, body, { makeParents: true, replaceDirectory: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "ENOENT" || (err as NodeJS.ErrnoException).path !== tmp) throw err;
      await mkdir(this.tempDir, { recursive: true });
      replaceFileSync(tmp, dest, body, { makeParents: true, replaceDirectory: true });
    }
  }

  async makeDirectory(path: string): Promise<void> {
    const dest = under(this.root, path);
    const existing = await stat(dest).catch(() => undefined);
    if (existing && !existing.isDirectory()) await rm(dest, { force: true });
    await mkdir(dest, { recursive: true });
  }

  async remove(path: string): Promise<void> {
    if (path === "") {
      for (const entry of await readdir(this.root).catch(() => [])) {
        if (!this.own(join(this.root, entry))) await rm(join(this.root, entry), { recursive: true, force: true });
      }
      return;
    }
    await rm(under(this.root, path), { recursive: true, force: true });
  }

  /** Everything in the directory, one entry at a time (one directory's names held at once). */
  async *eachPath(): AsyncGenerator<[string, boolean]> {
    const self = this;
    async function* walk(dir: string, prefix: string): AsyncGenerator<[string, boolean]> {
      const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
      for (const e of entries) {
        if (self.own(join(dir, e.name))) continue;
        const rel = prefix === "" ? e.name : `${prefix}/${e.name}`;
        yield [rel, e.isDirectory()];
        if (e.isDirectory()) yield* walk(join(dir, e.name), rel);
      }
    }
    yield* walk(this.root, "");
  }

  async close(): Promise<void> {
    // Every write has been renamed into place by now: what is left is an empty directory.
    await rm(this.tempDir, { recursive: true, force: true });
  }

  async open(): Promise<void> {
    await mkdir(this.root, { recursive: true });
    // Leftovers of a mirror that stopped in the middle of a write.
    await rm(this.tempDir, { recursive: true, force: true });
  }
}
