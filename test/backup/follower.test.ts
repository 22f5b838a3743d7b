// A follower of the change feed switching from a server to one restored from its backup
// (docs/backup.md, "What a follower sees"): a cursor at or below the store's snapshot id goes on
// with the next changes; a cursor beyond it (writes after the snapshot, not in the archive) gets
// RESET with the snapshot id and relists. Either way it ends equal to the restored server.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterEach, describe, expect, it } from "vitest";
import { writeArchive } from "../../src/backup/archive.js";
import { backupParts } from "../../src/backup/backup.js";
import { restoreArchive } from "../../src/backup/restore.js";
import { createTroveServer } from "../../src/server/server.js";
import type { StoragePort } from "../../src/storage/port.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { startServer } from "../support/server.js";
import { collect } from "./dump.js";

const DATA = "/resources/v2/data";
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Served {
  url: string;
  storage: StoragePort;
}

async function put(url: string, path: string, body: string): Promise<void> {
  const r = await fetch(`${url}${DATA}/home/${path}`, { method: "PUT", body });
  expect([200, 201]).toContain(r.status);
}

/** The server's live resources, path -> tag. */
async function live(s: Served): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for await (const batch of s.storage.listNodes("home", "", { recursive: true, includeDeleted: false })) {
    for (const n of batch) if (!n.directory) out.set(n.path, n.tag);
  }
  return out;
}

/** A follower as docs/change-feed.md describes it: polls from its cursor, relists on RESET. */
class Follower {
  files = new Map<string, string>();
  cursor = 0;
  resets: number[] = [];

  async sync(url: string): Promise<void> {
    for (;;) {
      const r = await fetch(`${url}/resources/v2/poll?store=home:${this.cursor}&wait=0`);
      if (r.status === 204) return;
      expect(r.status).toBe(200);
      for (const line of (await r.text()).split("\n").filter((l) => l !== "")) {
        if (line.startsWith("RESET ")) {
          const id = Number(line.split(" ")[2]);
          this.resets.push(id);
          // Relisting: every live node's latest change is on the feed from 0 (nothing purged here).
          this.files.clear();
          this.cursor = 0;
          break;
        }
        const [, event, idr, op, , tag, type] = line.split("|");
        const path = decodeURIComponent((idr as string).slice("idr://home/".length));
        if (type !== "") {
          if (op === "delete") this.files.delete(path);
          else this.files.set(path, tag as string);
        }
        this.cursor = Number(event);
      }
    }
  }
}

async function started(): Promise<Served> {
  const s = await startServer();
  cleanups.push(() => s.stop());
  return { url: s.url, storage: s.storage };
}

/** A server on a new data directory restored from `source`'s backup. */
async function restored(archive: Buffer): Promise<Served> {
  const dataDir = await mkdtemp(join(tmpdir(), "trove-follower-"));
  const storage = await SqliteStorage.open({ dataDir });
  await restoreArchive(
    storage,
    (async function* () {
      yield archive;
    })(),
  );
  const server = createTroveServer({ logger: pino({ level: "silent" }), auth: "anonymous", storage });
  const { port } = await server.listen(0, "127.0.0.1");
  cleanups.push(async () => {
    await server.close();
    await rm(dataDir, { recursive: true, force: true });
  });
  return { url: `http://127.0.0.1:${port}`, storage };
}

async function backupOf(s: Served): Promise<Buffer> {
  const { parts, describe } = backupParts(s.storage);
  return collect(writeArchive(parts, { troveVersion: "test", created: Date.now(), describe }));
}

describe("a follower switching to a restored server (issue 28, Tests 3; docs/backup.md)", () => {
  it("its cursor at the snapshot id: it continues with the restored server's next changes, no RESET, and ends equal", async () => {
    const a = await started();
    await put(a.url, "one.txt", "1");
    await put(a.url, "two.txt", "2");
    const follower = new Follower();
    await follower.sync(a.url);
    const archive = await backupOf(a);
    const b = await restored(archive);
    await put(b.url, "three.txt", "3");
    await fetch(`${b.url}${DATA}/home/one.txt`, { method: "DELETE" });
    await follower.sync(b.url);
    expect(follower.resets).toEqual([]);
    expect(follower.files).toEqual(await live(b));
    expect([...follower.files.keys()].sort()).toEqual(["three.txt", "two.txt"]);
  });

  it("its cursor beyond the snapshot id (writes after the backup): RESET with the snapshot id, a relisting, and it ends equal", async () => {
    const a = await started();
    await put(a.url, "one.txt", "1");
    const archive = await backupOf(a);
    await put(a.url, "after.txt", "not in the archive");
    const follower = new Follower();
    await follower.sync(a.url);
    const beyond = follower.cursor;
    const b = await restored(archive);
    const snapshot = (await b.storage.getStore("home"))?.lastEventId;
    expect(snapshot).toBeLessThan(beyond);
    await follower.sync(b.url);
    expect(follower.resets).toEqual([snapshot]);
    expect(follower.files).toEqual(await live(b));
    expect([...follower.files.keys()]).toEqual(["one.txt"]);
  });
});
