// Many small resources of one store in one call: ResourceService.ReadMany (docs/rest.md,
// "Reading many resources at once") in the Connect protocol's server stream, over the REST client's
// own fetch (the h2c connection of push, pull and mirror) with its token. What a pull of thousands
// of files of a few KiB sends instead of a GET per file: the per-request work of both sides, most
// of a small download's CPU, is paid once per batch (issue 31, docs/benchmarks.md).
//
// Written with protobuf-es's wire reader and writer, not connect-es's client: loading connect-es
// and protobuf-es's reflection cost the CLI 120-150 ms and 20 MB of memory (measured, session 19),
// more than a small pull's whole batch. The messages are three (ReadManyResponse, ReadResponse,
// Resource; proto/trove/resources/v2/resources.proto), the protocol's envelope five bytes, and an
// error the end of the stream's JSON (connectrpc.com/docs/protocol, "Streaming-Response").

import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import type { TokenProvider } from "../auth.js";
import { BatchUnsupportedError, errorForStatus, type TroveError } from "../trove-errors.js";
import { errorOf, parseJson, postConnect } from "./connect-call.js";

/** At most this many paths in one call (the server refuses more). */
export const READ_MANY_MAX_PATHS = 1000;

/** Largest message accepted: a Read chunk (1 MiB) with its resource, and room to spare. */
const MAX_MESSAGE_BYTES = 2 * 1024 * 1024;

/** One path's answer: its contents whole, or why it was not read. */
export type ReadManyResult =
  | {
      index: number;
      path: string;
      /** Unquoted entity tag, as a GET's ETag. */
      tag: string;
      /** Base64 MD5 of the contents, as a GET's Content-MD5 ("" for a directory). */
      md5: string;
      /** The MIME type, as a GET's Content-Type. */
      type: string;
      size: number;
      directory: boolean;
      lastModifiedMillis: number;
      body: Buffer;
      error?: undefined;
    }
  | { index: number; path: string; error: TroveError };

export interface ReadManyOptions {
  signal?: AbortSignal;
}

/** The request message: store = 1, paths = 2. */
function encodeRequest(store: string, paths: readonly string[]): Uint8Array {
  const w = new BinaryWriter();
  w.tag(1, WireType.LengthDelimited).string(store);
  for (const path of paths) w.tag(2, WireType.LengthDelimited).string(path);
  const message = w.finish();
  const envelope = new Uint8Array(5 + message.byteLength);
  new DataView(envelope.buffer).setUint32(1, message.byteLength);
  envelope.set(message, 5);
  return envelope;
}

interface Message {
  index: number;
  /** The Read message's resource, when it has one (the first message of a path). */
  resource?: { directory: boolean; tag: string; type: string; size: number; md5: string; lastModifiedMillis: number };
  chunk?: Uint8Array;
  errorCode: string;
  errorMessage: string;
}

function decodeResource(bytes: Uint8Array): NonNullable<Message["resource"]> {
  const r = new BinaryReader(bytes);
  const out = { directory: false, tag: "", type: "", size: 0, md5: "", lastModifiedMillis: 0 };
  while (r.pos < r.len) {
    const [field, type] = r.tag();
    if (field === 4 && type === WireType.Varint) out.directory = r.bool();
    else if (field === 6 && type === WireType.LengthDelimited) out.tag = r.string();
    else if (field === 7 && type === WireType.LengthDelimited) out.type = r.string();
    else if (field === 8 && type === WireType.Varint) out.size = Number(r.int64());
    else if (field === 9 && type === WireType.LengthDelimited) out.md5 = r.string();
    else if (field === 12 && type === WireType.Varint) out.lastModifiedMillis = Number(r.int64());
    else r.skip(type, field);
  }
  return out;
}

function decodeMessage(bytes: Uint8Array): Message {
  const r = new BinaryReader(bytes);
  const out: Message = { index: 0, errorCode: "", errorMessage: "" };
  while (r.pos < r.len) {
    const [field, type] = r.tag();
    if (field === 1 && type === WireType.Varint) out.index = r.uint32();
    else if (field === 2 && type === WireType.LengthDelimited) {
      const read = new BinaryReader(r.bytes());
      while (read.pos < read.len) {
        const [f, t] = read.tag();
        if (f === 1 && t === WireType.LengthDelimited) out.resource = decodeResource(read.bytes());
        else if (f === 3 && t === WireType.LengthDelimited) out.chunk = read.bytes();
        else read.skip(t, f);
      }
    } else if (field === 3 && type === WireType.LengthDelimited) out.errorCode = r.string();
    else if (field === 4 && type === WireType.LengthDelimited) out.errorMessage = r.string();
    else r.skip(type, field);
  }
  return out;
}

/** The envelopes of a Connect stream's body: [flags, message], each message at most MAX_MESSAGE_BYTES. */
async function* envelopes(body: ReadableStream<Uint8Array>): AsyncGenerator<[number, Uint8Array]> {
  const reader = body.getReader();
  let pending: Buffer = Buffer.alloc(0);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      pending = pending.byteLength === 0 ? Buffer.from(value) : Buffer.concat([pending, value]);
      let at = 0;
      while (pending.byteLength - at >= 5) {
        const length = pending.readUInt32BE(at + 1);
        if (length > MAX_MESSAGE_BYTES)
          throw new Error(`a ReadMany message of ${length} bytes, over ${MAX_MESSAGE_BYTES}`);
        if (pending.byteLength - at < 5 + length) break;
        yield [pending[at] as number, pending.subarray(at + 5, at + 5 + length)];
        at += 5 + length;
      }
      pending = at === pending.byteLength ? Buffer.alloc(0) : pending.subarray(at);
    }
    if (pending.byteLength > 0) throw new Error("the ReadMany answer ended within a message");
  } finally {
    await reader.cancel().catch(() => {});
  }
}

/**
 * The ReadMany of one REST client (`fetch` and `tokenProvider` are its own). Each path's contents
 * are held whole until its answer is complete, bounded by the size its first message announced:
 * meant for files of up to a few hundred KiB (pull batches those of up to 256 KiB).
 */
export function createReadMany(baseUrl: string, doFetch: typeof fetch, tokenProvider: TokenProvider | undefined) {
  const url = `${baseUrl}/trove.resources.v2.ResourceService/ReadMany`;

  /** Each path's answer in the order of `paths`; a failure of the whole call rejects (a typed TroveError). */
  return async function* readMany(
    store: string,
    paths: readonly string[],
    options: ReadManyOptions = {},
  ): AsyncGenerator<ReadManyResult> {
    if (paths.length > READ_MANY_MAX_PATHS) {
      throw new RangeError(`readMany takes at most ${READ_MANY_MAX_PATHS} paths, not ${paths.length}`);
    }
    const res = await postConnect(url, encodeRequest(store, paths), {
      streaming: true,
      what: "read many resources at once",
      doFetch,
      tokenProvider,
      signal: options.signal,
    });
    if (res.body === null) throw errorForStatus(res.status, "a ReadMany answer without a body");
    let current: Extract<ReadManyResult, { body: Buffer }> | undefined;
    let parts: Uint8Array[] = [];
    let received = 0;
    const finish = (): ReadManyResult => {
      const done = current as Extract<ReadManyResult, { body: Buffer }>;
      current = undefined;
      if (received !== done.size && !done.directory) {
        throw new Error(`the ReadMany answer for ${done.path} ended after ${received} of its ${done.size} bytes`);
      }
      const only = parts[0];
      done.body =
        parts.length === 1 && only !== undefined
          ? Buffer.from(only.buffer, only.byteOffset, only.byteLength)
          : Buffer.concat(parts, received);
      parts = [];
      return done;
    };
    let ended = false;
    try {
      for await (const [flags, bytes] of envelopes(res.body)) {
        if (flags & 0x02) {
          ended = true;
          // The end of the stream: an error of the whole call, or nothing.
          const end = parseJson(Buffer.from(bytes).toString("utf8")) as { error?: { code?: string; message?: string } };
          if (end?.error) {
            if (end.error.code === "unimplemented") {
              throw new BatchUnsupportedError(
                501,
                `the server does not read many resources at once: ${end.error.message}`,
              );
            }
            throw errorOf(end.error.code ?? "unknown", end.error.message ?? "");
          }
          break;
        }
        const m = decodeMessage(bytes);
        const path = paths[m.index];
        if (path === undefined) throw new Error(`a ReadMany answer for path ${m.index} of ${paths.length}`);
        if (current !== undefined && current.index !== m.index) yield finish();
        if (m.errorCode !== "") {
          current = undefined;
          parts = [];
          yield { index: m.index, path, error: errorOf(m.errorCode, m.errorMessage) };
          continue;
        }
        if (current === undefined) {
          const r = m.resource;
          if (r === undefined) throw new Error(`the ReadMany answer for ${path} has no resource`);
          current = { index: m.index, path, ...r, body: EMPTY };
          received = 0;
        }
        if (m.chunk !== undefined && m.chunk.byteLength > 0) {
          received += m.chunk.byteLength;
          if (received > current.size)
            throw new Error(`the ReadMany answer for ${path} is longer than its ${current.size} bytes`);
          parts.push(m.chunk);
        }
      }
      if (!ended) throw new Error("the ReadMany answer ended without its end of stream");
      if (current !== undefined) yield finish();
    } catch (err) {
      if (options.signal?.aborted) throw options.signal.reason ?? err;
      throw err;
    }
  };
}

const EMPTY = Buffer.alloc(0);
