// In-process signals of content-insights reports: a report's status changed (wakes its
// watchers), a job was stored (wakes the local worker). Other instances' changes are found by
// the watchers' and the worker's periodic checks.

import { UnavailableError } from "../domain/errors.js";

/** Why a report watch ends when the server shuts down (UNAVAILABLE: the client asks another instance). */
export const REPORT_WATCH_SHUTDOWN = "the server is shutting down: ask again, another instance if there is one";

export class ReportNotifier {
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly jobListeners = new Set<() => void>();
  private stopping = false;

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
    for (const set of [...this.waiters.values()]) for (const wake of [...set]) wake();
  }

  changed(id: string): void {
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
    for (const listener of this.jobListeners) listener();
  }
}
