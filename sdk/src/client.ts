// createTroveClient: Connect clients for every Trove service over the Connect,
// gRPC or gRPC-Web protocol, with the bearer token added to each call.

import type * as http2 from "node:http2";
import { type Client, Code, ConnectError, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
  Http2SessionManager,
} from "@connectrpc/connect-node";
import { type Auth, type TokenProvider, toTokenProvider } from "./auth.js";
import { SERVICES } from "./services.js";

export type Protocol = "connect" | "grpc" | "grpc-web";

export interface TroveClientOptions {
  /** The server, e.g. http://127.0.0.1:13242 (every protocol is served on the same port). */
  baseUrl: string;
  /** A bearer token, a TokenProvider, or nothing (an anonymous server). */
  auth?: Auth;
  /** Default "connect". gRPC always uses HTTP/2 (h2c without TLS). */
  protocol?: Protocol;
  /** HTTP version for Connect and gRPC-Web: "2" (default, one h2c connection) or "1.1". */
  httpVersion?: "1.1" | "2";
  /** Binary protobuf (default) or JSON for Connect and gRPC-Web. */
  useBinaryFormat?: boolean;
  /** More interceptors, run after the one that adds the token. */
  interceptors?: Interceptor[];
  /**
   * HTTP/2 receive windows in bytes: how much the server may send ahead of what this client has
   * read, per stream and for the whole connection. Default 8 MiB and 16 MiB (HTTP2_RECEIVE_WINDOW).
   */
  receiveWindow?: { stream?: number; connection?: number };
}

/**
 * The HTTP/2 receive windows the client announces (issue 14, docs/benchmarks.md). The protocol's
 * 65,535 bytes made a large Read wait for a WINDOW_UPDATE trip through both event loops every
 * 64 KiB (20 MiB: about twice the time of a REST GET). They are also what the client may hold
 * unread: at most 16 MiB per connection whatever the number of calls.
 */
export const HTTP2_RECEIVE_WINDOW = { stream: 8 * 1024 * 1024, connection: 16 * 1024 * 1024 } as const;

/** The largest window HTTP/2 allows (RFC 9113, 6.9.1); 65,535 is the protocol's initial one. */
const MAX_WINDOW = 2 ** 31 - 1;

function windowSize(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 65_535 || value > MAX_WINDOW) {
    throw new RangeError(`receiveWindow.${name} must be an integer from 65535 to ${MAX_WINDOW}, not ${value}`);
  }
  return value;
}

/**
 * connect-node's session manager with larger receive windows. The stream window is a SETTINGS
 * entry; the connection's window has none and node can raise it only on a connected session,
 * so it is raised when the first stream of each session opens (a new session after a GOAWAY too).
 */
class WindowedSessionManager extends Http2SessionManager {
  private readonly widened = new WeakSet<http2.Http2Session>();

  constructor(
    url: string,
    streamWindow: number,
    private readonly connectionWindow: number,
  ) {
    super(url, undefined, { settings: { initialWindowSize: streamWindow } });
  }

  override async request(...args: Parameters<Http2SessionManager["request"]>): Promise<http2.ClientHttp2Stream> {
    const stream = await super.request(...args);
    const session = stream.session;
    if (session && !session.destroyed && !this.widened.has(session)) {
      this.widened.add(session);
      try {
        session.setLocalWindowSize(this.connectionWindow);
      } catch {
        // A session going away as the call starts: the call fails or succeeds on its own terms,
        // and its successor gets the window when its first stream opens.
      }
    }
    return stream;
  }
}

export type TroveServices = { [K in keyof typeof SERVICES]: Client<(typeof SERVICES)[K]> };

export type TroveClient = TroveServices & {
  readonly transport: Transport;
  readonly protocol: Protocol;
  /** Closes the HTTP/2 connection (open streams end). The client reconnects if used again. */
  close(): void;
};

export function createTroveClient(options: TroveClientOptions): TroveClient {
  const protocol = options.protocol ?? "connect";
  const provider = toTokenProvider(options.auth);
  const interceptors = [...(provider ? [bearerInterceptor(provider)] : []), ...(options.interceptors ?? [])];
  const baseUrl = options.baseUrl.replace(/\/+$/, "");
  const overHttp2 = protocol === "grpc" || (options.httpVersion ?? "2") === "2";
  const streamWindow = windowSize("stream", options.receiveWindow?.stream, HTTP2_RECEIVE_WINDOW.stream);
  const connectionWindow = windowSize("connection", options.receiveWindow?.connection, HTTP2_RECEIVE_WINDOW.connection);
  const sessionManager = overHttp2 ? new WindowedSessionManager(baseUrl, streamWindow, connectionWindow) : undefined;
  let transport: Transport;
  if (protocol === "grpc") {
    transport = createGrpcTransport({ baseUrl, interceptors, sessionManager });
  } else {
    const common = { baseUrl, interceptors, useBinaryFormat: options.useBinaryFormat ?? true };
    const version = sessionManager ? { httpVersion: "2" as const, sessionManager } : { httpVersion: "1.1" as const };
    transport =
      protocol === "grpc-web"
        ? createGrpcWebTransport({ ...common, ...version })
        : createConnectTransport({ ...common, ...version });
  }
  const clients = Object.fromEntries(
    Object.entries(SERVICES).map(([name, service]) => [name, createClient(service, transport)]),
  ) as TroveServices;
  return {
    ...clients,
    transport,
    protocol,
    close() {
      sessionManager?.abort();
    },
  };
}

/**
 * A Connect interceptor adding `Authorization: Bearer {token}`. A unary call refused as
 * Unauthenticated is retried once with a new token; streams are not retried (their request
 * messages cannot be replayed).
 */
export function bearerInterceptor(provider: TokenProvider): Interceptor {
  return (next) => async (req) => {
    const token = await provider.getToken(req.signal);
    req.header.set("Authorization", `Bearer ${token}`);
    try {
      return await next(req);
    } catch (err) {
      if (req.stream || !(err instanceof ConnectError) || err.code !== Code.Unauthenticated) throw err;
      provider.invalidate(token);
      const fresh = await provider.getToken(req.signal);
      if (fresh === token) throw err;
      req.header.set("Authorization", `Bearer ${fresh}`);
      return await next(req);
    }
  };
}
