// Server configuration from flags, then environment variables, then defaults.

import { availableParallelism } from "node:os";
import { parseArgs } from "node:util";
import { parseDuration } from "../domain/store.js";
import { type Capacity, defaultMaxConnections, defaultMaxLongLived, measureCapacity } from "./capacity.js";
import { parseCorsOrigin } from "./cors.js";
import { DEFAULT_LIMITS, type ServerLimits } from "./limits.js";
import { DEFAULT_LOG_BUFFER } from "./log-destination.js";

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

export { SERVE_HELP } from "./serve-help.js";

function integer(text: string, what: string, min: number, max: number): number {
  if (!/^\d+$/.test(text) || Number(text) < min || Number(text) > max) {
    throw new Error(`${what} must be a whole number from ${min} to ${max}, not ${JSON.stringify(text)}`);
  }
  return Number(text);
}

/** The limits with a fixed default. */
type FixedLimit = Exclude<keyof ServerLimits, "maxLongLived">;

/** A timeout in whole seconds (1 s to a day), as milliseconds; the default when not given. */
function seconds(text: string | undefined, what: string, limit: FixedLimit): number {
  if (text === undefined) return DEFAULT_LIMITS[limit];
  return integer(text, what, 1, 86400) * 1000;
}

function count(text: string | undefined, what: string, limit: FixedLimit): number {
  if (text === undefined) return DEFAULT_LIMITS[limit];
  return integer(text, what, 1, 1_000_000);
}

function booleanValue(text: string, what: string): boolean {
  if (text === "true") return true;
  if (text === "false") return false;
  throw new Error(`${what} must be true or false, not ${JSON.stringify(text)}`);
}

function nonEmpty(text: string, what: string): string {
  if (text === "") throw new Error(`${what} must not be empty`);
  return text;
}

function issuerUrl(text: string | undefined): string | undefined {
  if (text === undefined || text === "") return undefined;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new Error(`--issuer must be an http:// or https:// URL, not ${JSON.stringify(text)}`);
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new Error(`--issuer must be an http:// or https:// URL, not ${JSON.stringify(text)}`);
  }
  return text;
}

function mongodbUrl(text: string | undefined): string | undefined {
  if (text === undefined || text === "") return undefined;
  if (!/^mongodb(\+srv)?:\/\//.test(text))
    throw new Error("--mongodb-url must start with mongodb:// or mongodb+srv://");
  return text;
}

function reportAvailability(text: string): number {
  let ms: number;
  try {
    ms = parseDuration(text);
  } catch {
    throw new Error(`--report-availability must be a duration such as 90d, 12h or 3600, not ${JSON.stringify(text)}`);
  }
  if (ms < 1000) throw new Error("--report-availability must be at least one second");
  return ms;
}

/** A count, or `auto` (the default) for what `derive` says. */
function countOrAuto(text: string | undefined, what: string, derive: () => number): number {
  if (text === undefined || text === "auto") return derive();
  return integer(text, what, 1, 1_000_000);
}

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
      host: { type: "string" },
      port: { type: "string" },
      data: { type: "string" },
      "log-level": { type: "string" },
      "log-buffer": { type: "string" },
      "max-resource-size": { type: "string" },
      "poll-wait": { type: "string" },
      "mongodb-url": { type: "string" },
      "mongodb-database": { type: "string" },
      "filesystem-scan-lease": { type: "string" },
      "sqlite-synchronous": { type: "string" },
      issuer: { type: "string" },
      audience: { type: "string" },
      "token-lifetime": { type: "string" },
      "report-availability": { type: "string" },
      "no-report-worker": { type: "boolean" },
      metrics: { type: "string" },
      "shutdown-timeout": { type: "string" },
      "first-byte-timeout": { type: "string" },
      "headers-timeout": { type: "string" },
      "keep-alive-timeout": { type: "string" },
      "session-idle-timeout": { type: "string" },
      "max-concurrent-streams": { type: "string" },
      "max-connections": { type: "string" },
      "max-long-lived": { type: "string" },
      "max-long-lived-per-caller": { type: "string" },
      "max-long-lived-unauthenticated": { type: "string" },
      "min-body-rate": { type: "string" },
      "cors-origin": { type: "string", multiple: true },
      "console-client-id": { type: "string" },
      workers: { type: "string" },
      help: { type: "boolean", short: "h" },
    },
    strict: true,
    allowPositionals: false,
  });
  if (values.help) return "help";
  const synchronous = values["sqlite-synchronous"] ?? env.TROVE_SQLITE_SYNCHRONOUS ?? "normal";
  if (synchronous !== "normal" && synchronous !== "full") {
    throw new Error(`unknown --sqlite-synchronous ${JSON.stringify(synchronous)}: use normal or full`);
  }
  const level = values["log-level"] ?? env.TROVE_LOG_LEVEL ?? "info";
  if (!["fatal", "error", "warn", "info", "debug", "trace", "silent"].includes(level)) {
    throw new Error(`unknown log level ${JSON.stringify(level)}`);
  }
  const workersText = values.workers ?? env.TROVE_WORKERS ?? "1";
  const workers = workersText === "auto" ? availableParallelism() : integer(workersText, "workers", 1, 64);
  const maxConnections = countOrAuto(values["max-connections"] ?? env.TROVE_MAX_CONNECTIONS, "max-connections", () =>
    defaultMaxConnections(capacity()),
  );
  // Each worker counts its own connections and long-lived requests: the limits are split between them.
  const workerConnections = Math.ceil(maxConnections / workers);
  const longLivedText = values["max-long-lived"] ?? env.TROVE_MAX_LONG_LIVED;
  const maxLongLived = countOrAuto(longLivedText, "max-long-lived", () => defaultMaxLongLived(maxConnections));
  if (longLivedText !== undefined && longLivedText !== "auto" && maxLongLived >= maxConnections) {
    throw new Error(
      `--max-long-lived (${maxLongLived}) must be below --max-connections (${maxConnections}): short requests need the connections left over`,
    );
  }
  return {
    workers,
    host: values.host ?? env.TROVE_HOST ?? "127.0.0.1",
    port: integer(values.port ?? env.TROVE_PORT ?? "13242", "port", 0, 65535),
    dataDir: values.data ?? env.TROVE_DATA ?? ".trove-data",
    logLevel: level,
    logBuffer: integer(
      values["log-buffer"] ?? env.TROVE_LOG_BUFFER ?? String(DEFAULT_LOG_BUFFER),
      "log-buffer",
      65536,
      1073741824,
    ),
    maxResourceSize: integer(
      values["max-resource-size"] ?? env.TROVE_MAX_RESOURCE_SIZE ?? "4294967296",
      "max-resource-size",
      0,
      Number.MAX_SAFE_INTEGER,
    ),
    pollWait: integer(values["poll-wait"] ?? env.TROVE_POLL_WAIT ?? "30", "poll-wait", 1, 3600) * 1000,
    mongodbUrl: mongodbUrl(values["mongodb-url"] ?? env.TROVE_MONGODB_URL),
    mongodbDatabase: values["mongodb-database"] ?? env.TROVE_MONGODB_DATABASE ?? "trove",
    filesystemScanLease:
      integer(
        values["filesystem-scan-lease"] ?? env.TROVE_FILESYSTEM_SCAN_LEASE ?? "30",
        "filesystem-scan-lease",
        1,
        3600,
      ) * 1000,
    sqliteSynchronous: synchronous,
    issuer: issuerUrl(values.issuer ?? env.TROVE_ISSUER),
    audience: nonEmpty(values.audience ?? env.TROVE_AUDIENCE ?? "trove", "audience"),
    tokenLifetime: integer(values["token-lifetime"] ?? env.TROVE_TOKEN_LIFETIME ?? "600", "token-lifetime", 10, 86400),
    reportAvailability: reportAvailability(values["report-availability"] ?? env.TROVE_REPORT_AVAILABILITY ?? "90d"),
    reportWorker: !(values["no-report-worker"] ?? env.TROVE_REPORT_WORKER === "false"),
    metrics: booleanValue(values.metrics ?? env.TROVE_METRICS ?? "true", "--metrics"),
    shutdownTimeout:
      integer(values["shutdown-timeout"] ?? env.TROVE_SHUTDOWN_TIMEOUT ?? "10", "shutdown-timeout", 0, 3600) * 1000,
    corsOrigins: (
      values["cors-origin"] ??
      (env.TROVE_CORS_ORIGIN ?? "")
        .split(",")
        .map((o) => o.trim())
        .filter((o) => o !== "")
    ).map(parseCorsOrigin),
    consoleClientId: nonEmpty(
      values["console-client-id"] ?? env.TROVE_CONSOLE_CLIENT_ID ?? "trove-console",
      "console-client-id",
    ),
    limits: {
      firstByteTimeout: seconds(
        values["first-byte-timeout"] ?? env.TROVE_FIRST_BYTE_TIMEOUT,
        "first-byte-timeout",
        "firstByteTimeout",
      ),
      headersTimeout: seconds(
        values["headers-timeout"] ?? env.TROVE_HEADERS_TIMEOUT,
        "headers-timeout",
        "headersTimeout",
      ),
      keepAliveTimeout: seconds(
        values["keep-alive-timeout"] ?? env.TROVE_KEEP_ALIVE_TIMEOUT,
        "keep-alive-timeout",
        "keepAliveTimeout",
      ),
      sessionIdleTimeout: seconds(
        values["session-idle-timeout"] ?? env.TROVE_SESSION_IDLE_TIMEOUT,
        "session-idle-timeout",
        "sessionIdleTimeout",
      ),
      maxConcurrentStreams: count(
        values["max-concurrent-streams"] ?? env.TROVE_MAX_CONCURRENT_STREAMS,
        "max-concurrent-streams",
        "maxConcurrentStreams",
      ),
      maxConnections: workerConnections,
      maxLongLived: Math.ceil(maxLongLived / workers),
      // A caller's share is per worker: its connections go to any of them.
      maxLongLivedPerCaller: count(
        values["max-long-lived-per-caller"] ?? env.TROVE_MAX_LONG_LIVED_PER_CALLER,
        "max-long-lived-per-caller",
        "maxLongLivedPerCaller",
      ),
      maxLongLivedUnauthenticated: count(
        values["max-long-lived-unauthenticated"] ?? env.TROVE_MAX_LONG_LIVED_UNAUTHENTICATED,
        "max-long-lived-unauthenticated",
        "maxLongLivedUnauthenticated",
      ),
      minBodyRate: integer(
        values["min-body-rate"] ?? env.TROVE_MIN_BODY_RATE ?? String(DEFAULT_LIMITS.minBodyRate),
        "min-body-rate",
        0,
        1_000_000_000,
      ),
    },
  };
}
