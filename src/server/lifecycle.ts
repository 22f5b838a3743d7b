// The lifecycle of a server: what runs in the background while it serves (the report worker, the
// purge of expired tombstones) and the order in which it stops.

import type { Logger } from "pino";
import type { StoragePort } from "../storage/port.js";
import type { Cores } from "./cores.js";
import type { Health } from "./health.js";
import type { Listener } from "./listener.js";

export interface LifecycleOptions {
  storage: StoragePort;
  cores: Cores;
  listener: Listener;
  /** Whether this instance serves: checked in the background, not serving once it stops. */
  health: Health;
  logger: Logger;
  now: () => number;
  /** How often expired tombstones are purged, in milliseconds (default 60 s). */
  purgeInterval?: number;
}

export interface Lifecycle {
  /** Stops the background work, closes every connection, then the storage. */
  close(): Promise<void>;
}

export function startLifecycle(options: LifecycleOptions): Lifecycle {
  const { storage, cores, listener, health, logger, now } = options;
  cores.worker?.start();
  health.start();
  const purge = setInterval(() => {
    storage.purgeExpired(now()).catch((err) => logger.error({ err }, "purge of expired tombstones failed"));
  }, options.purgeInterval ?? 60_000);
  purge.unref();
  return {
    async close() {
      clearInterval(purge);
      health.shutdown();
      await cores.worker?.close();
      cores.notifier.close();
      await listener.close();
      await storage.close();
    },
  };
}
