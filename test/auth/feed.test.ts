// The change feed shows a caller only what it may read: events of other stores
// and of paths outside its grants are left out, on REST poll and on gRPC alike.

import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ChangeService } from "@trove/sdk/gen/trove/resources/v2/changes_pb.js";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { ADMIN, type AuthServer, DATA, type Issuer, startAuthServer, startIssuer } from "./support.js";

let issuer: Issuer;
let t: AuthServer;
let admin: string;
let templatesReader: string;

beforeAll(async () => {
  issuer = await startIssuer();
});
afterAll(async () => {
  await issuer.stop();
});
beforeEach(async () => {
  t = await startAuthServer(issuer, { pollWait: 300 });
  admin = await issuer.token(ADMIN);
  templatesReader = await issuer.token({ trove_grants: [{ store: "home", path: "templates", ops: ["read"] }] });
  const mk = await t.call("POST", "/resources/v2/stores", admin, {
    body: '{"name":"brand","type":"snapshot"}',
    headers: { "Content-Type": "application/json" },
  });
  expect(mk.status).toBe(201);
  expect((await t.call("PUT", `${DATA}/home/templates/`, admin)).status).toBe(201);
});
afterEach(async () => {
  await t.stop();
});

async function poll(token: string, query = ""): Promise<{ status: number; lines: string[] }> {
  const res = await t.call("GET", `/resources/v2/poll${query}`, token);
  const text = await res.text();
  return { status: res.status, lines: text.trim() === "" ? [] : text.trim().split("\n") };
}

async function since(token: string, store: string): Promise<number> {
  const { lines } = await poll(token);
  return Number(lines.find((l) => l.startsWith(`RESET ${store} `))?.split(" ")[2]);
}

const uris = (lines: string[]) => lines.map((l) => l.split("|")[2]);

describe("change feed filtering", () => {
  it("a poll without cursors lists only the stores the caller may read", async () => {
    expect((await poll(admin)).lines.map((l) => l.split(" ").slice(0, 2).join(" "))).toEqual([
      "RESET brand",
      "RESET home",
    ]);
    expect((await poll(templatesReader)).lines).toEqual([expect.stringMatching(/^RESET home \d+$/)]);
  });

  it("a poll shows only events of paths the caller may read (and the directories on the way)", async () => {
    const from = await since(admin, "home");
    for (const path of ["other.json", "templates/a.json", "templates-x.json", "templates/b.json"]) {
      expect((await t.call("PUT", `${DATA}/home/${path}`, admin, { body: "{}" })).status).toBe(201);
    }
    expect((await t.call("DELETE", `${DATA}/home/other.json`, admin)).status).toBe(200);
    const all = await poll(admin, `?store=home:${from}`);
    expect(new Set(uris(all.lines))).toEqual(
      new Set([
        "idr://home/",
        "idr://home/templates",
        "idr://home/other.json",
        "idr://home/templates/a.json",
        "idr://home/templates-x.json",
        "idr://home/templates/b.json",
      ]),
    );
    const mine = await poll(templatesReader, `?store=home:${from}`);
    expect(mine.status).toBe(200);
    expect(new Set(uris(mine.lines))).toEqual(
      new Set(["idr://home/", "idr://home/templates", "idr://home/templates/a.json", "idr://home/templates/b.json"]),
    );
  });

  it("a long poll is not answered with changes the caller may not see", async () => {
    // A snapshot store has no directory events: a change outside the grant leaves no trace at all.
    const logos = await issuer.token({ trove_grants: [{ store: "brand", path: "logos", ops: ["read"] }] });
    const from = await since(logos, "brand");
    const waiting = poll(logos, `?store=brand:${from}&wait=0.3`);
    await new Promise((r) => setTimeout(r, 50));
    expect((await t.call("PUT", `${DATA}/brand/x.json`, admin, { body: "{}" })).status).toBe(201);
    expect(await since(admin, "brand")).toBe(from + 1);
    expect(await waiting).toEqual({ status: 204, lines: [] });
    expect((await t.call("PUT", `${DATA}/brand/logos/`, admin)).status).toBe(201);
    const seen = await poll(logos, `?store=brand:${from}&wait=0.3`);
    expect([seen.status, uris(seen.lines)]).toEqual([200, ["idr://brand/logos"]]);
  });

  it("more than 1,000 hidden changes in a row do not hide the next visible one", async () => {
    const logos = await issuer.token({ trove_grants: [{ store: "brand", path: "logos", ops: ["read"] }] });
    const from = await since(logos, "brand");
    for (let i = 0; i < 1005; i += 15) {
      await Promise.all(
        Array.from({ length: 15 }, (_, j) =>
          t.call("PUT", `${DATA}/brand/hidden-${i + j}.json`, admin, { body: "{}" }).then((r) => r.arrayBuffer()),
        ),
      );
    }
    expect((await t.call("PUT", `${DATA}/brand/logos/`, admin)).status).toBe(201);
    const seen = await poll(logos, `?store=brand:${from}&wait=0.3`);
    expect([seen.status, uris(seen.lines)]).toEqual([200, ["idr://brand/logos"]]);
    expect(Number(seen.lines[0]?.split("|")[1])).toBe(from + 1006);
  });

  it("following a store the caller may not read at all: 401", async () => {
    const res = await t.call("GET", "/resources/v2/poll?store=brand:0", templatesReader);
    expect(res.status).toBe(401);
    expect((await res.text()).trim()).toBe("alice may not read / in store brand");
  });

  it("gRPC WatchChanges filters the same way, and refuses other stores with PermissionDenied", async () => {
    const from = await since(admin, "home");
    expect((await t.call("PUT", `${DATA}/home/other.json`, admin, { body: "{}" })).status).toBe(201);
    expect((await t.call("PUT", `${DATA}/home/templates/a.json`, admin, { body: "{}" })).status).toBe(201);
    const client = (token: string) =>
      createClient(
        ChangeService,
        createGrpcTransport({
          baseUrl: t.url,
          interceptors: [
            (next) => (req) => {
              req.header.set("Authorization", `Bearer ${token}`);
              return next(req);
            },
          ],
        }),
      );
    const { events } = await client(templatesReader).poll({ cursors: [{ store: "home", eventId: BigInt(from) }] });
    expect(
      new Set(events.map((e) => (e.kind.case === "change" ? e.kind.value.uri : `reset ${e.kind.value?.store}`))),
    ).toEqual(new Set(["idr://home/", "idr://home/templates", "idr://home/templates/a.json"]));
    try {
      for await (const _ of client(templatesReader).watchChanges({ cursors: [{ store: "brand", eventId: 0n }] })) {
        throw new Error("an event of a store the caller may not read");
      }
      throw new Error("the stream ended without an error");
    } catch (err) {
      expect(ConnectError.from(err).code).toBe(Code.PermissionDenied);
    }
  });
});
