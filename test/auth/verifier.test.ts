// The token verifier on its own: the Authorization header, the claims checked,
// and the cache of verified tokens (by their text, long ones by SHA-256 hash, until they expire, bounded).

import { Code, ConnectError } from "@connectrpc/connect";
import { createLocalJWKSet, exportJWK, generateKeyPair, type JWTVerifyGetKey, SignJWT } from "jose";
import { beforeAll, describe, expect, it } from "vitest";
import { CHALLENGE_KEY, createJwtAuthenticator } from "../../src/auth/verifier.js";

const ISSUER = "https://issuer.example";
let getKey: JWTVerifyGetKey;
/** A token signed by the published key; `iss` and `aud` are right unless `claims` replace them. */
let sign: (claims: Record<string, unknown>, exp: number | undefined, nbf?: number) => Promise<string>;

beforeAll(async () => {
  const { privateKey, publicKey } = await generateKeyPair("ES256");
  getKey = createLocalJWKSet({ keys: [{ ...(await exportJWK(publicKey)), kid: "k1", alg: "ES256" }] });
  sign = (claims, exp, nbf) => {
    const jwt = new SignJWT({
      iss: ISSUER,
      aud: "trove",
      sub: "alice",
      trove_grants: [{ store: "home", ops: ["read"] }],
      ...claims,
    }).setProtectedHeader({ alg: "ES256", kid: "k1" });
    if (exp !== undefined) jwt.setExpirationTime(exp);
    if (nbf !== undefined) jwt.setNotBefore(nbf);
    return jwt.sign(privateKey);
  };
});

async function refusal(run: () => unknown): Promise<ConnectError> {
  try {
    await run();
  } catch (err) {
    if (err instanceof ConnectError) return err;
    throw err;
  }
  throw new Error("accepted");
}

/** An authenticator on a hand-moved clock that counts key lookups (one per signature verification). */
function counting(options: { cacheSize?: number } = {}) {
  let lookups = 0;
  let now = 1_700_000_000_000;
  const auth = createJwtAuthenticator({
    issuer: ISSUER,
    audience: "trove",
    keys: (header, token) => {
      lookups++;
      return getKey(header, token);
    },
    now: () => now,
    ...options,
  });
  return {
    auth,
    lookups: () => lookups,
    seconds: () => Math.floor(now / 1000),
    advance(ms: number) {
      now += ms;
    },
  };
}

describe("Authorization header", () => {
  it.each([
    [undefined, "authentication required: send Authorization: Bearer <token>", 'Bearer realm="trove"'],
    ["", "authentication required: send Authorization: Bearer <token>", 'Bearer realm="trove"'],
    ["Basic YTpi", "the Authorization header must use the Bearer scheme", 'Bearer realm="trove"'],
    [
      "Bearer not-a-jwt",
      "malformed bearer token: expected a JWT",
      'Bearer realm="trove", error="invalid_token", error_description="malformed bearer token: expected a JWT"',
    ],
  ])("%j is refused: %s", async (header, reason, challenge) => {
    const err = await refusal(() => counting().auth.authenticate(header));
    expect(err.code).toBe(Code.Unauthenticated);
    expect(err.rawMessage).toBe(reason);
    expect(err.metadata.get(CHALLENGE_KEY)).toBe(challenge);
  });

  it("the scheme is case-insensitive", async () => {
    const c = counting();
    const token = await sign({}, c.seconds() + 60);
    expect((await c.auth.authenticate(`bearer ${token}`)).subject).toBe("alice");
  });
});

describe("claims checked", () => {
  it("exp and nbf allow 30 s of clock skew, not more", async () => {
    const c = counting();
    const s = c.seconds();
    expect((await c.auth.authenticate(`Bearer ${await sign({}, s - 20)}`)).subject).toBe("alice");
    expect((await refusal(async () => c.auth.authenticate(`Bearer ${await sign({}, s - 40)}`))).rawMessage).toBe(
      "token expired",
    );
    expect((await c.auth.authenticate(`Bearer ${await sign({}, s + 600, s + 20)}`)).subject).toBe("alice");
    expect(
      (await refusal(async () => c.auth.authenticate(`Bearer ${await sign({}, s + 600, s + 40)}`))).rawMessage,
    ).toBe("token not yet valid (nbf)");
  });

  it("a token without exp is refused: it could never leave the cache", async () => {
    const c = counting();
    const noExp = await sign({}, undefined);
    expect((await refusal(() => c.auth.authenticate(`Bearer ${noExp}`))).rawMessage).toBe("token has no exp claim");
  });

  it("iss and aud must be the configured ones", async () => {
    const c = counting();
    const s = c.seconds() + 600;
    expect(
      (await refusal(async () => c.auth.authenticate(`Bearer ${await sign({ iss: "https://evil" }, s)}`))).rawMessage,
    ).toBe("token issuer is not the configured issuer");
    expect(
      (await refusal(async () => c.auth.authenticate(`Bearer ${await sign({ aud: "other" }, s)}`))).rawMessage,
    ).toBe("token audience is not trove");
    const several = await c.auth.authenticate(`Bearer ${await sign({ aud: ["other", "trove"] }, s)}`);
    expect(several.subject).toBe("alice");
  });

  it("a token signed by another key with the published key id is refused", async () => {
    const { privateKey } = await generateKeyPair("ES256");
    const c = counting();
    const forged = await new SignJWT({ iss: ISSUER, aud: "trove", sub: "mallory" })
      .setProtectedHeader({ alg: "ES256", kid: "k1" })
      .setExpirationTime(c.seconds() + 600)
      .sign(privateKey);
    expect((await refusal(() => c.auth.authenticate(`Bearer ${forged}`))).rawMessage).toBe(
      "token signature is invalid",
    );
  });

  it("claims of the wrong shape answer Unauthenticated with the reason", async () => {
    const c = counting();
    const token = await sign({ trove_grants: [{ store: "home", ops: ["admin"] }] }, c.seconds() + 60);
    const err = await refusal(() => c.auth.authenticate(`Bearer ${token}`));
    expect(err.code).toBe(Code.Unauthenticated);
    expect(err.rawMessage).toBe('token claims: trove_grants[0].ops: unknown operation "admin" (read, write or delete)');
  });

  it("an unsigned token (alg none) is refused", async () => {
    const c = counting();
    const part = (o: unknown) => Buffer.from(JSON.stringify(o)).toString("base64url");
    const none = `${part({ alg: "none" })}.${part({ iss: ISSUER, aud: "trove", exp: c.seconds() + 60 })}.x`;
    const err = await refusal(() => c.auth.authenticate(`Bearer ${none}`));
    expect(err.code).toBe(Code.Unauthenticated);
    expect(err.rawMessage).toBe("token signature algorithm not allowed");
  });
});

describe("cache of verified tokens", () => {
  it("a token seen before is answered synchronously, without verifying it again", async () => {
    const c = counting();
    const header = `Bearer ${await sign({}, c.seconds() + 600)}`;
    const first = c.auth.authenticate(header);
    expect(first).toBeInstanceOf(Promise);
    const caller = await first;
    const again = c.auth.authenticate(header);
    expect(again).toBe(caller);
    expect(c.lookups()).toBe(1);
  });

  it("a cached token is verified again once it expired (plus the skew), and then refused", async () => {
    const c = counting();
    const header = `Bearer ${await sign({}, c.seconds() + 60)}`;
    await c.auth.authenticate(header);
    c.advance(80_000);
    expect(c.auth.authenticate(header)).not.toBeInstanceOf(Promise);
    c.advance(11_000);
    const err = await refusal(() => c.auth.authenticate(header));
    expect(err.rawMessage).toBe("token expired");
    expect(c.lookups()).toBe(2);
  });

  it("is bounded: the least recently used token is forgotten first", async () => {
    const c = counting({ cacheSize: 2 });
    const s = c.seconds();
    const [a, b, d] = await Promise.all([1, 2, 3].map(async (n) => `Bearer ${await sign({ n }, s + 600)}`));
    await c.auth.authenticate(a as string);
    await c.auth.authenticate(b as string);
    c.auth.authenticate(a as string); // a is now the most recently used
    await c.auth.authenticate(d as string); // evicts b
    expect(c.lookups()).toBe(3);
    expect(c.auth.authenticate(a as string)).not.toBeInstanceOf(Promise);
    expect(c.auth.authenticate(b as string)).toBeInstanceOf(Promise);
  });

  it("a token longer than 2,048 characters is cached too, by its hash (issue 32), and no other text stands for it", async () => {
    const c = counting();
    const header = `Bearer ${await sign({ padding: "x".repeat(3000) }, c.seconds() + 600)}`;
    expect(header.length).toBeGreaterThan(3000);
    const caller = await c.auth.authenticate(header);
    expect(c.auth.authenticate(header)).toBe(caller);
    expect(c.lookups()).toBe(1);
    // Its cache key is a line break and the hash: a header cannot carry one, so no sent text matches it.
    const err = await refusal(() => c.auth.authenticate("Bearer \nnot-a-token"));
    expect(err.rawMessage).toBe("malformed bearer token: expected a JWT");
  });

  it("a token ending as a cached one does is verified, not taken for it, and the cached one stays (issue 32)", async () => {
    const c = counting();
    const token = await sign({}, c.seconds() + 600);
    const caller = await c.auth.authenticate(`Bearer ${token}`);
    // Another payload, the same signature: the cache's key (the token's end) is the same.
    const [head, payload, signature] = token.split(".") as [string, string, string];
    const forged = `${head}.${payload.slice(0, -4)}AAAA.${signature}`;
    const err = await refusal(() => c.auth.authenticate(`Bearer ${forged}`));
    expect(err.code).toBe(Code.Unauthenticated);
    expect(c.lookups()).toBe(2);
    expect(c.auth.authenticate(`Bearer ${token}`)).toBe(caller);
  });

  it("a connection's repeated token is answered by one comparison until it expires, then verified and refused (issue 32 session 14)", async () => {
    const c = counting();
    const connection = {};
    const header = `Bearer ${await sign({}, c.seconds() + 60)}`;
    const caller = await c.auth.authenticate(header, connection);
    // The first hit remembers it on the connection, the next ones find it there.
    expect(c.auth.authenticate(header, connection)).toBe(caller);
    expect(c.auth.authenticate(header, connection)).toBe(caller);
    expect(c.lookups()).toBe(1);
    c.advance(91_000);
    const err = await refusal(() => c.auth.authenticate(header, connection));
    expect(err.rawMessage).toBe("token expired");
    expect(c.lookups()).toBe(2);
  });

  it("another header on the same connection is checked on its own, and a forgotten token stays known to its connection only until it expires (issue 32 session 14)", async () => {
    const c = counting({ cacheSize: 1 });
    const connection = {};
    const s = c.seconds();
    const [a, b] = await Promise.all([1, 2].map(async (n) => `Bearer ${await sign({ n }, s + 600)}`));
    const bad = `Bearer ${await sign({ aud: "other" }, s + 600)}`;
    const alice = await c.auth.authenticate(a as string, connection);
    expect(c.auth.authenticate(a as string, connection)).toBe(alice);
    expect((await refusal(() => c.auth.authenticate(bad, connection))).rawMessage).toBe("token audience is not trove");
    expect((await refusal(() => c.auth.authenticate(undefined, connection))).rawMessage).toBe(
      "authentication required: send Authorization: Bearer <token>",
    );
    // b pushes a out of the one-entry cache: another connection verifies a again, this one does not.
    await c.auth.authenticate(b as string);
    expect(c.auth.authenticate(a as string, connection)).toBe(alice);
    expect(c.auth.authenticate(a as string, {})).toBeInstanceOf(Promise);
  });

  it("refusals are not cached: the same bad token is refused each time", async () => {
    const c = counting();
    const header = `Bearer ${await sign({ aud: "other" }, c.seconds() + 600)}`;
    for (let i = 0; i < 2; i++) {
      expect((await refusal(() => c.auth.authenticate(header))).rawMessage).toBe("token audience is not trove");
    }
  });
});
