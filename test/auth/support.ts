// An external authorization server (oauth2-mock-server on 127.0.0.1) and a
// Trove server that verifies its tokens, for the authentication suites.

import { type Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { OAuth2Server } from "oauth2-mock-server";
import { createJwtAuthenticator, type JwtAuthenticatorOptions } from "../../src/auth/verifier.js";
import { startServer, type TestServer } from "../support/server.js";

export const AUDIENCE = "trove";

/** Full access, as a store administrator. */
export const ADMIN = {
  scope: "stores:admin",
  trove_grants: [{ store: "*", ops: ["read", "write", "delete"] }],
};

export interface Issuer {
  server: OAuth2Server;
  url: string;
  /** A token with these claims (audience `trove` unless overridden), signed by the issuer's current key. */
  token(claims?: Record<string, unknown>, options?: { expiresIn?: number; kid?: string }): Promise<string>;
  stop(): Promise<void>;
}

export async function startIssuer(): Promise<Issuer> {
  const server = new OAuth2Server();
  await server.issuer.keys.generate("RS256");
  await server.start(0, "127.0.0.1");
  const url = server.issuer.url as string;
  return {
    server,
    url,
    token(claims = {}, options = {}) {
      return server.issuer.buildToken({
        kid: options.kid,
        expiresIn: options.expiresIn ?? 600,
        scopesOrTransform: (_header, payload) => {
          payload.sub = "alice";
          payload.aud = AUDIENCE;
          Object.assign(payload, claims);
        },
      });
    },
    stop: () => server.stop(),
  };
}

export interface AuthServer extends TestServer {
  /** fetch with `Authorization: Bearer {token}` when a token is given. */
  call(method: string, path: string, token: string | undefined, init?: RequestInit): Promise<Response>;
}

/** A Trove server (anonymous nowhere) verifying tokens of `issuer`. */
export async function startAuthServer(
  issuer: Issuer,
  options: Partial<JwtAuthenticatorOptions> & { pollWait?: number } = {},
): Promise<AuthServer> {
  const { pollWait, ...auth } = options;
  const server = await startServer({
    pollWait,
    auth: createJwtAuthenticator({ issuer: issuer.url, audience: AUDIENCE, jwksCooldown: 0, ...auth }),
  });
  return {
    ...server,
    call(method, path, token, init = {}) {
      const headers = new Headers(init.headers);
      if (token !== undefined) headers.set("Authorization", `Bearer ${token}`);
      return fetch(`${server.url}${path}`, { ...init, method, headers, redirect: "manual" });
    },
  };
}

export const DATA = "/resources/v2/data";

/** A Connect interceptor that sends `Authorization: Bearer {token}` (none for undefined). */
export const bearer =
  (token: string | undefined): Interceptor =>
  (next) =>
  (req) => {
    if (token !== undefined) req.header.set("Authorization", `Bearer ${token}`);
    return next(req);
  };

/** The code and message a call failed with (it must fail). */
export async function codeOf(call: () => Promise<unknown>): Promise<[Code, string]> {
  try {
    await call();
  } catch (err) {
    const ce = ConnectError.from(err);
    return [ce.code, ce.rawMessage];
  }
  throw new Error("the call succeeded");
}
