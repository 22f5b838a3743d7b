// Holding a store's write lease for one operation: in-process writers of a store queue in memory,
// and only the head of that queue asks the database for the lease (mongo-store-lease.ts).

import type { StoreType } from "../../domain/store.js";
import type { StorageLogger } from "../port.js";
import type { StoreDoc } from "./mongo-collections.js";
import { guard } from "./mongo-driver.js";
import type { StoreLease, StoreLeases } from "./mongo-store-lease.js";

export class StoreWriteLock {
  private readonly localLocks = new Map<string, Promise<void>>();
  /**
   * Each store's type as its document last said under a lease taken here: which nodes a write
   * reads together with taking the lease (a guess; what is used is checked against the document).
   */
  private readonly knownTypes = new Map<string, StoreType>();

  constructor(
    private readonly leases: StoreLeases,
    private readonly log: StorageLogger,
  ) {}

  /** The store's type as last seen under a lease; undefined when not known. */
  knownType(store: string): StoreType | undefined {
    return this.knownTypes.get(store);
  }

  /** The store's type as an operation under its lease has just set it. */
  rememberType(store: string, type: StoreType): void {
    this.knownTypes.set(store, type);
  }

  /**
   * Runs `fn` holding the store's lease: one writer per store across every
   * instance, so event ids are written in order. `lease.allocate(n)` reserves n
   * event ids and returns the first; on release the committed watermark moves up
   * to the last one allocated. Store-document updates in `fn` filter on
   * `lease.fence`; long operations call `lease.keep()` between write batches.
   */
  async run<T, E = never>(
    store: string,
    fn: (doc: StoreDoc, lease: StoreLease, early: E | undefined) => Promise<T>,
    options: { early?: () => Promise<E>; reserve?: number } = {},
  ): Promise<T> {
    // In-process writers queue here instead of polling the database for the lease.
    const previous = this.localLocks.get(store) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((r) => {
      release = r;
    });
    const chained = previous.then(() => mine);
    this.localLocks.set(store, chained);
    await previous;
    try {
      return await guard(async () => {
        const { doc, lease, early: read } = await this.leases.acquire(store, options);
        let result: T;
        try {
          const s = doc as StoreDoc;
          if (!s.deleted) this.knownTypes.set(store, s.type as StoreType);
          result = await fn(s, lease, read);
        } catch (err) {
          // The operation's own failure is the answer; a release that fails is tried again.
          await this.leases.release(lease).catch(() => this.leases.releaseLater(lease, this.log));
          throw err;
        }
        // Committed: the answer is success whatever the release does. An unreleased lease runs
        // out, and whoever takes it next publishes what this one allocated (mongo-store-lease.ts).
        await this.leases.release(lease).catch((err: unknown) => {
          this.log.warn({ store, err: (err as Error).message }, "could not release a store's write lease");
          this.leases.releaseLater(lease, this.log);
        });
        return result;
      });
    } finally {
      release();
      if (this.localLocks.get(store) === chained) this.localLocks.delete(store);
    }
  }
}
