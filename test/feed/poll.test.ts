// GET /resources/v2/poll: the spec's Poll, Events and Limits sections.

import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { startServer, type TestServer } from "../support/server.js";

let t: TestServer;
let B: string;

beforeEach(async () => {
  t = await startServer({ pollWait: 1000 });
  B = `${t.url}/resources/v2`;
});
afterEach(async () => {
  await t.stop();
});

async function poll(query: string): Promise<{ status: number; lines: string[]; res: Response }> {
  const res = await fetch(`${B}/poll${query}`);
  const text = await res.text();
  return { status: res.status, lines: text.trim() === "" ? [] : text.trim().split("\n"), res };
}

async function lastEventId(store: string): Promise<number> {
  const { lines } = await poll("");
  const line = lines.find((l) => l.startsWith(`RESET ${store} `));
  return Number(line?.split(" ")[2]);
}

const put = (path: string, body = "x", headers: Record<string, string> = {}) =>
  fetch(`${B}/data/home/${path}`, { method: "PUT", body, headers });

describe("poll", () => {
  it("Client procedure 1-2: a request without parameters answers 200 at once with RESET {store} {event id} per store", async () => {
    await fetch(`${B}/stores`, {
      method: "POST",
      body: '{"name":"brand","type":"snapshot"}',
      headers: { "Content-Type": "application/json" },
    });
    const { status, lines, res } = await poll("");
    expect(status).toBe(200);
    expect(res.headers.get("server")).toBe("resources/1.0");
    expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(lines).toEqual([expect.stringMatching(/^RESET brand \d+$/), expect.stringMatching(/^RESET home \d+$/)]);
  });

  it("Events: a change event is CHANGE|id|idr://store/path|modify|previous ETag|new ETag|type, oldest first", async () => {
    const from = await lastEventId("home");
    const created = await put("a.json", "{}", { "Content-Type": "application/json" });
    const tag1 = created.headers.get("etag")?.replaceAll('"', "");
    const updated = await put("a.json", '{"v":2}', { "Content-Type": "application/json" });
    const tag2 = updated.headers.get("etag")?.replaceAll('"', "");
    const { status, lines } = await poll(`?store=home:${from}`);
    expect(status).toBe(200);
    // Only the latest state of a.json is kept: its event carries the tag it replaced.
    const change = lines.filter((l) => l.includes("idr://home/a.json"));
    expect(change).toHaveLength(1);
    const fields = (change[0] as string).split("|");
    expect(fields).toHaveLength(7);
    expect(fields[0]).toBe("CHANGE");
    expect(Number(fields[1])).toBeGreaterThan(from);
    expect(fields.slice(2)).toEqual(["idr://home/a.json", "modify", tag1, tag2, "application/json"]);
    const ids = lines.map((l) => Number(l.split("|")[1]));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
  });

  it("Events: a created resource has an empty previous ETag; directories have an empty type", async () => {
    const from = await lastEventId("home");
    await fetch(`${B}/data/home/dir/`, { method: "PUT" });
    const { lines } = await poll(`?store=home:${from}`);
    const dir = lines.find((l) => l.includes("|idr://home/dir|"));
    expect(dir).toMatch(/^CHANGE\|\d+\|idr:\/\/home\/dir\|modify\|\|[^|]+\|$/);
  });

  it("Events: a recursive DELETE gives a delete event for every resource below the directory and for the directory", async () => {
    await fetch(`${B}/data/home/d/`, { method: "PUT" });
    await fetch(`${B}/data/home/d/e/`, { method: "PUT" });
    await put("d/a.txt");
    await put("d/e/b.txt");
    const from = await lastEventId("home");
    expect((await fetch(`${B}/data/home/d/`, { method: "DELETE" })).status).toBe(200);
    const { lines } = await poll(`?store=home:${from}`);
    const deletes = lines.filter((l) => l.split("|")[3] === "delete").map((l) => l.split("|")[2]);
    expect(deletes.sort()).toEqual(["idr://home/d", "idr://home/d/a.txt", "idr://home/d/e", "idr://home/d/e/b.txt"]);
    // The directory's own delete event comes after those of its contents.
    expect(lines.findIndex((l) => l.includes("|idr://home/d|"))).toBeGreaterThan(
      lines.findIndex((l) => l.includes("|idr://home/d/a.txt|")),
    );
  });

  it("Events: IDR URIs percent-encode each path segment", async () => {
    const from = await lastEventId("home");
    await put(`${encodeURIComponent("a b|ü.txt")}`);
    const { lines } = await poll(`?store=home:${from}`);
    expect(lines.some((l) => l.split("|")[2] === `idr://home/${encodeURIComponent("a b|ü.txt")}`)).toBe(true);
  });

  it("Poll: 204 with no body when no event occurs within the poll wait", async () => {
    const from = await lastEventId("home");
    const started = Date.now();
    const { status, lines, res } = await poll(`?store=home:${from}`);
    expect(status).toBe(204);
    expect(lines).toEqual([]);
    expect(res.headers.get("server")).toBe("resources/1.0");
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
  });

  it("Poll: a waiting poll answers 200 as soon as an event of a followed store occurs", async () => {
    const from = await lastEventId("home");
    const pending = poll(`?store=home:${from}&wait=10`);
    await new Promise((r) => setTimeout(r, 100));
    await put("late.txt");
    const { status, lines } = await pending;
    expect(status).toBe(200);
    expect(lines.some((l) => l.includes("idr://home/late.txt|modify"))).toBe(true);
  });

  it("Reset: an event id beyond the store's history gives RESET {store} {current id}", async () => {
    const last = await lastEventId("home");
    const { status, lines } = await poll(`?store=home:${last + 100}`);
    expect(status).toBe(200);
    expect(lines).toEqual([`RESET home ${last}`]);
  });

  it("Reset: a store that does not exist gives RESET {store} 0", async () => {
    const { status, lines } = await poll("?store=nothere:5");
    expect(status).toBe(200);
    expect(lines).toEqual(["RESET nothere 0"]);
  });

  it("Reset: after a store is deleted and created again, an old cursor gets RESET", async () => {
    const json = { "Content-Type": "application/json" };
    await fetch(`${B}/stores`, { method: "POST", body: '{"name":"tmp"}', headers: json });
    const old = await lastEventId("tmp");
    await fetch(`${B}/stores/tmp`, { method: "DELETE" });
    await fetch(`${B}/stores`, { method: "POST", body: '{"name":"tmp"}', headers: json });
    const now = await lastEventId("tmp");
    expect(now).toBeGreaterThan(old);
    const { lines } = await poll(`?store=tmp:${old}`);
    expect(lines).toEqual([`RESET tmp ${now}`]);
  });

  it.each([
    ["?store=home", "store must be {store name}:{event id}"],
    ["?store=home:-1", "store must be {store name}:{event id}"],
    ["?store=home:abc", "store must be {store name}:{event id}"],
    ["?store=:3", "store must be {store name}:{event id}"],
    ["?store=bad%20name:3", "invalid store name"],
    ["?store=home:1&store=home:2", "store home given twice"],
    ["?store=home:1&wait=soon", "wait must be a number of seconds"],
    ["?store=home:1&wait=1&wait=2", "wait given twice"],
    ["?since=4", "unknown query parameter since"],
  ])("Errors: malformed poll parameters %s answer 400 with a text/plain reason", async (query, reason) => {
    const { status, res } = await poll(query);
    expect(status).toBe(400);
    expect(res.headers.get("content-type")).toBe("text/plain; charset=utf-8");
    expect(res.headers.get("server")).toBe("resources/1.0");
    const text = await (await fetch(`${B}/poll${query}`)).text();
    expect(text).toContain(reason);
  });

  it("Errors: a poll with another method answers 405", async () => {
    const res = await fetch(`${B}/poll`, { method: "POST" });
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET");
  });
});
