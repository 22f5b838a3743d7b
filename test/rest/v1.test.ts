// REST version 1 (issue 17, item 8): /resources/v1/ serves what /resources/v2/ serves, with
// version 1's differences (spec: Versioning; docs/rest.md, "Version 1"): DELETE refuses a
// directory that is not empty (409), and stores without sync-recursive are not served.

import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import { PreconditionFailureSchema } from "@trove/sdk/gen/google/rpc/error_details_pb.js";
import { ResourceService } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { ADMIN, startAuthServer, startIssuer } from "../auth/support.js";
import { startServer, type TestServer } from "../support/server.js";
import {
  bytes,
  createStore,
  DATA,
  expectError,
  listingEntries,
  parseXml,
  putDirectory,
  putResource,
  type RestClient,
  restClient,
  SERVER,
  storeState,
  TEXT,
} from "./rest-client.js";

const V1 = "/resources/v1";
const V1_DATA = `${V1}/data`;

let server: TestServer;
let client: RestClient;

beforeEach(async () => {
  server = await startServer();
  client = restClient(server);
});

afterEach(async () => {
  await server.stop();
});

/** docs/ with a file and a subdirectory holding a file: three entries below docs/. */
async function tree(store = "home"): Promise<void> {
  await putDirectory(client, "docs/", store);
  await putResource(client, "docs/a.txt", "a", {}, store);
  await putDirectory(client, "docs/sub/", store);
  await putResource(client, "docs/sub/b.txt", "b", {}, store);
}

function storeNames(xml: string): string[] {
  const doc = parseXml(xml) as { stores?: { store?: Array<{ name: string }> } | "" };
  if (!doc.stores) return [];
  return (doc.stores.store ?? []).map((s) => s.name);
}

/** The current event id of a store, from a status poll (RESET {store} {id}). */
async function lastEventId(prefix: string, store: string): Promise<string> {
  const reply = await client.fetch("GET", `${prefix}/poll`);
  const line = reply.text.split("\n").find((l) => l.startsWith(`RESET ${store} `));
  if (!line) throw new Error(`no RESET line for ${store} in ${reply.text}`);
  return line.split(" ")[2] as string;
}

describe("REST v1 DELETE (issue 17 item 8; spec Versioning: v2's DELETE no longer requires an empty directory)", () => {
  test("v1 DELETE of a directory that is not empty answers 409 naming how many entries are below it, and changes nothing", async () => {
    await tree();
    const before = await storeState(client);
    const reply = await client.fetch("DELETE", `${V1_DATA}/home/docs/`);
    expectError(reply, 409, "directory /docs is not empty: 3 entries below it");
    expect(await storeState(client)).toEqual(before);
    const listing = await client.fetch("GET", `${V1_DATA}/home/docs/`);
    expect(listing.status).toBe(200);
    expect(listingEntries(listing.text).map((e) => e.name)).toEqual(["a.txt", "sub"]);
  });

  test("v1 DELETE of a directory holding one entry (named without its trailing slash) says 1 entry", async () => {
    await putDirectory(client, "one/");
    await putResource(client, "one/x.txt", "x");
    expectError(
      await client.fetch("DELETE", `${V1_DATA}/home/one`),
      409,
      "directory /one is not empty: 1 entry below it",
    );
    expect((await client.fetch("GET", `${V1_DATA}/home/one/x.txt`)).text).toBe("x");
  });

  test("v1 DELETE of an empty directory answers 200 and the directory is deleted", async () => {
    await putDirectory(client, "empty/");
    const reply = await client.fetch("DELETE", `${V1_DATA}/home/empty/`);
    expect(reply.status).toBe(200);
    expect(reply.text).toBe("");
    const after = await client.fetch("GET", `${V1_DATA}/home/empty/`);
    expect(after.status).toBe(404);
    expect(after.text).toBe("deleted");
  });

  test("v1 DELETE of a directory whose entries are all deleted answers 200: tombstones are not entries", async () => {
    await putDirectory(client, "emptied/");
    await putResource(client, "emptied/x.txt", "x");
    expect((await client.fetch("DELETE", `${V1_DATA}/home/emptied/x.txt`)).status).toBe(200);
    expect((await client.fetch("DELETE", `${V1_DATA}/home/emptied/`)).status).toBe(200);
  });

  test("v1 DELETE of a file answers 200 and the file is deleted", async () => {
    await putResource(client, "f.txt", "hello");
    const reply = await client.fetch("DELETE", `${V1_DATA}/home/f.txt`);
    expect(reply.status).toBe(200);
    const after = await client.fetch("GET", `${V1_DATA}/home/f.txt`);
    expect(after.status).toBe(404);
    expect(after.text).toBe("deleted");
  });

  test("v1 DELETE of an empty directory with a stale If-Match answers 412, and the directory stays", async () => {
    await putDirectory(client, "empty/");
    const reply = await client.fetch("DELETE", `${V1_DATA}/home/empty/`, { headers: { "If-Match": '"stale"' } });
    expect(reply.status).toBe(412);
    expect((await client.fetch("GET", `${V1_DATA}/home/empty/`)).status).toBe(200);
  });

  test("v1 DELETE racing a PUT into the directory never deletes a file whose PUT succeeded (recursive store: the directory's tag is the delete's If-Match)", async () => {
    for (let i = 0; i < 25; i++) {
      await putDirectory(client, `race${i}/`);
      const [del, put] = await Promise.all([
        client.fetch("DELETE", `${V1_DATA}/home/race${i}/`),
        client.fetch("PUT", `${V1_DATA}/home/race${i}/f.txt`, { body: bytes("kept") }),
      ]);
      const file = await client.fetch("GET", `${V1_DATA}/home/race${i}/f.txt`);
      if (put.status === 201) {
        expect([i, del.status, file.status, file.text]).toEqual([i, 409, 200, "kept"]);
      } else {
        expect([i, del.status, put.status]).toEqual([i, 200, 404]);
      }
    }
  });

  test("issue 30: v1 PUT with If-None-Match: * answers 201 where nothing is and 412 where a resource is, as v2 does", async () => {
    const created = await client.fetch("PUT", `${V1_DATA}/home/once.txt`, {
      body: bytes("first"),
      headers: { "If-None-Match": "*" },
    });
    expect(created.status).toBe(201);
    const tag = created.headers.get("etag");
    const before = await storeState(client);
    const refused = await client.fetch("PUT", `${V1_DATA}/home/once.txt`, {
      body: bytes("second"),
      headers: { "If-None-Match": "*" },
    });
    expectError(refused, 412, `If-None-Match * given but /once.txt exists (current ETag ${tag})`);
    expect(await storeState(client)).toEqual(before);
  });

  test("v1 DELETE of a store's root answers 403 as v2 does, even with entries below it", async () => {
    await tree();
    const v1 = await client.fetch("DELETE", `${V1_DATA}/home/`);
    const v2 = await client.fetch("DELETE", `${DATA}/home/`);
    expect(v1.status).toBe(403);
    expect([v1.status, v1.text]).toEqual([v2.status, v2.text]);
    expect((await client.fetch("GET", `${V1_DATA}/home/docs/a.txt`)).text).toBe("a");
  });

  test("v1 DELETE of a path that does not exist answers 404 as v2 does", async () => {
    const reply = await client.fetch("DELETE", `${V1_DATA}/home/nothing/`);
    expect(reply.status).toBe(404);
    expect(reply.headers.get("content-type")).toBe(TEXT);
  });

  test("v2 unchanged: DELETE of a directory that is not empty answers 200 and deletes everything below it", async () => {
    await tree();
    const reply = await client.fetch("DELETE", `${DATA}/home/docs/`);
    expect(reply.status).toBe(200);
    for (const path of ["docs/", "docs/a.txt", "docs/sub/b.txt"]) {
      const after = await client.fetch("GET", `${DATA}/home/${path}`);
      expect([path, after.status, after.text]).toEqual([path, 404, "deleted"]);
    }
  });
});

describe("DeleteRequest.require_empty over Connect (issue 17 item 8)", () => {
  test("require_empty refuses a directory that is not empty with FAILED_PRECONDITION and a NOT_EMPTY violation; without it the directory is deleted", async () => {
    await tree();
    const resources = createClient(
      ResourceService,
      createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }),
    );
    let refusal: ConnectError | undefined;
    try {
      await resources.delete({ store: "home", path: "docs", requireEmpty: true });
    } catch (err) {
      refusal = ConnectError.from(err);
    }
    expect(refusal?.code).toBe(Code.FailedPrecondition);
    expect(refusal?.rawMessage).toBe("directory /docs is not empty: 3 entries below it");
    const [failure] = refusal?.findDetails(PreconditionFailureSchema) ?? [];
    expect(failure?.violations.map((v) => [v.type, v.subject])).toEqual([["NOT_EMPTY", "home/docs"]]);
    expect((await client.fetch("GET", `${DATA}/home/docs/sub/b.txt`)).text).toBe("b");

    const file = await resources.delete({ store: "home", path: "docs/a.txt", requireEmpty: true });
    expect(file.deletedCount).toBe(1n);
    const out = await resources.delete({ store: "home", path: "docs" });
    expect(out.deletedCount).toBe(3n);
  });

  test("require_empty deletes an empty directory", async () => {
    await putDirectory(client, "empty/");
    const resources = createClient(
      ResourceService,
      createConnectTransport({ baseUrl: server.url, httpVersion: "1.1" }),
    );
    const out = await resources.delete({ store: "home", path: "empty", requireEmpty: true });
    expect(out.deletedCount).toBe(1n);
    expect(out.resource?.deleted).toBe(true);
  });
});

describe("REST v1 serves only stores with sync-recursive (issue 17 item 8; spec: Introduction 2, Versioning)", () => {
  const notServed =
    "store snap is not served by version 1 of the API: it lacks the sync-recursive feature (its features: sync, sync-snapshot); use /resources/v2/";

  beforeEach(async () => {
    await createStore(client, "snap", "snapshot");
    await putDirectory(client, "d/", "snap");
    await putResource(client, "d/f.txt", "snap file", {}, "snap");
  });

  test("the v1 store listing leaves the snapshot store out; v2 lists it", async () => {
    const v1 = await client.fetch("GET", `${V1}/stores`);
    expect(v1.status).toBe(200);
    expect(storeNames(v1.text)).toEqual(["home"]);
    const v2 = await client.fetch("GET", "/resources/v2/stores");
    expect(storeNames(v2.text).sort()).toEqual(["home", "snap"]);
  });

  test("v1 GET of the snapshot store's configuration answers 404 with the reason", async () => {
    expectError(await client.fetch("GET", `${V1}/stores/snap`), 404, notServed);
  });

  test("v1 GET of a snapshot store's directory and file, and HEAD, answer 404 with the reason", async () => {
    expectError(await client.fetch("GET", `${V1_DATA}/snap/`), 404, notServed);
    expectError(await client.fetch("GET", `${V1_DATA}/snap/d/f.txt`), 404, notServed);
    const head = await client.fetch("HEAD", `${V1_DATA}/snap/d/f.txt`);
    expect(head.status).toBe(404);
    expect(head.text).toBe("");
  });

  test("v1 PUT in a snapshot store answers 404 with the reason and writes nothing", async () => {
    const before = await storeState(client, "snap");
    expectError(await client.fetch("PUT", `${V1_DATA}/snap/d/new.txt`, { body: bytes("new") }), 404, notServed);
    expectError(await client.fetch("PUT", `${V1_DATA}/snap/newdir/`), 404, notServed);
    expect(await storeState(client, "snap")).toEqual(before);
  });

  test("v1 DELETE in a snapshot store answers 404 with the reason and deletes nothing", async () => {
    const before = await storeState(client, "snap");
    expectError(await client.fetch("DELETE", `${V1_DATA}/snap/d/f.txt`), 404, notServed);
    expectError(await client.fetch("DELETE", `${V1_DATA}/snap/d/`), 404, notServed);
    expect(await storeState(client, "snap")).toEqual(before);
  });

  test("v1 poll following the snapshot store answers 404 with the reason; a v1 status poll leaves it out", async () => {
    expectError(await client.fetch("GET", `${V1}/poll?store=snap:0`), 404, notServed);
    expectError(await client.fetch("GET", `${V1}/poll?store=home:0&store=snap:0`), 404, notServed);
    const v1 = await client.fetch("GET", `${V1}/poll`);
    expect(v1.status).toBe(200);
    expect(v1.text).toMatch(/^RESET home \d+\n$/);
    const v2 = await client.fetch("GET", "/resources/v2/poll");
    expect(v2.text).toMatch(/RESET snap \d+/);
  });

  test("v1 store configuration: updating or deleting the snapshot store answers 404; creating or turning a store into a snapshot store answers 400", async () => {
    const json = { "Content-Type": "application/json" };
    expectError(
      await client.fetch("PUT", `${V1}/stores/snap`, { headers: json, body: JSON.stringify({ type: "recursive" }) }),
      404,
      notServed,
    );
    expectError(await client.fetch("DELETE", `${V1}/stores/snap`), 404, notServed);
    const typeRefusal =
      "store type snapshot is not served by version 1 of the API: it lacks the sync-recursive feature (its features: sync, sync-snapshot); use /resources/v2/stores";
    expectError(
      await client.fetch("POST", `${V1}/stores`, {
        headers: json,
        body: JSON.stringify({ name: "s2", type: "snapshot" }),
      }),
      400,
      typeRefusal,
    );
    expectError(
      await client.fetch("PUT", `${V1}/stores/home`, { headers: json, body: JSON.stringify({ type: "snapshot" }) }),
      400,
      typeRefusal,
    );
    const v2 = await client.fetch("GET", "/resources/v2/stores");
    expect(storeNames(v2.text).sort()).toEqual(["home", "snap"]);
    expect((await client.fetch("GET", `${V1}/stores/home`)).text).toMatch(/type="recursive"/);
  });

  test("v1 creates a recursive store, answering its v1 Location", async () => {
    const reply = await client.fetch("POST", `${V1}/stores`, {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "r2" }),
    });
    expect(reply.status).toBe(201);
    expect(reply.headers.get("location")).toBe(`${V1}/stores/r2`);
    expect(storeNames((await client.fetch("GET", `${V1}/stores`)).text).sort()).toEqual(["home", "r2"]);
  });
});

describe("REST v1 on a recursive store works as v2 (issue 17 item 8; spec: Versioning, Server header)", () => {
  test("PUT, GET, HEAD and the listing on v1, each with Server: resources/1.0", async () => {
    const put = await client.fetch("PUT", `${V1_DATA}/home/notes/`);
    expect(put.status).toBe(201);
    const file = await client.fetch("PUT", `${V1_DATA}/home/notes/a.txt`, { body: bytes("hello v1") });
    expect(file.status).toBe(201);
    expect(file.headers.get("location")).toBe(`${V1_DATA}/home/notes/a.txt`);
    const get = await client.fetch("GET", `${V1_DATA}/home/notes/a.txt`);
    expect([get.status, get.text, get.headers.get("etag")]).toEqual([200, "hello v1", file.headers.get("etag")]);
    const head = await client.fetch("HEAD", `${V1_DATA}/home/notes/a.txt`);
    expect([head.status, head.headers.get("content-length"), head.text]).toEqual([200, "8", ""]);
    const listing = await client.fetch("GET", `${V1_DATA}/home/notes/`);
    expect(listing.status).toBe(200);
    expect(listingEntries(listing.text).map((e) => [e.name, e.tag])).toEqual([
      ["a.txt", (file.headers.get("etag") ?? "").replace(/"/g, "")],
    ]);
    // What v1 clients rely on: the directory's tag changed with its descendant.
    expect(listing.headers.get("etag")).not.toBe(put.headers.get("etag"));
    const redirect = await client.fetch("GET", `${V1_DATA}/home/notes`);
    expect([redirect.status, redirect.headers.get("location")]).toEqual([303, `${V1_DATA}/home/notes/`]);
    for (const reply of [put, file, get, head, listing, redirect]) expect(reply.headers.get("server")).toBe(SERVER);
  });

  test("the v1 poll answers a change of the recursive store with Server: resources/1.0", async () => {
    const last = await lastEventId(V1, "home");
    await putResource(client, "polled.txt", "p");
    const reply = await client.fetch("GET", `${V1}/poll?store=home:${last}&wait=5`);
    expect(reply.status).toBe(200);
    expect(reply.headers.get("server")).toBe(SERVER);
    expect(reply.text).toMatch(/^CHANGE\|\d+\|idr:\/\/home\/polled\.txt\|modify\|/m);
  });

  test("the v1 metrics route label says v1", async () => {
    await putResource(client, "m.txt", "m");
    expect((await client.fetch("GET", `${V1_DATA}/home/m.txt`)).status).toBe(200);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    expect(metrics).toMatch(
      /trove_requests_total\{[^}]*route="GET \/resources\/v1\/data\/\{store\}\/\{path\}"[^}]*\} 1/,
    );
  });
});

describe("REST v1 serves a filesystem store: the rule is by feature (issue 17 item 8; filesystem stores have sync-recursive)", () => {
  test("a filesystem store is listed on v1, written and read through v1, and v1 refuses to delete its non-empty directory", async () => {
    const folder = await mkdtemp(join(tmpdir(), "trove-v1-fs-"));
    try {
      const created = await client.fetch("POST", `${V1}/stores`, {
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ name: "folder", type: "filesystem", settings: { "filesystem-location": folder } }),
      });
      expect(created.status, created.text).toBe(201);
      expect(storeNames((await client.fetch("GET", `${V1}/stores`)).text).sort()).toEqual(["folder", "home"]);
      expect((await client.fetch("PUT", `${V1_DATA}/folder/d/`)).status).toBe(201);
      const put = await client.fetch("PUT", `${V1_DATA}/folder/d/a.txt`, { body: bytes("on disk") });
      expect(put.status).toBe(201);
      expect((await client.fetch("GET", `${V1_DATA}/folder/d/a.txt`)).text).toBe("on disk");
      expectError(
        await client.fetch("DELETE", `${V1_DATA}/folder/d/`),
        409,
        "directory /d is not empty: 1 entry below it",
      );
      expect(await readFile(join(folder, "d", "a.txt"), "utf8")).toBe("on disk");
    } finally {
      await client.fetch("DELETE", "/resources/v2/stores/folder");
      await rm(folder, { recursive: true, force: true });
    }
  });
});

describe("REST v1 endpoints (issue 17 item 8)", () => {
  test("/resources/v1/data without a store answers 400, as v2 does", async () => {
    expectError(await client.fetch("GET", `${V1}/data`), 400, "a store name is required: /resources/v1/data/{store}/");
  });

  test("unknown endpoints under /resources/ answer 404", async () => {
    expectError(await client.fetch("GET", `${V1}/nothing`), 404, "no such endpoint: /resources/v1/nothing");
    expectError(await client.fetch("GET", "/resources/v3/stores"), 404, "no such endpoint: /resources/v3/stores");
    expectError(await client.fetch("GET", `${V1}/`), 404, "no such endpoint: /resources/v1/");
  });

  test("a v1 request with an unsupported method answers 405 without asking the store", async () => {
    const reply = await client.fetch("POST", `${V1_DATA}/home/x`);
    expect(reply.status).toBe(405);
    expect(reply.headers.get("allow")).toBe("GET, HEAD, PUT, DELETE");
  });
});

describe("REST v1 store refusal and access (issue 17 item 8; spec Authentication)", () => {
  test("a caller without access to the snapshot store gets v2's 401 on v1, never the v1 reason that would reveal the store", async () => {
    const issuer = await startIssuer();
    const t = await startAuthServer(issuer);
    try {
      const admin = await issuer.token(ADMIN);
      const json = { "Content-Type": "application/json" };
      const created = await t.call("POST", "/resources/v2/stores", admin, {
        headers: json,
        body: JSON.stringify({ name: "snap", type: "snapshot" }),
      });
      expect(created.status).toBe(201);
      const homeOnly = await issuer.token({ trove_grants: [{ store: "home", ops: ["read", "write", "delete"] }] });
      for (const [method, path] of [
        ["GET", `${V1_DATA}/snap/`],
        ["PUT", `${V1_DATA}/snap/x.txt`],
        ["DELETE", `${V1_DATA}/snap/x.txt`],
        ["GET", `${V1}/poll?store=snap:0`],
        ["GET", `${V1}/stores/snap`],
      ] as const) {
        const v1 = await t.call(method, path, homeOnly, method === "PUT" ? { body: "x" } : {});
        const v2 = await t.call(method, path.replace("/resources/v1/", "/resources/v2/"), homeOnly, {
          ...(method === "PUT" ? { body: "x" } : {}),
        });
        expect([method, path, v1.status], await v1.text()).toEqual([method, path, 401]);
        expect(v2.status).toBe(401);
      }
      // The same caller is served on v1 where it has access.
      expect((await t.call("GET", `${V1_DATA}/home/`, homeOnly)).status).toBe(200);
      // With access, the v1 reason is given.
      const refused = await t.call("GET", `${V1_DATA}/snap/`, admin);
      expect(refused.status).toBe(404);
      expect(await refused.text()).toMatch(/^store snap is not served by version 1 of the API/);
    } finally {
      await t.stop();
      await issuer.stop();
    }
  });
});
