// The minimum request-body rate (docs/security.md, "Slow clients"), as nginx's client_body_timeout
// and Apache's mod_reqtimeout MinRate: a request body must bring `--min-body-rate` bytes a second
// over every window of `--headers-timeout`, else it is answered 408 (DEADLINE_EXCEEDED) and closed.

import * as http from "node:http";
import * as http2 from "node:http2";
import { Code, ConnectError } from "@connectrpc/connect";
import type { RestRequest, RestResponse } from "../rest/http.js";
import { sendText } from "../rest/http.js";
import { rpcProtocol, sendRpcError } from "../rpc/refusals.js";
import type { ClaimingRequest, LongLivedClaim } from "../services/long-lived.js";
import { headersCheckingInterval, type LimitObserver } from "./limits.js";

/** What the rate check keeps of a request whose body is being received (fields of the request itself). */
interface BodyProgress {
  /** Bytes of body received so far. */
  bodyBytes: number;
  /** performance.now() at the start of the current window. */
  windowStart: number;
  /** `bodyBytes` at the start of the current window. */
  windowBytes: number;
}

/** Counts a chunk of body handed to a request (`push`; null ends the body). */
function countBody(req: BodyProgress, chunk: unknown): void {
  if (chunk !== null && chunk !== undefined) req.bodyBytes += (chunk as Buffer).byteLength;
}

/** The HTTP/1.1 requests of the listener: they count the body bytes Node's parser hands them. */
export class CountedRequest extends http.IncomingMessage implements BodyProgress, ClaimingRequest {
  bodyBytes = 0;
  windowStart = 0;
  windowBytes = 0;
  /** A download's claim on the long-lived budgets (fair-share.ts), declared here so every request has the field. */
  longLivedClaim: LongLivedClaim | undefined = undefined;

  override push(chunk: unknown, encoding?: BufferEncoding): boolean {
    countBody(this, chunk);
    return super.push(chunk, encoding);
  }
}

/** The HTTP/2 requests of the listener (compatibility layer), counting the same way. */
export class CountedHttp2Request extends http2.Http2ServerRequest implements BodyProgress, ClaimingRequest {
  bodyBytes = 0;
  windowStart = 0;
  windowBytes = 0;
  /** A download's claim on the long-lived budgets (fair-share.ts), declared here so every request has the field. */
  longLivedClaim: LongLivedClaim | undefined = undefined;

  override push(chunk: unknown, encoding?: BufferEncoding): boolean {
    countBody(this, chunk);
    return super.push(chunk, encoding);
  }
}

type Counted = (CountedRequest | CountedHttp2Request) & RestRequest;

export interface BodyRateOptions {
  /** Bytes a second a body must bring, on average over each window; 0: no minimum. */
  minRate: number;
  /** Milliseconds of a window (the request head's allowance, `--headers-timeout`). */
  window: number;
  refused?: LimitObserver;
}

export interface BodyRate {
  /** Starts watching the body of a request that has one. */
  watch(req: RestRequest, res: RestResponse): void;
  /** Stops every check (the listener closes). */
  close(): void;
}

/** Whether a request has a body still to come, from its head. */
function hasBody(req: RestRequest): boolean {
  if (req.httpVersionMajor === 2) return !(req as http2.Http2ServerRequest).stream.endAfterHeaders;
  const length = req.headers["content-length"];
  return length !== undefined ? length !== "0" : req.headers["transfer-encoding"] !== undefined;
}

export function createBodyRate(options: BodyRateOptions): BodyRate {
  const { minRate, window } = options;
  // Requests whose body is being received, with the response that would answer a cut.
  const bodies = new Map<Counted, RestResponse>();
  let timer: NodeJS.Timeout | undefined;

  const check = () => {
    const now = performance.now();
    for (const [req, res] of bodies) {
      if (req.complete || req.readableEnded || req.destroyed || (res as { closed?: boolean }).closed) {
        bodies.delete(req);
        continue;
      }
      // Bytes waiting unread: the server is the slow side (a full disk queue, flow control), not the
      // client. (A paused request with nothing buffered waits for the client.)
      if (req.readableLength > 0) {
        req.windowStart = now;
        req.windowBytes = req.bodyBytes;
        continue;
      }
      const elapsed = now - req.windowStart;
      if (elapsed < window) continue;
      if (req.bodyBytes - req.windowBytes >= (minRate * elapsed) / 1000) {
        req.windowStart = now;
        req.windowBytes = req.bodyBytes;
        continue;
      }
      bodies.delete(req);
      options.refused?.("body_rate");
      cut(req, res, `the request body came slower than ${minRate} bytes a second over ${window / 1000} s`);
    }
    if (bodies.size === 0) {
      clearInterval(timer);
      timer = undefined;
    }
  };

  return {
    watch(req, res) {
      if (minRate === 0 || !hasBody(req)) return;
      const counted = req as Counted;
      counted.windowStart = performance.now();
      counted.windowBytes = counted.bodyBytes;
      bodies.set(counted, res);
      if (timer === undefined) {
        timer = setInterval(check, headersCheckingInterval(window));
        timer.unref();
      }
    },
    close() {
      clearInterval(timer);
      timer = undefined;
      bodies.clear();
    },
  };
}

/**
 * Answers a body that came too slowly, then closes its connection (HTTP/1.1) or stream (HTTP/2).
 * The body is no longer read, so it never completes and nothing of it is stored: the request's
 * handler sees its client gone, as for any aborted upload.
 */
function cut(req: Counted, res: RestResponse, reason: string): void {
  const stream = (res as http2.Http2ServerResponse).stream as http2.ServerHttp2Stream | undefined;
  const socket = stream === undefined ? (req as CountedRequest).socket : undefined;
  // Stop taking the body: what is still in flight is not handed to the request.
  if (stream) stream.pause();
  else socket?.pause();
  // HTTP/2: RST_STREAM(NO_ERROR), which Node sends once the answer written so far has gone out.
  const end = () => {
    if (stream) {
      if (!stream.closed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
    } else socket?.destroy();
  };
  if (!(res as { headersSent: boolean }).headersSent) {
    // HTTP/1.1: the socket is destroyed once the answer is handed to the kernel.
    if (stream === undefined) {
      (res as http.ServerResponse).shouldKeepAlive = false;
      res.once("finish", end);
    }
    const protocol = rpcProtocol(req);
    if (protocol) sendRpcError(req, res, protocol, new ConnectError(reason, Code.DeadlineExceeded), {}, 408);
    else sendText(res, 408, reason);
    if (stream === undefined) return;
  }
  end();
}
