// REST v2 conformance: store configuration, /resources/v2/stores and /resources/v2/stores/{name}
// (spec: Endpoints > Stores, Store; Resources and their fields > Store listing).

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { ensureHomeStore } from "../../src/server/main.js";
import { createTroveServer } from "../../src/server/server.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { startServer } from "../support/server.js";
import {
  createStore,
  DATA,
  expectError,
  parseXml,
  putResource,
  type Reply,
  type RestClient,
  restClient,
  STORES,
  XML,
} from "./rest-client.js";

let client: RestClient;
let stop: () => Promise<void>;
/** What the backend under test reports about the deployment (SQLite or MongoDB). */
let reported: Record<string, string>;

beforeEach(async () => {
  const server = await startServer();
  client = restClient(server);
  stop = () => server.stop();
  reported = server.storage.reportedSettings();
});

afterEach(async () => {
  await stop();
});

interface StoreView {
  name: string;
  type: string;
  tag: string;
  directory: string;
  deleted?: string;
  databaseSettings: unknown;
  features: string[];
  settings: Record<string, string>;
}

function toView(node: Record<string, unknown>): StoreView {
  const features = (node["store-features"] as { feature?: string[] }).feature ?? [];
  const settingList = (node["store-settings"] as { setting?: Array<{ name: string; value: string }> }).setting ?? [];
  const settings: Record<string, string> = {};
  for (const s of settingList) {
    expect(Object.keys(s).sort()).toEqual(["name", "value"]);
    expect(settings[s.name], `setting ${s.name} listed once`).toBeUndefined();
    settings[s.name] = s.value;
  }
  const view: StoreView = {
    name: node.name as string,
    type: node.type as string,
    tag: node.tag as string,
    directory: node.directory as string,
    databaseSettings: node["database-settings"],
    features,
    settings,
  };
  if (node.deleted !== undefined) view.deleted = node.deleted as string;
  return view;
}

/** The stores of a `stores` listing. */
function storesOf(reply: Reply): StoreView[] {
  expect(reply.status, reply.text).toBe(200);
  expect(reply.headers.get("content-type")).toBe(XML);
  const doc = parseXml(reply.text);
  expect(Object.keys(doc).filter((k) => k !== "?xml")).toEqual(["stores"]);
  return ((doc.stores as { store?: Array<Record<string, unknown>> }).store ?? []).map(toView);
}

/** The single `store` element of a store answer. */
function storeOf(reply: Reply): StoreView {
  expect(reply.headers.get("content-type")).toBe(XML);
  const doc = parseXml(reply.text);
  expect(Object.keys(doc).filter((k) => k !== "?xml")).toEqual(["store"]);
  const stores = doc.store as Array<Record<string, unknown>>;
  expect(stores).toHaveLength(1);
  return toView(stores[0] as Record<string, unknown>);
}

const json = (body: unknown) => ({
  headers: { "Content-Type": "application/json" },
  body: typeof body === "string" ? body : JSON.stringify(body),
});
const xml = (body: string) => ({ headers: { "Content-Type": "application/xml" }, body });

const REPORTED = [
  "filesystem-location",
  "filesystem-temp",
  "database-driver",
  "database-dialect",
  "database-connection-url",
  "database-lock-timeout",
  "database-transaction-retries",
  "database-connection-pool-size",
];

describe("store listing", () => {
  test("GET /resources/v2/stores -> 200, stores with store elements (name, type, tag, directory, database-settings, store-features, store-settings) (Store listing)", async () => {
    const rootTag = (await client.fetch("HEAD", `${DATA}/home/`)).headers.get("etag");
    const stores = storesOf(await client.fetch("GET", STORES));
    expect(stores).toHaveLength(1);
    const home = stores[0] as StoreView;
    expect(home).toEqual({
      name: "home",
      type: "recursive",
      tag: rootTag?.slice(1, -1),
      directory: "true",
      databaseSettings: "",
      features: ["sync", "sync-recursive"],
      settings: expect.objectContaining({
        "keep-deleted": "7d",
        "keep-versions": "30d",
        "database-driver": reported["database-driver"],
      }),
    });
    expect(["better-sqlite3", "mongodb"]).toContain(home.settings["database-driver"]);
    expect(Object.keys(home.settings).sort()).toEqual(
      ["keep-deleted", "keep-versions", ...Object.keys(reported)].sort(),
    );
    expect(Object.keys(reported)).toEqual(expect.arrayContaining(REPORTED.filter((k) => k !== "filesystem-temp")));
  });

  test("GET /resources/v2/stores: a store's tag follows its root ETag", async () => {
    await putResource(client, "a.txt", "a");
    const rootTag = (await client.fetch("HEAD", `${DATA}/home/`)).headers.get("etag");
    expect(`"${storesOf(await client.fetch("GET", STORES))[0]?.tag}"`).toBe(rootTag);
  });

  test("GET /resources/v2/stores/{name} -> 200 with the store element", async () => {
    const reply = await client.fetch("GET", `${STORES}/home`);
    expect(reply.status).toBe(200);
    expect(storeOf(reply)).toEqual(storesOf(await client.fetch("GET", STORES))[0]);
  });

  test("HEAD /resources/v2/stores -> 200 without a body", async () => {
    const reply = await client.fetch("HEAD", STORES);
    expect(reply.status).toBe(200);
    expect(reply.headers.get("content-type")).toBe(XML);
    expect(reply.text).toBe("");
  });
});

describe("store creation", () => {
  test("POST /resources/v2/stores with an XML body in the listing's own shape -> 201 and the store appears", async () => {
    const listing = await client.fetch("GET", STORES);
    const body = listing.text.replace('name="home"', 'name="copy"').replace(/ tag="[^"]*"/, "");
    const reply = await client.fetch("POST", STORES, xml(body));
    expect(reply.status, reply.text).toBe(201);
    expect(reply.headers.get("location")).toBe(`${STORES}/copy`);
    const created = storeOf(reply);
    expect(created).toMatchObject({ name: "copy", type: "recursive", directory: "true" });
    const home = storesOf(listing)[0] as StoreView;
    expect(created.settings).toEqual(home.settings);
    expect(storesOf(await client.fetch("GET", STORES)).map((s) => s.name)).toEqual(["copy", "home"]);
    const root = await client.fetch("GET", `${DATA}/copy/`);
    expect(root.status).toBe(200);
    expect(root.headers.get("etag")).toBe(`"${created.tag}"`);
    expect(reply.headers.get("content-type")).toBe(XML);
  });

  test("POST /resources/v2/stores with a single store element from GET /stores/{name} -> 201", async () => {
    const one = await client.fetch("GET", `${STORES}/home`);
    const reply = await client.fetch("POST", STORES, xml(one.text.replace('name="home"', 'name="again"')));
    expect(reply.status, reply.text).toBe(201);
    expect((await client.fetch("GET", `${STORES}/again`)).status).toBe(200);
  });

  test('POST /resources/v2/stores with JSON {"name":"x","type":"snapshot","settings":{"keep-deleted":"1h"}} -> 201', async () => {
    const reply = await client.fetch(
      "POST",
      STORES,
      json({ name: "x", type: "snapshot", settings: { "keep-deleted": "1h" } }),
    );
    expect(reply.status, reply.text).toBe(201);
    expect(reply.headers.get("location")).toBe(`${STORES}/x`);
    const store = storeOf(reply);
    expect(store).toMatchObject({
      name: "x",
      type: "snapshot",
      directory: "true",
      features: ["sync", "sync-snapshot"],
    });
    expect(store.settings["keep-deleted"]).toBe("1h");
    expect(storeOf(await client.fetch("GET", `${STORES}/x`))).toEqual(store);
    expect((await client.fetch("PUT", `${DATA}/x/a.txt`, { body: new Uint8Array([1]) })).status).toBe(201);
  });

  test("POST /resources/v2/stores with JSON settings as a list of name/value pairs -> 201", async () => {
    const reply = await client.fetch(
      "POST",
      STORES,
      json({ name: "y", type: "recursive", settings: [{ name: "keep-deleted", value: "30m" }] }),
    );
    expect(reply.status, reply.text).toBe(201);
    expect(storeOf(reply).settings["keep-deleted"]).toBe("30m");
  });

  test("POST /resources/v2/stores without a type -> 201, a recursive store with keep-deleted 7d", async () => {
    const reply = await client.fetch("POST", STORES, json({ name: "plain" }));
    expect(reply.status, reply.text).toBe(201);
    expect(storeOf(reply)).toMatchObject({ type: "recursive", features: ["sync", "sync-recursive"] });
    expect(storeOf(reply).settings["keep-deleted"]).toBe("7d");
  });

  test("POST /resources/v2/stores of an existing store -> 403, the store is unchanged", async () => {
    await putResource(client, "a.txt", "a");
    const before = (await client.fetch("GET", STORES)).text;
    for (const init of [
      json({ name: "home", type: "snapshot", settings: { "keep-deleted": "1s" } }),
      xml('<store name="home" type="snapshot"/>'),
    ]) {
      expectError(await client.fetch("POST", STORES, init), 403, "store home already exists");
    }
    expect((await client.fetch("GET", STORES)).text).toBe(before);
    expect((await client.fetch("GET", `${DATA}/home/a.txt`)).text).toBe("a");
  });
});

describe("store update and removal", () => {
  test("PUT /resources/v2/stores/{name} -> 201 with the new setting", async () => {
    await createStore(client, "x", "snapshot");
    const reply = await client.fetch("PUT", `${STORES}/x`, json({ settings: { "keep-deleted": "2h" } }));
    expect(reply.status, reply.text).toBe(201);
    expect(reply.headers.get("content-type")).toBe(XML);
    const store = storeOf(reply);
    expect(store).toMatchObject({ name: "x", type: "snapshot" });
    expect(store.settings["keep-deleted"]).toBe("2h");
    expect(storeOf(await client.fetch("GET", `${STORES}/x`)).settings["keep-deleted"]).toBe("2h");
  });

  test("PUT /resources/v2/stores/{name} with the store element it read, one setting changed -> 201", async () => {
    const read = await client.fetch("GET", `${STORES}/home`);
    const body = read.text.replace("<value>7d</value>", "<value>3d</value>");
    const reply = await client.fetch("PUT", `${STORES}/home`, xml(body));
    expect(reply.status, reply.text).toBe(201);
    expect(storeOf(reply).settings["keep-deleted"]).toBe("3d");
  });

  test("DELETE /resources/v2/stores/{name} -> 200 and its data is gone", async () => {
    await createStore(client, "x", "recursive");
    await putResource(client, "a.txt", "a", {}, "x");
    const reply = await client.fetch("DELETE", `${STORES}/x`);
    expect(reply.status).toBe(200);
    expect(reply.text).toBe("");
    expectError(await client.fetch("GET", `${DATA}/x/a.txt`), 404, "store x not found");
    expectError(await client.fetch("GET", `${STORES}/x`), 404, "store x not found");
    expect(storesOf(await client.fetch("GET", STORES)).map((s) => s.name)).toEqual(["home"]);
    // A new store of the same name starts empty.
    await createStore(client, "x", "recursive");
    expectError(await client.fetch("GET", `${DATA}/x/a.txt`), 404, "/a.txt not found in store x");
    expectError(await client.fetch("GET", `${DATA}/x/a.txt?include-deleted=true`), 404, "/a.txt not found in store x");
  });

  test.each(["GET", "PUT", "DELETE"])("%s /resources/v2/stores/{name} of an unknown store -> 404", async (method) => {
    const before = (await client.fetch("GET", STORES)).text;
    const init = method === "PUT" ? json({ settings: { "keep-deleted": "1h" } }) : {};
    expectError(await client.fetch(method, `${STORES}/nope`, init), 404, "store nope not found");
    expect((await client.fetch("GET", STORES)).text).toBe(before);
  });
});

describe("store configuration errors", () => {
  const INVALID_NAME = (name: string) =>
    `invalid store name ${JSON.stringify(name)}: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`;

  test.each([
    ["malformed XML", xml('<store name="y"'), /^malformed XML at line 1, column \d+: .+\n$/],
    ["malformed JSON", json('{"name":"y",'), /^malformed JSON: .+\n$/],
    [
      "unknown type",
      json({ name: "y", type: "archive" }),
      'unknown store type "archive": use one of recursive, snapshot, filesystem\n',
    ],
    ["unknown setting", json({ name: "y", settings: { colour: "blue" } }), 'unknown setting "colour"\n'],
    [
      "a changed server-reported setting (database-driver)",
      json({ name: "y", settings: { "database-driver": "postgres" } }),
      'setting "database-driver" is managed by the server and cannot be changed\n',
    ],
    [
      "an invalid keep-deleted",
      json({ name: "y", settings: { "keep-deleted": "soon" } }),
      'invalid duration "soon": use a whole number of seconds or a number with ms, s, m, h or d (e.g. 7d)\n',
    ],
    ["a bad store name", json({ name: "bad name!" }), `${INVALID_NAME("bad name!")}\n`],
    ["a bad store name in XML", xml('<store name="-x" type="recursive"/>'), `${INVALID_NAME("-x")}\n`],
    ["no name", json({ type: "snapshot" }), "the store needs a name\n"],
    ["an empty body", json(""), "a store configuration body is required (XML or JSON, see docs/rest.md)\n"],
    ["an unknown JSON field", json({ name: "y", colour: "blue" }), 'unknown field "colour"\n'],
    [
      "two store elements",
      xml('<stores><store name="a"/><store name="b"/></stores>'),
      "the XML body must hold exactly one store element\n",
    ],
    [
      "an unsupported Content-Type",
      { headers: { "Content-Type": "text/plain" }, body: '{"name":"y"}' },
      "unsupported Content-Type text/plain: send application/xml or application/json\n",
    ],
  ])("POST /resources/v2/stores with %s -> 400 text/plain reason, nothing created", async (_, init, reason) => {
    const before = (await client.fetch("GET", STORES)).text;
    const reply = await client.fetch("POST", STORES, init);
    expectError(reply, 400, reason instanceof RegExp ? reason : reason.slice(0, -1));
    expect((await client.fetch("GET", STORES)).text).toBe(before);
  });

  test.each([
    ["malformed XML", xml("<store><store-settings>"), /^malformed XML at line 1, column \d+: .+\n$/],
    ["malformed JSON", json("{settings:"), /^malformed JSON: .+\n$/],
    [
      "unknown type",
      json({ type: "archive" }),
      'unknown store type "archive": use one of recursive, snapshot, filesystem\n',
    ],
    ["unknown setting", json({ settings: { colour: "blue" } }), 'unknown setting "colour"\n'],
    [
      "a changed server-reported setting (database-driver)",
      json({ settings: { "database-driver": "postgres" } }),
      'setting "database-driver" is managed by the server and cannot be changed\n',
    ],
    [
      "a name mismatch",
      json({ name: "other", settings: { "keep-deleted": "1h" } }),
      "the body names store other, the URL store home; a store cannot be renamed\n",
    ],
    [
      "a name mismatch in XML",
      xml('<store name="other" type="recursive"/>'),
      "the body names store other, the URL store home; a store cannot be renamed\n",
    ],
    [
      "a setting given twice",
      json({
        settings: [
          { name: "keep-deleted", value: "1h" },
          { name: "keep-deleted", value: "2h" },
        ],
      }),
      'setting "keep-deleted" given twice\n',
    ],
  ])("PUT /resources/v2/stores/{name} with %s -> 400 text/plain reason, nothing changed", async (_, init, reason) => {
    const before = (await client.fetch("GET", STORES)).text;
    const reply = await client.fetch("PUT", `${STORES}/home`, init);
    expectError(reply, 400, reason instanceof RegExp ? reason : reason.slice(0, -1));
    expect((await client.fetch("GET", STORES)).text).toBe(before);
  });

  test.each(["GET", "DELETE"])(
    "%s /resources/v2/stores/{name} with a bad store name -> 400 text/plain reason",
    async (method) => {
      const before = (await client.fetch("GET", STORES)).text;
      expectError(await client.fetch(method, `${STORES}/-bad`), 400, INVALID_NAME("-bad"));
      expectError(await client.fetch(method, `${STORES}/a%20b`), 400, INVALID_NAME("a b"));
      expectError(await client.fetch(method, `${STORES}/%zz`), 400, "malformed percent-encoding in the store name");
      expect((await client.fetch("GET", STORES)).text).toBe(before);
    },
  );

  test("a resource path with a bad store name -> 400 text/plain reason", async () => {
    expectError(await client.fetch("GET", `${DATA}/-bad/`), 400, INVALID_NAME("-bad"));
    expectError(
      await client.fetch("PUT", `${DATA}/a%20b/x.txt`, { body: new Uint8Array([1]) }),
      400,
      INVALID_NAME("a b"),
    );
  });
});

describe("store settings that hold secrets", () => {
  const PASSWORD = "s3cret-Pa55";
  const SECRETS: Record<string, string> = {
    "database-driver": "pg",
    "database-dialect": "postgresql",
    "database-connection-url": `postgres://trove:${PASSWORD}@db.internal:5432/trove?sslmode=require`,
    "database-username": "trove",
    "database-password": PASSWORD,
  };

  /** A server whose storage reports database credentials, as a networked backend would. */
  async function startWithCredentials(reported: Record<string, string>): Promise<void> {
    await stop();
    const dataDir = await mkdtemp(join(tmpdir(), "trove-test-"));
    const storage = await SqliteStorage.open({ dataDir });
    await ensureHomeStore(storage, Date.now());
    const withCredentials = Object.create(storage, {
      reportedSettings: { value: () => ({ ...storage.reportedSettings(), ...reported }) },
    }) as SqliteStorage;
    const server = createTroveServer({
      logger: pino({ level: "silent" }),
      storage: withCredentials,
      auth: "anonymous",
    });
    const { port } = await server.listen(0, "127.0.0.1");
    client = restClient({ url: `http://127.0.0.1:${port}`, port });
    stop = async () => {
      await server.close();
      await rm(dataDir, { recursive: true, force: true });
    };
  }

  test("database-connection-url and database-password are never shown in clear (store listing, GET, POST, PUT)", async () => {
    await startWithCredentials(SECRETS);
    const replies = [
      await client.fetch("GET", STORES),
      await client.fetch("GET", `${STORES}/home`),
      await client.fetch("POST", STORES, json({ name: "x", type: "snapshot" })),
      await client.fetch("PUT", `${STORES}/x`, json({ settings: { "keep-deleted": "1d" } })),
    ];
    for (const reply of replies) {
      expect(reply.status).toBeLessThan(300);
      expect(reply.text).not.toContain(PASSWORD);
    }
    const home = storeOf(replies[1] as Reply);
    expect(home.settings["database-password"]).toBe("********");
    expect(home.settings["database-connection-url"]).toBe(
      "postgres://trove:********@db.internal:5432/trove?sslmode=require",
    );
    expect(home.settings["database-username"]).toBe("trove");
  });

  test.each([
    [
      "a JDBC password query parameter",
      `jdbc:postgresql://db.internal:5432/trove?user=trove&password=${PASSWORD}&ssl=true`,
      "jdbc:postgresql://db.internal:5432/trove?user=trove&password=********&ssl=true",
    ],
    [
      "user info whose password holds an unencoded @",
      `postgres://trove:p@${PASSWORD}@db.internal/trove`,
      "postgres://trove:********@db.internal/trove",
    ],
    [
      "user info before several hosts",
      `mongodb://trove:${PASSWORD}@db1:27017,db2:27017/trove?authSource=admin`,
      "mongodb://trove:********@db1:27017,db2:27017/trove?authSource=admin",
    ],
  ])("database-connection-url with %s is not shown in clear", async (_, url, shown) => {
    await startWithCredentials({ "database-connection-url": url, "database-password": PASSWORD });
    const reply = await client.fetch("GET", STORES);
    expect(reply.status).toBe(200);
    expect(reply.text).not.toContain(PASSWORD);
    expect(storesOf(reply)[0]?.settings["database-connection-url"]).toBe(shown);
  });

  test("a store listing sent back as read (secrets redacted) -> 201: redacted values count as unchanged", async () => {
    await startWithCredentials(SECRETS);
    const read = await client.fetch("GET", `${STORES}/home`);
    const created = await client.fetch("POST", STORES, xml(read.text.replace('name="home"', 'name="copy"')));
    expect(created.status, created.text).toBe(201);
    const updated = await client.fetch("PUT", `${STORES}/home`, xml(read.text));
    expect(updated.status, updated.text).toBe(201);
    expect(updated.text).not.toContain(PASSWORD);
  });

  test("a changed secret setting -> 400, nothing changed", async () => {
    await startWithCredentials(SECRETS);
    const before = (await client.fetch("GET", STORES)).text;
    expectError(
      await client.fetch("PUT", `${STORES}/home`, json({ settings: { "database-password": "guess" } })),
      400,
      'setting "database-password" is managed by the server and cannot be changed',
    );
    expect((await client.fetch("GET", STORES)).text).toBe(before);
  });
});
