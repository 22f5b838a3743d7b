// The request pipeline every request goes through before its face: a request id, the observers
// (request log, metrics), the answers that must not depend on the transport (CONNECT, raw bytes in
// the target), the development issuer, cross-origin preflights, open paths, then authentication.
// A request that is refused here is answered without its body being read.

import { randomBytes } from "node:crypto";
import type * as http from "node:http";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Logger } from "pino";
import { anonymousCaller, type Caller, nobody } from "../auth/caller.js";
import type { DevIssuer } from "../auth/dev-issuer.js";
import type { Authenticator } from "../auth/verifier.js";
import { serverErrorOf } from "../rest/errors.js";
import { type RestRequest, type RestResponse, sendText, splitUrl } from "../rest/http.js";
import { dropUnreadBody } from "../rpc/refusals.js";
import { callerOf, type Faces } from "./faces.js";
import type { LongLivedBudget } from "./fair-share.js";
import {
  ALLOWED_METHODS,
  INVALID_TARGET,
  RecordedHttp2Response,
  RecordedResponse,
  type RequestRecord,
} from "./listener.js";
import { requestLineWriter } from "./request-line.js";
import { type RequestRoute, routeOf } from "./routes.js";

/**
 * Sees every request: when it arrives, before anything answers it, and at its end. Observers never
 * answer. What one keeps of a request until its end is in the response's RequestRecord fields, and
 * the pipeline calls every observer from one `finish` and one `close` listener shared by all
 * responses: a request costs no closure or listener of an observer's own (issue 14).
 */
export interface RequestObserver {
  /** The request arrived (its response's `arrived` and `requestId` are set). */
  arrived?(req: RestRequest, res: ObservedResponse): void;
  /** Its response was sent complete (`finish`). */
  finished?(req: RestRequest, res: ObservedResponse): void;
  /** Its response closed, complete or not (`close`, after `finish` when complete). */
  closed?(req: RestRequest, res: ObservedResponse): void;
}

/** A response the pipeline has seen, with what it keeps of the request (listener.ts). */
export type ObservedResponse = RestResponse & RequestRecord;

/** Cross-origin access for browsers (CORS). */
export interface CrossOrigin {
  /**
   * Answers a preflight (returns true), or adds the cross-origin headers to the response of an
   * actual request (returns false, and the request goes on).
   */
  handle(req: RestRequest, res: RestResponse): boolean;
}

export interface PipelineOptions {
  faces: Faces;
  logger: Logger;
  auth: Authenticator | "anonymous";
  devIssuer?: DevIssuer;
  crossOrigin?: CrossOrigin;
  /** Observers besides the request log. */
  observers?: readonly RequestObserver[];
  /** The budgets of long-lived work: a request beyond them is refused before its face sees it. */
  longLived?: LongLivedBudget;
}

/** A request target Node's HTTP/1.1 parser would take: printable ASCII. HTTP/2 lets any byte through. */
const PRINTABLE_TARGET = /^[\x21-\x7e]*$/;

/**
 * What the log keeps of the error behind a 5xx: for a ConnectError its code, reason and cause,
 * never its details (a 507's QuotaFailure carries its protobuf descriptor: 1.5 KB a line, issue 29).
 */
export function loggedError(err: unknown): unknown {
  if (!(err instanceof ConnectError)) return err;
  const cause = err.cause instanceof Error ? err.cause : undefined;
  return {
    code: Code[err.code],
    message: err.rawMessage,
    ...(cause ? { cause: { type: cause.name, message: cause.message, code: (cause as { code?: unknown }).code } } : {}),
  };
}

/** The request log: one line per request, and one error line with the request id for every 5xx. */
export function requestLog(logger: Logger): RequestObserver {
  const line = requestLineWriter(logger);
  return {
    finished(req, res) {
      // Every 5xx answer (REST, insights, Connect) is one error line with the request id.
      if (res.statusCode >= 500) {
        logger.error(
          { req: res.requestId, method: req.method, status: res.statusCode, err: loggedError(serverErrorOf(res)) },
          "request failed",
        );
      }
      if (logger.isLevelEnabled("info")) {
        // Never the headers (Authorization) nor, for the issuer, the query string.
        const url = res.route?.target === "issuer" ? req.url?.replace(/\?.*$/, "") : req.url;
        const caller = callerOf(req)?.subject;
        const ms = Math.round((performance.now() - res.arrived) * 10) / 10;
        if (line !== undefined && res.requestId !== undefined) {
          line(res.requestId, req.method, url, res.statusCode, caller, ms);
        } else {
          logger.info({ req: res.requestId, method: req.method, url, status: res.statusCode, caller, ms }, "request");
        }
      }
    },
  };
}

export function createPipeline(options: PipelineOptions): (req: RestRequest, res: RestResponse) => void {
  const { faces, auth, devIssuer, crossOrigin, longLived } = options;
  const observers = [requestLog(options.logger), ...(options.observers ?? [])];
  const arrivedObservers = observers.filter((o) => o.arrived !== undefined);
  const finishedObservers = observers.filter((o) => o.finished !== undefined);
  const closedObservers = observers.filter((o) => o.closed !== undefined);
  // The one `finish` and the one `close` listener of every response.
  function finished(this: ObservedResponse): void {
    for (const observer of finishedObservers) observer.finished?.(this.req, this);
  }
  function closed(this: ObservedResponse): void {
    longLived?.release(this);
    for (const observer of closedObservers) observer.closed?.(this.req, this);
  }
  const idPrefix = randomBytes(4).toString("hex");
  let counter = 0;

  // The caller is known: long-lived work takes its place in the budgets, or is refused.
  const admitted = (req: RestRequest, res: ObservedResponse, caller: Caller, route: RequestRoute) => {
    const refusal = longLived?.admit(req, res, caller);
    if (refusal) faces.refuse(req, res, refusal, route);
    else faces.dispatch(req, res, caller, route);
  };

  const authenticated = (req: RestRequest, res: ObservedResponse, route: RequestRoute) => {
    if (auth === "anonymous") {
      admitted(req, res, anonymousCaller, route);
      return;
    }
    let caller: Caller | Promise<Caller>;
    try {
      // The connection it came on (the socket, or the HTTP/2 session): its last token is known by one comparison.
      caller = auth.authenticate(req.headers.authorization, "stream" in req ? req.stream.session : req.socket);
    } catch (err) {
      faces.refuse(req, res, err, route);
      return;
    }
    if (caller instanceof Promise) {
      caller.then(
        (c) => admitted(req, res, c, route),
        (err) => faces.refuse(req, res, err, route),
      );
    } else {
      admitted(req, res, caller, route);
    }
  };

  return (req, response) => {
    const res = response as ObservedResponse;
    res.arrived = performance.now();
    // The one lookup of the request in the route table: everything after reads it from the record.
    const route = routeOf(req);
    res.route = route;
    res.requestId =
      (req.headers["x-request-id"] as string | undefined)?.slice(0, 128) ?? `${idPrefix}-${(++counter).toString(36)}`;
    // The listener's responses write X-Request-Id with their head; any other now.
    if (!(res instanceof RecordedResponse || res instanceof RecordedHttp2Response)) {
      (res as http.ServerResponse).setHeader("X-Request-Id", res.requestId);
    }
    for (const observer of arrivedObservers) observer.arrived?.(req, res);
    res.on("finish", finished);
    res.on("close", closed);
    // The same request gets the same answer on HTTP/1.1 and HTTP/2, whatever Node's parsers let through.
    if (req.method === "CONNECT") {
      dropUnreadBody(req, res);
      sendText(res, 405, "CONNECT is not supported", { Allow: ALLOWED_METHODS });
      return;
    }
    if (!PRINTABLE_TARGET.test(req.url ?? "")) {
      dropUnreadBody(req, res);
      sendText(res, 400, INVALID_TARGET);
      return;
    }
    if (devIssuer && route.target === "issuer") {
      devIssuer.handle(req, res);
      return;
    }
    // Before authentication, since a browser's preflight carries no credentials.
    if (crossOrigin?.handle(req, res)) return;
    if (req.method === "OPTIONS") {
      dropUnreadBody(req, res);
      sendText(res, 405, `OPTIONS is not supported on ${splitUrl(req.url ?? "/").pathname}`, {
        Allow: ALLOWED_METHODS,
      });
      return;
    }
    if (route.open) {
      admitted(req, res, nobody, route);
      return;
    }
    authenticated(req, res, route);
  };
}
