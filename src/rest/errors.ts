// The one table from ConnectError codes to REST statuses, and the error response.

import { Code, type ConnectError } from "@connectrpc/connect";
import { CHALLENGE_KEY, REALM } from "../auth/verifier.js";
import { quoteTag } from "../domain/etag.js";
import {
  DELETED_TAG_KEY,
  HISTORY_PURGED_KEY,
  INSUFFICIENT_STORAGE_KEY,
  NOT_EMPTY_KEY,
  RETRY_AFTER_KEY,
  toConnectError,
} from "../rpc/connect-errors.js";
import { type RestRequest, type RestResponse, send, sendText } from "./http.js";

export type StatusTable = Partial<Record<Code, number>>;

/** Resource Server REST API v2 (resource-server-v2.md). */
export const RESOURCES_STATUS: StatusTable = {
  [Code.InvalidArgument]: 400,
  [Code.OutOfRange]: 400,
  [Code.Unauthenticated]: 401,
  // The resource server answers 401 for "not authorized" as well (spec, Authentication).
  [Code.PermissionDenied]: 401,
  [Code.AlreadyExists]: 403,
  [Code.NotFound]: 404,
  [Code.FailedPrecondition]: 412,
  [Code.ResourceExhausted]: 413,
  [Code.Canceled]: 499,
  [Code.Unimplemented]: 501,
  [Code.Unavailable]: 503,
  [Code.DeadlineExceeded]: 504,
};

/**
 * The insights API (content-insights-service.md says nothing of errors): 403 tells
 * "authenticated but not allowed" apart from 401, and 409 is a name already taken.
 */
export const INSIGHTS_STATUS: StatusTable = {
  ...RESOURCES_STATUS,
  [Code.PermissionDenied]: 403,
  [Code.AlreadyExists]: 409,
};

export function statusOf(err: ConnectError, table: StatusTable = RESOURCES_STATUS): number {
  // Both "too large" and "the disk is full" are ResourceExhausted; the second is 507 (RFC 4918 11.5).
  if (err.code === Code.ResourceExhausted && err.metadata.get(INSUFFICIENT_STORAGE_KEY) !== null) return 507;
  // A caller over its share, who may try again later (docs/security.md, "Fair share"): not "too large".
  if (err.code === Code.ResourceExhausted && err.metadata.get(RETRY_AFTER_KEY) !== null) return 429;
  // A directory that is not empty (version 1's DELETE) is a conflict with what is stored, not a failed If-Match.
  if (err.code === Code.FailedPrecondition && err.metadata.get(NOT_EMPTY_KEY) !== null) return 409;
  // A moment older than the store keeps (docs/history.md): gone, not a failed If-Match.
  if (err.code === Code.FailedPrecondition && err.metadata.get(HISTORY_PURGED_KEY) !== null) return 410;
  return table[err.code] ?? 500;
}

/** The error behind each 5xx answer, for the request log line (which carries the request id). */
const serverErrors = new WeakMap<object, unknown>();

/** What made the server answer `res` with a 5xx status, if sendError answered it. */
export function serverErrorOf(res: object): unknown {
  return serverErrors.get(res);
}

/** Answers an error in the spec's shape: a text/plain reason, or `deleted` with the ETag. */
export function sendError(
  req: RestRequest,
  res: RestResponse,
  error: unknown,
  table: StatusTable = RESOURCES_STATUS,
): void {
  const err = toConnectError(error);
  if ((res as { headersSent: boolean }).headersSent) {
    // Too late for a status: cut the response so the client sees it incomplete.
    (res as { destroy(e?: Error): void }).destroy(err);
    return;
  }
  const headers: Record<string, string> = {};
  // An unread request body: do not make the client send the rest of it (HTTP/1.1).
  if (!req.complete && req.httpVersionMajor === 1) headers.Connection = "close";
  // Every 401 carries a challenge (RFC 9110 11.6.1): the token's problem, or that it grants too little.
  if (err.code === Code.Unauthenticated) {
    headers["WWW-Authenticate"] = err.metadata.get(CHALLENGE_KEY) ?? `Bearer realm="${REALM}"`;
  } else if (err.code === Code.PermissionDenied) {
    headers["WWW-Authenticate"] = `Bearer realm="${REALM}", error="insufficient_scope"`;
  }
  const retryAfter = err.metadata.get(RETRY_AFTER_KEY);
  if (retryAfter !== null) headers["Retry-After"] = retryAfter;
  const deletedTag = err.metadata.get(DELETED_TAG_KEY);
  if (deletedTag !== null) {
    headers.ETag = quoteTag(deletedTag);
    if (req.method === "HEAD") send(res, 404, headers);
    else send(res, 404, { ...headers, "Content-Type": "text/plain; charset=utf-8" }, "deleted");
    return;
  }
  const status = statusOf(err, table);
  if (status >= 500) serverErrors.set(res, error);
  if (req.method === "HEAD") send(res, status, headers);
  else sendText(res, status, status === 500 ? "internal error" : err.rawMessage, headers);
}
