// `trove push DIR STORE/PATH` and `trove pull STORE/PATH DIR`, run as child processes against a
// live server: only what differs is transferred (size, then MD5 against the listing), --delete
// removes extras, --dry-run changes nothing, a file changed on the server between the listing and
// the transfer is named and left alone (exit 4; --force overwrites), pull writes no partial file
// and never outside DIR, and bad arguments are usage errors (exit 2). A concurrent change is made
// deterministic by a forwarding proxy between the CLI and the server that, on the transfer's own
// request, first changes the file on the server, then forwards the request. The SDK's push() and
// pull() are the same code; one case drives push() with its onAction hook.

import type { ChildProcess } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from "node:fs/promises";
import type { Server } from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { createProgress } from "../../sdk/src/cli/progress.js";
import {
  createRestClient,
  isPreconditionFailedError,
  push,
  type TransferAction,
  TransferChangedError,
  type TroveRestClient,
} from "../../sdk/src/index.js";
import { startServer, type TestServer } from "../support/server.js";
import { ensureSdkBuilt } from "./build.js";
import { type CliResult, type RewritingProxyOptions, runTrove, startRewritingProxy } from "./support.js";

// Each case starts several child processes; on a busy machine each takes up to a second.
vi.setConfig({ testTimeout: 120_000 });

const SUMMARY =
  /^trove (push|pull): (\d+) files? transferred, (\d+) skipped, (\d+) deleted(, \d+ changed on the server and left alone)?, (\d+ B|[\d.]+ [KMGT]iB), \d+\.\d s$/m;

let work: string;
let server: TestServer;
let rest: TroveRestClient;
const children = new Set<ChildProcess>();
const proxies = new Set<Server>();

function trove(args: string[], url = server.url): Promise<CliResult> {
  const env = { PATH: process.env.PATH, HOME: work, XDG_CONFIG_HOME: join(work, ".config"), TROVE_URL: url };
  return runTrove(args, { env, cwd: work, children });
}

/** A request that uploads `file`: its PUT, or a batch (WriteMany, which names no file in its path). */
const uploads = (method: string, path: string, file: string) =>
  (method === "PUT" && path.endsWith(file)) ||
  (method === "POST" && path.endsWith("/trove.resources.v2.ResourceService/WriteMany"));

/** The counts of a summary line. */
function summaryOf(stderr: string) {
  const m = SUMMARY.exec(stderr);
  if (!m) throw new Error(`no summary line in: ${stderr}`);
  return { transferred: Number(m[2]), skipped: Number(m[3]), deleted: Number(m[4]), bytes: m[6] };
}

/**
 * A proxy in front of the server. `before` runs before a request is forwarded (to change the
 * server meanwhile); `listing` rewrites the body of directory listings (a hostile server).
 */
async function startProxy(options: RewritingProxyOptions = {}): Promise<string> {
  return startRewritingProxy(server.url, options, proxies);
}

const md5 = (data: Buffer | string) => createHash("md5").update(data).digest("base64");

/** Every file under `dir` (relative path -> bytes) and every directory ("dir"). */
async function tree(dir: string): Promise<Record<string, Buffer | "dir">> {
  const out: Record<string, Buffer | "dir"> = {};
  for (const name of (await readdir(dir, { recursive: true })).sort()) {
    const full = join(dir, name);
    out[name] = (await stat(full)).isDirectory() ? "dir" : await readFile(full);
  }
  return out;
}

/** The bytes of a resource. */
async function content(store: string, path: string): Promise<Buffer> {
  const got = await rest.get(store, path);
  if (got.notModified) throw new Error(`${store}/${path}: not modified without a condition`);
  return got.body;
}

/** Every entry of STORE/PATH: name -> size, md5 and tag ("dir" for a directory). */
async function remote(store: string, path: string) {
  const out: Record<string, { size?: number; md5: string; tag: string } | "dir"> = {};
  for (const e of (await rest.list(store, path, { recursive: true })).entries) {
    out[e.name] = e.directory ? "dir" : { size: e.size, md5: e.md5, tag: e.tag };
  }
  return out;
}

const BINARY = randomBytes(70_000); // above the server's inline limit: streamed from a blob file

/** A fresh local tree: nested directories, a binary file, an empty file. */
async function site(name: string): Promise<string> {
  const dir = join(work, name);
  await mkdir(join(dir, "css", "print"), { recursive: true });
  await mkdir(join(dir, "img"), { recursive: true });
  await writeFile(join(dir, "index.html"), "<h1>hello</h1>\n");
  await writeFile(join(dir, "css", "site.css"), "body { color: black }\n");
  await writeFile(join(dir, "css", "print", "print.css"), "@media print {}\n");
  await writeFile(join(dir, "img", "logo.bin"), BINARY);
  await writeFile(join(dir, "empty.txt"), "");
  return dir;
}

let stores = 0;
async function freshStore(): Promise<string> {
  stores += 1;
  const name = `site${stores}`;
  await rest.stores.create(name);
  return name;
}

beforeAll(async () => {
  await ensureSdkBuilt();
  work = await mkdtemp(join(tmpdir(), "trove-push-pull-"));
  server = await startServer();
  rest = createRestClient({ baseUrl: server.url });
}, 180_000);
afterEach(async () => {
  for (const child of children) child.kill("SIGKILL");
  for (const proxy of proxies) {
    proxy.closeAllConnections();
    await new Promise((resolve) => proxy.close(resolve));
  }
  proxies.clear();
});
afterAll(async () => {
  await server?.stop();
  if (work) await rm(work, { recursive: true, force: true });
});

describe("trove push", () => {
  it("uploads a tree (nested directories, a binary and an empty file), creating PATH and its parents; the listing has the right sizes and MD5s", async () => {
    const store = await freshStore();
    const dir = await site("push1");
    const r = await trove(["push", "push1", `${store}/www/v1`]);
    expect(r.stderr).toMatch(SUMMARY);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("");
    expect(summaryOf(r.stderr)).toEqual({ transferred: 5, skipped: 0, deleted: 0, bytes: "68.4 KiB" });
    const listed = await remote(store, "www/v1");
    const local = await tree(dir);
    expect(Object.keys(listed).sort()).toEqual(Object.keys(local).sort());
    for (const [name, content] of Object.entries(local)) {
      if (content === "dir") expect(listed[name]).toBe("dir");
      else expect(listed[name]).toMatchObject({ size: content.byteLength, md5: md5(content) });
    }
    expect(await content(store, "www/v1/img/logo.bin")).toEqual(BINARY);
    expect((await content(store, "www/v1/empty.txt")).byteLength).toBe(0);
  });

  it("a second push transfers nothing; a changed file of the same size is found by its MD5 and is the only one uploaded, with If-Match", async () => {
    const store = await freshStore();
    const dir = await site("push2");
    expect((await trove(["push", "push2", `${store}/www`])).code).toBe(0);
    const before = await remote(store, "www");

    const again = await trove(["push", "push2", `${store}/www`]);
    expect(again.code).toBe(0);
    expect(summaryOf(again.stderr)).toEqual({ transferred: 0, skipped: 5, deleted: 0, bytes: "0 B" });
    expect(await remote(store, "www")).toEqual(before);

    await writeFile(join(dir, "css", "site.css"), "body { color: orange}\n"); // same size
    const one = await trove(["push", "push2", `${store}/www`, "-v", "--transfers", "2"]);
    expect(one.code).toBe(0);
    expect(one.stderr).toContain(`upload ${store}/www/css/site.css (22 B, replacing)\n`);
    expect(summaryOf(one.stderr)).toEqual({ transferred: 1, skipped: 4, deleted: 0, bytes: "22 B" });
    const after = await remote(store, "www");
    for (const name of Object.keys(before)) {
      if (name === "css/site.css") expect(after[name]).not.toEqual(before[name]);
      else expect(after[name]).toEqual(before[name]);
    }
    expect((await content(store, "www/css/site.css")).toString()).toBe("body { color: orange}\n");
  });

  it("without --delete a remote extra stays; with --delete it is deleted (a directory once, with its contents)", async () => {
    const store = await freshStore();
    await site("push3");
    expect((await trove(["push", "push3", `${store}/www`])).code).toBe(0);
    await rest.put(store, "www/extra.txt", "not in DIR");
    await rest.mkdir(store, "www/old");
    await rest.put(store, "www/old/x.txt", "x");

    const copy = await trove(["push", "push3", `${store}/www`]);
    expect(copy.code).toBe(0);
    expect(summaryOf(copy.stderr)).toMatchObject({ transferred: 0, deleted: 0 });
    expect((await content(store, "www/extra.txt")).toString()).toBe("not in DIR");

    const sync = await trove(["push", "push3", `${store}/www`, "--delete", "-v"]);
    expect(sync.code).toBe(0);
    expect(sync.stderr).toContain(`delete ${store}/www/extra.txt\n`);
    expect(sync.stderr).toContain(`delete ${store}/www/old/\n`);
    expect(summaryOf(sync.stderr)).toEqual({ transferred: 0, skipped: 5, deleted: 2, bytes: "0 B" });
    const listed = await remote(store, "www");
    expect(listed["extra.txt"]).toBeUndefined();
    expect(listed.old).toBeUndefined();
    expect(Object.keys(listed).sort()).toEqual(Object.keys(await tree(join(work, "push3"))).sort());
  });

  it("--dry-run prints each action on stdout and changes nothing on the server", async () => {
    const store = await freshStore();
    const dir = await site("push4");
    expect((await trove(["push", "push4", `${store}/www`])).code).toBe(0);
    await writeFile(join(dir, "index.html"), "<h1>changed</h1>\n");
    await mkdir(join(dir, "new"));
    await writeFile(join(dir, "new", "a.txt"), "new file");
    await rest.put(store, "www/extra.txt", "extra");
    const before = await remote(store, "www");

    const r = await trove(["push", "push4", `${store}/www`, "--dry-run", "--delete"]);
    expect(r.code).toBe(0);
    expect(r.stdout.split("\n").sort()).toEqual(
      [
        "",
        `would create ${store}/www/new/`,
        `would upload ${store}/www/index.html (17 B, replacing)`,
        `would upload ${store}/www/new/a.txt (8 B)`,
        `would delete ${store}/www/extra.txt`,
      ].sort(),
    );
    expect(r.stderr).toMatch(
      /^trove push: dry run: 2 files to transfer, 4 skipped, 1 to delete, 25 B, \d+\.\d s; nothing changed\n$/,
    );
    expect(await remote(store, "www")).toEqual(before);

    // Into a PATH that does not exist yet: it would be created; it is not.
    const fresh = await trove(["push", "push4", `${store}/new/place`, "--dry-run"]);
    expect(fresh.code).toBe(0);
    expect(fresh.stdout).toContain(`would create ${store}/new/place\n`);
    await expect(rest.list(store, "new")).rejects.toMatchObject({ status: 404 });
  });

  it("a file changed on the server between the listing and its upload is reported (exit 4) and keeps the server's content; --force overwrites", async () => {
    const store = await freshStore();
    const dir = await site("push5");
    expect((await trove(["push", "push5", `${store}/www`])).code).toBe(0);
    await writeFile(join(dir, "index.html"), "<h1>mine</h1>\n");
    await writeFile(join(dir, "css", "site.css"), "body { color: red }\n");
    let theirs = false;
    const url = await startProxy({
      async before(method, path) {
        // Before its upload: a PUT of it, or the batch (WriteMany) that holds it.
        if (uploads(method, path, "/www/index.html") && !theirs) {
          theirs = true;
          await rest.put(store, "www/index.html", "<h1>theirs</h1>\n");
        }
      },
    });
    const r = await trove(["push", "push5", `${store}/www`], url);
    expect(theirs).toBe(true);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain(
      `trove push: ${store}/www/index.html changed on the server since it was listed: not replaced (412 `,
    );
    expect(r.stderr).toContain("--force overwrites it)");
    expect(r.stderr).toMatch(
      /^trove push: 1 file transferred, 3 skipped, 0 deleted, 1 changed on the server and left alone, 20 B, \d+\.\d s$/m,
    );
    expect((await content(store, "www/index.html")).toString()).toBe("<h1>theirs</h1>\n");
    // The other changed file was transferred.
    expect((await content(store, "www/css/site.css")).toString()).toBe("body { color: red }\n");

    const forced = await trove(["push", "push5", `${store}/www`, "--force"], url);
    expect(forced.code).toBe(0);
    expect(summaryOf(forced.stderr)).toMatchObject({ transferred: 1 });
    expect((await content(store, "www/index.html")).toString()).toBe("<h1>mine</h1>\n");
  });

  it("issue 30: a new file created on the server between the listing and its upload is not overwritten (If-None-Match: *): reported, exit 4; --force overwrites", async () => {
    const store = await freshStore();
    const dir = await site("push-new");
    expect((await trove(["push", "push-new", `${store}/www`])).code).toBe(0);
    await writeFile(join(dir, "fresh.txt"), "mine\n");
    let theirs = false;
    const url = await startProxy({
      async before(method, path) {
        // Before its upload: a PUT of it, or the batch (WriteMany) that holds it.
        if (uploads(method, path, "/www/fresh.txt") && !theirs) {
          theirs = true;
          await rest.put(store, "www/fresh.txt", "theirs\n");
        }
      },
    });
    const r = await trove(["push", "push-new", `${store}/www`], url);
    expect(theirs).toBe(true);
    expect(r.code).toBe(4);
    expect(r.stderr).toContain(
      // The server's reason names the field as the face it came through does (WriteMany: the RPC's).
      `trove push: ${store}/www/fresh.txt created on the server since it was listed: not replaced (412 if_none_match * given but /www/fresh.txt exists (current ETag "`,
    );
    expect(r.stderr).toMatch(
      /^trove push: 0 files transferred, 5 skipped, 0 deleted, 1 changed on the server and left alone, 0 B, \d+\.\d s$/m,
    );
    expect((await content(store, "www/fresh.txt")).toString()).toBe("theirs\n");

    const forced = await trove(["push", "push-new", `${store}/www`, "--force"], url);
    expect(forced.code).toBe(0);
    expect((await content(store, "www/fresh.txt")).toString()).toBe("mine\n");
  });

  it("push() reports a change made from its onAction hook as a TransferChangedError, the server's content kept", async () => {
    const store = await freshStore();
    const dir = await site("push6");
    await push({ client: rest, directory: dir, store, path: "www" });
    await writeFile(join(dir, "empty.txt"), "now with content");
    const actions: TransferAction[] = [];
    const err = await push({
      client: rest,
      directory: dir,
      store,
      path: "www",
      async onAction(a) {
        actions.push(a);
        if (a.type === "copy" && a.path === "empty.txt") await rest.put(store, "www/empty.txt", "changed meanwhile");
      },
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TransferChangedError);
    const changed = err as TransferChangedError;
    expect(changed.failures.map((f) => f.path)).toEqual(["empty.txt"]);
    expect(isPreconditionFailedError(changed.failures[0]?.error)).toBe(true);
    expect(changed.summary).toMatchObject({ transferred: 0, skipped: 4, deleted: 0, dryRun: false });
    expect(actions).toContainEqual({ type: "copy", path: "empty.txt", size: 16, replace: true });
    expect((await content(store, "www/empty.txt")).toString()).toBe("changed meanwhile");
  });

  it("push() transfers at most `transfers` files at once", async () => {
    const store = await freshStore();
    const dir = join(work, "push8");
    await mkdir(dir);
    for (let i = 0; i < 10; i++) await writeFile(join(dir, `f${i}.txt`), `file ${i}`);
    for (const transfers of [1, 3]) {
      let active = 0;
      let most = 0;
      // Each upload held 20 ms before it goes: the uploads that overlap are those the run let start.
      const counting = createRestClient({
        baseUrl: server.url,
        fetch: async (input, init) => {
          if (init?.method !== "PUT") return fetch(input, init);
          active += 1;
          most = Math.max(most, active);
          try {
            await new Promise((resolve) => setTimeout(resolve, 20));
            return await fetch(input, init);
          } finally {
            active -= 1;
          }
        },
      });
      // One PUT per file, to hold one (the batches of WriteMany: test/sdk/push-batch.test.ts).
      const summary = await push({
        client: counting,
        directory: dir,
        store,
        path: `t${transfers}`,
        transfers,
        batch: false,
      });
      expect(summary.transferred).toBe(10);
      expect(most).toBe(transfers);
    }
  });

  it("a PATH that is a file on the server is forbidden (exit 6), the file unchanged", async () => {
    const store = await freshStore();
    await site("push9");
    await rest.put(store, "www", "a file named www");
    const r = await trove(["push", "push9", `${store}/www`]);
    expect(r.code).toBe(6);
    expect(r.stderr).toBe("trove push: 403 a resource named /www exists; a directory cannot take its name\n");
    expect((await content(store, "www")).toString()).toBe("a file named www");
  });

  it("skips a symbolic link with a warning and does not follow it", async () => {
    const store = await freshStore();
    const dir = join(work, "push7");
    await mkdir(dir);
    await writeFile(join(dir, "a.txt"), "a");
    const outside = join(work, "outside7");
    await mkdir(outside);
    await writeFile(join(outside, "secret.txt"), "secret");
    await symlink(outside, join(dir, "linked"));
    await symlink(join(outside, "secret.txt"), join(dir, "secret.txt"));
    const r = await trove(["push", "push7", `${store}/www`]);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain(
      "trove push: skipping push7/linked: not a regular file or directory (links are not followed)\n",
    );
    expect(r.stderr).toContain("trove push: skipping push7/secret.txt:");
    expect(summaryOf(r.stderr)).toMatchObject({ transferred: 1, skipped: 2 });
    expect(Object.keys(await remote(store, "www"))).toEqual(["a.txt"]);
  });
});

describe("trove pull", () => {
  it("pulls a tree into an empty (or missing) DIR byte for byte; a second pull transfers nothing", async () => {
    const store = await freshStore();
    const dir = await site("pull1-src");
    expect((await trove(["push", "pull1-src", `${store}/www`])).code).toBe(0);
    const r = await trove(["pull", `${store}/www`, "pull1/copy"]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("");
    expect(summaryOf(r.stderr)).toEqual({ transferred: 5, skipped: 0, deleted: 0, bytes: "68.4 KiB" });
    expect(await tree(join(work, "pull1", "copy"))).toEqual(await tree(dir));

    const again = await trove(["pull", `${store}/www`, "pull1/copy"]);
    expect(again.code).toBe(0);
    expect(summaryOf(again.stderr)).toEqual({ transferred: 0, skipped: 5, deleted: 0, bytes: "0 B" });
  });

  it("downloads only a file that differs; --delete removes local extras, without it they stay; --dry-run changes nothing", async () => {
    const store = await freshStore();
    await site("pull2-src");
    expect((await trove(["push", "pull2-src", `${store}/www`])).code).toBe(0);
    const dir = join(work, "pull2");
    expect((await trove(["pull", `${store}/www`, "pull2"])).code).toBe(0);
    await writeFile(join(dir, "index.html"), "<h1>local</h1>\n"); // same size, different bytes
    await writeFile(join(dir, "notes.txt"), "my notes");
    await mkdir(join(dir, "drafts"));
    await writeFile(join(dir, "drafts", "d.txt"), "draft");

    const before = await tree(dir);
    const dry = await trove(["pull", `${store}/www`, "pull2", "--delete", "--dry-run"]);
    expect(dry.code).toBe(0);
    expect(dry.stdout.split("\n").sort()).toEqual(
      [
        "",
        "would download pull2/index.html (15 B, replacing)",
        "would delete pull2/notes.txt",
        "would delete pull2/drafts/",
      ].sort(),
    );
    expect(await tree(dir)).toEqual(before);

    const copy = await trove(["pull", `${store}/www`, "pull2"]);
    expect(copy.code).toBe(0);
    expect(summaryOf(copy.stderr)).toEqual({ transferred: 1, skipped: 4, deleted: 0, bytes: "15 B" });
    expect(await readFile(join(dir, "index.html"), "utf8")).toBe("<h1>hello</h1>\n");
    expect(await readFile(join(dir, "notes.txt"), "utf8")).toBe("my notes");

    const sync = await trove(["pull", `${store}/www`, "pull2", "--delete"]);
    expect(sync.code).toBe(0);
    expect(summaryOf(sync.stderr)).toEqual({ transferred: 0, skipped: 5, deleted: 2, bytes: "0 B" });
    expect(await tree(dir)).toEqual(await tree(join(work, "pull2-src")));
  });

  it("a file changed on the server between the listing and its download is reported (exit 4) and not written, no partial file left; --force takes it", async () => {
    const store = await freshStore();
    await site("pull3-src");
    expect((await trove(["push", "pull3-src", `${store}/www`])).code).toBe(0);
    let change: string | undefined = "replaced meanwhile";
    const url = await startProxy({
      async before(method, path) {
        // Before its download: a GET of it, or the batch (ReadMany) that holds it.
        const download =
          (method === "GET" && path.endsWith("/www/img/logo.bin")) ||
          (method === "POST" && path.endsWith("/trove.resources.v2.ResourceService/ReadMany"));
        if (download && change !== undefined) {
          const content = change;
          change = undefined;
          await rest.put(store, "www/img/logo.bin", content);
        }
      },
    });
    const r = await trove(["pull", `${store}/www`, "pull3"], url);
    expect(change).toBeUndefined();
    expect(r.code).toBe(4);
    expect(r.stderr).toContain(
      "trove pull: pull3/img/logo.bin changed on the server since it was listed: not downloaded (412 changed on the server since it was listed",
    );
    expect(summaryOf(r.stderr)).toMatchObject({ transferred: 4 });
    const local = await tree(join(work, "pull3"));
    expect(Object.keys(local).sort()).toEqual(
      ["css", "css/print", "css/print/print.css", "css/site.css", "empty.txt", "img", "index.html"].sort(),
    );

    // No temporary file either.
    expect(await readdir(join(work, "pull3", "img"))).toEqual([]);

    change = "changed again";
    const forced = await trove(["pull", `${store}/www`, "pull3", "--force"], url);
    expect(change).toBeUndefined();
    expect(forced.code).toBe(0);
    expect(await readFile(join(work, "pull3", "img", "logo.bin"), "utf8")).toBe("changed again");
  });

  it("a listing with '..' or an absolute name is refused (exit 2) before anything is written, inside DIR or outside", async () => {
    const store = await freshStore();
    await site("pull4-src");
    expect((await trove(["push", "pull4-src", `${store}/www`])).code).toBe(0);
    for (const hostile of ["../escaped.txt", "/tmp/abs.txt", "css/../../escaped.txt"]) {
      const url = await startProxy({ listing: (xml) => xml.replace('name="index.html"', `name="${hostile}"`) });
      const parent = join(work, "pull4");
      await rm(parent, { recursive: true, force: true });
      await mkdir(join(parent, "dir"), { recursive: true });
      const r = await trove(["pull", `${store}/www`, "pull4/dir"], url);
      expect(r.code, hostile).toBe(2);
      expect(r.stderr).toBe(
        `trove pull: the listing of ${store}/www holds names that are not safe relative paths: ` +
          `${JSON.stringify(hostile)}; nothing was transferred\n`,
      );
      expect(await tree(parent)).toEqual({ dir: "dir" });
      await expect(stat(join(work, "escaped.txt"))).rejects.toMatchObject({ code: "ENOENT" });
      // A push --delete would send DELETE .../www/../escaped.txt: refused as well, nothing deleted.
      const before = await remote(store, "");
      const pushed = await trove(["push", "pull4-src", `${store}/www`, "--delete"], url);
      expect(pushed.code, hostile).toBe(2);
      expect(pushed.stderr).toContain(`trove push: the listing of ${store}/www holds names that are not safe`);
      expect(await remote(store, "")).toEqual(before);
    }
  });

  it("never writes through a symbolic link in DIR: refused (exit 2) without --delete; with it the link is replaced, its target untouched", async () => {
    const store = await freshStore();
    await site("pull5-src");
    expect((await trove(["push", "pull5-src", `${store}/www`])).code).toBe(0);
    const outside = join(work, "outside5");
    await mkdir(outside);
    await writeFile(join(outside, "site.css"), "outside");
    const dir = join(work, "pull5");
    await mkdir(dir);
    await symlink(outside, join(dir, "css"));

    const r = await trove(["pull", `${store}/www`, "pull5"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toBe(
      `trove pull: the source and the destination hold different kinds of entries of the same name: ` +
        `css (a directory in ${store}/www, a link or special file in pull5); nothing was transferred (--delete replaces them)\n`,
    );
    expect(await readdir(outside)).toEqual(["site.css"]);

    const sync = await trove(["pull", `${store}/www`, "pull5", "--delete"]);
    expect(sync.code).toBe(0);
    expect(await readFile(join(outside, "site.css"), "utf8")).toBe("outside");
    expect(await readdir(outside)).toEqual(["site.css"]);
    expect((await stat(join(dir, "css"))).isDirectory()).toBe(true);
    expect(await readFile(join(dir, "css", "site.css"), "utf8")).toBe("body { color: black }\n");
  });

  it("a missing remote directory is not found (exit 3)", async () => {
    const store = await freshStore();
    const r = await trove(["pull", `${store}/nothing`, "pull6"]);
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/^trove pull: 404 /);
    await expect(stat(join(work, "pull6"))).rejects.toMatchObject({ code: "ENOENT" });
  });
});

describe("push and pull usage errors (exit 2, nothing changed)", () => {
  it("--transfers must be a number from 1 to 64; DIR must be a directory; arguments are required", async () => {
    const store = await freshStore();
    await site("usage");
    await writeFile(join(work, "plain.txt"), "a file");
    const cases: [string[], string][] = [
      [
        ["push", "usage", `${store}/www`, "--transfers", "0"],
        'trove push: --transfers takes a number from 1 to 64, not "0"\n',
      ],
      [
        ["push", "usage", `${store}/www`, "--transfers", "many"],
        'trove push: --transfers takes a number from 1 to 64, not "many"\n',
      ],
      [
        ["pull", `${store}/www`, "usage", "--transfers", "65"],
        'trove pull: --transfers takes a number from 1 to 64, not "65"\n',
      ],
      [["push", "plain.txt", `${store}/www`], "trove push: plain.txt is not a directory\n"],
      [["push", "missing-dir", `${store}/www`], "trove push: missing-dir is not a directory\n"],
      [["pull", `${store}`, "plain.txt"], "trove pull: plain.txt is not a directory\n"],
      [["push", "usage"], "trove push: missing the destination STORE/PATH\n"],
      [["pull", `${store}/www`], "trove pull: missing the local directory DIR\n"],
    ];
    for (const [args, stderr] of cases) {
      const r = await trove(args);
      expect(r.code, args.join(" ")).toBe(2);
      expect(r.stderr).toBe(stderr);
      expect(r.stdout).toBe("");
    }
    expect(await remote(store, "")).toEqual({});
    expect(await readFile(join(work, "plain.txt"), "utf8")).toBe("a file");
  });

  it("--help describes push and pull, and the top-level help lists them", async () => {
    const push = await trove(["push", "--help"]);
    expect(push.code).toBe(0);
    expect(push.stdout).toContain("Usage: trove push DIR STORE[/PATH] [options]");
    expect(push.stdout).toContain("--delete");
    const top = await trove(["--help"]);
    expect(top.stdout).toMatch(/^ {2}push {6}upload what differs/m);
    expect(top.stdout).toMatch(/^ {2}pull {6}download what differs/m);
  });
});

describe("quiet (issue 31: -q prints nothing but errors, as rclone's and rsync's -q)", () => {
  it("-q: push and pull print nothing (no summary, no skipped-link warning) and exit 0; the transfer is done", async () => {
    const store = await freshStore();
    const dir = await site("quiet1");
    await symlink(join(dir, "index.html"), join(dir, "link.html"));
    const pushed = await trove(["push", "quiet1", `${store}/www`, "-q"]);
    expect(pushed).toEqual({ code: 0, stdout: "", stderr: "" });
    const listed = await remote(store, "www");
    expect(listed["index.html"]).toMatchObject({ md5: md5("<h1>hello</h1>\n") });
    expect(listed["link.html"]).toBeUndefined();
    // Without -q the same push says so: the summary, and the skipped link.
    const loud = await trove(["push", "quiet1", `${store}/www`]);
    expect(loud.stderr).toContain("link.html: not a regular file or directory (links are not followed)");
    expect(summaryOf(loud.stderr)).toMatchObject({ transferred: 0, skipped: 6 });

    const pulled = await trove(["--quiet", "pull", `${store}/www`, "quiet1-copy"]);
    expect(pulled).toEqual({ code: 0, stdout: "", stderr: "" });
    expect(await tree(join(work, "quiet1-copy"))).toEqual(
      Object.fromEntries(Object.entries(await tree(dir)).filter(([name]) => name !== "link.html")),
    );
  });

  it("-q still prints errors: a file changed on the server meanwhile is named, exit 4, and no summary line", async () => {
    const store = await freshStore();
    const dir = await site("quiet2");
    expect((await trove(["push", "quiet2", `${store}/www`, "-q"])).code).toBe(0);
    await writeFile(join(dir, "index.html"), "<h1>mine</h1>\n");
    let theirs = false;
    const url = await startProxy({
      async before(method, path) {
        // Before its upload: a PUT of it, or the batch (WriteMany) that holds it.
        if (uploads(method, path, "/www/index.html") && !theirs) {
          theirs = true;
          await rest.put(store, "www/index.html", "<h1>theirs</h1>\n");
        }
      },
    });
    const r = await trove(["push", "quiet2", `${store}/www`, "-q"], url);
    expect(r.code).toBe(4);
    expect(r.stdout).toBe("");
    expect(r.stderr.trimEnd().split("\n")).toEqual([
      expect.stringMatching(
        new RegExp(
          `^trove push: ${store}/www/index\\.html changed on the server since it was listed: not replaced \\(412 `,
        ),
      ),
    ]);
    expect((await content(store, "www/index.html")).toString()).toBe("<h1>theirs</h1>\n");
  });

  it("-q with --dry-run still prints the actions asked for on stdout, and no summary", async () => {
    const store = await freshStore();
    await site("quiet3");
    const r = await trove(["push", "quiet3", `${store}/www`, "--dry-run", "-q"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    expect(r.stdout).toContain(`would upload ${store}/www/index.html (15 B)\n`);
    expect(await rest.list(store, "").then((l) => l.entries.map((e) => e.name))).toEqual([]);
  });
});

describe("transfer progress", () => {
  it("on a terminal, the bar shows the rate and the time left", () => {
    let clock = 0;
    const writes: string[] = [];
    const stream = { isTTY: true, columns: 120, write: (s: string) => writes.push(s) } as unknown as NodeJS.WriteStream;
    const p = createProgress("push site", { stream, enabled: true, now: () => clock });
    clock = 2000;
    p.update(1024 * 1024, 4 * 1024 * 1024, "1/4 files");
    expect(writes[0]).toMatch(/^\rpush site \[#{6}\.{18}\] 25% 1\.0 MiB\/4\.0 MiB 512\.0 KiB\/s ETA 6s 1\/4 files/);
    p.finish();
  });
});
