// When the console renews its access token: ahead of expiry by a fifth of its lifetime, at least
// 10 s and at most 2 minutes ahead, so a 10-minute token is renewed 2 minutes before it expires.

export interface TokenSet {
  accessToken: string;
  /** Present when the issuer gave one (the authorization code flow); a pasted token has none. */
  refreshToken?: string;
  /** When the access token was obtained and when it expires, in epoch milliseconds. */
  obtainedAt: number;
  expiresAt: number;
  /** How the token came: "flow" (authorization code with PKCE) or "pasted". */
  source: "flow" | "pasted";
}

const MIN_LEAD = 10_000;
const MAX_LEAD = 120_000;

/** Milliseconds from `now` until renewal should begin (0: now). */
export function renewalDelay(tokens: Pick<TokenSet, "obtainedAt" | "expiresAt">, now: number): number {
  const lifetime = Math.max(0, tokens.expiresAt - tokens.obtainedAt);
  const lead = Math.min(MAX_LEAD, Math.max(MIN_LEAD, lifetime / 5));
  return Math.max(0, tokens.expiresAt - lead - now);
}

/** Whether the access token is expired (or within `skew` ms of it) and must not be sent. */
export function isExpired(tokens: Pick<TokenSet, "expiresAt">, now: number, skew = 5_000): boolean {
  return tokens.expiresAt - skew <= now;
}

/** The claims of a JWT's payload; undefined when the token is opaque (not a JWT). */
export function jwtClaims(token: string): Record<string, unknown> | undefined {
  const payload = token.split(".")[1];
  if (payload === undefined) return undefined;
  try {
    const binary = atob(payload.replace(/-/g, "+").replace(/_/g, "/"));
    const json = new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0)));
    const claims = JSON.parse(json) as unknown;
    return claims !== null && typeof claims === "object" ? (claims as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The `exp` of a JWT, in epoch milliseconds; undefined when the token is opaque or has none. */
export function jwtExpiry(token: string): number | undefined {
  const exp = jwtClaims(token)?.exp;
  return typeof exp === "number" && Number.isFinite(exp) ? exp * 1000 : undefined;
}

/**
 * Who the token says the user is, for the header: the first of OpenID Connect's `name`,
 * `preferred_username`, `email`, then the subject (`sub`); undefined for an opaque token.
 */
export function userNameOf(token: string): string | undefined {
  const claims = jwtClaims(token);
  for (const claim of ["name", "preferred_username", "email", "sub"]) {
    const value = claims?.[claim];
    if (typeof value === "string" && value.trim() !== "") return value.trim();
  }
  return undefined;
}

/** The token set of a token endpoint's answer (RFC 6749 5.1). */
export function tokenSetOf(
  answer: { access_token?: unknown; refresh_token?: unknown; expires_in?: unknown },
  now: number,
): TokenSet {
  if (typeof answer.access_token !== "string" || answer.access_token === "") {
    throw new Error("the token endpoint answered no access_token");
  }
  const expiresIn =
    typeof answer.expires_in === "number" && answer.expires_in > 0
      ? answer.expires_in * 1000
      : (jwtExpiry(answer.access_token) ?? now + 300_000) - now;
  return {
    accessToken: answer.access_token,
    refreshToken: typeof answer.refresh_token === "string" ? answer.refresh_token : undefined,
    obtainedAt: now,
    expiresAt: now + expiresIn,
    source: "flow",
  };
}

/** A pasted token: its expiry from its `exp` claim; one without (opaque) is assumed good for 10 minutes. */
export function pastedTokenSet(token: string, now: number): TokenSet {
  const trimmed = token.trim().replace(/^Bearer\s+/i, "");
  if (!/^[\x21-\x7e]+$/.test(trimmed)) throw new Error("a token is one line of printable characters");
  const expiresAt = jwtExpiry(trimmed) ?? now + 600_000;
  if (expiresAt <= now) throw new Error("this token has expired");
  return { accessToken: trimmed, obtainedAt: now, expiresAt, source: "pasted" };
}
