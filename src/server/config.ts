// Server configuration from flags, then environment variables, then defaults: one table of options
// (OPTIONS), each named once by its flag; its environment variable, its key in ServeConfig and its
// line in `trove serve --help` are derived from it.

import { availableParallelism } from "node:os";
import { parseArgs } from "node:util";
import { parseDuration } from "../domain/store.js";
import { type Capacity, defaultMaxConnections, defaultMaxLongLived, measureCapacity } from "./capacity.js";
import { DEFAULT_LIMITS, DEFAULT_LOG_BUFFER, type ServerLimits } from "./limits.js";

/**
 * A --cors-origin value as a browser sends it in `Origin`: `scheme://host[:port]`, no path, no
 * wildcard (a page's access must be granted origin by origin). Returns the serialized origin.
 */
export function parseCorsOrigin(text: string): string {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (
    !url ||
    (url.protocol !== "http:" && url.protocol !== "https:") ||
    url.hostname.includes("*") ||
    url.origin !== text.toLowerCase().replace(/\/$/, "")
  ) {
    throw new Error(
      `--cors-origin must be an origin such as https://app.example.com or http://localhost:5173 (scheme, host and port; no path, no wildcard), not ${JSON.stringify(text)}`,
    );
  }
  return url.origin;
}

export interface ServeConfig {
  host: string;
  port: number;
  dataDir: string;
  logLevel: string;
  /** Bytes of log lines that may wait for stdout; beyond them lines are dropped and counted. */
  logBuffer: number;
  maxResourceSize: number;
  /** Longest a poll waits, in milliseconds. */
  pollWait: number;
  /** MongoDB connection string; the embedded SQLite store when absent. */
  mongodbUrl?: string;
  mongodbDatabase: string;
  /** On MongoDB: how long an instance keeps the scan lease of a filesystem store without renewing it, in milliseconds. */
  filesystemScanLease: number;
  /** The embedded store's commits: "normal" (durable across a process crash) or "full" (also a power loss). */
  sqliteSynchronous: "normal" | "full";
  /** Token issuer (OpenID discovery at `{issuer}/.well-known/openid-configuration`); the development issuer when absent. */
  issuer?: string;
  /** Audience tokens must be issued for. */
  audience: string;
  /** Lifetime of development-issuer tokens, in seconds. */
  tokenLifetime: number;
  /** How long a finished report stays available, in milliseconds. */
  reportAvailability: number;
  /** Whether this instance generates reports. */
  reportWorker: boolean;
  /** Whether GET /metrics serves Prometheus metrics. */
  metrics: boolean;
  /** How long a graceful shutdown lets requests in flight finish, in milliseconds. */
  shutdownTimeout: number;
  /** Connection limits and timeouts (milliseconds, counts). */
  limits: ServerLimits;
  /** Origins whose browser pages may call the server (CORS); empty: same origin only. */
  corsOrigins: string[];
  /** Public OAuth client id the console (/console/) signs in with. */
  consoleClientId: string;
  /** Processes that serve the port (node:cluster); 1: this process alone (docs/operations.md, "Several cores"). */
  workers: number;
}

/** How an option's text becomes its value; `name` is the flag without its dashes, for messages. */
type Parse<T> = (text: string, name: string) => T;

interface OptionSpec<T = unknown> {
  /** The value's placeholder in --help (HOST, SECONDS); none for a switch (`no-…`). */
  arg?: string;
  /** What --help says of it, before the environment variable and the default. */
  help: string;
  /** The default, as --help shows it and as it is parsed; none: the value is undefined (or [] with `list`). */
  default?: string;
  /** Said in --help after the default (where to read more). */
  see?: string;
  parse: Parse<T>;
  /** Its key in ServeConfig when that is not the flag in camelCase. */
  key?: string;
  /** The flag may be repeated; the environment variable is a comma-separated list. */
  list?: boolean;
  /** One of ServerLimits (ServeConfig.limits), in --help's Limits section. */
  limit?: boolean;
}

function integer(text: string, what: string, min: number, max: number): number {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new Error(`${what} must be a whole number from ${min} to ${max}, not ${JSON.stringify(text)}`);
  }
  return Number(text);
}

const whole =
  (min: number, max: number, scale = 1): Parse<number> =>
  (text, name) =>
    integer(text, name, min, max) * scale;

/** A timeout in whole seconds (1 s to a day), as milliseconds. */
const seconds = whole(1, 86400, 1000);

const count = whole(1, 1_000_000);

/** A count, or `auto` for what the defaults derive (parseServeArgs). */
const countOrAuto: Parse<number | "auto"> = (text, name) => (text === "auto" ? "auto" : count(text, name));

const anyText: Parse<string> = (text) => text;

const nonEmpty: Parse<string> = (text, name) => {
  if (text === "") throw new Error(`${name} must not be empty`);
  return text;
};

/** An optional setting that an empty value leaves unset. */
const unlessEmpty =
  (parse: Parse<string>): Parse<string | undefined> =>
  (text, name) =>
    text === "" ? undefined : parse(text, name);

const booleanValue: Parse<boolean> = (text, name) => {
  if (text === "true") return true;
  if (text === "false") return false;
  throw new Error(`--${name} must be true or false, not ${JSON.stringify(text)}`);
};

const httpUrl: Parse<string> = (text, name) => {
  let url: URL | undefined;
  try {
    url = new URL(text);
  } catch {
    url = undefined;
  }
  if (url?.protocol !== "https:" && url?.protocol !== "http:") {
    throw new Error(`--${name} must be an http:// or https:// URL, not ${JSON.stringify(text)}`);
  }
  return text;
};

const mongodbUrl: Parse<string> = (text, name) => {
  if (!/^mongodb(\+srv)?:\/\//.test(text)) throw new Error(`--${name} must start with mongodb:// or mongodb+srv://`);
  return text;
};

const duration: Parse<number> = (text, name) => {
  let ms: number;
  try {
    ms = parseDuration(text);
  } catch {
    throw new Error(`--${name} must be a duration such as 90d, 12h or 3600, not ${JSON.stringify(text)}`);
  }
  if (ms < 1000) throw new Error(`--${name} must be at least one second`);
  return ms;
};

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"];

const logLevel: Parse<string> = (text) => {
  if (!LOG_LEVELS.includes(text)) throw new Error(`unknown log level ${JSON.stringify(text)}`);
  return text;
};

const synchronous: Parse<"normal" | "full"> = (text, name) => {
  if (text !== "normal" && text !== "full") {
    throw new Error(`unknown --${name} ${JSON.stringify(text)}: use normal or full`);
  }
  return text;
};

/** The opposite of a `no-…` switch's environment variable: anything but `false` leaves it on. */
const notFalse: Parse<boolean> = (text) => text !== "false";

const workers: Parse<number> = (text, name) => (text === "auto" ? availableParallelism() : integer(text, name, 1, 64));

/** The default of a limit, in the flag's unit (seconds for timeouts). */
const limitDefault = (limit: Exclude<keyof ServerLimits, "maxLongLived">, scale = 1) =>
  String(DEFAULT_LIMITS[limit] / scale);

/**
 * Every option of `trove serve`, by flag, in --help's order. The environment variable is TROVE_ and
 * the flag in upper case with underscores; the key in ServeConfig is the flag in camelCase (`key`
 * where not). A `no-…` flag is a switch that turns off the option named by the rest of it (its
 * environment variable and key, set to `false`).
 */
export const OPTIONS = {
  host: { arg: "HOST", help: "address to listen on", default: "127.0.0.1", parse: anyText },
  port: { arg: "PORT", help: "port to listen on", default: "13242", parse: whole(0, 65535) },
  data: { arg: "DIR", help: "data directory", default: ".trove-data", parse: anyText, key: "dataDir" },
  "log-level": {
    arg: "LEVEL",
    help: `${LOG_LEVELS.slice(0, -1).join(", ")} or ${LOG_LEVELS.at(-1)}`,
    default: "info",
    parse: logLevel,
  },
  "log-buffer": {
    arg: "BYTES",
    help: "log lines that may wait while stdout is not read; beyond them lines are dropped and counted, never waited for",
    default: String(DEFAULT_LOG_BUFFER),
    see: "docs/operations.md, Logs",
    parse: whole(65536, 1073741824),
  },
  "max-resource-size": {
    arg: "BYTES",
    help: "largest resource accepted",
    default: "4294967296",
    parse: whole(0, Number.MAX_SAFE_INTEGER),
  },
  "poll-wait": { arg: "SECONDS", help: "longest a poll waits before 204", default: "30", parse: whole(1, 3600, 1000) },
  "mongodb-url": {
    arg: "URL",
    help: "keep everything on MongoDB instead of the embedded store",
    see: "e.g. mongodb://127.0.0.1:27017",
    parse: unlessEmpty(mongodbUrl),
  },
  "mongodb-database": { arg: "NAME", help: "database on that server", default: "trove", parse: anyText },
  "filesystem-scan-lease": {
    arg: "S",
    help: "on MongoDB, seconds an instance scans a filesystem store's folder without renewing its lease; others take over after it",
    default: "30",
    see: "docs/mongodb.md",
    parse: whole(1, 3600, 1000),
  },
  "sqlite-synchronous": {
    arg: "MODE",
    help: "embedded store: normal (a write survives a crash of the process) or full (also a power loss; slower PUTs)",
    default: "normal",
    see: "docs/storage.md, Durability",
    parse: synchronous,
  },
  issuer: {
    arg: "URL",
    help: "OAuth 2.0 / OpenID issuer whose bearer tokens every request needs; without it, a development issuer runs under /auth/",
    parse: unlessEmpty(httpUrl),
  },
  audience: { arg: "AUD", help: "audience (aud) tokens must carry", default: "trove", parse: nonEmpty },
  "token-lifetime": {
    arg: "SECONDS",
    help: "lifetime of development-issuer tokens",
    default: "600",
    parse: whole(10, 86400),
  },
  "report-availability": {
    arg: "D",
    help: "how long a content-insights report stays available after it is generated, e.g. 90d, 12h",
    default: "90d",
    parse: duration,
  },
  "no-report-worker": {
    help: "generate no reports in this instance; others on the same MongoDB do",
    default: "true",
    parse: notFalse,
  },
  metrics: {
    arg: "BOOL",
    help: "serve Prometheus metrics at GET /metrics, without a token; false measures nothing and answers 404 there",
    default: "true",
    parse: booleanValue,
  },
  "shutdown-timeout": {
    arg: "S",
    help: "seconds SIGTERM / SIGINT let requests in flight finish before they are cut; a second signal stops at once",
    default: "10",
    parse: whole(0, 3600, 1000),
  },
  "cors-origin": {
    arg: "ORIGIN",
    help: "let browser pages of this origin (https://app.example.com) call every face; repeat for more",
    parse: parseCorsOrigin,
    key: "corsOrigins",
    list: true,
  },
  "console-client-id": {
    arg: "ID",
    help: "public OAuth client id the console at /console/ signs in with",
    default: "trove-console",
    see: "docs/console.md",
    parse: nonEmpty,
  },
  workers: {
    arg: "N",
    help: "processes serving the port: auto, one per core (os.availableParallelism), or N; 1 serves from one process. They share the data directory or the MongoDB database, and --max-connections is split between them",
    default: "auto",
    see: "docs/operations.md, Several cores",
    parse: workers,
  },
  "first-byte-timeout": {
    arg: "S",
    help: "seconds a new connection may stay silent",
    default: limitDefault("firstByteTimeout", 1000),
    parse: seconds,
    limit: true,
  },
  "headers-timeout": {
    arg: "S",
    help: "seconds to send a complete HTTP/1.1 request head, else 408",
    default: limitDefault("headersTimeout", 1000),
    parse: seconds,
    limit: true,
  },
  "keep-alive-timeout": {
    arg: "S",
    help: "seconds an HTTP/1.1 connection may stay idle between requests",
    default: limitDefault("keepAliveTimeout", 1000),
    parse: seconds,
    limit: true,
  },
  "session-idle-timeout": {
    arg: "S",
    help: "seconds an HTTP/2 connection may stay without an open stream (PINGs do not count; an unfinished header block gets --headers-timeout)",
    default: limitDefault("sessionIdleTimeout", 1000),
    parse: seconds,
    limit: true,
  },
  "max-concurrent-streams": {
    arg: "N",
    help: "streams one HTTP/2 connection may have open at once",
    default: limitDefault("maxConcurrentStreams"),
    parse: count,
    limit: true,
  },
  "max-connections": {
    arg: "N",
    help: "connections open at once; at it the connection idle the longest is closed for a new one, and with none idle HTTP/1.1 gets 503 with Retry-After and HTTP/2 is closed",
    default: "auto",
    see: "from the open-file limit and the memory: docs/security.md, Capacity",
    parse: countOrAuto,
    limit: true,
  },
  "max-long-lived": {
    arg: "N",
    help: "long polls, watches, report downloads and uploads and downloads of 1 MiB or more in flight at once; beyond it 503 / UNAVAILABLE, so the other connections stay for short requests",
    default: "auto",
    see: "4/5 of --max-connections",
    parse: countOrAuto,
    limit: true,
  },
  "min-body-rate": {
    arg: "BYTES",
    help: "bytes a second a request body must bring over every --headers-timeout window, else 408 and closed; 0: no minimum",
    default: limitDefault("minBodyRate"),
    parse: whole(0, 1_000_000_000),
    limit: true,
  },
  "max-long-lived-per-caller": {
    arg: "N",
    help: "long-lived requests one authenticated subject may have in flight; beyond it 429 + Retry-After / RESOURCE_EXHAUSTED, others unaffected",
    default: limitDefault("maxLongLivedPerCaller"),
    parse: count,
    limit: true,
  },
  "max-long-lived-unauthenticated": {
    arg: "N",
    help: "long-lived requests all callers without a token may have in flight together (health watches, reflection); beyond it 429",
    default: limitDefault("maxLongLivedUnauthenticated"),
    parse: count,
    limit: true,
  },
} satisfies Record<string, OptionSpec>;

type Flag = keyof typeof OPTIONS;

/** What a `no-…` switch turns off: the rest of its name. */
const switched = (flag: string) => (flag.startsWith("no-") ? flag.slice(3) : flag);

/** The environment variable of an option: `--poll-wait` is TROVE_POLL_WAIT. */
export function envName(flag: string): string {
  return `TROVE_${switched(flag).toUpperCase().replaceAll("-", "_")}`;
}

/** The option's key in ServeConfig (or ServerLimits): `--poll-wait` is pollWait. */
export function keyOf(flag: string): string {
  const spec: OptionSpec = OPTIONS[flag as Flag];
  return spec.key ?? switched(flag).replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
}

const HELP_COLUMN = 28;
const HELP_WIDTH = 100;

/** An option's lines in --help: the flag, then what it does, its variable and default, wrapped. */
function helpEntry(flag: string, spec: OptionSpec): string {
  const env = flag.startsWith("no-")
    ? `${envName(flag)}=false`
    : `${envName(flag)}${spec.list ? ", comma-separated" : ""}`;
  const facts = [spec.default === undefined || flag.startsWith("no-") ? env : `${env}, default ${spec.default}`];
  if (spec.see) facts.push(spec.see);
  // "default N" stays on one line.
  const words = `${spec.help} (${facts.join("; ")})`.replace("default ", "default\u00a0").split(" ");
  const name = `  --${flag}${spec.arg ? ` ${spec.arg}` : ""}`;
  const lines: string[] = [];
  let line = name.length < HELP_COLUMN - 1 ? name.padEnd(HELP_COLUMN) : `${name} `;
  let empty = true;
  for (const word of words) {
    if (!empty && line.length + 1 + word.length > HELP_WIDTH) {
      lines.push(line);
      line = " ".repeat(HELP_COLUMN);
      empty = true;
    }
    line += empty ? word : ` ${word}`;
    empty = false;
  }
  lines.push(line);
  return lines.join("\n").replace("\u00a0", " ");
}

function helpSection(limits: boolean): string {
  return Object.entries(OPTIONS)
    .filter(([, spec]) => ((spec as OptionSpec).limit ?? false) === limits)
    .map(([flag, spec]) => helpEntry(flag, spec))
    .join("\n");
}

export const SERVE_HELP = `Usage: trove serve [options]

Runs the Trove server: REST v2, gRPC, Connect and gRPC-Web on one port.

Options:
${helpSection(false)}

Limits (docs/security.md): a connection that never finishes a request is closed.
${helpSection(true)}
  -h, --help                show this help
`;

/**
 * `capacity` is measured only when a default needs it (capacity.ts); tests pass their own.
 */
export function parseServeArgs(
  args: string[],
  env: NodeJS.ProcessEnv,
  capacity: () => Capacity = measureCapacity,
): ServeConfig | "help" {
  const { values } = parseArgs({
    args,
    options: {
      ...Object.fromEntries(
        Object.entries(OPTIONS).map(([flag, spec]: [string, OptionSpec]) => [
          flag,
          flag.startsWith("no-") ? { type: "boolean" } : { type: "string", multiple: spec.list ?? false },
        ]),
      ),
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return "help";
  // Each option from its flag, else its environment variable, else its default, in the table's order.
  const config: Record<string, unknown> = {};
  const limits: Record<string, unknown> = {};
  for (const [flag, spec] of Object.entries(OPTIONS) as Array<[string, OptionSpec]>) {
    const given = (values as Record<string, string | string[] | boolean | undefined>)[flag];
    const fromEnv = env[envName(flag)];
    let value: unknown;
    if (given === true) value = false;
    else if (spec.list) {
      const texts =
        (given as string[] | undefined) ??
        (fromEnv ?? "")
          .split(",")
          .map((t) => t.trim())
          .filter((t) => t !== "");
      value = texts.map((t) => spec.parse(t, flag));
    } else {
      const text = (given as string | undefined) ?? fromEnv ?? spec.default;
      value = text === undefined ? undefined : spec.parse(text, flag);
    }
    (spec.limit ? limits : config)[keyOf(flag)] = value;
  }
  const workerCount = config.workers as number;
  const connections = limits.maxConnections as number | "auto";
  const maxConnections = connections === "auto" ? defaultMaxConnections(capacity()) : connections;
  const longLived = limits.maxLongLived as number | "auto";
  const maxLongLived = longLived === "auto" ? defaultMaxLongLived(maxConnections) : longLived;
  if (longLived !== "auto" && maxLongLived >= maxConnections) {
    throw new Error(
      `--max-long-lived (${maxLongLived}) must be below --max-connections (${maxConnections}): short requests need the connections left over`,
    );
  }
  // Each worker counts its own connections and long-lived requests: the limits are split between
  // them. A caller's share is per worker: its connections go to any of them.
  limits.maxConnections = Math.ceil(maxConnections / workerCount);
  limits.maxLongLived = Math.ceil(maxLongLived / workerCount);
  return { ...config, limits } as unknown as ServeConfig;
}
