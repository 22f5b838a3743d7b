// Bearer token verification: a JWT signed by the configured issuer (keys from
// its JWKS, found through OpenID discovery), for this audience, within its
// validity. Verified tokens are cached by their text (long ones by its SHA-256) until they expire.

import * as crypto from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { createRemoteJWKSet, errors, type JWTVerifyGetKey, jwtVerify } from "jose";
import type { Caller } from "./caller.js";
import { ClaimError, callerFromClaims } from "./claims.js";

/** Turns the Authorization header of a request into its caller. */
export interface Authenticator {
  /**
   * The caller that an `Authorization` header value stands for. Throws (or rejects with) a
   * ConnectError: Unauthenticated for missing or invalid credentials, Unavailable when the
   * issuer's keys cannot be fetched. Answers synchronously for a token seen before.
   * `connection` (the request's socket or HTTP/2 session) lets the token a keep-alive client sent
   * on it last be recognised by one comparison (still until it expires).
   */
  authenticate(authorization: string | undefined, connection?: object): Caller | Promise<Caller>;
  /**
   * Calls `observer` for every token answered from the cache of verified tokens ("cached") and
   * after every verification, with its result (metrics); returns the function that stops it.
   */
  observe?(observer: TokenObserver): () => void;
}

/**
 * A token answered from the cache, or the result of a verification: valid, invalid (the client's
 * token was refused), unavailable (the issuer's keys could not be fetched), error (a server fault).
 */
export type TokenCheck = "cached" | "valid" | "invalid" | "unavailable" | "error";
export type TokenObserver = (check: TokenCheck) => void;

/** ConnectError metadata key holding the `WWW-Authenticate` challenge of a refusal (RFC 6750). */
export const CHALLENGE_KEY = "www-authenticate";
export const REALM = "trove";

/** Signature algorithms accepted: asymmetric only, so a JWKS can never hold a shared secret that signs. */
export const ALGORITHMS = [
  "RS256",
  "RS384",
  "RS512",
  "PS256",
  "PS384",
  "PS512",
  "ES256",
  "ES384",
  "ES512",
  "EdDSA",
  "Ed25519",
];

export interface JwtAuthenticatorOptions {
  /** Expected `iss`: a string, or a function for an issuer whose address is known only once listening. */
  issuer: string | (() => string);
  /** Expected `aud` (one of the token's audiences). */
  audience: string;
  /** Where the keys come from; by default the JWKS named by `{issuer}/.well-known/openid-configuration`. */
  keys?: JWTVerifyGetKey;
  /** Allowed clock skew for `exp` and `nbf`, in seconds (default 30). */
  clockTolerance?: number;
  /** Most verified tokens remembered (default 10,000). */
  cacheSize?: number;
  /** Least time between two JWKS fetches for an unknown key id, in milliseconds (default 30 s). */
  jwksCooldown?: number;
  /** Timeout of a discovery or JWKS request, in milliseconds (default 5 s). */
  fetchTimeout?: number;
  now?: () => number;
}

const BEARER = /^Bearer +([A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+) *$/i;

/** SHA-256 in base64: the one-shot `crypto.hash` (Node 20.12+) is twice as fast as a Hash object. */
const sha256: (text: string) => string =
  typeof (crypto as { hash?: unknown }).hash === "function"
    ? (text) => (crypto as unknown as { hash(a: string, t: string, e: string): string }).hash("sha256", text, "base64")
    : (text) => crypto.createHash("sha256").update(text).digest("base64");

/**
 * What the cache keeps of a token to recognise it (issue 32): its text up to this many characters,
 * its SHA-256 beyond (which bounds the cache's memory: at most 10,000 texts of 2 KiB; a
 * development-issuer token is about 700 characters). A SHA-256 of every request's token was 1.5 %
 * of a 4 KiB GET's CPU.
 */
const RAW_TOKEN_MAX = 2048;

/**
 * A token as the cache compares it: its text, or a line break and its SHA-256 when long. No header
 * value holds a line break (Node refuses them), so no text sent can be taken for a hash.
 */
function fingerprint(token: string): string {
  return token.length <= RAW_TOKEN_MAX ? token : `\n${sha256(token)}`;
}

/**
 * The cache's key of a token: its last characters, those of its signature. A Map lookup by the
 * whole text hashed and compared about 700 characters three times a request (2.2 % of a GET); a
 * hit is then confirmed by comparing the whole fingerprint once. Two tokens with the same end take
 * each other's place: each is verified again, never mistaken for the other.
 */
const KEY_CHARS = 32;

function cacheKey(token: string): string {
  return token.length <= KEY_CHARS ? token : token.slice(-KEY_CHARS);
}

const DISCOVERY_RETRY = 5_000;

/**
 * Text that may stand in a quoted header parameter: RFC 6750 allows only printable ASCII
 * without `"` and `\\` in error_description, and a header value outside Latin-1 cannot be sent
 * at all. The reason quotes the token's claims, so anything else becomes `?`.
 */
export function headerSafe(text: string): string {
  return text.replace(/["\\]/g, "'").replace(/[^\x20-\x7e]/g, "?");
}

/** A refusal: 401 on REST, Unauthenticated on gRPC, with the RFC 6750 challenge. */
export function unauthenticated(reason: string, tokenGiven: boolean): ConnectError {
  const challenge = tokenGiven
    ? `Bearer realm="${REALM}", error="invalid_token", error_description="${headerSafe(reason)}"`
    : `Bearer realm="${REALM}"`;
  return new ConnectError(reason, Code.Unauthenticated, { [CHALLENGE_KEY]: challenge });
}

/** The bearer token of an Authorization header value; throws Unauthenticated when there is none. */
export function bearerToken(authorization: string | undefined): string {
  if (authorization === undefined || authorization === "") {
    throw unauthenticated("authentication required: send Authorization: Bearer <token>", false);
  }
  const m = BEARER.exec(authorization);
  if (m) return m[1] as string;
  if (!/^Bearer(\s|$)/i.test(authorization)) {
    throw unauthenticated("the Authorization header must use the Bearer scheme", false);
  }
  throw unauthenticated("malformed bearer token: expected a JWT", true);
}

/** Why jose refused a token, in words a client can act on (never the token itself). */
function reasonOf(err: unknown, audience: string): ConnectError {
  if (err instanceof ConnectError) return err;
  if (err instanceof ClaimError) return unauthenticated(`token claims: ${err.message}`, true);
  if (err instanceof KeySourceError) {
    return new ConnectError(`cannot fetch the issuer's signing keys: ${err.message}`, Code.Unavailable);
  }
  if (err instanceof errors.JWTExpired) return unauthenticated("token expired", true);
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === "nbf") return unauthenticated("token not yet valid (nbf)", true);
    if (err.claim === "aud") return unauthenticated(`token audience is not ${audience}`, true);
    if (err.claim === "iss") return unauthenticated("token issuer is not the configured issuer", true);
    if (err.reason === "missing") return unauthenticated(`token has no ${err.claim} claim`, true);
    return unauthenticated(`token claim ${err.claim} is invalid`, true);
  }
  if (err instanceof errors.JWSSignatureVerificationFailed) return unauthenticated("token signature is invalid", true);
  if (err instanceof errors.JWKSNoMatchingKey) {
    return unauthenticated("token signed by a key the issuer does not publish", true);
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return unauthenticated("token signature algorithm not allowed", true);
  if (err instanceof errors.JOSEError) return unauthenticated("malformed token", true);
  return ConnectError.from(err, Code.Internal);
}

/** The issuer's keys could not be fetched: the token may be fine, the server cannot tell. */
class KeySourceError extends Error {
  override name = "KeySourceError";
}

interface Cached {
  /** The token's fingerprint: a key is only the end of a token. */
  token: string;
  caller: Caller;
  /** Milliseconds since the epoch after which the token must be verified again. */
  until: number;
}

/** The last token a connection sent that was answered from the cache: the header as sent, and its entry. */
interface Remembered {
  authorization: string;
  cached: Cached;
}

export function createJwtAuthenticator(options: JwtAuthenticatorOptions): Authenticator {
  const clockTolerance = options.clockTolerance ?? 30;
  const cacheSize = options.cacheSize ?? 10_000;
  const now = options.now ?? Date.now;
  const issuerOf = typeof options.issuer === "function" ? options.issuer : () => options.issuer as string;
  const keys: KeySource = options.keys
    ? { getKey: options.keys }
    : discoveredKeys(issuerOf(), { cooldown: options.jwksCooldown ?? 30_000, timeout: options.fetchTimeout ?? 5_000 });
  // A Map keeps insertion order: re-inserting on a hit makes the first key the least recently used.
  const cache = new Map<string, Cached>();
  // What each connection sent last (issue 32): a keep-alive client repeats its header, and one
  // string comparison then replaces the cache's lookup. Weak: a closed connection keeps nothing.
  const lastOf = new WeakMap<object, Remembered>();
  const observers = new Set<TokenObserver>();
  const tell = (check: TokenCheck) => {
    for (const observer of observers) observer(check);
  };

  async function verify(token: string): Promise<Caller> {
    let caller: Caller;
    let exp: number;
    try {
      const { payload } = await jwtVerify(token, keys.getKey, {
        audience: options.audience,
        clockTolerance,
        algorithms: ALGORITHMS,
        requiredClaims: ["exp"],
        currentDate: new Date(now()),
      });
      // Checked here rather than by jose: with discovery, the expected value is known only after the key lookup.
      if (payload.iss !== (keys.issuer ?? issuerOf())) {
        throw unauthenticated("token issuer is not the configured issuer", true);
      }
      caller = callerFromClaims(payload);
      exp = payload.exp as number;
    } catch (err) {
      const refusal = reasonOf(err, options.audience);
      if (observers.size > 0) {
        const code = refusal.code;
        tell(code === Code.Unauthenticated ? "invalid" : code === Code.Unavailable ? "unavailable" : "error");
      }
      throw refusal;
    }
    if (observers.size > 0) tell("valid");
    const key = cacheKey(token);
    cache.delete(key);
    cache.set(key, { token: fingerprint(token), caller, until: (exp + clockTolerance) * 1000 });
    if (cache.size > cacheSize) cache.delete(cache.keys().next().value as string);
    return caller;
  }

  return {
    authenticate(authorization, connection) {
      // The connection's last token, sent again: the same checks as a hit of the cache (its
      // entry's expiry), without finding it there.
      const last = connection === undefined ? undefined : lastOf.get(connection);
      if (last !== undefined && last.authorization === authorization && last.cached.until > now()) {
        if (observers.size > 0) tell("cached");
        return last.cached.caller;
      }
      // The usual case first, a token verified before: "Bearer " and the token, as sent.
      // Anything else gets the full parse (and its precise refusal) below.
      if (authorization !== undefined && authorization.length > 7 && /^bearer $/i.test(authorization.slice(0, 7))) {
        const text = authorization.slice(7);
        const key = cacheKey(text);
        const hit = cache.get(key);
        if (hit !== undefined && hit.token === fingerprint(text)) {
          cache.delete(key);
          if (hit.until > now()) {
            cache.set(key, hit);
            if (connection !== undefined) lastOf.set(connection, { authorization, cached: hit });
            if (observers.size > 0) tell("cached");
            return hit.caller;
          }
        }
      }
      const token = bearerToken(authorization);
      return verify(token);
    },
    observe(observer) {
      observers.add(observer);
      return () => observers.delete(observer);
    },
  };
}

interface KeySource {
  getKey: JWTVerifyGetKey;
  /** The issuer identifier the discovery document states, once known. */
  issuer?: string;
}

/**
 * Keys from the JWKS that `{issuer}/.well-known/openid-configuration` names. Discovery happens
 * on first use and is retried (at most every 5 s) until it succeeds; the JWKS itself is cached
 * by jose and fetched again when a token names an unknown key id (key rotation).
 */
function discoveredKeys(issuer: string, options: { cooldown: number; timeout: number }): KeySource {
  const base = issuer.replace(/\/+$/, "");
  let jwks: JWTVerifyGetKey | undefined;
  let pending: Promise<JWTVerifyGetKey> | undefined;
  let failedAt = 0;
  let failure = "";
  const source: KeySource = {
    async getKey(header, token) {
      if (jwks === undefined) {
        if (pending === undefined) {
          if (Date.now() - failedAt < DISCOVERY_RETRY) throw new KeySourceError(failure);
          pending = discover().finally(() => {
            pending = undefined;
          });
        }
        jwks = await pending;
      }
      try {
        return await jwks(header, token);
      } catch (err) {
        if (err instanceof errors.JWKSNoMatchingKey || err instanceof errors.JWKSMultipleMatchingKeys) throw err;
        throw new KeySourceError(`JWKS: ${(err as Error).message}`);
      }
    },
  };
  async function discover(): Promise<JWTVerifyGetKey> {
    const url = `${base}/.well-known/openid-configuration`;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(options.timeout), redirect: "error" });
      if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
      const doc = (await res.json()) as { issuer?: unknown; jwks_uri?: unknown };
      if (typeof doc.issuer !== "string" || doc.issuer.replace(/\/+$/, "") !== base) {
        throw new Error(`${url} names the issuer ${JSON.stringify(doc.issuer)}, not ${issuer}`);
      }
      if (typeof doc.jwks_uri !== "string") throw new Error(`${url} has no jwks_uri`);
      source.issuer = doc.issuer;
      return createRemoteJWKSet(new URL(doc.jwks_uri), {
        cooldownDuration: options.cooldown,
        timeoutDuration: options.timeout,
      });
    } catch (err) {
      failedAt = Date.now();
      failure = `OpenID discovery failed: ${(err as Error).message}`;
      throw new KeySourceError(failure);
    }
  }
  return source;
}

/** Checks that the issuer can be discovered now (start-up diagnostics); throws a readable error. */
export async function checkIssuer(issuer: string, timeout = 5_000): Promise<void> {
  const url = `${issuer.replace(/\/+$/, "")}/.well-known/openid-configuration`;
  const res = await fetch(url, { signal: AbortSignal.timeout(timeout), redirect: "error" });
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
}
