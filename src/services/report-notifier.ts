// In-process signals of content-insights reports: a report's status changed (wakes its
// watchers), a job was stored (wakes the local worker). Other instances' changes are found by
// the watchers' and the worker's periodic checks.

export class ReportNotifier {
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly jobListeners = new Set<() => void>();

  /** Resolves when `id` changes, after `ms`, or when `signal` aborts; whichever is first. */
  waitForChange(id: string, ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
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
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal?.addEventListener("abort", done, { once: true });
      set.add(done);
      if (signal?.aborted) done();
    });
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
