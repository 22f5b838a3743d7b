// A read grant below a path makes the directories on the way listable, never
// the contents of a file that sits where such a directory would be.

import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ADMIN, type AuthServer, DATA, type Issuer, startAuthServer, startIssuer } from "./support.js";

let issuer: Issuer;
let t: AuthServer;

beforeAll(async () => {
  issuer = await startIssuer();
});
afterAll(async () => {
  await issuer.stop();
});
beforeEach(async () => {
  t = await startAuthServer(issuer);
});
afterEach(async () => {
  await t.stop();
});

describe("traversal grants", () => {
  it("a file on the way to a granted path is not readable: GET and HEAD answer 401, the content never leaves", async () => {
    const admin = await issuer.token(ADMIN);
    expect((await t.call("PUT", `${DATA}/home/a`, admin, { body: "secret" })).status).toBe(201);
    const reader = await issuer.token({ trove_grants: [{ store: "home", path: "a/b/", ops: ["read"] }] });
    const get = await t.call("GET", `${DATA}/home/a`, reader);
    expect(get.status).toBe(401);
    expect(await get.text()).not.toContain("secret");
    expect((await t.call("HEAD", `${DATA}/home/a`, reader)).status).toBe(401);
    expect(await (await t.call("GET", `${DATA}/home/a`, admin)).text()).toBe("secret");
  });
});
