// Issue 17, item 1: creating a filesystem store (type, settings, features in the store listing),
// the refusals of a location or filesystem-temp that cannot serve (400 with the reason on REST,
// INVALID_ARGUMENT on RPC, nothing created), and deleting a store, which leaves its folder alone.

import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { StoreService } from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
import { bytes, DATA, expectError, parseXml, STORES } from "../rest/rest-client.js";
import {
  cleanUp,
  createFolderStore,
  eventsUntil,
  type FolderServer,
  getFile,
  startFolderServer,
  tempDir,
  until,
} from "./support.js";

let dataDir: string;
let folder: string;
let trove: FolderServer;

beforeEach(async () => {
  dataDir = await tempDir("data");
  folder = await tempDir("folder");
  trove = await startFolderServer(dataDir);
});

afterEach(async () => {
  await trove.close();
  await cleanUp(dataDir, folder);
});

interface StoreElement {
  name: string;
  type: string;
  "store-features": { feature: string[] };
  "store-settings": { setting: Array<{ name: string; value: string }> };
}

function storeElement(xml: string): StoreElement {
  const doc = parseXml(xml) as { stores?: { store: StoreElement[] }; store?: StoreElement[] };
  const store = doc.stores?.store[0] ?? doc.store?.[0];
  if (!store) throw new Error(`no store element in ${xml}`);
  return store;
}

const settingsOf = (store: StoreElement) =>
  Object.fromEntries(store["store-settings"].setting.map((s) => [s.name, s.value]));

describe("a filesystem store (issue 17, item 1)", () => {
  test("POST /resources/v2/stores type filesystem -> 201; listed with its own filesystem-location and filesystem-temp, features sync and sync-recursive", async () => {
    const reply = await createFolderStore(trove.client, "team", folder);
    expect(reply.status, reply.text).toBe(201);
    const store = storeElement((await trove.client.fetch("GET", `${STORES}/team`)).text);
    expect(store.type).toBe("filesystem");
    expect(store["store-features"].feature).toEqual(["sync", "sync-recursive"]);
    const settings = settingsOf(store);
    expect(settings["filesystem-location"]).toBe(folder);
    // The default filesystem-temp: inside Trove's data directory, outside the folder.
    expect(settings["filesystem-temp"]).toBe(join(dataDir, "tmp", "filesystem", "team"));
    expect(settings["keep-deleted"]).toBe("1h");
    // The folder holds only the current files: no history (docs/history.md, "Filesystem stores").
    expect(settings["keep-versions"]).toBe("0");
    expect(settings["database-driver"]).toBe("better-sqlite3");
    // Another store still lists the deployment's filesystem-location.
    const home = await trove.client.fetch("POST", STORES, {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "plain" }),
    });
    expect(settingsOf(storeElement(home.text))["filesystem-location"]).toBe(join(dataDir, "blobs"));
  });

  test("directory tags are sync-recursive: a change below a directory gives it a new ETag", async () => {
    expect((await createFolderStore(trove.client, "team", folder)).status).toBe(201);
    await mkdir(join(folder, "a", "b"), { recursive: true });
    await eventsUntil(trove.client, "team", 0, (e) => e.some((x) => x.path === "a/b"));
    const before = (await trove.client.fetch("HEAD", `${DATA}/team/a/`)).headers.get("etag");
    expect((await trove.client.fetch("PUT", `${DATA}/team/a/b/c.txt`, { body: bytes("c") })).status).toBe(201);
    const after = (await trove.client.fetch("HEAD", `${DATA}/team/a/`)).headers.get("etag");
    expect(after).not.toBe(before);
  });

  test("a folder that already holds files: each is served once the first scan has recorded it", async () => {
    await mkdir(join(folder, "templates"));
    await writeFile(join(folder, "templates", "t.json"), "{}");
    expect((await createFolderStore(trove.client, "team", folder)).status).toBe(201);
    await until(async () => (await getFile(trove.client, "team", "templates/t.json")).status === 200, "t.json");
    expect((await getFile(trove.client, "team", "templates/t.json")).bytes.toString()).toBe("{}");
  });

  test("a filesystem-temp of the operator's choosing: uploads go through it, and a restart removes only what Trove put there", async () => {
    const temp = await tempDir("temp");
    await writeFile(join(temp, "notes.txt"), "the operator's");
    try {
      const reply = await createFolderStore(trove.client, "team", folder, { "filesystem-temp": temp });
      expect(reply.status, reply.text).toBe(201);
      expect(settingsOf(storeElement(reply.text))["filesystem-temp"]).toBe(temp);
      expect((await trove.client.fetch("PUT", `${DATA}/team/a.txt`, { body: bytes("a") })).status).toBe(201);
      await writeFile(join(temp, "upload-00000000-0000-4000-8000-000000000000"), "left by a crash");
      await trove.close();
      trove = await startFolderServer(dataDir);
      await until(async () => (await readdir(temp)).length === 1, "the crash's leftover to be removed");
      expect(await readdir(temp)).toEqual(["notes.txt"]);
      expect((await getFile(trove.client, "team", "a.txt")).bytes.toString()).toBe("a");
    } finally {
      await cleanUp(temp);
    }
  });

  test("DELETE /resources/v2/stores/{name} -> 200; the store is gone, its folder keeps every file", async () => {
    expect((await createFolderStore(trove.client, "team", folder)).status).toBe(201);
    expect((await trove.client.fetch("PUT", `${DATA}/team/kept.txt`, { body: bytes("kept") })).status).toBe(201);
    expect((await trove.client.fetch("DELETE", `${STORES}/team`)).status).toBe(200);
    expect((await trove.client.fetch("GET", `${DATA}/team/kept.txt`)).status).toBe(404);
    expect(await readFile(join(folder, "kept.txt"), "utf8")).toBe("kept");
    expect(await readdir(folder)).toEqual(["kept.txt"]);
  });
});

describe("a filesystem store that cannot serve is refused (issue 17, item 1)", () => {
  async function refused(location: string, extra: Record<string, string>, reason: RegExp): Promise<void> {
    const before = (await trove.client.fetch("GET", STORES)).text;
    const reply = await createFolderStore(trove.client, "team", location, extra);
    expectError(reply, 400, reason);
    expect((await trove.client.fetch("GET", STORES)).text).toBe(before);
    expect(existsSync(join(dataDir, "tmp", "filesystem", "team"))).toBe(false);
  }

  test("filesystem-location that does not exist -> 400 with the reason, nothing created", async () => {
    await refused(join(folder, "missing"), {}, /^filesystem-location .*missing does not exist \(ENOENT\)\n$/);
  });

  test("filesystem-location that is a file -> 400 with the reason", async () => {
    await writeFile(join(folder, "file"), "x");
    await refused(join(folder, "file"), {}, /^filesystem-location .*file is not a directory\n$/);
  });

  test("filesystem-location that is not writable -> 400 with the reason", async () => {
    const locked = join(folder, "locked");
    await mkdir(locked);
    // As root, only an immutable directory refuses writes (chattr +i); as another user, mode 0500.
    const root = process.getuid?.() === 0;
    if (root) execFileSync("chattr", ["+i", locked]);
    else execFileSync("chmod", ["0500", locked]);
    try {
      await refused(locked, {}, /^filesystem-location .*locked is not writable \(E(PERM|ACCES)\): Trove writes/);
      expect(await readdir(locked)).toEqual([]);
    } finally {
      if (root) execFileSync("chattr", ["-i", locked]);
      else execFileSync("chmod", ["0700", locked]);
    }
  });

  test("filesystem-temp inside filesystem-location -> 400 with the reason", async () => {
    await refused(
      folder,
      { "filesystem-temp": join(folder, ".uploads") },
      /^filesystem-temp .*\.uploads lies inside filesystem-location .*: choose a directory outside the served tree\n$/,
    );
    expect(await readdir(folder)).toEqual([]);
  });

  test("a filesystem store with keep-versions above 0 is accepted on creation and on update, and listed (docs/history.md, Filesystem stores)", async () => {
    const created = await createFolderStore(trove.client, "team", folder, { "keep-versions": "30d" });
    expect(created.status, created.text).toBe(201);
    expect(created.text).toContain("<setting><name>keep-versions</name><value>30d</value></setting>");
    const update = await trove.client.fetch("PUT", `${STORES}/team`, {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "team", settings: { "keep-versions": "1d" } }),
    });
    expect([200, 201], update.text).toContain(update.status);
    expect((await trove.client.fetch("GET", STORES)).text).toContain(
      "<setting><name>keep-versions</name><value>1d</value></setting>",
    );
  });

  test("filesystem-temp that cannot be made (/proc/x, below a file) -> 400 with the reason, and the server goes on answering", async () => {
    // Node's recursive mkdir never returns for /proc/x: it held a thread of libuv's pool for ever.
    await refused(
      folder,
      { "filesystem-temp": "/proc/trove-nope/uploads" },
      /^filesystem-temp \/proc\/trove-nope\/uploads cannot be created \(ENOENT\)\n$/,
    );
    await writeFile(join(folder, "..", "a-file"), "x");
    await refused(
      folder,
      { "filesystem-temp": join(folder, "..", "a-file", "uploads") },
      /^filesystem-temp .*a-file\/uploads cannot be created \(ENOTDIR\)\n$/,
    );
    expect((await trove.client.fetch("GET", STORES)).status).toBe(200);
  });

  test("a relative filesystem-location, or none -> 400 with the reason", async () => {
    await refused(
      "relative/dir",
      {},
      /^filesystem-location must be the absolute path of a directory, not "relative\/dir"\n$/,
    );
    const reply = await trove.client.fetch("POST", STORES, {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "team", type: "filesystem" }),
    });
    expectError(reply, 400, /^a filesystem store needs the setting filesystem-location/);
  });

  test("a folder that holds Trove's own data directory -> 400 with the reason", async () => {
    await refused(
      dataDir,
      {},
      /^filesystem-location .* holds Trove's own data directory \(.*\): choose a folder outside it\n$/,
    );
  });

  test("a folder that overlaps another filesystem store's -> 400 with the reason", async () => {
    await mkdir(join(folder, "inner"));
    expect((await createFolderStore(trove.client, "outer", folder)).status).toBe(201);
    const reply = await createFolderStore(trove.client, "team", join(folder, "inner"));
    expectError(reply, 400, /overlaps the folder of filesystem store outer/);
  });

  test("changing filesystem-location, or the type, of a filesystem store -> 400, nothing changed", async () => {
    expect((await createFolderStore(trove.client, "team", folder)).status).toBe(201);
    const before = (await trove.client.fetch("GET", `${STORES}/team`)).text;
    const moved = await trove.client.fetch("PUT", `${STORES}/team`, {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "team", settings: { "filesystem-location": dataDir } }),
    });
    expectError(
      moved,
      400,
      "the filesystem-location of store team cannot be changed: delete the store and create another one",
    );
    const retyped = await trove.client.fetch("PUT", `${STORES}/team`, {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "team", type: "recursive" }),
    });
    expectError(
      retyped,
      400,
      "store team is of type filesystem and cannot become recursive: delete it and create it again",
    );
    expect((await trove.client.fetch("GET", `${STORES}/team`)).text).toBe(before);
  });

  test("CreateStore over gRPC with a missing location -> INVALID_ARGUMENT with the reason, nothing created", async () => {
    const stores = createClient(StoreService, createGrpcTransport({ baseUrl: trove.url }));
    const err = await stores
      .createStore({
        store: {
          name: "team",
          type: "filesystem",
          settings: [{ name: "filesystem-location", value: join(folder, "missing") }],
        },
      })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.InvalidArgument);
    expect((err as ConnectError).rawMessage).toMatch(/^filesystem-location .*missing does not exist/);
    expect((await trove.client.fetch("GET", `${STORES}/team`)).status).toBe(404);
  });
});
