// Requests in flight: at most N at once, and at most so many bytes (eachLimited), each with its
// own cancellation (createCancellation), so that a run of thousands of requests leaves no listener
// behind on the signal that stops it (fetch keeps a request's abort listener until the request is collected).

/**
 * What is in flight at once is also bounded by bytes: at most `bytes`, each item weighing what
 * `weigh` says (a file's size, capped at what a streamed one can hold). An item heavier than the
 * whole budget still goes, alone.
 */
export interface ByteBudget<T> {
  bytes: number;
  weigh(item: T): number;
}

/**
 * Bytes of file contents in flight at once by default (push, pull, a mirror's full copy): the h2c
 * connection's receive window (h2c-fetch.ts), so that what the server is asked for can all be in
 * that window, and what waits in buffers, on either side, stays a few MiB whatever `transfers` is.
 */
export const BYTES_IN_FLIGHT = 4 * 1024 * 1024;

/**
 * What a file of `size` bytes weighs in flight: a file up to WHOLE_FILE_BYTES is held whole; a
 * larger one streams, and holds at most about one stream window (1 MiB) at a time.
 */
export function fileWeight(size: number): number {
  return Math.min(size, 1024 * 1024);
}

/**
 * Files up to this size are sent and received as one buffer (read whole, written with one call);
 * larger ones are streamed, so memory does not grow with a file's size.
 */
export const WHOLE_FILE_BYTES = 256 * 1024;

/**
 * A batch of small files (ReadMany: pull, a mirror's full copy) holds at most this many files and
 * this many bytes, one request each: a request's own cost spread over a hundred files, and a
 * batch still a small part of what may be in flight (BYTES_IN_FLIGHT).
 */
export const BATCH_FILES = 100;
export const BATCH_BYTES = 512 * 1024;

/**
 * A body announced as `size` bytes (Content-Length), read into one buffer; more bytes than
 * announced fail the download, so the buffer is bounded by what was announced.
 */
export async function readWhole(body: ReadableStream<Uint8Array>, size: number, signal?: AbortSignal): Promise<Buffer> {
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  const reader = body.getReader();
  try {
    for (;;) {
      signal?.throwIfAborted();
      const { done, value } = await reader.read();
      if (done) break;
      if (at + value.byteLength > size) throw new Error(`the answer is longer than its Content-Length ${size}`);
      out.set(value, at);
      at += value.byteLength;
    }
  } catch (err) {
    await reader.cancel().catch(() => {});
    throw err;
  } finally {
    reader.releaseLock();
  }
  if (at !== size) throw new Error(`the answer ended after ${at} of its ${size} bytes`);
  return out;
}

/** A budget of `bytes` for items that are files of `sizeOf(item)` bytes. */
export function fileBudget<T>(sizeOf: (item: T) => number, bytes = BYTES_IN_FLIGHT): ByteBudget<T> {
  return { bytes, weigh: (item) => fileWeight(sizeOf(item)) };
}

/** At most `count` tasks at once, holding at most `bytes` between them (createLimiter). */
export interface Limiter {
  /**
   * Starts `task` once fewer than `count` run and `weight` more bytes fit (any weight fits when
   * nothing runs, so an item heavier than the whole budget goes alone). Resolves once it started,
   * with the task's own promise (awaiting the start does not await the task), or with undefined
   * when the limiter stopped (the task is not started).
   */
  start(weight: number, task: () => Promise<void>): Promise<{ task: Promise<void> } | undefined>;
  /** Resolves once no task runs. */
  idle(): Promise<void>;
  /** Starts nothing more; those waiting for room get undefined. */
  stop(): void;
}

/**
 * The one reservation of what is in flight (eachLimited, a push's and a pull's plan): a task that
 * rejects calls `onError` (the limiter goes on; `stop` it to start nothing more).
 */
export function createLimiter(options: { count: number; bytes?: number; onError(error: unknown): void }): Limiter {
  const count = Math.max(1, options.count);
  const budget = options.bytes ?? Number.POSITIVE_INFINITY;
  let stopped = false;
  let running = 0;
  let bytes = 0;
  const tasks = new Set<Promise<void>>();
  // Callers waiting for room, woken together whenever a task settles (each checks again).
  let waiting: (() => void)[] = [];
  const wake = () => {
    const woken = waiting;
    waiting = [];
    for (const resolve of woken) resolve();
  };
  return {
    async start(weight, task) {
      while (!stopped && running > 0 && (running >= count || bytes + weight > budget)) {
        await new Promise<void>((resolve) => waiting.push(resolve));
      }
      if (stopped) return undefined;
      running += 1;
      bytes += weight;
      let own: Promise<void>;
      try {
        own = task();
      } catch (error) {
        own = Promise.reject(error);
      }
      const tracked = own.then(() => {}, options.onError);
      tasks.add(tracked);
      void tracked.finally(() => {
        running -= 1;
        bytes -= weight;
        tasks.delete(tracked);
        wake();
      });
      return { task: own };
    },
    async idle() {
      while (tasks.size > 0) await Promise.all(tasks);
    },
    stop() {
      stopped = true;
      wake();
    },
  };
}

/**
 * Calls `fn` for each item, at most `limit` at once (and, with `budget`, at most its bytes at
 * once). The first error stops the rest: `abort` is called (to cancel what is in flight) and the
 * error is thrown once all have settled.
 */
export async function eachLimited<T>(
  items: Iterable<T>,
  limit: number,
  fn: (item: T) => Promise<void>,
  abort: (err: unknown) => void = () => {},
  budget?: ByteBudget<T>,
): Promise<void> {
  let failed: { error: unknown } | undefined;
  const fail = (error: unknown) => {
    if (failed !== undefined) return;
    failed = { error };
    limiter.stop();
    abort(error);
  };
  const limiter = createLimiter({ count: limit, bytes: budget?.bytes, onError: fail });
  try {
    for (const item of items) {
      const weight = budget ? Math.max(0, budget.weigh(item)) : 0;
      if ((await limiter.start(weight, () => fn(item))) === undefined) break;
    }
  } catch (error) {
    fail(error);
  }
  await limiter.idle();
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
