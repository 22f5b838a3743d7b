// Orphaned GridFS files: contents uploaded whose metadata write never happened (the process died
// in between, or the write failed and the discard did too). Nobody can see them; they cost disk.
// The purge sweeps them: files uploaded more than an hour ago that nothing refers to.

import type { Collection, Db, GridFSBucket } from "mongodb";
import { removeGridFS } from "./mongo-driver.js";

interface FileDoc {
  _id: string;
  uploadDate: Date;
}

/** How far the sweep has looked, for the whole database: `_id` = "blobs". */
interface SweepDoc {
  _id: string;
  /** Every file uploaded before this date has been looked at. */
  upTo: Date;
}

export interface BlobSweepOptions {
  /** Files younger than this are never removed: their write may still be on its way, in ms. */
  age: number;
  /** The blob UUIDs among `ids` that some record refers to. */
  referenced(ids: string[]): Promise<Set<string>>;
}

const BATCH = 1000;

export class BlobSweep {
  private readonly files: Collection<FileDoc>;
  private readonly sweeps: Collection<SweepDoc>;

  constructor(
    db: Db,
    private readonly bucket: GridFSBucket,
    private readonly options: BlobSweepOptions,
  ) {
    this.files = db.collection<FileDoc>("blobs.files");
    this.sweeps = db.collection<SweepDoc>("sweeps");
  }

  async ensureIndexes(): Promise<void> {
    await this.files.createIndex({ uploadDate: 1 }, { name: "uploaded" });
  }

  /**
   * Looks at the files uploaded since the last sweep (any instance's) and until `age` ago, in
   * batches by upload date, and removes those nothing refers to; returns how many. A write is
   * referenced within seconds of its upload (a resource's write waits at most the lock timeout),
   * so an hour-old file without a reference will never get one.
   */
  async sweep(): Promise<number> {
    const cutoff = new Date(Date.now() - this.options.age);
    const mark = await this.sweeps.findOne({ _id: "blobs" });
    let after: FileDoc = { _id: "", uploadDate: mark?.upTo ?? new Date(0) };
    let removed = 0;
    for (;;) {
      const files = await this.files
        .find(
          {
            uploadDate: { $lt: cutoff },
            $or: [{ uploadDate: { $gt: after.uploadDate } }, { uploadDate: after.uploadDate, _id: { $gt: after._id } }],
          },
          { projection: { _id: 1, uploadDate: 1 } },
        )
        .sort({ uploadDate: 1, _id: 1 })
        .limit(BATCH)
        .toArray();
      const last = files.at(-1);
      if (!last) break;
      const referenced = await this.options.referenced(files.map((f) => f._id));
      for (const f of files) {
        if (referenced.has(f._id)) continue;
        await removeGridFS(this.bucket, f._id);
        removed += 1;
      }
      after = last;
      if (files.length < BATCH) break;
    }
    await this.sweeps.updateOne({ _id: "blobs" }, { $max: { upTo: cutoff } }, { upsert: true });
    return removed;
  }
}
