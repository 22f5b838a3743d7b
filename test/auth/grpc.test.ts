// Authentication and authorization on the gRPC and Connect faces: the same
// tokens and grants as REST, answered with the protocol's own codes
// (Unauthenticated, PermissionDenied).

import { Code, createClient, type Transport } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { StoreService } from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ADMIN, type AuthServer, bearer, codeOf, type Issuer, startAuthServer, startIssuer } from "./support.js";

let issuer: Issuer;
let t: AuthServer;

beforeAll(async () => {
  issuer = await startIssuer();
  t = await startAuthServer(issuer);
  const admin = await issuer.token(ADMIN);
  expect((await t.call("PUT", "/resources/v2/data/home/a.json", admin, { body: "{}" })).status).toBe(201);
});
afterAll(async () => {
  await t?.stop();
  await issuer?.stop();
});

const TRANSPORTS: Record<string, (token: string | undefined) => Transport> = {
  gRPC: (token) => createGrpcTransport({ baseUrl: t.url, interceptors: [bearer(token)] }),
  Connect: (token) => createConnectTransport({ baseUrl: t.url, httpVersion: "1.1", interceptors: [bearer(token)] }),
  "gRPC-Web": (token) => createGrpcWebTransport({ baseUrl: t.url, httpVersion: "2", interceptors: [bearer(token)] }),
};

async function drain(stream: AsyncIterable<unknown>): Promise<number> {
  let n = 0;
  for await (const _ of stream) n++;
  return n;
}

describe.each(Object.keys(TRANSPORTS))("%s", (name) => {
  const transport = (token: string | undefined) => (TRANSPORTS[name] as (t: string | undefined) => Transport)(token);

  it("a valid token: Stat answers", async () => {
    const resources = createClient(ResourceService, transport(await issuer.token(ADMIN)));
    const { resource } = await resources.stat({ store: "home", path: "a.json" });
    expect(resource?.path).toBe("a.json");
  });

  it("no token: Unauthenticated", async () => {
    const resources = createClient(ResourceService, transport(undefined));
    expect(await codeOf(() => resources.stat({ store: "home", path: "a.json" }))).toEqual([
      Code.Unauthenticated,
      "authentication required: send Authorization: Bearer <token>",
    ]);
    // A server stream is refused the same way.
    expect(await codeOf(() => drain(resources.list({ store: "home", path: "" })))).toEqual([
      Code.Unauthenticated,
      "authentication required: send Authorization: Bearer <token>",
    ]);
  });

  it("an expired token, or one for another audience: Unauthenticated", async () => {
    const stores = createClient(StoreService, transport(await issuer.token(ADMIN, { expiresIn: -120 })));
    expect(await codeOf(() => stores.listStores({}))).toEqual([Code.Unauthenticated, "token expired"]);
    const other = createClient(StoreService, transport(await issuer.token({ ...ADMIN, aud: "billing" })));
    expect(await codeOf(() => other.listStores({}))).toEqual([Code.Unauthenticated, "token audience is not trove"]);
  });

  it("a caller without the grant: PermissionDenied", async () => {
    const reader = await issuer.token({ trove_grants: [{ store: "home", ops: ["read"] }] });
    const resources = createClient(ResourceService, transport(reader));
    expect((await resources.stat({ store: "home", path: "a.json" })).resource?.path).toBe("a.json");
    expect(await codeOf(() => resources.delete({ store: "home", path: "a.json" }))).toEqual([
      Code.PermissionDenied,
      "alice may not delete /a.json in store home",
    ]);
    expect(await codeOf(() => resources.makeDirectory({ store: "home", path: "d" }))).toEqual([
      Code.PermissionDenied,
      "alice may not write /d in store home",
    ]);
    expect(await codeOf(() => resources.stat({ store: "brand", path: "" }))).toEqual([
      Code.PermissionDenied,
      "alice may not read / in store brand",
    ]);
    const stores = createClient(StoreService, transport(reader));
    expect(await codeOf(() => stores.createStore({ store: { name: "x" } }))).toEqual([
      Code.PermissionDenied,
      "alice lacks the permission stores:admin",
    ]);
  });

  it("a client stream (Write) without the grant is refused and stores nothing", async () => {
    const reader = await issuer.token({ trove_grants: [{ store: "home", ops: ["read"] }] });
    const resources = createClient(ResourceService, transport(reader));
    async function* messages() {
      yield { part: { case: "header" as const, value: { store: "home", path: `w-${name}.txt` } } };
      yield { part: { case: "chunk" as const, value: new TextEncoder().encode("x") } };
    }
    if (name === "gRPC-Web") return; // gRPC-Web has no client streams
    expect((await codeOf(() => resources.write(messages())))[0]).toBe(Code.PermissionDenied);
    const admin = createClient(ResourceService, transport(await issuer.token(ADMIN)));
    expect((await codeOf(() => admin.stat({ store: "home", path: `w-${name}.txt` })))[0]).toBe(Code.NotFound);
  });
});
