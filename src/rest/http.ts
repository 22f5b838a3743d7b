// What the REST layer needs of a request and a response, over HTTP/1.1 and
// HTTP/2 alike, and the helpers that write the spec's responses.

import { type IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { type ContextValues, createContextValues } from "@connectrpc/connect";
import { type Caller, callerKey, nobody } from "../auth/caller.js";
import { BadRequestError, TooLargeError } from "../domain/errors.js";
import type { AbortListener, CallEnd } from "../services/change-notifier.js";
import { type FieldNames, fieldNamesKey } from "../services/field-names.js";
import { giveBack } from "../storage/chunk-pool.js";

export type RestRequest = IncomingMessage | Http2ServerRequest;
export type RestResponse = ServerResponse | Http2ServerResponse;

export const SERVER_HEADER = "resources/1.0";

/** Writes a complete response; `Server` is set on every response the REST layer sends. */
export function send(
  res: RestResponse,
  status: number,
  headers: Record<string, string | number>,
  body?: string | Uint8Array,
): void {
  const r = res as ServerResponse;
  r.statusCode = status;
  r.setHeader("Server", SERVER_HEADER);
  for (const [name, value] of Object.entries(headers)) r.setHeader(name, value);
  if (body === undefined) {
    r.end();
    return;
  }
  const bytes = typeof body === "string" ? Buffer.from(body) : body;
  r.setHeader("Content-Length", bytes.byteLength);
  r.end(bytes);
}

export function sendText(res: RestResponse, status: number, text: string, headers: Record<string, string> = {}): void {
  send(res, status, { "Content-Type": "text/plain; charset=utf-8", ...headers }, `${text}\n`);
}

/** Starts a streamed response: status and headers now, the body through `write`. */
export function start(res: RestResponse, status: number, headers: Record<string, string | number>): void {
  const r = res as ServerResponse;
  r.statusCode = status;
  r.setHeader("Server", SERVER_HEADER);
  for (const [name, value] of Object.entries(headers)) r.setHeader(name, value);
}

/** `write` of a chunk read from a blob, given back to its reader's pool once the socket has sent it. */
export async function writeLent(res: RestResponse, chunk: Uint8Array): Promise<void> {
  const r = res as ServerResponse;
  if (!sendLent(res, chunk)) await drained(r);
}

/**
 * Writes a chunk read from a blob; over HTTP/1.1, gives it back to its reader's pool once the
 * socket has sent it (the write's callback). A response whose socket is gone or no longer
 * writable would keep the chunk queued and never call back: the chunk is given back unsent then,
 * and the answer is over ("client went away"). A response that has no socket yet (a pipelined
 * request's, waiting for the answers before it) keeps the chunk with the write's callback until
 * its turn. Over HTTP/2 the chunk is left to the collector.
 */
export function sendLent(res: RestResponse, chunk: Uint8Array): boolean {
  if (!(res instanceof ServerResponse)) {
    if (res.destroyed) throw new Error("client went away");
    return res.write(chunk);
  }
  const r = res;
  const socket = r.socket;
  if (r.destroyed || (socket && (socket.destroyed || !socket.writable))) {
    giveBack(chunk);
    throw new Error("client went away");
  }
  return r.write(chunk, () => giveBack(chunk));
}

/** Waits for a response's `drain`; rejects when the client goes away first. */
function drained(r: ServerResponse): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const done = () => {
      r.off("drain", done);
      r.off("close", closed);
      resolve();
    };
    const closed = () => {
      r.off("drain", done);
      reject(new Error("client went away"));
    };
    r.once("drain", done);
    r.once("close", closed);
  });
}

/** Writes a chunk, waiting while the client is slower than the server. */
export async function write(res: RestResponse, chunk: string | Uint8Array): Promise<void> {
  const r = res as ServerResponse;
  if (r.destroyed) throw new Error("client went away");
  if (!r.write(chunk)) await drained(r);
}

export function header(req: RestRequest, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(", ") : v;
}

/**
 * What the REST faces call the inputs that error messages name: headers, and the fields and
 * query parameters of the insights JSON API (content-insights-service.md). The core names the
 * proto fields otherwise (services/field-names.ts).
 */
export const REST_FIELD_NAMES: FieldNames = {
  if_match: "If-Match",
  if_none_match: "If-None-Match",
  content_type: "Content-Type",
  content_md5: "Content-MD5",
  content_length: "Content-Length",
  project_id: "projectID",
  environment_id: "environmentID",
  report_id: "reportID",
  from_environment_id: "fromEnvironmentID",
  to_environment_id: "toEnvironmentID",
  additional_fields: "additionalFields",
  // A promoted resource's precondition is a field of the promotion body, not a header.
  "resources.if_match": "ifMatch",
};

/** Context values of a REST call; the caller is filled by authentication. */
export function restContextValues(req: RestRequest): ContextValues {
  const values = createContextValues();
  const caller = (req as { trove?: { caller?: Caller } }).trove?.caller;
  // Authentication always sets the caller; were it ever missing, the request gets no access.
  values.set(callerKey, caller ?? nobody);
  values.set(fieldNamesKey, REST_FIELD_NAMES);
  return values;
}

/**
 * An AbortSignal that fires when the client goes away before the response is complete; aborted
 * already when it went away before this call (a signal asked for late, RestCallContext).
 */
export function requestSignal(res: RestResponse): AbortSignal {
  const controller = new AbortController();
  const r = res as ServerResponse;
  if (r.destroyed && !r.writableFinished) {
    controller.abort(new Error("client went away"));
  } else {
    r.on("close", () => {
      if (!r.writableFinished) controller.abort(new Error("client went away"));
    });
  }
  return controller.signal;
}

/**
 * The client going away before the response is complete, in the shape a wait listens to (the part
 * of AbortSignal that `Waiter.wait` uses, services/change-notifier.ts). A parked poll holds this
 * small object and one `close` listener, where an AbortController is an EventTarget with its own
 * maps and listener records (issue 14).
 */
export class ClientGone implements CallEnd {
  /** The client went away before the response was complete. */
  aborted = false;
  private listener: AbortListener | undefined = undefined;

  constructor(protected readonly res: RestResponse) {
    (res as ServerResponse).on("close", () => {
      if ((res as ServerResponse).writableFinished) return;
      this.aborted = true;
      const listener = this.listener;
      this.listener = undefined;
      listener?.handleEvent();
    });
  }

  /** One listener at a time (a wait); `abort` is the only event. */
  addEventListener(_type: "abort", listener: AbortListener): void {
    this.listener = listener;
  }

  removeEventListener(_type: "abort", listener: AbortListener): void {
    if (this.listener === listener) this.listener = undefined;
  }
}

// The last date formatted: a resource read again and again has the same Last-Modified.
let lastDateSecond = Number.NaN;
let lastDate = "";

export function httpDate(millis: number): string {
  const second = Math.floor(millis / 1000);
  if (second !== lastDateSecond) {
    lastDate = new Date(millis).toUTCString();
    lastDateSecond = second;
  }
  return lastDate;
}

/** Path and query of a request target, split without normalizing: "." and ".." stay for the path rules to refuse. */
export interface RequestUrl {
  pathname: string;
  /** "" or "?..." */
  search: string;
}

export function splitUrl(target: string): RequestUrl {
  const q = target.indexOf("?");
  return q < 0 ? { pathname: target, search: "" } : { pathname: target.slice(0, q), search: target.slice(q) };
}

/** A small request body as UTF-8 text; `what` names it in the errors (413 over `max` bytes, 400 not UTF-8). */
export async function readBody(req: RestRequest, max: number, what: string): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > max) throw new TooLargeError(`${what} larger than ${max} bytes`);
    chunks.push(chunk);
  }
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(Buffer.concat(chunks));
  } catch {
    throw new BadRequestError("the body is not valid UTF-8");
  }
}
