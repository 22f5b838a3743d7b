// Wakes long polls and watch streams when a store they follow changes. The
// storage adapter signals every committed change (its own, and where it can
// tell, other instances'); waiters are armed before they read, so a change
// between the read and the wait is never missed.
//
// A parked poll costs one Waiter object, told how its wait ended through its
// target (`waitThen`, no promise; `wait` adds one): no timer, closure or abort
// controller of its own (issue 14). Deadlines are kept in one heap with one
// timer, set for the earliest deadline; a change wakes its waiters
// synchronously, in the commit's turn of the event loop, and their polls go on
// in that turn's microtasks (docs/change-feed.md, "Waiting").

import type { StoragePort } from "../storage/port.js";

/** How a wait ended: "fired" (a followed store changed, or shutdown), "timeout" or "aborted". */
export type WaitEnd = "fired" | "timeout" | "aborted";

/**
 * What ends a wait early, its caller having gone away: an AbortSignal, or anything smaller in its
 * shape (rest/http.ts's ClientGone). `listener` is removed after it fired or when the wait ends.
 */
export interface CallEnd {
  readonly aborted: boolean;
  addEventListener(type: "abort", listener: AbortListener, options?: { once?: boolean }): void;
  removeEventListener(type: "abort", listener: AbortListener): void;
}

/** Whom a wait tells how it ended, where a promise would hold a frame (a parked poll, issue 14). */
export interface WaitTarget {
  waited(end: WaitEnd): void;
}

/** A listener of a CallEnd's `abort` (a Waiter is its own). */
export interface AbortListener {
  handleEvent(): void;
}

export class Waiter {
  /** A followed store changed (or the server began its shutdown) since the waiter was armed. */
  fired = false;
  /** Released: no longer in the notifier's sets. */
  private disposed = false;
  /** While waiting: settles the wait (a promise's resolve, or a WaitTarget told in a microtask). */
  private settle: ((end: WaitEnd) => void) | WaitTarget | undefined = undefined;
  private signal: CallEnd | undefined = undefined;
  /** While waiting: Date.now() at which the wait times out, and the place in the deadline heap. */
  deadline = 0;
  heapIndex = -1;

  constructor(
    private readonly notifier: ChangeNotifier,
    readonly keys: readonly string[],
  ) {}

  /**
   * Waits until a followed store changes (at once if one did since arming), `ms` pass, or
   * `signal` aborts.
   */
  wait(ms: number, signal: CallEnd): Promise<WaitEnd> {
    if (this.fired) return Promise.resolve("fired");
    if (signal.aborted) return Promise.resolve("aborted");
    return new Promise<WaitEnd>((resolve) => this.park(ms, signal, resolve));
  }

  /**
   * As `wait`, but tells `target` how the wait ended, always after this call returned (in a
   * microtask at the earliest): no promise, and nothing of the caller's frame, is held meanwhile.
   */
  waitThen(ms: number, signal: CallEnd, target: WaitTarget): void {
    if (this.fired || signal.aborted) {
      const end: WaitEnd = this.fired ? "fired" : "aborted";
      queueMicrotask(() => target.waited(end));
      return;
    }
    this.park(ms, signal, target);
  }

  private park(ms: number, signal: CallEnd, settle: ((end: WaitEnd) => void) | WaitTarget): void {
    if (this.settle) throw new Error("waiter already waiting");
    this.settle = settle;
    this.signal = signal;
    // The waiter is its own listener (handleEvent): no closure per wait.
    signal.addEventListener("abort", this, { once: true });
    this.notifier.schedule(this, Date.now() + ms);
  }

  /** The signal aborted. */
  handleEvent(): void {
    this.end("aborted");
  }

  /** A followed store changed: releases the waiter and ends its wait. */
  fire(): void {
    this.fired = true;
    this.dispose();
  }

  /** Releases the waiter (idempotent); a wait in progress ends as "fired" if it fired, else "aborted". */
  dispose(): void {
    if (!this.disposed) {
      this.disposed = true;
      this.notifier.release(this);
    }
    this.end(this.fired ? "fired" : "aborted");
  }

  /** Ends the wait in progress, if any. */
  end(how: WaitEnd): void {
    const settle = this.settle;
    if (settle === undefined) return;
    this.settle = undefined;
    this.signal?.removeEventListener("abort", this);
    this.signal = undefined;
    this.notifier.unschedule(this);
    if (typeof settle === "function") settle(how);
    // As a promise's continuation would run: not inside the change's commit, the timer or the abort.
    else queueMicrotask(() => settle.waited(how));
  }
}

export class ChangeNotifier {
  private readonly waiters = new Map<string, Set<Waiter>>();
  private count = 0;
  private stopping = false;
  private readonly unsubscribe: () => void;
  /** Waiters that are waiting, by deadline (a binary min-heap). */
  private readonly heap: Waiter[] = [];
  private timer: NodeJS.Timeout | undefined = undefined;
  /** The deadline the timer is set for. */
  private timerAt = 0;

  constructor(storage: StoragePort) {
    this.unsubscribe = storage.onChange((store) => this.wake(store));
  }

  /** Rises with every change signalled (and at shutdown): a read begun at another generation may miss a change. */
  generation = 0;

  /** Number of armed waiters (for leak checks and metrics). */
  get waiterCount(): number {
    return this.count;
  }

  /** Timers the notifier has set: 1 while anyone waits, whatever their number, else 0. */
  get timerCount(): number {
    return this.timer === undefined ? 0 : 1;
  }

  /** Whether the server's shutdown began: long polls answer now, watch streams end. */
  get shuttingDown(): boolean {
    return this.stopping;
  }

  /** Shutdown began: wakes every waiter, and a waiter armed from now on fires at once. */
  shutdown(): void {
    this.stopping = true;
    this.fireAll();
  }

  /** `null` in stores means every store. */
  arm(stores: readonly string[] | null): Waiter {
    const waiter = new Waiter(this, stores ?? ALL);
    this.count += 1;
    for (const key of waiter.keys) {
      let set = this.waiters.get(key);
      if (set === undefined) {
        set = new Set();
        this.waiters.set(key, set);
      }
      set.add(waiter);
    }
    if (this.stopping) waiter.fire();
    return waiter;
  }

  close(): void {
    this.unsubscribe();
    this.fireAll();
  }

  /** Removes a waiter from the sets (Waiter.dispose). */
  release(waiter: Waiter): void {
    this.count -= 1;
    for (const key of waiter.keys) {
      const set = this.waiters.get(key);
      if (set === undefined) continue;
      set.delete(waiter);
      if (set.size === 0) this.waiters.delete(key);
    }
  }

  /** Puts a waiting waiter in the deadline heap (Waiter.wait). */
  schedule(waiter: Waiter, deadline: number): void {
    waiter.deadline = deadline;
    waiter.heapIndex = this.heap.length;
    this.heap.push(waiter);
    this.up(waiter.heapIndex);
    this.arrange();
  }

  /** Takes a waiter out of the deadline heap (its wait ended). */
  unschedule(waiter: Waiter): void {
    const i = waiter.heapIndex;
    if (i < 0) return;
    waiter.heapIndex = -1;
    const last = this.heap.pop() as Waiter;
    if (last !== waiter) {
      this.heap[i] = last;
      last.heapIndex = i;
      this.down(i);
      this.up(last.heapIndex);
    }
    if (this.heap.length === 0) this.arrange();
  }

  private fireAll(): void {
    this.generation += 1;
    for (const set of [...this.waiters.values()]) for (const waiter of [...set]) waiter.fire();
  }

  private wake(store: string): void {
    this.generation += 1;
    for (const key of [store, "*"]) {
      const set = this.waiters.get(key);
      if (set) for (const waiter of [...set]) waiter.fire();
    }
  }

  /** Sets the one timer for the earliest deadline (none when nobody waits). */
  private arrange(): void {
    const first = this.heap[0];
    if (first === undefined) {
      if (this.timer !== undefined) clearTimeout(this.timer);
      this.timer = undefined;
      return;
    }
    if (this.timer !== undefined && this.timerAt <= first.deadline) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timerAt = first.deadline;
    this.timer = setTimeout(() => this.expire(), Math.max(0, first.deadline - Date.now()));
  }

  /** The timer went off: ends every wait whose deadline passed, then sets the timer for the next. */
  private expire(): void {
    this.timer = undefined;
    const now = Date.now();
    for (let first = this.heap[0]; first !== undefined && first.deadline <= now; first = this.heap[0]) {
      first.end("timeout");
    }
    this.arrange();
  }

  private up(i: number): void {
    const heap = this.heap;
    const w = heap[i] as Waiter;
    while (i > 0) {
      const p = (i - 1) >> 1;
      const parent = heap[p] as Waiter;
      if (parent.deadline <= w.deadline) break;
      heap[i] = parent;
      parent.heapIndex = i;
      i = p;
    }
    heap[i] = w;
    w.heapIndex = i;
  }

  private down(i: number): void {
    const heap = this.heap;
    const n = heap.length;
    const w = heap[i] as Waiter;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= n) break;
      const r = l + 1;
      const c = r < n && (heap[r] as Waiter).deadline < (heap[l] as Waiter).deadline ? r : l;
      const child = heap[c] as Waiter;
      if (child.deadline >= w.deadline) break;
      heap[i] = child;
      child.heapIndex = i;
      i = c;
    }
    heap[i] = w;
    w.heapIndex = i;
  }
}

const ALL: readonly string[] = ["*"];
