// History in `trove` (docs/history.md): `log` lists the versions of a resource, `restore` makes a
// version current again or takes a directory back to a moment; `get` and `ls` take the moment
// (--as-of) and the version (--version) through asOfOption.

import { formatMoment } from "../rest/client.js";
import type { SubtreeChange, SubtreeRestore, VersionEntry } from "../rest/xml.js";
import { BadRequestError } from "../trove-errors.js";
import { type Command, type Context, columns, EXIT, out } from "./command.js";
import { address, UsageError } from "./config.js";

/** What --as-of takes, for the helps of get, ls and restore. */
export const MOMENT_HELP = `T is an event id (trove log shows the event of each version) or an ISO 8601 date-time
with a time zone (2026-11-27T15:00:00Z), which stands for the store's last event at or before
it. A moment older than the history the store keeps (its keep-versions) exits 3.`;

/** --as-of's value, checked as the server checks it: a malformed moment is a usage mistake. */
export function asOfOption(ctx: Context): string | undefined {
  const value = ctx.values["as-of"];
  if (value === undefined) return undefined;
  try {
    return formatMoment(value as string, "--as-of");
  } catch (err) {
    if (err instanceof RangeError) throw new UsageError(err.message);
    throw err;
  }
}

/** --version's value: a tag. */
export function versionOption(ctx: Context): string | undefined {
  const value = ctx.values.version as string | undefined;
  if (value === "") throw new UsageError("--version needs a tag (trove log lists them)");
  return value;
}

function isDirectoryAddress(path: string): boolean {
  return path === "" || path.endsWith("/");
}

/** STORE/DIR/ (STORE/ for the root). */
export function directoryAddress(store: string, path: string): string {
  const dir = path.replace(/\/+$/, "");
  return dir === "" ? `${store}/` : `${store}/${dir}/`;
}

/** One line per version: tag, time, user, size, operation, event, and (current) on the live state. */
export function logLines(versions: VersionEntry[]): string[] {
  return columns(
    versions.map((v) => [
      v.tag,
      v.lastModified.toISOString(),
      v.user || "-",
      String(v.size),
      v.operation,
      `event ${v.event}`,
      v.current ? "(current)" : "",
    ]),
    new Set([3]),
  );
}

function changeLine(store: string, c: SubtreeChange, dryRun: boolean): string {
  return `${dryRun ? "would " : ""}${c.operation} ${store}/${c.path}${c.directory ? "/" : ""}`;
}

/** The summary of a subtree restore, for stderr. */
export function restoreSummary(r: SubtreeRestore): string {
  const count = (operation: SubtreeChange["operation"]) => r.changes.filter((c) => c.operation === operation).length;
  const where = `${directoryAddress(r.store, r.path)} as of event ${r.asOf}`;
  if (r.dryRun) {
    return (
      `trove restore: dry run: ${where}: ${count("create")} to create, ${count("modify")} to modify, ` +
      `${count("delete")} to delete; nothing changed`
    );
  }
  return `trove restore: ${where}: ${count("create")} created, ${count("modify")} modified, ${count("delete")} deleted`;
}

export const LOG_COMMAND: Command = {
  help: `Usage: trove log STORE/PATH [options]

Lists the versions of a resource, newest first, one line each: tag, time, user (the subject of
the token that made the change), size, operation (modify: contents written; delete: a
deletion), the event that made it, and (current) on the live state. trove get --version TAG
reads one; trove restore --version TAG makes one current again.

Options:
      --json   the versions as a JSON array
`,
  options: { json: { type: "boolean" } },
  remote: { paths: [0] },
  async run(ctx) {
    const { store, path } = address(ctx.positionals[0]);
    if (ctx.positionals.length > 1) throw new UsageError(`unexpected argument ${JSON.stringify(ctx.positionals[1])}`);
    const isDirectory = () =>
      new UsageError(
        `${directoryAddress(store, path)} is a directory: versions are kept of resources; ` +
          `see it as it was with trove ls ${directoryAddress(store, path)} --as-of T`,
      );
    if (isDirectoryAddress(path)) throw isDirectory();
    const rest = await ctx.rest();
    let versions: VersionEntry[];
    try {
      versions = await rest.listVersions(store, path);
    } catch (err) {
      // A directory named without its /: the server refuses it (400); say so as for an address with /.
      if (
        err instanceof BadRequestError &&
        (await rest.head(store, path).then(
          () => ctx.answeredByDirectory(),
          () => false,
        ))
      ) {
        throw isDirectory();
      }
      throw err;
    }
    if (ctx.values.json) out(ctx.io, `${JSON.stringify(versions, null, 2)}\n`);
    else for (const line of logLines(versions)) out(ctx.io, `${line}\n`);
    return EXIT.ok;
  },
};

export const RESTORE_COMMAND: Command = {
  help: `Usage: trove restore STORE/PATH --version TAG [--if-match TAG] [--json]
       trove restore STORE/DIR/ --as-of T [--dry-run] [--json]

Makes an earlier state current again, as new changes (what they replace stays in the history).

With --version: the resource's version TAG (trove log lists them) becomes its contents again,
one change with a new tag, also when the resource was deleted since. Prints "restored
STORE/PATH NEWTAG".

With --as-of: the directory and everything below it go back to how they were at T. What was
made since is deleted; what was deleted or changed since gets its contents of then back. Prints
each change, one line each (create, modify or delete, then the path; directories end with /),
and a summary line on stderr. Running it again finishes a restore that was cut short.

${MOMENT_HELP}

Options:
      --version TAG    the version of the resource to restore
      --if-match TAG   with --version: restore only if the current tag is TAG (exit 4 otherwise)
      --as-of T        the moment to take the directory back to
      --dry-run        with --as-of: print the changes it would make ("would create ...") and
                       change nothing
      --json           the result as JSON (with --as-of: the changes and the event of T)
`,
  remote: { paths: [0] },
  options: {
    version: { type: "string" },
    "if-match": { type: "string" },
    "as-of": { type: "string" },
    "dry-run": { type: "boolean" },
    json: { type: "boolean" },
  },
  async run(ctx) {
    const { store, path } = address(ctx.positionals[0]);
    if (ctx.positionals.length > 1) throw new UsageError(`unexpected argument ${JSON.stringify(ctx.positionals[1])}`);
    const version = versionOption(ctx);
    const asOf = asOfOption(ctx);
    if ((version === undefined) === (asOf === undefined)) {
      throw new UsageError(
        version === undefined
          ? "give --version TAG (a version of a resource) or --as-of T (a directory as it was at T)"
          : "--version and --as-of do not go together: --version restores a resource, --as-of a directory",
      );
    }
    const rest = await ctx.rest();
    if (version !== undefined) {
      if (ctx.values["dry-run"]) throw new UsageError("--dry-run goes with --as-of (the restore of a directory)");
      if (isDirectoryAddress(path)) {
        throw new UsageError(
          `${directoryAddress(store, path)} is a directory: versions are kept of resources; take a directory back with --as-of T`,
        );
      }
      const restored = await rest.restore(store, path, {
        version,
        ifMatch: ctx.values["if-match"] as string | undefined,
      });
      if (ctx.values.json) out(ctx.io, `${JSON.stringify(restored, null, 2)}\n`);
      else out(ctx.io, `restored ${store}/${path} ${restored.tag}\n`);
      return EXIT.ok;
    }
    if (ctx.values["if-match"] !== undefined) {
      throw new UsageError("--if-match goes with --version: a directory's restore checks each path it changes");
    }
    const result = await rest.restoreAsOf(store, path, {
      asOf: asOf as string,
      dryRun: ctx.values["dry-run"] === true,
    });
    if (ctx.values.json) out(ctx.io, `${JSON.stringify(result, null, 2)}\n`);
    else for (const change of result.changes) out(ctx.io, `${changeLine(store, change, result.dryRun)}\n`);
    ctx.io.stderr.write(`${restoreSummary(result)}\n`);
    return EXIT.ok;
  },
};
