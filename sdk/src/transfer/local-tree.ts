// The local side of a push or pull: a directory read as a Tree without following symbolic
// links, and files hashed as they stream (memory does not grow with a file's size).

import { createHash } from "node:crypto";
import { type BigIntStats, createReadStream, lstatSync, readdirSync, readFileSync } from "node:fs";
import { lstat } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { WHOLE_FILE_BYTES } from "../rest/in-flight.js";
import { stampOf } from "./local-state.js";
import type { Tree, TreeEntry } from "./plan.js";

/**
 * Base64 MD5 of a file, as the listing's `md5` attribute and Content-MD5 write it. A file of up
 * to WHOLE_FILE_BYTES (by `size`, when known) is read with one call; a larger one is streamed.
 */
export async function md5File(file: string, signal?: AbortSignal, size?: number): Promise<string> {
  const hash = createHash("md5");
  if (size !== undefined && size <= WHOLE_FILE_BYTES) return hash.update(readFileSync(file)).digest("base64");
  await pipeline(createReadStream(file), hash, { signal });
  return hash.digest("base64");
}

/** A local file's lstat (or fstat) as a tree entry: its size and the stamp that says whether it changed. */
export function entryOf(st: BigIntStats): TreeEntry {
  return { kind: "file", size: Number(st.size), stamp: stampOf(st), mtimeMs: Number(st.mtimeNs / 1_000_000n) };
}

/** A local file as a tree entry. */
export async function fileEntry(file: string): Promise<TreeEntry> {
  return entryOf(await lstat(file, { bigint: true }));
}

/**
 * Everything below `root` by relative "/"-separated path. Symbolic links (and sockets, FIFOs,
 * devices) are entries of kind "other": they are never followed, so nothing outside `root` is read.
 * Synchronous calls: nothing else is in flight while a transfer reads its directory, and an
 * `lstat` is cheaper than the promise around it (10,000 files: docs/benchmarks.md, session 13).
 */
export function readLocalTree(root: string): Tree {
  const tree: Tree = new Map();
  const walk = (dir: string, prefix: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const rel = prefix === "" ? e.name : `${prefix}/${e.name}`;
      const full = join(dir, e.name);
      if (e.isDirectory()) {
        tree.set(rel, { kind: "directory" });
        walk(full, rel);
      } else if (e.isFile()) {
        tree.set(rel, entryOf(lstatSync(full, { bigint: true })));
      } else {
        tree.set(rel, { kind: "other" });
      }
    }
  };
  walk(root, "");
  return tree;
}
