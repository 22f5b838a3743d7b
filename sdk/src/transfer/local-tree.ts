// The local side of a push or pull: a file's entry (size and stamp), and files hashed as they
// stream (memory does not grow with a file's size). The directory walk is path-order.ts.

import { createHash } from "node:crypto";
import { type BigIntStats, createReadStream, readFileSync } from "node:fs";
import { lstat } from "node:fs/promises";
import { pipeline } from "node:stream/promises";
import { WHOLE_FILE_BYTES } from "../rest/in-flight.js";
import { stampOf } from "./local-state.js";
import type { TreeEntry } from "./plan.js";

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
