// Authentication and authorization on the REST face, against an external
// authorization server (oauth2-mock-server): every operation needs a bearer
// token of the configured issuer; a caller without the grant gets 401 (the spec's
// "not authorized").

import * as http2 from "node:http2";
import { OAuth2Server } from "oauth2-mock-server";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { listingEntries } from "../rest/rest-client.js";
import { ADMIN, type AuthServer, DATA, type Issuer, startAuthServer, startIssuer } from "./support.js";

const TEXT = "text/plain; charset=utf-8";
let issuer: Issuer;
let t: AuthServer;
let admin: string;

beforeAll(async () => {
  issuer = await startIssuer();
});
afterAll(async () => {
  await issuer.stop();
});
beforeEach(async () => {
  t = await startAuthServer(issuer);
  admin = await issuer.token(ADMIN);
});
afterEach(async () => {
  await t.stop();
});

/** Status, challenge and reason of a refusal, as a client sees them. */
async function refusal(res: Response) {
  return {
    status: res.status,
    server: res.headers.get("server"),
    type: res.headers.get("content-type"),
    challenge: res.headers.get("www-authenticate"),
    reason: (await res.text()).trim(),
  };
}

const invalid = (reason: string) => ({
  status: 401,
  server: "resources/1.0",
  type: TEXT,
  challenge: `Bearer realm="trove", error="invalid_token", error_description="${reason}"`,
  reason,
});

describe("authentication", () => {
  it("a valid token of the configured issuer is accepted", async () => {
    const res = await t.call("GET", `${DATA}/home/`, admin);
    expect(res.status).toBe(200);
  });

  it("no token: 401 with WWW-Authenticate: Bearer and a text/plain reason", async () => {
    expect(await refusal(await t.call("GET", `${DATA}/home/`, undefined))).toEqual({
      status: 401,
      server: "resources/1.0",
      type: TEXT,
      challenge: 'Bearer realm="trove"',
      reason: "authentication required: send Authorization: Bearer <token>",
    });
  });

  it("every endpoint needs it: stores, poll, HEAD, unknown paths", async () => {
    for (const [method, path] of [
      ["GET", "/resources/v2/stores"],
      ["GET", "/resources/v2/stores/home"],
      ["GET", "/resources/v2/poll"],
      ["HEAD", `${DATA}/home/`],
      ["DELETE", `${DATA}/home/x`],
      ["GET", "/resources/v2/nothing"],
    ]) {
      const res = await t.call(method as string, path as string, undefined);
      expect([method, path, res.status, res.headers.get("www-authenticate")]).toEqual([
        method,
        path,
        401,
        'Bearer realm="trove"',
      ]);
    }
  });

  it("REST over h2c needs the token the same way", async () => {
    const session = http2.connect(t.url);
    const get = (headers: http2.OutgoingHttpHeaders) =>
      new Promise<[number, string | undefined]>((resolve, reject) => {
        const req = session.request({ ":path": `${DATA}/home/`, ...headers });
        req.once("response", (h) => {
          req.resume();
          req.once("end", () => resolve([h[":status"] as number, h["www-authenticate"] as string | undefined]));
        });
        req.once("error", reject);
        req.end();
      });
    try {
      expect(await get({})).toEqual([401, 'Bearer realm="trove"']);
      expect(await get({ authorization: `Bearer ${admin}` })).toEqual([200, undefined]);
    } finally {
      session.destroy();
    }
  });

  it("another scheme than Bearer: 401", async () => {
    const res = await fetch(`${t.url}${DATA}/home/`, { headers: { Authorization: "Basic YWxpY2U6c2VjcmV0" } });
    expect((await refusal(res)).reason).toBe("the Authorization header must use the Bearer scheme");
  });

  it("a malformed token: 401 invalid_token", async () => {
    expect(await refusal(await t.call("GET", `${DATA}/home/`, "abc.def"))).toEqual(
      invalid("malformed bearer token: expected a JWT"),
    );
    expect(await refusal(await t.call("GET", `${DATA}/home/`, "abc.def.ghi"))).toEqual(invalid("malformed token"));
  });

  it("an expired token: 401 invalid_token, token expired", async () => {
    const expired = await issuer.token(ADMIN, { expiresIn: -120 });
    expect(await refusal(await t.call("GET", `${DATA}/home/`, expired))).toEqual(invalid("token expired"));
  });

  it("a token that expired within the 30 s clock tolerance is still accepted", async () => {
    const justExpired = await issuer.token(ADMIN, { expiresIn: -10 });
    expect((await t.call("GET", `${DATA}/home/`, justExpired)).status).toBe(200);
  });

  it("a token not valid yet (nbf beyond the tolerance): 401", async () => {
    const early = await issuer.token({ ...ADMIN, nbf: Math.floor(Date.now() / 1000) + 300 });
    expect(await refusal(await t.call("GET", `${DATA}/home/`, early))).toEqual(invalid("token not yet valid (nbf)"));
  });

  it("a token for another audience: 401", async () => {
    const other = await issuer.token({ ...ADMIN, aud: "billing" });
    expect(await refusal(await t.call("GET", `${DATA}/home/`, other))).toEqual(invalid("token audience is not trove"));
  });

  describe("tokens signed by another key", () => {
    let other: OAuth2Server;
    beforeAll(async () => {
      other = new OAuth2Server();
      await other.start(0, "127.0.0.1");
    });
    afterAll(async () => {
      await other.stop();
    });

    const forge = (kid?: string) =>
      other.issuer.buildToken({
        kid,
        scopesOrTransform: (_h, p) => Object.assign(p, ADMIN, { iss: issuer.url, aud: "trove", sub: "mallory" }),
      });

    it("with a key id the issuer does not publish: 401", async () => {
      await other.issuer.keys.generate("RS256");
      expect(await refusal(await t.call("GET", `${DATA}/home/`, await forge()))).toEqual(
        invalid("token signed by a key the issuer does not publish"),
      );
    });

    it("with the key id of the issuer's own key: 401, signature invalid", async () => {
      const kid = issuer.server.issuer.keys.get()?.kid as string;
      await other.issuer.keys.generate("RS256", { kid });
      expect(await refusal(await t.call("GET", `${DATA}/home/`, await forge(kid)))).toEqual(
        invalid("token signature is invalid"),
      );
    });

    it("by another issuer altogether: 401", async () => {
      const theirs = await other.issuer.buildToken({
        scopesOrTransform: (_h, p) => Object.assign(p, ADMIN, { aud: "trove" }),
      });
      expect((await t.call("GET", `${DATA}/home/`, theirs)).status).toBe(401);
    });
  });

  it("key rotation: tokens signed with the issuer's new key are accepted without a restart", async () => {
    expect((await t.call("GET", `${DATA}/home/`, admin)).status).toBe(200);
    const { kid } = await issuer.server.issuer.keys.generate("ES256");
    const rotated = await issuer.token(ADMIN, { kid });
    expect(JSON.parse(Buffer.from(rotated.split(".")[0] as string, "base64url").toString())).toMatchObject({
      alg: "ES256",
      kid,
    });
    expect((await t.call("GET", `${DATA}/home/`, rotated)).status).toBe(200);
    // Tokens of the earlier key keep working while the issuer still publishes it.
    expect((await t.call("GET", `${DATA}/home/`, await issuer.token(ADMIN))).status).toBe(200);
  });

  it("a refused PUT stores nothing", async () => {
    const res = await t.call("PUT", `${DATA}/home/a.txt`, undefined, { body: "x" });
    expect(res.status).toBe(401);
    expect((await t.call("GET", `${DATA}/home/a.txt`, admin)).status).toBe(404);
  });

  it("an issuer that cannot be reached: 503, not 401 (the token may be fine)", async () => {
    const down = await startAuthServer({ ...issuer, url: "http://127.0.0.1:9" });
    try {
      const res = await down.call("GET", `${DATA}/home/`, admin);
      expect(res.status).toBe(503);
      expect(await res.text()).toMatch(/^cannot fetch the issuer's signing keys: OpenID discovery failed/);
    } finally {
      await down.stop();
    }
  });
});

describe("authorization (401, the spec's 'not authorized')", () => {
  const grants = (...list: unknown[]) => issuer.token({ trove_grants: list });

  beforeEach(async () => {
    const mk = await t.call("POST", "/resources/v2/stores", admin, {
      body: '{"name":"brand"}',
      headers: { "Content-Type": "application/json" },
    });
    expect(mk.status).toBe(201);
    for (const [store, path, body] of [
      ["home", "templates/", undefined],
      ["home", "templates/a.json", "{}"],
      ["home", "templates/deep/", undefined],
      ["home", "templates/deep/b.json", "{}"],
      ["home", "themes/", undefined],
      ["home", "themes/t.json", "{}"],
      ["home", "other.json", "{}"],
      ["brand", "logo.json", "{}"],
    ] as const) {
      const res = await t.call("PUT", `${DATA}/${store}/${path}`, admin, {
        body,
        headers: body ? { "Content-Type": "application/json" } : {},
      });
      expect(res.status).toBe(201);
    }
  });

  it("a token for store A used on store B: 401 with insufficient_scope", async () => {
    const homeOnly = await grants({ store: "home", ops: ["read", "write", "delete"] });
    expect((await t.call("GET", `${DATA}/home/other.json`, homeOnly)).status).toBe(200);
    const res = await t.call("GET", `${DATA}/brand/logo.json`, homeOnly);
    expect(await refusal(res)).toEqual({
      status: 401,
      server: "resources/1.0",
      type: TEXT,
      challenge: 'Bearer realm="trove", error="insufficient_scope"',
      reason: "alice may not read /logo.json in store brand",
    });
    expect((await t.call("PUT", `${DATA}/brand/new.json`, homeOnly, { body: "{}" })).status).toBe(401);
    expect((await t.call("GET", `${DATA}/brand/`, homeOnly)).status).toBe(401);
    expect((await t.call("GET", `${DATA}/brand/new.json`, admin)).status).toBe(404);
  });

  it("a read-only grant: GET answers, PUT and DELETE are 401 and change nothing", async () => {
    const reader = await grants({ store: "home", ops: ["read"] });
    const before = await t.call("GET", `${DATA}/home/other.json`, reader);
    expect(before.status).toBe(200);
    const tag = before.headers.get("etag");
    expect((await t.call("PUT", `${DATA}/home/other.json`, reader, { body: '{"v":2}' })).status).toBe(401);
    expect((await t.call("PUT", `${DATA}/home/new/`, reader)).status).toBe(401);
    expect((await t.call("DELETE", `${DATA}/home/other.json`, reader)).status).toBe(401);
    expect((await t.call("DELETE", `${DATA}/home/templates/`, reader)).status).toBe(401);
    const after = await t.call("GET", `${DATA}/home/other.json`, reader);
    expect([after.status, after.headers.get("etag"), await after.text()]).toEqual([200, tag, "{}"]);
    expect((await t.call("GET", `${DATA}/home/templates/a.json`, reader)).status).toBe(200);
  });

  it("a path-prefix grant: operations inside the prefix succeed, outside are 401", async () => {
    const editor = await grants({ store: "home", path: "templates/", ops: ["read", "write", "delete"] });
    expect((await t.call("PUT", `${DATA}/home/templates/c.json`, editor, { body: "{}" })).status).toBe(201);
    expect((await t.call("DELETE", `${DATA}/home/templates/deep/`, editor)).status).toBe(200);
    expect((await t.call("PUT", `${DATA}/home/c.json`, editor, { body: "{}" })).status).toBe(401);
    expect((await t.call("GET", `${DATA}/home/other.json`, editor)).status).toBe(401);
    expect((await t.call("GET", `${DATA}/home/themes/`, editor)).status).toBe(401);
    expect((await t.call("DELETE", `${DATA}/home/themes/t.json`, editor)).status).toBe(401);
  });

  it("recursive listing: entries outside what the caller may read are left out", async () => {
    const editor = await grants({ store: "home", path: "templates/deep", ops: ["read"] });
    const res = await t.call("GET", `${DATA}/home/?recursive=true`, editor);
    expect(res.status).toBe(200);
    expect(listingEntries(await res.text()).map((e) => e.name)).toEqual([
      "templates",
      "templates/deep",
      "templates/deep/b.json",
    ]);
    const plain = await t.call("GET", `${DATA}/home/templates/`, editor);
    expect(listingEntries(await plain.text()).map((e) => e.name)).toEqual(["deep"]);
    // On the way to a grant means listing, not reading contents.
    expect((await t.call("GET", `${DATA}/home/templates/a.json`, editor)).status).toBe(401);
    // The full listing, for comparison.
    const all = await t.call("GET", `${DATA}/home/?recursive=true`, admin);
    expect(listingEntries(await all.text()).map((e) => e.name)).toEqual([
      "other.json",
      "templates",
      "templates/a.json",
      "templates/deep",
      "templates/deep/b.json",
      "themes",
      "themes/t.json",
    ]);
  });

  it("include-access reports exactly what each caller may do, per entry", async () => {
    const full = await grants({ store: "home", ops: ["read", "write", "delete"] });
    const mixed = await grants(
      { store: "home", ops: ["read"] },
      { store: "home", path: "templates/", ops: ["write"] },
      { store: "home", path: "templates/deep/", ops: ["delete"] },
    );
    const access = async (token: string) => {
      const res = await t.call("GET", `${DATA}/home/?recursive=true&include-access=true`, token);
      expect(res.status).toBe(200);
      return Object.fromEntries(listingEntries(await res.text()).map((e) => [e.name, e.access]));
    };
    const rwd = "read,write,delete";
    expect(await access(full)).toEqual({
      "other.json": rwd,
      templates: rwd,
      "templates/a.json": rwd,
      "templates/deep": rwd,
      "templates/deep/b.json": rwd,
      themes: rwd,
      "themes/t.json": rwd,
    });
    expect(await access(mixed)).toEqual({
      "other.json": "read",
      templates: "read,write",
      "templates/a.json": "read,write",
      "templates/deep": rwd,
      "templates/deep/b.json": rwd,
      themes: "read",
      "themes/t.json": "read",
    });
  });

  it("store administration needs the stores:admin permission", async () => {
    const reader = await grants({ store: "*", ops: ["read", "write", "delete"] });
    const body = { body: '{"name":"docs"}', headers: { "Content-Type": "application/json" } };
    const res = await t.call("POST", "/resources/v2/stores", reader, body);
    expect(await refusal(res)).toMatchObject({ status: 401, reason: "alice lacks the permission stores:admin" });
    expect((await t.call("DELETE", "/resources/v2/stores/brand", reader)).status).toBe(401);
    expect(
      (await t.call("POST", "/resources/v2/stores", await issuer.token({ scope: "stores:admin" }), body)).status,
    ).toBe(201);
  });

  it("the store listing shows only stores the caller may read something in", async () => {
    const homeTemplates = await grants({ store: "home", path: "templates", ops: ["read"] });
    const res = await t.call("GET", "/resources/v2/stores", homeTemplates);
    expect(res.status).toBe(200);
    const xml = await res.text();
    expect(xml).toContain('name="home"');
    expect(xml).not.toContain('name="brand"');
    expect((await t.call("GET", "/resources/v2/stores/brand", homeTemplates)).status).toBe(401);
  });

  it("a token without grants reads nothing", async () => {
    const none = await issuer.token({});
    expect((await t.call("GET", `${DATA}/home/`, none)).status).toBe(401);
    const stores = await t.call("GET", "/resources/v2/stores", none);
    expect(stores.status).toBe(200);
    expect(await stores.text()).not.toContain("<store ");
  });
});
