// Errors a Trove client can tell apart: one class per answer of the REST v2 API, with type
// guards. No runtime import: the REST client and the CLI load this without protobuf or Connect
// (connect-errors.ts maps Connect errors onto these classes).

import type { BadRequest, PreconditionFailure, QuotaFailure } from "./gen/google/rpc/error_details_pb.js";

export type { BadRequest, PreconditionFailure, QuotaFailure };

/**
 * The google.rpc details a Connect or gRPC error carried (`grpc-status-details-bin`, Connect
 * `details`); empty for a REST answer. A failed If-Match carries `preconditionFailure` (type
 * `ETAG`, subject `{store}/{path}`, description `current tag "..."`), an invalid argument that
 * names a field `badRequest`, a size limit or a full disk `quotaFailure` (subject
 * `max-resource-size` or `storage`).
 */
export interface ErrorDetails {
  preconditionFailure?: PreconditionFailure;
  badRequest?: BadRequest;
  quotaFailure?: QuotaFailure;
}

/** Where an error came from: the request that got it. */
export interface ErrorRequest {
  method: string;
  url: string;
}

/** Any error answer of a Trove server; `status` is the HTTP status (0: no answer at all). */
export class TroveError extends Error {
  override name = "TroveError";
  /** HTTP status of the answer; 0 when the server could not be reached. */
  readonly status: number;
  /** The server's text/plain reason (one line), or a description of the failure. */
  readonly reason: string;
  readonly request: ErrorRequest | undefined;
  /** The google.rpc details of a Connect or gRPC error (see ErrorDetails); `{}` when there are none. */
  readonly details: ErrorDetails;

  constructor(
    status: number,
    reason: string,
    request?: ErrorRequest,
    options?: { cause?: unknown; details?: ErrorDetails },
  ) {
    super(
      request ? `${request.method} ${request.url}: ${status ? `${status} ` : ""}${reason}` : reason,
      options?.cause === undefined ? undefined : { cause: options.cause },
    );
    this.status = status;
    this.reason = reason;
    this.request = request;
    this.details = options?.details ?? {};
  }
}

/** 400: the request was malformed; `reason` says what was wrong. */
export class BadRequestError extends TroveError {
  override name = "BadRequestError";

  /** The proto field path the server named as invalid (`details.badRequest`), e.g. `header.content_md5`. */
  get field(): string | undefined {
    return this.details.badRequest?.fieldViolations[0]?.field;
  }
}

/** 401: no valid token, or the token does not grant the operation (`insufficientScope`). */
export class UnauthorizedError extends TroveError {
  override name = "UnauthorizedError";
  /** The WWW-Authenticate challenge, when the server sent one. */
  readonly challenge: string | undefined;
  /** The token is valid but does not allow the operation (the challenge's error="insufficient_scope"). */
  readonly insufficientScope: boolean;

  constructor(status: number, reason: string, request?: ErrorRequest, challenge?: string) {
    super(status, reason, request);
    this.challenge = challenge;
    this.insufficientScope = challenge?.includes('error="insufficient_scope"') ?? false;
  }
}

/** 403: the operation is forbidden (a file named like a directory, a store that exists, deleting a store's root). */
export class ForbiddenError extends TroveError {
  override name = "ForbiddenError";
}

/** 404: the resource, its parent or the store does not exist. */
export class NotFoundError extends TroveError {
  override name = "NotFoundError";
}

/**
 * 404 with body `deleted` and an ETag: the resource is known to be deleted (a tombstone within the
 * store's keep-deleted). It is a NotFoundError too; `tag` is the tombstone's tag.
 */
export class DeletedError extends NotFoundError {
  override name = "DeletedError";
  readonly tag: string;

  constructor(status: number, tag: string, request?: ErrorRequest) {
    super(status, "deleted", request);
    this.tag = tag;
  }
}

/** 409: a name already taken (a project, an environment), or a directory that is not empty (REST v1 delete). */
export class ConflictError extends TroveError {
  override name = "ConflictError";
}

/**
 * 410: a moment older than the store keeps history for (its history horizon), or any earlier
 * moment of a store that keeps none (keep-versions 0); `reason` names the horizon. The gRPC face
 * says it as FAILED_PRECONDITION with a HISTORY_PURGED precondition failure.
 */
export class HistoryPurgedError extends TroveError {
  override name = "HistoryPurgedError";
}

/** 412: If-Match did not match the stored tag (or the resource is absent). */
export class PreconditionFailedError extends TroveError {
  override name = "PreconditionFailedError";

  /**
   * The resource's current tag, from `details.preconditionFailure` (Connect and gRPC); undefined
   * when the resource does not exist or the answer carried no details (REST).
   */
  get currentTag(): string | undefined {
    const etag = this.details.preconditionFailure?.violations.find((v) => v.type === "ETAG");
    return etag && /^current tag "(.*)"$/.exec(etag.description)?.[1];
  }
}

/** 413: the body is larger than the server accepts. */
export class PayloadTooLargeError extends TroveError {
  override name = "PayloadTooLargeError";
}

/**
 * 429: the caller has as many long-lived requests (polls, watches, transfers) in flight as the
 * server lets one caller have; `retryAfter` seconds later it may try again (docs/security.md,
 * "A fair share per caller").
 */
export class TooManyRequestsError extends TroveError {
  override name = "TooManyRequestsError";
}

/** 503: the server cannot serve now (its storage or the token issuer is unreachable). */
export class UnavailableError extends TroveError {
  override name = "UnavailableError";
}

/** No answer: the server could not be reached, or the connection broke. `status` is 0. */
export class ConnectionError extends TroveError {
  override name = "ConnectionError";
}

/** A 5xx other than 503. */
export class ServerError extends TroveError {
  override name = "ServerError";
}

/** The server has no ReadMany or WriteMany (an earlier Trove, or a proxy that passes only REST): one file at a time. */
export class BatchUnsupportedError extends ServerError {
  override name = "BatchUnsupportedError";
}

export const isTroveError = (e: unknown): e is TroveError => e instanceof TroveError;
export const isBadRequestError = (e: unknown): e is BadRequestError => e instanceof BadRequestError;
export const isUnauthorizedError = (e: unknown): e is UnauthorizedError => e instanceof UnauthorizedError;
export const isForbiddenError = (e: unknown): e is ForbiddenError => e instanceof ForbiddenError;
/** True for a missing and for a known-deleted resource; use isDeletedError to tell them apart. */
export const isNotFoundError = (e: unknown): e is NotFoundError => e instanceof NotFoundError;
export const isDeletedError = (e: unknown): e is DeletedError => e instanceof DeletedError;
export const isConflictError = (e: unknown): e is ConflictError => e instanceof ConflictError;
export const isHistoryPurgedError = (e: unknown): e is HistoryPurgedError => e instanceof HistoryPurgedError;
export const isPreconditionFailedError = (e: unknown): e is PreconditionFailedError =>
  e instanceof PreconditionFailedError;
export const isPayloadTooLargeError = (e: unknown): e is PayloadTooLargeError => e instanceof PayloadTooLargeError;
export const isUnavailableError = (e: unknown): e is UnavailableError => e instanceof UnavailableError;
export const isTooManyRequestsError = (e: unknown): e is TooManyRequestsError => e instanceof TooManyRequestsError;
export const isConnectionError = (e: unknown): e is ConnectionError => e instanceof ConnectionError;
export const isServerError = (e: unknown): e is ServerError => e instanceof ServerError;

/** The typed error for an HTTP error answer. */
export function errorForStatus(
  status: number,
  reason: string,
  request?: ErrorRequest,
  headers?: { etag?: string | null; challenge?: string | null },
): TroveError {
  switch (status) {
    case 400:
      return new BadRequestError(status, reason, request);
    case 401:
      return new UnauthorizedError(status, reason, request, headers?.challenge ?? undefined);
    case 403:
      return new ForbiddenError(status, reason, request);
    case 404:
      return new NotFoundError(status, reason, request);
    case 409:
      return new ConflictError(status, reason, request);
    case 410:
      return new HistoryPurgedError(status, reason, request);
    case 412:
      return new PreconditionFailedError(status, reason, request);
    case 413:
      return new PayloadTooLargeError(status, reason, request);
    case 429:
      return new TooManyRequestsError(status, reason, request);
    case 503:
      return new UnavailableError(status, reason, request);
    default:
      return status >= 500 ? new ServerError(status, reason, request) : new TroveError(status, reason, request);
  }
}
