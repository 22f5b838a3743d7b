// The one place where domain and platform errors become ConnectError codes, with the
// google.rpc error details a client can act on (docs/operations.md, "Structured errors").

import type { DescMessage, DescMethod } from "@bufbuild/protobuf";
import { Code, ConnectError, type ConnectRouter } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import {
  BadRequestSchema,
  PreconditionFailureSchema,
  QuotaFailureSchema,
} from "@trove/sdk/gen/google/rpc/error_details_pb.js";
import {
  AlreadyExistsError,
  BadRequestError,
  DeletedError,
  ForbiddenError,
  HistoryPurgedError,
  InsufficientStorageError,
  NotEmptyError,
  NotFoundError,
  PermissionDeniedError,
  PreconditionFailedError,
  ReadOnlyError,
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
/** Metadata of a refusal the client may try again (a fair share taken, the read-only switch): seconds to wait, REST's and Connect's `Retry-After`. */
export const RETRY_AFTER_KEY = "retry-after";

/**
 * Metadata key set on FailedPrecondition errors of a directory that is not empty (a delete with
 * require_empty): REST answers them 409 Conflict instead of 412, which means "If-Match failed".
 */
export const NOT_EMPTY_KEY = "trove-not-empty";
/** `google.rpc.PreconditionFailure.Violation.type` of a directory that is not empty. */
export const NOT_EMPTY_PRECONDITION = "NOT_EMPTY";

/**
 * Metadata key set on FailedPrecondition errors of a moment the store no longer keeps (its history
 * horizon, docs/history.md): REST answers them 410 Gone.
 */
export const HISTORY_PURGED_KEY = "trove-history-purged";
/** `google.rpc.PreconditionFailure.Violation.type` of a moment before the history horizon. */
export const HISTORY_PURGED_PRECONDITION = "HISTORY_PURGED";

/** `google.rpc.PreconditionFailure.Violation.type` of an If-Match that did not hold. */
export const ETAG_PRECONDITION = "ETAG";
/** `google.rpc.QuotaFailure.Violation.subject` of contents larger than `--max-resource-size`. */
export const MAX_RESOURCE_SIZE_QUOTA = "max-resource-size";
/** `google.rpc.QuotaFailure.Violation.subject` of a full disk (or database quota). */
export const STORAGE_QUOTA = "storage";

/** Platform error codes that mean the disk (or a quota, or the database's size cap) is full. */
const STORAGE_FULL_CODES = new Set(["ENOSPC", "EDQUOT", "SQLITE_FULL"]);

/** What the call that failed tells about an error: its method, and the resource its request names. */
export interface CallSubject {
  method?: DescMethod;
  store?: string;
  path?: string;
}

function insufficientStorage(message: string): ConnectError {
  return new ConnectError(message, Code.ResourceExhausted, { [INSUFFICIENT_STORAGE_KEY]: "1" }, [
    quotaFailure(STORAGE_QUOTA, message),
  ]);
}

function quotaFailure(subject: string, description: string) {
  return { desc: QuotaFailureSchema, value: { violations: [{ subject, description }] } };
}

/** The resource a precondition was about, as `{store}/{path}` (the store alone for its root). */
function resourceName(call: CallSubject | undefined): string {
  if (call?.store === undefined) return "";
  return call.path ? `${call.store}/${call.path}` : call.store;
}

function preconditionFailed(err: PreconditionFailedError, call: CallSubject | undefined): ConnectError {
  // The rule words the current tag into its reason; a resource that is not there has none.
  const tag = /current ETag "([^"]*)"/.exec(err.message)?.[1];
  const description = tag === undefined ? "the resource does not exist" : `current tag "${tag}"`;
  return new ConnectError(err.message, Code.FailedPrecondition, undefined, [
    {
      desc: PreconditionFailureSchema,
      value: { violations: [{ type: ETAG_PRECONDITION, subject: resourceName(call), description }] },
    },
  ]);
}

function badRequest(err: BadRequestError, call: CallSubject | undefined): ConnectError {
  const field = err.fieldReason?.field ?? namedField(err.message, call?.method?.input);
  const details =
    field === undefined
      ? []
      : [{ desc: BadRequestSchema, value: { fieldViolations: [{ field, description: err.message }] } }];
  return new ConnectError(err.message, Code.InvalidArgument, undefined, details);
}

/**
 * The proto field path (`path`, `header.content_type`, `key.report_id`) of the request field that
 * a reason names first: the cores name fields by their proto names (field-names.ts). Fields of
 * the request and of the messages it holds directly are considered; undefined when none is named.
 */
function namedField(message: string, input: DescMessage | undefined): string | undefined {
  if (input === undefined) return undefined;
  const paths = new Map<string, string>();
  for (const field of input.fields) {
    if (!paths.has(field.name)) paths.set(field.name, field.name);
    if (field.fieldKind !== "message") continue;
    for (const inner of field.message.fields) {
      if (!paths.has(inner.name)) paths.set(inner.name, `${field.name}.${inner.name}`);
    }
  }
  for (const word of message.match(/[A-Za-z_][A-Za-z0-9_]*/g) ?? []) {
    const path = paths.get(word);
    if (path !== undefined) return path;
  }
  return undefined;
}

/**
 * `err` as a ConnectError. `call`, when known, lets the error carry its google.rpc details in
 * full: the resource a failed precondition was about, the field of an invalid argument.
 */
export function toConnectError(err: unknown, call?: CallSubject): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof BadRequestError) return badRequest(err, call);
  if (err instanceof DeletedError) {
    return new ConnectError(err.message, Code.NotFound, { [DELETED_TAG_KEY]: err.tag });
  }
  if (err instanceof NotFoundError) return new ConnectError(err.message, Code.NotFound);
  if (err instanceof PreconditionFailedError) return preconditionFailed(err, call);
  if (err instanceof NotEmptyError) {
    return new ConnectError(err.message, Code.FailedPrecondition, { [NOT_EMPTY_KEY]: String(err.entries) }, [
      {
        desc: PreconditionFailureSchema,
        value: {
          violations: [{ type: NOT_EMPTY_PRECONDITION, subject: resourceName(call), description: err.message }],
        },
      },
    ]);
  }
  if (err instanceof HistoryPurgedError) {
    return new ConnectError(err.message, Code.FailedPrecondition, { [HISTORY_PURGED_KEY]: "true" }, [
      {
        desc: PreconditionFailureSchema,
        value: {
          violations: [{ type: HISTORY_PURGED_PRECONDITION, subject: resourceName(call), description: err.message }],
        },
      },
    ]);
  }
  if (err instanceof ForbiddenError) return new ConnectError(err.message, Code.AlreadyExists);
  if (err instanceof AlreadyExistsError) return new ConnectError(err.message, Code.AlreadyExists);
  if (err instanceof PermissionDeniedError) return new ConnectError(err.message, Code.PermissionDenied);
  if (err instanceof TooLargeError) {
    return new ConnectError(err.message, Code.ResourceExhausted, undefined, [
      quotaFailure(MAX_RESOURCE_SIZE_QUOTA, err.message),
    ]);
  }
  if (err instanceof ReadOnlyError) {
    return new ConnectError(err.message, Code.Unavailable, { [RETRY_AFTER_KEY]: String(err.retryAfter) });
  }
  if (err instanceof UnavailableError) return new ConnectError(err.message, Code.Unavailable);
  if (err instanceof InsufficientStorageError) return insufficientStorage(err.message);
  // Adapters translate these themselves; one that slips through still gets the same answer.
  if (err instanceof Error && STORAGE_FULL_CODES.has(String((err as NodeJS.ErrnoException).code))) {
    return insufficientStorage(new InsufficientStorageError().message);
  }
  return ConnectError.from(err, Code.Internal);
}

type AnyFn = (...args: never[]) => unknown;

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === "object" && value !== null && Symbol.asyncIterator in value;
}

/** The store and path a request message names (a write names them in its header message). */
function resourceOf(message: unknown): { store: string; path?: string } | undefined {
  const m = message as { store?: unknown; path?: unknown; part?: { case?: unknown; value?: unknown } } | undefined;
  if (typeof m?.store === "string") return { store: m.store, path: typeof m.path === "string" ? m.path : undefined };
  if (m?.part?.case === "header") return resourceOf(m.part.value);
  return undefined;
}

async function* observed<T>(source: AsyncIterable<T>, see: (message: T) => void): AsyncIterable<T> {
  for await (const message of source) {
    see(message);
    yield message;
  }
}

/**
 * Wraps every method of a service implementation so that what it throws is a ConnectError, with
 * the details its call allows (the method from the handler context, the resource from the request).
 */
export function withConnectErrors<T extends object>(impl: T): T {
  const out: Record<string, unknown> = {};
  for (const name of Object.getOwnPropertyNames(Object.getPrototypeOf(impl)).concat(Object.keys(impl))) {
    const fn = (impl as Record<string, unknown>)[name];
    if (name === "constructor" || typeof fn !== "function") continue;
    const bound = (fn as AnyFn).bind(impl) as (...args: unknown[]) => unknown;
    out[name] = (...args: unknown[]) => {
      const call: CallSubject = { method: (args[1] as { method?: DescMethod } | undefined)?.method };
      if (isAsyncIterable(args[0])) {
        args[0] = observed(args[0], (message) => {
          if (call.store === undefined) Object.assign(call, resourceOf(message));
        });
      } else {
        Object.assign(call, resourceOf(args[0]));
      }
      let result: unknown;
      try {
        result = bound(...args);
      } catch (err) {
        throw toConnectError(err, call);
      }
      if (result instanceof Promise) return result.catch((err) => Promise.reject(toConnectError(err, call)));
      if (isAsyncIterable(result)) return translateStream(result, call);
      return result;
    };
  }
  return out as T;
}

async function* translateStream<T>(source: AsyncIterable<T>, call: CallSubject): AsyncIterable<T> {
  try {
    yield* source;
  } catch (err) {
    throw toConnectError(err, call);
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
 * the gRPC trailers or the gRPC-Web trailer message. A Connect GET that connect-node refuses
 * with a bare status (405, 415) is given its reason. Nothing else is touched.
 */
export function withRequestDecodeErrors(routes: (router: ConnectRouter) => void): (router: ConnectRouter) => void {
  return (router) => {
    routes(router);
    const handlers = router.handlers as UniversalHandler[];
    for (let i = 0; i < handlers.length; i++) {
      const handler = handlers[i] as UniversalHandler;
      const relabelled = async (req: UniversalServerRequest) => {
        let res: UniversalServerResponse;
        try {
          res = await handler(req);
        } catch (err) {
          return undeliverableRequestError(req, err);
        }
        return req.method === "GET" ? withGetRefusalReason(handler.method, res) : relabelDecodeErrors(res);
      };
      handlers[i] = Object.assign(relabelled, handler);
    }
  };
}

/**
 * connect-node's gRPC and gRPC-Web handlers reject, leaving the call unanswered, when the error
 * they would send cannot be percent-encoded into grpc-message: a message with a lone surrogate.
 * Trove's own messages quote request fields, which protobuf-es refuses to decode with a lone
 * surrogate in them, so only connect's errors about the request it failed to decode get here:
 * V8's JSON.parse quotes the text at the error cut in UTF-16 units, and an astral character can be
 * cut in half (the fuzz test's seed 1352876297). The call is answered InvalidArgument in its
 * protocol; anything else is thrown on as before.
 */
function undeliverableRequestError(req: UniversalServerRequest, err: unknown): UniversalServerResponse {
  const type = req.header.get("content-type") ?? "";
  if (!(err instanceof URIError) || !type.startsWith("application/grpc")) throw err;
  const web = type.startsWith("application/grpc-web");
  const message = "the request message does not decode (its JSON or protobuf is malformed)";
  const status = { "grpc-status": String(Code.InvalidArgument), "grpc-message": encodeURIComponent(message) };
  const header = new Headers({ "content-type": type.split(";")[0]?.trim() ?? type });
  if (!web) return { status: 200, header, body: empty(), trailer: new Headers(status) };
  const text = encoder.encode(
    Object.entries(status)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join(""),
  );
  const envelope = new Uint8Array(5 + text.byteLength);
  envelope[0] = ENVELOPE_TRAILER;
  new DataView(envelope.buffer).setUint32(1, text.byteLength);
  envelope.set(text, 5);
  // (No grpc-web-text here: connect-node answers that content type 415 before any handler runs.)
  return { status: 200, header, body: single(envelope) };
}

async function* empty(): AsyncIterable<Uint8Array> {}

/**
 * connect-node answers a GET of a method with side effects 405, and a GET of a streaming method
 * (or with an unknown encoding) 415, both without a body. The status stays; the body says why, as a
 * Connect error with the code of the client's mistake: unimplemented for a method not served by GET
 * (as gRPC says of an operation that is not supported), invalid_argument for a missing encoding.
 * Never unknown, which a client cannot tell from a server fault.
 */
function withGetRefusalReason(method: DescMethod, res: UniversalServerResponse): UniversalServerResponse {
  if ((res.status !== 405 && res.status !== 415) || res.body !== undefined) return res;
  const procedure = `${method.parent.typeName}/${method.name}`;
  let message: string;
  let code = "unimplemented";
  if (res.status === 405) {
    message = `${procedure} has side effects: send it with POST (GET serves only the methods marked NO_SIDE_EFFECTS)`;
  } else if (method.methodKind !== "unary") {
    message = `${procedure} is a ${method.methodKind.replace("_", " ")} method: the Connect protocol serves GET only for unary methods; send it with POST as a Connect stream`;
  } else {
    message = "a Connect GET needs encoding=json or encoding=proto";
    code = "invalid_argument";
  }
  const body = encoder.encode(JSON.stringify({ code, message }));
  const header = new Headers(res.header);
  header.set("content-type", "application/json");
  header.set("content-length", String(body.byteLength));
  if (res.status === 405) header.set("allow", "POST");
  return { ...res, header, body: single(body) };
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
