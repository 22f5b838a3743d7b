// Bearer tokens for every request: a static token, or an OAuth 2.0 client-credentials
// token provider that reuses its token until shortly before it expires and fetches a
// new one once, however many requests wait for it (single flight).

import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { ConnectionError, TroveError } from "./trove-errors.js";

/** Something that gives the bearer token to send. */
export interface TokenProvider {
  /** The current token, fetched when there is none or it is about to expire. */
  getToken(signal?: AbortSignal): Promise<string>;
  /**
   * Tells the provider that the server refused `token` (401): the next getToken fetches a new
   * one, unless another caller has already replaced it.
   */
  invalidate(token: string): void;
}

/** What a client accepts as `auth`: a token, a provider, or nothing (an anonymous server). */
export type Auth = string | TokenProvider | undefined;

export function staticToken(token: string): TokenProvider {
  return {
    getToken: () => Promise.resolve(token),
    invalidate: () => {},
  };
}

export function toTokenProvider(auth: Auth): TokenProvider | undefined {
  if (auth === undefined) return undefined;
  return typeof auth === "string" ? staticToken(auth) : auth;
}

export interface ClientCredentialsOptions {
  /** The token endpoint, e.g. https://login.example.com/oauth2/token. Or give `issuer`. */
  tokenUrl?: string;
  /** An OpenID issuer whose discovery document names the token endpoint. */
  issuer?: string;
  clientId: string;
  clientSecret: string;
  /** Space-separated scopes to ask for. */
  scope?: string;
  /** Audience (resource) to ask for, for issuers that need one (Auth0, Okta, ...). */
  audience?: string;
  /** How the client authenticates: HTTP Basic (default, RFC 6749 2.3.1) or form fields. */
  authMethod?: "basic" | "post";
  /** Seconds before `expires_in` runs out at which the token is renewed (default 30). */
  refreshBeforeSeconds?: number;
  /** Clock, for tests (milliseconds). */
  now?: () => number;
  fetch?: typeof fetch;
}

interface CachedToken {
  token: string;
  /** When to stop using it (ms), already shortened by refreshBeforeSeconds. */
  renewAt: number;
}

/** RFC 6749 4.4: a client-credentials token provider with caching and single flight. */
export function clientCredentials(options: ClientCredentialsOptions): TokenProvider {
  if (!options.tokenUrl && !options.issuer) throw new TypeError("clientCredentials needs tokenUrl or issuer");
  const now = options.now ?? Date.now;
  const doFetch = options.fetch ?? fetch;
  const skew = (options.refreshBeforeSeconds ?? 30) * 1000;
  let cached: CachedToken | undefined;
  let pending: Promise<CachedToken> | undefined;
  let tokenUrl = options.tokenUrl;

  async function discover(): Promise<string> {
    if (tokenUrl) return tokenUrl;
    const url = `${(options.issuer as string).replace(/\/+$/, "")}/.well-known/openid-configuration`;
    const res = await request(doFetch, url, { method: "GET" });
    const doc = (await res.json().catch(() => ({}))) as { token_endpoint?: unknown };
    if (res.status !== 200 || typeof doc.token_endpoint !== "string") {
      throw new TroveError(res.status, "the issuer's discovery document names no token_endpoint", {
        method: "GET",
        url,
      });
    }
    tokenUrl = doc.token_endpoint;
    return tokenUrl;
  }

  async function fetchToken(): Promise<CachedToken> {
    const url = await discover();
    const form = new URLSearchParams({ grant_type: "client_credentials" });
    if (options.scope) form.set("scope", options.scope);
    if (options.audience) form.set("audience", options.audience);
    const headers: Record<string, string> = {
      "Content-Type": "application/x-www-form-urlencoded",
      Accept: "application/json",
    };
    if (options.authMethod === "post") {
      form.set("client_id", options.clientId);
      form.set("client_secret", options.clientSecret);
    } else {
      // RFC 6749 2.3.1: both parts form-urlencoded before base64.
      const pair = `${formEncode(options.clientId)}:${formEncode(options.clientSecret)}`;
      headers.Authorization = `Basic ${Buffer.from(pair).toString("base64")}`;
    }
    const started = now();
    const res = await request(doFetch, url, { method: "POST", headers, body: form.toString() });
    const body = (await res.json().catch(() => ({}))) as {
      access_token?: unknown;
      expires_in?: unknown;
      error?: unknown;
      error_description?: unknown;
    };
    if (res.status !== 200 || typeof body.access_token !== "string") {
      const what = [body.error, body.error_description].filter((x) => typeof x === "string").join(": ");
      throw new TroveError(res.status, `the token endpoint refused: ${what || `status ${res.status}`}`, {
        method: "POST",
        url,
      });
    }
    // Without expires_in, reuse the token for a minute; the server's 401 renews it anyway.
    const lifetime = typeof body.expires_in === "number" && body.expires_in > 0 ? body.expires_in * 1000 : 60_000;
    return { token: body.access_token, renewAt: started + Math.max(lifetime - skew, lifetime / 2) };
  }

  return {
    getToken() {
      if (cached && now() < cached.renewAt) return Promise.resolve(cached.token);
      if (!pending) {
        pending = fetchToken().then(
          (t) => {
            cached = t;
            pending = undefined;
            return t;
          },
          (err) => {
            pending = undefined;
            throw err;
          },
        );
      }
      return pending.then((t) => t.token);
    },
    invalidate(token) {
      if (cached?.token === token) cached = undefined;
    },
  };
}

function formEncode(s: string): string {
  return encodeURIComponent(s).replace(/%20/g, "+");
}

async function request(doFetch: typeof fetch, url: string, init: RequestInit): Promise<Response> {
  try {
    return await doFetch(url, { ...init, signal: AbortSignal.timeout(30_000) });
  } catch (err) {
    const cause = (err as Error).cause ?? err;
    throw new ConnectionError(0, `cannot reach ${url}: ${(cause as Error).message ?? String(cause)}`, undefined, {
      cause,
    });
  }
}

/** Name of the file in a server's data directory holding its development issuer's credentials. */
export const DEV_ISSUER_FILE = "dev-issuer.json";

/**
 * Client credentials of the development issuer that `trove serve` runs without --issuer, read
 * from its data directory; tokens come from `{baseUrl}/auth/token`.
 */
export async function devIssuer(options: {
  baseUrl: string;
  dataDir: string;
  now?: () => number;
  fetch?: typeof fetch;
}): Promise<TokenProvider> {
  const file = join(options.dataDir, DEV_ISSUER_FILE);
  const doc = JSON.parse(await readFile(file, "utf8")) as { client_id?: unknown; client_secret?: unknown };
  if (typeof doc.client_id !== "string" || typeof doc.client_secret !== "string") {
    throw new Error(`${file} holds no client_id and client_secret`);
  }
  return clientCredentials({
    tokenUrl: `${options.baseUrl.replace(/\/+$/, "")}/auth/token`,
    clientId: doc.client_id,
    clientSecret: doc.client_secret,
    now: options.now,
    fetch: options.fetch,
  });
}
