// Waiting to reconnect after the server went away: exponential backoff with jitter, capped,
// shared by the mirror and `trove watch`; and which failures are worth waiting out.

import { ConnectionError, ServerError, TooManyRequestsError, UnavailableError } from "./trove-errors.js";

export interface BackoffOptions {
  /** The first pause's ceiling, in ms (default 250). */
  initialMs?: number;
  /** The longest pause, in ms (default 10,000). */
  maxMs?: number;
  /** A number in [0, 1): Math.random unless given. */
  random?: () => number;
}

export interface Backoff {
  /** The pause before the next attempt, in ms: each one's ceiling doubles up to the cap. */
  next(): number;
  /** After a success: the next pause is the first one again. */
  reset(): void;
}

/**
 * "Equal jitter": a pause is half its ceiling plus a random part of the other half, so clients
 * that lost the same server at the same moment do not all come back at once, and none retries
 * sooner than half the ceiling.
 */
export function createBackoff(options: BackoffOptions = {}): Backoff {
  const initial = options.initialMs ?? 250;
  const max = options.maxMs ?? 10_000;
  const random = options.random ?? Math.random;
  let ceiling = initial;
  return {
    next() {
      const pause = Math.min(ceiling, max);
      ceiling = Math.min(ceiling * 2, max);
      return Math.round(pause / 2 + (random() * pause) / 2);
    },
    reset() {
      ceiling = initial;
    },
  };
}

/**
 * Whether a failure may pass by itself (the server is unreachable, restarting or overloaded, a
 * connection broke, the caller's fair share is taken for now: 429): worth a retry. Answers about
 * the request itself (other 4xx) are not. Connect and gRPC failures: isTransientConnectError
 * (connect-errors.ts), so that REST-only callers load no Connect.
 */
export function isTransient(err: unknown): boolean {
  if (
    err instanceof ConnectionError ||
    err instanceof UnavailableError ||
    err instanceof TooManyRequestsError ||
    err instanceof ServerError
  ) {
    return true;
  }
  // Broken connections while reading a body.
  return err instanceof TypeError || (err as NodeJS.ErrnoException)?.code === "ECONNRESET";
}

/** Resolves after `ms`, or at once when `signal` aborts. */
export function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}
