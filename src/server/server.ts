// A Trove server: the cores, the faces that translate to them, the request pipeline in front of
// the faces, the one TCP listener of every face, and the lifecycle. `createTroveServer` only
// composes them (each module is named by what it holds); only the entry point and tests call `listen`.

import type { AddressInfo } from "node:net";
import { type Logger, pino } from "pino";
import { DEFAULT_CONSOLE_CLIENT_ID, type DevIssuer } from "../auth/dev-issuer.js";
import type { Authenticator } from "../auth/verifier.js";
import { reflectionService } from "../rpc/reflection.js";
import type { ChangeNotifier } from "../services/change-notifier.js";
import type { ReadOnlySwitch } from "../services/read-only.js";
import type { ReportNotifier } from "../services/report-notifier.js";
import { createFilesystemStorage, type FilesystemStorageOptions } from "../storage/filesystem/filesystem-storage.js";
import type { PeerChannel, StoragePort } from "../storage/port.js";
import { defaultMaxLongLived } from "./capacity.js";
import { CONSOLE_PREFIX, type ConsoleOptions, consoleRoutes } from "./console.js";
import { type CoreOptions, createCores, DEFAULT_MAX_RESOURCE_SIZE } from "./cores.js";
import { createCrossOrigin } from "./cors.js";
import { createFaces } from "./faces.js";
import { LongLivedBudget } from "./fair-share.js";
import { Health, healthRoutes, healthService } from "./health.js";
import { type ShutdownResult, startLifecycle } from "./lifecycle.js";
import { DEFAULT_LIMITS, type ServerLimits } from "./limits.js";
import { createListener } from "./listener.js";
import { createMetrics, metricsRoutes } from "./metrics.js";
import { measuredStorage } from "./metrics-storage.js";
import { OPENAPI_PATH, openApiRoute } from "./openapi.js";
import { createPipeline } from "./pipeline.js";
import { TROVE_SERVICES } from "./routes.js";

export interface TroveServerOptions {
  storage: StoragePort;
  logger?: Logger;
  /** Largest resource accepted, in bytes (default 4 GiB). */
  maxResourceSize?: number;
  /** Longest a poll waits for an event, in milliseconds (default 30 s, the spec's). */
  pollWait?: number;
  /** How often expired tombstones are purged, in milliseconds (default 60 s; 0: never, another worker does). */
  purgeInterval?: number;
  /**
   * This server is one of the workers of `trove serve --workers` (server/workers.ts): report
   * changes and jobs are told to the other workers, GET /metrics answers every worker's sum, and
   * the read-only switch is set on every worker at once.
   */
  worker?: { peers: PeerChannel; collectMetrics(): Promise<string>; readOnly?: ReadOnlySwitch };
  now?: () => number;
  /**
   * How callers are authenticated: a token verifier (every request then needs
   * `Authorization: Bearer <token>`), or "anonymous", where every caller has full access
   * without credentials. Only tests and the auth-off benchmark choose "anonymous"; the CLI never does.
   */
  auth: Authenticator | "anonymous";
  /** The development issuer, served under /auth/ (`trove serve` without a configured issuer). */
  devIssuer?: DevIssuer;
  /** How long a finished report stays available, in milliseconds (default 90 days). */
  reportAvailability?: number;
  /**
   * The report worker of this instance: settings, or false for an instance that generates no
   * reports (another instance on the same MongoDB does). Default: a worker with default settings.
   */
  reportWorker?: CoreOptions["reportWorker"];
  /** Connection limits and timeouts (limits.ts has the defaults). */
  limits?: Partial<ServerLimits>;
  /** Whether GET /metrics serves Prometheus metrics (default true); when false nothing is measured. */
  metrics?: boolean;
  /** Log lines the process dropped, stdout not taking them (log-destination.ts); counted in /metrics. */
  logDropped?: () => number;
  /** Origins whose browser pages may call every face (CORS); none by default: same origin only. */
  corsOrigins?: readonly string[];
  /** How often the storage's readiness is checked, in milliseconds (default 5 s). */
  healthInterval?: number;
  /** The console under /console/ (default: dist/console/, client id trove-console); false serves none. */
  console?: Partial<ConsoleOptions> | false;
  /** Filesystem stores: rescan interval, notification settle delay, default filesystem-temp (docs/filesystem-stores.md). */
  filesystem?: Pick<
    FilesystemStorageOptions,
    "rescanInterval" | "settleDelay" | "tempRoot" | "mayScan" | "scanLease" | "progressEvery" | "afterKeep"
  >;
}

export interface TroveServer {
  listen(port: number, host: string): Promise<AddressInfo>;
  /** Stops accepting, closes every connection, then the storage. */
  close(): Promise<void>;
  /** Stops gracefully, letting requests in flight finish for up to `timeoutMs` (lifecycle.ts). */
  shutdown(timeoutMs: number, cause?: string): Promise<ShutdownResult>;
  readonly logger: Logger;
  /** Armed long-poll and watch waiters (leak checks, metrics). */
  readonly notifier: ChangeNotifier;
  /** Report status watchers (leak checks). */
  readonly reportNotifier: ReportNotifier;
  /** Whether this instance serves (readiness, gRPC health). */
  readonly health: Health;
}

export function createTroveServer(options: TroveServerOptions): TroveServer {
  const logger = options.logger ?? pino({ level: "info" });
  const now = options.now ?? Date.now;
  const maxResourceSize = options.maxResourceSize ?? DEFAULT_MAX_RESOURCE_SIZE;
  const { devIssuer } = options;
  const metrics =
    options.metrics === false
      ? undefined
      : createMetrics({
          backend: options.storage.backend,
          worker: options.worker && { collect: options.worker.collectMetrics },
          logDropped: options.logDropped,
        });
  // Filesystem stores wrap the (measured) port: the changes their scanners record are counted too.
  const storage = createFilesystemStorage(
    metrics ? measuredStorage(options.storage, metrics.storage) : options.storage,
    { ...options.filesystem, logger, now, skipped: metrics?.filesystemSkipped, scanned: metrics?.filesystemScanned },
  );
  const cores = createCores({
    storage,
    logger,
    now,
    maxResourceSize,
    pollWait: options.pollWait,
    reportAvailability: options.reportAvailability,
    peers: options.worker?.peers,
    readOnly: options.worker?.readOnly,
    reportWorker:
      metrics && options.reportWorker !== false
        ? { ...options.reportWorker, observer: metrics.reportJobs }
        : options.reportWorker,
  });
  metrics?.watch(cores);
  metrics?.observeAuth(options.auth);
  const health = new Health({ storage, logger, interval: options.healthInterval });
  const webConsole =
    options.console === false ? undefined : consoleRoutes({ clientId: DEFAULT_CONSOLE_CLIENT_ID, ...options.console });
  const faces = createFaces({
    cores,
    logger,
    maxResourceSize,
    openRoutes: new Map([
      ...healthRoutes(health),
      [OPENAPI_PATH, openApiRoute()],
      ...metricsRoutes(metrics),
      ...(webConsole?.routes ?? []),
    ]),
    openTrees: new Map(webConsole ? [[CONSOLE_PREFIX, webConsole.tree]] : []),
    openServices: [healthService(health, TROVE_SERVICES), reflectionService(TROVE_SERVICES)],
  });
  const limits = { ...DEFAULT_LIMITS, ...options.limits };
  const longLived = new LongLivedBudget({
    max: limits.maxLongLived ?? defaultMaxLongLived(limits.maxConnections),
    perCaller: limits.maxLongLivedPerCaller,
    unauthenticated: limits.maxLongLivedUnauthenticated,
    refused: metrics?.limitHit,
  });
  metrics?.watchLongLived(longLived);
  const crossOrigin = options.corsOrigins?.length ? createCrossOrigin(options.corsOrigins) : undefined;
  const handler = createPipeline({
    faces,
    logger,
    auth: options.auth,
    devIssuer,
    crossOrigin,
    observers: metrics ? [metrics.requests] : [],
    longLived,
  });
  const listener = createListener({ handler, limits, refused: metrics?.limitHit });
  const lifecycle = startLifecycle({
    storage,
    cores,
    listener,
    health,
    logger,
    now,
    purgeInterval: options.purgeInterval,
  });

  return {
    logger,
    notifier: cores.notifier,
    reportNotifier: cores.reportNotifier,
    health,
    listen(port, host) {
      return listener.listen(port, host).then((address) => {
        devIssuer?.listening(host, address.port);
        return address;
      });
    },
    close: () => lifecycle.close().finally(() => metrics?.close()),
    shutdown: (timeoutMs, cause) => lifecycle.shutdown(timeoutMs, cause).finally(() => metrics?.close()),
  };
}
