// The local side of a push or pull: a directory read as a Tree without following symbolic
// links, and files hashed as they stream (memory does not grow with a file's size).

import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, readdir } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { stampOf } from "./local-state.js";
import type { Tree, TreeEntry } from "./plan.js";

/** Base64 MD5 of a file, as the listing's `md5` attribute and Content-MD5 write it. */
export async function md5File(file: string, signal?: AbortSignal): Promise<string> {
  const hash = createHash("md5");
  await pipeline(createReadStream(file), hash, { signal });
  return hash.digest("base64");
}

/** A local file as a tree entry: its size and the stamp that says whether it changed. */
export async function fileEntry(file: string): Promise<TreeEntry> {
  const st = await lstat(file, { bigint: true });
  return { kind: "file", size: Number(st.size), stamp: stampOf(st), mtimeMs: Number(st.mtimeNs / 1_000_000n) };
}

/**
 * Everything below `root` by relative "/"-separated path. Symbolic links (and sockets, FIFOs,
 * devices) are entries of kind "other": they are never followed, so nothing outside `root` is read.
 */
export async function readLocalTree(root: string): Promise<Tree> {
  const tree: Tree = new Map();
  const walk = async (dir: string, prefix: string): Promise<void> => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const rel = prefix === "" ? e.name : `${prefix}/${e.name}`;
      const full = join(dir, e.name);
      if (e.isDirectory()) {
        tree.set(rel, { kind: "directory" });
        await walk(full, rel);
      } else if (e.isFile()) {
        tree.set(rel, await fileEntry(full));
      } else {
        tree.set(rel, { kind: "other" });
      }
    }
  };
  await walk(root, "");
  return tree;
}
