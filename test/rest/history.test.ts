// REST v2 extensions of history (docs/history.md, issue 27): versions of a resource, a version's
// bytes, a resource or a listing as of a moment, restore of a version and of a subtree, and the
// refusals (400 malformed, 404 unknown, 410 before the horizon, 412 If-Match), each leaving the
// stored data unchanged. Runs on SQLite and, in CI's second pass, on MongoDB.

import { createHash } from "node:crypto";
import { afterEach, beforeEach, describe, expect, test } from "vitest";
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
  STORES,
  storeState,
  type TestClock,
  testClock,
  versionElements,
  XML,
} from "./rest-client.js";

let server: TestServer;
let client: RestClient;
let clock: TestClock;

beforeEach(async () => {
  clock = testClock();
  server = await startServer({ now: clock.now });
  client = restClient(server);
});

afterEach(async () => {
  await server.stop();
});

function md5(text: string): string {
  return createHash("md5").update(text).digest("base64");
}

function unquote(tag: string | null): string {
  return (tag ?? "").replace(/^"|"$/g, "");
}

/** The attributes of each `version` element, newest first. */
function versions(path: string, query = ""): Promise<Array<Record<string, string>>> {
  return versionElements(client, `${DATA}/home/${path}?versions=true${query}`);
}

async function replace(path: string, body: string, tag: string): Promise<string> {
  const reply = await client.fetch("PUT", `${DATA}/home/${path}`, { body: bytes(body), headers: { "If-Match": tag } });
  expect(reply.status, reply.text).toBe(200);
  return reply.headers.get("etag") ?? "";
}

/** The store's last event id: a poll without parameters answers `RESET {store} {last event id}` per store. */
async function lastEvent(store = "home"): Promise<number> {
  const reply = await client.fetch("GET", "/resources/v2/poll");
  const line = reply.text.split("\n").find((l) => l.startsWith(`RESET ${store} `));
  if (!line) throw new Error(`no RESET line for ${store} in ${JSON.stringify(reply.text)}`);
  return Number(line.split(" ")[2]);
}

describe("GET {resource}?versions=true (docs/history.md)", () => {
  test("lists every state newest first: modify, modify, delete, with size, md5, type, event, user and current", async () => {
    const t1 = await putResource(client, "a.txt", "one");
    clock.advance(1000);
    await replace("a.txt", "two!", t1);
    clock.advance(1000);
    expect((await client.fetch("DELETE", `${DATA}/home/a.txt`)).status).toBe(200);
    const list = await versions("a.txt");
    expect(list.map((v) => v.operation)).toEqual(["delete", "modify", "modify"]);
    expect(list[0]?.current).toBe("true");
    // A deletion has no contents (docs/history.md).
    expect(list[0]).toMatchObject({ size: "0", md5: "" });
    expect(list.slice(1).every((v) => v.current === undefined)).toBe(true);
    expect(list[1]).toMatchObject({ size: "4", md5: md5("two!"), type: "text/plain", user: "anonymous" });
    expect(list[2]).toMatchObject({ size: "3", md5: md5("one"), tag: unquote(t1), user: "anonymous" });
    expect(list[2]?.["last-modified"]).toBe(new Date(clock.now() - 2000).toISOString());
    const events = list.map((v) => Number(v.event));
    expect(events).toEqual([...events].sort((a, b) => b - a));
    expect(list.every((v) => v.blob === undefined)).toBe(true);
    const withBlobs = await versions("a.txt", "&include-blob-uuid=true");
    expect(withBlobs[1]?.blob).toMatch(/^[0-9a-f-]{36}$/);
  });

  test("a directory -> 400 with the reason; a path with no state -> 404; nothing changes", async () => {
    await putDirectory(client, "d/");
    const before = await storeState(client);
    expectError(await client.fetch("GET", `${DATA}/home/d/?versions=true`), 400, /is a directory/);
    expectError(await client.fetch("GET", `${DATA}/home/nothing.txt?versions=true`), 404, /not found/);
    expectError(await client.fetch("GET", `${DATA}/home/a?versions=true&as-of=1`), 400, /do not go together/);
    expectError(await client.fetch("GET", `${DATA}/home/a?versions=maybe`), 400, /must be true or false/);
    expect(await storeState(client)).toEqual(before);
  });
});

describe("GET {resource}?version={tag}", () => {
  test("answers that version's bytes with its own ETag, Content-MD5 and Last-Modified; If-None-Match gives 304", async () => {
    const t1 = await putResource(client, "a.txt", "first contents");
    const firstModified = clock.now();
    clock.advance(5000);
    await replace("a.txt", "second", t1);
    const reply = await client.fetch("GET", `${DATA}/home/a.txt?version=${unquote(t1)}`);
    expect(reply.status).toBe(200);
    expect(reply.text).toBe("first contents");
    expect(reply.headers.get("etag")).toBe(t1);
    expect(reply.headers.get("content-md5")).toBe(md5("first contents"));
    expect(reply.headers.get("last-modified")).toBe(new Date(firstModified).toUTCString());
    const head = await client.fetch("HEAD", `${DATA}/home/a.txt?version=${unquote(t1)}`);
    expect(head.status).toBe(200);
    expect(head.headers.get("content-length")).toBe("14");
    const cached = await client.fetch("GET", `${DATA}/home/a.txt?version=${unquote(t1)}`, {
      headers: { "If-None-Match": t1 },
    });
    expect(cached.status).toBe(304);
    // The current contents are unchanged.
    expect((await client.fetch("GET", `${DATA}/home/a.txt`)).text).toBe("second");
  });

  test("an unknown tag -> 404 with the reason", async () => {
    await putResource(client, "a.txt", "x");
    expectError(await client.fetch("GET", `${DATA}/home/a.txt?version=nope`), 404, /has no version nope/);
  });
});

describe("GET ...?as-of={event or time}", () => {
  test("a resource and a listing as they were at an event and at a time, deleted and later paths as they were then", async () => {
    await putDirectory(client, "docs/");
    const t1 = await putResource(client, "docs/a.txt", "a1");
    await putResource(client, "docs/b.txt", "b1");
    const then = await lastEvent();
    const thenTime = new Date(clock.now()).toISOString();
    clock.advance(60_000);
    await replace("docs/a.txt", "a2", t1);
    expect((await client.fetch("DELETE", `${DATA}/home/docs/b.txt`)).status).toBe(200);
    await putResource(client, "docs/c.txt", "c2");
    for (const moment of [String(then), thenTime]) {
      const a = await client.fetch("GET", `${DATA}/home/docs/a.txt?as-of=${encodeURIComponent(moment)}`);
      expect(a.status).toBe(200);
      expect(a.text).toBe("a1");
      expect(a.headers.get("etag")).toBe(t1);
      const listing = await client.fetch("GET", `${DATA}/home/docs/?as-of=${encodeURIComponent(moment)}`);
      expect(listing.status, listing.text).toBe(200);
      expect(listingEntries(listing.text).map((e) => e.name)).toEqual(["a.txt", "b.txt"]);
      const c = await client.fetch("GET", `${DATA}/home/docs/c.txt?as-of=${encodeURIComponent(moment)}`);
      expect(c.status).toBe(404);
    }
    const root = await client.fetch("GET", `${DATA}/home/?as-of=${then}&recursive=true`);
    expect(listingEntries(root.text).map((e) => e.name)).toEqual(["docs", "docs/a.txt", "docs/b.txt"]);
    // Now: a2, c2, and b deleted.
    const now = await client.fetch("GET", `${DATA}/home/docs/`);
    expect(listingEntries(now.text).map((e) => e.name)).toEqual(["a.txt", "c.txt"]);
  });

  test("malformed moment -> 400; an event that has not happened -> 400; nothing changes", async () => {
    await putResource(client, "a.txt", "x");
    const before = await storeState(client);
    expectError(
      await client.fetch("GET", `${DATA}/home/a.txt?as-of=yesterday`),
      400,
      /^as-of "yesterday" is neither an event id/,
    );
    expectError(await client.fetch("GET", `${DATA}/home/a.txt?as-of=2026-11-27T10:00:00`), 400, /time zone/);
    expectError(await client.fetch("GET", `${DATA}/home/?as-of=999999`), 400, /has not happened/);
    expect(await storeState(client)).toEqual(before);
  });

  test("a store without history (keep-versions 0) -> 410 Gone for an earlier moment, its current event still reads", async () => {
    await createStore(client, "flat", "recursive", { "keep-versions": "0" });
    await putResource(client, "a.txt", "one", {}, "flat");
    const early = await lastEvent("flat");
    await putResource(client, "b.txt", "two", {}, "flat");
    const gone = await client.fetch("GET", `${DATA}/flat/a.txt?as-of=${early}`);
    expectError(gone, 410, /store flat keeps no history \(keep-versions 0\)/);
    const current = await client.fetch("GET", `${DATA}/flat/?as-of=${await lastEvent("flat")}`);
    expect(current.status).toBe(200);
    expect(listingEntries(current.text).map((e) => e.name)).toEqual(["a.txt", "b.txt"]);
  });
});

describe("PUT {resource}?restore={tag}", () => {
  test("the version becomes current again as a new change with a new tag; If-Match applies", async () => {
    const t1 = await putResource(client, "a.txt", "good");
    const t2 = await replace("a.txt", "mistake", t1);
    const wrong = await client.fetch("PUT", `${DATA}/home/a.txt?restore=${unquote(t1)}`, {
      headers: { "If-Match": t1 },
    });
    expectError(wrong, 412, /.+/);
    const reply = await client.fetch("PUT", `${DATA}/home/a.txt?restore=${unquote(t1)}`, {
      headers: { "If-Match": t2 },
    });
    expect(reply.status, reply.text).toBe(200);
    const t3 = reply.headers.get("etag");
    expect(t3).not.toBe(t1);
    expect(t3).not.toBe(t2);
    expect(reply.headers.get("content-md5")).toBe(md5("good"));
    expect((await client.fetch("GET", `${DATA}/home/a.txt`)).text).toBe("good");
    const list = await versions("a.txt");
    expect(list.map((v) => v.md5)).toEqual([md5("good"), md5("mistake"), md5("good")]);
  });

  test("refusals change nothing: unknown tag 404, a body 400, restore on a directory 400, a missing parent 404", async () => {
    await putDirectory(client, "d/");
    const t1 = await putResource(client, "d/a.txt", "x");
    expect((await client.fetch("DELETE", `${DATA}/home/d/`)).status).toBe(200);
    const before = await storeState(client);
    expectError(await client.fetch("PUT", `${DATA}/home/d/a.txt?restore=nope`), 404, /.+/);
    expectError(
      await client.fetch("PUT", `${DATA}/home/d/a.txt?restore=${unquote(t1)}`, { body: bytes("x") }),
      400,
      /takes no body/,
    );
    expectError(await client.fetch("PUT", `${DATA}/home/d/?restore=${unquote(t1)}`), 400, /restore-as-of/);
    expectError(await client.fetch("PUT", `${DATA}/home/d/a.txt?restore=${unquote(t1)}`), 404, /parent/);
    expect(await storeState(client)).toEqual(before);
  });
});

describe("PUT {directory}/?restore-as-of={moment} (undo a recursive delete)", () => {
  test("brings back deleted files, deletes files created since, gives changed ones their old bytes; dry-run first changes nothing; a second run has nothing to do", async () => {
    await putDirectory(client, "templates/");
    await putDirectory(client, "templates/sub/");
    const files: Record<string, string> = {};
    for (let i = 0; i < 12; i++) {
      files[`templates/t${i}.json`] = `{"n":${i}}`;
      await putResource(client, `templates/t${i}.json`, files[`templates/t${i}.json`] as string);
    }
    await putResource(client, "templates/sub/deep.txt", "deep");
    const good = await lastEvent();
    const goodListing = await client.fetch("GET", `${DATA}/home/templates/?recursive=true`);
    clock.advance(1000);
    const t0 = (await client.fetch("HEAD", `${DATA}/home/templates/t0.json`)).headers.get("etag") ?? "";
    await replace("templates/t0.json", "changed", t0);
    await putResource(client, "templates/new.txt", "new");
    expect((await client.fetch("DELETE", `${DATA}/home/templates/sub/`)).status).toBe(200);
    expect((await client.fetch("DELETE", `${DATA}/home/templates/t5.json`)).status).toBe(200);

    const before = await storeState(client);
    const dry = await client.fetch("PUT", `${DATA}/home/templates/?restore-as-of=${good}&dry-run=true`);
    expect(dry.status, dry.text).toBe(200);
    expect(dry.headers.get("content-type")).toBe(XML);
    expect(await storeState(client)).toEqual(before);
    const planned = parseXml(dry.text) as { restore: Record<string, unknown> };
    expect(planned.restore).toMatchObject({ "as-of": String(good), "dry-run": "true", changes: "5" });

    const done = await client.fetch("PUT", `${DATA}/home/templates/?restore-as-of=${good}`);
    expect(done.status, done.text).toBe(200);
    const changes = (parseXml(done.text) as { restore: { change: Array<Record<string, string>> } }).restore.change;
    expect(changes.map((c) => `${c.operation} ${c.path}`).sort()).toEqual(
      [
        "create templates/sub",
        "create templates/sub/deep.txt",
        "create templates/t5.json",
        "delete templates/new.txt",
        "modify templates/t0.json",
      ].sort(),
    );
    for (const [path, body] of Object.entries({ ...files, "templates/sub/deep.txt": "deep" })) {
      expect((await client.fetch("GET", `${DATA}/home/${path}`)).text, path).toBe(body);
    }
    expect((await client.fetch("GET", `${DATA}/home/templates/new.txt`)).status).toBe(404);
    const names = (xml: string) => listingEntries(xml).map((e) => `${e.name} ${e.md5}`);
    expect(names((await client.fetch("GET", `${DATA}/home/templates/?recursive=true`)).text)).toEqual(
      names(goodListing.text),
    );
    const again = await client.fetch("PUT", `${DATA}/home/templates/?restore-as-of=${good}`);
    expect((parseXml(again.text) as { restore: Record<string, unknown> }).restore).toMatchObject({ changes: "0" });
  });

  test("refusals: a resource path 400, a moment before the horizon 410, malformed 400, nothing changes", async () => {
    await createStore(client, "flat", "recursive", { "keep-versions": "0" });
    await putResource(client, "a.txt", "one", {}, "flat");
    const early = await lastEvent("flat");
    await putResource(client, "b.txt", "two", {}, "flat");
    const before = await storeState(client, "flat");
    expectError(await client.fetch("PUT", `${DATA}/flat/a.txt?restore-as-of=${early}`), 400, /end its path with \//);
    expectError(await client.fetch("PUT", `${DATA}/flat/?restore-as-of=${early}`), 410, /keeps no history/);
    expectError(
      await client.fetch("PUT", `${DATA}/flat/?restore-as-of=soon`),
      400,
      /^restore-as-of "soon" is neither an event id/,
    );
    expectError(await client.fetch("PUT", `${DATA}/flat/?dry-run=true`), 400, /goes with restore-as-of/);
    expectError(
      await client.fetch("PUT", `${DATA}/flat/?restore-as-of=${early}`, { headers: { "If-Match": '"x"' } }),
      400,
      /^If-Match is for the restore of one version\n$/,
    );
    expect(await storeState(client, "flat")).toEqual(before);
  });
});

describe("the keep-versions setting", () => {
  test("a new store has keep-versions 30d in the listing; an invalid duration -> 400", async () => {
    await createStore(client, "fresh", "recursive");
    const reply = await client.fetch("GET", STORES);
    expect(reply.text).toMatch(
      /<store name="fresh"[\s\S]*?<setting><name>keep-versions<\/name><value>30d<\/value><\/setting>/,
    );
    const bad = await client.fetch("POST", STORES, {
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ name: "bad", type: "recursive", settings: { "keep-versions": "forever" } }),
    });
    expectError(bad, 400, /invalid duration "forever"/);
  });
});
