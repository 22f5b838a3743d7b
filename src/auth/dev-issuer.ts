// The development issuer: when no issuer is configured, `trove serve` issues its
// own tokens under /auth/ (OpenID discovery, JWKS, client-credentials token
// endpoint), so a new user gets a token with one command. Its client
// credentials and signing key live in the data directory (mode 0600).

import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
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
import { type Authenticator, createJwtAuthenticator } from "./verifier.js";

/** Path prefix of the development issuer's endpoints; the issuer identifier is `{server}/auth`. */
export const DEV_ISSUER_PREFIX = "/auth/";
/** File in the data directory holding the client id, client secret and signing key. */
export const DEV_ISSUER_FILE = "dev-issuer.json";
export const DEFAULT_AUDIENCE = "trove";
export const DEFAULT_TOKEN_LIFETIME = 600;
const ALG = "ES256";
const MAX_FORM = 64 * 1024;

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
  now?: () => number;
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

export async function openDevIssuer(options: DevIssuerOptions): Promise<DevIssuer> {
  await mkdir(options.dataDir, { recursive: true, mode: 0o700 });
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

  const issue = (expiresIn = lifetime) => {
    const iat = Math.floor(now() / 1000);
    return new SignJWT({ ...DEV_CLAIMS, client_id: stored.client_id })
      .setProtectedHeader({ alg: ALG, kid, typ: "at+jwt" })
      .setIssuer(issuer)
      .setSubject(stored.client_id)
      .setAudience(audience)
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(iat + expiresIn)
      .setJti(randomBytes(12).toString("base64url"))
      .sign(signingKey);
  };

  async function token(req: RestRequest, res: RestResponse): Promise<void> {
    let form: URLSearchParams;
    try {
      form = await readForm(req);
    } catch {
      sendJson(req, res, 400, { error: "invalid_request", error_description: "body larger than 64 KiB" });
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
        error_description: "this development issuer only grants client_credentials",
      });
      return;
    }
    sendJson(req, res, 200, { access_token: await issue(), token_type: "Bearer", expires_in: lifetime });
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
          token_endpoint: `${issuer}/token`,
          jwks_uri: `${issuer}/jwks`,
          grant_types_supported: ["client_credentials"],
          token_endpoint_auth_methods_supported: ["client_secret_basic", "client_secret_post"],
          response_types_supported: ["token"],
          subject_types_supported: ["public"],
          id_token_signing_alg_values_supported: [ALG],
          scopes_supported: DEV_CLAIMS.scope.split(" "),
        });
      } else if (path === "/auth/jwks" && read) {
        sendJson(req, res, 200, { keys: [publicJwk] });
      } else if (path === "/auth/token" && req.method === "POST") {
        token(req, res).catch((err: Error) => {
          if (!(res as { headersSent: boolean }).headersSent) {
            sendJson(req, res, 500, { error: "server_error", error_description: err.message });
          }
        });
      } else if (path === "/auth/.well-known/openid-configuration" || path === "/auth/jwks" || path === "/auth/token") {
        const allow = path === "/auth/token" ? "POST" : "GET, HEAD";
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
