// The tree of the batch suites (pull-batch, push-batch; docs/cli.md, "Small files by batches"):
// 250 small files in two folders, three batches of at most 100, and one file over 256 KiB that
// goes by a request of its own.

import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";

/** One file over the 256 KiB a batch takes. */
export const LARGE = Buffer.alloc(300 * 1024, "large ");

/** The small files' paths, in path order: a/f000.txt … a/f124.txt, b/f125.txt … b/f249.txt. */
export const SMALL = Array.from({ length: 250 }, (_, i) => `${i < 125 ? "a" : "b"}/f${String(i).padStart(3, "0")}.txt`);

/** A small file's contents. */
export const contentsOf = (path: string) => `contents of ${path}\n`;

/** Every byte of the tree. */
export const TREE_BYTES = LARGE.length + SMALL.reduce((n, f) => n + contentsOf(f).length, 0);

/** Writes the tree into `dir`. */
export async function makeBatchTree(dir: string): Promise<void> {
  for (const d of ["a", "b"]) await mkdir(join(dir, d), { recursive: true });
  for (const f of SMALL) await writeFile(join(dir, f), contentsOf(f));
  await writeFile(join(dir, "large.bin"), LARGE);
}
