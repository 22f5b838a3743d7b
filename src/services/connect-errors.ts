// The one place where domain and platform errors become ConnectError codes.

import { Code, ConnectError } from "@connectrpc/connect";
import {
  AlreadyExistsError,
  BadRequestError,
  DeletedError,
  ForbiddenError,
  InsufficientStorageError,
  NotFoundError,
  PermissionDeniedError,
  PreconditionFailedError,
  TooLargeError,
  UnavailableError,
} from "../domain/errors.js";

/** Metadata key set on NotFound errors for a known-deleted resource; its value is the tag. */
export const DELETED_TAG_KEY = "trove-deleted-tag";

/**
 * Metadata key set on ResourceExhausted errors that mean "the disk is full" rather than "too
 * large": REST answers them 507 Insufficient Storage instead of 413.
 */
export const INSUFFICIENT_STORAGE_KEY = "trove-insufficient-storage";

/** Platform error codes that mean the disk (or a quota, or the database's size cap) is full. */
const STORAGE_FULL_CODES = new Set(["ENOSPC", "EDQUOT", "SQLITE_FULL"]);

function insufficientStorage(message: string): ConnectError {
  return new ConnectError(message, Code.ResourceExhausted, { [INSUFFICIENT_STORAGE_KEY]: "1" });
}

export function toConnectError(err: unknown): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof BadRequestError) return new ConnectError(err.message, Code.InvalidArgument);
  if (err instanceof DeletedError) {
    return new ConnectError(err.message, Code.NotFound, { [DELETED_TAG_KEY]: err.tag });
  }
  if (err instanceof NotFoundError) return new ConnectError(err.message, Code.NotFound);
  if (err instanceof PreconditionFailedError) return new ConnectError(err.message, Code.FailedPrecondition);
  if (err instanceof ForbiddenError) return new ConnectError(err.message, Code.AlreadyExists);
  if (err instanceof AlreadyExistsError) return new ConnectError(err.message, Code.AlreadyExists);
  if (err instanceof PermissionDeniedError) return new ConnectError(err.message, Code.PermissionDenied);
  if (err instanceof TooLargeError) return new ConnectError(err.message, Code.ResourceExhausted);
  if (err instanceof UnavailableError) return new ConnectError(err.message, Code.Unavailable);
  if (err instanceof InsufficientStorageError) return insufficientStorage(err.message);
  // Adapters translate these themselves; one that slips through still gets the same answer.
  if (err instanceof Error && STORAGE_FULL_CODES.has(String((err as NodeJS.ErrnoException).code))) {
    return insufficientStorage(new InsufficientStorageError().message);
  }
  return ConnectError.from(err, Code.Internal);
}

type AnyFn = (...args: never[]) => unknown;

/** Wraps every method of a service implementation so that what it throws is a ConnectError. */
export function withConnectErrors<T extends object>(impl: T): T {
  const out: Record<string, unknown> = {};
  for (const name of Object.getOwnPropertyNames(Object.getPrototypeOf(impl)).concat(Object.keys(impl))) {
    const fn = (impl as Record<string, unknown>)[name];
    if (name === "constructor" || typeof fn !== "function") continue;
    const bound = (fn as AnyFn).bind(impl) as (...args: unknown[]) => unknown;
    out[name] = (...args: unknown[]) => {
      let result: unknown;
      try {
        result = bound(...args);
      } catch (err) {
        throw toConnectError(err);
      }
      if (result instanceof Promise) return result.catch((err) => Promise.reject(toConnectError(err)));
      if (result && typeof result === "object" && Symbol.asyncIterator in result) {
        return translateStream(result as AsyncIterable<unknown>);
      }
      return result;
    };
  }
  return out as T;
}

async function* translateStream<T>(source: AsyncIterable<T>): AsyncIterable<T> {
  try {
    yield* source;
  } catch (err) {
    throw toConnectError(err);
  }
}
