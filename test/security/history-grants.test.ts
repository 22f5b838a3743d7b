// History gives the same access decision as the present (docs/history.md, "Access"): versions, a
// version's bytes and an earlier listing need read on the path; a restore is a write (a delete for
// what it deletes) of every path it changes, refused before anything changes. Users are the
// tokens' subjects. REST and gRPC, with an external issuer.

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChangeService } from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ADMIN, type AuthServer, DATA, type Issuer, startAuthServer, startIssuer } from "../auth/support.js";
import { listingEntries, parseXml } from "../rest/rest-client.js";

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
  admin = await issuer.token({ ...ADMIN, sub: "admin-ann" });
});
afterEach(async () => {
  await t.stop();
});

async function put(path: string, body: string, token = admin, headers: Record<string, string> = {}): Promise<string> {
  const res = await t.call("PUT", `${DATA}/${path}`, token, path.endsWith("/") ? { headers } : { body, headers });
  expect([200, 201], await res.clone().text()).toContain(res.status);
  return res.headers.get("etag") ?? "";
}

async function lastEvent(): Promise<number> {
  const res = await t.call("GET", "/resources/v2/poll", admin);
  const line = (await res.text()).split("\n").find((l) => l.startsWith("RESET home "));
  return Number(line?.split(" ")[2]);
}

async function tree(): Promise<string> {
  const res = await t.call("GET", `${DATA}/home/?recursive=true&include-deleted=true&include-blob-uuid=true`, admin);
  return res.text();
}

function grpc(token: string) {
  const transport = createGrpcTransport({
    baseUrl: t.url,
    interceptors: [
      (next) => (req) => {
        req.header.set("authorization", `Bearer ${token}`);
        return next(req);
      },
    ],
  });
  return { resources: createClient(ResourceService, transport), changes: createClient(ChangeService, transport) };
}

describe("history and grants", () => {
  let good: number;
  let docsTag: string;
  let editor: string;
  let reader: string;
  beforeEach(async () => {
    await put("home/docs/", "");
    await put("home/secret/", "");
    docsTag = await put("home/docs/a.txt", "docs v1");
    await put("home/secret/s.txt", "secret v1");
    good = await lastEvent();
    editor = await issuer.token({
      sub: "ed",
      trove_grants: [{ store: "home", path: "docs", ops: ["read", "write", "delete"] }],
    });
    reader = await issuer.token({ sub: "rita", trove_grants: [{ store: "home", path: "docs", ops: ["read"] }] });
    await put("home/docs/a.txt", "docs v2 by ed", editor, { "If-Match": docsTag });
    await put("home/secret/s.txt", "secret v2");
  });

  it("versions carry the users who made them (the tokens' subjects), on REST and gRPC", async () => {
    const res = await t.call("GET", `${DATA}/home/docs/a.txt?versions=true`, reader);
    expect(res.status).toBe(200);
    const doc = parseXml(await res.text()) as { versions: { version: Array<Record<string, string>> } };
    expect(doc.versions.version.map((v) => v.user)).toEqual(["ed", "admin-ann"]);
    const states = [];
    for await (const m of grpc(reader).resources.listVersions({ store: "home", path: "docs/a.txt" })) {
      states.push(...m.versions);
    }
    expect(states.map((v) => [v.user, v.operation, v.current])).toEqual([
      ["ed", "modify", true],
      ["admin-ann", "modify", false],
    ]);
  });

  it("a reader of docs sees nothing of secret's history: versions, version bytes and as-of reads answer 401 / PERMISSION_DENIED", async () => {
    expect((await t.call("GET", `${DATA}/home/secret/s.txt?versions=true`, reader)).status).toBe(401);
    const adminVersions = await t.call("GET", `${DATA}/home/secret/s.txt?versions=true`, admin);
    const old = (parseXml(await adminVersions.text()) as { versions: { version: Array<Record<string, string>> } })
      .versions.version[1]?.tag;
    expect((await t.call("GET", `${DATA}/home/secret/s.txt?version=${old}`, reader)).status).toBe(401);
    expect((await t.call("GET", `${DATA}/home/secret/s.txt?as-of=${good}`, reader)).status).toBe(401);
    const rpc = grpc(reader).resources;
    const err = await (async () => {
      for await (const _ of rpc.read({ store: "home", path: "secret/s.txt", version: old ?? "" })) {
        // nothing
      }
    })().catch((e: unknown) => e);
    expect(ConnectError.from(err).code).toBe(Code.PermissionDenied);
  });

  it("an earlier listing shows only what the caller may read now", async () => {
    const res = await t.call("GET", `${DATA}/home/?as-of=${good}&recursive=true`, reader);
    expect(res.status).toBe(200);
    expect(listingEntries(await res.text()).map((e) => e.name)).toEqual(["docs", "docs/a.txt"]);
    const entries = [];
    for await (const m of grpc(reader).resources.list({
      store: "home",
      path: "",
      recursive: true,
      asOf: String(good),
    })) {
      entries.push(...m.entries.map((e) => e.path));
    }
    expect(entries).toEqual(["docs", "docs/a.txt"]);
  });

  it("a restore that would change a path the caller may not write is refused before anything changes", async () => {
    const before = await tree();
    const res = await t.call("PUT", `${DATA}/home/?restore-as-of=${good}`, editor);
    expect(res.status).toBe(401);
    expect(await res.text()).toMatch(/may not write \/secret\/s\.txt .*nothing was restored/);
    expect(await tree()).toBe(before);
    // Within its grant it works, and the change is the editor's.
    const ok = await t.call("PUT", `${DATA}/home/docs/?restore-as-of=${good}`, editor);
    expect(ok.status, await ok.clone().text()).toBe(200);
    expect(await (await t.call("GET", `${DATA}/home/docs/a.txt`, reader)).text()).toBe("docs v1");
    // The reader may not restore at all.
    const refused = await t.call("PUT", `${DATA}/home/docs/a.txt?restore=${docsTag.replace(/"/g, "")}`, reader);
    expect(refused.status).toBe(401);
  });

  it("gRPC Restore: a dry run lists the changes and makes none; the real one makes them; WatchChanges carries the user", async () => {
    const rpc = grpc(editor);
    const dry = await rpc.resources.restore({ store: "home", path: "docs", asOf: String(good), dryRun: true });
    expect(dry.changes.map((c) => [c.operation, c.path])).toEqual([["modify", "docs/a.txt"]]);
    expect(dry.asOfEventId).toBe(BigInt(good));
    expect(await (await t.call("GET", `${DATA}/home/docs/a.txt`, admin)).text()).toBe("docs v2 by ed");
    const cursor = BigInt(await lastEvent());
    const done = await rpc.resources.restore({ store: "home", path: "docs", asOf: String(good) });
    expect(done.changes).toHaveLength(1);
    const watch = rpc.changes.watchChanges({ cursors: [{ store: "home", eventId: cursor }] });
    for await (const m of watch) {
      const change = m.events.find((e) => e.kind.case === "change" && e.kind.value.path === "docs/a.txt");
      if (change?.kind.case === "change") {
        expect(change.kind.value.user).toBe("ed");
        break;
      }
    }
    const bad = await rpc.resources.restore({ store: "home", path: "docs", asOf: "not-a-moment" }).catch((e) => e);
    expect(ConnectError.from(bad).code).toBe(Code.InvalidArgument);
    const both = await rpc.resources.restore({ store: "home", path: "docs/a.txt" }).catch((e) => e);
    expect(ConnectError.from(both).code).toBe(Code.InvalidArgument);
    const unknown = await rpc.resources.restore({ store: "home", path: "docs/a.txt", version: "nope" }).catch((e) => e);
    expect(ConnectError.from(unknown).code).toBe(Code.NotFound);
  });
});
