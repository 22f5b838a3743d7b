// The contents of resources on the embedded backend: small ones inline in their row, larger ones
// as blob files. Reading them, and removing the files of contents nothing refers to any more.

import type { BlobFiles } from "../local/blob-files.js";
import type { SpaceReserve } from "../local/space-reserve.js";
import type { BlobInfo, NodeRecord, StorageLogger, WriteBlobOptions } from "../port.js";
import type { Replaced } from "./rows.js";
import type { Statements } from "./schema.js";

export class SqliteContents {
  constructor(
    private readonly stmt: Statements,
    private readonly blobs: BlobFiles,
    private readonly reserve: SpaceReserve,
    private readonly logger: StorageLogger,
  ) {}

  write(source: AsyncIterable<Uint8Array>, options: WriteBlobOptions): Promise<BlobInfo> {
    return this.blobs.write(source, options);
  }

  async *read(node: NodeRecord): AsyncIterable<Uint8Array> {
    if (node.inline) {
      yield node.inline;
      return;
    }
    if (node.size === 0) return;
    // Read without its contents (getStoreNode, a listing): they may be inline all the same. The
    // blob UUID names these contents: the node's, or a kept state's (listVersions, as-of); when
    // neither points at them any more, the file is gone too.
    const row =
      this.stmt.inlineOf.get(node.store, node.path, node.blob) ??
      this.stmt.versionInlineOf.get(node.store, node.path, node.blob);
    const inline = row?.[0];
    if (inline instanceof Uint8Array) {
      yield inline;
      return;
    }
    yield* this.blobs.read(node.blob, node.size);
  }

  async discard(blob: BlobInfo): Promise<void> {
    if (blob.inline) return;
    try {
      await this.blobs.remove(blob.blob);
    } catch (err) {
      this.logger.warn({ err, blob: blob.blob }, "could not remove a discarded blob; the orphan sweep will");
    }
  }

  /** Whether a node or a kept state points at a blob file. */
  inUse(blob: string): boolean {
    return this.stmt.blobInUse.get(blob, blob) !== undefined;
  }

  /** Discards a blob that putFile was given, unless a node or a version refers to it; never throws. */
  async discardUnreferenced(blob: BlobInfo): Promise<void> {
    if (blob.inline) return;
    try {
      if (this.inUse(blob.blob)) return;
    } catch (err) {
      this.logger.warn(
        { err, blob: blob.blob },
        "could not tell whether a blob is referenced; left to the orphan sweep",
      );
      return;
    }
    await this.discard(blob);
  }

  /**
   * Removes the files of contents that a committed write replaced or deleted (or the purge
   * removed the versions of), unless a node or a version still points at them. Runs after the
   * commit, so it never throws: a file it cannot remove is logged and left to the orphan sweep.
   */
  async removeReplaced(rows: readonly Replaced[]): Promise<void> {
    for (const { blob, inlined } of rows) {
      if (blob === "" || inlined) continue;
      try {
        if (!this.inUse(blob)) await this.blobs.remove(blob);
      } catch (err) {
        this.logger.warn({ err, blob }, "could not remove replaced contents; the orphan sweep will");
      }
    }
    // Space may have been freed: the moment to write the reserve again if it was used.
    this.reserve.restore();
  }
}
