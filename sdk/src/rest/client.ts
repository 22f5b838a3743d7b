// A typed client for the Resource Server REST API (v2, or v1 with `apiVersion: 1`): one method
// per operation, history's included (docs/history.md), typed errors, bearer tokens from a
// TokenProvider (renewed once after a 401).

import { Readable } from "node:stream";
import { type Auth, type TokenProvider, toTokenProvider } from "../auth.js";
import { ConnectionError, DeletedError, errorForStatus, type TroveError } from "../trove-errors.js";
import { type FeedEvent, parseFeed } from "./poll.js";
import type { ReadManyOptions, ReadManyResult } from "./read-many.js";
import type { WriteManyAnswer, WriteManyFile, WriteManyOptions } from "./write-many.js";
import {
  type ListingEntry,
  ListingReader,
  parseListing,
  parseRestore,
  parseStores,
  parseVersions,
  type StoreInfo,
  type SubtreeRestore,
  type VersionEntry,
} from "./xml.js";

export interface RestClientOptions {
  /** The server, e.g. http://127.0.0.1:13242 */
  baseUrl: string;
  /** A bearer token, a TokenProvider, or nothing (an anonymous server). */
  auth?: Auth;
  fetch?: typeof fetch;
  /**
   * The API version to speak: 2 (the default) or 1, /resources/v1/ (docs/rest.md, "Version 1"):
   * `delete` of a directory that is not empty is refused (409, ConflictError), and stores without
   * the sync-recursive feature are not listed and answer 404.
   */
  apiVersion?: ApiVersion;
}

/** The REST API versions the client speaks. */
export type ApiVersion = 1 | 2;
export const API_VERSIONS: readonly ApiVersion[] = [1, 2];

/** Headers of a resource (GET, HEAD, PUT answers). Tags are unquoted. */
export interface ResourceInfo {
  tag: string;
  /** Content-Type of the answer. */
  type: string;
  /** Content-Length, when the server sent one. */
  size: number | undefined;
  /** Base64 MD5 (Content-MD5); "" for a directory. */
  md5: string;
  lastModified: Date | undefined;
  /** Last-Modified-Millis: the exact last-modified time. */
  lastModifiedMillis: number | undefined;
}

export interface PutResult {
  /** 201: the resource or directory was created; false: replaced (200). */
  created: boolean;
  tag: string;
  md5: string;
  lastModified: Date | undefined;
  lastModifiedMillis: number | undefined;
}

/**
 * What `put` sends: bytes, text (UTF-8), a Blob, a Node Readable or a web ReadableStream. No
 * Content-Type goes with any of them unless `contentType` is given (or a Blob has a type).
 */
export type Body = Uint8Array | string | Blob | Readable | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

export interface RequestOptions {
  signal?: AbortSignal;
}

export interface PutOptions extends RequestOptions {
  /** Only replace when the stored tag is one of these (or "*": when it exists). */
  ifMatch?: string | string[];
  /**
   * "*": only create, never replace (RFC 9110's conditional create: PreconditionFailedError, 412,
   * when something exists at the path; a deleted resource does not count); tags: only when the
   * stored tag is none of these.
   */
  ifNoneMatch?: string | string[];
  /**
   * Content-Type; without it none is sent (whatever the body: a string too) and the server
   * takes the type from the extension.
   */
  contentType?: string;
  /** Base64 MD5 of the body: the server refuses (400) a body that does not match. */
  contentMd5?: string;
  /** Length of a streamed body, sent as Content-Length. */
  contentLength?: number;
  /** Called as the body is sent, with the bytes sent so far. */
  onProgress?: (sent: number) => void;
}

/**
 * An earlier moment of a store (docs/history.md): an event id, or a time, which stands for the
 * store's last event at or before it (a Date, or an ISO 8601 date-time with a time zone:
 * `2026-11-27T15:00:00Z`). A string of digits is an event id.
 */
export type Moment = number | Date | string;

// RFC 3339 date-time, as the server takes it: a zone is required, so that one text is one instant.
const DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:\d{2})$/i;

/**
 * A moment as the query parameters `as-of` and `restore-as-of` take it; RangeError with the reason
 * for one the server would refuse as malformed (`what` names it in the message).
 */
export function formatMoment(moment: Moment, what = "as-of"): string {
  if (typeof moment === "number") {
    if (Number.isSafeInteger(moment) && moment >= 0) return String(moment);
    throw new RangeError(`${what} ${moment} is not an event id: give a whole number, 0 or more`);
  }
  if (moment instanceof Date) {
    if (!Number.isNaN(moment.getTime())) return moment.toISOString();
    throw new RangeError(`${what} is an invalid Date`);
  }
  if (/^\d{1,15}$/.test(moment) || (DATE_TIME.test(moment) && !Number.isNaN(Date.parse(moment)))) return moment;
  throw new RangeError(
    `${what} ${JSON.stringify(moment)} is neither an event id (a whole number) nor an ISO 8601 date-time with a time zone (e.g. 2026-11-27T15:00:00Z)`,
  );
}

export interface GetOptions extends RequestOptions {
  /** The contents the resource had at this moment (docs/history.md); 404 when it did not exist then. */
  asOf?: Moment;
  /** Answer "not modified" when the stored tag is one of these. */
  ifNoneMatch?: string | string[];
  /** Serve the answer with this Content-Type. */
  overrideMime?: string;
  /** Called as the body arrives ("bytes" and "text" only), with the bytes received so far. */
  onProgress?: (received: number, total: number | undefined) => void;
}

export type GetResult<T> = ({ notModified: false; body: T } & ResourceInfo) | { notModified: true; tag: string };

export type HeadResult = ({ notModified: false } & ResourceInfo) | { notModified: true; tag: string };

export interface ListOptions extends RequestOptions {
  recursive?: boolean;
  includeAccess?: boolean;
  includeBlobUuid?: boolean;
  includeDeleted?: boolean;
  /** The listing as it was at this moment (docs/history.md). */
  asOf?: Moment;
}

/** The options of `getVersion`: those of `get`, without a moment (a tag names one state). */
export type GetVersionOptions = Omit<GetOptions, "asOf">;

export interface ListVersionsOptions extends RequestOptions {
  /** Each version's blob UUID too. */
  includeBlobUuid?: boolean;
}

export interface RestoreOptions extends RequestOptions {
  /** The tag of the version to make current again (a tag `listVersions` gave). */
  version: string;
  /** Only restore when the current tag is one of these (or "*": when the path exists). */
  ifMatch?: string | string[];
}

export interface RestoreAsOfOptions extends RequestOptions {
  /** The moment to take the directory back to. */
  asOf: Moment;
  /** List the changes without making any. */
  dryRun?: boolean;
}

export interface Listing {
  /** Tag of the listed directory. */
  tag: string;
  lastModified: Date | undefined;
  entries: ListingEntry[];
}

/** A listing read as it arrives (`listStream`). */
export interface ListingStream {
  /** Tag of the listed directory. */
  tag: string;
  lastModified: Date | undefined;
  /** The entries, in the listing's order, a batch per chunk of the answer. */
  batches: AsyncIterable<ListingEntry[]>;
}

export interface StoreInput {
  /**
   * "recursive" (sync-recursive, the default), "snapshot" (sync-snapshot) or "filesystem" (the
   * plain files of the folder in the setting filesystem-location; sync-recursive).
   */
  type?: string;
  /** e.g. { "keep-deleted": "1d" } */
  settings?: Record<string, string>;
}

export interface PollOptions extends RequestOptions {
  /**
   * Store name -> last event id seen. Without cursors the answer is the current status: one
   * reset event per store the caller may read.
   */
  cursors?: Record<string, number> | Map<string, number>;
  /** Seconds to wait for an event before answering with none (the server caps it, 30 s by default). */
  wait?: number;
}

type FetchBody = NonNullable<RequestInit["body"]>;

/** `/resources/v1` or `/resources/v2`. */
function prefixOf(apiVersion: ApiVersion): string {
  return `/resources/v${apiVersion}`;
}

/** `store` and `path` as a URL path: each segment percent-encoded; a trailing "/" kept. */
export function resourcePath(store: string, path: string, apiVersion: ApiVersion = 2): string {
  const trimmed = path.replace(/^\/+/, "");
  const segments = trimmed === "" ? [] : trimmed.split("/");
  return `${prefixOf(apiVersion)}/data/${encodeURIComponent(store)}/${segments.map(encodeURIComponent).join("/")}`;
}

function tagList(tags: string | string[]): string {
  return (Array.isArray(tags) ? tags : [tags]).map((t) => (t === "*" || t.startsWith('"') ? t : `"${t}"`)).join(", ");
}

export function unquoteTag(etag: string | null): string {
  if (!etag) return "";
  return etag.replace(/^W\//, "").replace(/^"(.*)"$/, "$1");
}

function infoOf(res: Response): ResourceInfo {
  const length = res.headers.get("content-length");
  const lastModified = res.headers.get("last-modified");
  const millis = res.headers.get("last-modified-millis");
  return {
    tag: unquoteTag(res.headers.get("etag")),
    type: res.headers.get("content-type") ?? "",
    size: length === null ? undefined : Number(length),
    md5: res.headers.get("content-md5") ?? "",
    lastModified: lastModified === null ? undefined : new Date(lastModified),
    lastModifiedMillis: millis === null ? undefined : Number(millis),
  };
}

function isReplayable(body: Body | undefined): body is Uint8Array | string | Blob | undefined {
  return body === undefined || typeof body === "string" || body instanceof Uint8Array || body instanceof Blob;
}

function toWebStream(body: Body, onProgress?: (n: number) => void): FetchBody {
  if (typeof body === "string" || body instanceof Uint8Array) {
    // A string goes as its UTF-8 bytes: fetch would label a string text/plain;charset=UTF-8,
    // and the server would keep that instead of taking the type from the name.
    const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body;
    onProgress?.(bytes.byteLength);
    return bytes as FetchBody;
  }
  if (body instanceof Blob) {
    onProgress?.(body.size);
    // Without its type, which fetch would send as Content-Type (put sends it when the caller gave none).
    return body.slice(0, body.size, "") as FetchBody;
  }
  let stream: ReadableStream<Uint8Array>;
  if (body instanceof ReadableStream) stream = body;
  else if (body instanceof Readable) stream = Readable.toWeb(body) as ReadableStream<Uint8Array>;
  else stream = Readable.toWeb(Readable.from(body)) as ReadableStream<Uint8Array>;
  if (!onProgress) return stream as FetchBody;
  let sent = 0;
  return stream.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        sent += chunk.byteLength;
        onProgress(sent);
        controller.enqueue(chunk);
      },
    }),
  ) as FetchBody;
}

async function readAll(res: Response, onProgress?: (n: number, total: number | undefined) => void): Promise<Buffer> {
  if (!onProgress || !res.body) return Buffer.from(await res.arrayBuffer());
  const length = res.headers.get("content-length");
  const total = length === null ? undefined : Number(length);
  const chunks: Uint8Array[] = [];
  let received = 0;
  for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
    chunks.push(chunk);
    received += chunk.byteLength;
    onProgress(received, total);
  }
  return Buffer.concat(chunks);
}

interface Call {
  method: string;
  /** Path and query, from the server's root. */
  target: string;
  headers?: Record<string, string>;
  body?: Body;
  signal?: AbortSignal;
  /** Statuses that are not errors besides 2xx (e.g. 304). */
  accept?: number[];
  onUploadProgress?: (n: number) => void;
}

/** Resources, stores and the change feed of one Trove server, over REST v2 (or v1). */
export class TroveRestClient {
  readonly baseUrl: string;
  readonly tokenProvider: TokenProvider | undefined;
  readonly apiVersion: ApiVersion;
  /** @internal `/resources/v{apiVersion}` */
  readonly prefix: string;
  private readonly doFetch: typeof fetch;
  readonly stores: StoresApi;

  constructor(options: RestClientOptions) {
    const apiVersion = options.apiVersion ?? 2;
    if (!API_VERSIONS.includes(apiVersion)) {
      throw new RangeError(`apiVersion must be 1 or 2, not ${JSON.stringify(options.apiVersion)}`);
    }
    this.apiVersion = apiVersion;
    this.prefix = prefixOf(apiVersion);
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.tokenProvider = toTokenProvider(options.auth);
    this.doFetch = options.fetch ?? fetch;
    this.stores = new StoresApi(this);
  }

  /** Adds or replaces a resource; a path ending in "/" creates a directory (no body). */
  async put(store: string, path: string, body: Body | undefined, options: PutOptions = {}): Promise<PutResult> {
    const headers: Record<string, string> = {};
    if (options.ifMatch !== undefined) headers["If-Match"] = tagList(options.ifMatch);
    if (options.ifNoneMatch !== undefined) headers["If-None-Match"] = tagList(options.ifNoneMatch);
    if (options.contentType !== undefined) headers["Content-Type"] = options.contentType;
    else if (body instanceof Blob && body.type !== "") headers["Content-Type"] = body.type;
    if (options.contentMd5 !== undefined) headers["Content-MD5"] = options.contentMd5;
    if (options.contentLength !== undefined) headers["Content-Length"] = String(options.contentLength);
    const res = await this.call({
      method: "PUT",
      target: resourcePath(store, path, this.apiVersion),
      headers,
      body,
      signal: options.signal,
      onUploadProgress: options.onProgress,
    });
    await res.body?.cancel();
    const info = infoOf(res);
    return {
      created: res.status === 201,
      tag: info.tag,
      md5: info.md5,
      lastModified: info.lastModified,
      lastModifiedMillis: info.lastModifiedMillis,
    };
  }

  /** Creates a directory (its parent must exist); `created` is false when it already existed. */
  mkdir(store: string, path: string, options: RequestOptions = {}): Promise<PutResult> {
    return this.put(store, path.endsWith("/") ? path : `${path}/`, undefined, options);
  }

  /**
   * Reads a resource: `as` "bytes" (default, a Buffer), "text" (UTF-8) or "stream" (a web
   * ReadableStream); with `asOf`, the contents it had then (HistoryPurgedError, 410, for a moment
   * before the store's history horizon).
   */
  get(store: string, path: string, options?: GetOptions & { as?: "bytes" }): Promise<GetResult<Buffer>>;
  get(store: string, path: string, options: GetOptions & { as: "text" }): Promise<GetResult<string>>;
  get(
    store: string,
    path: string,
    options: GetOptions & { as: "stream" },
  ): Promise<GetResult<ReadableStream<Uint8Array>>>;
  async get(
    store: string,
    path: string,
    options: GetOptions & { as?: "bytes" | "text" | "stream" } = {},
  ): Promise<GetResult<Buffer | string | ReadableStream<Uint8Array>>> {
    const asOf = options.asOf === undefined ? undefined : formatMoment(options.asOf);
    return this.read(store, path, { "as-of": asOf }, options);
  }

  /**
   * Reads one kept state of a resource, by its tag (`listVersions` gives them); NotFoundError when
   * no state of contents has that tag (unknown, purged, or a deletion). As `get` otherwise.
   */
  getVersion(
    store: string,
    path: string,
    tag: string,
    options?: GetVersionOptions & { as?: "bytes" },
  ): Promise<GetResult<Buffer>>;
  getVersion(
    store: string,
    path: string,
    tag: string,
    options: GetVersionOptions & { as: "text" },
  ): Promise<GetResult<string>>;
  getVersion(
    store: string,
    path: string,
    tag: string,
    options: GetVersionOptions & { as: "stream" },
  ): Promise<GetResult<ReadableStream<Uint8Array>>>;
  async getVersion(
    store: string,
    path: string,
    tag: string,
    options: GetVersionOptions & { as?: "bytes" | "text" | "stream" } = {},
  ): Promise<GetResult<Buffer | string | ReadableStream<Uint8Array>>> {
    if (tag === "") throw new RangeError("getVersion needs a tag");
    return this.read(store, path, { version: tag }, options);
  }

  /** A GET of a resource, with the history parameters given (version, as-of). */
  private async read(
    store: string,
    path: string,
    history: Record<string, string | undefined>,
    options: GetOptions & { as?: "bytes" | "text" | "stream" },
  ): Promise<GetResult<Buffer | string | ReadableStream<Uint8Array>>> {
    const res = await this.call({
      method: "GET",
      target: resourcePath(store, path, this.apiVersion) + query({ ...history, "override-mime": options.overrideMime }),
      headers: options.ifNoneMatch === undefined ? {} : { "If-None-Match": tagList(options.ifNoneMatch) },
      signal: options.signal,
      accept: [304],
    });
    if (res.status === 304) {
      await res.body?.cancel();
      return { notModified: true, tag: unquoteTag(res.headers.get("etag")) };
    }
    const info = infoOf(res);
    if (options.as === "stream") {
      return { notModified: false, ...info, body: res.body ?? new ReadableStream({ start: (c) => c.close() }) };
    }
    const bytes = await readAll(res, options.onProgress);
    return { notModified: false, ...info, body: options.as === "text" ? bytes.toString("utf8") : bytes };
  }

  /** The headers of a resource or directory, without its contents. */
  async head(store: string, path: string, options: GetOptions = {}): Promise<HeadResult> {
    const res = await this.call({
      method: "HEAD",
      target: resourcePath(store, path, this.apiVersion),
      headers: options.ifNoneMatch === undefined ? {} : { "If-None-Match": tagList(options.ifNoneMatch) },
      signal: options.signal,
      accept: [304],
    });
    if (res.status === 304) return { notModified: true, tag: unquoteTag(res.headers.get("etag")) };
    return { notModified: false, ...infoOf(res) };
  }

  /**
   * Deletes a resource, or a directory with everything in it; with `apiVersion: 1` only an empty
   * directory (one that is not empty: ConflictError, 409, and nothing is deleted).
   */
  async delete(store: string, path: string, options: RequestOptions & { ifMatch?: string | string[] } = {}) {
    const res = await this.call({
      method: "DELETE",
      target: resourcePath(store, path, this.apiVersion),
      headers: options.ifMatch === undefined ? {} : { "If-Match": tagList(options.ifMatch) },
      signal: options.signal,
    });
    await res.body?.cancel();
  }

  /** Lists a directory ("" or "/" for the store's root). */
  async list(store: string, path: string, options: ListOptions = {}): Promise<Listing> {
    const res = await this.listRequest(store, path, options);
    const info = infoOf(res);
    return { tag: info.tag, lastModified: info.lastModified, entries: parseListing(await res.text()) };
  }

  /**
   * Lists a directory as the answer arrives: its entries come in batches, one per chunk of the
   * answer, and nothing is held for the whole listing (push and pull of any size, issue 31). A
   * listing cut short fails the iteration instead of ending it.
   */
  async listStream(store: string, path: string, options: ListOptions = {}): Promise<ListingStream> {
    const res = await this.listRequest(store, path, options);
    const info = infoOf(res);
    const body = res.body;
    async function* batches(): AsyncGenerator<ListingEntry[]> {
      const reader = new ListingReader();
      const decoder = new TextDecoder();
      if (body !== null) {
        for await (const chunk of body as AsyncIterable<Uint8Array>) {
          const entries = reader.push(decoder.decode(chunk, { stream: true }));
          if (entries.length > 0) yield entries;
        }
      }
      const entries = reader.push(decoder.decode());
      reader.end();
      if (entries.length > 0) yield entries;
    }
    return { tag: info.tag, lastModified: info.lastModified, batches: batches() };
  }

  private listRequest(store: string, path: string, options: ListOptions): Promise<Response> {
    const dir = path === "" || path.endsWith("/") ? path : `${path}/`;
    const flag = (b: boolean | undefined) => (b ? "true" : undefined);
    return this.call({
      method: "GET",
      target:
        resourcePath(store, dir, this.apiVersion) +
        query({
          recursive: flag(options.recursive),
          "include-access": flag(options.includeAccess),
          "include-blob-uuid": flag(options.includeBlobUuid),
          "include-deleted": flag(options.includeDeleted),
          "as-of": options.asOf === undefined ? undefined : formatMoment(options.asOf),
        }),
      signal: options.signal,
    });
  }

  /**
   * The states of a resource, newest first: the current one (`current`), then the versions kept;
   * a deletion is a state too (`operation` "delete"). NotFoundError when no state of the path is
   * kept; BadRequestError for a directory.
   */
  async listVersions(store: string, path: string, options: ListVersionsOptions = {}): Promise<VersionEntry[]> {
    const res = await this.call({
      method: "GET",
      target:
        resourcePath(store, path, this.apiVersion) +
        query({ versions: "true", "include-blob-uuid": options.includeBlobUuid ? "true" : undefined }),
      signal: options.signal,
    });
    return parseVersions(await res.text());
  }

  /**
   * Makes a kept version of a resource current again, as a new change (a new tag, the caller as
   * its user); `created` when the path was absent or deleted. NotFoundError for an unknown tag,
   * or when the resource's directory is gone (restore the directory with `restoreAsOf`).
   */
  async restore(store: string, path: string, options: RestoreOptions): Promise<PutResult> {
    if (options.version === "") throw new RangeError("restore needs the version's tag");
    const res = await this.call({
      method: "PUT",
      target: resourcePath(store, path, this.apiVersion) + query({ restore: options.version }),
      headers: options.ifMatch === undefined ? {} : { "If-Match": tagList(options.ifMatch) },
      signal: options.signal,
    });
    await res.body?.cancel();
    const info = infoOf(res);
    return {
      created: res.status === 201,
      tag: info.tag,
      md5: info.md5,
      lastModified: info.lastModified,
      lastModifiedMillis: info.lastModifiedMillis,
    };
  }

  /**
   * Takes a directory ("" for the store's root) and everything below it back to a moment, each
   * difference an ordinary change; with `dryRun` only lists them. Running it again finishes a
   * restore cut short (it is idempotent). HistoryPurgedError (410) for a moment before the
   * store's history horizon.
   */
  async restoreAsOf(store: string, path: string, options: RestoreAsOfOptions): Promise<SubtreeRestore> {
    const dir = path === "" || path.endsWith("/") ? path : `${path}/`;
    const res = await this.call({
      method: "PUT",
      target:
        resourcePath(store, dir, this.apiVersion) +
        query({
          "restore-as-of": formatMoment(options.asOf, "restore-as-of"),
          "dry-run": options.dryRun ? "true" : undefined,
        }),
      signal: options.signal,
    });
    return parseRestore(await res.text());
  }

  /**
   * One poll request. Without cursors: the current status, a reset event per store. With
   * cursors: the events after them, waiting up to `wait` seconds; [] when none came.
   */
  async poll(options: PollOptions = {}): Promise<FeedEvent[]> {
    const params = new URLSearchParams();
    const cursors = options.cursors instanceof Map ? [...options.cursors] : Object.entries(options.cursors ?? {});
    for (const [store, id] of cursors) params.append("store", `${store}:${id}`);
    if (options.wait !== undefined && cursors.length > 0) params.set("wait", String(Math.max(0, options.wait)));
    const search = params.toString();
    const res = await this.call({
      method: "GET",
      target: `${this.prefix}/poll${search ? `?${search}` : ""}`,
      signal: options.signal,
    });
    if (res.status === 204) return [];
    return parseFeed(await res.text());
  }

  /**
   * Reads many resources of one store in one call (ResourceService.ReadMany over this client's
   * connection and token; docs/rest.md): each path's answer in the order of `paths`, its
   * contents whole, or its own error (NotFoundError, UnauthorizedError...) while the others go on.
   * At most 1,000 paths; meant for small files (a file is held whole). A server without it rejects
   * with BatchUnsupportedError before any answer.
   */
  async *readMany(
    store: string,
    paths: readonly string[],
    options: ReadManyOptions = {},
  ): AsyncGenerator<ReadManyResult> {
    // Loaded on first use: the CLI's start does not pay for the Connect client.
    this.readManyCall ??= import("./read-many.js").then(({ createReadMany }) =>
      createReadMany(this.baseUrl, this.doFetch, this.tokenProvider),
    );
    yield* (await this.readManyCall)(store, paths, options);
  }

  private readManyCall: Promise<ReturnType<typeof import("./read-many.js").createReadMany>> | undefined;

  /**
   * Writes many small resources of one store in one call (ResourceService.WriteMany over this
   * client's connection and token; docs/rest.md): each item as a PUT of its whole contents
   * with its conditions, in order, and each item's answer (the resource as written) or its own
   * error (PreconditionFailedError, ForbiddenError...) while the others are written. At most 1,000
   * items and 3 MiB of contents. A server without it rejects with BatchUnsupportedError, having
   * written nothing.
   */
  async writeMany(
    store: string,
    items: readonly WriteManyFile[],
    options: WriteManyOptions = {},
  ): Promise<WriteManyAnswer[]> {
    this.writeManyCall ??= import("./write-many.js").then(({ createWriteMany }) =>
      createWriteMany(this.baseUrl, this.doFetch, this.tokenProvider),
    );
    return (await this.writeManyCall)(store, items, options);
  }

  private writeManyCall: Promise<ReturnType<typeof import("./write-many.js").createWriteMany>> | undefined;

  /** @internal A request with auth and typed errors; used by the store API and the mirror. */
  async call(call: Call): Promise<Response> {
    const retry = isReplayable(call.body) && this.tokenProvider !== undefined;
    const token = await this.tokenProvider?.getToken(call.signal);
    let res = await this.send(call, token);
    if (res.status === 401 && retry && token !== undefined && this.tokenProvider) {
      this.tokenProvider.invalidate(token);
      const fresh = await this.tokenProvider.getToken(call.signal);
      if (fresh !== token) {
        await res.body?.cancel();
        res = await this.send(call, fresh);
      }
    }
    if (res.ok || call.accept?.includes(res.status)) return res;
    throw await this.errorOf(call, res);
  }

  private async send(call: Call, token: string | undefined): Promise<Response> {
    // A record, not a Headers: fetch (or h2c-fetch.ts) reads it once (a Headers here was built,
    // validated and copied again for every request: issue 31, session 16).
    const headers: Record<string, string> =
      token === undefined ? { ...call.headers } : { ...call.headers, authorization: `Bearer ${token}` };
    const url = this.baseUrl + call.target;
    const init: RequestInit & { duplex?: "half" } = { method: call.method, headers, signal: call.signal };
    if (call.body !== undefined) {
      init.body = toWebStream(call.body, call.onUploadProgress);
      if (!isReplayable(call.body)) init.duplex = "half";
    }
    try {
      return await this.doFetch(url, init);
    } catch (err) {
      if (call.signal?.aborted) throw call.signal.reason ?? err;
      const cause = ((err as Error).cause ?? err) as Error;
      throw new ConnectionError(
        0,
        `cannot reach ${this.baseUrl}: ${cause.message ?? String(cause)}`,
        {
          method: call.method,
          url,
        },
        { cause },
      );
    }
  }

  private async errorOf(call: Call, res: Response): Promise<TroveError> {
    const request = { method: call.method, url: this.baseUrl + call.target };
    const text = call.method === "HEAD" ? "" : await res.text().catch(() => "");
    const etag = res.headers.get("etag");
    // A known-deleted resource: 404 with body "deleted" (none on HEAD) and the tombstone's ETag.
    if (res.status === 404 && etag !== null && (text === "" || text.trim() === "deleted")) {
      return new DeletedError(404, unquoteTag(etag), request);
    }
    const reason = text.trim() || res.statusText || `status ${res.status}`;
    return errorForStatus(res.status, reason, request, { challenge: res.headers.get("www-authenticate") });
  }
}

function query(params: Record<string, string | undefined>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) p.set(k, v);
  const s = p.toString();
  return s ? `?${s}` : "";
}

/** Store configuration: /resources/v{1,2}/stores. */
export class StoresApi {
  constructor(private readonly client: TroveRestClient) {}

  /** The stores the caller may read something in. */
  async list(options: RequestOptions = {}): Promise<StoreInfo[]> {
    const res = await this.client.call({
      method: "GET",
      target: `${this.client.prefix}/stores`,
      signal: options.signal,
    });
    return parseStores(await res.text());
  }

  async get(name: string, options: RequestOptions = {}): Promise<StoreInfo> {
    const res = await this.client.call({
      method: "GET",
      target: storePath(this.client, name),
      signal: options.signal,
    });
    return single(await res.text());
  }

  /** Adds a store (needs the stores:admin permission). */
  async create(name: string, input: StoreInput = {}, options: RequestOptions = {}): Promise<StoreInfo> {
    const res = await this.client.call({
      method: "POST",
      target: `${this.client.prefix}/stores`,
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name, ...input }),
      signal: options.signal,
    });
    return single(await res.text());
  }

  /** Changes the type and the settings given; others keep their value. */
  async update(name: string, input: StoreInput, options: RequestOptions = {}): Promise<StoreInfo> {
    const res = await this.client.call({
      method: "PUT",
      target: storePath(this.client, name),
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name, ...input }),
      signal: options.signal,
    });
    return single(await res.text());
  }

  /** Removes the store and everything in it. */
  async delete(name: string, options: RequestOptions = {}): Promise<void> {
    const res = await this.client.call({
      method: "DELETE",
      target: storePath(this.client, name),
      signal: options.signal,
    });
    await res.body?.cancel();
  }
}

function storePath(client: TroveRestClient, name: string): string {
  return `${client.prefix}/stores/${encodeURIComponent(name)}`;
}

function single(xml: string): StoreInfo {
  const [store] = parseStores(xml);
  if (!store) throw new Error("the answer holds no store element");
  return store;
}

export function createRestClient(options: RestClientOptions): TroveRestClient {
  return new TroveRestClient(options);
}
