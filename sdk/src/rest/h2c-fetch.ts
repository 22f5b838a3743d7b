// fetch over one HTTP/2 connection without TLS (h2c with prior knowledge), many requests at once
// as streams of it: what `trove push`, `pull` and `mirror` send their thousands of requests on.
// Measured (docs/benchmarks.md, issue 31): a third to a quarter of fetch's client CPU per small
// GET. A server that does not speak h2c (an HTTP/1.1 proxy in front of Trove) is found out on
// the first request, which then goes, as every later one, through `fallback` (fetch, HTTP/1.1).
// Redirects are left to `fallback` too, which follows them.

import * as http2 from "node:http2";
import { finished } from "node:stream";

export interface H2cFetchOptions {
  /** What answers when h2c cannot: the server does not speak it, a redirect. Default: fetch. */
  fallback?: typeof fetch;
  /**
   * HTTP/2 receive windows in bytes, per stream and for the connection: how much the server may
   * send ahead of what the client has read. Default 1 MiB and 4 MiB: a 1 MiB file in one window,
   * and at most 4 MiB unread whatever the number of requests at once.
   */
  receiveWindow?: { stream?: number; connection?: number };
}

export type H2cFetch = typeof fetch & {
  /** Whether requests go over h2c: undefined until the first request found out. */
  readonly http2: boolean | undefined;
  /** Closes the connection; a later request opens a new one. */
  close(): void;
};

const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);
const REDIRECTS = new Set([301, 302, 303, 307, 308]);
/** Connection-specific headers HTTP/2 forbids (RFC 9113, 8.2.2). */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host"]);

/** Fails as fetch fails (a TypeError with the cause), so callers see one kind of network error. */
function fetchFailed(cause: unknown): TypeError {
  return new TypeError("fetch failed", { cause });
}

/** A fetch over one h2c connection to `origin` (requests elsewhere go through the fallback). */
export function createH2cFetch(origin: string, options: H2cFetchOptions = {}): H2cFetch {
  const base = new URL(origin);
  const fallback = options.fallback ?? fetch;
  const streamWindow = options.receiveWindow?.stream ?? 1024 * 1024;
  const connectionWindow = options.receiveWindow?.connection ?? 4 * 1024 * 1024;
  let speaks: boolean | undefined;
  let connecting: Promise<http2.ClientHttp2Session | undefined> | undefined;
  let active = 0;
  // A function, not the variable, where TypeScript would keep a narrowing across an await.
  const speaksH2c = () => speaks !== false;

  /** The connection, opened when there is none; undefined when the server does not speak h2c. */
  const session = (): Promise<http2.ClientHttp2Session | undefined> => {
    connecting ??= new Promise((resolve) => {
      const s = http2.connect(base.origin, { settings: { initialWindowSize: streamWindow } });
      const gone = () => {
        connecting = undefined;
        resolve(undefined);
      };
      s.once("remoteSettings", () => {
        speaks = true;
        s.off("close", gone);
        s.on("close", () => {
          connecting = undefined;
        });
        try {
          s.setLocalWindowSize(connectionWindow);
        } catch {
          // A session closing as it opens: its requests fail on their own terms.
        }
        if (active === 0) s.unref();
        resolve(s);
      });
      // Before the server's SETTINGS: it does not speak h2c (an HTTP/1.1 server answers the
      // preface with 400 and closes), unless it spoke it before (a restart: try again later).
      s.once("close", () => {
        if (speaks === undefined) speaks = false;
        gone();
      });
      s.on("error", () => {});
    });
    return connecting;
  };

  const h2cFetch = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    if (speaks === false || input instanceof Request) return fallback(input, init);
    // The client's URLs are its base URL's: the path is what follows the origin, no URL parsed.
    const text = typeof input === "string" ? input : input.href;
    const own = text.startsWith(base.origin) && text.charCodeAt(base.origin.length) === 47; /* "/" */
    const url = own ? undefined : new URL(text);
    if (url !== undefined && url.origin !== base.origin) return fallback(input, init);
    const signal = init.signal ?? undefined;
    signal?.throwIfAborted();
    const s = await session();
    if (!s) {
      if (!speaksH2c()) return fallback(input, init);
      throw fetchFailed(new Error(`cannot open an HTTP/2 connection to ${base.origin}`));
    }
    const method = (init.method ?? "GET").toUpperCase();
    const path = url === undefined ? text.slice(base.origin.length) : `${url.pathname}${url.search}`;
    const headers: http2.OutgoingHttpHeaders = { ":method": method, ":path": path };
    for (const [name, value] of headerPairs(init.headers)) if (!HOP_BY_HOP.has(name)) headers[name] = value;
    const body = init.body ?? null;
    const replayable = body === null || typeof body === "string" || body instanceof Uint8Array || body instanceof Blob;
    // A body of known length says so, as fetch's does: the server then knows a small upload from a large one.
    if (headers["content-length"] === undefined && (typeof body === "string" || body instanceof Uint8Array)) {
      headers["content-length"] = typeof body === "string" ? Buffer.byteLength(body) : body.byteLength;
    }
    active += 1;
    if (active === 1) s.ref();
    const done = () => {
      active -= 1;
      if (active === 0 && !s.destroyed) s.unref();
    };
    let stream: http2.ClientHttp2Stream;
    try {
      stream = s.request(headers, { endStream: body === null, ...(signal ? { signal } : {}) });
    } catch (err) {
      done();
      throw fetchFailed(err);
    }
    stream.once("close", done);
    const answered = new Promise<http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader>((resolve, reject) => {
      // Every stream closes, after its answer too: the errors (and their stacks) are made only
      // when there was no answer (they were 0.5 % of a pull's CPU, one pair per file).
      let settled = false;
      stream.once("response", (headers) => {
        settled = true;
        resolve(headers);
      });
      const fail = (err: () => Error) => {
        if (settled) return;
        settled = true;
        reject(signal?.aborted ? signal.reason : fetchFailed(err()));
      };
      stream.once("error", (err: Error) => fail(() => err));
      stream.once("close", () => fail(() => new Error("stream closed")));
    });
    if (body !== null) sendBody(stream, body);
    const answer = await answered;
    const status = Number(answer[":status"]);
    if (REDIRECTS.has(status) && replayable) {
      stream.close();
      return fallback(input, init);
    }
    const responseHeaders = new Headers();
    for (const [name, value] of Object.entries(answer)) {
      if (name.startsWith(":") || value === undefined) continue;
      for (const v of Array.isArray(value) ? value : [value]) responseHeaders.append(name, String(v));
    }
    const empty = method === "HEAD" || NULL_BODY_STATUSES.has(status);
    if (empty) stream.resume();
    return new Response(empty ? null : webStreamOf(stream), {
      status,
      headers: responseHeaders,
    });
  };
  // defineProperties, not Object.assign, which would copy the getter's value of now.
  return Object.defineProperties(h2cFetch as H2cFetch, {
    http2: { get: () => speaks },
    close: {
      value() {
        connecting?.then((s) => s?.close());
        connecting = undefined;
      },
    },
  });
}

/**
 * A request's headers as lower-case name and value pairs: a record (what TroveRestClient passes)
 * read as it is, anything else through Headers, which validates and combines.
 */
function headerPairs(init: RequestInit["headers"]): Iterable<[string, string]> {
  if (init === undefined) return [];
  if (init instanceof Headers || Array.isArray(init)) return new Headers(init);
  const pairs: [string, string][] = [];
  for (const name in init) {
    const value = (init as Record<string, string>)[name];
    if (value !== undefined) pairs.push([name.toLowerCase(), String(value)]);
  }
  return pairs;
}

/**
 * An answer's body as a web stream: each chunk handed on as it comes, the HTTP/2 stream paused
 * while the reader has a window's worth unread (a quarter of Readable.toWeb's CPU for a small
 * answer, measured: issue 31, session 16). Cancelling the reader closes the stream.
 */
function webStreamOf(stream: http2.ClientHttp2Stream): ReadableStream<Uint8Array> {
  let settled = false;
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        stream.on("data", (chunk: Buffer) => {
          if (settled) return;
          controller.enqueue(chunk);
          if ((controller.desiredSize ?? 1) <= 0) stream.pause();
        });
        // As Readable.toWeb: the end, an error, or a close before the end (RST_STREAM, the
        // connection gone: a premature close) settle the body, whichever comes first.
        finished(stream, { writable: false }, (err) => {
          if (settled) return;
          settled = true;
          if (err) controller.error(err);
          else controller.close();
        });
      },
      pull() {
        stream.resume();
      },
      cancel() {
        settled = true;
        stream.close(http2.constants.NGHTTP2_CANCEL);
      },
    },
    // A window of unread bytes (the stream's receive window) before the stream is paused.
    { highWaterMark: 1024 * 1024, size: (chunk) => chunk.byteLength },
  );
}

/** Writes a request body to its stream, waiting for the stream to drain; an error resets it. */
function sendBody(stream: http2.ClientHttp2Stream, body: NonNullable<RequestInit["body"]>): void {
  (async () => {
    if (typeof body === "string" || body instanceof Uint8Array) {
      stream.end(body);
      return;
    }
    if (body instanceof Blob) {
      stream.end(new Uint8Array(await body.arrayBuffer()));
      return;
    }
    if (!(body instanceof ReadableStream)) throw new TypeError("unsupported body for an h2c request");
    for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
      if (stream.destroyed) return;
      if (!stream.write(chunk)) {
        await new Promise<void>((resolve) => {
          const go = () => {
            stream.off("drain", go);
            stream.off("close", go);
            resolve();
          };
          stream.on("drain", go);
          stream.on("close", go);
        });
      }
    }
    stream.end();
  })().catch((err) => stream.destroy(err));
}
