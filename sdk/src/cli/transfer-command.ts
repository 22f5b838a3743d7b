// `trove push DIR STORE/PATH` and `trove pull STORE/PATH DIR`: the SDK's push() and pull()
// with rclone's copy semantics (sync with --delete), a dry run, a progress bar on a terminal,
// and a one-line summary on stderr (none with -q, which prints nothing but errors). A file
// changed on the server since it was listed is named and left alone (exit 4) unless --force.

import { join } from "node:path";
import {
  MAX_TRANSFERS,
  remotePath,
  type TransferAction,
  type TransferOptions,
  type TransferSummary,
} from "../transfer/transfer.js";
import { type Command, type Context, EXIT, out } from "./command.js";
import { address, UsageError } from "./config.js";
import { keepHeapSmall } from "./heap-size.js";
import { bytes, createProgress } from "./progress.js";

const OPTIONS = {
  transfers: { type: "string" },
  delete: { type: "boolean" },
  "dry-run": { type: "boolean" },
  force: { type: "boolean" },
  "no-batch": { type: "boolean" },
  verbose: { type: "boolean", short: "v" },
} as const;

const OPTIONS_HELP = `Options:
      --transfers N   files transferred at once, 1 to 64 (default 4)
      --delete        also delete what DESTINATION has and the source has not (rclone's sync)
      --dry-run       print every action on stdout and change nothing
      --force         PUSH_FORCE
      --no-batch      one request per file (PUT, GET), not files of up to 256 KiB by batches
                      of up to 100 in one request each (WriteMany, ReadMany; docs/cli.md)
  -v, --verbose       print every action on stderr as it is carried out
`;

const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

function summaryLine(command: string, s: TransferSummary): string {
  const time = `${(s.ms / 1000).toFixed(1)} s`;
  if (s.dryRun) {
    return (
      `trove ${command}: dry run: ${plural(s.transferred, "file")} to transfer, ${s.skipped} skipped, ` +
      `${s.deleted} to delete, ${bytes(s.bytes)}, ${time}; nothing changed`
    );
  }
  const changed = s.failures.length > 0 ? `, ${s.failures.length} changed on the server and left alone` : "";
  return (
    `trove ${command}: ${plural(s.transferred, "file")} transferred, ${s.skipped} skipped, ${s.deleted} deleted` +
    `${changed}, ${bytes(s.bytes)}, ${time}`
  );
}

interface Direction {
  command: "push" | "pull";
  /** How the destination's entry at a relative path is shown. */
  show(rel: string, directory: boolean): string;
  /** How a local entry (of the source, for a push) is shown. */
  local(rel: string): string;
  verb: string;
  /** What a left-alone file was not: "replaced", "downloaded". */
  notDone: string;
}

function actionLine(d: Direction, a: TransferAction): string | undefined {
  switch (a.type) {
    case "mkdir":
      return `create ${d.show(a.path, true)}`;
    case "copy":
      return `${d.verb} ${d.show(a.path, false)} (${bytes(a.size)}${a.replace ? ", replacing" : ""})`;
    case "delete":
      return `delete ${d.show(a.path, a.directory)}${a.replacing ? " (another kind of entry of the same name)" : ""}`;
    case "skip":
      return undefined;
  }
}

async function runTransfer(ctx: Context, d: Direction, options: Omit<TransferOptions, "client">): Promise<number> {
  keepHeapSmall();
  const dryRun = options.dryRun === true;
  const verbose = ctx.values.verbose === true;
  const progress = createProgress(`${d.command} ${options.directory}`, {
    stream: ctx.io.stderr,
    enabled: !ctx.quiet && !dryRun,
  });
  const say = (line: string) => {
    progress.finish();
    ctx.io.stderr.write(`${line}\n`);
  };
  const onAction = (a: TransferAction) => {
    if (a.type === "skip") {
      if (a.reason === "not-regular" && !ctx.quiet) {
        say(
          `trove ${d.command}: skipping ${d.local(a.path)}: not a regular file or directory (links are not followed)`,
        );
      }
      return;
    }
    const line = actionLine(d, a);
    if (line === undefined) return;
    if (dryRun) out(ctx.io, `would ${line}\n`);
    else if (verbose) say(line);
  };
  const { push, pull, TransferChangedError, TransferRefusedError } = await import("../transfer/index.js");
  const run = d.command === "push" ? push : pull;
  let summary: TransferSummary;
  try {
    summary = await run({
      ...options,
      client: await ctx.rest({ h2c: true }),
      signal: ctx.io.signal,
      onAction,
      onProgress: (p) => progress.update(p.bytes, p.totalBytes, `${p.files}/${p.totalFiles} files`),
    });
  } catch (err) {
    progress.finish();
    if (err instanceof TransferRefusedError) throw new UsageError(err.message);
    if (!(err instanceof TransferChangedError)) throw err;
    for (const f of err.failures) {
      const gone = f.error.status === 404 ? "deleted" : d.command === "push" && f.created ? "created" : "changed";
      say(
        `trove ${d.command}: ${d.show(f.path, false)} ${gone} on the server since it was listed: ` +
          `not ${d.notDone} (${f.error.status} ${f.error.reason}; --force ${d.command === "push" ? "overwrites" : "downloads"} it)`,
      );
    }
    if (!ctx.quiet) say(summaryLine(d.command, err.summary));
    return EXIT.preconditionFailed;
  }
  progress.finish();
  if (!ctx.quiet) say(summaryLine(d.command, summary));
  return EXIT.ok;
}

/** `--transfers N` of push, pull and mirror: undefined when not given; a usage error unless 1 to 64. */
export function transfersOf(ctx: Context): number | undefined {
  const given = ctx.values.transfers as string | undefined;
  if (given === undefined) return undefined;
  const n = /^\d{1,3}$/.test(given) ? Number(given) : Number.NaN;
  if (!(n >= 1 && n <= MAX_TRANSFERS)) {
    throw new UsageError(`--transfers takes a number from 1 to ${MAX_TRANSFERS}, not ${JSON.stringify(given)}`);
  }
  return n;
}

function common(ctx: Context) {
  if (ctx.positionals.length > 2) throw new UsageError(`unexpected argument ${JSON.stringify(ctx.positionals[2])}`);
  const transfers = transfersOf(ctx);
  return {
    ...(transfers === undefined ? {} : { transfers }),
    delete: ctx.values.delete === true,
    dryRun: ctx.values["dry-run"] === true,
    force: ctx.values.force === true,
    ...(ctx.values["no-batch"] === true ? { batch: false } : {}),
  };
}

const trimmed = (path: string) => path.replace(/^\/+|\/+$/g, "");
const localShow =
  (dir: string) =>
  (rel: string, directory = false) =>
    `${rel === "" ? dir.replace(/\/+$/, "") : join(dir, ...rel.split("/"))}${directory ? "/" : ""}`;

export const PUSH_COMMAND: Command = {
  help: `Usage: trove push DIR STORE[/PATH] [options]

Makes STORE/PATH hold every file of the local directory DIR, uploading only what differs (same
size and same MD5 as the listing's md5: skipped). Missing directories are created, PATH and its
parents too. Like rclone's copy: what STORE/PATH has and DIR has not stays, unless --delete.

A replacement is sent with If-Match and the tag the listing gave, a new file with
If-None-Match: * (create only): a file changed, or created, on the server in the meantime is
named, left alone, and the command exits 4 (the other files are transferred).
Symbolic links and special files in DIR are skipped with a warning (never followed).

Ends with a summary on stderr: files transferred, skipped, deleted, bytes, time (-q: nothing but
errors, no progress bar, no summary, no skipped-link warning).

${OPTIONS_HELP.replace("PUSH_FORCE", "replace files changed or created on the server meanwhile (no preconditions)")}`,
  options: OPTIONS,
  remote: { paths: [1] },
  async run(ctx) {
    const dir = ctx.positionals[0];
    if (!dir) throw new UsageError("missing the local directory DIR");
    const { store, path } = address(ctx.positionals[1], "the destination STORE/PATH");
    const base = trimmed(path);
    const show = (rel: string, directory: boolean) =>
      `${store}/${remotePath(base, rel)}${directory && rel !== "" ? "/" : ""}`;
    return runTransfer(
      ctx,
      { command: "push", show, local: localShow(dir), verb: "upload", notDone: "replaced" },
      { ...common(ctx), store, path: base, directory: dir },
    );
  },
};

export const PULL_COMMAND: Command = {
  help: `Usage: trove pull STORE[/PATH] DIR [options]

Makes the local directory DIR (created when missing) hold every file of STORE/PATH, downloading
only what differs (same size and same MD5 as the listing's md5: skipped). Like rclone's copy:
what DIR has and STORE/PATH has not stays, unless --delete.

Each file is written to a temporary name beside it and renamed: no partial files. A file whose
tag changed on the server between the listing and its download is named, left alone, and the
command exits 4. A listing with a name that is not a safe relative path (.., absolute) is
refused (exit 2) before anything is written; nothing is ever written through a symbolic link.

Ends with a summary on stderr: files transferred, skipped, deleted, bytes, time (-q: nothing but
errors, no progress bar, no summary, no skipped-link warning).

${OPTIONS_HELP.replace("PUSH_FORCE", "keep downloads of files changed on the server since the listing")}`,
  options: OPTIONS,
  remote: { paths: [0] },
  async run(ctx) {
    const { store, path } = address(ctx.positionals[0], "the source STORE/PATH");
    const dir = ctx.positionals[1];
    if (!dir) throw new UsageError("missing the local directory DIR");
    const show = localShow(dir);
    return runTransfer(
      ctx,
      { command: "pull", show, local: show, verb: "download", notDone: "downloaded" },
      { ...common(ctx), store, path: trimmed(path), directory: dir },
    );
  },
};
