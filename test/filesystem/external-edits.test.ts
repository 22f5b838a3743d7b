// Issue 17, items 2 and 3: changes made to a filesystem store's folder by other programs (cp, mv,
// rm -r, mkdir, git checkout) become the change events a follower needs, a mirror made with the
// SDK stays byte-for-byte equal to the folder, Trove's own writes produce no second event, and a
// restart catches what changed while Trove was down.

import { existsSync } from "node:fs";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, test, vi } from "vitest";
import { createRestClient, mirror } from "../../sdk/src/index.js";
import { bytes, DATA, listingEntries } from "../rest/rest-client.js";
import {
  type ChangeLine,
  cleanUp,
  createFolderStore,
  eventsUntil,
  type FolderServer,
  getFile,
  latestEvent,
  run,
  sh,
  startFolderServer,
  tempDir,
  treeOf,
  until,
} from "./support.js";

vi.setConfig({ testTimeout: 60_000 });

let dataDir: string;
let folder: string;
let trove: FolderServer;

beforeEach(async () => {
  dataDir = await tempDir("data");
  folder = await tempDir("folder");
  trove = await startFolderServer(dataDir);
  const reply = await createFolderStore(trove.client, "team", folder);
  expect(reply.status, reply.text).toBe(201);
});

afterEach(async () => {
  await trove.close();
  await cleanUp(dataDir, folder);
});

const has = (events: ChangeLine[], path: string, operation: string) =>
  events.some((e) => e.path === path && e.operation === operation);

describe("external changes become change events (issue 17, item 3)", () => {
  test("cp of a new file -> modify event with a new tag; GET serves its bytes with that ETag", async () => {
    const outside = await tempDir("source");
    await writeFile(join(outside, "src.txt"), "from cp\n");
    const after = await latestEvent(trove.client, "team");
    await run("cp", [join(outside, "src.txt"), join(folder, "letter.txt")]);
    const events = await eventsUntil(trove.client, "team", after, (e) => has(e, "letter.txt", "modify"));
    const event = events.find((e) => e.path === "letter.txt") as ChangeLine;
    expect(event).toMatchObject({ operation: "modify", previousTag: "", type: "text/plain" });
    const got = await getFile(trove.client, "team", "letter.txt");
    expect(got.status).toBe(200);
    expect(got.bytes.toString()).toBe("from cp\n");
    expect(got.etag).toBe(`"${event.tag}"`);
    expect(has(events, "", "modify")).toBe(true);
    await cleanUp(outside);
  });

  test("a file replaced by another program -> modify event whose previous tag is the old ETag", async () => {
    const put = await trove.client.fetch("PUT", `${DATA}/team/a.txt`, { body: bytes("one") });
    expect(put.status).toBe(201);
    const oldTag = (put.headers.get("etag") ?? "").slice(1, -1);
    const after = await latestEvent(trove.client, "team");
    await sh(folder, "printf 'two, longer' > a.tmp && mv a.tmp a.txt");
    const events = await eventsUntil(trove.client, "team", after, (e) => has(e, "a.txt", "modify"));
    const event = events.find((e) => e.path === "a.txt") as ChangeLine;
    expect(event.previousTag).toBe(oldTag);
    expect(event.tag).not.toBe(oldTag);
    expect((await getFile(trove.client, "team", "a.txt")).bytes.toString()).toBe("two, longer");
  });

  test("mv of a file -> delete of the old path and modify of the new one", async () => {
    await writeFile(join(folder, "old.txt"), "moving");
    let after = await latestEvent(trove.client, "team");
    await eventsUntil(trove.client, "team", 0, (e) => has(e, "old.txt", "modify"));
    after = await latestEvent(trove.client, "team");
    await sh(folder, "mv old.txt new.txt");
    const events = await eventsUntil(
      trove.client,
      "team",
      after,
      (e) => has(e, "old.txt", "delete") && has(e, "new.txt", "modify"),
    );
    expect(events.filter((e) => e.path === "old.txt").map((e) => e.operation)).toEqual(["delete"]);
    expect((await getFile(trove.client, "team", "new.txt")).bytes.toString()).toBe("moving");
    expect((await getFile(trove.client, "team", "old.txt")).status).toBe(404);
  });

  test("mkdir -p and files, then rm -r of the directory -> events for the directory and each file", async () => {
    const after = await latestEvent(trove.client, "team");
    await sh(folder, "mkdir -p docs/sub && printf a > docs/a.txt && printf b > docs/sub/b.txt");
    const created = await eventsUntil(trove.client, "team", after, (e) => has(e, "docs/sub/b.txt", "modify"));
    expect(has(created, "docs", "modify")).toBe(true);
    expect(has(created, "docs/sub", "modify")).toBe(true);
    await eventsUntil(trove.client, "team", after, (e) => has(e, "docs/a.txt", "modify"));
    const listing = await trove.client.fetch("GET", `${DATA}/team/docs/?recursive=true`);
    expect(listingEntries(listing.text).map((e) => e.name)).toEqual(["a.txt", "sub", "sub/b.txt"]);
    const before = await latestEvent(trove.client, "team");
    await sh(folder, "rm -r docs");
    const removed = await eventsUntil(
      trove.client,
      "team",
      before,
      (e) => has(e, "docs", "delete") && has(e, "docs/a.txt", "delete") && has(e, "docs/sub/b.txt", "delete"),
    );
    expect(removed.every((e) => e.operation === "delete" || e.path === "")).toBe(true);
    expect((await trove.client.fetch("GET", `${DATA}/team/docs/`)).status).toBe(404);
  });

  test("Trove's own writes produce one event each, not a second one when the folder's notification arrives", async () => {
    const after = await latestEvent(trove.client, "team");
    expect((await trove.client.fetch("PUT", `${DATA}/team/dir/`)).status).toBe(201);
    const put = await trove.client.fetch("PUT", `${DATA}/team/dir/own.txt`, { body: bytes("mine") });
    expect(put.status).toBe(201);
    expect(await readFile(join(folder, "dir", "own.txt"), "utf8")).toBe("mine");
    // A marker written by another program afterwards: once its event is seen, the notifications
    // of Trove's own writes (earlier) have been handled too.
    await sh(folder, "printf m > marker.txt");
    const events = await eventsUntil(trove.client, "team", after, (e) => has(e, "marker.txt", "modify"));
    // The feed carries each resource's latest change: a second record of the same file would
    // show as a tag other than the one the PUT answered, with the PUT's as its previous tag.
    expect(events.filter((e) => e.path === "dir/own.txt")).toEqual([
      expect.objectContaining({ operation: "modify", previousTag: "", tag: put.headers.get("etag")?.slice(1, -1) }),
    ]);
    expect((await getFile(trove.client, "team", "dir/own.txt")).etag).toBe(put.headers.get("etag"));
  });
});

describe("a restart catches what changed while Trove was down (issue 17, item 3)", () => {
  test("unchanged files produce no event; an edit, a new file and a removal made while down do", async () => {
    await writeFile(join(folder, "same.txt"), "unchanged");
    await writeFile(join(folder, "edit.txt"), "before");
    await writeFile(join(folder, "gone.txt"), "to remove");
    await eventsUntil(trove.client, "team", 0, (e) =>
      ["same.txt", "edit.txt", "gone.txt"].every((p) => has(e, p, "modify")),
    );
    const before = await latestEvent(trove.client, "team");
    await trove.close();
    await writeFile(join(folder, "edit.txt"), "after, while down");
    await writeFile(join(folder, "new.txt"), "new");
    await sh(folder, "rm gone.txt");
    trove = await startFolderServer(dataDir);
    const events = await eventsUntil(
      trove.client,
      "team",
      before,
      (e) => has(e, "edit.txt", "modify") && has(e, "gone.txt", "delete") && has(e, "new.txt", "modify"),
    );
    expect((await getFile(trove.client, "team", "edit.txt")).bytes.toString()).toBe("after, while down");
    // The feed carries each resource's latest change: same.txt would be there had it been recorded again.
    expect(events.some((e) => e.path === "same.txt")).toBe(false);
    expect((await getFile(trove.client, "team", "same.txt")).bytes.toString()).toBe("unchanged");
  });
});

const hasGit = existsSync("/usr/bin/git") || existsSync("/bin/git");

describe("bulk changes and a mirror made with the SDK (issue 17, item 3)", () => {
  test("cp, mv, rm -r and git checkout of another branch: the SDK mirror stays byte-for-byte equal to the folder", async () => {
    const target = await tempDir("mirror");
    const abort = new AbortController();
    const rest = createRestClient({ baseUrl: trove.url });
    const follower = mirror({
      client: rest,
      store: "team",
      target: join(target, "copy"),
      signal: abort.signal,
      follow: "poll",
      pollWait: 1,
    });
    const equal = async () => {
      const copy = await treeOf(join(target, "copy")).catch(() => new Map<string, string>());
      const source = await treeOf(folder);
      return JSON.stringify([...copy]) === JSON.stringify([...source]);
    };
    try {
      await sh(folder, "mkdir -p templates/letters && printf 'Dear {name}' > templates/letters/a.tpl");
      await sh(folder, "cp templates/letters/a.tpl templates/letters/b.tpl && printf '\\001\\002\\377' > blob.bin");
      await until(equal, "the mirror to equal the folder after cp");
      await sh(folder, "mv templates/letters templates/mail && rm -r templates/mail/b.tpl");
      await until(equal, "the mirror to equal the folder after mv and rm -r");
      expect(hasGit, "git is installed on this machine").toBe(true);
      const git = (args: string) => sh(folder, `git -c user.email=t@example.com -c user.name=t ${args}`);
      await git("init -q -b main .");
      await git("add -A && git -c user.email=t@example.com -c user.name=t commit -qm main");
      await git("checkout -q -b other");
      await sh(
        folder,
        "rm -r templates && mkdir -p themes/dark && printf 'dark' > themes/dark/theme.json && printf 'x' > blob.bin",
      );
      await git("add -A && git -c user.email=t@example.com -c user.name=t commit -qm other");
      await until(equal, "the mirror to equal the folder on branch other");
      await git("checkout -q main");
      expect(await readFile(join(folder, "templates", "mail", "a.tpl"), "utf8")).toBe("Dear {name}");
      await until(equal, "the mirror to equal the folder after git checkout main");
      // The repository's own files are served too: they are plain files of the folder.
      expect((await getFile(trove.client, "team", ".git/HEAD")).bytes.toString()).toBe("ref: refs/heads/main\n");
    } finally {
      abort.abort();
      await follower.done.catch(() => {});
      await cleanUp(target);
    }
  });
});

describe("directories made by another program", () => {
  test("a directory moved into the folder with its contents -> every file is listed and served", async () => {
    const outside = await tempDir("outside");
    await mkdir(join(outside, "pack", "deep"), { recursive: true });
    await writeFile(join(outside, "pack", "deep", "x.json"), '{"x":1}');
    const after = await latestEvent(trove.client, "team");
    await run("mv", [join(outside, "pack"), join(folder, "pack")]);
    await eventsUntil(trove.client, "team", after, (e) => has(e, "pack/deep/x.json", "modify"));
    expect((await getFile(trove.client, "team", "pack/deep/x.json")).bytes.toString()).toBe('{"x":1}');
    await cleanUp(outside);
  });
});
