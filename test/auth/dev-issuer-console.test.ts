// The development issuer as the console's authorization server, as an OAuth client sees it:
// discovery advertises the code flow; /auth/authorize shows a one-click page and redirects back
// with a code; /auth/token exchanges it only with the right PKCE verifier and redirect URI, once;
// refresh tokens rotate. Errors are RFC 6749 JSON (5.2) or redirects (4.1.2.1).

import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DevIssuer, openDevIssuer } from "../../src/auth/dev-issuer.js";
import { startServer, type TestServer } from "../support/server.js";

const CLIENT = "trove-console";

function pkce() {
  const verifier = randomBytes(32).toString("base64url");
  return { verifier, challenge: createHash("sha256").update(verifier).digest("base64url") };
}

describe("development issuer: authorization code with PKCE for the console", () => {
  let dir: string;
  let issuer: DevIssuer;
  let t: TestServer;
  let redirectUri: string;

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "trove-dev-authorize-"));
    issuer = await openDevIssuer({ dataDir: dir });
    t = await startServer({ auth: issuer.authenticator, devIssuer: issuer });
    redirectUri = `${t.url}/console/`;
  });
  afterAll(async () => {
    await t.stop();
    await rm(dir, { recursive: true, force: true });
  });

  const authorizeQuery = (over: Record<string, string | undefined> = {}, challenge = pkce().challenge) => {
    const q = new URLSearchParams();
    const all: Record<string, string | undefined> = {
      response_type: "code",
      client_id: CLIENT,
      redirect_uri: redirectUri,
      state: "s-123",
      code_challenge: challenge,
      code_challenge_method: "S256",
      ...over,
    };
    for (const [k, v] of Object.entries(all)) if (v !== undefined) q.set(k, v);
    return q;
  };

  /** Confirms on the page (the form's POST) and answers the code it redirects back with. */
  const codeFor = async (challenge: string, uri = redirectUri) => {
    const form = authorizeQuery({ redirect_uri: uri, decision: "allow" }, challenge);
    const res = await fetch(`${t.url}/auth/authorize`, { method: "POST", body: form, redirect: "manual" });
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get("location") as string);
    expect(location.searchParams.get("state")).toBe("s-123");
    return location.searchParams.get("code") as string;
  };

  const token = (form: Record<string, string>) =>
    fetch(`${t.url}/auth/token`, { method: "POST", body: new URLSearchParams(form) });

  it("discovery advertises the authorization endpoint, the code and refresh grants and S256", async () => {
    const doc = (await (await fetch(`${t.url}/auth/.well-known/openid-configuration`)).json()) as Record<
      string,
      unknown
    >;
    expect(doc).toMatchObject({
      authorization_endpoint: `${t.url}/auth/authorize`,
      token_endpoint: `${t.url}/auth/token`,
      grant_types_supported: ["client_credentials", "authorization_code", "refresh_token"],
      response_types_supported: ["code"],
      code_challenge_methods_supported: ["S256"],
    });
    expect(doc.token_endpoint_auth_methods_supported).toContain("none");
  });

  it("GET /auth/authorize shows the one-click page: a form that posts the request back, under a strict policy", async () => {
    const res = await fetch(`${t.url}/auth/authorize?${authorizeQuery()}`);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(res.headers.get("content-security-policy")).toMatch(
      /default-src 'none'; style-src 'sha256-[^']+'; form-action 'self'/,
    );
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    const html = await res.text();
    expect(html).toContain('<form method="post" action="/auth/authorize">');
    expect(html).toContain("Sign in as developer");
    expect(html).toContain(`name="redirect_uri" value="${redirectUri}"`);
    expect(html).not.toContain("<script");
  });

  it("the page escapes what the request carries", async () => {
    const res = await fetch(`${t.url}/auth/authorize?${authorizeQuery({ state: '"><script>alert(1)</script>' })}`);
    const html = await res.text();
    expect(html).not.toContain("<script>");
    expect(html).toContain("&quot;&gt;&lt;script&gt;");
  });

  it("code + verifier give a developer token with full grants and a refresh token; the code works once", async () => {
    const { verifier, challenge } = pkce();
    const code = await codeFor(challenge);
    const form = {
      grant_type: "authorization_code",
      code,
      redirect_uri: redirectUri,
      client_id: CLIENT,
      code_verifier: verifier,
    };
    const res = await token(form);
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = (await res.json()) as {
      access_token: string;
      refresh_token: string;
      expires_in: number;
      token_type: string;
    };
    expect(body).toMatchObject({ token_type: "Bearer", expires_in: 600, refresh_token: expect.any(String) });
    expect(decodeJwt(body.access_token)).toMatchObject({ sub: "developer", client_id: CLIENT, iss: `${t.url}/auth` });
    const stores = await fetch(`${t.url}/resources/v2/stores`, {
      headers: { Authorization: `Bearer ${body.access_token}` },
    });
    expect(stores.status).toBe(200);

    // Replayed: refused, and the refresh token issued for it is revoked (RFC 6749 4.1.2).
    const again = await token(form);
    expect(again.status).toBe(400);
    expect(await again.json()).toMatchObject({
      error: "invalid_grant",
      error_description: "authorization code already used",
    });
    const refresh = await token({ grant_type: "refresh_token", refresh_token: body.refresh_token, client_id: CLIENT });
    expect(refresh.status).toBe(400);
    expect(await refresh.json()).toMatchObject({ error: "invalid_grant" });
  });

  it("a wrong or missing verifier, another redirect URI, an unknown code: 400 with the RFC's error", async () => {
    const { verifier, challenge } = pkce();
    const base = { grant_type: "authorization_code", redirect_uri: redirectUri, client_id: CLIENT };

    const missing = await token({ ...base, code: await codeFor(challenge) });
    expect(missing.status).toBe(400);
    expect(await missing.json()).toEqual({
      error: "invalid_request",
      error_description: "code_verifier is required (PKCE, RFC 7636)",
    });

    const wrong = await token({ ...base, code: await codeFor(challenge), code_verifier: pkce().verifier });
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toMatchObject({
      error: "invalid_grant",
      error_description: "code_verifier does not match the code_challenge",
    });

    const otherUri = await token({
      ...base,
      code: await codeFor(challenge),
      code_verifier: verifier,
      redirect_uri: `${t.url}/console/x`,
    });
    expect(otherUri.status).toBe(400);
    expect(await otherUri.json()).toMatchObject({
      error: "invalid_grant",
      error_description: "redirect_uri differs from the authorization request's",
    });

    const unknown = await token({ ...base, code: "nope", code_verifier: verifier });
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toMatchObject({ error: "invalid_grant" });

    const client = await token({
      ...base,
      client_id: "someone-else",
      code: await codeFor(challenge),
      code_verifier: verifier,
    });
    expect(client.status).toBe(401);
    expect(await client.json()).toMatchObject({ error: "invalid_client" });
  });

  it("refresh tokens rotate: each works once and answers a new one", async () => {
    const { verifier, challenge } = pkce();
    const code = await codeFor(challenge);
    const first = (await (
      await token({
        grant_type: "authorization_code",
        code,
        redirect_uri: redirectUri,
        client_id: CLIENT,
        code_verifier: verifier,
      })
    ).json()) as { refresh_token: string };
    const renewed = await token({ grant_type: "refresh_token", refresh_token: first.refresh_token, client_id: CLIENT });
    expect(renewed.status).toBe(200);
    const body = (await renewed.json()) as { access_token: string; refresh_token: string };
    expect(body.refresh_token).not.toBe(first.refresh_token);
    expect(decodeJwt(body.access_token)).toMatchObject({ sub: "developer" });
    const reused = await token({ grant_type: "refresh_token", refresh_token: first.refresh_token, client_id: CLIENT });
    expect(reused.status).toBe(400);
    expect(await reused.json()).toMatchObject({ error: "invalid_grant" });
    const none = await token({ grant_type: "refresh_token", client_id: CLIENT });
    expect(await none.json()).toMatchObject({
      error: "invalid_request",
      error_description: "refresh_token is required",
    });
  });

  it("a redirect URI off this origin or outside /console/, or another client: a 400 page, never a redirect", async () => {
    for (const over of [
      { redirect_uri: "https://evil.example/console/" },
      { redirect_uri: `${t.url}/resources/v2/` },
      { redirect_uri: "not a url" },
      { redirect_uri: undefined },
      { client_id: "someone-else" },
    ]) {
      const res = await fetch(`${t.url}/auth/authorize?${authorizeQuery(over)}`, { redirect: "manual" });
      expect(res.status, JSON.stringify(over)).toBe(400);
      expect(res.headers.get("location")).toBeNull();
      expect(await res.text()).toContain("Sign-in refused");
    }
  });

  it("no PKCE, plain PKCE or another response type: redirected back with the error and the state", async () => {
    for (const [over, error] of [
      [{ code_challenge: undefined }, "invalid_request"],
      [{ code_challenge_method: "plain" }, "invalid_request"],
      [{ response_type: "token" }, "unsupported_response_type"],
    ] as const) {
      const res = await fetch(`${t.url}/auth/authorize?${authorizeQuery(over)}`, { redirect: "manual" });
      expect(res.status).toBe(302);
      const location = new URL(res.headers.get("location") as string);
      expect(`${location.origin}${location.pathname}`).toBe(redirectUri);
      expect(location.searchParams.get("error")).toBe(error);
      expect(location.searchParams.get("state")).toBe("s-123");
    }
  });

  it("Cancel on the page redirects back with access_denied", async () => {
    const form = authorizeQuery({ decision: "deny" });
    const res = await fetch(`${t.url}/auth/authorize`, { method: "POST", body: form, redirect: "manual" });
    expect(res.status).toBe(302);
    expect(new URL(res.headers.get("location") as string).searchParams.get("error")).toBe("access_denied");
  });

  it("other methods on /auth/authorize are 405 with Allow", async () => {
    const res = await fetch(`${t.url}/auth/authorize`, { method: "DELETE" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET, HEAD, POST");
  });
});
