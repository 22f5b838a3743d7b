// The bodies the benchmarks send and expect, the same for Trove and the baseline.

import { createHash } from "node:crypto";

/** 4 KiB, the size of a typical design resource; deterministic so every run sends the same. */
export const BODY_4K = Buffer.alloc(4096, "trove benchmark resource body, 4 KiB of it. ");
export const ETAG_4K = '"baseline-4k"';

/**
 * `size` bytes in chunks of `chunkSize`, each different (a counter in its first bytes), made as
 * they are read so the whole never sits in memory; `md5()` is complete once drained.
 */
export function generatedBody(size, chunkSize = 256 * 1024) {
  const hash = createHash("md5");
  const block = Buffer.alloc(chunkSize);
  for (let i = 0; i < chunkSize; i++) block[i] = (i * 2654435761) >>> 24;
  async function* chunks() {
    for (let sent = 0, n = 0; sent < size; n++) {
      const chunk = Buffer.from(block.subarray(0, Math.min(chunkSize, size - sent)));
      if (chunk.length >= 4) chunk.writeUInt32BE(n, 0);
      hash.update(chunk);
      sent += chunk.length;
      yield chunk;
    }
  }
  return { chunks: chunks(), md5: () => hash.digest("base64") };
}
