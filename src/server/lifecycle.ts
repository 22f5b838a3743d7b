// The lifecycle of a server: what runs in the background while it serves (the report worker, the
// purge of expired tombstones, the readiness check) and the order in which it stops, at once
// (`close`) or gracefully (`shutdown`, on SIGTERM / SIGINT: docs/operations.md, "Shutdown").

import type { Logger } from "pino";
import type { StoragePort } from "../storage/port.js";
import type { Cores } from "./cores.js";
import type { Health } from "./health.js";
import type { DrainResult, Listener } from "./listener.js";

export interface LifecycleOptions {
  storage: StoragePort;
  cores: Cores;
  listener: Listener;
  /** Whether this instance serves: checked in the background, not serving once it stops. */
  health: Health;
  logger: Logger;
  now: () => number;
  /** How often expired tombstones are purged, in milliseconds (default 60 s; 0: never here). */
  purgeInterval?: number;
}

/** How a graceful shutdown ended. */
export interface ShutdownResult extends DrainResult {
  /** Milliseconds from its start to the storage closed. */
  ms: number;
}

export interface Lifecycle {
  /** Stops the background work, closes every connection, then the storage. */
  close(): Promise<void>;
  /**
   * Stops gracefully: not ready any more, no new connections, long polls answered (204) and
   * watch streams ended (UNAVAILABLE) at once, report jobs given back, the requests in flight
   * finished for up to `timeoutMs` (then cut), then the storage closed. Logs its beginning and
   * how it ended.
   */
  shutdown(timeoutMs: number, cause?: string): Promise<ShutdownResult>;
}

export const DEFAULT_SHUTDOWN_TIMEOUT = 10_000;

export function startLifecycle(options: LifecycleOptions): Lifecycle {
  const { storage, cores, listener, health, logger, now } = options;
  cores.worker?.start();
  health.start();
  // 0: none here (another worker of `trove serve --workers` purges the shared directory).
  const purge =
    options.purgeInterval === 0
      ? undefined
      : setInterval(() => {
          storage.purgeExpired(now()).catch((err) => logger.error({ err }, "purge of expired tombstones failed"));
        }, options.purgeInterval ?? 60_000);
  purge?.unref();
  let stopping: Promise<ShutdownResult> | undefined;
  return {
    async close() {
      clearInterval(purge);
      health.shutdown();
      await cores.worker?.close();
      cores.notifier.close();
      await listener.close();
      await storage.close();
    },
    shutdown(timeoutMs, cause) {
      stopping ??= (async () => {
        const started = performance.now();
        clearInterval(purge);
        health.shutdown();
        // Stops accepting at once (before the log line says so), then waits for what is in flight.
        const draining = listener.drain(timeoutMs);
        logger.info({ cause, timeoutMs }, "shutdown began");
        cores.notifier.shutdown();
        cores.reportNotifier.shutdown();
        const [result] = await Promise.all([
          draining,
          cores.worker
            ?.close()
            .catch((err: unknown) => logger.warn({ err }, "report worker: its job could not be given back")),
        ]);
        cores.notifier.close();
        await storage.close().catch((err: unknown) => logger.warn({ err }, "storage did not close cleanly"));
        const ms = Math.round(performance.now() - started);
        if (result.drained) logger.info({ ms, drained: true, cut: 0 }, "shutdown complete: drained cleanly");
        else
          logger.warn(
            { ms, drained: false, cut: result.cut },
            `shutdown complete: the drain timeout (${timeoutMs / 1000} s) cut ${result.cut} connection${result.cut === 1 ? "" : "s"}`,
          );
        return { ...result, ms };
      })();
      return stopping;
    },
  };
}
