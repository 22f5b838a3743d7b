// Issue 31, item 3: push() and pull() keep a local state (`.DIR.trove-transfer.json` beside DIR:
// each file's size, times, inode and MD5), so a run whose local side did not change sends one
// listing request and reads no file contents (summary.hashed 0), while a same-size edit on either
// side is still carried over: on the server, by the listing's MD5; locally, by the changed
// modification or change time. Requests are counted by the fetch the REST client is given.

import { mkdir, mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createRestClient, pull, push, type TroveRestClient } from "../../sdk/src/index.js";
import { stateFileOf } from "../../sdk/src/transfer/local-state.js";
import { startServer, type TestServer } from "../support/server.js";

let work: string;
let cacheBefore: string | undefined;
let server: TestServer;
let rest: TroveRestClient;
const requests: string[] = [];
let counted: TroveRestClient;

const FILES = 30;
const LONG_AGO = new Date("2026-01-01T00:00:00Z");

/** Sets every file's times into the past: the state trusts only files older than its record. */
async function age(dir: string): Promise<void> {
  for (const name of await readdir(dir, { recursive: true })) {
    const full = join(dir, name);
    if ((await stat(full)).isFile()) await utimes(full, LONG_AGO, LONG_AGO);
  }
}

async function content(store: string, path: string): Promise<string> {
  const got = await rest.get(store, path, { as: "text" });
  if (got.notModified) throw new Error("not modified without a condition");
  return got.body;
}

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), "trove-transfer-state-"));
  // The states' default place, the user's cache directory, here inside the test's own.
  cacheBefore = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = join(work, "cache");
  server = await startServer();
  rest = createRestClient({ baseUrl: server.url });
  counted = createRestClient({
    baseUrl: server.url,
    fetch: (input, init) => {
      requests.push(`${init?.method ?? "GET"} ${String(input).slice(server.url.length)}`);
      return fetch(input, init);
    },
  });
}, 60_000);

afterAll(async () => {
  if (cacheBefore === undefined) delete process.env.XDG_CACHE_HOME;
  else process.env.XDG_CACHE_HOME = cacheBefore;
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("issue 31 item 3: incremental pull and push with a local state", () => {
  it("a pull with nothing changed sends one listing request and hashes no file; a same-size edit on the server is carried over", async () => {
    await rest.stores.create("pulled");
    for (let i = 0; i < FILES; i++) await rest.put("pulled", `f${i}.txt`, `file ${String(i).padStart(3, "0")}`);
    const dir = join(work, "pull-dir");
    const first = await pull({ client: counted, store: "pulled", directory: dir });
    expect(first.transferred).toBe(FILES);
    // The state is in the user's cache directory: nothing is written in DIR or beside it.
    const states = join(work, "cache", "trove", "transfers");
    expect(await readdir(states)).toEqual([stateFileOf(dir, states).slice(states.length + 1)]);
    expect((await readdir(work)).sort()).toEqual(["cache", "pull-dir"]);
    expect((await readdir(dir)).sort()).toEqual(Array.from({ length: FILES }, (_, i) => `f${i}.txt`).sort());

    await age(dir); // changes every file's change time: hashed once more, then trusted
    const again = await pull({ client: counted, store: "pulled", directory: dir });
    expect({ transferred: again.transferred, hashed: again.hashed }).toEqual({ transferred: 0, hashed: FILES });

    requests.length = 0;
    const idle = await pull({ client: counted, store: "pulled", directory: dir });
    expect({ transferred: idle.transferred, skipped: idle.skipped, hashed: idle.hashed }).toEqual({
      transferred: 0,
      skipped: FILES,
      hashed: 0,
    });
    expect(requests).toEqual(["GET /resources/v2/data/pulled/?recursive=true"]);

    // The same size, other bytes, on the server: the listing's MD5 differs from the recorded one.
    await rest.put("pulled", "f7.txt", "FILE 007");
    requests.length = 0;
    const edited = await pull({ client: counted, store: "pulled", directory: dir });
    expect({ transferred: edited.transferred, hashed: edited.hashed }).toEqual({ transferred: 1, hashed: 0 });
    // The listing, and the file in a batch of one (docs/cli.md, "Small files by batches").
    expect(requests).toEqual([
      "GET /resources/v2/data/pulled/?recursive=true",
      "POST /trove.resources.v2.ResourceService/ReadMany",
    ]);
    expect(await readFile(join(dir, "f7.txt"), "utf8")).toBe("FILE 007");
  });

  it("a push with nothing changed hashes no file; a same-size local edit is uploaded, even with its old modification time put back", async () => {
    await rest.stores.create("pushed");
    const dir = join(work, "push-dir");
    await mkdir(dir);
    for (let i = 0; i < FILES; i++) await writeFile(join(dir, `f${i}.txt`), `file ${String(i).padStart(3, "0")}`);
    await age(dir);
    const first = await push({ client: counted, store: "pushed", directory: dir });
    expect({ transferred: first.transferred, hashed: first.hashed }).toEqual({ transferred: FILES, hashed: 0 });

    requests.length = 0;
    const idle = await push({ client: counted, store: "pushed", directory: dir });
    expect({ transferred: idle.transferred, hashed: idle.hashed }).toEqual({ transferred: 0, hashed: 0 });
    expect(requests).toEqual(["GET /resources/v2/data/pushed/?recursive=true"]);

    await writeFile(join(dir, "f3.txt"), "FILE 003"); // same size, now
    await writeFile(join(dir, "f4.txt"), "FILE 004");
    await utimes(join(dir, "f4.txt"), LONG_AGO, LONG_AGO); // same size, old mtime: its ctime changed
    const edited = await push({ client: counted, store: "pushed", directory: dir });
    expect({ transferred: edited.transferred, hashed: edited.hashed }).toEqual({ transferred: 2, hashed: 2 });
    expect(await content("pushed", "f3.txt")).toBe("FILE 003");
    expect(await content("pushed", "f4.txt")).toBe("FILE 004");
  });

  it("with state: false nothing is recorded and every same-size file is hashed", async () => {
    await rest.stores.create("stateless");
    await rest.put("stateless", "a.txt", "aaaa");
    const dir = join(work, "stateless-dir");
    await pull({ client: counted, store: "stateless", directory: dir, state: false });
    await age(dir);
    const again = await pull({ client: counted, store: "stateless", directory: dir, state: false });
    expect(again.hashed).toBe(1);
    const states = join(work, "cache", "trove", "transfers");
    expect(await readdir(states)).not.toContain(stateFileOf(dir, states).slice(states.length + 1));
  });
});
