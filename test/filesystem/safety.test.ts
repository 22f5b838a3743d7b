// Issue 17, items 4 and 5: If-Match holds against external edits; symbolic links are never
// followed (not listed, not served, not written through); names Trove's path rules refuse are
// skipped and counted; a half-written file is read again once its writer finishes.

import { createHash } from "node:crypto";
import { open, readdir, readFile, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { bytes, DATA, listingEntries } from "../rest/rest-client.js";
import {
  cleanUp,
  createFolderStore,
  eventsUntil,
  type FolderServer,
  getFile,
  latestEvent,
  sh,
  startFolderServer,
  tempDir,
  until,
} from "./support.js";

vi.setConfig({ testTimeout: 60_000 });

let dataDir: string;
let folder: string;
let outside: string;
let trove: FolderServer;

beforeEach(async () => {
  dataDir = await tempDir("data");
  folder = await tempDir("folder");
  outside = await tempDir("outside");
  await writeFile(join(outside, "secret.txt"), "outside the folder");
  trove = await startFolderServer(dataDir);
  expect((await createFolderStore(trove.client, "team", folder)).status).toBe(201);
});

afterEach(async () => {
  await trove.close();
  await cleanUp(dataDir, folder, outside);
});

async function names(dir: string): Promise<string[]> {
  const reply = await trove.client.fetch("GET", `${DATA}/team/${dir}?recursive=true`);
  expect(reply.status).toBe(200);
  return listingEntries(reply.text).map((e) => String(e.name));
}

async function skippedCount(reason: string): Promise<number> {
  // /metrics is not a REST v2 route (no Server header): a plain fetch.
  const text = await (await fetch(`${trove.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`trove_filesystem_skipped_total{reason="${reason}"}`));
  return Number(line?.split(" ")[1] ?? Number.NaN);
}

describe("If-Match against external edits (issue 17, item 4)", () => {
  test("PUT with the ETag from before an external edit -> 412; the edit stays in the folder", async () => {
    const put = await trove.client.fetch("PUT", `${DATA}/team/a.txt`, { body: bytes("trove's") });
    expect(put.status).toBe(201);
    const stale = put.headers.get("etag") as string;
    await writeFile(join(folder, "a.txt"), "edited by another program");
    const reply = await trove.client.fetch("PUT", `${DATA}/team/a.txt`, {
      headers: { "If-Match": stale },
      body: bytes("overwrite"),
    });
    expect(reply.status).toBe(412);
    expect(await readFile(join(folder, "a.txt"), "utf8")).toBe("edited by another program");
    const now = await getFile(trove.client, "team", "a.txt");
    expect(now.bytes.toString()).toBe("edited by another program");
    expect(now.etag).not.toBe(stale);
    const ok = await trove.client.fetch("PUT", `${DATA}/team/a.txt`, {
      headers: { "If-Match": now.etag as string },
      body: bytes("overwrite"),
    });
    expect(ok.status).toBe(200);
    expect(await readFile(join(folder, "a.txt"), "utf8")).toBe("overwrite");
    expect(await readdir(folder)).toEqual(["a.txt"]);
  });

  test("DELETE with the ETag from before an external edit -> 412; the file stays", async () => {
    const put = await trove.client.fetch("PUT", `${DATA}/team/b.txt`, { body: bytes("one") });
    await sh(folder, "printf 'two!' > b.txt");
    const reply = await trove.client.fetch("DELETE", `${DATA}/team/b.txt`, {
      headers: { "If-Match": put.headers.get("etag") as string },
    });
    expect(reply.status).toBe(412);
    expect(await readFile(join(folder, "b.txt"), "utf8")).toBe("two!");
  });

  test("GET after an external edit serves the new bytes with a new ETag and Content-MD5, at once", async () => {
    const put = await trove.client.fetch("PUT", `${DATA}/team/c.txt`, { body: bytes("first") });
    await writeFile(join(folder, "c.txt"), "second version");
    const reply = await trove.client.fetch("GET", `${DATA}/team/c.txt`);
    expect(reply.text).toBe("second version");
    expect(reply.headers.get("etag")).not.toBe(put.headers.get("etag"));
    expect(reply.headers.get("content-md5")).toBe(createHash("md5").update("second version").digest("base64"));
  });
});

describe("symbolic links are never followed (issue 17, item 5)", () => {
  test("links to a file and to a directory outside the folder: not listed, not served, not written through; counted", async () => {
    await symlink(join(outside, "secret.txt"), join(folder, "secret.txt"));
    await symlink(outside, join(folder, "elsewhere"));
    await writeFile(join(folder, "real.txt"), "real");
    await until(async () => (await getFile(trove.client, "team", "real.txt")).status === 200, "real.txt served");
    expect(await names("")).toEqual(["real.txt"]);
    expect((await trove.client.fetch("GET", `${DATA}/team/secret.txt`)).status).toBe(404);
    expect((await trove.client.fetch("GET", `${DATA}/team/elsewhere/`)).status).toBe(404);
    expect((await trove.client.fetch("GET", `${DATA}/team/elsewhere/secret.txt`)).status).toBe(404);
    const through = await trove.client.fetch("PUT", `${DATA}/team/elsewhere/new.txt`, { body: bytes("x") });
    expect(through.status).toBe(404);
    const over = await trove.client.fetch("PUT", `${DATA}/team/elsewhere/secret.txt`, { body: bytes("x") });
    expect(over.status).toBe(404);
    expect((await trove.client.fetch("DELETE", `${DATA}/team/elsewhere/`)).status).toBe(404);
    expect(await readdir(outside)).toEqual(["secret.txt"]);
    expect(await readFile(join(outside, "secret.txt"), "utf8")).toBe("outside the folder");
    await until(async () => (await skippedCount("link")) >= 2, "both links counted");
  });

  test("a directory replaced by a link to the outside after it was served: its files are no longer served", async () => {
    await sh(folder, "mkdir d && printf 'inside' > d/secret.txt");
    await until(async () => (await getFile(trove.client, "team", "d/secret.txt")).status === 200, "d/secret.txt");
    await sh(folder, `rm -r d && ln -s ${outside} d`);
    const reply = await trove.client.fetch("GET", `${DATA}/team/d/secret.txt`);
    expect(reply.status).toBe(404);
    expect(reply.text).not.toContain("outside the folder");
    expect((await trove.client.fetch("PUT", `${DATA}/team/d/secret.txt`, { body: bytes("x") })).status).toBe(404);
    expect(await readFile(join(outside, "secret.txt"), "utf8")).toBe("outside the folder");
    expect(await names("")).toEqual([]);
  });
});

describe("names Trove's path rules refuse are skipped and reported (issue 17, item 5)", () => {
  test("a name with a control character and one that is not UTF-8: not listed, not served under another name; counted", async () => {
    const before = await skippedCount("name");
    await writeFile(join(folder, "line\nbreak.txt"), "bad name");
    await writeFile(Buffer.concat([Buffer.from(`${folder}/`), Buffer.from([0x6c, 0xff, 0x2e, 0x74])]), "latin-1");
    await writeFile(join(folder, "good.txt"), "good");
    await until(async () => (await getFile(trove.client, "team", "good.txt")).status === 200, "good.txt served");
    await until(async () => (await skippedCount("name")) >= before + 2, "both names counted");
    expect(await names("")).toEqual(["good.txt"]);
    expect((await trove.client.fetch("GET", `${DATA}/team/l%EF%BF%BD.t`)).status).toBe(404);
  });
});

describe("a half-written file (issue 17, item 5)", () => {
  test("is read again when its writer finishes: the final bytes are served with their own ETag", async () => {
    const after = await latestEvent(trove.client, "team");
    const handle = await open(join(folder, "big.dat"), "w");
    await handle.write(Buffer.alloc(1000, "a"));
    await handle.sync();
    await eventsUntil(trove.client, "team", after, (e) => e.some((x) => x.path === "big.dat"));
    const partial = await getFile(trove.client, "team", "big.dat");
    expect(partial.bytes.length).toBe(1000);
    await handle.write(Buffer.alloc(500, "b"));
    await handle.close();
    const expected = Buffer.concat([Buffer.alloc(1000, "a"), Buffer.alloc(500, "b")]);
    await until(async () => (await getFile(trove.client, "team", "big.dat")).bytes.equals(expected), "the whole file");
    const whole = await trove.client.fetch("GET", `${DATA}/team/big.dat`);
    expect(whole.headers.get("etag")).not.toBe(partial.etag);
    expect(whole.headers.get("content-md5")).toBe(createHash("md5").update(expected).digest("base64"));
    const events = await eventsUntil(trove.client, "team", after, (e) =>
      e.some((x) => x.path === "big.dat" && `"${x.tag}"` === whole.headers.get("etag")),
    );
    expect(events.filter((e) => e.path === "big.dat").at(-1)?.operation).toBe("modify");
  });
});
