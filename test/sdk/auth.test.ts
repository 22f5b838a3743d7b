// Token providers against real issuers: the server's development issuer (client
// credentials) and oauth2-mock-server; reuse, single flight, expiry, 401 refetch,
// and the typed errors of authentication.

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  clientCredentials,
  createRestClient,
  devIssuer,
  isUnauthorizedError,
  staticToken,
  TroveError,
  UnauthorizedError,
  UnavailableError,
} from "../../sdk/src/index.js";
import { type AuthServer, type Issuer, startAuthServer, startIssuer } from "../auth/support.js";
import { countingFetch, type DevServer, rejection, startDevServer } from "./support.js";

describe("client-credentials token provider against the development issuer", () => {
  let server: DevServer;

  beforeAll(async () => {
    server = await startDevServer();
  });
  afterAll(async () => {
    await server?.stop();
  });

  it("one token serves many requests; 20 concurrent first requests fetch it once", async () => {
    const counter = countingFetch();
    const auth = clientCredentials({
      tokenUrl: server.tokenUrl,
      clientId: server.clientId,
      clientSecret: server.clientSecret,
      fetch: counter.fetch,
    });
    const rest = createRestClient({ baseUrl: server.url, auth });
    const listings = await Promise.all(Array.from({ length: 20 }, () => rest.list("home", "")));
    expect(listings).toHaveLength(20);
    expect(counter.tokenRequests()).toBe(1);
    await rest.put("home", "a.txt", "a");
    await rest.stores.list();
    expect(counter.tokenRequests()).toBe(1);
  });

  it("renews the token shortly before expires_in runs out (injectable clock), once under concurrency", async () => {
    const counter = countingFetch();
    let clock = 1_000_000;
    const auth = clientCredentials({
      tokenUrl: server.tokenUrl,
      clientId: server.clientId,
      clientSecret: server.clientSecret,
      fetch: counter.fetch,
      now: () => clock,
    });
    const first = await auth.getToken();
    clock += 569_000; // 600 s tokens, renewed 30 s before the end
    expect(await auth.getToken()).toBe(first);
    expect(counter.tokenRequests()).toBe(1);
    clock += 2_000;
    const renewed = await Promise.all(Array.from({ length: 10 }, () => auth.getToken()));
    expect(counter.tokenRequests()).toBe(2);
    expect(new Set(renewed).size).toBe(1);
    const rest = createRestClient({ baseUrl: server.url, auth });
    expect((await rest.list("home", "")).tag).not.toBe("");
  });

  it("form-field client authentication and issuer discovery work as well", async () => {
    const auth = clientCredentials({
      issuer: `${server.url}/auth`,
      clientId: server.clientId,
      clientSecret: server.clientSecret,
      authMethod: "post",
    });
    const rest = createRestClient({ baseUrl: server.url, auth });
    expect((await rest.stores.list()).map((s) => s.name)).toContain("home");
  });

  it("devIssuer reads the credentials from the data directory", async () => {
    const rest = createRestClient({
      baseUrl: server.url,
      auth: await devIssuer({ baseUrl: server.url, dataDir: server.issuerDir }),
    });
    expect((await rest.list("home", "")).entries).toBeDefined();
  });

  it("a token the server refuses (401) is dropped and fetched again, once", async () => {
    let served = 0;
    const tokenFetch: typeof fetch = async (input, init) => {
      served += 1;
      if (served === 1) {
        return new Response(JSON.stringify({ access_token: "not-a-jwt", token_type: "Bearer", expires_in: 600 }), {
          headers: { "Content-Type": "application/json" },
        });
      }
      return fetch(input, init);
    };
    const auth = clientCredentials({
      tokenUrl: server.tokenUrl,
      clientId: server.clientId,
      clientSecret: server.clientSecret,
      fetch: tokenFetch,
    });
    const rest = createRestClient({ baseUrl: server.url, auth });
    await rest.put("home", "retried.txt", "r");
    expect(served).toBe(2);
    expect((await rest.head("home", "retried.txt")).notModified).toBe(false);
    expect(served).toBe(2);
  });

  it("wrong client credentials are a TroveError naming the token endpoint's answer", async () => {
    const auth = clientCredentials({ tokenUrl: server.tokenUrl, clientId: server.clientId, clientSecret: "wrong" });
    const err = await rejection(createRestClient({ baseUrl: server.url, auth }).list("home", ""));
    expect(err).toBeInstanceOf(TroveError);
    expect((err as TroveError).status).toBe(401);
    expect((err as TroveError).message).toMatch(/token endpoint refused/);
  });

  it("no token, or a static token that is not valid, is UnauthorizedError with the challenge", async () => {
    const none = await rejection(createRestClient({ baseUrl: server.url }).list("home", ""));
    expect(none).toBeInstanceOf(UnauthorizedError);
    expect((none as UnauthorizedError).challenge).toMatch(/^Bearer/);
    expect((none as UnauthorizedError).insufficientScope).toBe(false);
    const bad = await rejection(createRestClient({ baseUrl: server.url, auth: staticToken("x.y.z") }).get("home", "a"));
    expect(isUnauthorizedError(bad)).toBe(true);
    expect((bad as UnauthorizedError).challenge).toMatch(/invalid_token/);
  });
});

describe("errors of an external issuer (oauth2-mock-server)", () => {
  let issuer: Issuer;
  let server: AuthServer;

  beforeAll(async () => {
    issuer = await startIssuer();
    server = await startAuthServer(issuer);
  });
  afterAll(async () => {
    await server?.stop();
    await issuer?.stop();
  });

  it("a valid token without the grant is UnauthorizedError with insufficientScope", async () => {
    const token = await issuer.token({ trove_grants: [{ store: "other", ops: ["read"] }] });
    const err = await rejection(createRestClient({ baseUrl: server.url, auth: token }).list("home", ""));
    expect(err).toBeInstanceOf(UnauthorizedError);
    expect((err as UnauthorizedError).insufficientScope).toBe(true);
    expect((err as UnauthorizedError).reason).toMatch(/may not read/);
  });

  it("an issuer that cannot be reached makes the server answer UnavailableError (503)", async () => {
    const gone = await startIssuer();
    const token = await gone.token({ trove_grants: [{ store: "*", ops: ["read"] }] });
    const lonely = await startAuthServer(gone);
    await gone.stop();
    try {
      const err = await rejection(createRestClient({ baseUrl: lonely.url, auth: token }).list("home", ""));
      expect(err).toBeInstanceOf(UnavailableError);
      expect((err as UnavailableError).status).toBe(503);
    } finally {
      await lonely.stop();
    }
  });
});
