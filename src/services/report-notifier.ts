// In-process signals of content-insights reports: a report's status changed (wakes its
// watchers), a job was stored (wakes the local worker). The other workers of `trove serve
// --workers` are told through their peer channel; other instances' changes are found by the
// watchers' and the worker's periodic checks.

import { UnavailableError } from "../domain/errors.js";
import type { PeerChannel } from "../storage/port.js";

/** Why a report watch ends when the server shuts down (UNAVAILABLE: the client asks another instance). */
export const REPORT_WATCH_SHUTDOWN = "the server is shutting down: ask again, another instance if there is one";

export class ReportNotifier {
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly jobListeners = new Set<() => void>();
  private stopping = false;
  private readonly unsubscribe: Array<() => void> = [];

  constructor(private readonly peers?: PeerChannel) {
    if (!peers) return;
    this.unsubscribe.push(
      peers.subscribe("report", (id) => this.wake(id)),
      peers.subscribe("job", () => this.tellJobListeners()),
    );
  }

  /**
   * Resolves when `id` changes, after `ms`, or when `signal` aborts; whichever is first. Rejects
   * with UnavailableError once the server's shutdown began (at once for a watcher waiting then).
   */
  waitForChange(id: string, ms: number, signal?: AbortSignal): Promise<void> {
    if (this.stopping) return Promise.reject(new UnavailableError(REPORT_WATCH_SHUTDOWN));
    return new Promise((resolve, reject) => {
      let set = this.waiters.get(id);
      if (!set) {
        set = new Set();
        this.waiters.set(id, set);
      }
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener("abort", done);
        const current = this.waiters.get(id);
        current?.delete(done);
        if (current?.size === 0) this.waiters.delete(id);
        if (this.stopping && !signal?.aborted) reject(new UnavailableError(REPORT_WATCH_SHUTDOWN));
        else resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
      set.add(done);
      if (signal?.aborted) done();
    });
  }

  /** Shutdown began: every watcher ends (UnavailableError), and every later one at once. */
  shutdown(): void {
    this.stopping = true;
    for (const stop of this.unsubscribe.splice(0)) stop();
    for (const set of [...this.waiters.values()]) for (const wake of [...set]) wake();
  }

  changed(id: string): void {
    this.wake(id);
    this.peers?.publish("report", id);
  }

  private wake(id: string): void {
    for (const wake of [...(this.waiters.get(id) ?? [])]) wake();
  }

  /** Watchers waiting now (leak checks). */
  get waiterCount(): number {
    let n = 0;
    for (const set of this.waiters.values()) n += set.size;
    return n;
  }

  onJob(listener: () => void): () => void {
    this.jobListeners.add(listener);
    return () => this.jobListeners.delete(listener);
  }

  jobAdded(): void {
    this.tellJobListeners();
    this.peers?.publish("job", "");
  }

  private tellJobListeners(): void {
    for (const listener of this.jobListeners) listener();
  }
}
