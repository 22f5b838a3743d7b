// pull(): makes a local directory hold every file of a remote one (rclone's `copy`; `sync`
// with `delete`), downloading only what differs. Each file is written to a temporary name
// beside it and renamed, never through a symbolic link and never outside the directory, and
// only when the download is the version the listing named.

import { createHash, randomUUID } from "node:crypto";
import { createWriteStream } from "node:fs";
import { lstat, mkdir, realpath, rename, rm } from "node:fs/promises";
import { basename, dirname, join, sep } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { under } from "../mirror/directory-sink.js";
import { readWhole, WHOLE_FILE_BYTES } from "../rest/in-flight.js";
import { PreconditionFailedError } from "../trove-errors.js";
import { entryOf, fileEntry } from "./local-tree.js";
import type { PlannedCopy, TreeEntry } from "./plan.js";
import { replaceFileSync } from "./replace-file.js";
import { type Destination, remotePath, type TransferOptions, type TransferSummary, transfer } from "./transfer.js";

/** `md5` (a download's) when it is the one the server announced (or none was), else the download fails. */
function checkMd5(item: PlannedCopy, md5: string, announced: string): string {
  if (announced !== "" && md5 !== announced) {
    throw new Error(`the download of ${item.path} has MD5 ${md5}, the server announced ${announced}`);
  }
  return md5;
}

/** A download that is no longer the listed version: reported, not written (unless `force`). */
function changedSince(listed: string, now: string): PreconditionFailedError {
  return new PreconditionFailedError(
    412,
    `changed on the server since it was listed (listed tag ${listed}, now ${now})`,
  );
}

/**
 * Downloads `store`/`path` into `directory` (created when missing): missing directories are
 * created, files that differ (size, then MD5) are downloaded (streamed, or up to 256 KiB read
 * whole and written at once: replace-file.ts) to a temporary file and renamed into place; a
 * download whose tag is not the listed one is left out and reported (unless `force`); with
 * `delete`, local entries the store has not are deleted. A listing with a name that is not a safe
 * relative path (`..`, absolute) refuses the pull before anything is written.
 */
export async function pull(options: TransferOptions): Promise<TransferSummary> {
  const { client, store } = options;
  return transfer(options, "pull", ({ root, base }) => {
    let realRoot: Promise<string> | undefined;
    // Once per directory, not per file (a realpath per file was 4 % of a pull's CPU).
    const checked = new Map<string, Promise<void>>();
    /** `dir` resolved must be the root or below it: no symbolic link on the way leads elsewhere. */
    const checkInside = (dir: string): Promise<void> => {
      let check = checked.get(dir);
      if (check === undefined) {
        // A cache: emptied when full, which only costs checking a directory again.
        if (checked.size >= 1024) checked.clear();
        check = (async () => {
          realRoot ??= realpath(root);
          const [inside, real] = await Promise.all([realRoot, realpath(dir)]);
          if (real !== inside && !real.startsWith(inside + sep)) {
            throw new Error(`refusing to write into ${dir}: it resolves to ${real}, outside ${root}`);
          }
        })();
        checked.set(dir, check);
      }
      return check;
    };
    // Temporary names: one random part per run and a counter (a UUID per file was 1 % of a pull).
    const runId = randomUUID().slice(0, 8);
    let made = 0;
    const temporaryOf = (dest: string) =>
      join(dirname(dest), `.${basename(dest)}.trove-pull-${runId}-${(made++).toString(36)}`);
    /** A small download, whole in `body`: its MD5 checked against the announced one, then written and renamed in place. */
    const writeWhole = (item: PlannedCopy, dest: string, body: Buffer, announced: string): TreeEntry => {
      const md5 = checkMd5(item, createHash("md5").update(body).digest("base64"), announced);
      return { ...entryOf(replaceFileSync(temporaryOf(dest), dest, body)), md5 };
    };
    const destination: Destination = {
      async makeDirectory(path) {
        if (path === "") {
          await mkdir(root, { recursive: true });
          return;
        }
        const dir = under(root, path);
        await checkInside(dirname(dir));
        try {
          await mkdir(dir);
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code !== "EEXIST" || !(await lstat(dir)).isDirectory()) throw err;
        }
      },
      async copy(item, sent, signal) {
        const dest = under(root, item.path);
        const got = await client.get(store, remotePath(base, item.path), { as: "stream", signal });
        if (got.notModified) throw new Error(`GET ${item.path} answered 304 without a condition`);
        if (!options.force && item.tag !== undefined && got.tag !== item.tag) {
          await got.body.cancel();
          throw changedSince(item.tag, got.tag);
        }
        await checkInside(dirname(dest));
        const tmp = temporaryOf(dest);
        if (got.size !== undefined && got.size <= WHOLE_FILE_BYTES) {
          // The common case, a few KiB: one buffer, one synchronous write (replace-file.ts).
          const body = await readWhole(got.body, got.size, signal);
          sent(body.byteLength);
          return writeWhole(item, dest, body, got.md5);
        }
        const hash = createHash("md5");
        const counter = new Transform({
          transform(chunk: Buffer, _encoding, callback) {
            hash.update(chunk);
            sent(chunk.byteLength);
            callback(null, chunk);
          },
        });
        try {
          const body = Readable.fromWeb(got.body as import("node:stream/web").ReadableStream);
          await pipeline(body, counter, createWriteStream(tmp, { flags: "wx" }), { signal });
          const md5 = checkMd5(item, hash.digest("base64"), got.md5);
          await rename(tmp, dest);
          return { ...(await fileEntry(dest)), md5 };
        } catch (err) {
          await rm(tmp, { force: true });
          throw err;
        }
      },
      async remove(item) {
        await rm(under(root, item.path), { recursive: true, force: true });
      },
      batch: {
        // Small files go by batches of one ReadMany each (a server without it: by GETs, transfer.ts).
        accepts: (item) => item.size <= WHOLE_FILE_BYTES,
        async copy(items, sent, done, signal) {
          const paths = items.map((item) => remotePath(base, item.path));
          for await (const got of client.readMany(store, paths, { signal })) {
            const item = items[got.index] as PlannedCopy;
            if (got.error !== undefined) {
              done(got.index, { error: got.error });
              continue;
            }
            if (!options.force && item.tag !== undefined && got.tag !== item.tag) {
              done(got.index, { error: changedSince(item.tag, got.tag) });
              continue;
            }
            if (got.directory) throw new Error(`${item.path} is a directory on the server now, no longer a file`);
            const dest = under(root, item.path);
            await checkInside(dirname(dest));
            sent(got.body.byteLength);
            done(got.index, { entry: writeWhole(item, dest, got.body, got.md5) });
          }
        },
      },
    };
    return destination;
  });
}
