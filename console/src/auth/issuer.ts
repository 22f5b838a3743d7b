// Where the console finds its issuer's endpoints (pure: no browser globals, unit-tested).

/** The discovery document's URL: the embedded development issuer on the page's origin, else the configured issuer's. */
export function discoveryUrl(config: { devIssuer: boolean; issuer: string | null }, origin: string): string {
  const base = config.devIssuer ? `${origin}/auth` : (config.issuer ?? "").replace(/\/$/, "");
  return `${base}/.well-known/openid-configuration`;
}

/** An endpoint of the development issuer, on this page's origin (the server may call itself 127.0.0.1). */
export function onOrigin(endpoint: string, origin: string): string {
  const url = new URL(endpoint);
  return `${origin}${url.pathname}${url.search}`;
}
