// Token claims to access decisions (docs/auth.md, "Claims"): grants on stores,
// path prefixes, the directories on the way to a grant, permissions, projects.

import { describe, expect, it } from "vitest";
import { accessOf } from "../../src/auth/caller.js";
import { ClaimError, callerFromClaims } from "../../src/auth/claims.js";

const grants = (...list: unknown[]) => callerFromClaims({ sub: "alice", trove_grants: list });

describe("store grants", () => {
  it("a grant without a path covers the whole store, and only that store", () => {
    const c = grants({ store: "home", ops: ["read"] });
    expect(c.may("read", { store: "home", path: "" })).toBe(true);
    expect(c.may("read", { store: "home", path: "a/b/c.json" })).toBe(true);
    expect(c.may("write", { store: "home", path: "a" })).toBe(false);
    expect(c.may("read", { store: "brand", path: "a" })).toBe(false);
  });

  it('store "*" covers every store', () => {
    const c = grants({ store: "*", ops: ["read", "write", "delete"] });
    expect(accessOf(c, { store: "anything", path: "x/y", directory: true })).toEqual(["read", "write", "delete"]);
  });

  it("a path grant covers that node and everything below it, not its siblings nor names that merely start alike", () => {
    const c = grants({ store: "home", path: "templates/", ops: ["read", "write"] });
    expect(accessOf(c, { store: "home", path: "templates", directory: true })).toEqual(["read", "write"]);
    expect(accessOf(c, { store: "home", path: "templates/invoices/a.json", directory: true })).toEqual([
      "read",
      "write",
    ]);
    expect(accessOf(c, { store: "home", path: "templates-old/a.json", directory: true })).toEqual([]);
    expect(accessOf(c, { store: "home", path: "themes", directory: true })).toEqual([]);
    expect(accessOf(c, { store: "home", path: "templatesx", directory: true })).toEqual([]);
  });

  it("the directories on the way to a read grant are readable (to list down to it), nothing else about them", () => {
    const c = grants({ store: "home", path: "/a/b/", ops: ["read", "write", "delete"] });
    expect(accessOf(c, { store: "home", path: "", directory: true })).toEqual(["read"]);
    expect(accessOf(c, { store: "home", path: "a", directory: true })).toEqual(["read"]);
    expect(accessOf(c, { store: "home", path: "a/b", directory: true })).toEqual(["read", "write", "delete"]);
    expect(accessOf(c, { store: "home", path: "a/c", directory: true })).toEqual([]);
    expect(accessOf(c, { store: "home", path: "ab", directory: true })).toEqual([]);
    // A file needs a grant that covers its path: one sitting on the way is no way through.
    const file = (path: string) => ({ store: "home", path, directory: false });
    expect([c.may("read", file("a")), c.may("read", file("a/b/x.json"))]).toEqual([false, true]);
    expect(accessOf(c, file("a"))).toEqual([]);
    // Before the node is looked up, the answer is the most it could be.
    expect(c.may("read", { store: "home", path: "a" })).toBe(true);
    // A write-only grant gives no way through.
    expect(
      accessOf(grants({ store: "home", path: "a/b", ops: ["write"] }), { store: "home", path: "a", directory: true }),
    ).toEqual([]);
  });

  it("grants add up", () => {
    const c = grants({ store: "home", ops: ["read"] }, { store: "home", path: "drafts", ops: ["write", "delete"] });
    expect(accessOf(c, { store: "home", path: "drafts/x", directory: true })).toEqual(["read", "write", "delete"]);
    expect(accessOf(c, { store: "home", path: "final/x", directory: true })).toEqual(["read"]);
  });

  it("the claim may be a JSON text, for issuers that only emit strings", () => {
    const c = callerFromClaims({ trove_grants: JSON.stringify([{ store: "home", ops: ["read"] }]) });
    expect(c.may("read", { store: "home", path: "x" })).toBe(true);
  });

  it("no grants claim: no access to any store", () => {
    const c = callerFromClaims({ sub: "bob", scope: "stores:admin" });
    expect(c.may("read", { store: "home", path: "" })).toBe(false);
  });
});

describe("permissions, account and subject", () => {
  it("scope, scp and permissions all add permissions", () => {
    const c = callerFromClaims({
      scope: "openid stores:admin",
      scp: ["a"],
      permissions: ["report:content-insights"],
    });
    expect(c.holds("stores:admin")).toBe(true);
    expect(c.holds("report:content-insights")).toBe(true);
    expect(c.holds("a")).toBe(true);
    expect(c.holds("openid stores:admin")).toBe(false);
    expect(c.holds("b")).toBe(false);
  });

  it("account from trove_account, else account; subject from sub, else client_id", () => {
    expect(callerFromClaims({ sub: "s", trove_account: "acme", account: "other" })).toMatchObject({
      subject: "s",
      account: "acme",
    });
    expect(callerFromClaims({ client_id: "svc", account: "acme" })).toMatchObject({ subject: "svc", account: "acme" });
    expect(callerFromClaims({})).toMatchObject({ subject: "unknown", account: "" });
  });
});

describe("project grants", () => {
  it("project://{account}/{name} grants operations on that project; * matches any account or name", () => {
    const c = grants(
      { project: "project://acme/brochures", ops: ["read", "write"] },
      { project: "project://acme/*", ops: ["read"] },
    );
    expect(c.mayProject("write", "acme", "brochures")).toBe(true);
    expect(c.mayProject("write", "acme", "letters")).toBe(false);
    expect(c.mayProject("read", "acme", "letters")).toBe(true);
    expect(c.mayProject("read", "other", "brochures")).toBe(false);
    // A project grant is not a store grant.
    expect(c.may("read", { store: "brochures", path: "" })).toBe(false);
  });
});

describe("claims of the wrong shape are refused with a reason", () => {
  it.each([
    [{ trove_grants: {} }, "trove_grants must be a list of grants"],
    [{ trove_grants: "[" }, "trove_grants is a string that is not JSON"],
    [{ trove_grants: [{ store: "home" }] }, "trove_grants[0].ops must be a non-empty list of read, write and delete"],
    [{ trove_grants: [{ store: "home", ops: ["raed"] }] }, 'trove_grants[0].ops: unknown operation "raed"'],
    [{ trove_grants: [{ store: "no/such", ops: ["read"] }] }, "trove_grants[0].store: invalid store name"],
    [{ trove_grants: [{ store: "home", path: "../x", ops: ["read"] }] }, "trove_grants[0].path: path segment"],
    [{ trove_grants: [{ ops: ["read"] }] }, "trove_grants[0] needs either a store or a project"],
    [{ trove_grants: [{ project: "acme/brochures", ops: ["read"] }] }, "trove_grants[0].project must be project://"],
    [{ scope: 3 }, "scope must be a space-separated text"],
    [{ permissions: "stores:admin" }, "permissions must be a list of texts"],
    [{ trove_account: 7 }, "trove_account must be a string"],
  ])("%j", (claims, reason) => {
    expect(() => callerFromClaims(claims)).toThrow(ClaimError);
    expect(() => callerFromClaims(claims)).toThrow(reason);
  });
});
