// Contents: received and hashed as they flow, kept inline when small (returned with the
// metadata), streamed to GridFS otherwise (the blob UUID is the GridFS _id); read back, and
// removed once nothing refers to them (a node or a version: a restore shares a version's blob).

import { createHash, randomUUID } from "node:crypto";
import type { GridFSBucket } from "mongodb";
import { MongoError } from "mongodb";
import { NotFoundError, TooLargeError, UnavailableError } from "../../domain/errors.js";
import { INLINE_MAX } from "../local/blob-files.js";
import type { BlobInfo, NodeRecord, StorageLogger, WriteBlobOptions } from "../port.js";
import { IN_GRIDFS, type MongoCollections, nodeKey, versionKey } from "./mongo-collections.js";
import { binaryBytes, domainError, guard, readGridFS, removeGridFS } from "./mongo-driver.js";

export class MongoContents {
  /** A restore runs again: the first of its blobs not stored whole may have chunks of the run cut short. */
  private leftover = false;

  constructor(
    private readonly c: MongoCollections,
    private readonly log: StorageLogger,
  ) {}

  /** A restore from the same archive runs again (RestoreStorage.beginRestore on a marked database). */
  resumeRestore(): void {
    this.leftover = true;
  }

  async writeBlob(source: AsyncIterable<Uint8Array>, options: WriteBlobOptions): Promise<BlobInfo> {
    const blob = options.blob ?? randomUUID();
    if (options.blob) {
      // A restore run again writes its blobs again: an earlier whole upload goes first (found by
      // _id; a delete by files_id alone would read every chunk on FerretDB, for every blob).
      if (await guard(() => this.c.bucket.find({ _id: blob as never }).hasNext())) {
        await guard(() => this.c.bucket.delete(blob as never));
      } else if (this.leftover) {
        // The first blob a run again finds not stored whole is where the run before stopped (the
        // archive's order is the same): its chunks may be there without their files document, and
        // go, by files_id, once per run. Every later blob was never begun.
        this.leftover = false;
        await guard(() => this.c.db.collection("blobs.chunks").deleteMany({ files_id: blob }));
      }
    }
    const hash = createHash("md5");
    let size = 0;
    let held: Buffer[] = [];
    let upload: ReturnType<GridFSBucket["openUploadStreamWithId"]> | undefined;
    const write = (chunk: Uint8Array) =>
      new Promise<void>((resolve, reject) => {
        (upload as NonNullable<typeof upload>).write(chunk, (err) => (err ? reject(err) : resolve()));
      });
    try {
      for await (const chunk of source) {
        size += chunk.byteLength;
        if (size > options.maxSize)
          throw new TooLargeError(`contents larger than the limit of ${options.maxSize} bytes`);
        hash.update(chunk);
        if (upload) {
          await write(chunk);
        } else {
          held.push(Buffer.from(chunk));
          if (size > INLINE_MAX) {
            upload = this.c.bucket.openUploadStreamWithId(blob as never, blob);
            // Failures come through write's and end's callbacks; an unheard 'error' event would
            // end the process.
            upload.on("error", () => {});
            await write(Buffer.concat(held));
            held = [];
          }
        }
      }
      const md5 = hash.digest("base64");
      if (!upload) return { blob, size, md5, inline: Buffer.concat(held) };
      const stream = upload;
      await guard(
        () =>
          new Promise<void>((resolve, reject) => {
            stream.once("error", reject);
            // end's callback is also how a failure of the last chunk or of the files document
            // is told: ignoring its error would acknowledge contents that were never stored.
            stream.end((err?: Error | null) => (err ? reject(err) : resolve()));
          }),
      );
      // The files document is written last, and recorded on the stream only once it is: the
      // proof that every chunk is there (the stream reports only the first of several errors).
      if (!stream.gridFSFile)
        throw new UnavailableError(`MongoDB unavailable: the contents of blob ${blob} were not all stored`);
      return { blob, size, md5, inline: null };
    } catch (err) {
      if (upload) await upload.abort().catch(() => {});
      if (options.blob && err instanceof MongoError && err.code === 11000) {
        // Chunks of an upload an earlier run cut short (no files document): removed now, so that
        // the next run can write them.
        await this.c.bucket.delete(blob as never).catch(() => {});
        throw new UnavailableError(
          `MongoDB: the contents of blob ${blob} were left half-written by an earlier run and are removed now: run the restore again`,
        );
      }
      throw domainError(err);
    }
  }

  async *readBlob(node: NodeRecord): AsyncIterable<Uint8Array> {
    if (node.inline) {
      yield node.inline;
      return;
    }
    if (node.size === 0) return;
    if (node.size <= INLINE_MAX && !node.directory) {
      // Read without its contents (getStoreNode): they are inline. The blob UUID names this
      // version of the contents; a node that changed since has other contents, or none.
      const doc = await this.c.nodes.findOne(
        { _id: nodeKey(node.store, node.path) },
        { projection: { inline: 1, blob: 1 } },
      );
      let inline = doc?.blob === node.blob ? binaryBytes(doc.inline) : null;
      if (!inline) {
        // An earlier state read without its contents (a listing as of an event, listVersions):
        // they are inline in its version.
        const version = await this.c.versions.findOne(
          { _id: versionKey(node.store, node.path, node.tag) },
          { projection: { inline: 1, blob: 1 } },
        );
        inline = version?.blob === node.blob ? binaryBytes(version.inline) : null;
      }
      if (!inline) throw new NotFoundError(`blob ${node.blob} not found`);
      yield inline;
      return;
    }
    yield* readGridFS(this.c.bucket, node.blob);
  }

  async discardBlob(blob: BlobInfo): Promise<void> {
    if (blob.inline) return;
    try {
      await removeGridFS(this.c.bucket, blob.blob);
    } catch (err) {
      this.log.warn(
        { blob: blob.blob, err: (err as Error).message },
        "could not remove an unused blob: the orphan sweep will",
      );
    }
  }

  /**
   * Removes, of the GridFS contents a committed write replaced or deleted, those that no node and
   * no version refers to (a restore shares a version's blob with the node it makes). As
   * removeReplaced: the write stands whatever happens here.
   */
  async removeUnreferenced(blobs: readonly string[], what: string): Promise<void> {
    const candidates = [...new Set(blobs)];
    if (candidates.length === 0) return;
    let referenced: Set<string>;
    try {
      referenced = await this.referenced(candidates);
    } catch (err) {
      this.log.warn(
        { blobs: candidates, err: (err as Error).message },
        `could not tell whether the replaced contents of ${what} are still referenced: the orphan sweep will`,
      );
      return;
    }
    await this.removeReplaced(
      candidates.filter((b) => !referenced.has(b)),
      what,
    );
  }

  /** The blob UUIDs among `ids` (GridFS contents) that a node or a version refers to. */
  async referenced(ids: readonly string[]): Promise<Set<string>> {
    const filter = { blob: { $in: [...ids] }, ...IN_GRIDFS };
    const [nodes, versions] = await Promise.all([
      this.c.nodes.find(filter, { projection: { blob: 1 } }).toArray(),
      this.c.versions.find(filter, { projection: { blob: 1 } }).toArray(),
    ]);
    return new Set([...nodes, ...versions].map((d) => d.blob));
  }

  /**
   * Removes the contents a committed write replaced or deleted. The write stands whatever
   * happens here: a blob that cannot be removed now is logged and left to the orphan sweep.
   */
  async removeReplaced(blobs: readonly string[], what: string): Promise<void> {
    for (const blob of blobs) {
      try {
        await removeGridFS(this.c.bucket, blob);
      } catch (err) {
        this.log.warn(
          { blob, err: (err as Error).message },
          `could not remove the replaced contents of ${what}: the orphan sweep will`,
        );
        return;
      }
    }
  }
}
