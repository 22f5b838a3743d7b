// The development issuer: when no issuer is configured, `trove serve` issues its
// own tokens under /auth/ (OpenID discovery, JWKS, client-credentials token
// endpoint), so a new user gets a token with one command. Its client
// credentials and signing key live in the data directory (mode 0600).
// For the console it is also an authorization server for one public client
// (authorization code with PKCE S256, refresh tokens): the authorization
// endpoint is a plain confirmation page, "Sign in as developer".

import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { chmod, readFile, writeFile } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import { join } from "node:path";
import {
  calculateJwkThumbprint,
  createLocalJWKSet,
  exportJWK,
  generateKeyPair,
  importJWK,
  type JWK,
  SignJWT,
} from "jose";
import type { RestRequest, RestResponse } from "../rest/http.js";
import { makeDirectorySync } from "../storage/local/make-directory.js";
import { type Authenticator, createJwtAuthenticator } from "./verifier.js";

/** Path prefix of the development issuer's endpoints; the issuer identifier is `{server}/auth`. */
export const DEV_ISSUER_PREFIX = "/auth/";
/** File in the data directory holding the client id, client secret and signing key. */
export const DEV_ISSUER_FILE = "dev-issuer.json";
export const DEFAULT_AUDIENCE = "trove";
export const DEFAULT_TOKEN_LIFETIME = 600;
const ALG = "ES256";
const MAX_FORM = 64 * 1024;
/** An authorization code is good for one minute, once (RFC 6749 4.1.2 recommends at most ten). */
const CODE_LIFETIME = 60;
/** A refresh token is good for eight hours, once: each use answers a new one (rotation). */
const REFRESH_LIFETIME = 8 * 3600;
/** Codes and refresh tokens kept at once; beyond it the oldest go (a development server, bounded anyway). */
const MAX_GRANTS = 10_000;
/** RFC 7636 4.1: 43 to 128 unreserved characters. */
const PKCE_VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
const PKCE_CHALLENGE = /^[A-Za-z0-9\-_]{43}$/;
/** The console's public client id unless --console-client-id says otherwise. */
export const DEFAULT_CONSOLE_CLIENT_ID = "trove-console";
/** The methods of each endpoint, for a 405's Allow. */
const ALLOWED: Record<string, string> = {
  "/auth/.well-known/openid-configuration": "GET, HEAD",
  "/auth/jwks": "GET, HEAD",
  "/auth/token": "POST",
  "/auth/authorize": "GET, HEAD, POST",
};

/** Everything a development token allows. */
export const DEV_CLAIMS = {
  trove_account: "dev",
  scope: "stores:admin report:content-insights",
  trove_grants: [
    { store: "*", ops: ["read", "write", "delete"] },
    { project: "project://*/*", ops: ["read", "write", "delete"] },
  ],
};

interface IssuerFile {
  client_id: string;
  client_secret: string;
  signing_key: JWK;
}

export interface DevIssuerOptions {
  dataDir: string;
  audience?: string;
  /** Token lifetime in seconds (default 600, the spec's 10 minutes). */
  tokenLifetime?: number;
  /** The public client (no secret) that may use the authorization code flow: the console's. */
  consoleClientId?: string;
  now?: () => number;
  /** Where authorization codes and refresh tokens are kept (default: in this process). */
  grants?: GrantStore;
}

export interface DevIssuer {
  readonly clientId: string;
  readonly clientSecret: string;
  /** The file holding the credentials and the signing key. */
  readonly file: string;
  readonly audience: string;
  /** Lifetime of the tokens it issues, in seconds. */
  readonly tokenLifetime: number;
  /** Verifies the tokens this issuer signed. */
  readonly authenticator: Authenticator;
  /** Issuer identifier and base of the endpoints, e.g. `http://127.0.0.1:13242/auth`. */
  readonly issuer: string;
  /** Tells the issuer where the server listens (its identifier depends on it). */
  listening(host: string, port: number): void;
  /** Answers a request whose path starts with /auth/. */
  handle(req: RestRequest, res: RestResponse): void;
  /** A signed token with full grants, for `expiresIn` seconds (default: the token lifetime). */
  issue(expiresIn?: number): Promise<string>;
}

/** An address as the host part of a URL: wildcards become the loopback address, IPv6 gets brackets. */
export function urlHost(host: string): string {
  if (host === "0.0.0.0" || host === "") return "127.0.0.1";
  if (host === "::") return "[::1]";
  return host.includes(":") ? `[${host}]` : host;
}

async function loadOrCreate(file: string): Promise<IssuerFile> {
  try {
    return parseIssuerFile(await readFile(file, "utf8"), file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const { privateKey } = await generateKeyPair(ALG, { extractable: true });
  const jwk = await exportJWK(privateKey);
  const created: IssuerFile = {
    client_id: `trove-dev-${randomBytes(6).toString("hex")}`,
    client_secret: randomBytes(32).toString("base64url"),
    signing_key: { ...jwk, alg: ALG, use: "sig", kid: await calculateJwkThumbprint(jwk) },
  };
  try {
    // "wx": two servers starting on one data directory keep the first one's credentials.
    await writeFile(file, `${JSON.stringify(created, null, 2)}\n`, { flag: "wx", mode: 0o600 });
    return created;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    return parseIssuerFile(await readFile(file, "utf8"), file);
  }
}

function parseIssuerFile(text: string, file: string): IssuerFile {
  const f = JSON.parse(text) as Partial<IssuerFile>;
  if (
    typeof f.client_id !== "string" ||
    typeof f.client_secret !== "string" ||
    typeof f.signing_key !== "object" ||
    typeof f.signing_key?.d !== "string"
  ) {
    throw new Error(`${file} is not a development issuer file; remove it to create a new one`);
  }
  return f as IssuerFile;
}

/** Reads the development issuer's client credentials from a data directory (for `trove token`). */
export async function readDevCredentials(dataDir: string): Promise<{ clientId: string; clientSecret: string }> {
  const file = join(dataDir, DEV_ISSUER_FILE);
  const f = parseIssuerFile(await readFile(file, "utf8"), file);
  return { clientId: f.client_id, clientSecret: f.client_secret };
}

function splitQuery(target: string): string {
  const q = target.indexOf("?");
  return q < 0 ? "" : target.slice(q + 1);
}

function digest(text: string): Buffer {
  return createHash("sha256").update(text).digest();
}

function sameSecret(given: string, expected: string): boolean {
  return timingSafeEqual(digest(given), digest(expected));
}

function sendJson(
  req: RestRequest,
  res: RestResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const bytes = Buffer.from(JSON.stringify(body));
  const r = res as ServerResponse;
  r.statusCode = status;
  r.setHeader("Content-Type", "application/json");
  r.setHeader("Cache-Control", "no-store");
  r.setHeader("Content-Length", bytes.byteLength);
  for (const [name, value] of Object.entries(headers)) r.setHeader(name, value);
  r.end(req.method === "HEAD" ? undefined : bytes);
}

function readForm(req: RestRequest): Promise<URLSearchParams> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size <= MAX_FORM) chunks.push(chunk);
    });
    req.once("end", () => {
      if (size > MAX_FORM) reject(new Error("body larger than 64 KiB"));
      else resolve(new URLSearchParams(Buffer.concat(chunks).toString("utf8")));
    });
    req.once("error", reject);
  });
}

/** Client credentials of a token request: HTTP Basic (RFC 6749 2.3.1) or form fields. */
function clientOf(req: RestRequest, form: URLSearchParams): { id: string; secret: string } | undefined {
  const auth = req.headers.authorization;
  if (typeof auth === "string" && /^Basic /i.test(auth)) {
    const decoded = Buffer.from(auth.slice(6).trim(), "base64").toString("utf8");
    const colon = decoded.indexOf(":");
    if (colon < 0) return undefined;
    try {
      return {
        id: decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, " ")),
        secret: decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, " ")),
      };
    } catch {
      return undefined;
    }
  }
  const id = form.get("client_id");
  const secret = form.get("client_secret");
  return id !== null && secret !== null ? { id, secret } : undefined;
}

/** What an authorization code or a refresh token stands for, until it is used or expires. */
export interface Grant {
  clientId: string;
  expires: number;
  /** Authorization codes only: the PKCE challenge and the redirect URI of the request. */
  challenge?: string;
  redirectUri?: string;
  /** A code's refresh token, revoked if the code is replayed (RFC 6749 4.1.2). */
  refresh?: string;
}

/** A table of single-use grants with a size bound; expired entries are dropped as new ones come. */
class Grants {
  private readonly entries = new Map<string, Grant>();
  constructor(private readonly now: () => number) {}

  put(key: string, grant: Grant): void {
    if (this.entries.size >= MAX_GRANTS) {
      const t = this.now();
      for (const [k, g] of this.entries) if (g.expires <= t) this.entries.delete(k);
      while (this.entries.size >= MAX_GRANTS) this.entries.delete(this.entries.keys().next().value as string);
    }
    this.entries.set(key, grant);
  }

  /** The grant, removed: a second use finds nothing. */
  take(key: string): Grant | undefined {
    const grant = this.entries.get(key);
    if (!grant) return undefined;
    this.entries.delete(key);
    return grant.expires > this.now() ? grant : undefined;
  }

  delete(key: string): void {
    this.entries.delete(key);
  }
}

/** The issuer's two tables of single-use grants. */
export type GrantTable = "codes" | "refresh";

/**
 * Where the issuer keeps its grants: in this process (`localGrants`), or, for the workers of
 * `trove serve --workers`, in their primary, so that a code issued by one worker is taken, once,
 * by whichever worker the token request reaches (server/workers.ts).
 */
export interface GrantStore {
  put(table: GrantTable, key: string, grant: Grant): Promise<void>;
  /** The grant, removed: a second use, from any worker, finds nothing. */
  take(table: GrantTable, key: string): Promise<Grant | undefined>;
  delete(table: GrantTable, key: string): Promise<void>;
}

/** Grants held in this process, in two tables with a size bound. */
export function localGrants(now: () => number = Date.now): GrantStore {
  const tables: Record<GrantTable, Grants> = { codes: new Grants(now), refresh: new Grants(now) };
  return {
    put: async (table, key, grant) => tables[table].put(key, grant),
    take: async (table, key) => tables[table].take(key),
    delete: async (table, key) => tables[table].delete(key),
  };
}

/** A new grant's key: 256 random bits. */
function grantKey(): string {
  return randomBytes(32).toString("base64url");
}

/** The grants could not be kept (a worker whose primary is gone): 503, nothing issued. */
function signInFailed(req: RestRequest, res: RestResponse, err: Error): void {
  if ((res as { headersSent: boolean }).headersSent) return;
  sendPage(req, res, 503, "Sign-in failed", `<p>The sign-in could not be recorded: ${escapeHtml(err.message)}</p>`);
}

/** BASE64URL(SHA-256(verifier)), the S256 challenge of RFC 7636 4.2. */
export function pkceChallenge(verifier: string): string {
  return createHash("sha256").update(verifier, "ascii").digest("base64url");
}

function escapeHtml(text: string): string {
  return text.replace(
    /[&<>"']/g,
    (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c] as string,
  );
}

const PAGE_STYLE =
  "body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#1b1b1b}" +
  "button{font:inherit;padding:.5rem 1.25rem;background:#0b57d0;color:#fff;border:0;border-radius:4px;cursor:pointer}" +
  "button:focus-visible{outline:3px solid #1b1b1b;outline-offset:2px}code{background:#eee;padding:0 .25rem}";
/** The pages of the authorization endpoint run no script, load nothing and may only post to this origin. */
const PAGE_POLICY =
  `default-src 'none'; style-src 'sha256-${createHash("sha256").update(PAGE_STYLE).digest("base64")}'; ` +
  "form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

function sendPage(req: RestRequest, res: RestResponse, status: number, title: string, body: string): void {
  const html = Buffer.from(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>` +
      `<meta name="viewport" content="width=device-width"><style>${PAGE_STYLE}</style></head>` +
      `<body><main><h1>${escapeHtml(title)}</h1>${body}</main></body></html>`,
  );
  const r = res as ServerResponse;
  r.statusCode = status;
  r.setHeader("Content-Type", "text/html; charset=utf-8");
  r.setHeader("Cache-Control", "no-store");
  r.setHeader("Content-Security-Policy", PAGE_POLICY);
  r.setHeader("X-Frame-Options", "DENY");
  r.setHeader("X-Content-Type-Options", "nosniff");
  r.setHeader("Referrer-Policy", "no-referrer");
  r.setHeader("Content-Length", html.byteLength);
  r.end(req.method === "HEAD" ? undefined : html);
}

function redirectTo(res: RestResponse, location: string): void {
  const r = res as ServerResponse;
  r.statusCode = 302;
  r.setHeader("Location", location);
  r.setHeader("Cache-Control", "no-store");
  r.setHeader("Referrer-Policy", "no-referrer");
  r.setHeader("Content-Length", 0);
  r.end();
}

/** The origin the browser used to reach this server (the Host it sent), e.g. http://127.0.0.1:13242. */
function requestOrigin(req: RestRequest): string | undefined {
  const host = req.headers[":authority"] ?? req.headers.host;
  return typeof host === "string" && host !== "" ? `http://${host}` : undefined;
}

/** A redirect URI is the console on the origin the browser used: http://{host}/console/... and nothing else. */
function validRedirect(req: RestRequest, uri: string | null): uri is string {
  if (uri === null) return false;
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return false;
  }
  return url.origin === requestOrigin(req) && url.pathname.startsWith("/console/") && url.hash === "" && !url.username;
}

export async function openDevIssuer(options: DevIssuerOptions): Promise<DevIssuer> {
  makeDirectorySync(options.dataDir, 0o700);
  const file = join(options.dataDir, DEV_ISSUER_FILE);
  const stored = await loadOrCreate(file);
  await chmod(file, 0o600);
  const audience = options.audience ?? DEFAULT_AUDIENCE;
  const lifetime = options.tokenLifetime ?? DEFAULT_TOKEN_LIFETIME;
  const now = options.now ?? Date.now;
  const { d: _private, ...publicJwk } = stored.signing_key;
  const kid = stored.signing_key.kid as string;
  const signingKey = await importJWK(stored.signing_key, ALG);
  let issuer = "http://127.0.0.1/auth";

  const consoleClientId = options.consoleClientId ?? DEFAULT_CONSOLE_CLIENT_ID;
  const grants = options.grants ?? localGrants(now);

  /** A token for the client credentials' client, or for the developer signed in through the console. */
  const issue = (expiresIn = lifetime, subject = stored.client_id, clientId = stored.client_id) => {
    const iat = Math.floor(now() / 1000);
    return new SignJWT({ ...DEV_CLAIMS, client_id: clientId })
      .setProtectedHeader({ alg: ALG, kid, typ: "at+jwt" })
      .setIssuer(issuer)
      .setSubject(subject)
      .setAudience(audience)
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(iat + expiresIn)
      .setJti(randomBytes(12).toString("base64url"))
      .sign(signingKey);
  };

  const oauthError = (req: RestRequest, res: RestResponse, error: string, description: string, status = 400) =>
    sendJson(req, res, status, { error, error_description: description });

  /**
   * The console's tokens: an access token and a new single-use refresh token. A used code stays
   * known until it expires, so that a replay is recognised and revokes this refresh token.
   */
  const consoleTokens = async (req: RestRequest, res: RestResponse, used?: { code: string; expires: number }) => {
    const refresh = grantKey();
    await grants.put("refresh", refresh, { clientId: consoleClientId, expires: now() + REFRESH_LIFETIME * 1000 });
    if (used) await grants.put("codes", used.code, { clientId: consoleClientId, expires: used.expires, refresh });
    sendJson(req, res, 200, {
      access_token: await issue(lifetime, "developer", consoleClientId),
      token_type: "Bearer",
      expires_in: lifetime,
      refresh_token: refresh,
      scope: DEV_CLAIMS.scope,
    });
  };

  /** authorization_code (RFC 6749 4.1.3, RFC 7636 4.6) and refresh_token (RFC 6749 6) for the public client. */
  async function publicGrant(req: RestRequest, res: RestResponse, form: URLSearchParams): Promise<void> {
    if (form.get("client_id") !== consoleClientId) {
      oauthError(req, res, "invalid_client", `client_id must be the console's public client id`, 401);
      return;
    }
    if (form.get("grant_type") === "refresh_token") {
      const given = form.get("refresh_token");
      if (!given) return oauthError(req, res, "invalid_request", "refresh_token is required");
      const grant = await grants.take("refresh", given);
      if (!grant || grant.clientId !== consoleClientId) {
        return oauthError(req, res, "invalid_grant", "unknown, expired or already used refresh token");
      }
      await consoleTokens(req, res);
      return;
    }
    const code = form.get("code");
    const verifier = form.get("code_verifier");
    const redirectUri = form.get("redirect_uri");
    if (!code) return oauthError(req, res, "invalid_request", "code is required");
    if (!redirectUri) return oauthError(req, res, "invalid_request", "redirect_uri is required");
    if (!verifier) return oauthError(req, res, "invalid_request", "code_verifier is required (PKCE, RFC 7636)");
    const grant = await grants.take("codes", code);
    if (grant?.refresh !== undefined) {
      // A replayed code: what was issued for it is revoked too (RFC 6749 4.1.2).
      await grants.delete("refresh", grant.refresh);
      return oauthError(req, res, "invalid_grant", "authorization code already used");
    }
    if (!grant || grant.clientId !== consoleClientId) {
      return oauthError(req, res, "invalid_grant", "unknown or expired authorization code");
    }
    if (grant.redirectUri !== redirectUri) {
      return oauthError(req, res, "invalid_grant", "redirect_uri differs from the authorization request's");
    }
    if (!PKCE_VERIFIER.test(verifier) || !sameSecret(pkceChallenge(verifier), grant.challenge ?? "")) {
      return oauthError(req, res, "invalid_grant", "code_verifier does not match the code_challenge");
    }
    await consoleTokens(req, res, { code, expires: grant.expires });
  }

  async function token(req: RestRequest, res: RestResponse): Promise<void> {
    let form: URLSearchParams;
    try {
      form = await readForm(req);
    } catch {
      sendJson(req, res, 400, { error: "invalid_request", error_description: "body larger than 64 KiB" });
      return;
    }
    const grantType = form.get("grant_type");
    if (grantType === "authorization_code" || grantType === "refresh_token") {
      await publicGrant(req, res, form);
      return;
    }
    const client = clientOf(req, form);
    if (!client || !sameSecret(client.id, stored.client_id) || !sameSecret(client.secret, stored.client_secret)) {
      sendJson(
        req,
        res,
        401,
        { error: "invalid_client", error_description: "unknown client id or wrong secret" },
        { "WWW-Authenticate": 'Basic realm="trove-dev-issuer"' },
      );
      return;
    }
    if (form.get("grant_type") !== "client_credentials") {
      sendJson(req, res, 400, {
        error: "unsupported_grant_type",
        error_description:
          "this development issuer grants client_credentials, and authorization_code and refresh_token to the console",
      });
      return;
    }
    sendJson(req, res, 200, { access_token: await issue(), token_type: "Bearer", expires_in: lifetime });
  }

  /**
   * An authorization request (RFC 6749 4.1.1, RFC 7636 4.3), from the query (GET) or the
   * confirmation form (POST). A wrong client or redirect URI is shown, never redirected to
   * (RFC 6749 4.1.2.1); any other mistake goes back to the console as an error.
   */
  function authorization(req: RestRequest, res: RestResponse, params: URLSearchParams) {
    const redirectUri = params.get("redirect_uri");
    if (params.get("client_id") !== consoleClientId) {
      sendPage(
        req,
        res,
        400,
        "Sign-in refused",
        `<p>Unknown client: only <code>${escapeHtml(consoleClientId)}</code>, the console, signs in here.</p>`,
      );
      return undefined;
    }
    if (!validRedirect(req, redirectUri)) {
      sendPage(
        req,
        res,
        400,
        "Sign-in refused",
        "<p>The redirect URI must be this server's console: <code>/console/</code> on the address you used.</p>",
      );
      return undefined;
    }
    const state = params.get("state");
    const back = (query: Record<string, string>) => {
      const url = new URL(redirectUri);
      for (const [name, value] of Object.entries(query)) url.searchParams.set(name, value);
      if (state !== null) url.searchParams.set("state", state);
      redirectTo(res, url.href);
    };
    if (params.get("response_type") !== "code") {
      back({ error: "unsupported_response_type", error_description: "only response_type=code" });
      return undefined;
    }
    const challenge = params.get("code_challenge");
    if (params.get("code_challenge_method") !== "S256" || challenge === null || !PKCE_CHALLENGE.test(challenge)) {
      back({
        error: "invalid_request",
        error_description: "PKCE is required: code_challenge with code_challenge_method=S256",
      });
      return undefined;
    }
    return { redirectUri, state, challenge, back };
  }

  async function authorize(req: RestRequest, res: RestResponse, form?: URLSearchParams): Promise<void> {
    const params = form ?? new URLSearchParams(splitQuery(req.url ?? ""));
    const request = authorization(req, res, params);
    if (!request) return;
    if (form) {
      if (form.get("decision") !== "allow") {
        request.back({ error: "access_denied", error_description: "sign-in cancelled" });
        return;
      }
      const code = grantKey();
      await grants.put("codes", code, {
        clientId: consoleClientId,
        expires: now() + CODE_LIFETIME * 1000,
        challenge: request.challenge,
        redirectUri: request.redirectUri,
      });
      request.back({ code });
      return;
    }
    const hidden = ["response_type", "client_id", "redirect_uri", "state", "code_challenge", "code_challenge_method"]
      .filter((name) => params.get(name) !== null)
      .map((name) => `<input type="hidden" name="${name}" value="${escapeHtml(params.get(name) as string)}">`)
      .join("");
    sendPage(
      req,
      res,
      200,
      "Sign in to Trove",
      "<p>This server runs in development mode: its own issuer signs you in as the developer, " +
        "with full access to every store and project.</p>" +
        `<form method="post" action="/auth/authorize">${hidden}` +
        '<button type="submit" name="decision" value="allow" autofocus>Sign in as developer</button> ' +
        '<button type="submit" name="decision" value="deny">Cancel</button></form>',
    );
  }

  return {
    clientId: stored.client_id,
    clientSecret: stored.client_secret,
    file,
    audience,
    tokenLifetime: lifetime,
    authenticator: createJwtAuthenticator({
      issuer: () => issuer,
      audience,
      keys: createLocalJWKSet({ keys: [publicJwk] }),
    }),
    get issuer() {
      return issuer;
    },
    listening(host, port) {
      issuer = `http://${urlHost(host)}:${port}/auth`;
    },
    issue,
    handle(req, res) {
      const q = (req.url ?? "/").indexOf("?");
      const path = q < 0 ? req.url : req.url?.slice(0, q);
      const read = req.method === "GET" || req.method === "HEAD";
      if (path === "/auth/.well-known/openid-configuration" && read) {
        sendJson(req, res, 200, {
          issuer,
          authorization_endpoint: `${issuer}/authorize`,
          token_endpoint: `${issuer}/token`,
          jwks_uri: `${issuer}/jwks`,
          grant_types_supported: ["client_credentials", "authorization_code", "refresh_token"],
          token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post", "none"],
          response_types_supported: ["code"],
          code_challenge_methods_supported: ["S256"],
          subject_types_supported: ["public"],
          id_token_signing_alg_values_supported: [ALG],
          scopes_supported: DEV_CLAIMS.scope.split(" "),
        });
      } else if (path === "/auth/authorize" && read) {
        authorize(req, res).catch((err: Error) => signInFailed(req, res, err));
      } else if (path === "/auth/authorize" && req.method === "POST") {
        readForm(req).then(
          (form) => authorize(req, res, form).catch((err: Error) => signInFailed(req, res, err)),
          () => sendPage(req, res, 413, "Sign-in refused", "<p>The form is larger than 64 KiB.</p>"),
        );
      } else if (path === "/auth/jwks" && read) {
        sendJson(req, res, 200, { keys: [publicJwk] });
      } else if (path === "/auth/token" && req.method === "POST") {
        token(req, res).catch((err: Error) => {
          if (!(res as { headersSent: boolean }).headersSent) {
            sendJson(req, res, 500, { error: "server_error", error_description: err.message });
          }
        });
      } else if (path !== undefined && path in ALLOWED) {
        const allow = ALLOWED[path] as string;
        sendJson(
          req,
          res,
          405,
          { error: "invalid_request", error_description: `method ${req.method} not allowed` },
          { Allow: allow },
        );
      } else {
        sendJson(req, res, 404, { error: "not_found", error_description: `no such endpoint: ${path}` });
      }
    },
  };
}
