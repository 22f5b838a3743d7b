// The `trove` client commands: token, ls, get, put, rm, mkdir, log, restore, stores, watch,
// mirror, push, pull, project, report, completion, help. `run` returns the exit code; the SDK's
// bin and the server package's `trove` (which adds `serve` as a HostCommand) call it. Exit codes:
// EXIT in command.ts, documented in docs/cli.md.

import { createReadStream, createWriteStream } from "node:fs";
import { rm as removeFile, rename, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { type ParseArgsConfig, parseArgs } from "node:util";
import { createBackoff, isTransient, pause } from "../backoff.js";
import { createRestClient, type ListOptions, type TroveRestClient } from "../rest/client.js";
import { createH2cFetch } from "../rest/h2c-fetch.js";
import type { FeedEvent } from "../rest/poll.js";
import type { ListingEntry, StoreInfo } from "../rest/xml.js";
import {
  ConflictError,
  ConnectionError,
  ForbiddenError,
  HistoryPurgedError,
  NotFoundError,
  PreconditionFailedError,
  TroveError,
  UnauthorizedError,
  UnavailableError,
} from "../trove-errors.js";
import {
  type CliHost,
  type CliIo,
  type Command,
  type Context,
  columns,
  EXIT,
  EXIT_MEANING,
  type HostCommand,
  out,
} from "./command.js";
import {
  actionsOf,
  type CompletionCommand,
  completionScript,
  optionsOf,
  SHELLS,
  type Shell,
  summaryOf,
} from "./completion.js";
import { address, resolveConfig, tokenProviderOf, UsageError } from "./config.js";
import {
  asOfOption,
  directoryAddress,
  LOG_COMMAND,
  MOMENT_HELP,
  RESTORE_COMMAND,
  versionOption,
} from "./history-commands.js";
import { INSIGHTS_COMMANDS } from "./insights-commands.js";
import { MIRROR_COMMAND } from "./mirror-command.js";
import { createProgress } from "./progress.js";
import { PULL_COMMAND, PUSH_COMMAND } from "./transfer-command.js";
import { SDK_VERSION } from "./version.js";

const GLOBAL_OPTIONS = {
  url: { type: "string" },
  token: { type: "string" },
  "client-id": { type: "string" },
  "client-secret": { type: "string" },
  "token-url": { type: "string" },
  issuer: { type: "string" },
  scope: { type: "string" },
  audience: { type: "string" },
  data: { type: "string" },
  "api-version": { type: "string" },
  config: { type: "string" },
  quiet: { type: "boolean", short: "q" },
  help: { type: "boolean", short: "h" },
} as const satisfies ParseArgsConfig["options"];

const GLOBAL_HELP = `Connection options of every client command (flag, environment variable, config file key):
  --url URL              TROVE_URL            url            server (default http://127.0.0.1:13242)
  --token TOKEN          TROVE_TOKEN          token          a bearer token to send as is
  --client-id ID         TROVE_CLIENT_ID      clientId       OAuth 2.0 client credentials ...
  --client-secret S      TROVE_CLIENT_SECRET  clientSecret   ... (tokens are fetched and reused)
  --token-url URL        TROVE_TOKEN_URL      tokenUrl       token endpoint (default {url}/auth/token)
  --issuer URL           TROVE_ISSUER         issuer         or: find the token endpoint by OpenID discovery
  --scope S              TROVE_SCOPE          scope          scopes to ask for
  --audience A           TROVE_AUDIENCE       audience       audience to ask for
  --data DIR             TROVE_DATA           data           data directory of a local development server
                                                             (default ./.trove-data; its dev-issuer.json
                                                             gives tokens when nothing else is set)
  --api-version 1|2      TROVE_API_VERSION    apiVersion     REST API version (default 2); 1: rm refuses a
                                                             directory that is not empty, and stores
                                                             without sync-recursive are not served
  --config FILE          TROVE_CONFIG                        JSON config file (default
                                                             ~/.config/trove/config.json)
  -q, --quiet                                                print nothing but errors: no progress bars,
                                                             no summary lines, no notices
  -h, --help                                                 this help
`;

const EXIT_HELP = `Exit codes (every command; docs/cli.md lists each case):
${Object.entries(EXIT_MEANING)
  .map(([code, meaning]) => `  ${code}  ${meaning}`)
  .join("\n")}
`;

/** The end of every command's help: the shared options are described once, in trove --help. */
const SHARED_HELP = `Connection options (--url, --token, --client-id, --client-secret, --config, ...), -q, -h
and the exit codes are the same for every command: see trove --help.
`;

export { type CliHost, type CliIo, EXIT, type HostCommand } from "./command.js";

/** The top-level help: the host's commands (serve), the client commands, and the shared options. */
function helpOf(host: CliHost): string {
  const hosted = Object.entries(host.commands ?? {});
  const heading =
    hosted.length === 0
      ? "Client commands for a Trove server (the server itself is the `trove` package: trove serve):"
      : `Server:\n${hosted.map(([name, c]) => `  ${name.padEnd(9)} ${c.summary}`).join("\n")}\n\nClient commands (@trove/sdk):`;
  return `Usage: trove <command> [options]

${heading}
  token     print a bearer token
  ls        list a directory                     trove ls home/templates/
  get       download a resource                  trove get home/templates/a.json [FILE]
  put       upload a file or stdin               trove put a.json home/templates/
  rm        delete a resource or a directory     trove rm home/templates/old/
  mkdir     create a directory                   trove mkdir -p home/a/b
  log       list the versions of a resource      trove log home/templates/a.json
  restore   bring back a version or a moment     trove restore home/templates/ --as-of 42
  stores    list, show, create, update, delete stores
  watch     print change events as they happen   trove watch home
  mirror    keep a local directory equal to a store or subtree
  push      upload what differs in a directory   trove push ./site home/site [--delete]
  pull      download what differs into a dir     trove pull home/site ./site [--delete]
  project   content-insights projects: list, create, environments, promote
  report    content-insights reports: create, status, list, download, query
  completion  print a shell completion script    trove completion bash|zsh|fish

Addresses are STORE/PATH: "home" or "home/" is the root of store home. The connection options
(below) go before or after the command: trove --url URL ls home/ is trove ls home/ --url URL.
Run "trove <command> --help" (or "trove help <command>") for a command's options;
"trove --version" prints the version.

${GLOBAL_HELP}
${EXIT_HELP}`;
}

export const HELP = helpOf({});

function display(store: string, path: string): string {
  return `${store}/${path}`;
}

function entryName(e: ListingEntry): string {
  return e.directory ? `${e.name}/` : e.name;
}

/** ls -l: type, size, last-modified, tag, name, then deleted / access / blob when asked for. */
function longListing(entries: ListingEntry[]): string[] {
  return columns(
    entries.map((e) => [
      e.directory ? "dir" : e.type || "-",
      e.directory ? "-" : String(e.size ?? ""),
      e.lastModified.toISOString(),
      e.tag,
      entryName(e),
      [e.deleted ? "deleted" : "", e.access ? e.access.join(",") : "", e.blob ?? ""].filter(Boolean).join("  "),
    ]),
    new Set([1]),
  );
}

/**
 * `ls` of a file: its entry in its parent's listing (the same options, so the same access
 * decision, --as-of and --deleted), when listing PATH as a directory answered 404 and PATH names
 * no directory. Anything else rethrows `failed`, the listing's own error.
 */
async function fileEntry(
  rest: TroveRestClient,
  store: string,
  path: string,
  options: ListOptions,
  failed: unknown,
): Promise<ListingEntry> {
  const name = path.replace(/^\/+/, "");
  const slash = name.lastIndexOf("/");
  if (!(failed instanceof TroveError && failed.status === 404) || name === "" || name.endsWith("/")) throw failed;
  const parent = await rest.list(store, name.slice(0, slash + 1), { ...options, recursive: false }).catch(() => {
    throw failed;
  });
  const entry = parent.entries.find((e) => e.name === name.slice(slash + 1) && !e.directory);
  if (!entry) throw failed;
  return entry;
}

function storeLines(stores: StoreInfo[]): string[] {
  return columns(stores.map((s) => [s.name, s.type, s.features.join(","), s.tag]));
}

function feedLine(e: FeedEvent): string {
  if (e.kind === "reset") return `RESET ${e.store} ${e.eventId}`;
  return ["CHANGE", e.eventId, e.uri, e.operation, e.previousTag, e.tag, e.type].join("|");
}

function settingsOf(values: string[] | undefined): Record<string, string> | undefined {
  if (!values || values.length === 0) return undefined;
  const settings: Record<string, string> = {};
  for (const v of values) {
    const eq = v.indexOf("=");
    if (eq <= 0) throw new UsageError(`--set takes NAME=VALUE, not ${JSON.stringify(v)}`);
    settings[v.slice(0, eq)] = v.slice(eq + 1);
  }
  return settings;
}

const COMMANDS: Record<string, Command> = {
  token: {
    help: `Usage: trove token [options]

Prints a bearer token: from the client credentials given (--client-id/--client-secret), or,
for a local development server (\`trove serve\` without --issuer), from the credentials in its
data directory (--data, default ./.trove-data):

  curl -H "Authorization: Bearer $(trove token)" http://127.0.0.1:13242/resources/v2/stores
`,
    options: {},
    async run(ctx) {
      const provider = await tokenProviderOf(ctx.config);
      if (!provider) {
        throw new UsageError(
          `no credentials: give --client-id and --client-secret (or TROVE_CLIENT_ID/TROVE_CLIENT_SECRET), --token, ` +
            `or --data with the data directory of a development server (no ${join(ctx.config.data, "dev-issuer.json")})`,
        );
      }
      out(ctx.io, `${await provider.getToken()}\n`);
      return EXIT.ok;
    },
  },

  ls: {
    help: `Usage: trove ls STORE[/PATH] [options]

Lists a directory (names; directories end with /); with --as-of, as it was at a moment. A
file is listed as ls lists one: one line, its address as given (-l: its columns; --json: its
entry as its directory's listing gives it).

Options:
  -r, --recursive      list everything below, with paths relative to the directory
  -l, --long           type, size, last-modified, tag and name
      --deleted        include recently deleted entries (marked "deleted" with -l)
      --access         show what you may do with each entry (with -l)
      --blob           show blob UUIDs (with -l)
      --json           the entries as a JSON array
      --as-of T        the directory as it was at T (what you may read now)

${MOMENT_HELP}
`,
    options: {
      recursive: { type: "boolean", short: "r" },
      long: { type: "boolean", short: "l" },
      deleted: { type: "boolean" },
      access: { type: "boolean" },
      blob: { type: "boolean" },
      json: { type: "boolean" },
      "as-of": { type: "string" },
    },
    remote: { paths: [0] },
    async run(ctx) {
      const { store, path } = address(ctx.positionals[0]);
      const options = {
        recursive: ctx.values.recursive === true,
        includeDeleted: ctx.values.deleted === true,
        includeAccess: ctx.values.access === true,
        includeBlobUuid: ctx.values.blob === true,
        asOf: asOfOption(ctx),
      };
      const rest = await ctx.rest();
      let entries: ListingEntry[];
      try {
        entries = (await rest.list(store, path, options)).entries;
      } catch (err) {
        const file = await fileEntry(rest, store, path, options, err);
        // As ls of a file: one line, named as the address was given (--json: the parent's entry).
        entries = [ctx.values.json ? file : { ...file, name: display(store, path) }];
      }
      if (ctx.values.json) out(ctx.io, `${JSON.stringify(entries, null, 2)}\n`);
      else {
        const lines = ctx.values.long ? longListing(entries) : entries.map(entryName);
        for (const line of lines) out(ctx.io, `${line}\n`);
      }
      return EXIT.ok;
    },
  },

  get: {
    help: `Usage: trove get STORE/PATH [FILE|-] [options]

Downloads a resource to FILE (written to a temporary file and renamed), or to stdout; into a
directory FILE under the resource's name. A directory of the store is refused (exit 2): list
it with trove ls. An earlier state with --version (trove log lists them) or --as-of.

Options:
  -o, --output FILE        same as FILE
      --if-none-match TAG  download only if the resource's tag is not TAG (else exit 0, nothing written)
      --override-mime TYPE ask the server to answer with this Content-Type
      --version TAG        the contents of the resource's version TAG (exit 3 when it has none)
      --as-of T            the contents it had at T (exit 3 when it did not exist then)

${MOMENT_HELP}
`,
    options: {
      output: { type: "string", short: "o" },
      "if-none-match": { type: "string" },
      "override-mime": { type: "string" },
      version: { type: "string" },
      "as-of": { type: "string" },
    },
    remote: { paths: [0] },
    async run(ctx) {
      const { store, path } = address(ctx.positionals[0]);
      const dest = (ctx.values.output as string | undefined) ?? ctx.positionals[1] ?? "-";
      const version = versionOption(ctx);
      const asOf = asOfOption(ctx);
      if (version !== undefined && asOf !== undefined) {
        throw new UsageError("--version and --as-of do not go together: a tag names one state already");
      }
      const isDirectory = () =>
        new UsageError(
          `${display(store, path)} is a directory, not a resource: list it with trove ls ${directoryAddress(store, path)}` +
            (asOf === undefined ? "" : ` --as-of ${asOf}`),
        );
      if (path === "" || path.endsWith("/")) throw isDirectory();
      const rest = await ctx.rest();
      const options = {
        as: "stream",
        ifNoneMatch: ctx.values["if-none-match"] as string | undefined,
        overrideMime: ctx.values["override-mime"] as string | undefined,
      } as const;
      const got =
        version === undefined
          ? await rest.get(store, path, { ...options, asOf })
          : await rest.getVersion(store, path, version, options);
      if (ctx.answeredByDirectory()) {
        if (!got.notModified) await got.body.cancel();
        throw isDirectory();
      }
      if (got.notModified) {
        if (!ctx.values.quiet) ctx.io.stderr.write(`not modified: ${display(store, path)} has tag ${got.tag}\n`);
        return EXIT.ok;
      }
      const progress = createProgress(`get ${basename(path)}`, {
        stream: ctx.io.stderr,
        enabled: !ctx.quiet && dest !== "-",
      });
      let received = 0;
      const counter = new Transform({
        transform(chunk: Buffer, _encoding, callback) {
          received += chunk.byteLength;
          progress.update(received, got.size);
          callback(null, chunk);
        },
      });
      const body = Readable.fromWeb(got.body as import("node:stream/web").ReadableStream);
      if (dest === "-") {
        await pipeline(body, counter, ctx.io.stdout, { end: false });
      } else {
        const target = (await stat(dest).catch(() => undefined))?.isDirectory() ? join(dest, basename(path)) : dest;
        const tmp = join(dirname(target), `.${basename(target)}.trove-${process.pid}-${Date.now()}`);
        try {
          await pipeline(body, counter, createWriteStream(tmp));
          await rename(tmp, target);
        } catch (err) {
          await removeFile(tmp, { force: true });
          throw err;
        }
      }
      progress.finish();
      return EXIT.ok;
    },
  },

  put: {
    help: `Usage: trove put FILE|- STORE/PATH [options]

Uploads FILE (or stdin) as a resource, streamed. Into a directory, as cp does, when the address
ends with / or names an existing directory: trove put a.json home/templates uploads
home/templates/a.json. Prints "created" or "updated", the address and the new tag.

Options:
      --if-match TAG   replace only if the stored tag is TAG (exit 4 otherwise)
  -n, --no-clobber     only create: if something exists at the address (a resource or a
                       directory; not a deleted one), change nothing and exit 4 (the server
                       decides, atomically: If-None-Match: *)
      --type MIME      Content-Type (default: from the extension, on the server)
`,
    options: {
      "if-match": { type: "string" },
      "no-clobber": { type: "boolean", short: "n" },
      type: { type: "string" },
    },
    remote: { paths: [1] },
    async run(ctx) {
      const [source, target] = ctx.positionals;
      if (!source) throw new UsageError("missing the file to upload (or - for stdin)");
      const addr = address(target);
      const rest = await ctx.rest();
      let path = addr.path;
      // An existing directory named without its / (HEAD answers from the directory it redirects to).
      const intoDirectory =
        path === "" ||
        path.endsWith("/") ||
        (await rest.head(addr.store, path).then(
          () => ctx.answeredByDirectory(),
          () => false,
        ));
      if (intoDirectory) {
        if (source === "-") {
          throw new UsageError(
            `${display(addr.store, path)} is a directory: uploading stdin needs the resource's full STORE/PATH`,
          );
        }
        path = `${path.replace(/\/*$/, "/").replace(/^\/$/, "")}${basename(source)}`;
      }
      let size: number | undefined;
      let body: Readable;
      if (source === "-") body = Readable.from(ctx.io.stdin as AsyncIterable<Buffer>);
      else {
        const s = await stat(source).catch(() => undefined);
        if (!s?.isFile()) throw new UsageError(`${source} is not a readable file`);
        size = s.size;
        body = createReadStream(source);
      }
      const progress = createProgress(`put ${basename(path)}`, { stream: ctx.io.stderr, enabled: !ctx.quiet });
      const put = await rest.put(addr.store, path, body, {
        ifMatch: ctx.values["if-match"] as string | undefined,
        ...(ctx.values["no-clobber"] ? { ifNoneMatch: "*" } : {}),
        contentType: ctx.values.type as string | undefined,
        contentLength: size,
        onProgress: (n) => progress.update(n, size),
      });
      progress.finish();
      out(ctx.io, `${put.created ? "created" : "updated"} ${display(addr.store, path)} ${put.tag}\n`);
      return EXIT.ok;
    },
  },

  rm: {
    help: `Usage: trove rm STORE/PATH [options]

Deletes a resource, or a directory with everything in it (with --api-version 1 only an
empty directory: one that is not empty exits 8 and nothing is deleted).

Options:
      --if-match TAG   delete only if the stored tag is TAG (exit 4 otherwise)
`,
    options: { "if-match": { type: "string" } },
    remote: { paths: [0] },
    async run(ctx) {
      const { store, path } = address(ctx.positionals[0]);
      if (path === "" || path === "/")
        throw new UsageError("refusing to delete a store's root: use trove stores delete");
      await (await ctx.rest()).delete(store, path, { ifMatch: ctx.values["if-match"] as string | undefined });
      return EXIT.ok;
    },
  },

  mkdir: {
    help: `Usage: trove mkdir STORE/PATH [options]

Creates a directory (its parent must exist; an existing directory is fine).

Options:
  -p, --parents   create missing parents too
`,
    options: { parents: { type: "boolean", short: "p" } },
    remote: { paths: [0] },
    async run(ctx) {
      const { store, path } = address(ctx.positionals[0]);
      const segments = path.split("/").filter((s) => s !== "");
      if (segments.length === 0) throw new UsageError("give the directory to create: STORE/PATH");
      const rest = await ctx.rest();
      const dirs = ctx.values.parents
        ? segments.map((_, i) => segments.slice(0, i + 1).join("/"))
        : [segments.join("/")];
      for (const dir of dirs) await rest.mkdir(store, dir);
      return EXIT.ok;
    },
  },

  stores: {
    help: `Usage: trove stores [list] [--json]
       trove stores get NAME [--json]
       trove stores show NAME [--json]     (the same as get)
       trove stores create NAME [--type recursive|snapshot|filesystem] [--set NAME=VALUE ...]
       trove stores update NAME [--type recursive|snapshot|filesystem] [--set NAME=VALUE ...]
       trove stores delete NAME

Lists stores (name, type, features, tag), shows one (with its settings), or changes them
(creating, updating and deleting needs the stores:admin permission).

Options:
      --type TYPE         store type: recursive (sync-recursive), snapshot (sync-snapshot) or
                          filesystem (an existing folder's plain files: --set filesystem-location=DIR)
      --set NAME=VALUE    a setting, e.g. --set keep-deleted=1d (repeatable)
      --json              JSON output
`,
    options: { type: { type: "string" }, set: { type: "string", multiple: true }, json: { type: "boolean" } },
    remote: { stores: [1] },
    async run(ctx) {
      const [action = "list", name, extra] = ctx.positionals;
      if (extra !== undefined) throw new UsageError(`unexpected argument ${JSON.stringify(extra)}`);
      const rest = await ctx.rest();
      const show = (s: StoreInfo) => {
        if (ctx.values.json) out(ctx.io, `${JSON.stringify(s, null, 2)}\n`);
        else {
          out(ctx.io, `${storeLines([s])[0]}\n`);
          for (const [k, v] of Object.entries(s.settings)) out(ctx.io, `  ${k}=${v}\n`);
        }
      };
      const input = () => ({
        ...(ctx.values.type ? { type: ctx.values.type as string } : {}),
        ...(settingsOf(ctx.values.set as string[] | undefined)
          ? { settings: settingsOf(ctx.values.set as string[]) }
          : {}),
      });
      if (action === "list") {
        if (name !== undefined) throw new UsageError(`unexpected argument ${JSON.stringify(name)}`);
        const stores = await rest.stores.list();
        if (ctx.values.json) out(ctx.io, `${JSON.stringify(stores, null, 2)}\n`);
        else for (const line of storeLines(stores)) out(ctx.io, `${line}\n`);
        return EXIT.ok;
      }
      if (!name) throw new UsageError(`trove stores ${action} needs a store name`);
      switch (action) {
        case "get":
        case "show":
          show(await rest.stores.get(name));
          return EXIT.ok;
        case "create":
          show(await rest.stores.create(name, input()));
          return EXIT.ok;
        case "update":
          show(await rest.stores.update(name, input()));
          return EXIT.ok;
        case "delete":
          await rest.stores.delete(name);
          return EXIT.ok;
        default:
          throw new UsageError(`unknown action ${JSON.stringify(action)}: list, get, show, create, update or delete`);
      }
    },
  },

  watch: {
    help: `Usage: trove watch [STORE ...] [options]

Prints change events as they happen, one line each, in the poll format
(CHANGE|id|idr://store/path|modify|previous tag|tag|type, RESET store id), until interrupted.
Without STORE: every store you may read.

When the server goes away (or cannot be reached at the start), watch says so on stderr and
retries with exponential backoff (from 0.25 s, doubling, with jitter, at most 10 s apart), then
continues after the last event it printed: no event is missed or printed twice.

Options:
      --from ID    start after event ID (one STORE only; default: from now)
      --once       exit after one poll (after the first events, or --wait seconds without any)
      --json       one JSON object per event
      --wait S     seconds each long poll waits (default 30)
      --no-retry   exit 7 when the server cannot be reached or is unavailable, instead of retrying
`,
    options: {
      from: { type: "string" },
      once: { type: "boolean" },
      json: { type: "boolean" },
      wait: { type: "string" },
      "no-retry": { type: "boolean" },
    },
    remote: { stores: "all" },
    async run(ctx) {
      const rest = await ctx.rest();
      const stores = ctx.positionals;
      const wait = ctx.values.wait === undefined ? 30 : Number(ctx.values.wait);
      if (!Number.isFinite(wait) || wait < 0) throw new UsageError("--wait takes a number of seconds");
      const cursors = new Map<string, number>();
      if (ctx.values.from !== undefined) {
        if (stores.length !== 1) throw new UsageError("--from needs exactly one STORE");
        if (!/^\d+$/.test(ctx.values.from as string)) throw new UsageError("--from takes an event id");
      }
      const { signal } = ctx.io;
      const poll = reconnecting(ctx, "watch", () => rest.baseUrl);
      if (ctx.values.from !== undefined) cursors.set(stores[0] as string, Number(ctx.values.from));
      else {
        const status = await poll(() => rest.poll({ signal }));
        if (status === undefined) return EXIT.ok;
        for (const e of status) {
          if (e.kind === "reset" && (stores.length === 0 || stores.includes(e.store))) cursors.set(e.store, e.eventId);
        }
        // The status names every store the caller may read: another name is a mistake, not a wait.
        const unknown = stores.filter((s) => !cursors.has(s));
        if (unknown.length > 0) {
          throw new NotFoundError(404, `no store ${unknown.join(", ")} (or not one you may read)`);
        }
      }
      if (cursors.size === 0) throw new UsageError("there is no store to watch");
      while (!signal?.aborted) {
        const events: FeedEvent[] | undefined = await poll(() => rest.poll({ cursors, wait, signal }));
        if (events === undefined) break;
        for (const e of events) {
          out(ctx.io, `${ctx.values.json ? JSON.stringify(e) : feedLine(e)}\n`);
          if (e.kind === "reset" || e.eventId > (cursors.get(e.store) ?? -1)) cursors.set(e.store, e.eventId);
        }
        if (ctx.values.once) break;
      }
      return EXIT.ok;
    },
  },

  log: LOG_COMMAND,
  restore: RESTORE_COMMAND,
  mirror: MIRROR_COMMAND,
  push: PUSH_COMMAND,
  pull: PULL_COMMAND,

  ...INSIGHTS_COMMANDS,
};

/**
 * Runs a request of a command that follows the server (watch) until it succeeds: a transient
 * failure (the server unreachable, restarting, unavailable) is said on stderr and retried with
 * backoff, and the first success after it is said too; with --no-retry it is thrown (exit 7).
 * Resolves undefined when the command is interrupted.
 */
function reconnecting(ctx: Context, command: string, url: () => string) {
  const backoff = createBackoff();
  let failing = false;
  return async <T>(request: () => Promise<T>): Promise<T | undefined> => {
    const { signal } = ctx.io;
    while (!signal?.aborted) {
      try {
        const answer = await request();
        if (failing) ctx.io.stderr.write(`trove ${command}: reconnected to ${url()}\n`);
        failing = false;
        backoff.reset();
        return answer;
      } catch (err) {
        if (signal?.aborted) return undefined;
        if (ctx.values["no-retry"] === true || !isTransient(err)) throw err;
        failing = true;
        const delay = backoff.next();
        ctx.io.stderr.write(`${failure(err, command).message}; retrying in ${delay} ms\n`);
        await pause(delay, signal);
      }
    }
    return undefined;
  };
}

/** The exit code a script sees for an error answer. */
function exitCodeOf(err: TroveError): number {
  // By class, and by status for answers that are plain TroveErrors (e.g. "no project named X").
  // A moment older than the history kept is as gone as a purged version's tag (404): not found.
  if (err instanceof NotFoundError || err instanceof HistoryPurgedError || err.status === 404 || err.status === 410) {
    return EXIT.notFound;
  }
  if (err instanceof PreconditionFailedError || err.status === 412) return EXIT.preconditionFailed;
  if (err instanceof ConflictError || err.status === 409) return EXIT.conflict;
  if (err instanceof UnauthorizedError || err.status === 401) return EXIT.unauthorized;
  if (err instanceof ForbiddenError || err.status === 403) return EXIT.forbidden;
  if (err instanceof ConnectionError || err instanceof UnavailableError || err.status === 503) return EXIT.unavailable;
  return EXIT.error;
}

/** The exit code and message for an error. */
function failure(err: unknown, command: string): { code: number; message: string } {
  const prefix = `trove ${command}`;
  if (err instanceof UsageError) return { code: EXIT.usage, message: `${prefix}: ${err.message}` };
  if (err instanceof TroveError) {
    const what = err instanceof ConnectionError ? err.reason : `${err.status ? `${err.status} ` : ""}${err.reason}`;
    const code = exitCodeOf(err);
    return { code, message: `${prefix}: ${what}` };
  }
  const e = err as NodeJS.ErrnoException;
  if ((e as { code?: string }).code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" || e?.code?.startsWith?.("ERR_PARSE_ARGS")) {
    return { code: EXIT.usage, message: `${prefix}: ${e.message}` };
  }
  return { code: EXIT.error, message: `${prefix}: ${e?.message ?? String(err)}` };
}

/** The process's streams and environment; SIGINT and SIGTERM stop watch and mirror. */
function defaultIo(): CliIo {
  const controller = new AbortController();
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => controller.abort());
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    env: process.env,
    signal: controller.signal,
  };
}

/** Every command `trove` completes: the host's, the client commands (with the connection options), completion. */
export function completionCommands(host: CliHost = {}): CompletionCommand[] {
  const help: CompletionCommand["options"] = [{ long: "help", short: "h", value: false }];
  return [
    ...Object.entries(host.commands ?? {}).map(([name, c]) => ({
      name,
      summary: c.summary,
      options: optionsOf(c.options),
      actions: actionsOf(name, c.help),
    })),
    ...Object.entries(COMMANDS).map(([name, c]) => ({
      name,
      summary: summaryOf(c.help),
      options: optionsOf({ ...c.options, ...GLOBAL_OPTIONS }),
      actions: actionsOf(name, c.help),
      ...(c.remote ? { remote: c.remote } : {}),
    })),
    { name: "completion", summary: "Prints a shell completion script", options: help, actions: [...SHELLS] },
    {
      name: "help",
      summary: "Prints the help of a command",
      options: help,
      actions: [...Object.keys(host.commands ?? {}), ...Object.keys(COMMANDS), "completion"],
    },
  ];
}

const COMPLETION_HELP = `Usage: trove completion bash|zsh|fish

Prints a completion script for the shell: commands, their actions and options (files where a
value or a local path goes), and remote STORE/PATHs and store names, asked of the server (with
the connection options on the command line) each time; nothing, quietly, when the server does
not answer within 2 seconds.

  source <(trove completion bash)       # bash, now; for good:
  trove completion bash > ~/.local/share/bash-completion/completions/trove
  source <(trove completion zsh)        # zsh (after compinit); for good:
  trove completion zsh > "\${fpath[1]}/_trove"
  trove completion fish | source        # fish; for good:
  trove completion fish > ~/.config/fish/completions/trove.fish
`;

function completion(args: string[], io: CliIo, host: CliHost): number {
  const { values, positionals } = parseArgs({
    args,
    options: { help: { type: "boolean", short: "h" } },
    strict: true,
    allowPositionals: true,
  });
  if (values.help) {
    out(io, COMPLETION_HELP);
    return EXIT.ok;
  }
  const [shell, extra] = positionals;
  if (shell === undefined || extra !== undefined || !(SHELLS as readonly string[]).includes(shell)) {
    throw new UsageError(
      `${shell === undefined ? "missing the shell" : `unexpected ${JSON.stringify(extra ?? shell)}`}: give one of ${SHELLS.join(", ")}`,
    );
  }
  out(io, completionScript(shell as Shell, completionCommands(host)));
  return EXIT.ok;
}

/** fetch that notes whether its last answer came from a directory the server redirected to. */
function directoryNoting(through: typeof fetch = fetch): { fetch: typeof fetch; answeredByDirectory(): boolean } {
  let directory = false;
  return {
    async fetch(input, init) {
      directory = false;
      const res = await through(input, init);
      directory = res.redirected && new URL(res.url).pathname.endsWith("/");
      return res;
    },
    answeredByDirectory: () => directory,
  };
}

/**
 * The arguments with each option that takes a value given as the next word (`--version TAG`,
 * `-o FILE`) joined to it (`--version=TAG`): the next word is its value whatever it begins with,
 * as getopt and git take it. parseArgs alone refuses a value that begins with "-", and a tag
 * (12 base64url characters) does one time in 64.
 */
export function valuesJoined(args: readonly string[], options: NonNullable<ParseArgsConfig["options"]>): string[] {
  const joined: string[] = [];
  for (let i = 0; i < args.length; i += 1) {
    const arg = args[i] as string;
    if (arg === "--") {
      joined.push(...args.slice(i));
      break;
    }
    const name = arg.startsWith("--")
      ? arg.slice(2)
      : /^-[^-]$/.test(arg)
        ? Object.keys(options).find((k) => options[k]?.short === arg[1])
        : undefined;
    if (name !== undefined && options[name]?.type === "string" && i + 1 < args.length) {
      joined.push(`--${name}=${args[i + 1]}`);
      i += 1;
    } else {
      joined.push(arg);
    }
  }
  return joined;
}

async function runCommand(spec: Command, args: string[], io: CliIo): Promise<number> {
  const options = { ...GLOBAL_OPTIONS, ...spec.options };
  const { values, positionals } = parseArgs({
    args: valuesJoined(args, options),
    options,
    strict: true,
    allowPositionals: true,
  });
  if (values.help) {
    out(io, `${spec.help}\n${SHARED_HELP}`);
    return EXIT.ok;
  }
  const config = await resolveConfig(values, io.env);
  const noting = directoryNoting();
  let client: TroveRestClient | undefined;
  let h2cClient: TroveRestClient | undefined;
  const ctx: Context = {
    io,
    values: values as Context["values"],
    positionals,
    config,
    quiet: values.quiet === true,
    async rest(options) {
      if (options?.h2c) {
        h2cClient ??= createRestClient({
          baseUrl: config.url,
          auth: await tokenProviderOf(config),
          fetch: createH2cFetch(config.url),
          apiVersion: config.apiVersion,
        });
        return h2cClient;
      }
      client ??= createRestClient({
        baseUrl: config.url,
        auth: await tokenProviderOf(config),
        fetch: noting.fetch,
        apiVersion: config.apiVersion,
      });
      return client;
    },
    answeredByDirectory: noting.answeredByDirectory,
  };
  return spec.run(ctx);
}

/** `trove help COMMAND`: the same as `trove COMMAND --help`. */
async function helpOfCommand(args: string[], io: CliIo, host: CliHost): Promise<number> {
  let name: string | undefined;
  try {
    const { values, positionals } = parseArgs({
      args,
      options: { help: { type: "boolean", short: "h" } },
      strict: true,
      allowPositionals: true,
    });
    if (positionals.length > 1) throw new UsageError(`give one command, not ${positionals.join(" ")}`);
    name = values.help ? undefined : positionals[0];
  } catch (err) {
    const { code, message } = failure(err, "help");
    io.stderr.write(`${message}\n`);
    return code;
  }
  return name === undefined ? run(["--help"], io, host) : run([name, "--help"], io, host);
}

/** The global option `arg` is (`--url`, `--url=X`, `-q`), or undefined. */
function globalOption(arg: string): NonNullable<ParseArgsConfig["options"]>[string] | undefined {
  const globals: NonNullable<ParseArgsConfig["options"]> = GLOBAL_OPTIONS;
  const long = arg.startsWith("--") ? arg.slice(2).split("=")[0] : undefined;
  const name = long ?? Object.keys(globals).find((k) => `-${globals[k]?.short}` === arg);
  return name !== undefined && Object.hasOwn(globals, name) ? globals[name] : undefined;
}

/** The hidden command the completion scripts run: `trove __complete path|store WORD [-- WORDS...]`. */
const COMPLETE_REMOTE = "__complete";

/** How long completion waits for the server (token included) before it completes nothing. */
const COMPLETE_TIMEOUT_MS = 2000;

/**
 * Prints the remote candidates for WORD, one a line: store names (`store`), or for a STORE/PATH
 * (`path`) the stores as `NAME/`, then the entries of the directory WORD is in (directories end
 * with /). The connection options among WORDS (the command line) are used; everything else in
 * them is ignored. Anything that goes wrong, a server that does not answer within
 * COMPLETE_TIMEOUT_MS included, completes nothing, quietly: exit 0, no stderr.
 */
async function completeRemote(args: string[], io: CliIo): Promise<number> {
  const [kind, word = "", ...rest] = args;
  const words = rest[0] === "--" ? rest.slice(1) : rest;
  const values: Record<string, string | boolean> = {};
  words.forEach((arg, i) => {
    if (!arg.startsWith("--") || globalOption(arg)?.type !== "string") return;
    const eq = arg.indexOf("=");
    const value = eq > 0 ? arg.slice(eq + 1) : words[i + 1];
    if (value !== undefined) values[arg.slice(2, eq > 0 ? eq : undefined)] = value;
  });
  const signal = AbortSignal.timeout(COMPLETE_TIMEOUT_MS);
  const candidates = (async () => {
    const config = await resolveConfig(values, io.env);
    const client = createRestClient({
      baseUrl: config.url,
      auth: await tokenProviderOf(config),
      apiVersion: config.apiVersion,
      fetch: (input, init) => fetch(input, { ...init, signal }),
    });
    return remoteCandidates(client, kind, word, signal);
  })();
  const timedOut = new Promise<string[]>((resolve) => signal.addEventListener("abort", () => resolve([])));
  const found = await Promise.race([candidates, timedOut]).catch(() => [] as string[]);
  for (const candidate of found) out(io, `${candidate}\n`);
  return EXIT.ok;
}

async function remoteCandidates(
  client: TroveRestClient,
  kind: string | undefined,
  word: string,
  signal: AbortSignal,
): Promise<string[]> {
  const slash = word.indexOf("/");
  if (kind === "store" || (kind === "path" && slash < 0)) {
    const names = (await client.stores.list({ signal })).map((s) => s.name).filter((n) => n.startsWith(word));
    return kind === "store" ? names : names.map((n) => `${n}/`);
  }
  if (kind !== "path") return [];
  const store = word.slice(0, slash);
  const dir = word.slice(slash + 1, word.lastIndexOf("/") + 1);
  const prefix = word.slice(word.lastIndexOf("/") + 1);
  const listing = await client.list(store, dir, { signal });
  return listing.entries
    .filter((e) => !e.deleted && e.name.startsWith(prefix))
    .map((e) => `${store}/${dir}${e.name}${e.directory ? "/" : ""}`);
}

/**
 * Splits the connection options given before the command (as git, kubectl and rclone take them)
 * from the command and its arguments. Only the global options may come first; anything else that
 * starts with - before the command is a usage error (--help, -h, --version and -V are the command).
 */
function splitLeadingOptions(argv: string[]): { leading: string[]; command: string | undefined; rest: string[] } {
  const leading: string[] = [];
  let i = 0;
  for (; i < argv.length; i++) {
    const arg = argv[i] as string;
    if (!arg.startsWith("-") || arg === "-" || ["--version", "-V"].includes(arg)) break;
    if (arg === "--") {
      i += 1;
      break;
    }
    const option = globalOption(arg);
    if (!option) {
      throw new UsageError(
        `unknown option ${arg.split("=")[0]} before the command: give the command first, or only the connection options`,
      );
    }
    leading.push(arg);
    if (option.type === "string" && !arg.includes("=")) {
      const value = argv[i + 1];
      if (value === undefined) throw new UsageError(`option ${arg} needs a value`);
      leading.push(value);
      i += 1;
    }
  }
  return { leading, command: argv[i], rest: argv.slice(i + 1) };
}

/**
 * Runs one `trove` command; resolves to its exit code (it never calls process.exit). `host`
 * adds the commands of the package that calls it (the server package's `serve`).
 */
export async function run(argv: string[], io: CliIo = defaultIo(), host: CliHost = {}): Promise<number> {
  const help = host.commands ? helpOf(host) : HELP;
  let leading: string[];
  let command: string | undefined;
  let rest: string[];
  try {
    ({ leading, command, rest } = splitLeadingOptions(argv));
  } catch (err) {
    io.stderr.write(`trove: ${(err as Error).message}\n`);
    return EXIT.usage;
  }
  // A command's arguments are its own after the options given before it (`trove --url X ls home/`
  // is `trove ls home/ --url X`): a value given in both places is the one after the command.
  const args = [...leading, ...rest];
  if (command === undefined && leading.some((a) => a === "--help" || a === "-h")) {
    out(io, help);
    return EXIT.ok;
  }
  if (command === "help" && rest.length > 0) return helpOfCommand(rest, io, host);
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    out(io, help);
    return command === undefined ? EXIT.usage : EXIT.ok;
  }
  if (command === "--version" || command === "-V" || command === "version") {
    out(io, host.version ? await host.version() : `@trove/sdk ${SDK_VERSION}\n`);
    return EXIT.ok;
  }
  if (command === COMPLETE_REMOTE) return completeRemote(rest, io);
  const hosted: HostCommand | undefined = host.commands?.[command];
  if (command === "serve" && !hosted) {
    io.stderr.write(
      "trove serve: the server is not part of @trove/sdk. It is the `trove` package: from a Trove\n" +
        "checkout run `npx trove serve` (see its README). This package holds the client commands.\n",
    );
    return EXIT.usage;
  }
  const spec = COMMANDS[command];
  if (!spec && !hosted && command !== "completion") {
    io.stderr.write(`trove: unknown command ${JSON.stringify(command)}\n\n${help}`);
    return EXIT.usage;
  }
  try {
    if (hosted) return await hosted.run(args, io);
    if (!spec) return completion(args, io, host);
    return await runCommand(spec, args, io);
  } catch (err) {
    const { code, message } = failure(err, command);
    io.stderr.write(`${message}\n`);
    return code;
  }
}
