// Many small resources of one store written in one call: ResourceService.WriteMany (docs/rest.md,
// "Writing many resources at once"), a unary call of the Connect protocol over the REST client's
// own fetch (the h2c connection of push) with its token. What a push of thousands of files of a few
// KiB sends instead of a PUT per file: the request's own work on both sides is paid once per batch
// (issue 31, docs/benchmarks.md). protobuf-es's wire writer and reader only, as read-many.ts.

import { BinaryReader, BinaryWriter, WireType } from "@bufbuild/protobuf/wire";
import type { TokenProvider } from "../auth.js";
import type { TroveError } from "../trove-errors.js";
import { errorOf, postConnect } from "./connect-call.js";

/** At most this many items in one call (the server refuses more). */
export const WRITE_MANY_MAX_ITEMS = 1000;

/**
 * At most this many bytes of contents in one call: the server reads a request message of up to
 * 4 MiB and 64 KiB (RESOURCE_EXHAUSTED beyond), and the paths and fields need room too.
 */
export const WRITE_MANY_MAX_BYTES = 3 * 1024 * 1024;

/** One resource to write, whole, with a PUT's conditions. */
export interface WriteManyFile {
  path: string;
  body: Uint8Array;
  /** The stored resource must have this tag (quoted or not; "*": it must exist). */
  ifMatch?: string;
  /** "*": nothing may be there (a conditional create). */
  ifNoneMatch?: string;
  /** The MIME type; none: from the name's extension. */
  contentType?: string;
  /** Base64 MD5 the server checks the contents against. */
  contentMd5?: string;
}

/** One item's answer: the resource as written, or why it was not written (its own typed error). */
export type WriteManyAnswer =
  | {
      index: number;
      path: string;
      created: boolean;
      /** Unquoted entity tag, as a PUT's ETag. */
      tag: string;
      /** Base64 MD5 of the contents as stored. */
      md5: string;
      size: number;
      error?: undefined;
    }
  | { index: number; path: string; error: TroveError };

export interface WriteManyOptions {
  signal?: AbortSignal;
}

/**
 * The request message: store = 1, items = 2 (path 1, contents 2, if_match 3, if_none_match 4,
 * content_type 5, content_md5 6). Each file's contents are copied once, into the message: a
 * BinaryWriter would copy them twice (into its chunks, then into the message), a batch's bytes
 * three times in memory at once.
 */
function encodeRequest(store: string, items: readonly WriteManyFile[]): Uint8Array {
  const parts: Uint8Array[] = [new BinaryWriter().tag(1, WireType.LengthDelimited).string(store).finish()];
  for (const item of items) {
    // The fields before the contents, ending with the contents' tag and length; then the rest.
    const before = new BinaryWriter()
      .tag(1, WireType.LengthDelimited)
      .string(item.path)
      .tag(2, WireType.LengthDelimited)
      .uint32(item.body.byteLength)
      .finish();
    const after = new BinaryWriter();
    if (item.ifMatch !== undefined) after.tag(3, WireType.LengthDelimited).string(item.ifMatch);
    if (item.ifNoneMatch !== undefined) after.tag(4, WireType.LengthDelimited).string(item.ifNoneMatch);
    if (item.contentType) after.tag(5, WireType.LengthDelimited).string(item.contentType);
    if (item.contentMd5) after.tag(6, WireType.LengthDelimited).string(item.contentMd5);
    const rest = after.finish();
    const length = before.byteLength + item.body.byteLength + rest.byteLength;
    parts.push(new BinaryWriter().tag(2, WireType.LengthDelimited).uint32(length).finish(), before, item.body, rest);
  }
  return Buffer.concat(parts);
}

interface Written {
  created: boolean;
  tag: string;
  md5: string;
  size: number;
}

/** WriteResponse: resource = 1 (tag 6, size 8, md5 9), created = 2. */
function decodeWrite(bytes: Uint8Array): Written {
  const r = new BinaryReader(bytes);
  const out: Written = { created: false, tag: "", md5: "", size: 0 };
  while (r.pos < r.len) {
    const [field, type] = r.tag();
    if (field === 1 && type === WireType.LengthDelimited) {
      const resource = new BinaryReader(r.bytes());
      while (resource.pos < resource.len) {
        const [f, t] = resource.tag();
        if (f === 6 && t === WireType.LengthDelimited) out.tag = resource.string();
        else if (f === 8 && t === WireType.Varint) out.size = Number(resource.int64());
        else if (f === 9 && t === WireType.LengthDelimited) out.md5 = resource.string();
        else resource.skip(t, f);
      }
    } else if (field === 2 && type === WireType.Varint) out.created = r.bool();
    else r.skip(type, field);
  }
  return out;
}

/** WriteManyResponse: results = 1, each write = 1, error_code = 2, error_message = 3. */
function decodeResults(bytes: Uint8Array, items: readonly WriteManyFile[]): WriteManyAnswer[] {
  const r = new BinaryReader(bytes);
  const results: WriteManyAnswer[] = [];
  while (r.pos < r.len) {
    const [field, type] = r.tag();
    if (field !== 1 || type !== WireType.LengthDelimited) {
      r.skip(type, field);
      continue;
    }
    const m = new BinaryReader(r.bytes());
    let written: Written | undefined;
    let code = "";
    let message = "";
    while (m.pos < m.len) {
      const [f, t] = m.tag();
      if (f === 1 && t === WireType.LengthDelimited) written = decodeWrite(m.bytes());
      else if (f === 2 && t === WireType.LengthDelimited) code = m.string();
      else if (f === 3 && t === WireType.LengthDelimited) message = m.string();
      else m.skip(t, f);
    }
    const index = results.length;
    const item = items[index];
    if (item === undefined) throw new Error(`a WriteMany answer of more results than its ${items.length} items`);
    if (code !== "") results.push({ index, path: item.path, error: errorOf(code, message) });
    else if (written === undefined)
      throw new Error(`the WriteMany answer for ${item.path} has neither a write nor an error`);
    else results.push({ index, path: item.path, ...written });
  }
  if (results.length !== items.length) {
    throw new Error(`a WriteMany answer of ${results.length} results for ${items.length} items`);
  }
  return results;
}

/** The WriteMany of one REST client (`fetch` and `tokenProvider` are its own). */
export function createWriteMany(baseUrl: string, doFetch: typeof fetch, tokenProvider: TokenProvider | undefined) {
  const url = `${baseUrl}/trove.resources.v2.ResourceService/WriteMany`;

  /** Each item's answer in the order of `items`; a failure of the whole call rejects (a typed TroveError). */
  return async function writeMany(
    store: string,
    items: readonly WriteManyFile[],
    options: WriteManyOptions = {},
  ): Promise<WriteManyAnswer[]> {
    if (items.length > WRITE_MANY_MAX_ITEMS) {
      throw new RangeError(`writeMany takes at most ${WRITE_MANY_MAX_ITEMS} items, not ${items.length}`);
    }
    const bytes = items.reduce((sum, item) => sum + item.body.byteLength, 0);
    if (bytes > WRITE_MANY_MAX_BYTES) {
      throw new RangeError(`writeMany takes at most ${WRITE_MANY_MAX_BYTES} bytes of contents, not ${bytes}`);
    }
    const res = await postConnect(url, encodeRequest(store, items), {
      streaming: false,
      what: "write many resources at once",
      doFetch,
      tokenProvider,
      signal: options.signal,
    });
    try {
      return decodeResults(new Uint8Array(await res.arrayBuffer()), items);
    } catch (err) {
      if (options.signal?.aborted) throw options.signal.reason ?? err;
      throw err;
    }
  };
}
