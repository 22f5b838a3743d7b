// push(): makes a remote directory hold every file of a local one (rclone's `copy`; `sync`
// with `delete`), uploading only what differs, each replacement conditional on the tag the
// listing gave (If-Match) and each new file on nothing being there (If-None-Match: *), so that a
// change made meanwhile on the server is reported, not lost.

import { createHash } from "node:crypto";
import { createReadStream, readFileSync } from "node:fs";
import { join } from "node:path";
import { WHOLE_FILE_BYTES } from "../rest/in-flight.js";
import type { WriteManyFile } from "../rest/write-many.js";
import type { PlannedCopy } from "./plan.js";
import { type Destination, remotePath, type TransferOptions, type TransferSummary, transfer } from "./transfer.js";

/**
 * Uploads `directory` to `store`/`path`: missing directories are created (the remote
 * directory too, with its parents), files that differ (size, then MD5 against the listing) are
 * uploaded streamed with Content-MD5, and replaced with If-Match on the listed tag (created
 * with If-None-Match: *) unless `force`; with `delete`, remote entries the directory has not are deleted (If-Match too).
 * Symbolic links and special files are skipped (`skip` action, reason "not-regular").
 */
export async function push(options: TransferOptions): Promise<TransferSummary> {
  const { client, store } = options;
  // A replacement on the listed tag; a new file only if nothing was created there meanwhile.
  const conditionOf = (item: PlannedCopy) =>
    options.force ? {} : item.replaces ? { ifMatch: item.replaces.tag } : { ifNoneMatch: "*" };
  return transfer(
    options,
    "push",
    ({ root, base }): Destination => ({
      async makeDirectory(path, signal) {
        if (path !== "") {
          await client.mkdir(store, remotePath(base, path), { signal });
          return;
        }
        const segments = base.split("/");
        for (let i = 1; i <= segments.length; i++)
          await client.mkdir(store, segments.slice(0, i).join("/"), { signal });
      },
      async copy(item, sent, signal) {
        let reported = 0;
        const file = join(root, ...item.path.split("/"));
        // Up to WHOLE_FILE_BYTES, read with one synchronous call and sent as bytes: fetch (the
        // HTTP/1.1 fallback) drops the kept-alive connection when the answer to a streamed body of
        // known length arrives before the stream has told it that it ended, which with small files
        // was nearly every upload (979 connects for 1,000 files); and a file of a few KiB costs
        // less read at once than through the thread pool. So at most `bytesInFlight` of contents
        // are in memory at once.
        const small = item.size <= WHOLE_FILE_BYTES;
        const body = small ? readFileSync(file) : createReadStream(file);
        // A file read whole is hashed on the way (the server then checks it); a streamed one is
        // hashed when it was compared, else its MD5 is the server's answer.
        const md5 = body instanceof Buffer ? createHash("md5").update(body).digest("base64") : item.md5;
        const result = await client.put(store, remotePath(base, item.path), body, {
          ...conditionOf(item),
          ...(md5 ? { contentMd5: md5 } : {}),
          ...(small ? {} : { contentLength: item.size }),
          signal,
          onProgress(n) {
            sent(n - reported);
            reported = n;
          },
        });
        // The stamp stays the one read before the upload: an edit meanwhile changes it.
        return { kind: "file", md5: md5 ?? result.md5 };
      },
      async remove(item, signal) {
        const tag = options.force ? undefined : item.entry.tag;
        await client.delete(store, remotePath(base, item.path), { ...(tag ? { ifMatch: tag } : {}), signal });
      },
      batch: {
        // Small files go by batches of one WriteMany each (a server without it: by PUTs, transfer.ts).
        accepts: (item) => item.size <= WHOLE_FILE_BYTES,
        async copy(items, sent, done, signal) {
          // Each file read whole and hashed as a single upload reads it; one that cannot be read
          // is that file's failure, and the others go.
          const files: (WriteManyFile & { at: number })[] = [];
          for (const [at, item] of items.entries()) {
            try {
              const body = readFileSync(join(root, ...item.path.split("/")));
              const contentMd5 = createHash("md5").update(body).digest("base64");
              files.push({ at, path: remotePath(base, item.path), body, contentMd5, ...conditionOf(item) });
            } catch (error) {
              done(at, { error });
            }
          }
          if (files.length === 0) return;
          const answers = await client.writeMany(store, files, { signal });
          for (const answer of answers) {
            const file = files[answer.index] as (typeof files)[number];
            if (answer.error !== undefined) {
              done(file.at, { error: answer.error });
              continue;
            }
            sent(file.body.byteLength);
            done(file.at, { entry: { kind: "file", md5: file.contentMd5 as string } });
          }
        },
      },
    }),
  );
}
