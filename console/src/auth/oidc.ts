// The sign-in flow against the configured issuer: discovery, the redirect to its authorization
// endpoint, the code exchange and refresh at its token endpoint. The embedded development issuer
// lives on this server, so its endpoints are taken on the origin the page was loaded from.

import { discoveryUrl, onOrigin } from "./issuer.js";
import { authorizationUrl, challengeOf, randomToken } from "./pkce.js";
import { type TokenSet, tokenSetOf } from "./renewal.js";

/** What GET /console/config.json says. */
export interface ConsoleConfig {
  clientId: string;
  /** The external issuer; null in development mode. */
  issuer: string | null;
  devIssuer: boolean;
}

export interface IssuerEndpoints {
  authorization: string;
  token: string;
}

/** The redirect URI of the console: its root, on this origin. */
export const redirectUri = (): string => `${location.origin}/console/`;
const PENDING = "trove.console.pending";

interface Pending {
  state: string;
  verifier: string;
  /** The console path to return to after signing in. */
  returnTo: string;
}

export async function loadConfig(): Promise<ConsoleConfig> {
  const res = await fetch("/console/config.json", { cache: "no-store" });
  if (!res.ok) throw new Error(`the console configuration could not be read (HTTP ${res.status})`);
  return (await res.json()) as ConsoleConfig;
}

export async function discover(config: ConsoleConfig): Promise<IssuerEndpoints> {
  const res = await fetch(discoveryUrl(config, location.origin));
  if (!res.ok) throw new Error(`the issuer's discovery document answered HTTP ${res.status}`);
  const doc = (await res.json()) as { authorization_endpoint?: string; token_endpoint?: string };
  if (!doc.authorization_endpoint || !doc.token_endpoint) {
    throw new Error("the issuer advertises no authorization_endpoint / token_endpoint");
  }
  const at = (endpoint: string) => (config.devIssuer ? onOrigin(endpoint, location.origin) : endpoint);
  return { authorization: at(doc.authorization_endpoint), token: at(doc.token_endpoint) };
}

/** Leaves for the issuer's authorization endpoint; `returnTo` is where the console comes back to. */
export async function beginSignIn(config: ConsoleConfig, endpoints: IssuerEndpoints, returnTo: string): Promise<void> {
  const pending: Pending = { state: randomToken(16), verifier: randomToken(32), returnTo };
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  location.assign(
    authorizationUrl({
      authorizationEndpoint: endpoints.authorization,
      clientId: config.clientId,
      redirectUri: redirectUri(),
      state: pending.state,
      challenge: await challengeOf(pending.verifier),
      scope: config.devIssuer ? undefined : "openid",
    }),
  );
}

async function tokenRequest(endpoint: string, form: Record<string, string>): Promise<TokenSet> {
  const res = await fetch(endpoint, {
    method: "POST",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams(form),
  });
  const body = (await res.json().catch(() => ({}))) as Record<string, unknown>;
  if (!res.ok) {
    const reason = typeof body.error_description === "string" ? body.error_description : `HTTP ${res.status}`;
    throw new Error(`${typeof body.error === "string" ? body.error : "token request failed"}: ${reason}`);
  }
  return tokenSetOf(body, Date.now());
}

/**
 * Finishes a sign-in when the page is the issuer's redirect (?code= or ?error=): the tokens and the
 * path to go back to. Undefined when the page is not such a redirect.
 */
export async function completeSignIn(
  config: ConsoleConfig,
  endpoints: IssuerEndpoints,
): Promise<{ tokens: TokenSet; returnTo: string } | undefined> {
  const query = new URLSearchParams(location.search);
  const code = query.get("code");
  const error = query.get("error");
  if (code === null && error === null) return undefined;
  const pending = JSON.parse(sessionStorage.getItem(PENDING) ?? "null") as Pending | null;
  sessionStorage.removeItem(PENDING);
  history.replaceState(null, "", pending?.returnTo ?? "/console/");
  if (!pending || query.get("state") !== pending.state) {
    throw new Error("this sign-in answer was not started by this tab (state differs); sign in again");
  }
  if (error !== null) throw new Error(`sign-in refused: ${query.get("error_description") ?? error}`);
  const tokens = await tokenRequest(endpoints.token, {
    grant_type: "authorization_code",
    code: code as string,
    redirect_uri: redirectUri(),
    client_id: config.clientId,
    code_verifier: pending.verifier,
  });
  return { tokens, returnTo: pending.returnTo };
}

export function refresh(config: ConsoleConfig, endpoints: IssuerEndpoints, refreshToken: string): Promise<TokenSet> {
  return tokenRequest(endpoints.token, {
    grant_type: "refresh_token",
    refresh_token: refreshToken,
    client_id: config.clientId,
  });
}
