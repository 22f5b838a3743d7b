// Connect and gRPC errors as the typed errors of trove-errors.ts (fromConnectError), and which of
// them may pass by themselves. Kept apart so that what speaks only REST (the REST client, the
// CLI's commands) loads neither protobuf nor Connect.

import { Code, ConnectError } from "@connectrpc/connect";
import { BadRequestSchema, PreconditionFailureSchema, QuotaFailureSchema } from "./gen/google/rpc/error_details_pb.js";
import {
  BadRequestError,
  DeletedError,
  type ErrorDetails,
  ForbiddenError,
  HistoryPurgedError,
  NotFoundError,
  PayloadTooLargeError,
  PreconditionFailedError,
  ServerError,
  TooManyRequestsError,
  TroveError,
  UnauthorizedError,
  UnavailableError,
} from "./trove-errors.js";

/** Metadata key the server sets on NotFound for a known-deleted resource (its value is the tag). */
const DELETED_TAG_KEY = "trove-deleted-tag";

/** The precondition failure type of a moment before the history horizon (REST: 410). */
const HISTORY_PURGED = "HISTORY_PURGED";

/** The typed error for a Connect/gRPC error, with the HTTP status the REST face would answer. */
export function fromConnectError(err: unknown): TroveError {
  if (err instanceof TroveError) return err;
  const e = ConnectError.from(err);
  const reason = e.rawMessage;
  const details: ErrorDetails = {};
  const [preconditionFailure] = e.findDetails(PreconditionFailureSchema);
  if (preconditionFailure) details.preconditionFailure = preconditionFailure;
  const [badRequest] = e.findDetails(BadRequestSchema);
  if (badRequest) details.badRequest = badRequest;
  const [quotaFailure] = e.findDetails(QuotaFailureSchema);
  if (quotaFailure) details.quotaFailure = quotaFailure;
  const withDetails = { details };
  switch (e.code) {
    case Code.InvalidArgument:
    case Code.OutOfRange:
      return new BadRequestError(400, reason, undefined, withDetails);
    case Code.Unauthenticated:
      return new UnauthorizedError(401, reason, undefined, e.metadata.get("www-authenticate") ?? undefined);
    case Code.PermissionDenied:
      return new UnauthorizedError(401, reason, undefined, 'Bearer error="insufficient_scope"');
    case Code.AlreadyExists:
      return new ForbiddenError(403, reason, undefined, withDetails);
    case Code.NotFound: {
      const tag = e.metadata.get(DELETED_TAG_KEY);
      return tag !== null ? new DeletedError(404, tag) : new NotFoundError(404, reason, undefined, withDetails);
    }
    case Code.FailedPrecondition:
      if (preconditionFailure?.violations.some((v) => v.type === HISTORY_PURGED)) {
        return new HistoryPurgedError(410, reason, undefined, withDetails);
      }
      return new PreconditionFailedError(412, reason, undefined, withDetails);
    case Code.ResourceExhausted:
      // The server's refusal of a caller over its share says when to try again; "too large" does not.
      if (e.metadata.get("retry-after") !== null) return new TooManyRequestsError(429, reason, undefined, withDetails);
      return new PayloadTooLargeError(413, reason, undefined, withDetails);
    case Code.Unavailable:
      return new UnavailableError(503, reason, undefined, withDetails);
    default:
      return new ServerError(500, reason, undefined, withDetails);
  }
}

/** A Connect or gRPC failure that may pass by itself (see isTransient in backoff.ts): worth a retry. */
export function isTransientConnectError(err: unknown): boolean {
  return (
    err instanceof ConnectError && [Code.Unavailable, Code.Internal, Code.Unknown, Code.Aborted].includes(err.code)
  );
}
