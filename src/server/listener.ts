// The one TCP listener of every face: it peeks at the first bytes and hands the HTTP/2 preface to
// an http2 server (gRPC, Connect, gRPC-Web, REST over h2c) and anything else to an http server
// (REST and Connect over HTTP/1.1). It also holds the connection limits: a connection that never
// finishes a request is closed (docs/security.md, "Limits").

import * as http from "node:http";
import * as http2 from "node:http2";
import type { AddressInfo } from "node:net";
import * as net from "node:net";
import type { ConnectError } from "@connectrpc/connect";
import type { Caller } from "../auth/caller.js";
import { SERVER_HEADER } from "../rest/http.js";
import type { LongLivedClaim } from "../services/long-lived.js";
import { sessionMemoryMegabytes, takeContentsTurn } from "./answer-turns.js";
import { CountedHttp2Request, CountedRequest, createBodyRate } from "./body-rate.js";
import { claimPlace, type LongLivedBudget } from "./fair-share.js";
import {
  CLOSE_LINGER_MS,
  headersCheckingInterval,
  type LimitName,
  type LimitObserver,
  RETRY_AFTER_SECONDS,
  SESSION_CLOSE_GRACE_MS,
  type ServerLimits,
} from "./limits.js";
import type { RequestRoute } from "./routes.js";

export type RequestHandler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

export interface ListenerOptions {
  handler: RequestHandler;
  limits: ServerLimits;
  /** Told of every connection or session a limit refuses or closes (metrics). */
  refused?: LimitObserver;
}

export interface Listener {
  listen(port: number, host: string): Promise<AddressInfo>;
  /** Stops accepting and closes every connection and session at once. */
  close(): Promise<void>;
  /**
   * Stops accepting, closes idle connections (HTTP/1.1 keep-alive, connections that sent nothing
   * yet), sends GOAWAY on HTTP/2 sessions, lets the requests in flight finish for up to
   * `timeoutMs`, then destroys what is left.
   */
  drain(timeoutMs: number): Promise<DrainResult>;
}

/** How a drain ended: `cut` connections still had requests in flight when its time ran out. */
export interface DrainResult {
  drained: boolean;
  cut: number;
}

/**
 * HTTP/2 receive windows of a stream and of a whole session (issue 14). At the protocol's 64 KiB
 * default a client's upload (gRPC Write) stalls for a WINDOW_UPDATE every 64 KiB; these let it
 * run, and bound what a session can make the server buffer unread to H2_SESSION_WINDOW.
 */
const H2_STREAM_WINDOW = 1024 * 1024;
const H2_SESSION_WINDOW = 4 * 1024 * 1024;

/**
 * What the pipeline keeps of a request until its response closes, in fields of the response itself:
 * a request in flight, such as a parked long poll, costs no object, closure or listener of the
 * pipeline's own (issue 14). The listener's servers make their responses of the classes below.
 */
export interface RequestRecord extends LongLivedClaim {
  /** performance.now() when the pipeline saw the request (NaN before). */
  arrived: number;
  /** The request id; the response's X-Request-Id, set as its head is written. */
  requestId: string | undefined;
  /** How an observer reads the request's outcome at its end, where the HTTP status is not it (RPC status). */
  outcome: (() => string) | undefined;
  /**
   * The request's place in the long-lived budget (fair-share.ts): held until its response closes,
   * then released; undefined for a short request not over yet.
   */
  longLived: "held" | "released" | undefined;
  /** Whose share of the long-lived budget that place counts against. */
  longLivedCaller: string | undefined;
  /** The request's row of the route table (routes.ts): its face, route and protocol, looked up once. */
  route: RequestRoute | undefined;
  /** A download's claim on the long-lived budget (fair-share.ts, `claimPlace`): the budget and the caller. */
  claimBudget: LongLivedBudget | undefined;
  claimCaller: Caller | undefined;
  /** The request's place among the listener's requests in flight (-1: none), and the connection it came on. */
  inFlightSlot: number;
  inFlightConnection: object | undefined;
}

/** The HTTP/1.1 responses of the listener. */
export class RecordedResponse extends http.ServerResponse implements RequestRecord {
  arrived = Number.NaN;
  requestId: string | undefined = undefined;
  outcome: (() => string) | undefined = undefined;
  longLived: "held" | "released" | undefined = undefined;
  longLivedCaller: string | undefined = undefined;
  route: RequestRoute | undefined = undefined;
  claimBudget: LongLivedBudget | undefined = undefined;
  claimCaller: Caller | undefined = undefined;
  inFlightSlot = -1;
  inFlightConnection: object | undefined = undefined;

  /** The response is its download's claim (services/long-lived.ts): no object of its own per request. */
  claim(): ConnectError | undefined {
    return claimPlace(this);
  }

  override writeHead(
    statusCode: number,
    statusMessage?: string,
    headers?: http.OutgoingHttpHeaders | http.OutgoingHttpHeader[],
  ): this;
  override writeHead(statusCode: number, headers?: http.OutgoingHttpHeaders | http.OutgoingHttpHeader[]): this;
  override writeHead(statusCode: number, a?: unknown, b?: unknown): this {
    const head = super.writeHead as (statusCode: number, a?: unknown, b?: unknown) => this;
    // Here rather than at arrival: a parked poll holds no headers until it answers.
    if (this.requestId === undefined || this.headersSent) return head.call(this, statusCode, a, b);
    // Headers given as an object take the id with them (a copy: the caller's object may be shared):
    // a response whose headers all come with writeHead then skips setHeader (issue 32: setHeader
    // and its header map were 3 % of a 4 KiB GET).
    const given = typeof a === "string" ? b : a;
    if (given !== undefined && given !== null && !Array.isArray(given)) {
      const headers = { ...(given as http.OutgoingHttpHeaders), "X-Request-Id": this.requestId };
      return typeof a === "string" ? head.call(this, statusCode, a, headers) : head.call(this, statusCode, headers);
    }
    this.setHeader("X-Request-Id", this.requestId);
    return head.call(this, statusCode, a, b);
  }
}

/** The HTTP/2 responses of the listener (REST over h2c, gRPC, Connect). */
export class RecordedHttp2Response extends http2.Http2ServerResponse implements RequestRecord {
  arrived = Number.NaN;
  requestId: string | undefined = undefined;
  outcome: (() => string) | undefined = undefined;
  longLived: "held" | "released" | undefined = undefined;
  longLivedCaller: string | undefined = undefined;
  route: RequestRoute | undefined = undefined;
  claimBudget: LongLivedBudget | undefined = undefined;
  claimCaller: Caller | undefined = undefined;
  inFlightSlot = -1;
  inFlightConnection: object | undefined = undefined;

  /** The response is its download's claim (services/long-lived.ts): no object of its own per request. */
  claim(): ConnectError | undefined {
    return claimPlace(this);
  }

  /** A turn among its session's answers of blob contents (answer-turns.ts). */
  contentsTurn(): Promise<void> | undefined {
    return takeContentsTurn(this);
  }

  override writeHead(statusCode: number, headers?: http.OutgoingHttpHeaders): this;
  override writeHead(statusCode: number, statusMessage: string, headers?: http.OutgoingHttpHeaders): this;
  override writeHead(statusCode: number, a?: unknown, b?: unknown): this {
    if (this.requestId !== undefined && !this.headersSent) this.setHeader("X-Request-Id", this.requestId);
    return (super.writeHead as (statusCode: number, a?: unknown, b?: unknown) => this)(statusCode, a, b);
  }
}

/** A response of the listener's servers, with its place among the requests in flight. */
type TrackedResponse = (http.ServerResponse | http2.Http2ServerResponse) &
  Pick<RequestRecord, "inFlightSlot" | "inFlightConnection">;

/**
 * The requests in flight, each in a slot whose number its response keeps: adding and removing one
 * hashes nothing. A Map keyed by each new response gave every response an identity hash and was
 * rehashed as it shrank, 1-2 % of a 4 KiB GET's CPU (issue 32, session 14).
 */
class RequestsInFlight {
  private readonly slots: (TrackedResponse | undefined)[] = [];
  private readonly free: number[] = [];
  size = 0;

  add(res: TrackedResponse, connection: object): void {
    const slot = this.free.pop() ?? this.slots.length;
    this.slots[slot] = res;
    res.inFlightSlot = slot;
    res.inFlightConnection = connection;
    this.size++;
  }

  /** Removes a response (once): the connection it came on, undefined when it was not in flight. */
  remove(res: TrackedResponse): object | undefined {
    const slot = res.inFlightSlot;
    if (slot < 0 || this.slots[slot] !== res) return undefined;
    this.slots[slot] = undefined;
    this.free.push(slot);
    res.inFlightSlot = -1;
    this.size--;
    return res.inFlightConnection;
  }

  responses(): TrackedResponse[] {
    return this.slots.filter((res) => res !== undefined);
  }
}

const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");

/**
 * A complete HTTP/1.1 answer written straight to a socket (before or outside Node's parser), then
 * closed. The answer to a HEAD has no body (Content-Length states the one a GET would get): a
 * client reads none, and any byte after the head would be data after `Connection: close`.
 */
function rawAnswer(status: string, text: string, options: { headers?: string; head?: boolean } = {}): string {
  const body = `${text}\n`;
  return (
    `HTTP/1.1 ${status}\r\nServer: ${SERVER_HEADER}\r\n${options.headers ?? ""}Content-Type: text/plain; charset=utf-8\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${options.head ? "" : body}`
  );
}

/**
 * Writes a complete answer and ends the connection. Until the listener destroys it (CLOSE_LINGER_MS
 * after the FIN, see `closeWhenDone`) the socket goes on reading, into Node's parser or discarded,
 * so a client still sending gets its answer rather than a reset; its own FIN closes it at once.
 */
function answerAndClose(socket: net.Socket, answer: string): void {
  socket.end(answer);
  socket.resume();
}

/**
 * Destroys a connection CLOSE_LINGER_MS after the server side has finished (answer sent, FIN
 * queued), whether or not the client closes its side. `end()` alone, here or inside Node's http and
 * http2 servers, keeps the descriptor until the client's FIN, and a client that never reads never
 * sees the server's FIN: a slowloris kept its connection forever after its 408, an idle h2c session
 * after its GOAWAY. A `finish` listener of every connection (one function for all of them: a
 * connection costs no closure of its own, issue 14).
 */
function closeWhenDone(this: net.Socket): void {
  const timer = setTimeout(() => this.destroy(), CLOSE_LINGER_MS);
  timer.unref();
  this.once("close", () => clearTimeout(timer));
}

/** An `error` listener of every connection: the connection is closed (its `close` cleans up). */
function destroyOnError(this: net.Socket): void {
  this.destroy();
}

/** What Node's parser gives `clientError`: the bytes it was parsing and how far it got. */
type ParserError = NodeJS.ErrnoException & { rawPacket?: Buffer; bytesParsed?: number };

const METHOD_AT_LINE_START = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) /;

/**
 * The method of a request Node's parser refused, read back from the bytes it was parsing: the last
 * line before the error that starts with a method and a space (header lines have a colon first).
 * Undefined when those bytes no longer hold the request line (it came in an earlier read); the
 * answer then keeps its body, which is what every method but HEAD expects.
 */
function refusedMethod(err: ParserError): string | undefined {
  const packet = err.rawPacket;
  if (!Buffer.isBuffer(packet)) return undefined;
  const end = Math.min(err.bytesParsed ?? packet.length, packet.length);
  const lines = packet.toString("latin1", 0, end).split("\n");
  for (let i = lines.length - 1; i >= 0; i--) {
    const m = METHOD_AT_LINE_START.exec(lines[i] as string);
    if (m) return m[1];
  }
  return undefined;
}

const seconds = (ms: number) => `${Math.round(ms / 100) / 10} s`;

export function createListener(options: ListenerOptions): Listener {
  const { handler, limits } = options;
  const refused = options.refused ?? (() => {});
  const bodyRate = createBodyRate({ minRate: limits.minBodyRate, window: limits.headersTimeout, refused });
  const h1 = http.createServer(
    {
      // (typed as Node's own class: the server's generic types tie the response class to the request's)
      IncomingMessage: CountedRequest as typeof http.IncomingMessage,
      ServerResponse: RecordedResponse,
      // A request whose body makes progress is never cut (large uploads, long polls): only its head is timed.
      requestTimeout: 0,
      headersTimeout: limits.headersTimeout,
      keepAliveTimeout: limits.keepAliveTimeout,
      // How often Node looks for heads that ran out of time (its default is 30 s).
      connectionsCheckingInterval: headersCheckingInterval(limits.headersTimeout),
    },
    handler,
  );
  // This server never listens (the sniffer hands it its connections), so Node would not track them
  // nor check their heads' time: start that as its 'listening' would.
  h1.emit("listening");
  // Requests Node's parser refuses never reach the handler: answer them in the spec's shape too.
  h1.on("clientError", (err: ParserError, socket: net.Socket) => {
    if (!socket.writable || err.code === "ECONNRESET") {
      socket.destroy();
      return;
    }
    if (err.code === "ERR_HTTP_REQUEST_TIMEOUT") refused("headers");
    const [status, text] =
      err.code === "HPE_HEADER_OVERFLOW"
        ? ["431 Request Header Fields Too Large", "request headers too large"]
        : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
          ? ["408 Request Timeout", `the request head was not complete within ${seconds(limits.headersTimeout)}`]
          : err.code === "HPE_INVALID_URL"
            ? ["400 Bad Request", INVALID_TARGET]
            : ["400 Bad Request", `malformed HTTP request: ${err.code ?? err.message}`];
    answerAndClose(socket, rawAnswer(status, text, { head: refusedMethod(err) === "HEAD" }));
  });
  // Node hands CONNECT to this event and closes the socket unanswered when nobody listens.
  h1.on("connect", (_req: http.IncomingMessage, socket: net.Socket) => {
    answerAndClose(
      socket,
      rawAnswer("405 Method Not Allowed", "CONNECT is not supported", { headers: `Allow: ${ALLOWED_METHODS}\r\n` }),
    );
  });

  const h2 = http2.createServer(
    {
      // (typed as Node's own class: @types/node's generic constructor signature admits no subclass)
      Http2ServerRequest: CountedHttp2Request as unknown as typeof http2.Http2ServerRequest,
      Http2ServerResponse: RecordedHttp2Response as unknown as typeof http2.Http2ServerResponse,
      settings: { maxConcurrentStreams: limits.maxConcurrentStreams, initialWindowSize: H2_STREAM_WINDOW },
      // Above what a session can make the server queue (answer-turns.ts): Node refuses every new
      // stream of a session over it, which a client within the limits must never meet.
      maxSessionMemory: sessionMemoryMegabytes(limits.maxConcurrentStreams),
    },
    handler,
  );
  // Node's compatibility layer gives CONNECT to this event and answers a bare 405 when nobody listens.
  h2.on("connect", handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  // Sessions with no open stream, with performance.now() since when, and since when a header block
  // has been coming on it (NaN: none). PINGs and SETTINGS are not activity: only a stream is.
  const idleSessions = new Map<http2.ServerHttp2Session, { since: number; block: number; lastStream: number }>();
  let idleTimer: NodeJS.Timeout | undefined;
  const closeSession = (session: http2.ServerHttp2Session, limit: LimitName) => {
    idleSessions.delete(session);
    refused(limit);
    session.close();
    setTimeout(() => session.destroy(), SESSION_CLOSE_GRACE_MS).unref();
  };
  function checkIdleSessions(): void {
    const now = performance.now();
    for (const [session, idle] of idleSessions) {
      if (session.destroyed || session.closed) {
        idleSessions.delete(session);
        continue;
      }
      if (now - idle.since >= limits.sessionIdleTimeout) {
        closeSession(session, "session_idle");
        continue;
      }
      // A header block begun (nghttp2 has seen its HEADERS) but not finished (no stream yet).
      if ((session.state.lastProcStreamID ?? 0) > idle.lastStream) {
        if (Number.isNaN(idle.block)) idle.block = now;
        else if (now - idle.block >= limits.headersTimeout) closeSession(session, "headers");
      }
    }
    if (idleSessions.size === 0) {
      clearInterval(idleTimer);
      idleTimer = undefined;
    }
  }
  const becameIdle = (session: http2.ServerHttp2Session, lastStream: number) => {
    idleSessions.set(session, { since: performance.now(), block: Number.NaN, lastStream });
    if (idleTimer === undefined) {
      idleTimer = setInterval(
        checkIdleSessions,
        headersCheckingInterval(Math.min(limits.sessionIdleTimeout, limits.headersTimeout)),
      );
      idleTimer.unref();
    }
  };
  h2.on("session", (session) => {
    // The session's own window (the sum over its streams) is not a setting: raise it once connected.
    session.setLocalWindowSize(H2_SESSION_WINDOW);
    sessions.add(session);
    session.once("close", () => {
      sessions.delete(session);
      idleSessions.delete(session);
    });
    // A session is idle when no stream is open: a long poll or a watch keeps it, silence does not.
    let streams = 0;
    let lastStream = 0;
    session.on("stream", (stream: http2.ServerHttp2Stream) => {
      streams++;
      lastStream = Math.max(lastStream, stream.id ?? 0);
      idleSessions.delete(session);
      stream.once("close", () => {
        streams--;
        if (streams === 0 && !session.closed && !session.destroyed) becameIdle(session, lastStream);
      });
    });
    becameIdle(session, 0);
  });

  // Requests in flight (their responses until 'close') and the drain, if one runs.
  const inFlight = new RequestsInFlight();
  // HTTP/1.1 connections with requests in flight, and how many (pipelined requests queue on one).
  const busySockets = new Map<net.Socket, number>();
  // HTTP/1.1 keep-alive connections with none, in the order they became idle, with since when
  // (performance.now()) and the bytes they had received then: a connection that has received more
  // since is sending its next request, and is not idle.
  const idleSockets = new Map<net.Socket, { since: number; bytes: number }>();
  let draining: (() => void) | undefined;
  // One `close` listener for every response: a request costs no closure of its own (issue 14).
  function requestClosed(this: TrackedResponse): void {
    const connection = inFlight.remove(this);
    if (connection instanceof net.Socket) {
      const left = (busySockets.get(connection) ?? 1) - 1;
      if (left > 0) busySockets.set(connection, left);
      else {
        busySockets.delete(connection);
        // Kept alive for the next request (not ending after this answer, nor gone).
        if (connection.writable && !connection.destroyed)
          idleSockets.set(connection, { since: performance.now(), bytes: connection.bytesRead });
      }
    }
    draining?.();
  }
  const track = (
    req: http.IncomingMessage | http2.Http2ServerRequest,
    res: http.ServerResponse | http2.Http2ServerResponse,
  ) => {
    // The connection it came on: the socket (HTTP/1.1) or the session (HTTP/2).
    const connection = "stream" in req ? req.stream.session : req.socket;
    inFlight.add(res as TrackedResponse, connection ?? res);
    if (connection instanceof net.Socket) {
      busySockets.set(connection, (busySockets.get(connection) ?? 0) + 1);
      idleSockets.delete(connection);
    }
    // During a drain, an HTTP/1.1 connection closes after its answer.
    if (draining && res instanceof http.ServerResponse && !res.headersSent) res.shouldKeepAlive = false;
    res.on("close", requestClosed);
    bodyRate.watch(req, res);
  };
  h1.on("request", track);
  h2.on("request", track);

  const sockets = new Set<net.Socket>();
  // Connections that sent nothing yet, in the order they came, with the time (performance.now())
  // their first byte is due. All have the same timeout, so the first entry is always the next to
  // run out: one timer for all of them, where socket.setTimeout left a Timeout, a bound function
  // and a listener on every connection for its whole life (issue 14).
  const sniffing = new Map<net.Socket, number>();
  // Connections over the limit, answered 503 (or closed) at their first byte.
  const overCap = new Set<net.Socket>();
  let firstByteTimer: NodeJS.Timeout | undefined;
  const armFirstByteTimer = () => {
    if (firstByteTimer !== undefined) return;
    for (const due of sniffing.values()) {
      firstByteTimer = setTimeout(firstByteTimedOut, Math.max(1, Math.ceil(due - performance.now())));
      firstByteTimer.unref();
      return;
    }
  };
  function firstByteTimedOut(): void {
    firstByteTimer = undefined;
    const now = performance.now();
    for (const [socket, due] of sniffing) {
      if (due > now) break;
      sniffing.delete(socket);
      socket.destroy();
    }
    armFirstByteTimer();
  }
  function connectionClosed(this: net.Socket): void {
    sniffing.delete(this);
    overCap.delete(this);
    sockets.delete(this);
    busySockets.delete(this);
    idleSockets.delete(this);
  }
  /**
   * Closes an HTTP/1.1 connection between requests, unless its next request has come: checked
   * after this turn of the event loop has read its sockets (setImmediate runs after the poll
   * phase). A timer that ran out while the loop was busy (a long synchronous read) runs before the
   * reads of bytes that came meanwhile: destroying the connection at once would drop a request the
   * client sent in time, unread, and the kernel would answer it with a reset (issue 28). Tells
   * `kept` when the connection stays, its next request begun.
   */
  function closeIfStillIdle(socket: net.Socket, kept?: () => void): void {
    const bytes = socket.bytesRead;
    setImmediate(() => {
      if (socket.destroyed) return;
      if (socket.bytesRead === bytes && !busySockets.has(socket)) socket.destroy();
      else kept?.();
    });
  }
  // Node destroys a connection whose keep-alive time ran out unless the server listens for
  // 'timeout' (no other timeout is set on these sockets): it is closed here, the same way.
  h1.on("timeout", (socket: net.Socket) => closeIfStillIdle(socket));
  // Idle connections being closed to admit new ones, until their close: they no longer count.
  let evicting = 0;
  function evictedClosed(): void {
    evicting--;
  }
  /**
   * At the connection cap, closes the connection idle the longest: an HTTP/1.1 keep-alive connection
   * between requests (nothing received since its last answer) or an HTTP/2 session with no open
   * stream and no header block coming, as nginx reuses keep-alive connections when it runs out.
   * False when there is none: the newcomer is refused.
   */
  function evictIdle(): boolean {
    let socket: net.Socket | undefined;
    let socketSince = Number.POSITIVE_INFINITY;
    for (const [candidate, idle] of idleSockets) {
      // Gone, ending, or its next request has begun: not idle (any more).
      if (candidate.destroyed || !candidate.writable || candidate.bytesRead !== idle.bytes) {
        idleSockets.delete(candidate);
        continue;
      }
      socket = candidate;
      socketSince = idle.since;
      break;
    }
    let session: http2.ServerHttp2Session | undefined;
    for (const [candidate, idle] of idleSessions) {
      if (candidate.destroyed || candidate.closed) {
        idleSessions.delete(candidate);
        continue;
      }
      if ((candidate.state.lastProcStreamID ?? 0) > idle.lastStream) continue;
      if (idle.since < socketSince) session = candidate;
      break;
    }
    evicting++;
    if (session) {
      session.once("close", evictedClosed);
      closeSession(session, "idle_evicted");
    } else if (socket) {
      idleSockets.delete(socket);
      const evicted = socket;
      evicted.once("close", evictedClosed);
      refused("idle_evicted");
      closeIfStillIdle(evicted, () => {
        // Its next request came meanwhile: it stays and counts again (the newcomer is admitted all the same).
        evicted.off("close", evictedClosed);
        evicting--;
      });
    } else {
      evicting--;
      return false;
    }
    return true;
  }
  function firstBytes(this: net.Socket, chunk: Buffer): void {
    this.off("data", firstBytes);
    sniffing.delete(this);
    this.pause();
    const n = Math.min(chunk.length, H2_PREFACE.length);
    const h2c = n >= 3 && chunk.subarray(0, n).equals(H2_PREFACE.subarray(0, n));
    // Over the cap when it came: still over (others may have closed since), and no idle one to close.
    if (overCap.delete(this) && sockets.size - evicting > limits.maxConnections && !evictIdle()) {
      refused("connections");
      // HTTP/2 clients see the connection closed (gRPC: UNAVAILABLE); HTTP/1.1 ones a 503.
      if (h2c) this.destroy();
      else
        answerAndClose(
          this,
          rawAnswer(
            "503 Service Unavailable",
            `too many connections: this server keeps at most ${limits.maxConnections} open`,
            { headers: `Retry-After: ${RETRY_AFTER_SECONDS}\r\n`, head: chunk.toString("latin1", 0, 5) === "HEAD " },
          ),
        );
      return;
    }
    this.unshift(chunk);
    if (h2c) {
      h2.emit("connection", this);
    } else {
      h1.emit("connection", this);
      this.resume();
    }
  }
  const tcp = net.createServer((socket) => {
    if (sockets.size - evicting >= limits.maxConnections) overCap.add(socket);
    sockets.add(socket);
    sniffing.set(socket, performance.now() + limits.firstByteTimeout);
    armFirstByteTimer();
    socket.on("close", connectionClosed);
    socket.on("error", destroyOnError);
    socket.on("finish", closeWhenDone);
    // Long-poll answers are small and latency-bound: no Nagle delay.
    socket.setNoDelay(true);
    socket.on("data", firstBytes);
  });

  return {
    listen(port, host) {
      return new Promise((resolve, reject) => {
        tcp.once("error", reject);
        tcp.listen(port, host, () => {
          tcp.off("error", reject);
          resolve(tcp.address() as AddressInfo);
        });
      });
    },
    async close() {
      const closed = new Promise<void>((resolve) => tcp.close(() => resolve()));
      bodyRate.close();
      clearInterval(idleTimer);
      clearTimeout(firstByteTimer);
      firstByteTimer = undefined;
      for (const session of sessions) session.destroy();
      for (const socket of sockets) socket.destroy();
      h1.closeAllConnections();
      h1.close();
      await closed;
    },
    async drain(timeoutMs) {
      const closed = new Promise<void>((resolve) => tcp.close(() => resolve()));
      clearTimeout(firstByteTimer);
      firstByteTimer = undefined;
      for (const socket of sniffing.keys()) socket.destroy();
      for (const res of inFlight.responses()) {
        if (res instanceof http.ServerResponse && !res.headersSent) res.shouldKeepAlive = false;
      }
      for (const session of sessions) session.close();
      let finished!: () => void;
      const allFinished = new Promise<void>((resolve) => {
        finished = resolve;
      });
      draining = () => {
        // A connection whose answer went out is idle now (after Node's own handling of the end).
        setImmediate(() => h1.closeIdleConnections());
        if (inFlight.size === 0) finished();
      };
      h1.closeIdleConnections();
      if (inFlight.size === 0) finished();
      let timer: NodeJS.Timeout | undefined;
      const drained = await Promise.race([
        allFinished.then(() => true),
        new Promise<boolean>((resolve) => {
          timer = setTimeout(() => resolve(false), timeoutMs);
        }),
      ]);
      clearTimeout(timer);
      const cut = drained ? 0 : new Set(inFlight.responses().map((res) => res.inFlightConnection)).size;
      if (drained && sockets.size > 0) {
        // Answers are out: give the connections a moment to close by themselves, as after any answer.
        const allClosed = Promise.all([...sockets].map((s) => new Promise((r) => s.once("close", r))));
        await Promise.race([allClosed, new Promise((r) => setTimeout(r, CLOSE_LINGER_MS).unref())]);
      }
      bodyRate.close();
      clearInterval(idleTimer);
      for (const session of sessions) session.destroy();
      for (const socket of sockets) socket.destroy();
      h1.closeAllConnections();
      await closed;
      return { drained, cut };
    },
  };
}

/** Methods some route answers (the `Allow` of a 405). */
export const ALLOWED_METHODS = "GET, HEAD, PUT, POST, DELETE";

/** The reason of a 400 for a request target with bytes other than printable ASCII, on every transport. */
export const INVALID_TARGET =
  "malformed HTTP request: the request target must be printable ASCII (percent-encode other bytes)";
