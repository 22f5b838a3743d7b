// No secret is ever logged: the request log names the caller, never the
// Authorization header nor the token, accepted or refused.

import { Writable } from "node:stream";
import { pino } from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import { createJwtAuthenticator } from "../../src/auth/verifier.js";
import { startServer, type TestServer } from "../support/server.js";
import { ADMIN, AUDIENCE, type Issuer, startIssuer } from "./support.js";

let issuer: Issuer;
let t: TestServer;
const lines: string[] = [];

beforeAll(async () => {
  issuer = await startIssuer();
  const sink = new Writable({
    write(chunk, _encoding, done) {
      lines.push(String(chunk));
      done();
    },
  });
  t = await startServer({
    logger: pino({ level: "trace" }, sink),
    auth: createJwtAuthenticator({ issuer: issuer.url, audience: AUDIENCE }),
  });
});
afterAll(async () => {
  await t?.stop();
  await issuer?.stop();
});

it("the request log holds the caller's subject and never a token, accepted or refused", async () => {
  const tokens = [
    await issuer.token(ADMIN),
    await issuer.token(ADMIN, { expiresIn: -300 }),
    await issuer.token({ ...ADMIN, aud: "other" }),
    "eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.c2lnbmF0dXJl",
  ];
  const statuses: number[] = [];
  for (const token of tokens) {
    for (const path of ["/resources/v2/data/home/", "/trove.resources.v2.StoreService/ListStores"]) {
      const res = await fetch(`${t.url}${path}`, {
        method: path.startsWith("/trove") ? "POST" : "GET",
        headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
        body: path.startsWith("/trove") ? "{}" : undefined,
      });
      statuses.push(res.status);
      await res.arrayBuffer();
    }
  }
  expect(statuses).toEqual([200, 200, 401, 401, 401, 401, 401, 401]);
  await new Promise((r) => setTimeout(r, 50));
  const log = lines.join("");
  expect(log).toContain('"caller":"alice"');
  expect(lines.filter((l) => l.includes('"msg":"request"'))).toHaveLength(8);
  for (const token of tokens) {
    for (const part of token.split(".")) expect(log).not.toContain(part);
  }
  expect(log.toLowerCase()).not.toContain("bearer");
  expect(log.toLowerCase()).not.toContain("authorization");
});
