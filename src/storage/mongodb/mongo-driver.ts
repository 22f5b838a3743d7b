// What the MongoDB adapter's modules share about the driver: its failures as domain errors (a
// lost connection is UnavailableError, 503 / gRPC Unavailable; a missing GridFS file is
// NotFoundError), BSON binaries as bytes, and GridFS files read and removed.

import type { GridFSBucket } from "mongodb";
import { MongoError, MongoNetworkError, MongoServerSelectionError } from "mongodb";
import { NotFoundError, UnavailableError } from "../../domain/errors.js";

export function isConnectionError(err: unknown): boolean {
  return (
    err instanceof MongoNetworkError ||
    err instanceof MongoServerSelectionError ||
    (err instanceof MongoError && /connection|topology|ECONNREFUSED|not primary/i.test(err.message))
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

/** Runs `fn`, turning driver connection failures into UnavailableError. */
export async function guard<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isConnectionError(err)) throw unavailable(err);
    throw err;
  }
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
