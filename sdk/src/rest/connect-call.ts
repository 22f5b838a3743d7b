// One call of the Connect protocol (connectrpc.com/docs/protocol) over the REST client's own fetch
// and token, for the batch methods push, pull and mirror use (ReadMany, WriteMany): the request
// posted, and a refusal of the whole call as the typed error a REST answer of the same refusal
// gives. Written without connect-es's client, whose loading costs the CLI 120-150 ms and 20 MB
// (read-many.ts).

import type { TokenProvider } from "../auth.js";
import { BatchUnsupportedError, ConnectionError, errorForStatus, type TroveError } from "../trove-errors.js";

/** A Connect error code as the HTTP status a REST answer of the same refusal has (errorForStatus). */
const STATUS_OF_CODE: Record<string, number> = {
  invalid_argument: 400,
  out_of_range: 400,
  unauthenticated: 401,
  permission_denied: 403,
  not_found: 404,
  already_exists: 409,
  failed_precondition: 412,
  resource_exhausted: 429,
  unimplemented: 501,
  unavailable: 503,
};

/** The typed error of a Connect code and message (an item's error, or the whole call's). */
export function errorOf(code: string, message: string): TroveError {
  return errorForStatus(STATUS_OF_CODE[code] ?? 500, message || code);
}

export function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

export interface ConnectCallOptions {
  /** A server stream (`application/connect+proto`, an enveloped request) or a unary call (`application/proto`). */
  streaming: boolean;
  /** What the method does, for the message when the server has none ("read many resources at once"). */
  what: string;
  doFetch: typeof fetch;
  tokenProvider: TokenProvider | undefined;
  signal?: AbortSignal | undefined;
}

/**
 * Posts `body` to a Connect method's `url` and resolves with the answer when it is a 200; else
 * rejects with its typed error: BatchUnsupportedError when the server has no such method (404,
 * 415, 501, or Connect's `unimplemented`), ConnectionError when it cannot be reached.
 */
export async function postConnect(url: string, body: Uint8Array, options: ConnectCallOptions): Promise<Response> {
  const { signal } = options;
  const headers: Record<string, string> = {
    "content-type": options.streaming ? "application/connect+proto" : "application/proto",
    "connect-protocol-version": "1",
  };
  if (options.tokenProvider) headers.authorization = `Bearer ${await options.tokenProvider.getToken(signal)}`;
  let res: Response;
  try {
    res = await options.doFetch(url, { method: "POST", headers, body, signal });
  } catch (err) {
    if (signal?.aborted) throw signal.reason ?? err;
    const cause = ((err as Error).cause ?? err) as Error;
    const origin = new URL(url).origin;
    throw new ConnectionError(0, `cannot reach ${origin}: ${cause.message ?? String(cause)}`, undefined, { cause });
  }
  if (res.status === 200) return res;
  const text = await res.text().catch(() => "");
  const json = parseJson(text) as { code?: string; message?: string } | undefined;
  // An earlier server (no such method: 404 from its fallback) or a proxy that passes only REST.
  if (res.status === 404 || res.status === 501 || res.status === 415 || json?.code === "unimplemented") {
    throw new BatchUnsupportedError(res.status, `the server does not ${options.what} (${res.status})`);
  }
  throw json?.code ? errorOf(json.code, json.message ?? "") : errorForStatus(res.status, text.trim() || res.statusText);
}
