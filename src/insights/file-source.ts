// A ResourceSource over a directory of the local file system: the environment is the
// directory, its files are the resources. Used by the golden test, the benchmark and tools
// that report on a checkout (examples/acme-letters/production).

import { open, opendir, stat } from "node:fs/promises";
import { join } from "node:path";
import type { ResourceSource, SourceResource } from "./resource-source.js";

export interface FileSourceOptions {
  /** The last promotion of a resource, by its environment path ("/templates/a.template"). */
  promotion?: (path: string) => SourceResource["promotion"];
}

const MAX_CHUNK = 1024 * 1024;
const STAT_BATCH = 64;

/**
 * The file in chunks of at most 1 MiB, each in its own buffer; a design resource of a few KiB
 * is one read. (Cheaper than a read stream for many small files.)
 */
async function* readChunks(file: string, expected: number): AsyncGenerator<Uint8Array> {
  const handle = await open(file, "r");
  try {
    // One byte more than expected, so that a file of the expected size ends with a short read.
    const size = Math.min(Math.max(expected + 1, 16 * 1024), MAX_CHUNK);
    for (;;) {
      const buffer = Buffer.allocUnsafe(size);
      const { bytesRead } = await handle.read(buffer, 0, size, null);
      if (bytesRead > 0) yield bytesRead === size ? buffer : buffer.subarray(0, bytesRead);
      // A short read of a regular file is its end: no extra read to learn it.
      if (bytesRead < size) return;
    }
  } finally {
    await handle.close();
  }
}

export function fileSource(dir: string, options: FileSourceOptions = {}): ResourceSource {
  async function* walk(absolute: string, relative: string): AsyncGenerator<SourceResource> {
    // Sorted, so that a listing is the same on every file system.
    const names: { name: string; directory: boolean }[] = [];
    for await (const entry of await opendir(absolute)) {
      if (entry.isDirectory() || entry.isFile()) names.push({ name: entry.name, directory: entry.isDirectory() });
    }
    names.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    // Metadata of a directory's files is read a batch at a time, concurrently (contents never are).
    for (let start = 0; start < names.length; start += STAT_BATCH) {
      const batch = names.slice(start, start + STAT_BATCH);
      const infos = await Promise.all(batch.map((n) => (n.directory ? undefined : stat(join(absolute, n.name)))));
      for (const [i, { name, directory }] of batch.entries()) {
        const file = join(absolute, name);
        const path = `${relative}/${name}`;
        const info = infos[i];
        if (directory || info === undefined) {
          yield* walk(file, path);
          continue;
        }
        yield {
          path,
          size: info.size,
          // Not every file system records a birth time.
          created: info.birthtimeMs > 0 ? info.birthtimeMs : info.mtimeMs,
          lastModified: info.mtimeMs,
          open: () => readChunks(file, info.size),
          promotion: options.promotion?.(path),
        };
      }
    }
  }
  return { list: () => walk(dir, "") };
}
