// Wakes long polls and watch streams when a store they follow changes. The
// storage adapter signals every committed change (its own, and where it can
// tell, other instances'); waiters are armed before they read, so a change
// between the read and the wait is never missed.

import type { StoragePort } from "../storage/port.js";

export interface Waiter {
  /** Resolves when a followed store changes, or when disposed. */
  readonly fired: Promise<void>;
  dispose(): void;
}

export class ChangeNotifier {
  private readonly waiters = new Map<string, Set<() => void>>();
  private count = 0;
  private stopping = false;
  private readonly unsubscribe: () => void;

  constructor(storage: StoragePort) {
    this.unsubscribe = storage.onChange((store) => this.wake(store));
  }

  /** Number of armed waiters (for leak checks and metrics). */
  get waiterCount(): number {
    return this.count;
  }

  /** Whether the server's shutdown began: long polls answer now, watch streams end. */
  get shuttingDown(): boolean {
    return this.stopping;
  }

  /** Shutdown began: wakes every waiter, and a waiter armed from now on fires at once. */
  shutdown(): void {
    this.stopping = true;
    for (const set of [...this.waiters.values()]) for (const fire of [...set]) fire();
  }

  /** `null` in stores means every store. */
  arm(stores: readonly string[] | null): Waiter {
    let resolve!: () => void;
    const fired = new Promise<void>((r) => {
      resolve = r;
    });
    const keys = stores ?? ["*"];
    let disposed = false;
    const fire = () => dispose();
    const dispose = () => {
      if (disposed) return;
      disposed = true;
      this.count -= 1;
      for (const key of keys) {
        const set = this.waiters.get(key);
        set?.delete(fire);
        if (set?.size === 0) this.waiters.delete(key);
      }
      resolve();
    };
    this.count += 1;
    for (const key of keys) {
      const set = this.waiters.get(key) ?? new Set();
      this.waiters.set(key, set);
      set.add(fire);
    }
    if (this.stopping) fire();
    return { fired, dispose };
  }

  close(): void {
    this.unsubscribe();
    for (const set of [...this.waiters.values()]) for (const fire of [...set]) fire();
  }

  private wake(store: string): void {
    for (const key of [store, "*"]) {
      const set = this.waiters.get(key);
      if (set) for (const fire of [...set]) fire();
    }
  }
}
