// Requests in flight: at most N at once (eachLimited), each with its own cancellation
// (createCancellation), so that a run of thousands of requests leaves no listener behind on the
// signal that stops it (fetch keeps a request's abort listener until the request is collected).

/**
 * Calls `fn` for each item, at most `limit` at once. The first error stops the rest: `abort`
 * is called (to cancel what is in flight) and the error is thrown once all have settled.
 */
export async function eachLimited<T>(
  items: Iterable<T>,
  limit: number,
  fn: (item: T) => Promise<void>,
  abort: (err: unknown) => void = () => {},
): Promise<void> {
  const iterator = items[Symbol.iterator]();
  let failed: { error: unknown } | undefined;
  const worker = async () => {
    while (failed === undefined) {
      const next = iterator.next();
      if (next.done) return;
      try {
        await fn(next.value);
      } catch (error) {
        if (failed === undefined) {
          failed = { error };
          abort(error);
        }
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, limit) }, worker));
  if (failed) throw failed.error;
}

/** Cancels a run of requests at once, while each request gets a signal of its own. */
export interface Cancellation {
  /** Aborted when the run is (by `abort` or by the parent signal). */
  readonly signal: AbortSignal;
  /** Runs one request with a signal of its own, aborted with the run's; nothing is left once it settles. */
  run<T>(request: (signal: AbortSignal) => Promise<T>): Promise<T>;
  abort(reason?: unknown): void;
  /** Stops listening to the parent signal. */
  dispose(): void;
}

/**
 * A cancellation that follows `parent` with one listener, however many requests it runs: the
 * signals of the requests in flight are kept in a set and aborted together.
 */
export function createCancellation(parent?: AbortSignal): Cancellation {
  const controller = new AbortController();
  const live = new Set<AbortController>();
  const abort = (reason?: unknown) => {
    if (controller.signal.aborted) return;
    controller.abort(reason);
    for (const c of live) c.abort(reason);
  };
  const onParentAbort = () => abort(parent?.reason);
  if (parent?.aborted) abort(parent.reason);
  else parent?.addEventListener("abort", onParentAbort, { once: true });
  return {
    signal: controller.signal,
    async run(request) {
      const own = new AbortController();
      if (controller.signal.aborted) own.abort(controller.signal.reason);
      live.add(own);
      try {
        return await request(own.signal);
      } finally {
        live.delete(own);
      }
    },
    abort,
    dispose() {
      parent?.removeEventListener("abort", onParentAbort);
    },
  };
}
