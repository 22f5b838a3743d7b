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
}

export const DEFAULT_LIMITS: ServerLimits = {
  firstByteTimeout: 10_000,
  headersTimeout: 20_000,
  keepAliveTimeout: 15_000,
  sessionIdleTimeout: 120_000,
  maxConcurrentStreams: 256,
  maxConnections: 1000,
};

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
