// The default mirror sink: a local directory, each file written to a temporary
// file beside it and renamed into place, and the mirror's state (cursor and the
// tags it holds) in a JSON marker file next to the directory, also written to a
// temporary file and renamed.

import { randomUUID } from "node:crypto";
import { createWriteStream } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { replaceFileSync } from "../transfer/replace-file.js";
import type { MirrorSink, MirrorState } from "./sink.js";

export interface DirectorySinkOptions {
  /** The directory kept equal to the store or subtree. It is created if missing. */
  target: string;
  /** Where the state (the marker) is kept; default `.{name}.trove-mirror.json` beside the target. */
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
  /** Temporary files live here, on the same file system as the target, so rename is atomic. */
  readonly tempDir: string;

  constructor(options: DirectorySinkOptions) {
    this.root = resolve(options.target);
    const parent = dirname(this.root);
    const name = basename(this.root);
    this.stateFile = resolve(options.stateFile ?? join(parent, `.${name}.trove-mirror.json`));
    this.tempDir = join(parent, `.${name}.trove-tmp`);
  }

  get stateLocation(): string {
    return this.stateFile;
  }

  /** The mirror's own files when they are inside the target (a cursor file chosen there): never content. */
  private own(full: string): boolean {
    return full === this.stateFile || full === this.tempDir || full.startsWith(`${this.tempDir}/`);
  }

  async loadState(): Promise<MirrorState | undefined> {
    let text: string;
    try {
      text = await readFile(this.stateFile, "utf8");
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw err;
    }
    try {
      const state = JSON.parse(text) as MirrorState;
      return state.version === 1 ? state : undefined;
    } catch {
      return undefined; // unreadable: start over with a full copy
    }
  }

  async saveState(state: MirrorState): Promise<void> {
    await mkdir(this.tempDir, { recursive: true });
    const tmp = join(this.tempDir, `state-${randomUUID()}`);
    await writeFile(tmp, JSON.stringify(state));
    await mkdir(dirname(this.stateFile), { recursive: true });
    await rename(tmp, this.stateFile);
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

  async listPaths(): Promise<Map<string, boolean>> {
    const out = new Map<string, boolean>();
    const walk = async (dir: string, prefix: string): Promise<void> => {
      const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
      for (const e of entries) {
        if (this.own(join(dir, e.name))) continue;
        const rel = prefix === "" ? e.name : `${prefix}/${e.name}`;
        out.set(rel, e.isDirectory());
        if (e.isDirectory()) await walk(join(dir, e.name), rel);
      }
    };
    await walk(this.root, "");
    return out;
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
