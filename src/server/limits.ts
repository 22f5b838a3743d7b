// The limits of the listener and of every RPC, with their defaults: one place, each one a flag
// and an environment variable (config.ts) and a line in docs/security.md.

export interface ServerLimits {
  /** Milliseconds a new connection may stay silent before its first byte (the protocol sniff). */
  firstByteTimeout: number;
  /** Milliseconds an HTTP/1.1 client has to send a complete request head. */
  headersTimeout: number;
  /** Milliseconds an HTTP/1.1 connection may stay idle between requests. */
  keepAliveTimeout: number;
  /** Milliseconds an HTTP/2 session may stay without any open stream before it is closed. */
  sessionIdleTimeout: number;
  /** Streams one HTTP/2 session may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). */
  maxConcurrentStreams: number;
  /** Connections open at once; beyond it a connection is answered 503 (HTTP/1.1) or closed (HTTP/2). */
  maxConnections: number;
  /**
   * Long-lived requests (long polls, watches, report downloads, large uploads and downloads:
   * the route table's `longLived`, routes.ts) in flight at once; beyond it one answers 503 (UNAVAILABLE). Below
   * `maxConnections`, so that short requests always keep the connections left over.
   * Undefined: four fifths of `maxConnections` (capacity.ts).
   */
  maxLongLived: number | undefined;
  /** Long-lived requests one authenticated subject may have in flight; beyond it 429 (RESOURCE_EXHAUSTED). */
  maxLongLivedPerCaller: number;
  /** Long-lived requests every unauthenticated caller together may have in flight (open paths); beyond it 429. */
  maxLongLivedUnauthenticated: number;
  /**
   * Bytes a second a request body must bring over every window of `headersTimeout`, else 408 and
   * closed (body-rate.ts); 0: no minimum.
   */
  minBodyRate: number;
}

/**
 * The limits whose hits are counted (`trove_limit_refusals_total{limit}`): the connection cap, the
 * long-lived budget, a caller's share of it, the unauthenticated callers' share, the minimum body
 * rate, request heads not complete in time (HTTP/1.1 408, HTTP/2 unfinished header blocks),
 * HTTP/2 sessions closed for idleness, and idle connections closed at the connection cap to admit
 * a new one.
 */
export const LIMIT_NAMES = [
  "connections",
  "long_lived",
  "long_lived_per_caller",
  "long_lived_unauthenticated",
  "body_rate",
  "headers",
  "session_idle",
  "idle_evicted",
] as const;

export type LimitName = (typeof LIMIT_NAMES)[number];

/** Told of every hit of a limit. */
export type LimitObserver = (limit: LimitName) => void;

export const DEFAULT_LIMITS: ServerLimits = {
  firstByteTimeout: 10_000,
  headersTimeout: 20_000,
  keepAliveTimeout: 15_000,
  sessionIdleTimeout: 30_000,
  maxConcurrentStreams: 256,
  maxConnections: 1000,
  maxLongLived: undefined,
  maxLongLivedPerCaller: 1000,
  maxLongLivedUnauthenticated: 100,
  minBodyRate: 500,
};

/**
 * How often the HTTP/1.1 server looks for request heads that ran out of time (Node's
 * `connectionsCheckingInterval`, 30 s by default, which would let a 1 s headers timeout run to
 * 30 s): a quarter of the timeout, between 100 ms and 1 s.
 */
export function headersCheckingInterval(headersTimeout: number): number {
  return Math.max(100, Math.min(1000, Math.floor(headersTimeout / 4)));
}

/**
 * How long a connection answered with a refusal (408, 400, 431, 405, 503) is kept while its answer
 * is sent: then it is destroyed, whether or not the client read the answer or closed its side.
 */
export const CLOSE_LINGER_MS = 1000;

/**
 * The slack beyond each timeout: a connection that hits it is closed (its descriptor released) at
 * the latest this much later (docs/security.md, "Limits"). First byte: at the timeout (the socket is
 * destroyed). Request head: one checking interval (at most 1 s) until Node notices, then the 408 and
 * CLOSE_LINGER_MS. Keep-alive idle: the 1 s Node adds so that a client reusing the connection at the
 * advertised timeout does not race the close. HTTP/2 idle session (or unfinished header block): one
 * check (at most 1 s), GOAWAY, at most 1 s for the session to close, then CLOSE_LINGER_MS. A busy event loop's timer delays come on top of these.
 */
export const TIMEOUT_SLACK_MS = {
  firstByte: 0,
  headers: 1000 + CLOSE_LINGER_MS,
  keepAlive: 1000,
  sessionIdle: 2000 + CLOSE_LINGER_MS,
} as const;

/** Grace an idle HTTP/2 session gets between its GOAWAY and its destruction. */
export const SESSION_CLOSE_GRACE_MS = 1000;

/** Seconds a client refused for want of a connection should wait (`Retry-After`). */
export const RETRY_AFTER_SECONDS = 1;

/**
 * Largest message of a Write stream: the contents come in chunks, so the limit is a chunk
 * (gRPC's customary 4 MiB), never the whole resource.
 */
export const MAX_CHUNK_BYTES = 4 * 1024 * 1024;

/** Room for the fields beside a chunk (store, path, tags, content type, framing). */
const MESSAGE_OVERHEAD_BYTES = 64 * 1024;

/**
 * Largest RPC request message read (`readMaxBytes`): a chunk of a resource, or the whole resource
 * when resources may not be larger than a chunk, plus the fields beside it. Larger messages are
 * refused (RESOURCE_EXHAUSTED) before they are buffered; a declared length above it at once.
 */
export function rpcReadMaxBytes(maxResourceSize: number): number {
  return Math.min(maxResourceSize, MAX_CHUNK_BYTES) + MESSAGE_OVERHEAD_BYTES;
}

/** The default bound of log lines waiting for stdout (--log-buffer): 8 MiB, about 40,000 request lines. */
export const DEFAULT_LOG_BUFFER = 8 * 1024 * 1024;
