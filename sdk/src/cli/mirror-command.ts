// `trove mirror`: keeps a local directory equal to a store or subtree (the SDK's mirror()).
// It refuses a non-empty directory that is not already the mirror of the same store and path
// (exit 2) unless --force; --dry-run lists what it would write and delete and changes nothing;
// -v reports every write and deletion; every run ends with a one-line summary on stderr
// (none with -q, which prints nothing but errors).

import { basename, dirname, join } from "node:path";
import type { MirrorEvent } from "../mirror/mirror.js";
import { type Command, EXIT, out } from "./command.js";
import { address, UsageError } from "./config.js";
import { keepHeapSmall } from "./heap-size.js";
import { bytes, createProgress } from "./progress.js";
import { transfersOf } from "./transfer-command.js";

/** As the progress line writes sizes, with small ones in words ("13 bytes"). */
function size(n: number): string {
  return n < 1024 ? `${n} byte${n === 1 ? "" : "s"}` : bytes(n);
}

/** The marker's default place, as DirectorySink puts it: `.{name}.trove-mirror.db` beside DIR. */
function defaultMarker(dir: string): string {
  const trimmed = dir.replace(/\/+$/, "") || dir;
  return join(dirname(trimmed), `.${basename(trimmed)}.trove-mirror.db`);
}

export const MIRROR_COMMAND: Command = {
  help: `Usage: trove mirror STORE[/PATH] DIR [options]

Keeps DIR equal to a store or a subtree: copies everything once, then follows the change feed
(gRPC WatchChanges when reachable, REST long polls otherwise) until interrupted. Files are
written to a temporary file and renamed.

DIR belongs to the mirror: what the store does not hold is deleted from it. So the mirror
refuses (exit 2, nothing changed) a DIR that is not empty and is not already the mirror of the
same STORE/PATH, unless --force. The marker that makes DIR a mirror is .DIR.trove-mirror.db
beside DIR, an SQLite database: store, path, server URL, the cursor and the tag of every file,
committed after every batch (a marker .DIR.trove-mirror.json of an earlier version is taken
over). A restart continues from its cursor and copies only what changed. Memory does not grow
with the tree.

Every run ends with a one-line summary on stderr: files written, deleted, bytes, time, cursor
(-q: nothing but errors and retries, no progress bar, no summary).

When the server goes away (or the store does, or is not there yet), the mirror says so on
stderr and retries, with exponential backoff (from 0.25 s, doubling, with jitter, at most 10 s
apart), until it is back: it is meant to outlast an outage, --once included.

Options:
      --once               stop once DIR is up to date
      --dry-run            print what would be written and deleted (stdout) and change nothing:
                           no file, no directory, no marker; implies --once
      --force              mirror into a non-empty DIR that is not this mirror's own
  -v, --verbose            report every file written and every deletion on stderr
      --transfers N        files downloaded at once by a full copy, 1 to 64 (default 4)
      --no-batch           a full copy makes one GET per file, not files of up to 256 KiB by
                           batches of up to 100 in one request each (ReadMany)
      --cursor-file FILE   keep the marker here instead
      --follow MODE        auto (default), watch or poll
      --json               print every mirror event as a JSON line on stdout
      --no-retry           exit 7 when the server cannot be reached or is unavailable (exit 3
                           when the store does not exist), instead of retrying
`,
  options: {
    once: { type: "boolean" },
    "dry-run": { type: "boolean" },
    force: { type: "boolean" },
    verbose: { type: "boolean", short: "v" },
    transfers: { type: "string" },
    "no-batch": { type: "boolean" },
    "cursor-file": { type: "string" },
    follow: { type: "string" },
    json: { type: "boolean" },
    "no-retry": { type: "boolean" },
  },
  remote: { paths: [0] },
  async run(ctx) {
    const { store, path: given } = address(ctx.positionals[0]);
    const path = given.replace(/^\/+|\/+$/g, "");
    const dir = ctx.positionals[1];
    if (!dir) throw new UsageError("missing the local directory DIR");
    if (ctx.positionals.length > 2) throw new UsageError(`unexpected argument ${JSON.stringify(ctx.positionals[2])}`);
    const transfers = transfersOf(ctx);
    const follow = (ctx.values.follow as string | undefined) ?? "auto";
    if (!["auto", "watch", "poll"].includes(follow)) throw new UsageError("--follow takes auto, watch or poll");
    const dryRun = ctx.values["dry-run"] === true;
    const verbose = ctx.values.verbose === true;
    const json = ctx.values.json === true;
    const cursorFile = ctx.values["cursor-file"] as string | undefined;
    const local = (rel: string, directory = false) =>
      `${rel === "" ? dir.replace(/\/+$/, "") : join(dir, rel)}${directory ? "/" : ""}`;
    const progress = createProgress(`mirror ${store}/${path}`, {
      stream: ctx.io.stderr,
      enabled: !ctx.quiet && !dryRun,
      unit: "count",
    });
    let written = 0;
    const say = (line: string) => {
      progress.finish();
      ctx.io.stderr.write(`${line}\n`);
    };
    const onEvent = (e: MirrorEvent) => {
      if (json) {
        const printable = e.type === "retry" ? { ...e, error: String((e.error as Error)?.message ?? e.error) } : e;
        out(ctx.io, `${JSON.stringify(printable)}\n`);
      }
      switch (e.type) {
        case "start":
          if (verbose) {
            say(
              e.resumed
                ? `trove mirror: resuming ${store}/${path} in ${dir} from cursor ${e.eventId}`
                : `trove mirror: copying ${store}/${path} into ${dir}`,
            );
          }
          break;
        case "write":
          if (dryRun && !json) out(ctx.io, `would write ${local(e.path)} (${size(e.size)})\n`);
          else if (verbose) say(`wrote ${local(e.path)} (${size(e.size)})`);
          else progress.update(++written, undefined, `files, ${e.path}`);
          break;
        case "directory":
          if (dryRun && !json) out(ctx.io, `would create ${local(e.path, true)}\n`);
          else if (verbose) say(`created ${local(e.path, true)}`);
          break;
        case "remove":
          if (dryRun && !json) out(ctx.io, `would delete ${local(e.path, e.directory)}\n`);
          else if (verbose) say(`deleted ${local(e.path, e.directory)}`);
          break;
        case "retry":
          if (!json) say(`trove mirror: ${(e.error as Error)?.message ?? e.error}; retrying in ${e.delayMs} ms`);
          break;
        case "store-missing":
          if (!json) say(`trove mirror: store ${store} does not exist`);
          break;
        case "summary": {
          if (ctx.quiet) break;
          const time = `${(e.ms / 1000).toFixed(1)} s`;
          const cursor = e.eventId < 0 ? "none" : String(e.eventId);
          const files = `${e.written} file${e.written === 1 ? "" : "s"}`;
          say(
            e.dryRun
              ? `trove mirror: dry run: ${files} to write, ${e.removed} to delete, ${size(e.bytes)}, ${time}, cursor ${cursor}; nothing changed`
              : `trove mirror: ${files} written, ${e.removed} deleted, ${size(e.bytes)}, ${time}, cursor ${cursor}`,
          );
          break;
        }
      }
    };
    keepHeapSmall();
    // Loaded here: the mirror brings the gRPC transport along, which the other commands do not need.
    const { mirror, MirrorRefusedError } = await import("../mirror/mirror.js");
    const m = mirror({
      client: await ctx.rest({ h2c: true }),
      store,
      path,
      target: dir,
      cursorFile,
      follow: follow as "auto" | "watch" | "poll",
      ...(transfers === undefined ? {} : { transfers }),
      ...(ctx.values["no-batch"] === true ? { batch: false } : {}),
      once: ctx.values.once === true,
      dryRun,
      force: ctx.values.force === true,
      retry: ctx.values["no-retry"] !== true,
      signal: ctx.io.signal,
      onEvent,
    });
    try {
      await m.done;
    } catch (err) {
      if (err instanceof MirrorRefusedError) {
        const marker = cursorFile ?? defaultMarker(dir);
        const why = err.found
          ? `it is the mirror of ${err.found.store}/${err.found.path} (marker ${marker})`
          : `it is not empty and is not a mirror of ${store}/${path} (no marker ${marker})`;
        throw new UsageError(
          `refusing to mirror ${store}/${path} into ${dir}: ${why}. Choose an empty directory, or give --force ` +
            `to make it one: whatever ${store}/${path} does not hold is then deleted from it ` +
            `(--dry-run --force lists what)`,
        );
      }
      throw err;
    } finally {
      progress.finish();
    }
    return EXIT.ok;
  },
};
