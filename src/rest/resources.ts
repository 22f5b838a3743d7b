// REST v2 resources: /resources/v2/data/{store}/{path}. Each route parses the
// request, calls ResourceCore, and renders the spec's response.

import type { ServerResponse } from "node:http";
import { create, type DescMethod, type DescService } from "@bufbuild/protobuf";
import type { ContextValues, HandlerContext } from "@connectrpc/connect";
import {
  ListRequestSchema,
  ListVersionsRequestSchema,
  type ReadResponse,
  type Resource,
  ResourceService,
  RestoreRequestSchema,
  type Version,
} from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { BadRequestError } from "../domain/errors.js";
import { parseTagList, quoteTag } from "../domain/etag.js";
import { isMediaType } from "../domain/mime.js";
import { joinPath, validateStoreName } from "../domain/path.js";
import { type FieldNames, fieldNamesKey } from "../services/field-names.js";
import { isMessage, type ResourceCore } from "../services/resource-service.js";
import { isLent } from "../storage/chunk-pool.js";
import {
  header,
  httpDate,
  RESTORE_FIELD_NAMES,
  type RequestUrl,
  type RestRequest,
  type RestResponse,
  requestSignal,
  restContextValues,
  SERVER_HEADER,
  send,
  sendLent,
  start,
  write,
  writeLent,
} from "./http.js";
import type { ApiVersion } from "./version.js";
import { resourceElement, restoreDocument, versionElement, versionsStart, XML_DECLARATION, XML_TYPE } from "./xml.js";

export const DATA_PREFIX = "/resources/v2/data/";
// parseTarget takes /resources/v1/data/ paths too (the router's version 1): the prefixes are as long.

interface Target {
  store: string;
  path: string;
  /** The URL path ended with "/": it names a directory. */
  directory: boolean;
}

/** Splits the raw URL path into store and resource path, percent-decoding each segment once. */
export function parseTarget(rawPath: string): Target {
  const rest = rawPath.slice(DATA_PREFIX.length);
  const split = rest.split("/");
  const segments = !rest.includes("%")
    ? split
    : split.map((s) => {
        try {
          return decodeURIComponent(s);
        } catch {
          throw new BadRequestError(`malformed percent-encoding in ${JSON.stringify(s)}`);
        }
      });
  const store = validateStoreName(segments.shift() ?? "");
  const directory = segments.length === 0 || segments.at(-1) === "";
  if (segments.at(-1) === "") segments.pop();
  return { store, path: joinPath(segments), directory };
}

const FLAGS = ["recursive", "include-access", "include-blob-uuid", "include-deleted", "versions"] as const;
type Flag = (typeof FLAGS)[number];

interface Query {
  flags: Record<Flag, boolean>;
  overrideMime?: string;
  /** Trove's history extensions (docs/history.md): a version's tag, a moment. */
  version?: string;
  asOf?: string;
}

/** A GET's query parameters: the spec's, and Trove's history extensions (docs/history.md). */
export function parseQuery(search: string): Query {
  const flags = {
    recursive: false,
    "include-access": false,
    "include-blob-uuid": false,
    "include-deleted": false,
    versions: false,
  };
  const q: Query = { flags };
  if (search === "") return q;
  const seen = new Set<string>();
  for (const [name, value] of new URLSearchParams(search)) {
    if (seen.has(name)) throw new BadRequestError(`query parameter ${name} given twice`);
    seen.add(name);
    if ((FLAGS as readonly string[]).includes(name)) {
      if (value !== "true" && value !== "false")
        throw new BadRequestError(`query parameter ${name} must be true or false`);
      flags[name as Flag] = value === "true";
    } else if (name === "override-mime") {
      if (!isMediaType(value)) throw new BadRequestError(`override-mime ${JSON.stringify(value)} is not a media type`);
      q.overrideMime = value;
    } else if (name === "version" || name === "as-of") {
      if (value === "") throw new BadRequestError(`query parameter ${name} needs a value`);
      if (name === "version") q.version = value;
      else q.asOf = value;
    } else if (name === "restore" || name === "restore-as-of" || name === "dry-run") {
      throw new BadRequestError(`query parameter ${name} is for a PUT (docs/history.md)`);
    } else {
      throw new BadRequestError(`unknown query parameter ${name}`);
    }
  }
  const asked = [flags.versions && "versions", q.version !== undefined && "version", q.asOf !== undefined && "as-of"];
  if (asked.filter(Boolean).length > 1) {
    throw new BadRequestError(`query parameters ${asked.filter(Boolean).join(" and ")} do not go together`);
  }
  return q;
}

/** A PUT's history extensions (docs/history.md); every other query parameter is ignored, as before. */
interface RestoreQuery {
  restore?: string;
  restoreAsOf?: string;
  dryRun: boolean;
}

function parseRestoreQuery(search: string): RestoreQuery | undefined {
  if (search === "") return undefined;
  const params = new URLSearchParams(search);
  const restore = params.getAll("restore");
  const restoreAsOf = params.getAll("restore-as-of");
  const dryRun = params.getAll("dry-run");
  if (restore.length === 0 && restoreAsOf.length === 0) {
    if (dryRun.length > 0) throw new BadRequestError("query parameter dry-run goes with restore-as-of");
    return undefined;
  }
  for (const [name, values] of [
    ["restore", restore],
    ["restore-as-of", restoreAsOf],
    ["dry-run", dryRun],
  ] as const) {
    if (values.length > 1) throw new BadRequestError(`query parameter ${name} given twice`);
    if (values.length === 1 && values[0] === "") throw new BadRequestError(`query parameter ${name} needs a value`);
  }
  if (restore.length > 0 && restoreAsOf.length > 0) {
    throw new BadRequestError("query parameters restore and restore-as-of do not go together");
  }
  if (dryRun.length > 0 && dryRun[0] !== "true" && dryRun[0] !== "false") {
    throw new BadRequestError("query parameter dry-run must be true or false");
  }
  if (dryRun.length > 0 && restore.length > 0)
    throw new BadRequestError("query parameter dry-run goes with restore-as-of");
  return { restore: restore[0], restoreAsOf: restoreAsOf[0], dryRun: dryRun[0] === "true" };
}

const noTimeout = () => undefined;

/**
 * The HandlerContext of a REST call. connect's createHandlerContext links three AbortControllers
 * through EventTarget listeners and builds three Headers on every call, which cost about a
 * fifth of the CPU of a 4 KiB GET (docs/benchmarks.md); the resource calls read only `values`,
 * so the signal, its `close` listener and the headers are made on first use (a streaming read or
 * a write asks for the signal; a small GET never does). The signal aborts when the client goes
 * away before the response is complete (`requestSignal`).
 */
class RestCallContext implements HandlerContext {
  readonly protocolName = "rest";
  readonly requestMethod: string;
  readonly url: string;
  readonly values: ContextValues;
  readonly timeoutMs = noTimeout;
  private goneSignal: AbortSignal | undefined;
  private headers: [Headers, Headers, Headers] | undefined;

  constructor(
    readonly service: DescService,
    readonly method: DescMethod,
    req: RestRequest,
    private readonly res: RestResponse,
  ) {
    this.requestMethod = req.method ?? "GET";
    this.url = req.url ?? "";
    this.values = restContextValues(req);
  }

  get signal(): AbortSignal {
    this.goneSignal ??= requestSignal(this.res);
    return this.goneSignal;
  }

  get requestHeader(): Headers {
    return this.allHeaders()[0];
  }

  get responseHeader(): Headers {
    return this.allHeaders()[1];
  }

  get responseTrailer(): Headers {
    return this.allHeaders()[2];
  }

  private allHeaders(): [Headers, Headers, Headers] {
    this.headers ??= [new Headers(), new Headers(), new Headers()];
    return this.headers;
  }
}

function tagList(req: RestRequest, name: string): string[] {
  const v = header(req, name);
  return v === undefined ? [] : parseTagList(v);
}

/** Sets the metadata headers of a resource or directory, in the order metadataHeaders gives them. */
function setMetadataHeaders(res: ServerResponse, r: Resource): void {
  res.setHeader("ETag", quoteTag(r.tag));
  res.setHeader("Last-Modified", httpDate(Number(r.lastModifiedMillis)));
  res.setHeader("Last-Modified-Millis", String(r.lastModifiedMillis));
  if (!r.directory) res.setHeader("Content-MD5", r.md5);
}

function metadataHeaders(r: Resource): Record<string, string> {
  const h: Record<string, string> = {
    ETag: quoteTag(r.tag),
    "Last-Modified": httpDate(Number(r.lastModifiedMillis)),
    "Last-Modified-Millis": String(r.lastModifiedMillis),
  };
  if (!r.directory) h["Content-MD5"] = r.md5;
  return h;
}

function redirectToDirectory(res: RestResponse, url: RequestUrl): void {
  send(res, 303, { Location: `${url.pathname}/${url.search}`, "Content-Length": 0 });
}

/** Status and headers of a 200 answer to a GET or HEAD of a resource, in one writeHead (issue 32). */
function startResource(res: ServerResponse, r: Resource, query: Query): void {
  res.writeHead(200, {
    Server: SERVER_HEADER,
    ...metadataHeaders(r),
    "Content-Type": query.overrideMime ?? r.type,
    "Content-Length": String(r.size),
  });
}

export class ResourceRoutes {
  constructor(private readonly core: ResourceCore) {}

  async handle(req: RestRequest, res: RestResponse, url: RequestUrl, version: ApiVersion = 2): Promise<void> {
    const target = parseTarget(url.pathname);
    switch (req.method) {
      case "GET":
      case "HEAD":
        return this.get(req, res, url, target);
      case "PUT":
        return this.put(req, res, target, url.search);
      case "DELETE":
        // Version 1 deletes a directory only when it is empty.
        return this.delete(req, res, target, version === 1);
      default:
        send(
          res,
          405,
          { Allow: "GET, HEAD, PUT, DELETE", "Content-Type": "text/plain; charset=utf-8" },
          `method ${req.method} not allowed\n`,
        );
    }
  }

  private context(
    req: RestRequest,
    res: RestResponse,
    method: (typeof ResourceService.method)[keyof typeof ResourceService.method],
    fieldNames?: FieldNames,
  ): HandlerContext {
    const context = new RestCallContext(ResourceService, method, req, res);
    if (fieldNames) context.values.set(fieldNamesKey, fieldNames);
    return context;
  }

  private async get(req: RestRequest, res: RestResponse, url: RequestUrl, t: Target): Promise<void> {
    const query = parseQuery(url.search);
    const ifNoneMatch = tagList(req, "if-none-match");
    if (query.flags.versions) return this.versions(req, res, t, query);
    if (t.directory) return this.list(req, res, t, query, ifNoneMatch);
    const history = query.version !== undefined || query.asOf !== undefined;
    if (req.method === "HEAD" && !history) return this.head(req, res, url, t, query, ifNoneMatch);
    const answer = this.core.readNow(
      // If-None-Match as parsed here: the core does not parse it again (issue 32).
      {
        store: t.store,
        path: t.path,
        ifNoneMatch,
        version: query.version ?? "",
        asOf: query.asOf ?? "",
      },
      this.context(req, res, ResourceService.method.read),
    );
    // A small read is answered at once (no await: the answer is written in this turn, issue 32).
    let iterator: AsyncIterator<ReadResponse> | undefined;
    let first: ReadResponse | undefined;
    if (isMessage(answer)) first = answer;
    else {
      iterator = answer[Symbol.asyncIterator]();
      const next = await iterator.next();
      first = next.done ? undefined : next.value;
    }
    const resource = first?.resource;
    if (!first || !resource) throw new Error("read answered without a resource");
    if (resource.directory) return redirectToDirectory(res, url);
    if (first.notModified) return send(res, 304, { ETag: quoteTag(resource.tag) });
    const r = res as ServerResponse;
    startResource(r, resource, query);
    if (req.method === "HEAD") {
      // A version's or a moment's HEAD (history: no stat of those): the headers of its GET.
      iterator?.return?.()?.catch(() => undefined);
      r.end();
      return;
    }
    const chunk = first.chunk;
    if (BigInt(chunk.byteLength) === resource.size) {
      // The whole contents in one message (small ones are kept inline): one write with the
      // headers, and the read is closed without being resumed.
      iterator?.return?.()?.catch(() => undefined);
      if (isLent(chunk)) {
        // A pooled read buffer (a blob file's contents): given back once the socket has sent it.
        sendLent(r, chunk);
        r.end();
        return;
      }
      if (r.destroyed) throw new Error("client went away");
      r.end(chunk);
      return;
    }
    // More messages follow. Whichever way the answer ends, the read is closed: a client that went
    // away must not leave the blob's file open, nor its read-ahead chunk lent (chunk-pool.ts).
    if (!iterator) throw new Error("read answered part of the contents at once");
    try {
      if (chunk.byteLength > 0) await writeLent(res, chunk);
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
        await writeLent(res, next.value.chunk);
      }
    } catch (err) {
      await iterator.return?.()?.catch(() => undefined);
      throw err;
    }
    r.end();
  }

  private async head(
    req: RestRequest,
    res: RestResponse,
    url: RequestUrl,
    t: Target,
    query: Query,
    ifNoneMatch: string[],
  ): Promise<void> {
    // The message create(StatRequestSchema, ...) would build, written out; answered at once where the storage can (issue 32).
    const stat = this.core.stat(
      { $typeName: "trove.resources.v2.StatRequest", store: t.store, path: t.path },
      this.context(req, res, ResourceService.method.stat),
    );
    const { resource } = stat instanceof Promise ? await stat : stat;
    if (!resource) throw new Error("stat answered without a resource");
    if (resource.directory) return redirectToDirectory(res, url);
    if (ifNoneMatch.length > 0 && ifNoneMatch.some((x) => x === "*" || x === resource.tag)) {
      return send(res, 304, { ETag: quoteTag(resource.tag) });
    }
    const r = res as ServerResponse;
    startResource(r, resource, query);
    r.end();
  }

  private async list(
    req: RestRequest,
    res: RestResponse,
    t: Target,
    query: Query,
    ifNoneMatch: string[],
  ): Promise<void> {
    const request = create(ListRequestSchema, {
      store: t.store,
      path: t.path,
      recursive: query.flags.recursive,
      includeDeleted: query.flags["include-deleted"],
      includeAccess: query.flags["include-access"],
      ifNoneMatch,
      asOf: query.asOf ?? "",
    });
    if (query.version !== undefined) {
      throw new BadRequestError(`/${t.path}/ is a directory: versions are kept of resources; list it with as-of`);
    }
    const iterator = this.core
      .list(request, this.context(req, res, ResourceService.method.list))
      [Symbol.asyncIterator]();
    const first = await iterator.next();
    const dir = first.done ? undefined : first.value.directory;
    if (!dir) throw new Error("list answered without the directory");
    if (first.value?.notModified) {
      send(res, 304, { ETag: quoteTag(dir.tag) });
      return;
    }
    start(res, 200, { ...metadataHeaders(dir), "Content-Type": query.overrideMime ?? XML_TYPE });
    if (req.method === "HEAD") {
      (res as { end(): void }).end();
      return;
    }
    const options = {
      base: t.path,
      includeAccess: query.flags["include-access"],
      includeBlob: query.flags["include-blob-uuid"],
    };
    try {
      await write(res, `${XML_DECLARATION}<resources>`);
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
        await write(res, next.value.entries.map((e) => resourceElement(e, options)).join(""));
      }
      await write(res, "</resources>\n");
    } catch (err) {
      // A client that went away: the listing's pages are not read on.
      await iterator.return?.()?.catch(() => undefined);
      throw err;
    }
    (res as { end(): void }).end();
  }

  /** `?versions=true`: the states of a resource, newest first, as XML (docs/history.md). */
  private async versions(req: RestRequest, res: RestResponse, t: Target, query: Query): Promise<void> {
    if (t.directory) {
      throw new BadRequestError(`/${t.path}/ is a directory: versions are kept of resources; list it with as-of`);
    }
    const iterator = this.core
      .listVersions(
        create(ListVersionsRequestSchema, { store: t.store, path: t.path }),
        this.context(req, res, ResourceService.method.listVersions),
      )
      [Symbol.asyncIterator]();
    // The first page before the status: a 404 or 400 is answered as such.
    const first = await iterator.next();
    start(res, 200, { "Content-Type": query.overrideMime ?? XML_TYPE });
    if (req.method === "HEAD") {
      iterator.return?.()?.catch(() => undefined);
      (res as { end(): void }).end();
      return;
    }
    const element = (v: Version) => versionElement(v, query.flags["include-blob-uuid"]);
    try {
      await write(res, versionsStart(t.store, t.path));
      for (let next = first; !next.done; next = await iterator.next()) {
        await write(res, next.value.versions.map(element).join(""));
      }
      await write(res, "</versions>\n");
    } catch (err) {
      await iterator.return?.()?.catch(() => undefined);
      throw err;
    }
    (res as { end(): void }).end();
  }

  /** `PUT ...?restore={tag}` or `PUT .../?restore-as-of={moment}`, no body (docs/history.md). */
  private async restore(req: RestRequest, res: RestResponse, t: Target, q: RestoreQuery): Promise<void> {
    const length = header(req, "content-length");
    if ((length !== undefined && length !== "0") || header(req, "transfer-encoding") !== undefined) {
      throw new BadRequestError("a restore takes no body");
    }
    if (q.restore !== undefined && t.directory) {
      throw new BadRequestError("restore names a version of a resource; a directory takes restore-as-of");
    }
    if (q.restoreAsOf !== undefined && !t.directory) {
      throw new BadRequestError("restore-as-of takes a directory back to a moment: end its path with /");
    }
    const out = await this.core.restore(
      create(RestoreRequestSchema, {
        store: t.store,
        path: t.path,
        version: q.restore ?? "",
        asOf: q.restoreAsOf ?? "",
        ifMatch: tagList(req, "if-match"),
        dryRun: q.dryRun,
      }),
      this.context(req, res, ResourceService.method.restore, RESTORE_FIELD_NAMES),
    );
    if (q.restore !== undefined) {
      const r = out.resource as Resource;
      send(res, out.created ? 201 : 200, {
        ...metadataHeaders(r),
        ...(out.created ? { Location: (req.url ?? "").split("?")[0] ?? "" } : {}),
      });
      return;
    }
    const body = restoreDocument(t.store, t.path, out.asOfEventId, q.dryRun, out.changes);
    send(res, 200, { "Content-Type": XML_TYPE }, body);
  }

  private async put(req: RestRequest, res: RestResponse, t: Target, search = ""): Promise<void> {
    const restore = parseRestoreQuery(search);
    if (restore && header(req, "if-none-match") !== undefined) {
      throw new BadRequestError(
        "If-None-Match does not apply to a restore: its state replaces the current one (If-Match does)",
      );
    }
    if (restore) return this.restore(req, res, t, restore);
    const ifMatch = tagList(req, "if-match");
    // RFC 9110's conditional create (If-None-Match: *), a Trove addition to the spec (docs/rest.md).
    const ifNoneMatch = tagList(req, "if-none-match");
    if (t.directory) {
      const length = header(req, "content-length");
      if ((length !== undefined && length !== "0") || header(req, "transfer-encoding") !== undefined) {
        throw new BadRequestError("a directory PUT takes no body");
      }
      const out = await this.core.mkdir(
        { store: t.store, path: t.path, ifMatch, ifNoneMatch },
        this.context(req, res, ResourceService.method.makeDirectory),
      );
      const r = out.resource as Resource;
      send(res, out.created ? 201 : 200, {
        ...metadataHeaders(r),
        ...(out.created ? { Location: req.url ?? "" } : {}),
      });
      return;
    }
    const lengthHeader = header(req, "content-length");
    if (lengthHeader !== undefined && !/^\d{1,19}$/.test(lengthHeader))
      throw new BadRequestError("invalid Content-Length");
    const out = await this.core.put(
      {
        store: t.store,
        path: t.path,
        ifMatch,
        ifNoneMatch,
        contentType: header(req, "content-type") ?? "",
        contentMd5: header(req, "content-md5") ?? "",
        contentLength: lengthHeader === undefined ? undefined : BigInt(lengthHeader),
        contents: req,
      },
      this.context(req, res, ResourceService.method.write),
    );
    const w = res as ServerResponse;
    w.statusCode = out.created ? 201 : 200;
    w.setHeader("Server", SERVER_HEADER);
    setMetadataHeaders(w, out.resource as Resource);
    if (out.created) w.setHeader("Location", req.url ?? "");
    w.end();
  }

  private async delete(req: RestRequest, res: RestResponse, t: Target, requireEmpty: boolean): Promise<void> {
    const ifMatch = tagList(req, "if-match");
    await this.core.remove(
      { store: t.store, path: t.path, ifMatch, requireEmpty },
      this.context(req, res, ResourceService.method.delete),
    );
    send(res, 200, {});
  }
}
