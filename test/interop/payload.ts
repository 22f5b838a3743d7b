// Deterministic contents for the interop tests, and their MD5 as the faces report it.

import { createHash } from "node:crypto";

/** `size` bytes that differ from one position to the next, so a misplaced chunk changes the MD5. */
export function payload(size: number, seed = 1): Buffer {
  const bytes = Buffer.alloc(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    bytes[i] = x & 0xff;
  }
  return bytes;
}

export function md5Base64(bytes: Uint8Array): string {
  return createHash("md5").update(bytes).digest("base64");
}

/** Splits contents into chunks of at most `size` bytes, as a client streams them. */
export function chunksOf(bytes: Buffer, size: number): Buffer[] {
  const out: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) out.push(bytes.subarray(at, at + size));
  return out;
}
