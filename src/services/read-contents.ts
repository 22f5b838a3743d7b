// The Read messages of one file state, one implementation for the current read and the reads of
// history (a version, a moment): "not modified" when a tag matches, else its inline contents or
// its blob in chunks of at most READ_MESSAGE_CHUNK bytes, the resource on the first message.

import type { HandlerContext } from "@connectrpc/connect";
import type { ReadResponse } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { NotFoundError } from "../domain/errors.js";
import { tagMatches } from "../domain/etag.js";
import type { NodeRecord, StoragePort } from "../storage/port.js";
import { throwIfCallAborted } from "./call-end.js";
import { claimLargeTransfer, contentsTurn } from "./long-lived.js";

/**
 * Largest chunk of a Read message: storage may read in larger pieces, a message stays well below
 * the 4 MiB that gRPC clients accept by default (grpc-go, grpc-java), whatever the storage.
 */
export const READ_MESSAGE_CHUNK = 1024 * 1024;

const EMPTY = new Uint8Array(0);

/**
 * The ReadResponse message create(ReadResponseSchema, ...) would build, written out: create walks
 * the schema for each field, on every read (issue 32, as toResource does for the resource).
 */
export function readResponse(resource: ReadResponse["resource"], chunk: Uint8Array, notModified = false): ReadResponse {
  return { $typeName: "trove.resources.v2.ReadResponse", resource, notModified, chunk };
}

/**
 * The one message of a file state when it is known at once: "not modified" when a tag matches, its
 * contents when they are inline; undefined when they are in a blob (fileMessages reads it).
 */
export function messageNow(
  node: NodeRecord,
  resource: NonNullable<ReadResponse["resource"]>,
  ifNoneMatch: readonly string[],
): ReadResponse | undefined {
  if (ifNoneMatch.length > 0 && tagMatches(ifNoneMatch, node.tag)) return readResponse(resource, EMPTY, true);
  if (node.inline) return readResponse(resource, node.inline);
  return undefined;
}

/** A directory's one Read message: its resource. */
export function directoryMessage(resource: NonNullable<ReadResponse["resource"]>): ReadResponse {
  return readResponse(resource, EMPTY);
}

/**
 * The messages of a file state. With `retryable`, a blob gone before its first chunk (replaced
 * since the node was read) yields nothing and returns false, for the caller to read the node
 * again; otherwise its NotFoundError is thrown. Between messages the call may have run out of time
 * or been cancelled: reading stops then, and the blob's stream is closed whichever way it ends.
 */
export async function* fileMessages(
  storage: Pick<StoragePort, "readBlob">,
  node: NodeRecord,
  resource: NonNullable<ReadResponse["resource"]>,
  ifNoneMatch: readonly string[],
  ctx: HandlerContext,
  retryable = false,
): AsyncGenerator<ReadResponse, boolean> {
  const now = messageNow(node, resource, ifNoneMatch);
  if (now !== undefined) {
    yield now;
    return true;
  }
  // A large download is long-lived work: it takes its place (or is refused) before the blob is opened.
  claimLargeTransfer(ctx, node.size);
  // Then its turn among the connection's answers (HTTP/2 bounds them per session), before it reads.
  const turn = contentsTurn(ctx);
  if (turn !== undefined) {
    await turn;
    throwIfCallAborted(ctx);
  }
  const chunks = boundedChunks(storage.readBlob(node))[Symbol.asyncIterator]();
  let first: IteratorResult<Uint8Array>;
  try {
    first = await chunks.next();
  } catch (err) {
    if (retryable && err instanceof NotFoundError) return false;
    throw err;
  }
  try {
    yield readResponse(resource, first.done ? EMPTY : first.value);
    for (let next = first; !next.done; ) {
      throwIfCallAborted(ctx);
      next = await chunks.next();
      if (!next.done) yield readResponse(undefined, next.value);
    }
    return true;
  } finally {
    await chunks.return?.();
  }
}

/** The contents in chunks of at most READ_MESSAGE_CHUNK bytes: views of what storage read, no copies. */
async function* boundedChunks(chunks: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  for await (const chunk of chunks) {
    if (chunk.byteLength <= READ_MESSAGE_CHUNK) yield chunk;
    else
      for (let at = 0; at < chunk.byteLength; at += READ_MESSAGE_CHUNK) {
        yield chunk.subarray(at, at + READ_MESSAGE_CHUNK);
      }
  }
}
