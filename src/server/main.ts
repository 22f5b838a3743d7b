// Starts a server from its configuration: the entry point of `trove serve`.

import cluster from "node:cluster";
import { type Logger, pino } from "pino";
import { type DevIssuer, openDevIssuer } from "../auth/dev-issuer.js";
import { type Authenticator, checkIssuer, createJwtAuthenticator } from "../auth/verifier.js";
import { AlreadyExistsError, UnavailableError } from "../domain/errors.js";
import { DEFAULT_KEEP_DELETED, DEFAULT_KEEP_VERSIONS } from "../domain/store.js";
import { MongoStorage } from "../storage/mongodb/mongo-storage.js";
import type { StoragePort } from "../storage/port.js";
import { SqliteStorage } from "../storage/sqlite/sqlite-storage.js";
import { TROVE_VERSION } from "../version.js";
import type { ServeConfig } from "./config.js";
import { checkDataDir } from "./data-dir.js";
import { stdoutLog } from "./log-destination.js";
import { createTroveServer, type TroveServer } from "./server.js";
import { primaryLogger, runPrimary, type WorkerLink, workerLink } from "./workers.js";

/** On a fresh data directory, the store `home` (sync-recursive), so a new user can PUT at once. */
export async function ensureHomeStore(storage: StoragePort, now: number): Promise<void> {
  if ((await storage.listStores()).length === 0 && !(await storage.getStore("home"))) {
    try {
      await storage.createStore(
        {
          name: "home",
          type: "recursive",
          settings: { "keep-deleted": DEFAULT_KEEP_DELETED, "keep-versions": DEFAULT_KEEP_VERSIONS },
        },
        now,
      );
    } catch (err) {
      // Another instance on the same database created it first.
      if (!(err instanceof AlreadyExistsError)) throw err;
    }
  }
}

/**
 * Starts a server: the only one of this process, or, with `link`, one worker of `trove serve
 * --workers` (workers.ts), which shares the storage with the others and leaves the
 * once-per-directory duties to slot 1.
 */
export async function serve(config: ServeConfig, link?: WorkerLink): Promise<TroveServer> {
  const output = stdoutLog(config.logBuffer);
  const root = pino({ level: config.logLevel }, output.stream);
  const logger = link ? root.child({ worker: link.slot }) : root;
  output.onDropsEnded((dropped) => logger.warn({ dropped }, "log lines dropped: stdout was not read"));
  const first = link === undefined || link.slot === 1;
  const storage: StoragePort = config.mongodbUrl
    ? await MongoStorage.open({ url: config.mongodbUrl, database: config.mongodbDatabase, logger, peers: link?.peers })
    : await SqliteStorage.open({
        dataDir: config.dataDir,
        logger,
        synchronous: config.sqliteSynchronous,
        peers: link && { channel: link.peers, turns: link.turns, slot: link.slot },
      });
  const restoring = await storage.restoreTarget();
  if (restoring.state === "restoring") {
    // A restore cut short: serving it would present half a backup as the data (docs/backup.md).
    await storage.close();
    throw new UnavailableError(
      `the storage is being restored from a backup (archive ${restoring.archive}) and the restore has not finished: run the same trove restore again to finish it`,
    );
  }
  await ensureHomeStore(storage, Date.now());
  let auth: Authenticator;
  let devIssuer: DevIssuer | undefined;
  if (config.issuer !== undefined) {
    auth = createJwtAuthenticator({ issuer: config.issuer, audience: config.audience });
  } else {
    devIssuer = await openDevIssuer({
      dataDir: config.dataDir,
      audience: config.audience,
      tokenLifetime: config.tokenLifetime,
      consoleClientId: config.consoleClientId,
      grants: link?.grants,
    });
    auth = devIssuer.authenticator;
  }
  const server = createTroveServer({
    storage,
    logger,
    maxResourceSize: config.maxResourceSize,
    pollWait: config.pollWait,
    auth,
    devIssuer,
    reportAvailability: config.reportAvailability,
    reportWorker: config.reportWorker && first ? {} : false,
    purgeInterval: first ? undefined : 0,
    worker: link && { peers: link.peers, collectMetrics: link.collectMetrics, readOnly: link.readOnly },
    metrics: config.metrics,
    logDropped: output.dropped,
    limits: config.limits,
    corsOrigins: config.corsOrigins,
    console: { clientId: config.consoleClientId, issuer: config.issuer },
    // Instances on one MongoDB serving one folder: one scans it at a time (docs/filesystem-stores.md).
    // Workers on one data directory: slot 1 scans.
    filesystem:
      storage instanceof MongoStorage
        ? { scanLease: storage.scanLease(config.filesystemScanLease) }
        : link
          ? { scanLease: link.scanLease }
          : {},
  });
  const address = await server.listen(config.port, config.host);
  // Workers: each says it listens; the primary says once that the server does, when all of them do.
  if (link) logger.info({ port: address.port }, `worker ${link.slot} listening`);
  else logger.info(...readyLine(config, address.port));
  // Workers: the primary shows the banner once.
  if (devIssuer && !link) process.stderr.write(devModeBanner(devIssuer, config));
  else if (!devIssuer && first) void reportIssuer(config.issuer as string, config.audience, logger);
  return server;
}

/**
 * Serves until SIGTERM or SIGINT, then shuts down gracefully (lifecycle.ts); a second signal
 * during the shutdown ends the process at once (exit 128 + the signal's number). Answers the
 * exit code: 0 once the shutdown finished, drained or cut by its timeout.
 */
export async function serveUntilSignal(config: ServeConfig): Promise<number> {
  // Before anything else, in every process (a worker started again may find it gone): a data
  // directory that cannot be used is one line and exit 1 (DataDirError), not a hang or a stack.
  // On MongoDB with --issuer nothing is kept there.
  if (!config.mongodbUrl || config.issuer === undefined) checkDataDir(config.dataDir);
  if (config.workers > 1) {
    if (!cluster.isWorker) return servePrimary(config);
    const link = workerLink();
    if (!link) throw new Error("a worker process without its slot: start trove serve --workers, not a worker");
    return serveWorker(config, link);
  }
  const server = await serve(config);
  const signal = await new Promise<NodeJS.Signals>((resolve) => {
    const first = (received: NodeJS.Signals) => {
      process.off("SIGINT", first);
      process.off("SIGTERM", first);
      resolve(received);
    };
    process.on("SIGINT", first);
    process.on("SIGTERM", first);
  });
  const atOnce = (second: NodeJS.Signals) => {
    try {
      server.logger.warn({ signal: second }, "second signal: stopping at once, cutting every connection");
    } finally {
      process.exit(second === "SIGINT" ? 130 : 143);
    }
  };
  process.once("SIGINT", atOnce);
  process.once("SIGTERM", atOnce);
  await server.shutdown(config.shutdownTimeout, signal);
  return 0;
}

/**
 * The line that says the server serves (docs/operations.md, "Logs"): written once, by the only
 * process or by the primary once every worker listens, before the development issuer's banner.
 */
function readyLine(config: ServeConfig, port: number): [Record<string, unknown>, string] {
  const backend = config.mongodbUrl ? "mongodb" : "sqlite";
  return [
    {
      version: TROVE_VERSION,
      storage: backend,
      ...(config.mongodbUrl ? {} : { synchronous: config.sqliteSynchronous }),
      host: config.host,
      port,
      data: config.dataDir,
      workers: config.workers,
      // The budgets in force (docs/security.md, "Capacity"), per process with several workers.
      maxConnections: config.limits.maxConnections,
      maxLongLived: config.limits.maxLongLived,
    },
    `Trove ${TROVE_VERSION} listening on http://${config.host}:${port} (storage: ${backend})`,
  ];
}

/** The primary of `trove serve --workers`: the development issuer's file first, then the workers. */
async function servePrimary(config: ServeConfig): Promise<number> {
  const logger = primaryLogger(config.logLevel, config.logBuffer);
  // Made before any worker starts, so that they all read the same credentials and signing key.
  const devIssuer =
    config.issuer === undefined
      ? await openDevIssuer({
          dataDir: config.dataDir,
          audience: config.audience,
          tokenLifetime: config.tokenLifetime,
          consoleClientId: config.consoleClientId,
        })
      : undefined;
  return runPrimary({
    workers: config.workers,
    logger,
    listening(port) {
      logger.info(...readyLine(config, port));
      if (!devIssuer) return;
      devIssuer.listening(config.host, port);
      process.stderr.write(devModeBanner(devIssuer, { ...config, port }));
    },
  });
}

/**
 * One worker: serves until the primary says stop, then shuts down gracefully (or at once, when
 * the primary got a second signal). Signals sent to the whole process group (a terminal's
 * Ctrl-C, a service manager's SIGTERM) reach the primary too, which decides: the worker ignores them.
 */
async function serveWorker(config: ServeConfig, link: WorkerLink): Promise<number> {
  process.on("SIGINT", () => {});
  process.on("SIGTERM", () => {});
  let server: TroveServer | undefined;
  const stopped = new Promise<void>((resolve) => {
    link.onStop((now) => {
      // Told to stop while still starting (waiting for MongoDB, say): it serves nothing yet, so it
      // ends at once, as a single process's start-up does on SIGTERM.
      if (!server) process.exit(0);
      if (now) {
        server.logger.warn("stopping at once, cutting every connection");
        process.exit(143);
      }
      resolve();
    });
  });
  server = await serve(config, link);
  await stopped;
  await server.shutdown(config.shutdownTimeout, "primary");
  return 0;
}

/** Start-up check of a configured issuer: a warning, not a failure, since it may come up later. */
async function reportIssuer(issuer: string, audience: string, logger: Logger): Promise<void> {
  try {
    await checkIssuer(issuer);
    logger.info({ issuer, audience }, "bearer tokens verified against the issuer's JWKS");
  } catch (err) {
    logger.warn(
      { issuer, audience, err: (err as Error).message },
      "the token issuer cannot be reached yet: requests answer 503 until it can",
    );
  }
}

function lifetimeText(seconds: number): string {
  if (seconds % 60 !== 0) return `${seconds} seconds`;
  return seconds === 60 ? "1 minute" : `${seconds / 60} minutes`;
}

/** What a new user needs to get a token, said loudly: this mode is for development only. */
export function devModeBanner(issuer: DevIssuer, config: Pick<ServeConfig, "host" | "port" | "dataDir">): string {
  const line = "=".repeat(78);
  const local = ["127.0.0.1", "localhost", "::1"].includes(config.host);
  const base = issuer.issuer.replace(/\/auth$/, "");
  const data = config.dataDir === ".trove-data" ? "" : ` --data ${config.dataDir}`;
  const url = base === "http://127.0.0.1:13242" ? "" : ` --url ${base}`;
  return [
    line,
    "  DEVELOPMENT MODE: no token issuer is configured (--issuer / TROVE_ISSUER),",
    "  so this server issues its own tokens, with full access, to anyone holding the",
    "  client secret below. Do not use it in production.",
    ...(local ? [] : [`  WARNING: it listens on ${config.host}, so the issuer is reachable from the network.`]),
    "",
    `  issuer         ${issuer.issuer}   (discovery: /auth/.well-known/openid-configuration)`,
    `  token endpoint ${issuer.issuer}/token   (grant_type=client_credentials)`,
    `  client id      ${issuer.clientId}`,
    `  client secret  ${issuer.clientSecret}`,
    `  kept in        ${issuer.file} (mode 0600), with the signing key`,
    "",
    `  Get a token (valid ${lifetimeText(issuer.tokenLifetime)}) and use it:`,
    `    curl -H "Authorization: Bearer $(npx trove token${url}${data})" ${base}/resources/v2/stores`,
    line,
    "",
  ].join("\n");
}
