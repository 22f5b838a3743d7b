// createTroveClient: Connect clients for every Trove service over the Connect,
// gRPC or gRPC-Web protocol, with the bearer token added to each call.

import { type Client, createClient, type Interceptor, type Transport } from "@connectrpc/connect";
import {
  createConnectTransport,
  createGrpcTransport,
  createGrpcWebTransport,
  Http2SessionManager,
} from "@connectrpc/connect-node";
import { type Auth, bearerInterceptor, toTokenProvider } from "./auth.js";
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
  const http2 = protocol === "grpc" || (options.httpVersion ?? "2") === "2";
  const sessionManager = http2 ? new Http2SessionManager(baseUrl) : undefined;
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
