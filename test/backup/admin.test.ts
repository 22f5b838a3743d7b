// The admin face of backups (docs/backup.md, docs/operations.md): BackupService.Backup streamed to
// `trove backup --url`, and the read-only switch, each allowed only with stores:admin (docs/auth.md).

import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import { BackupService } from "@trove/sdk/gen/trove/admin/v1/backup_pb.js";
import { StoreService } from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { restoreArchive } from "../../src/backup/restore.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { ADMIN, type AuthServer, DATA, type Issuer, startAuthServer, startIssuer } from "../auth/support.js";
import { dump } from "./dump.js";
import { trove } from "./run-cli.js";

let issuer: Issuer;
let server: AuthServer;
let admin: string;
/** May read and write every store, but is no store administrator. */
let writer: string;
const cleanups: Array<() => Promise<void>> = [];

beforeAll(async () => {
  issuer = await startIssuer();
  admin = await issuer.token(ADMIN);
  writer = await issuer.token({ trove_grants: ADMIN.trove_grants });
});
afterAll(async () => {
  await issuer.stop();
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function started(): Promise<AuthServer> {
  server = await startAuthServer(issuer);
  cleanups.push(() => server.stop());
  return server;
}

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "trove-backup-admin-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function headers(token: string) {
  return { authorization: `Bearer ${token}` };
}

describe("BackupService and trove backup --url (docs/backup.md, docs/auth.md)", () => {
  it("Backup without stores:admin is refused before any work: PERMISSION_DENIED over gRPC, exit 5 and no file from the CLI", async () => {
    const s = await started();
    const client = createClient(BackupService, createGrpcTransport({ baseUrl: s.url }));
    const refused = await (async () => {
      for await (const _ of client.backup({}, { headers: headers(writer) })) {
        // no message comes
      }
    })().catch((e: unknown) => ConnectError.from(e));
    expect(refused).toMatchObject({
      code: Code.PermissionDenied,
      rawMessage: "alice lacks the permission stores:admin",
    });
    const dir = await tempDir();
    const r = await trove(["backup", "--url", s.url, "--token", writer, "-o", join(dir, "b.tar")]);
    expect(r).toEqual({ code: 5, stdout: "", stderr: "trove backup: alice lacks the permission stores:admin\n" });
    expect(await readdir(dir)).toEqual([]);
  }, 300_000);

  it("trove backup --url streams an archive of the running server that verify accepts and a restore turns into the same data (issue 28, What users get 1)", async () => {
    const s = await started();
    for (let i = 0; i < 5; i++) {
      const put = await s.call("PUT", `${DATA}/home/r${i}.txt`, admin, { body: `resource ${i}`.repeat(i * 5000 + 1) });
      expect(put.status).toBe(201);
    }
    const dir = await tempDir();
    const archive = join(dir, "b.tar");
    const r = await trove(["backup", "--url", s.url, "--token", admin, "-o", archive]);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^trove backup: .*b\.tar: \d+ bytes\n$/);
    expect((await trove(["backup", "verify", archive])).code).toBe(0);
    const restored = await SqliteStorage.open({ dataDir: join(dir, "restored") });
    cleanups.push(() => restored.close());
    const { createReadStream } = await import("node:fs");
    await restoreArchive(restored, createReadStream(archive));
    expect(await dump(restored)).toEqual(await dump(s.storage));
  }, 300_000);

  it("the read-only switch: writes on every face refused (REST 503 + Retry-After, RPC UNAVAILABLE), reads go on, the data unchanged; off again, writes work; only stores:admin may turn it (docs/operations.md)", async () => {
    const s = await started();
    expect((await s.call("PUT", `${DATA}/home/a.txt`, admin, { body: "one" })).status).toBe(201);

    const denied = await trove(["backup", "read-only", "on", "--url", s.url, "--token", writer]);
    expect(denied).toEqual({
      code: 5,
      stdout: "",
      stderr: "trove backup read-only: alice lacks the permission stores:admin\n",
    });
    expect((await s.call("PUT", `${DATA}/home/a.txt`, admin, { body: "two" })).status).toBe(200);

    const on = await trove(["backup", "read-only", "on", "--url", s.url, "--token", admin, "--retry-after", "7"]);
    expect(on).toEqual({ code: 0, stdout: "read-only on\n", stderr: "" });
    const before = await dump(s.storage);
    for (const [method, path, body] of [
      ["PUT", `${DATA}/home/a.txt`, "three"],
      ["PUT", `${DATA}/home/new.txt`, "new"],
      ["DELETE", `${DATA}/home/a.txt`, undefined],
      ["PUT", `${DATA}/home/dir/`, undefined],
    ] as const) {
      const res = await s.call(method, path, admin, body === undefined ? {} : { body });
      expect({ method, path, status: res.status, retryAfter: res.headers.get("retry-after") }).toEqual({
        method,
        path,
        status: 503,
        retryAfter: "7",
      });
      expect(await res.text()).toBe(
        "the server is read-only for a while (an operator is moving or backing it up): try again later\n",
      );
    }
    const stores = createClient(StoreService, createConnectTransport({ baseUrl: s.url, httpVersion: "1.1" }));
    const rpc = await stores
      .createStore({ store: { name: "other" } }, { headers: headers(admin) })
      .catch((e: unknown) => ConnectError.from(e));
    expect(rpc).toMatchObject({ code: Code.Unavailable });
    const read = await s.call("GET", `${DATA}/home/a.txt`, admin);
    expect({ status: read.status, body: await read.text() }).toEqual({ status: 200, body: "two" });
    expect(await dump(s.storage)).toEqual(before);

    expect(await trove(["backup", "read-only", "off", "--url", s.url, "--token", admin])).toEqual({
      code: 0,
      stdout: "read-only off\n",
      stderr: "",
    });
    expect((await s.call("PUT", `${DATA}/home/a.txt`, admin, { body: "three" })).status).toBe(200);
  }, 300_000);
});
