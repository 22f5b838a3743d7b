// Grants leak nothing: listings, recursive listings, the change feed and promotion apply the
// same decision as reading the entry itself, and the insights API touches a store only with
// the grants REST would need (docs/auth.md, "What each operation needs").

import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChangeService } from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ADMIN, type AuthServer, DATA, type Issuer, startAuthServer, startIssuer } from "../auth/support.js";
import { listingEntries } from "../rest/rest-client.js";

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
  t = await startAuthServer(issuer, { pollWait: 200 });
  admin = await issuer.token(ADMIN);
});
afterEach(async () => {
  await t.stop();
});

/** PUT as an administrator: a directory for a path ending in "/", else a file. */
async function put(path: string, body = "x"): Promise<void> {
  const res = await t.call("PUT", `${DATA}/${path}`, admin, path.endsWith("/") ? {} : { body });
  expect([200, 201]).toContain(res.status);
}

async function json(res: Response): Promise<Record<string, unknown>> {
  return (await res.json()) as Record<string, unknown>;
}

describe("a read grant through a file", () => {
  // Grant tpl/b/c where tpl/b is a file: tpl is on the way, tpl/b is not.
  let reader: string;
  beforeEach(async () => {
    await put("home/tpl/");
    await put("home/tpl/b", "secret");
    await put("home/tpl/ok/");
    await put("home/top.json");
    reader = await issuer.token({
      trove_grants: [
        { store: "home", path: "tpl/b/c", ops: ["read"] },
        { store: "home", path: "tpl/ok", ops: ["read"] },
      ],
    });
  });

  it("GET of the file answers 401 and HEAD too", async () => {
    expect((await t.call("GET", `${DATA}/home/tpl/b`, reader)).status).toBe(401);
    expect((await t.call("HEAD", `${DATA}/home/tpl/b`, reader)).status).toBe(401);
  });

  it("a listing of its directory leaves it out, with and without include-access", async () => {
    for (const query of ["", "?include-access=true"]) {
      const res = await t.call("GET", `${DATA}/home/tpl/${query}`, reader);
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(listingEntries(text).map((e) => e.name)).toEqual(["ok"]);
      expect(text).not.toContain('"b"');
    }
    const withAccess = await t.call("GET", `${DATA}/home/tpl/?include-access=true`, reader);
    expect(listingEntries(await withAccess.text()).map((e) => [e.name, e.access])).toEqual([["ok", "read"]]);
  });

  it("a recursive listing of the root leaves it out", async () => {
    const res = await t.call("GET", `${DATA}/home/?recursive=true&include-access=true`, reader);
    expect(res.status).toBe(200);
    expect(listingEntries(await res.text()).map((e) => [e.name, e.access])).toEqual([
      ["tpl", "read"],
      ["tpl/ok", "read"],
    ]);
  });

  it("a listing of the file itself is refused as its GET is", async () => {
    expect((await t.call("GET", `${DATA}/home/tpl/b/`, reader)).status).toBe(401);
  });

  it("the poll feed and WatchChanges leave out its changes", async () => {
    const poll = async (query: string, token = reader) => {
      const res = await t.call("GET", `/resources/v2/poll${query}`, token);
      const text = await res.text();
      return text.trim() === "" ? [] : text.trim().split("\n");
    };
    const visible = (lines: string[]) => lines.map((l) => l.split("|")[2]);
    expect(visible(await poll("?store=home:0", admin))).toContain("idr://home/tpl/b");
    expect(visible(await poll("?store=home:0")).sort()).toEqual(["idr://home/", "idr://home/tpl", "idr://home/tpl/ok"]);
    // A change to the file, and its deletion: neither reaches the reader.
    await put("home/tpl/b", "changed");
    expect((await t.call("DELETE", `${DATA}/home/tpl/b`, admin)).status).toBe(200);
    await put("home/tpl/ok/seen.json");
    const all = await poll("?store=home:0");
    expect(all.every((l) => !l.includes("idr://home/tpl/b|"))).toBe(true);
    expect(visible(all)).toContain("idr://home/tpl/ok/seen.json");

    const transport = createGrpcTransport({
      baseUrl: t.url,
      interceptors: [
        (next) => (req) => {
          req.header.set("Authorization", `Bearer ${reader}`);
          return next(req);
        },
      ],
    });
    const changes = createClient(ChangeService, transport);
    const abort = new AbortController();
    const paths: string[] = [];
    try {
      for await (const m of changes.watchChanges(
        { cursors: [{ store: "home", eventId: 0n }] },
        { signal: abort.signal },
      )) {
        for (const e of m.events) if (e.kind.case === "change") paths.push(e.kind.value.path);
        if (paths.includes("tpl/ok/seen.json")) break;
      }
    } finally {
      abort.abort();
    }
    expect(paths.filter((p) => p.startsWith("tpl/b"))).toEqual([]);
  });
});

describe("the insights API touches a store with the grants REST would need", () => {
  const PROJECTS = "/insights/v1/projects";
  const projectGrant = { project: "project://acme/P", ops: ["read", "write"] };
  const owner = () =>
    issuer.token({
      trove_account: "acme",
      scope: "report:content-insights",
      trove_grants: [{ store: "P", ops: ["read", "write", "delete"] }, projectGrant],
    });
  let projectId: string;

  async function post(token: string, path: string, body: unknown): Promise<Response> {
    return t.call("POST", path, token, { body: JSON.stringify(body), headers: { "Content-Type": "application/json" } });
  }
  async function environment(token: string, name: string): Promise<Response> {
    return post(token, `${PROJECTS}/${projectId}/environments`, { name });
  }

  beforeEach(async () => {
    const res = await post(await owner(), PROJECTS, { name: "P" });
    expect(res.status).toBe(201);
    projectId = (await json(res)).id as string;
  });

  it("creating an environment needs write on its top-level directory: a project grant alone cannot adopt one", async () => {
    await put("P/secret/");
    await put("P/secret/plan.txt", "the plan");
    const projectOnly = await issuer.token({
      trove_account: "acme",
      scope: "report:content-insights",
      trove_grants: [projectGrant],
    });
    const refused = await environment(projectOnly, "secret");
    expect(refused.status).toBe(403);
    expect(await refused.text()).toContain("may not write /secret in store P");
    const environments = await t.call("GET", `${PROJECTS}/${projectId}/environments`, projectOnly);
    expect((await json(environments)).environments).toEqual([]);
    // Nor can it make a new one.
    expect((await environment(projectOnly, "fresh")).status).toBe(403);
    expect((await t.call("GET", `${DATA}/P/fresh`, admin)).status).toBe(404);
    // A grant to write that directory is what REST would need to make it: enough.
    const writer = await issuer.token({
      trove_account: "acme",
      trove_grants: [projectGrant, { store: "P", path: "fresh", ops: ["write"] }],
    });
    expect((await environment(writer, "fresh")).status).toBe(201);
  });

  describe("promotion", () => {
    let from: string;
    let to: string;
    beforeEach(async () => {
      const o = await owner();
      from = (await json(await environment(o, "draft"))).id as string;
      to = (await json(await environment(o, "live"))).id as string;
      for (const dir of ["open", "secret", "tpl"]) await put(`P/draft/${dir}/`);
      await put("P/draft/open/a.json");
      await put("P/draft/secret/topsecret-name.txt", "s");
      await put("P/draft/tpl/b", "file on the way");
    });
    const promote = async (token: string, resources?: unknown[]) =>
      post(token, `${PROJECTS}/${projectId}/promotions`, {
        fromEnvironmentID: from,
        toEnvironmentID: to,
        ...(resources ? { resources } : {}),
      });

    it("names no file below the source that the caller may not read", async () => {
      const partial = await issuer.token({
        trove_account: "acme",
        trove_grants: [
          projectGrant,
          { store: "P", path: "draft/open", ops: ["read"] },
          { store: "P", path: "draft/tpl/b/c", ops: ["read"] },
          { store: "P", path: "live", ops: ["write"] },
        ],
      });
      for (const resources of [undefined, ["/"], ["/tpl"]]) {
        const res = await promote(
          partial,
          resources?.filter((p) => p !== "/"),
        );
        const text = await res.text();
        expect(text).not.toContain("topsecret-name");
        expect(text).not.toContain("tpl/b");
      }
      const res = await promote(partial);
      expect(res.status).toBe(200);
      const body = JSON.parse(await (await promote(partial)).text()) as Record<string, unknown>;
      expect(body.resources).toEqual([{ path: "/open/a.json", tag: expect.any(String) }]);
      expect(body.promoted).toBe(1);
      expect(body.failed).toBe(0);
      expect((await t.call("GET", `${DATA}/P/live/secret/topsecret-name.txt`, admin)).status).toBe(404);
    });

    it("a path the caller names and may not read is refused as its GET is", async () => {
      const partial = await issuer.token({
        trove_account: "acme",
        trove_grants: [
          projectGrant,
          { store: "P", path: "draft/tpl/b/c", ops: ["read"] },
          { store: "P", ops: ["write"] },
        ],
      });
      const res = await promote(partial, ["/tpl/b"]);
      expect(res.status).toBe(403);
      expect((await t.call("GET", `${DATA}/P/live/tpl/b`, admin)).status).toBe(404);
    });

    it("needs write on each target, including each directory it creates", async () => {
      // May write the file's path but not create live/open.
      const fileOnly = await issuer.token({
        trove_account: "acme",
        trove_grants: [
          projectGrant,
          { store: "P", path: "draft", ops: ["read"] },
          { store: "P", path: "live/open/a.json", ops: ["write"] },
        ],
      });
      const refused = await promote(fileOnly, ["/open/a.json"]);
      expect(refused.status).toBe(403);
      expect(await refused.text()).toContain("may not create the directory /live/open in store P");
      expect((await t.call("GET", `${DATA}/P/live/open/`, admin)).status).toBe(404);
      // Once the directory exists, writing the file is all a PUT would need.
      await put("P/live/open/");
      expect((await promote(fileOnly, ["/open/a.json"])).status).toBe(200);
      // Without write on the target, nothing is written.
      const readOnly = await issuer.token({
        trove_account: "acme",
        trove_grants: [projectGrant, { store: "P", ops: ["read"] }],
      });
      expect((await promote(readOnly, ["/open/a.json"])).status).toBe(403);
    });
  });
});
