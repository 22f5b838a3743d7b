// What the MongoDB adapter's modules share about the driver: its failures as domain errors (a
// lost connection is UnavailableError, 503 / gRPC Unavailable; a missing GridFS file is
// NotFoundError), BSON binaries as bytes, and GridFS files read and removed.

import type { GridFSBucket } from "mongodb";
import {
  MongoClientClosedError,
  MongoError,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoOperationTimeoutError,
  MongoServerClosedError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
} from "mongodb";
import { InsufficientStorageError, NotFoundError, UnavailableError } from "../../domain/errors.js";

/**
 * Server error codes that mean "the server is going away or not the one to ask", not "this
 * request is wrong": the driver's own list of retryable errors (HostUnreachable, HostNotFound,
 * NetworkTimeout, ShutdownInProgress, PrimarySteppedDown, ExceededTimeLimit, SocketException,
 * NotWritablePrimary, InterruptedAtShutdown, InterruptedDueToReplStateChange, NotPrimary...).
 */
const UNAVAILABLE_CODES = new Set([6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436]);

const NETWORK_CODES = new Set([
  "EPIPE",
  "ECONNRESET",
  "ECONNREFUSED",
  "ECONNABORTED",
  "ETIMEDOUT",
  "ENOTCONN",
  "EHOSTUNREACH",
  "ENETUNREACH",
]);

/** Whether the database could not be reached or answered that it is going away (a 503, not a bug). */
export function isConnectionError(err: unknown): boolean {
  // A socket error the driver let through unwrapped (seen: EPIPE from a write after the server's FIN).
  if (err instanceof Error && NETWORK_CODES.has((err as NodeJS.ErrnoException).code ?? "")) return true;
  if (!(err instanceof MongoError)) return false;
  return (
    // MongoNetworkError covers timeouts and pools cleared after a network error too.
    err instanceof MongoNetworkError ||
    err instanceof MongoServerSelectionError ||
    err instanceof MongoTopologyClosedError ||
    err instanceof MongoNotConnectedError ||
    err instanceof MongoServerClosedError ||
    err instanceof MongoClientClosedError ||
    err instanceof MongoOperationTimeoutError ||
    (typeof err.code === "number" && UNAVAILABLE_CODES.has(err.code)) ||
    err.hasErrorLabel("RetryableWriteError") ||
    err.hasErrorLabel("ResetPool") ||
    err.hasErrorLabel("SystemOverloadedError") ||
    /connection|topology|ECONNREFUSED|ECONNRESET|EPIPE|not primary|pool (was )?(cleared|closed)|client (was )?closed/i.test(
      err.message,
    )
  );
}

export function isDuplicateKey(err: unknown): boolean {
  return err instanceof MongoError && err.code === 11000;
}

export function isFileNotFound(err: unknown): boolean {
  return /FileNotFound|file not found/i.test(String((err as Error).message));
}

export function unavailable(err: unknown): UnavailableError {
  return new UnavailableError(`MongoDB unavailable: ${(err as Error).message}`);
}

/** Inline contents as stored: the driver returns BSON Binary, whose `buffer` holds the bytes. */
export function binaryBytes(v: unknown): Buffer | null {
  if (v === null || v === undefined) return null;
  const b = v instanceof Uint8Array ? v : (v as { buffer: Uint8Array }).buffer;
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength);
}

/**
 * Whether the database's disk is full: MongoDB's OutOfDiskSpace (14031), or FerretDB's SQLite
 * backend, which answers InternalError (1) with SQLite's "database or disk is full (13)".
 */
export function isDiskFull(err: unknown): boolean {
  return (
    err instanceof MongoError &&
    (err.code === 14031 || (err.code === 1 && /database or disk is full \(13\)/.test(err.message)))
  );
}

/** The domain error for what the driver threw: UnavailableError when the database is away. */
export function domainError(err: unknown): unknown {
  if (isConnectionError(err)) return unavailable(err);
  if (isDiskFull(err)) return new InsufficientStorageError("insufficient storage: the database's disk is full");
  return err;
}

/** Runs `fn`, turning driver connection failures into UnavailableError. */
export async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw domainError(err);
  }
}

async function* guardedStream<T>(source: AsyncIterable<T>): AsyncIterable<T> {
  try {
    yield* source;
  } catch (err) {
    throw domainError(err);
  }
}

type AnyFn = (...args: unknown[]) => unknown;

/**
 * Puts the one error mapping on every public method of an adapter object (promises, async
 * iterables and synchronous throws alike), so no driver error leaves the adapter unmapped,
 * whatever path inside it raised it. Methods whose names start with "_" are left alone.
 */
export function guardMethods<T extends object>(target: T): T {
  const names = new Set<string>();
  for (
    let proto = Object.getPrototypeOf(target);
    proto && proto !== Object.prototype;
    proto = Object.getPrototypeOf(proto)
  ) {
    for (const name of Object.getOwnPropertyNames(proto)) names.add(name);
  }
  for (const name of names) {
    const descriptor = Object.getOwnPropertyDescriptor(Object.getPrototypeOf(target), name);
    if (name === "constructor" || name.startsWith("_") || descriptor?.get || descriptor?.set) continue;
    const fn = (target as Record<string, unknown>)[name];
    if (typeof fn !== "function") continue;
    const original = (fn as AnyFn).bind(target);
    Object.defineProperty(target, name, {
      configurable: true,
      writable: true,
      value: (...args: unknown[]) => {
        let result: unknown;
        try {
          result = original(...args);
        } catch (err) {
          throw domainError(err);
        }
        if (result instanceof Promise)
          return result.then(undefined, (err: unknown) => Promise.reject(domainError(err)));
        if (result !== null && typeof result === "object" && Symbol.asyncIterator in result) {
          return guardedStream(result as AsyncIterable<unknown>);
        }
        return result;
      },
    });
  }
  return target;
}

/** The contents of a GridFS file, streamed; NotFoundError when it is gone. */
export async function* readGridFS(bucket: GridFSBucket, blob: string): AsyncIterable<Uint8Array> {
  const stream = bucket.openDownloadStream(blob as never);
  try {
    for await (const chunk of stream) yield chunk as Buffer;
  } catch (err) {
    if (isFileNotFound(err)) throw new NotFoundError(`blob ${blob} not found`);
    if (isConnectionError(err)) throw unavailable(err);
    throw err;
  } finally {
    stream.destroy();
  }
}

/** Removes a GridFS file; one already gone is fine. */
export async function removeGridFS(bucket: GridFSBucket, blob: string): Promise<void> {
  try {
    await bucket.delete(blob as never);
  } catch (err) {
    if (!isFileNotFound(err)) throw err;
  }
}
