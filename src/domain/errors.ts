// Errors of the domain, told apart by class. `rpc/connect-errors.ts` is the
// one place that turns them into ConnectError codes.

/**
 * A reason that names an input field, for errors made where the face is not known (domain rules,
 * storage): `field` is the proto field's name, which the message says; the core words it again
 * with the face's own name for the field (services/field-names.ts).
 */
export interface FieldReason {
  readonly field: string;
  reason(name: string): string;
}

function messageOf(reason: string | FieldReason): string {
  return typeof reason === "string" ? reason : reason.reason(reason.field);
}

export class BadRequestError extends Error {
  override name = "BadRequestError";
  readonly fieldReason: FieldReason | undefined;
  constructor(reason: string | FieldReason) {
    super(messageOf(reason));
    this.fieldReason = typeof reason === "string" ? undefined : reason;
  }
}

export class NotFoundError extends Error {
  override name = "NotFoundError";
}

/** A resource that is known to be deleted (a tombstone still exists). */
export class DeletedError extends Error {
  override name = "DeletedError";
  constructor(
    message: string,
    readonly tag: string,
  ) {
    super(message);
  }
}

/** If-Match did not hold. */
export class PreconditionFailedError extends Error {
  override name = "PreconditionFailedError";
  readonly fieldReason: FieldReason | undefined;
  constructor(reason: string | FieldReason) {
    super(messageOf(reason));
    this.fieldReason = typeof reason === "string" ? undefined : reason;
  }
}

/**
 * A delete that asked for an empty directory (REST v1, or require_empty) found entries below it;
 * `entries` is how many (a lower bound when the count stopped early).
 */
export class NotEmptyError extends Error {
  override name = "NotEmptyError";
  constructor(
    message: string,
    readonly entries: number,
  ) {
    super(message);
  }
}

/** The operation is not allowed on what is there, e.g. a resource named like a directory. */
export class ForbiddenError extends Error {
  override name = "ForbiddenError";
}

export class AlreadyExistsError extends Error {
  override name = "AlreadyExistsError";
}

export class TooLargeError extends Error {
  override name = "TooLargeError";
}

/**
 * The server's disk (or the database's quota) is full: nothing was written. A client may retry
 * once space is freed, e.g. by a DELETE, which the adapters keep room for.
 */
export class InsufficientStorageError extends Error {
  override name = "InsufficientStorageError";
  constructor(message = "insufficient storage: the server's disk is full") {
    super(message);
  }
}

/** The storage backend cannot be reached. */
export class UnavailableError extends Error {
  override name = "UnavailableError";
}

/** The server refuses writes for a while (the read-only switch): try again after `retryAfter` seconds. */
export class ReadOnlyError extends UnavailableError {
  override name = "ReadOnlyError";
  readonly retryAfter: number;
  constructor(message: string, retryAfter: number) {
    super(message);
    this.retryAfter = retryAfter;
  }
}

/** The caller is known but may not do this. */
export class PermissionDeniedError extends Error {
  override name = "PermissionDeniedError";
}

/**
 * A moment before the store's history horizon, or any earlier moment of a store that keeps no
 * history (docs/history.md): REST 410 Gone, gRPC FAILED_PRECONDITION.
 */
export class HistoryPurgedError extends Error {
  override name = "HistoryPurgedError";
}

/**
 * A refusal of the server's state, not of one write (read-only, a database away, a full disk): the
 * writes after it would be refused alike, so a series of writes (WriteMany) ends there.
 */
export function isServerStateError(error: unknown): boolean {
  return error instanceof UnavailableError || error instanceof InsufficientStorageError;
}
