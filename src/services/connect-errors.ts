// The one place where domain and platform errors become ConnectError codes.

import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
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

/**
 * Messages connect-node gives, with code Internal, to errors that only a request the client
 * encoded wrongly can cause: a protobuf body that does not parse, a compressed message without
 * a negotiated encoding, a compressed body that does not decompress. They are InvalidArgument.
 */
const REQUEST_DECODE_ERRORS = [
  /^parse binary: /,
  /^received compressed envelope, but do not know how to decompress/,
  /^decompression failed$/,
];

export function isRequestDecodeError(code: Code | string, message: string): boolean {
  return (
    (code === Code.Internal || code === "internal" || code === String(Code.Internal)) &&
    REQUEST_DECODE_ERRORS.some((re) => re.test(message))
  );
}

/**
 * Wraps the Connect routes so that a request body that does not decode is answered
 * InvalidArgument in the caller's protocol instead of Internal. connect-node decodes requests
 * before any interceptor runs and labels binary decode errors Internal, so the answer is
 * relabelled on its way out: the Connect unary error body, the Connect end-of-stream message,
 * the gRPC trailers or the gRPC-Web trailer message. Nothing else is touched.
 */
export function withRequestDecodeErrors(routes: (router: ConnectRouter) => void): (router: ConnectRouter) => void {
  return (router) => {
    routes(router);
    const handlers = router.handlers as UniversalHandler[];
    for (let i = 0; i < handlers.length; i++) {
      const handler = handlers[i] as UniversalHandler;
      const relabelled = async (req: UniversalServerRequest) => relabelDecodeErrors(await handler(req));
      handlers[i] = Object.assign(relabelled, handler);
    }
  };
}

const ENVELOPE_END_STREAM = 0x02;
const ENVELOPE_TRAILER = 0x80;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

async function relabelDecodeErrors(res: UniversalServerResponse): Promise<UniversalServerResponse> {
  const type = res.header?.get("content-type") ?? "";
  if (res.body === undefined || (res.header?.get("content-encoding") ?? "identity") !== "identity") return res;
  if (type.startsWith("application/grpc-web")) return { ...res, body: mapEnvelopes(res.body, ENVELOPE_TRAILER) };
  if (type.startsWith("application/grpc")) {
    const trailer = res.trailer;
    if (trailer === undefined) return res;
    return { ...res, body: afterBody(res.body, () => relabelGrpcStatus(trailer)) };
  }
  if (type.startsWith("application/connect+")) return { ...res, body: mapEnvelopes(res.body, ENVELOPE_END_STREAM) };
  if (res.status === 500 && type.startsWith("application/json") && res.header) {
    const chunks: Uint8Array[] = [];
    for await (const chunk of res.body) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    const relabelled = relabelConnectErrorJson(body);
    if (relabelled === undefined) return { ...res, body: single(body) };
    const header = new Headers(res.header);
    header.set("content-length", String(relabelled.byteLength));
    return { ...res, status: 400, header, body: single(relabelled) };
  }
  return res;
}

async function* single(chunk: Uint8Array): AsyncIterable<Uint8Array> {
  yield chunk;
}

async function* afterBody(body: AsyncIterable<Uint8Array>, done: () => void): AsyncIterable<Uint8Array> {
  yield* body;
  done();
}

function relabelGrpcStatus(headers: Headers): void {
  const message = decodeURIComponentSafe(headers.get("grpc-message") ?? "");
  if (isRequestDecodeError(String(headers.get("grpc-status")), message)) {
    headers.set("grpc-status", String(Code.InvalidArgument));
  }
}

/** Connect's error JSON `{"code": "internal", "message"}` as invalid_argument, or undefined. */
function relabelConnectErrorJson(json: Uint8Array): Uint8Array | undefined {
  try {
    const error = JSON.parse(decoder.decode(json)) as { code?: unknown; message?: unknown };
    if (typeof error.message !== "string" || !isRequestDecodeError(String(error.code), error.message)) return undefined;
    return encoder.encode(JSON.stringify({ ...error, code: "invalid_argument" }));
  } catch {
    return undefined;
  }
}

/** Each chunk of an enveloped body is one envelope; the final one (flag `last`) is relabelled. */
async function* mapEnvelopes(body: AsyncIterable<Uint8Array>, last: number): AsyncIterable<Uint8Array> {
  for await (const chunk of body) {
    const whole = chunk.byteLength >= 5 && chunk.byteLength === 5 + Buffer.from(chunk).readUInt32BE(1);
    if (!whole || chunk[0] !== last) {
      yield chunk;
      continue;
    }
    const data = chunk.subarray(5);
    let relabelled: Uint8Array | undefined;
    if (last === ENVELOPE_END_STREAM) {
      relabelled = relabelEndStream(data);
    } else {
      const text = decoder.decode(data);
      const status = /^grpc-status: *(\d+)\r?$/im.exec(text)?.[1] ?? "";
      const message = decodeURIComponentSafe(/^grpc-message: *(.*?)\r?$/im.exec(text)?.[1] ?? "");
      if (isRequestDecodeError(status, message)) {
        relabelled = encoder.encode(text.replace(/^grpc-status: *\d+/im, `grpc-status: ${Code.InvalidArgument}`));
      }
    }
    if (relabelled === undefined) {
      yield chunk;
      continue;
    }
    const out = new Uint8Array(5 + relabelled.byteLength);
    out[0] = last;
    new DataView(out.buffer).setUint32(1, relabelled.byteLength);
    out.set(relabelled, 5);
    yield out;
  }
}

function relabelEndStream(json: Uint8Array): Uint8Array | undefined {
  try {
    const end = JSON.parse(decoder.decode(json)) as { error?: { code?: unknown; message?: unknown } };
    const error = end.error;
    if (error === undefined || typeof error.message !== "string") return undefined;
    if (!isRequestDecodeError(String(error.code), error.message)) return undefined;
    return encoder.encode(JSON.stringify({ ...end, error: { ...error, code: "invalid_argument" } }));
  } catch {
    return undefined;
  }
}

function decodeURIComponentSafe(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
