// The read-only switch (docs/operations.md, "Read-only switch"): while on, every write a client
// asks for is refused before any work, on every face, because it is refused at the storage port
// the cores write through: UNAVAILABLE on the RPC faces, 503 with Retry-After on REST. Reads,
// feeds, backups and the server's own upkeep (report jobs, the purge) go on.

import { ReadOnlyError } from "../domain/errors.js";
import type { InsightsStorage, StoragePort } from "../storage/port.js";

/** The default of Retry-After while the switch is on, in seconds. */
export const READ_ONLY_RETRY_AFTER = 30;

export class ReadOnlySwitch {
  private retryAfter = 0;

  /**
   * `spread`: how a setting reaches every worker of `trove serve` (server/workers.ts), this one
   * included, settling once each has applied it; without it, the switch is this process's.
   */
  constructor(private readonly spread?: (retryAfter: number) => Promise<void>) {}

  get on(): boolean {
    return this.retryAfter > 0;
  }

  /** Turns the switch on or off, on every worker before it settles. */
  async set(on: boolean, retryAfter = READ_ONLY_RETRY_AFTER): Promise<void> {
    const value = on ? Math.max(1, retryAfter) : 0;
    if (this.spread) await this.spread(value);
    else this.apply(value);
  }

  /** This process's switch alone: seconds of Retry-After, 0 for off (what a worker is told). */
  apply(retryAfter: number): void {
    this.retryAfter = Math.max(0, retryAfter);
  }

  /** Throws ReadOnlyError while the switch is on. */
  check(): void {
    if (this.retryAfter > 0) {
      throw new ReadOnlyError(
        "the server is read-only for a while (an operator is moving or backing it up): try again later",
        this.retryAfter,
      );
    }
  }
}

/** The writes a client asks for, of the resources part and of the insights part. */
const WRITES = [
  "createStore",
  "updateStore",
  "deleteStore",
  "putFile",
  "putFiles",
  "makeDirectory",
  "deleteTree",
  "restoreVersion",
  "writeBlob",
] as const satisfies readonly (keyof StoragePort)[];
const INSIGHTS_WRITES = [
  "createProject",
  "createEnvironment",
  "recordPromotion",
  "createReport",
] as const satisfies readonly (keyof InsightsStorage)[];

/** `storage` with the client's writes checked against the switch first; everything else passes through. */
export function readOnlyStorage(storage: StoragePort, readOnly: ReadOnlySwitch): StoragePort {
  const insights = guarded(storage.insights, INSIGHTS_WRITES, readOnly, {});
  return guarded(storage, WRITES, readOnly, { insights });
}

function guarded<T extends object>(
  target: T,
  names: readonly string[],
  readOnly: ReadOnlySwitch,
  replaced: Record<string, unknown>,
): T {
  const checked = new Set(names);
  // The function handed out for each method, made once (a bind per call was 0.6 % of a 4 KiB GET, issue 32).
  const made = new Map<string | symbol, { value: unknown; fn: unknown }>();
  return new Proxy({} as T, {
    get(_, property) {
      if (typeof property === "string" && property in replaced) return replaced[property];
      const value = Reflect.get(target, property, target);
      if (typeof value !== "function") return value;
      const known = made.get(property);
      if (known !== undefined && known.value === value) return known.fn;
      const method = value as (...a: unknown[]) => unknown;
      const fn =
        typeof property === "string" && checked.has(property)
          ? (...args: unknown[]) => {
              readOnly.check();
              return method.apply(target, args);
            }
          : method.bind(target);
      made.set(property, { value, fn });
      return fn;
    },
    has: (_, property) => property in target,
    getPrototypeOf: () => Object.getPrototypeOf(target),
  });
}
