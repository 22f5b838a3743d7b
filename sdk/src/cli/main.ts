// The `trove` client commands: token, ls, get, put, rm, mkdir, stores, watch,
// mirror. `run` returns the exit code; the bin (and the server package's `trove`)
// call it. Exit codes are documented in EXIT below and in the README.

import { createReadStream, createWriteStream } from "node:fs";
import { rm as removeFile, rename, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { type ParseArgsConfig, parseArgs } from "node:util";
import {
  ConflictError,
  ConnectionError,
  ForbiddenError,
  NotFoundError,
  PreconditionFailedError,
  TroveError,
  UnauthorizedError,
  UnavailableError,
} from "../errors.js";
import { createRestClient, type TroveRestClient } from "../rest/client.js";
import type { FeedEvent } from "../rest/poll.js";
import type { ListingEntry, StoreInfo } from "../rest/xml.js";
import { type CliIo, type Command, type Context, EXIT, out } from "./command.js";
import { address, resolveConfig, tokenProviderOf, UsageError } from "./config.js";
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
  config: { type: "string" },
  quiet: { type: "boolean", short: "q" },
  help: { type: "boolean", short: "h" },
} as const satisfies ParseArgsConfig["options"];

const GLOBAL_HELP = `Connection (flag, environment variable, config file key):
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
  --config FILE          TROVE_CONFIG                        JSON config file (default
                                                             ~/.config/trove/config.json)
  -q, --quiet                                                no progress bars
  -h, --help                                                 this help
`;

const EXIT_HELP = `Exit codes: 0 ok, 1 error (also: a report that failed), 2 usage, 3 not found (or
deleted), 4 precondition failed, 5 not authenticated or not authorized, 6 forbidden,
7 server unreachable or unavailable, 8 conflict (a name already taken).
`;

export { type CliIo, EXIT } from "./command.js";

export const HELP = `Usage: trove <command> [options]

Client commands for a Trove server (the server itself is the \`trove\` package: trove serve):
  token     print a bearer token
  ls        list a directory                     trove ls home/templates/
  get       download a resource                  trove get home/templates/a.json [FILE]
  put       upload a file or stdin               trove put a.json home/templates/
  rm        delete a resource or a directory     trove rm home/templates/old/
  mkdir     create a directory                   trove mkdir -p home/a/b
  stores    list, show, create, update, delete stores
  watch     print change events as they happen   trove watch home
  mirror    keep a local directory equal to a store or subtree
  push      upload what differs in a directory   trove push ./site home/site [--delete]
  pull      download what differs into a dir     trove pull home/site ./site [--delete]
  project   content-insights projects: list, create, environments, promote
  report    content-insights reports: create, status, list, download, query

Addresses are STORE/PATH: "home" or "home/" is the root of store home.
Run "trove <command> --help" for a command's options, "trove --version" for the version.

${GLOBAL_HELP}
${EXIT_HELP}`;

function display(store: string, path: string): string {
  return `${store}/${path}`;
}

function entryLine(e: ListingEntry, long: boolean): string {
  const name = e.directory ? `${e.name}/` : e.name;
  if (!long) return name;
  const size = e.directory ? "-" : String(e.size ?? "");
  const flags = [e.deleted ? "deleted" : "", e.access ? e.access.join(",") : "", e.blob ?? ""].filter(Boolean);
  return [
    e.directory ? "dir" : e.type || "-",
    size.padStart(10),
    e.lastModified.toISOString(),
    e.tag,
    name,
    ...flags,
  ].join("  ");
}

function storeLine(s: StoreInfo): string {
  return [s.name, s.type, s.features.join(","), s.tag].join("  ");
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

Lists a directory (names; directories end with /).

Options:
  -r, --recursive      list everything below, with paths relative to the directory
  -l, --long           type, size, last-modified, tag and name
      --deleted        include recently deleted entries (marked "deleted" with -l)
      --access         show what you may do with each entry (with -l)
      --blob           show blob UUIDs (with -l)
      --json           the entries as a JSON array
`,
    options: {
      recursive: { type: "boolean", short: "r" },
      long: { type: "boolean", short: "l" },
      deleted: { type: "boolean" },
      access: { type: "boolean" },
      blob: { type: "boolean" },
      json: { type: "boolean" },
    },
    async run(ctx) {
      const { store, path } = address(ctx.positionals[0]);
      const listing = await (await ctx.rest()).list(store, path, {
        recursive: ctx.values.recursive === true,
        includeDeleted: ctx.values.deleted === true,
        includeAccess: ctx.values.access === true,
        includeBlobUuid: ctx.values.blob === true,
      });
      if (ctx.values.json) out(ctx.io, `${JSON.stringify(listing.entries, null, 2)}\n`);
      else for (const e of listing.entries) out(ctx.io, `${entryLine(e, ctx.values.long === true)}\n`);
      return EXIT.ok;
    },
  },

  get: {
    help: `Usage: trove get STORE/PATH [FILE|-] [options]

Downloads a resource to FILE (written to a temporary file and renamed), or to stdout.

Options:
  -o, --output FILE        same as FILE
      --if-none-match TAG  download only if the resource's tag is not TAG (else exit 0, nothing written)
      --override-mime TYPE ask the server to answer with this Content-Type
`,
    options: {
      output: { type: "string", short: "o" },
      "if-none-match": { type: "string" },
      "override-mime": { type: "string" },
    },
    async run(ctx) {
      const { store, path } = address(ctx.positionals[0]);
      const dest = (ctx.values.output as string | undefined) ?? ctx.positionals[1] ?? "-";
      const got = await (await ctx.rest()).get(store, path, {
        as: "stream",
        ifNoneMatch: ctx.values["if-none-match"] as string | undefined,
        overrideMime: ctx.values["override-mime"] as string | undefined,
      });
      if (got.notModified) {
        if (!ctx.values.quiet) ctx.io.stderr.write(`not modified: ${display(store, path)} has tag ${got.tag}\n`);
        return EXIT.ok;
      }
      const progress = createProgress(`get ${basename(path)}`, {
        stream: ctx.io.stderr,
        enabled: ctx.progress && dest !== "-",
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

Uploads FILE (or stdin) as a resource, streamed; an address ending in / takes the file's name.
Prints "created" or "updated", the address and the new tag.

Options:
      --if-match TAG   replace only if the stored tag is TAG (exit 4 otherwise)
      --type MIME      Content-Type (default: from the extension, on the server)
`,
    options: { "if-match": { type: "string" }, type: { type: "string" } },
    async run(ctx) {
      const [source, target] = ctx.positionals;
      if (!source) throw new UsageError("missing the file to upload (or - for stdin)");
      const addr = address(target);
      let path = addr.path;
      if (path === "" || path.endsWith("/")) {
        if (source === "-") throw new UsageError("uploading stdin needs a full STORE/PATH, not a directory");
        path += basename(source);
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
      const progress = createProgress(`put ${basename(path)}`, { stream: ctx.io.stderr, enabled: ctx.progress });
      const put = await (await ctx.rest()).put(addr.store, path, body, {
        ifMatch: ctx.values["if-match"] as string | undefined,
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

Deletes a resource, or a directory with everything in it.

Options:
      --if-match TAG   delete only if the stored tag is TAG (exit 4 otherwise)
`,
    options: { "if-match": { type: "string" } },
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
       trove stores create NAME [--type recursive|snapshot] [--set NAME=VALUE ...]
       trove stores update NAME [--type recursive|snapshot] [--set NAME=VALUE ...]
       trove stores delete NAME

Lists stores (name, type, features, tag), shows one (with its settings), or changes them
(creating, updating and deleting needs the stores:admin permission).

Options:
      --type TYPE         store type: recursive (sync-recursive) or snapshot (sync-snapshot)
      --set NAME=VALUE    a setting, e.g. --set keep-deleted=1d (repeatable)
      --json              JSON output
`,
    options: { type: { type: "string" }, set: { type: "string", multiple: true }, json: { type: "boolean" } },
    async run(ctx) {
      const [action = "list", name, extra] = ctx.positionals;
      if (extra !== undefined) throw new UsageError(`unexpected argument ${JSON.stringify(extra)}`);
      const rest = await ctx.rest();
      const show = (s: StoreInfo) => {
        if (ctx.values.json) out(ctx.io, `${JSON.stringify(s, null, 2)}\n`);
        else {
          out(ctx.io, `${storeLine(s)}\n`);
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
        else for (const s of stores) out(ctx.io, `${storeLine(s)}\n`);
        return EXIT.ok;
      }
      if (!name) throw new UsageError(`trove stores ${action} needs a store name`);
      switch (action) {
        case "get":
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
          throw new UsageError(`unknown action ${JSON.stringify(action)}: list, get, create, update or delete`);
      }
    },
  },

  watch: {
    help: `Usage: trove watch [STORE ...] [options]

Prints change events as they happen, one line each, in the poll format
(CHANGE|id|idr://store/path|modify|previous tag|tag|type, RESET store id), until interrupted.
Without STORE: every store you may read.

Options:
      --from ID   start after event ID (one STORE only; default: from now)
      --once      exit after the first events
      --json      one JSON object per event
      --wait S    seconds each long poll waits (default 30)
`,
    options: {
      from: { type: "string" },
      once: { type: "boolean" },
      json: { type: "boolean" },
      wait: { type: "string" },
    },
    async run(ctx) {
      const rest = await ctx.rest();
      const stores = ctx.positionals;
      const wait = ctx.values.wait === undefined ? 30 : Number(ctx.values.wait);
      if (!Number.isFinite(wait) || wait < 0) throw new UsageError("--wait takes a number of seconds");
      const cursors = new Map<string, number>();
      if (ctx.values.from !== undefined) {
        if (stores.length !== 1) throw new UsageError("--from needs exactly one STORE");
        if (!/^\d+$/.test(ctx.values.from as string)) throw new UsageError("--from takes an event id");
        cursors.set(stores[0] as string, Number(ctx.values.from));
      } else {
        for (const e of await rest.poll({ signal: ctx.io.signal })) {
          if (e.kind === "reset" && (stores.length === 0 || stores.includes(e.store))) cursors.set(e.store, e.eventId);
        }
        for (const s of stores) if (!cursors.has(s)) cursors.set(s, 0);
      }
      if (cursors.size === 0) throw new UsageError("there is no store to watch");
      while (!ctx.io.signal?.aborted) {
        let events: FeedEvent[];
        try {
          events = await rest.poll({ cursors, wait, signal: ctx.io.signal });
        } catch (err) {
          if (ctx.io.signal?.aborted) break;
          throw err;
        }
        for (const e of events) {
          out(ctx.io, `${ctx.values.json ? JSON.stringify(e) : feedLine(e)}\n`);
          if (e.kind === "reset" || e.eventId > (cursors.get(e.store) ?? -1)) cursors.set(e.store, e.eventId);
        }
        if (ctx.values.once && events.length > 0) break;
      }
      return EXIT.ok;
    },
  },

  mirror: MIRROR_COMMAND,
  push: PUSH_COMMAND,
  pull: PULL_COMMAND,

  ...INSIGHTS_COMMANDS,
};

/** The exit code a script sees for an error answer. */
function exitCodeOf(err: TroveError): number {
  if (err instanceof NotFoundError) return EXIT.notFound;
  if (err instanceof PreconditionFailedError) return EXIT.preconditionFailed;
  if (err instanceof ConflictError) return EXIT.conflict;
  if (err instanceof UnauthorizedError || err.status === 401) return EXIT.unauthorized;
  if (err instanceof ForbiddenError) return EXIT.forbidden;
  if (err instanceof ConnectionError || err instanceof UnavailableError) return EXIT.unavailable;
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

/** Runs one `trove` client command; resolves to its exit code (it never calls process.exit). */
export async function run(argv: string[], io: CliIo = defaultIo()): Promise<number> {
  const [command, ...args] = argv;
  if (command === undefined || command === "help" || command === "--help" || command === "-h") {
    out(io, HELP);
    return command === undefined ? EXIT.usage : EXIT.ok;
  }
  if (command === "--version" || command === "-V" || command === "version") {
    out(io, `@trove/sdk ${SDK_VERSION}\n`);
    return EXIT.ok;
  }
  if (command === "serve") {
    io.stderr.write(
      "trove serve: the server is not part of @trove/sdk. It is the `trove` package: from a Trove\n" +
        "checkout run `npx trove serve` (see its README). This package holds the client commands.\n",
    );
    return EXIT.usage;
  }
  const spec = COMMANDS[command];
  if (!spec) {
    io.stderr.write(`trove: unknown command ${JSON.stringify(command)}\n\n${HELP}`);
    return EXIT.usage;
  }
  try {
    const { values, positionals } = parseArgs({
      args,
      options: { ...GLOBAL_OPTIONS, ...spec.options },
      strict: true,
      allowPositionals: true,
    });
    if (values.help) {
      out(io, `${spec.help}\n${GLOBAL_HELP}\n${EXIT_HELP}`);
      return EXIT.ok;
    }
    const config = await resolveConfig(values, io.env);
    let client: TroveRestClient | undefined;
    const ctx: Context = {
      io,
      values: values as Context["values"],
      positionals,
      config,
      progress: values.quiet !== true,
      async rest() {
        client ??= createRestClient({ baseUrl: config.url, auth: await tokenProviderOf(config) });
        return client;
      },
    };
    return await spec.run(ctx);
  } catch (err) {
    const { code, message } = failure(err, command);
    io.stderr.write(`${message}\n`);
    return code;
  }
}
