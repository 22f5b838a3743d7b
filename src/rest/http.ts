// What the REST layer needs of a request and a response, over HTTP/1.1 and
// HTTP/2 alike, and the helpers that write the spec's responses.

import { type IncomingMessage, ServerResponse } from "node:http";
import type { Http2ServerRequest, Http2ServerResponse, Http2Session } from "node:http2";
import { type ContextValues, createContextValues } from "@connectrpc/connect";
import { type Caller, callerKey, nobody } from "../auth/caller.js";
import { BadRequestError, TooLargeError } from "../domain/errors.js";
import type { AbortListener, CallEnd } from "../services/change-notifier.js";
import { type FieldNames, fieldNamesKey } from "../services/field-names.js";
import { claimOf, longLivedClaimKey } from "../services/long-lived.js";
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
  // One writeHead with every header (issue 32): no setHeader per header on the way.
  if (body === undefined) {
    r.writeHead(status, { Server: SERVER_HEADER, ...headers });
    r.end();
    return;
  }
  const bytes = typeof body === "string" ? Buffer.from(body) : body;
  r.writeHead(status, { Server: SERVER_HEADER, ...headers, "Content-Length": bytes.byteLength });
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
  if (!sendLent(res, chunk)) await drained(res);
}

/**
 * Writes a chunk read from a blob, and gives it back to its reader's pool once nothing reads it
 * any more. Over HTTP/1.1 that is the socket write's callback. A response whose socket is gone or
 * no longer writable would keep the chunk queued and never call back: the chunk is given back
 * unsent then, and the answer is over ("client went away"). A response that has no socket yet (a
 * pipelined request's, waiting for the answers before it) keeps the chunk with the write's
 * callback until its turn. Over HTTP/2, see `sendLentH2`.
 */
export function sendLent(res: RestResponse, chunk: Uint8Array): boolean {
  if (!(res instanceof ServerResponse)) return sendLentH2(res, chunk);
  const r = res;
  const socket = r.socket;
  if (r.destroyed || (socket && (socket.destroyed || !socket.writable))) {
    giveBack(chunk);
    throw new Error("client went away");
  }
  return r.write(chunk, () => giveBack(chunk));
}

/**
 * HTTP/2 (node 20, lib/internal/http2/core.js and src/node_http2.cc; docs/storage.md): node
 * queues the chunk itself (no copy) on its stream and cuts DATA frames out of it as the flow
 * control windows allow, each frame a slice of the chunk in the session's next socket write. The
 * write's callback fires when the socket write that carried the chunk's last frame has completed
 * (the bytes are in the kernel): the chunk is given back then. But when the stream is destroyed
 * (a reset, a session destroyed, the server's own destroy), node cancels what is still queued and
 * calls back at once, while the session's socket write in flight may still carry a slice of that
 * same chunk (measured: giving back there put another blob's bytes on the wire). Such a chunk is
 * held until the socket has nothing left to send (libuv's write queue empty) or is closed. And a
 * chunk whose callback never comes (a socket destroyed during the write that carried it) is given
 * back when the socket closes: after that nothing sends it.
 */
function sendLentH2(res: Http2ServerResponse, chunk: Uint8Array): boolean {
  const stream = res.stream;
  const session = stream.destroyed || stream.closed ? undefined : stream.session;
  const lent = session && !session.destroyed ? lentOn(session) : undefined;
  if (!lent) {
    giveBack(chunk);
    throw new Error("client went away");
  }
  lent.queued.add(chunk);
  return res.write(chunk, (err?: Error | null) => {
    if (!lent.queued.delete(chunk)) return;
    if (!err && !stream.destroyed) giveBack(chunk);
    else lent.giveBackOnceSent(chunk);
  });
}

/** The chunks lent to one HTTP/2 session's answers that are not given back yet. */
class SessionChunks {
  /** Written, their write's callback not called yet. */
  readonly queued = new Set<Uint8Array>();
  /** Called back on a destroyed stream: given back once the socket has sent what it holds. */
  private readonly held: Uint8Array[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly session: Http2Session) {}

  giveBackOnceSent(chunk: Uint8Array): void {
    this.held.push(chunk);
    if (this.timer === undefined) this.check();
  }

  /** The socket closed: nothing sends any of the chunks any more. */
  socketClosed(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    for (const chunk of this.queued) giveBack(chunk);
    this.queued.clear();
    for (const chunk of this.held.splice(0)) giveBack(chunk);
  }

  /** Gives back the held chunks if the socket sends nothing now, else looks again in a while. */
  private check(): void {
    this.timer = undefined;
    if (socketSendsNothing(this.session)) {
      for (const chunk of this.held.splice(0)) giveBack(chunk);
    } else {
      this.timer = setTimeout(() => this.check(), HELD_CHECK_MS).unref();
    }
  }
}

/** How often a session holding chunks of destroyed streams looks at its socket again. */
const HELD_CHECK_MS = 10;

const chunksBySession = new WeakMap<Http2Session, SessionChunks>();

/** The session's lent chunks; undefined once the session has let its socket go. */
function lentOn(session: Http2Session): SessionChunks | undefined {
  let lent = chunksBySession.get(session);
  if (lent) return lent;
  lent = new SessionChunks(session);
  const chunks = lent;
  try {
    session.socket.once("close", () => chunks.socketClosed());
  } catch {
    return undefined;
  }
  chunksBySession.set(session, lent);
  return lent;
}

/**
 * Whether an HTTP/2 session's socket has handed every byte of its writes to the kernel, or is
 * closed: then no slice of a chunk is read by a write in flight. An unknown kind of socket (no
 * libuv write queue to look at) counts as still sending until it closes.
 */
function socketSendsNothing(session: Http2Session): boolean {
  let socket: { destroyed?: boolean; _handle?: { writeQueueSize?: unknown } | null };
  try {
    socket = session.socket as unknown as typeof socket;
    if (socket.destroyed === true || socket._handle === null) return true;
    return socket._handle?.writeQueueSize === 0;
  } catch (err) {
    // Unbound: the session finished closing, which waits for its write in flight to complete.
    return (err as { code?: unknown }).code === "ERR_HTTP2_SOCKET_UNBOUND";
  }
}

/**
 * Waits for a response's `drain`; rejects when the client goes away first. Over HTTP/2 a stream
 * the client resets while a write waits in it (node's client resets every stream with NO_ERROR
 * when its session is destroyed) is closed but never destroyed by node, so its response never
 * emits `close`: the stream's `aborted` says it, and the answer's error handling then destroys it.
 */
function drained(res: RestResponse): Promise<void> {
  const r = res as ServerResponse;
  const stream = res instanceof ServerResponse ? undefined : res.stream;
  return new Promise<void>((resolve, reject) => {
    const stop = () => {
      r.off("drain", done);
      r.off("close", gone);
      stream?.off("aborted", gone);
    };
    const done = () => {
      stop();
      resolve();
    };
    const gone = () => {
      stop();
      reject(new Error("client went away"));
    };
    r.once("drain", done);
    r.once("close", gone);
    stream?.once("aborted", gone);
  });
}

/** Writes a chunk, waiting while the client is slower than the server. */
export async function write(res: RestResponse, chunk: string | Uint8Array): Promise<void> {
  const r = res as ServerResponse;
  if (r.destroyed) throw new Error("client went away");
  if (!r.write(chunk)) await drained(res);
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
  // History's fields on a read (docs/history.md): query parameters of the resources' REST face.
  version: "version",
  as_of: "as-of",
  project_id: "projectID",
  environment_id: "environmentID",
  report_id: "reportID",
  from_environment_id: "fromEnvironmentID",
  to_environment_id: "toEnvironmentID",
  additional_fields: "additionalFields",
  // A promoted resource's precondition is a field of the promotion body, not a header.
  "resources.if_match": "ifMatch",
};

/** A restore's names: the same proto fields are other query parameters there (docs/history.md). */
export const RESTORE_FIELD_NAMES: FieldNames = {
  ...REST_FIELD_NAMES,
  version: "restore",
  as_of: "restore-as-of",
  dry_run: "dry-run",
};

/** Context values of a REST call; the caller is filled by authentication. */
export function restContextValues(req: RestRequest): ContextValues {
  const values = createContextValues();
  const caller = (req as { trove?: { caller?: Caller } }).trove?.caller;
  // Authentication always sets the caller; were it ever missing, the request gets no access.
  values.set(callerKey, caller ?? nobody);
  values.set(fieldNamesKey, REST_FIELD_NAMES);
  values.set(longLivedClaimKey, claimOf(req));
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
