// PKCE (RFC 7636) for the console's sign-in: a random code verifier and its S256 challenge, and the
// random `state` that ties the authorization response to the request this tab made.

/** Bytes as base64url without padding (RFC 4648 section 5). */
export function base64url(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/** A random string of `bytes` random bytes, base64url: 32 bytes give the 43 characters RFC 7636 asks at least. */
export function randomToken(bytes = 32): string {
  return base64url(crypto.getRandomValues(new Uint8Array(bytes)));
}

/** The S256 challenge of a verifier: BASE64URL(SHA-256(ASCII(verifier))). */
export async function challengeOf(verifier: string): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

/** A verifier RFC 7636 4.1 accepts: 43 to 128 unreserved characters. */
export function isVerifier(text: string): boolean {
  return /^[A-Za-z0-9\-._~]{43,128}$/.test(text);
}

export interface AuthorizationRequest {
  authorizationEndpoint: string;
  clientId: string;
  redirectUri: string;
  state: string;
  challenge: string;
  scope?: string;
}

/** The URL the browser goes to for the authorization code flow with PKCE S256. */
export function authorizationUrl(request: AuthorizationRequest): string {
  const url = new URL(request.authorizationEndpoint);
  url.searchParams.set("response_type", "code");
  url.searchParams.set("client_id", request.clientId);
  url.searchParams.set("redirect_uri", request.redirectUri);
  url.searchParams.set("state", request.state);
  url.searchParams.set("code_challenge", request.challenge);
  url.searchParams.set("code_challenge_method", "S256");
  if (request.scope) url.searchParams.set("scope", request.scope);
  return url.href;
}
