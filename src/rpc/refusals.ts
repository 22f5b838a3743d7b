// Answers an RPC call the server refuses before Connect reads it (no credentials, no such
// method, no room), in the caller's protocol: Connect unary and streaming, gRPC, gRPC-Web.
// The request body is never read: the answer goes out at once and the connection (HTTP/1.1)
// or the stream (HTTP/2) is closed behind it, so a client cannot make the server take its body.

import type { IncomingMessage, ServerResponse } from "node:http";
import * as http2 from "node:http2";
import type { Socket } from "node:net";
import type { ConnectError } from "@connectrpc/connect";
import { codeToHttpStatus, endStreamFlag, errorToJson } from "@connectrpc/connect/protocol-connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import type { RestRequest, RestResponse } from "../rest/http.js";

export type RpcProtocol = "connect" | "connect-stream" | "grpc" | "grpc-web";

/** `/package.Service/Method`, the path of every RPC (gRPC's rule for a procedure's path). */
const PROCEDURE_PATH = /^\/[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)+\/[A-Za-z_][\w]*(\?|$)/;

/**
 * The RPC protocol of a request, or undefined for one that is not an RPC call (REST and others).
 * gRPC, gRPC-Web and Connect streaming say so by content type; a Connect unary call is a POST
 * of JSON or protobuf (or a GET with `connect=v1`) to a procedure's path.
 */
export function rpcProtocol(req: RestRequest): RpcProtocol | undefined {
  const type = (req.headers["content-type"] ?? "").toLowerCase();
  if (type.startsWith("application/grpc-web")) return "grpc-web";
  if (type.startsWith("application/grpc")) return "grpc";
  if (type.startsWith("application/connect+")) return "connect-stream";
  const url = req.url ?? "";
  if (!PROCEDURE_PATH.test(url)) return undefined;
  if (req.method === "POST" && /^application\/(json|proto)\s*(;|$)/.test(type)) return "connect";
  if (req.method === "GET" && /[?&]connect=v1(&|$)/.test(url)) return "connect";
  return undefined;
}

/** Stop taking a request body that will not be read: close the connection or the stream after the answer. */
export function dropUnreadBody(req: RestRequest, res: RestResponse): void {
  if (req.readableEnded) return;
  const stream = (res as http2.Http2ServerResponse).stream as http2.ServerHttp2Stream | undefined;
  if (stream === undefined) {
    (res as ServerResponse).shouldKeepAlive = false;
    lingerOnClose((req as IncomingMessage).socket);
    return;
  }
  // RST_STREAM(NO_ERROR) after the answer: "stop sending" (RFC 9113, 8.1); a small body is let finish first.
  if (!takeSmallBody(req, stream)) res.once("finish", () => resetStream(stream));
}

/** How long, and how many bytes at most, a refused HTTP/2 request's body is still taken (and discarded). */
export const REFUSAL_BODY_MS = 1000;
export const REFUSAL_BODY_BYTES = 64 * 1024;

/** Requests whose small body is being taken and discarded (their streams end by themselves). */
const takingBody = new WeakSet<object>();

function resetStream(stream: http2.ServerHttp2Stream): void {
  if (!stream.closed) stream.close(http2.constants.NGHTTP2_NO_ERROR);
}

/**
 * An HTTP/2 stream answered before its request body was read ends with RST_STREAM(NO_ERROR): Node
 * sends it by itself once the answer is out if nothing read the body. Legal, but a client still
 * sending when the reset comes may drop the whole answer (curl 7.88 did, in 13 % of
 * unauthenticated calls, issue 29). So a small body (a declared length up to REFUSAL_BODY_BYTES,
 * or none declared) is taken and discarded, from before the answer is written, for at most
 * REFUSAL_BODY_MS and REFUSAL_BODY_BYTES: the stream then ends normally, or is reset at the bound.
 * Returns false for a larger body, which is not waited for.
 */
function takeSmallBody(req: RestRequest, stream: http2.ServerHttp2Stream): boolean {
  if (takingBody.has(req)) return true;
  const declared = req.headers["content-length"];
  if (declared !== undefined && Number(declared) > REFUSAL_BODY_BYTES) return false;
  takingBody.add(req);
  let taken = 0;
  const timer = setTimeout(() => resetStream(stream), REFUSAL_BODY_MS);
  timer.unref();
  stream.once("close", () => clearTimeout(timer));
  // On the stream itself, synchronously: a stream something reads is not reset by Node at the answer's end.
  stream.on("data", (chunk: Buffer) => {
    taken += chunk.byteLength;
    if (taken > REFUSAL_BODY_BYTES) resetStream(stream);
  });
  return true;
}

/** How long, and how many bytes at most, a closing HTTP/1.1 connection still reads and discards. */
const LINGER_MS = 1000;
const LINGER_BYTES = 16 * 1024 * 1024;

/**
 * Closing a socket with unread data in it sends a TCP reset, and a reset makes the client's
 * kernel drop the answer it has not read yet: the client would see "connection reset" instead of
 * the 401. So, like Apache's and nginx's lingering close, send FIN after the answer and go on
 * reading (and discarding, so memory does not grow) for a short, bounded while.
 */
function lingerOnClose(socket: Socket): void {
  socket.destroySoon = () => {
    socket.end();
    let taken = 0;
    const timer = setTimeout(() => socket.destroy(), LINGER_MS);
    timer.unref();
    socket.once("close", () => clearTimeout(timer));
    socket.once("end", () => socket.destroy());
    socket.on("data", (chunk: Buffer) => {
      taken += chunk.byteLength;
      if (taken > LINGER_BYTES) socket.destroy();
    });
    socket.resume();
  };
}

/** Writes `error` as the whole answer of an RPC call in `protocol`, without reading the request body. */
export function sendRpcError(
  req: RestRequest,
  res: RestResponse,
  protocol: RpcProtocol,
  error: ConnectError,
  headers: Record<string, string> = {},
  /** The HTTP status of a Connect unary answer, when not the code's own (an unknown procedure is a 404). */
  connectStatus?: number,
): void {
  dropUnreadBody(req, res);
  const r = res as ServerResponse;
  for (const [name, value] of Object.entries(headers)) r.setHeader(name, value);
  // The error's metadata as headers, in every protocol (Retry-After of a caller over its share, the challenge of a 401).
  error.metadata.forEach((value, key) => {
    r.setHeader(key, value);
  });
  const type = (req.headers["content-type"] ?? "").split(";")[0]?.trim() ?? "";
  if (protocol === "connect") {
    const body = Buffer.from(JSON.stringify(errorToJson(error, undefined)));
    r.statusCode = connectStatus ?? codeToHttpStatus(error.code);
    r.setHeader("Content-Type", "application/json");
    r.setHeader("Content-Length", body.byteLength);
    r.end(body);
    return;
  }
  if (protocol === "connect-stream") {
    const endStream = { error: errorToJson(error, undefined), metadata: metadataJson(error) };
    const json = Buffer.from(JSON.stringify(endStream));
    const envelope = Buffer.alloc(5 + json.byteLength);
    envelope.writeUInt8(endStreamFlag, 0);
    envelope.writeUInt32BE(json.byteLength, 1);
    json.copy(envelope, 5);
    r.statusCode = 200;
    r.setHeader("Content-Type", type || "application/connect+proto");
    r.setHeader("Content-Length", envelope.byteLength);
    r.end(envelope);
    return;
  }
  // gRPC and gRPC-Web: "trailers-only", the status in the response headers and no body.
  const status = new Headers();
  setTrailerStatus(status, error);
  const contentType = type || (protocol === "grpc" ? "application/grpc" : "application/grpc-web+proto");
  const stream = (res as http2.Http2ServerResponse).stream as http2.ServerHttp2Stream | undefined;
  if (stream !== undefined && protocol === "grpc") {
    // What was set on the response so far (the headers above, CORS), then the status.
    const h2headers: http2.OutgoingHttpHeaders = { ...r.getHeaders(), ":status": 200, "content-type": contentType };
    status.forEach((value, key) => {
      h2headers[key] = value;
    });
    // One HEADERS frame with END_STREAM, as gRPC's trailers-only response is defined.
    stream.respond(h2headers, { endStream: true });
    if (!req.readableEnded && !takingBody.has(req)) resetStream(stream);
    return;
  }
  r.statusCode = 200;
  r.setHeader("Content-Type", contentType);
  status.forEach((value, key) => {
    r.setHeader(key, value);
  });
  r.setHeader("Content-Length", 0);
  r.end();
}

function metadataJson(error: ConnectError): Record<string, string[]> {
  const metadata: Record<string, string[]> = {};
  error.metadata.forEach((value, key) => {
    metadata[key] = [value];
  });
  return metadata;
}

/** The reason of an UNIMPLEMENTED answer. */
export function unimplementedReason(req: RestRequest): string {
  const path = (req.url ?? "").split("?")[0] ?? "";
  return `${path.slice(1)} is not implemented`;
}
