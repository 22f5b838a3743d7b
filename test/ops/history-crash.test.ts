// A subtree restore cut short by a crash (issue 27; docs/history.md, "How a subtree restore
// works"): `trove serve` in a child process holds 1,000 resources below templates/ at moment E;
// templates/ is deleted recursively and edited, then `PUT templates/?restore-as-of=E` starts and
// the server is killed (SIGKILL) once the change feed shows that the restore has made some of its
// changes. Restarted on the same data directory, the restore is run again until it reports no
// change: templates/ is then what it was at E, path by path and byte for byte, and a follower
// polling the feed from before the restore, across the restart, holds what the server holds.
// On SQLite, and on MongoDB when TROVE_TEST_MONGODB_URL is given.

import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import { request } from "node:http";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Mirror } from "../feed/mirror.js";
import { listingEntries, parseXml } from "../rest/rest-client.js";
import { type ChildServer, startChildServer } from "../support/child-server.js";
import { describeWithMongoDb } from "../support/mongodb.js";

// Generous bounds for "eventually": a loaded machine writes 1,000 resources slowly (the SQLite case
// took 11 to 50 s at load averages 13 to 22), FerretDB v1.24 far more so: its queries slow down as
// the collections grow (1,000 PUTs 29 s, a restore of 1,003 changes 83 s on a quiet machine), and
// the MongoDB case with 1,000 resources took 49 minutes at load averages 6 to 14 (it runs 200).
vi.setConfig({ hookTimeout: 120_000 });

const DATA = "/resources/v2/data/home";
/** Where the 1,000 resources live: a few directories, one of them nested. */
const DIRECTORIES = ["templates", "templates/a", "templates/b", "templates/c", "templates/c/deep", "templates/d"];
const HOLDERS = DIRECTORIES.slice(1);
const FILES = 1000;
/** Above the inline limit (64 KiB): kept in a blob file, not in the database row. */
const LARGE = 70 * 1024;

const servers: ChildServer[] = [];
const dataDirs = new Set<string>();

afterEach(async () => {
  for (const server of servers.splice(0)) await server.stop();
  for (const dir of dataDirs) await rm(dir, { recursive: true, force: true });
  dataDirs.clear();
});

/** The server that answers now: the first one, then the one restarted on its data directory. */
interface Live {
  server: ChildServer;
}

async function call(live: Live, method: string, path: string, body?: Uint8Array | string): Promise<Response> {
  return fetch(`${live.server.url}${path}`, {
    method,
    body,
    headers: { authorization: live.server.authorization, "content-type": "application/octet-stream" },
  });
}

async function expectStatus(res: Promise<Response>, status: number, what: string): Promise<Response> {
  const answer = await res;
  const text = answer.status === status ? "" : await answer.text();
  expect(answer.status, `${what}: ${text}`).toBe(status);
  return answer;
}

/** The store's last event id: a poll without cursors answers `RESET home {id}`. */
async function lastEvent(live: Live): Promise<number> {
  const text = await (await call(live, "GET", "/resources/v2/poll")).text();
  const line = text.split("\n").find((l) => l.startsWith("RESET home "));
  if (!line) throw new Error(`no RESET line for home in ${JSON.stringify(text)}`);
  return Number(line.split(" ")[2]);
}

/** What a client can see of a subtree: each path (directory or file) with its MD5, type and bytes. */
interface Subtree {
  entries: string[];
  contents: Map<string, Buffer>;
}

async function readSubtree(live: Live, asOf?: number): Promise<Subtree> {
  const query = asOf === undefined ? "" : `&as-of=${asOf}`;
  const listing = await expectStatus(call(live, "GET", `${DATA}/templates/?recursive=true${query}`), 200, "listing");
  const entries = listingEntries(await listing.text());
  const contents = new Map<string, Buffer>();
  const files = entries.filter((e) => e.directory !== "true");
  for (let i = 0; i < files.length; i += 16) {
    await Promise.all(
      files.slice(i, i + 16).map(async (e) => {
        const suffix = asOf === undefined ? "" : `?as-of=${asOf}`;
        const res = await expectStatus(call(live, "GET", `${DATA}/templates/${e.name}${suffix}`), 200, `GET ${e.name}`);
        contents.set(String(e.name), Buffer.from(await res.arrayBuffer()));
      }),
    );
  }
  return {
    entries: entries.map((e) => `${e.name} directory=${e.directory ?? "false"} size=${e.size} md5=${e.md5} ${e.type}`),
    contents,
  };
}

/** Every path, its kind, size, MD5 and type, in listing order, and every file's bytes. */
function expectSame(actual: Subtree, expected: Subtree): void {
  expect(actual.entries).toEqual(expected.entries);
  expect([...actual.contents.keys()].sort()).toEqual([...expected.contents.keys()].sort());
  for (const [name, bytes] of expected.contents) {
    expect(actual.contents.get(name)?.equals(bytes), `contents of templates/${name}`).toBe(true);
  }
}

/**
 * A follower of home's feed by REST long polls (the spec's client procedure), against whichever
 * server is live: while none answers it tries again. `onEvent` sees each event id as it is applied.
 */
function follow(live: Live, mirror: Mirror, signal: AbortSignal, onEvent: (id: number) => void): Promise<void> {
  return (async () => {
    while (!signal.aborted) {
      let text: string;
      let status: number;
      try {
        const res = await fetch(`${live.server.url}/resources/v2/poll?store=home:${mirror.cursor}&wait=0.5`, {
          headers: { authorization: live.server.authorization },
          signal,
        });
        status = res.status;
        text = await res.text();
      } catch {
        if (signal.aborted) return;
        await new Promise((r) => setTimeout(r, 50)); // no server answering: killed, not yet restarted
        continue;
      }
      if (status === 204) continue;
      if (status !== 200) throw new Error(`poll answered ${status}: ${text}`);
      for (const line of text.trim().split("\n")) {
        if (line.startsWith("RESET ")) throw new Error(`the follower was reset: ${line}`);
        await mirror.applyLine(line);
        onEvent(mirror.cursor);
      }
    }
  })();
}

/** The store as a recursive listing shows it, as the follower keeps it: path -> tag, "" the root. */
async function storeTags(live: Live): Promise<Map<string, string>> {
  const res = await expectStatus(call(live, "GET", `${DATA}/?recursive=true`), 200, "listing of home");
  const map = new Map<string, string>([["", (res.headers.get("etag") ?? "").replaceAll('"', "")]]);
  for (const e of listingEntries(await res.text())) map.set(String(e.name), String(e.tag));
  return new Map([...map].sort());
}

/**
 * A request through node:http, which never gives up waiting for the answer (fetch does after 300 s
 * without headers, and a restore of 1,000 resources on FerretDB may take longer).
 */
function longCall(live: Live, method: string, path: string): Promise<{ status: number; text: string }> {
  const { port, authorization } = live.server;
  return new Promise((resolve, reject) => {
    const req = request({ host: "127.0.0.1", port, method, path, headers: { authorization } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("error", reject);
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString() }));
    });
    req.on("error", reject);
    req.end();
  });
}

/** A restore of templates/ to event E: the changes it reports (made, or with dryRun to be made). */
async function restore(live: Live, event: number, dryRun = false): Promise<string[]> {
  const query = `restore-as-of=${event}${dryRun ? "&dry-run=true" : ""}`;
  const res = await longCall(live, "PUT", `${DATA}/templates/?${query}`);
  expect(res.status, `restore: ${res.text}`).toBe(200);
  const doc = parseXml(res.text) as { restore: { change?: Record<string, string> | Record<string, string>[] } };
  const changes = doc.restore.change ?? [];
  return (Array.isArray(changes) ? changes : [changes]).map((c) => `${c.operation} ${c.path}`);
}

async function inBatches(count: number, each: (i: number) => Promise<void>): Promise<void> {
  for (let i = 0; i < count; i += 8) {
    await Promise.all(Array.from({ length: Math.min(8, count - i) }, (_, k) => each(i + k)));
  }
}

function fileOf(i: number): string {
  return `${HOLDERS[i % HOLDERS.length]}/t${String(i).padStart(4, "0")}.bin`;
}

const SCENARIO =
  "a restore-as-of cut by SIGKILL, run again after the restart until it reports no change, leaves templates/ as it was at E byte for byte; a follower across the restart holds what the server holds";

function crashScenario(serveArgs: () => string[], timeout: number, files = FILES): void {
  it(`${SCENARIO} (${files} resources)`, { timeout }, async () => {
    const first = await startChildServer({ args: serveArgs() });
    servers.push(first);
    dataDirs.add(first.dataDir);
    const live: Live = { server: first };

    // Before E: 1,000 resources, a few of them above the inline limit, 50 of them written twice.
    for (const dir of DIRECTORIES) await expectStatus(call(live, "PUT", `${DATA}/${dir}/`), 201, `PUT ${dir}/`);
    await inBatches(files, async (i) => {
      const body = randomBytes(i % 97 === 0 ? LARGE : 1 + ((i * 37) % 3000));
      await expectStatus(call(live, "PUT", `${DATA}/${fileOf(i)}`, body), 201, `PUT ${fileOf(i)}`);
    });
    await inBatches(50, async (i) => {
      await expectStatus(call(live, "PUT", `${DATA}/${fileOf((i * 20) % files)}`, randomBytes(500)), 200, "PUT again");
    });
    await expectStatus(call(live, "PUT", `${DATA}/outside.txt`, "outside, before E"), 201, "PUT outside.txt");
    const E = await lastEvent(live);
    const atE = await readSubtree(live);
    expect(atE.entries).toHaveLength(files + DIRECTORIES.length - 1);
    expect(atE.contents.size).toBe(files);

    // The follower starts here, from a listing, as a client that has followed home all along.
    const mirror = new Mirror(first.url, "home");
    mirror.entries = await storeTags(live);
    mirror.cursor = E;
    const stopFollowing = new AbortController();
    let seen = E;
    const followed = follow(live, mirror, stopFollowing.signal, (id) => {
      seen = id;
    });

    try {
      // After E: some resources written again (the restore must take E's state, not the last
      // one before the delete), templates/ deleted, then written into again.
      await inBatches(20, async (i) => {
        await expectStatus(
          call(live, "PUT", `${DATA}/${fileOf((i * 30 + 1) % files)}`, randomBytes(300)),
          200,
          "PUT after E",
        );
      });
      await expectStatus(call(live, "DELETE", `${DATA}/templates/`), 200, "DELETE templates/");
      await expectStatus(call(live, "PUT", `${DATA}/templates/`), 201, "PUT templates/");
      await expectStatus(call(live, "PUT", `${DATA}/templates/a/`), 201, "PUT templates/a/");
      await expectStatus(call(live, "PUT", `${DATA}/${fileOf(0)}`, "other bytes"), 201, "PUT a file of E");
      await expectStatus(call(live, "PUT", `${DATA}/templates/added.txt`, "not there at E"), 201, "PUT added.txt");
      await expectStatus(call(live, "PUT", `${DATA}/templates/b`, "a file where a directory was"), 201, "PUT b");
      await expectStatus(call(live, "PUT", `${DATA}/outside.txt`, "outside, after E"), 200, "PUT outside.txt");
      const outside = await (await call(live, "GET", `${DATA}/outside.txt`)).text();

      // The restore, and the kill once the feed shows 20 of its changes (a kill by what was
      // done, not by a timer). Nothing else writes meanwhile: every event after `start` is its.
      const start = await lastEvent(live);
      const planned = await restore(live, E, true);
      expect(planned.length).toBeGreaterThan(files);
      const cut = longCall(live, "PUT", `${DATA}/templates/?restore-as-of=${E}`).then(
        (res) => `answered ${res.status}: ${res.text.slice(0, 200)}`,
        () => "cut",
      );
      await until(() => seen >= start + 20, "the feed to show 20 changes of the restore");
      await first.kill();
      expect(await cut, "the restore was still running when the server was killed").toBe("cut");

      // The same data directory, restarted: the restore is finished by running it again.
      const second = await startChildServer({ args: serveArgs(), dataDir: first.dataDir });
      servers.push(second);
      live.server = second;
      const left = await restore(live, E, true);
      expect(left.length, "changes left after the kill").toBeGreaterThan(0);
      expect(left.length).toBeLessThan(planned.length);
      const runs: string[][] = [];
      for (let run = 0; run < 5; run++) {
        runs.push(await restore(live, E));
        if (runs.at(-1)?.length === 0) break;
      }
      expect(runs[0]).toEqual(left);
      expect(runs.at(-1)).toEqual([]);
      expect(runs.length, "runs until the restore reported no change").toBe(2);

      expectSame(await readSubtree(live), atE);
      // E reads as it did before the crash, and what is outside templates/ was left alone.
      expectSame(await readSubtree(live, E), atE);
      expect(await (await call(live, "GET", `${DATA}/outside.txt`)).text()).toBe(outside);

      // The follower saw every change, across the restart: its state is the server's.
      const last = await lastEvent(live);
      await until(() => seen >= last, `the follower to reach event ${last}`);
      expect(mirror.resets).toBe(0);
      expect(new Map([...mirror.entries].sort())).toEqual(await storeTags(live));
    } finally {
      stopFollowing.abort();
      await followed;
    }
  });
}

/** Waits until `cond()` holds, checking every 5 ms; fails naming `what` after a generous bound. */
async function until(cond: () => boolean, what: string, ms = 300_000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe("a subtree restore cut by SIGKILL, on SQLite", () => {
  crashScenario(() => [], 600_000);
});

describeWithMongoDb("a subtree restore cut by SIGKILL, on MongoDB", (url) => {
  let database = "";
  afterEach(async () => {
    for (const server of servers.splice(0)) await server.stop();
    if (database === "") return;
    const { MongoStorage } = await import("../../src/storage/mongodb/mongo-storage.js");
    const admin = await MongoStorage.open({ url, database });
    await admin.dropDatabase();
    await admin.close();
    database = "";
  });
  crashScenario(
    () => {
      database ||= `trove_test_${randomBytes(6).toString("hex")}`;
      return ["--mongodb-url", url, "--mongodb-database", database];
      // 200 resources: FerretDB (SQLite behind the wire protocol) took 49 minutes for 1,000 at load
      // 6-14, most of CI's time; the crash and the re-run are the same, the SQLite case keeps 1,000.
    },
    1_200_000,
    200,
  );
});
