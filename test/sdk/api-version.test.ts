// The SDK's REST client and the `trove` CLI speaking REST version 1 (issue 17, item 9) against a
// real server: what they observe differs from version 2 exactly as docs/rest.md, "Version 1" says.

import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it, vi } from "vitest";
import {
  ConflictError,
  createRestClient,
  DeletedError,
  NotFoundError,
  type TroveRestClient,
} from "../../sdk/src/index.js";
import { startServer, type TestServer } from "../support/server.js";
import { ensureSdkBuilt } from "./build.js";
import { rejection, runTrove } from "./support.js";

// Each CLI case starts a child process; on a busy machine each takes up to a second.
vi.setConfig({ testTimeout: 120_000 });

let server: TestServer;
let v1: TroveRestClient;
let v2: TroveRestClient;
let home: string;

beforeAll(async () => {
  await ensureSdkBuilt();
  home = await mkdtemp(join(tmpdir(), "trove-api-version-"));
  server = await startServer({ pollWait: 1000 });
  v1 = createRestClient({ baseUrl: server.url, apiVersion: 1 });
  v2 = createRestClient({ baseUrl: server.url });
  await v2.stores.create("snap", { type: "snapshot" });
  await v2.put("snap", "s.txt", "snap file");
}, 120_000);

afterAll(async () => {
  await server?.stop();
  if (home) await rm(home, { recursive: true, force: true });
});

/** home/docs/ holding a.txt and sub/b.txt, made afresh. */
async function tree(name: string): Promise<void> {
  await v2.mkdir("home", name);
  await v2.put("home", `${name}/a.txt`, "a");
  await v2.mkdir("home", `${name}/sub`);
  await v2.put("home", `${name}/sub/b.txt`, "b");
}

async function names(client: TroveRestClient, dir: string): Promise<string[]> {
  return (await client.list("home", dir)).entries.map((e) => e.name);
}

describe("SDK REST client apiVersion (issue 17 item 9; spec Versioning)", () => {
  it("apiVersion 1: delete of a directory that is not empty is refused with ConflictError (409) and nothing is deleted; apiVersion 2 deletes it", async () => {
    await tree("t1");
    const err = await rejection(v1.delete("home", "t1/"));
    expect(err).toBeInstanceOf(ConflictError);
    expect((err as ConflictError).status).toBe(409);
    expect((err as ConflictError).reason).toBe("directory /t1 is not empty: 3 entries below it");
    expect((err as ConflictError).request?.url).toBe(`${server.url}/resources/v1/data/home/t1/`);
    expect(await names(v1, "t1/")).toEqual(["a.txt", "sub"]);
    await v2.delete("home", "t1/");
    expect(await rejection(v2.list("home", "t1/"))).toBeInstanceOf(DeletedError);
  });

  it("apiVersion 1 deletes an empty directory and a file", async () => {
    await v1.mkdir("home", "empty1");
    await v1.put("home", "f1.txt", "f");
    await v1.delete("home", "empty1/");
    await v1.delete("home", "f1.txt");
    expect(await rejection(v1.head("home", "f1.txt"))).toBeInstanceOf(DeletedError);
  });

  it("apiVersion 1 reads, writes and lists on a recursive store", async () => {
    const put = await v1.put("home", "v1.txt", "one");
    const got = await v1.get("home", "v1.txt", { as: "text" });
    expect(got.notModified ? undefined : [got.body, got.tag]).toEqual(["one", put.tag]);
    expect(await names(v1, "")).toContain("v1.txt");
  });

  it("apiVersion 1 lists only stores with sync-recursive and refuses the snapshot store with NotFoundError", async () => {
    expect((await v1.stores.list()).map((s) => s.name)).toEqual(["home"]);
    expect((await v2.stores.list()).map((s) => s.name).sort()).toEqual(["home", "snap"]);
    const err = await rejection(v1.get("snap", "s.txt"));
    expect(err).toBeInstanceOf(NotFoundError);
    expect((err as NotFoundError).reason).toMatch(/^store snap is not served by version 1 of the API/);
    expect(await rejection(v1.stores.get("snap"))).toBeInstanceOf(NotFoundError);
    expect(await rejection(v1.poll({ cursors: { snap: 0 } }))).toBeInstanceOf(NotFoundError);
    const status = await v1.poll();
    expect(status.map((e) => (e.kind === "reset" ? e.store : e.kind))).toEqual(["home"]);
  });

  it("an apiVersion other than 1 or 2 throws RangeError at construction", () => {
    expect(() => createRestClient({ baseUrl: server.url, apiVersion: 3 as 1 })).toThrow(
      new RangeError("apiVersion must be 1 or 2, not 3"),
    );
  });
});

describe("trove --api-version (issue 17 item 9)", () => {
  const trove = (args: string[], env: Record<string, string> = {}) =>
    runTrove(args, {
      env: {
        PATH: process.env.PATH,
        HOME: home,
        XDG_CONFIG_HOME: join(home, ".config"),
        TROVE_URL: server.url,
        ...env,
      },
      cwd: home,
    });

  beforeEach(async () => {
    await tree("c");
  });

  it("trove rm --api-version 1 of a directory that is not empty exits 8 with the reason and deletes nothing; without it (v2) rm deletes", async () => {
    const refused = await trove(["rm", "--api-version", "1", "home/c/"]);
    expect(refused.code).toBe(8);
    expect(refused.stderr).toBe("trove rm: 409 directory /c is not empty: 3 entries below it\n");
    expect(await names(v2, "c/")).toEqual(["a.txt", "sub"]);
    const ok = await trove(["rm", "home/c/"]);
    expect([ok.code, ok.stderr]).toEqual([0, ""]);
    expect(await rejection(v2.list("home", "c/"))).toBeInstanceOf(DeletedError);
  });

  it("TROVE_API_VERSION=1 has the same effect; --api-version 2 overrides it", async () => {
    const refused = await trove(["rm", "home/c/"], { TROVE_API_VERSION: "1" });
    expect(refused.code).toBe(8);
    expect(await names(v2, "c/")).toEqual(["a.txt", "sub"]);
    const ok = await trove(["rm", "--api-version", "2", "home/c/"], { TROVE_API_VERSION: "1" });
    expect(ok.code).toBe(0);
  });

  it("trove stores --api-version 1 lists only the stores version 1 serves", async () => {
    const r = await trove(["stores", "--api-version", "1"]);
    expect(r.code).toBe(0);
    expect(
      r.stdout
        .split("\n")
        .filter(Boolean)
        .map((l) => l.split(/\s+/)[0]),
    ).toEqual(["home"]);
  });

  it("an --api-version or TROVE_API_VERSION other than 1 or 2 is a usage error: exit 2 with the reason, nothing deleted", async () => {
    const flag = await trove(["rm", "--api-version", "3", "home/c/"]);
    expect([flag.code, flag.stderr]).toEqual([2, 'trove rm: --api-version must be 1 or 2, not "3"\n']);
    const env = await trove(["ls", "home/"], { TROVE_API_VERSION: "v1" });
    expect([env.code, env.stderr]).toEqual([2, 'trove ls: --api-version must be 1 or 2, not "v1"\n']);
    expect(await names(v2, "c/")).toEqual(["a.txt", "sub"]);
  });

  it("trove --help lists --api-version with its variable, and bash completion offers it", async () => {
    const help = await trove(["--help"]);
    expect(help.stdout).toMatch(
      /^ {2}--api-version 1\|2 +TROVE_API_VERSION +apiVersion +REST API version \(default 2\)/m,
    );
    const completion = await trove(["completion", "bash"]);
    expect(completion.code).toBe(0);
    expect(completion.stdout).toContain("--api-version");
  });
});
