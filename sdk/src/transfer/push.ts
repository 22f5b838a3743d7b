// push(): makes a remote directory hold every file of a local one (rclone's `copy`; `sync`
// with `delete`), uploading only what differs, each replacement conditional on the tag the
// listing gave (If-Match) and each new file on nothing being there (If-None-Match: *), so that a
// change made meanwhile on the server is reported, not lost.

import { createReadStream } from "node:fs";
import { join } from "node:path";
import { remotePath, type TransferOptions, type TransferSummary, transfer } from "./transfer.js";

/**
 * Uploads `directory` to `store`/`path`: missing directories are created (the remote
 * directory too, with its parents), files that differ (size, then MD5 against the listing) are
 * uploaded streamed with Content-MD5, and replaced with If-Match on the listed tag (created
 * with If-None-Match: *) unless `force`; with `delete`, remote entries the directory has not are deleted (If-Match too).
 * Symbolic links and special files are skipped (`skip` action, reason "not-regular").
 */
export async function push(options: TransferOptions): Promise<TransferSummary> {
  const { client, store } = options;
  return transfer(options, "push", ({ root, base }) => ({
    async makeDirectory(path, signal) {
      if (path !== "") {
        await client.mkdir(store, remotePath(base, path), { signal });
        return;
      }
      const segments = base.split("/");
      for (let i = 1; i <= segments.length; i++) await client.mkdir(store, segments.slice(0, i).join("/"), { signal });
    },
    async copy(item, sent, signal) {
      let reported = 0;
      // A replacement on the listed tag; a new file only if nothing was created there meanwhile.
      const condition = options.force ? {} : item.replaces ? { ifMatch: item.replaces.tag } : { ifNoneMatch: "*" };
      await client.put(store, remotePath(base, item.path), createReadStream(join(root, ...item.path.split("/"))), {
        ...condition,
        ...(item.md5 ? { contentMd5: item.md5 } : {}),
        contentLength: item.size,
        signal,
        onProgress(n) {
          sent(n - reported);
          reported = n;
        },
      });
    },
    async remove(item, signal) {
      const tag = options.force ? undefined : item.entry.tag;
      await client.delete(store, remotePath(base, item.path), { ...(tag ? { ifMatch: tag } : {}), signal });
    },
  }));
}
