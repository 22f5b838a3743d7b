// Cross-origin access for browser pages on the origins given by --cors-origin (CORS, Fetch standard):
// preflights answered before authentication for every face (REST v2, insights, Connect, gRPC-Web,
// the open endpoints), and the headers a browser needs on the actual answer. No origin is allowed by
// default; credentials (cookies) are never allowed, since tokens travel in Authorization.

import type { ServerResponse } from "node:http";
import { cors as connectCors } from "@connectrpc/connect";
import { type RestRequest, type RestResponse, SERVER_HEADER, sendText } from "../rest/http.js";
import { dropUnreadBody } from "../rpc/refusals.js";
import { parseCorsOrigin } from "./config.js";
import type { CrossOrigin } from "./pipeline.js";

/** Methods a page may use: REST v2 and insights, and Connect's (POST, and GET for side-effect-free calls). */
export const CORS_ALLOWED_METHODS = [
  ...new Set(["GET", "HEAD", "PUT", "POST", "DELETE", ...connectCors.allowedMethods]),
];

/** Request headers a page may send: Connect's and gRPC-Web's published list, and REST's. */
export const CORS_ALLOWED_HEADERS = [
  ...new Set([
    ...connectCors.allowedHeaders,
    "Authorization",
    "If-Match",
    "If-None-Match",
    "Content-Type",
    "Content-MD5",
    "X-Request-Id",
  ]),
];

/** Response headers a page may read beyond the safelisted ones: Connect's and gRPC-Web's, and REST's. */
export const CORS_EXPOSED_HEADERS = [
  ...new Set([
    ...connectCors.exposedHeaders,
    "ETag",
    "Location",
    "Last-Modified-Millis",
    "Content-MD5",
    "Content-Length",
    "X-Request-Id",
    "WWW-Authenticate",
    "Allow",
    "Retry-After",
    "Server",
  ]),
];

/** How long a browser may cache a preflight's answer, in seconds (Chromium caps it at 2 hours). */
export const CORS_MAX_AGE = 7200;

function addVary(res: ServerResponse, names: string): void {
  const current = res.getHeader("Vary");
  res.setHeader("Vary", current === undefined ? names : `${String(current)}, ${names}`);
}

/** Whether a request declares a body (a preflight has none; one that does is not read). */
function hasBody(req: RestRequest): boolean {
  const length = req.headers["content-length"];
  return (length !== undefined && length !== "0") || req.headers["transfer-encoding"] !== undefined;
}

export function createCrossOrigin(origins: readonly string[]): CrossOrigin {
  const allowed = new Set(origins.map(parseCorsOrigin));
  const allowMethods = CORS_ALLOWED_METHODS.join(", ");
  const allowHeaders = CORS_ALLOWED_HEADERS.join(", ");
  const exposeHeaders = CORS_EXPOSED_HEADERS.join(", ");
  return {
    handle(req: RestRequest, res: RestResponse): boolean {
      const r = res as ServerResponse;
      const origin = req.headers.origin;
      const preflight =
        req.method === "OPTIONS" && origin !== undefined && req.headers["access-control-request-method"] !== undefined;
      if (preflight) {
        addVary(r, "Origin, Access-Control-Request-Method, Access-Control-Request-Headers");
        if (hasBody(req)) dropUnreadBody(req, res);
        else (req as { resume(): void }).resume();
        if (!allowed.has(origin)) {
          // No CORS headers: the browser refuses the actual request; the reason is for a human.
          sendText(res, 403, `cross-origin requests from ${JSON.stringify(origin)} are not allowed (--cors-origin)`);
          return true;
        }
        r.statusCode = 204;
        r.setHeader("Server", SERVER_HEADER);
        r.setHeader("Access-Control-Allow-Origin", origin);
        r.setHeader("Access-Control-Allow-Methods", allowMethods);
        r.setHeader("Access-Control-Allow-Headers", allowHeaders);
        r.setHeader("Access-Control-Max-Age", String(CORS_MAX_AGE));
        r.end();
        return true;
      }
      // Every answer depends on Origin once origins are configured: a cache must not give one
      // origin's answer (or a same-origin one) to another.
      addVary(r, "Origin");
      if (origin !== undefined && allowed.has(origin)) {
        r.setHeader("Access-Control-Allow-Origin", origin);
        r.setHeader("Access-Control-Expose-Headers", exposeHeaders);
      }
      return false;
    },
  };
}
