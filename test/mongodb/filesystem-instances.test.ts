// Issue 17, item 7: a filesystem store served by two `trove serve` processes on one MongoDB that
// see the same folder. Both serve reads and writes; exactly one scans (the holder of the store's
// scan lease); when the holder is killed (SIGKILL), the other takes the lease over once it runs
// out (--filesystem-scan-lease, short here) and scans from then on.

import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { MongoClient } from "mongodb";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { ADMIN, type Issuer, startIssuer } from "../auth/support.js";
import { cleanUp, tempDir, until } from "../filesystem/support.js";
import { type ChildServer, startChildServer, workerPids } from "../support/child-server.js";
import { describeWithMongoDb, MONGODB_URL } from "../support/mongodb.js";

const DATA = "/resources/v2/data/team";
let issuer: Issuer | undefined;
let token = "";
const started: ChildServer[] = [];
let database = "";
let folder = "";
let client: MongoClient | undefined;

/** An instance on the test's database, with a scan lease of five seconds. */
async function instance(): Promise<ChildServer> {
  const server = await startChildServer({
    args: [
      "--mongodb-url",
      MONGODB_URL as string,
      "--mongodb-database",
      database,
      "--issuer",
      issuer?.url as string,
      "--filesystem-scan-lease",
      "5",
    ],
    token,
  });
  started.push(server);
  return server;
}

function call(server: ChildServer, method: string, target: string, body?: string): Promise<Response> {
  return fetch(`${server.url}${target}`, {
    method,
    body,
    headers: {
      Authorization: `Bearer ${token}`,
      ...(body?.startsWith("{") ? { "Content-Type": "application/json" } : {}),
    },
  });
}

/** The full scans this instance made (of store `team`, the only filesystem store), from its /metrics. */
async function scansOf(server: ChildServer): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`)).text();
  const line = /^trove_filesystem_scans_total (\d+)$/m.exec(text);
  return line ? Number(line[1]) : 0;
}

/** The pid of the process holding the scan lease of `team`, from the lease's documents. */
async function leaseHolder(): Promise<number | undefined> {
  const docs = await client
    ?.db(database)
    .collection<{ epoch: number; pid: number; released?: boolean; until: number }>("filesystemScanLeases")
    .find({ store: "team" })
    .sort({ epoch: -1 })
    .limit(1)
    .toArray();
  const top = docs?.[0];
  return top && !top.released && top.until > Date.now() ? top.pid : undefined;
}

/** Follows the store's events on `server` (long poll) until one for `path` comes. */
async function eventFor(server: ChildServer, path: string): Promise<string> {
  let cursor = 0;
  const end = Date.now() + 30_000;
  for (;;) {
    if (Date.now() > end) throw new Error(`no event for ${path}`);
    const res = await call(server, "GET", `/resources/v2/poll?store=team:${cursor}&wait=2`);
    const text = await res.text();
    if (res.status !== 200) continue;
    const line = text.split("\n").find((l) => l.startsWith("CHANGE|") && l.includes(`|idr://team/${path}|`));
    if (line) return line;
    const ids = [...text.matchAll(/^CHANGE\|(\d+)\|/gm)].map((m) => Number(m[1]));
    const reset = /^RESET team (\d+)$/m.exec(text);
    cursor = Math.max(cursor, ...ids, reset ? Number(reset[1]) : 0);
  }
}

async function get(server: ChildServer, path: string): Promise<{ status: number; text: string; etag: string | null }> {
  const res = await call(server, "GET", `${DATA}/${path}`);
  return { status: res.status, text: await res.text(), etag: res.headers.get("etag") };
}

describeWithMongoDb("a filesystem store served by two instances on one MongoDB (issue 17, item 7)", (url) => {
  beforeAll(async () => {
    issuer = await startIssuer();
    token = await issuer.token(ADMIN, { expiresIn: 3600 });
    client = new MongoClient(url);
  });

  afterAll(async () => {
    await client?.close();
    await issuer?.stop();
  });

  afterEach(async () => {
    for (const s of started.splice(0)) await s.stop();
    if (client && database) await client.db(database).dropDatabase();
    if (folder) await cleanUp(folder);
  });

  it("both serve an external change and writes; one scans; the other takes over when the holder is killed", async () => {
    database = `trove_test_${randomBytes(6).toString("hex")}`;
    folder = await tempDir("shared");
    const a = await instance();
    const b = await instance();
    const created = await call(
      a,
      "POST",
      "/resources/v2/stores",
      JSON.stringify({
        name: "team",
        type: "filesystem",
        settings: { "filesystem-location": folder, "keep-deleted": "1h" },
      }),
    );
    expect(created.status, await created.text()).toBe(201);
    // B learns of the store on its first request for it.
    expect((await call(b, "GET", `${DATA}/`)).status).toBe(200);

    // Exactly one holds the lease and scans; the other made no scan.
    await until(
      async () => (await leaseHolder()) !== undefined && (await scansOf(a)) + (await scansOf(b)) > 0,
      "a scan",
    );
    // An instance is a process, or a primary and its workers (trove serve's default, issue 32):
    // the lease names the process that holds it.
    const pidsOf = async (s: ChildServer) => [s.pid, ...(await workerPids(s.pid))];
    const [pidsA, pidsB] = [await pidsOf(a), await pidsOf(b)];
    const holderPid = (await leaseHolder()) as number;
    const [holder, other] = pidsA.includes(holderPid) ? [a, b] : [b, a];
    const otherPids = other === a ? pidsA : pidsB;
    expect([...pidsA, ...pidsB]).toContain(holderPid);
    expect(await scansOf(holder)).toBeGreaterThan(0);

    // An external change is recorded by the holder's scanner (notified, not read by anyone yet)...
    await writeFile(join(folder, "outside.txt"), "written by another program");
    expect(await eventFor(other, "outside.txt")).toContain("|modify|");
    // ...and served by both, with one tag.
    const fromA = await get(a, "outside.txt");
    const fromB = await get(b, "outside.txt");
    expect(fromA).toMatchObject({ status: 200, text: "written by another program" });
    expect(fromB).toEqual(fromA);

    // Writes through both land in the folder and are served by the other.
    expect((await call(a, "PUT", `${DATA}/from-a.txt`, "through A")).status).toBe(201);
    expect((await call(b, "PUT", `${DATA}/from-b.txt`, "through B")).status).toBe(201);
    expect(await readFile(join(folder, "from-a.txt"), "utf8")).toBe("through A");
    expect(await readFile(join(folder, "from-b.txt"), "utf8")).toBe("through B");
    expect(await get(b, "from-a.txt")).toMatchObject({ status: 200, text: "through A" });
    expect(await get(a, "from-b.txt")).toMatchObject({ status: 200, text: "through B" });
    // A delete through one is gone for both, and from the folder.
    expect((await call(b, "DELETE", `${DATA}/from-a.txt`)).status).toBe(200);
    expect((await get(a, "from-a.txt")).status).toBe(404);
    await expect(readFile(join(folder, "from-a.txt"))).rejects.toMatchObject({ code: "ENOENT" });
    // A write with a stale tag through the other instance is refused.
    const stale = await fetch(`${other.url}${DATA}/outside.txt`, {
      method: "PUT",
      body: "late",
      headers: { Authorization: `Bearer ${token}`, "If-Match": '"0000"' },
    });
    expect(stale.status).toBe(412);

    // Still only the holder scans (several lease rounds have passed by now).
    expect(await scansOf(other)).toBe(0);

    // The holder dies; the other takes the lease over when it runs out, and scans.
    await holder.kill();
    await until(
      async () => otherPids.includes((await leaseHolder()) as number) && (await scansOf(other)) > 0,
      "the takeover",
      60_000,
    );
    await writeFile(join(folder, "after.txt"), "after the takeover");
    expect(await eventFor(other, "after.txt")).toContain("|modify|");
    expect(await get(other, "after.txt")).toMatchObject({ status: 200, text: "after the takeover" });
  }, 120_000);
});
