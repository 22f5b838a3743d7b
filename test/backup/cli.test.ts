// `trove backup` and `trove restore FILE` as a user runs them (docs/backup.md, docs/cli.md): exit
// codes, stdout and stderr, and what a server started on the restored data directory answers.
// Each test runs the CLI several times: its bound is generous (a loaded machine starts Node
// slowly); nothing here asserts a duration.

import { type ChildProcess, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";
import { type ChildServer, startChildServer } from "../support/child-server.js";
import { fillStore } from "./dump.js";
import { CLI, trove } from "./run-cli.js";

const DATA = "/resources/v2/data";
const T0 = 1_800_000_000_000;

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "trove-backup-cli-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A data directory with a store that keeps versions: small and large contents, a deletion. */
async function filledDataDir(files = 20): Promise<string> {
  const dir = await tempDir();
  const s = await SqliteStorage.open({ dataDir: dir });
  await fillStore(s, files, T0);
  await s.close();
  return dir;
}

async function server(dataDir: string): Promise<ChildServer> {
  const s = await startChildServer({ dataDir });
  cleanups.push(() => s.stop());
  return s;
}

async function get(s: ChildServer, path: string): Promise<{ status: number; etag: string | null; body: Buffer }> {
  const r = await fetch(`${s.url}${DATA}${path}`, { headers: { authorization: s.authorization } });
  return { status: r.status, etag: r.headers.get("etag"), body: Buffer.from(await r.arrayBuffer()) };
}

describe("trove backup and trove restore FILE (docs/backup.md)", () => {
  it("backup --data, verify, status, restore --data: a server on the restored directory answers the same listings, contents and tags (issue 28, What users get 1-3)", async () => {
    const data = await filledDataDir();
    const archive = join(await tempDir(), "backup.tar");
    const made = await trove(["backup", "--data", data, "--output", archive]);
    expect(made.code).toBe(0);
    expect(made.stderr).toMatch(
      /^trove backup: .*backup\.tar: \d+ bytes, 1 stores, 22 nodes, \d+ versions, 4 blobs\n$/,
    );

    const verified = await trove(["backup", "verify", archive]);
    expect(verified).toMatchObject({ code: 0, stderr: "" });
    expect(verified.stdout).toBe(
      `ok: ${archive}: ${verified.stdout.split(" ")[2]} parts, ${(await stat(archive)).size} bytes\n`,
    );

    const status = await trove(["backup", "status", archive]);
    expect(status.code).toBe(0);
    expect(status.stdout).toContain("stores:    1\nnodes:     22\n");
    expect(status.stdout).toMatch(/store home: snapshot event 66, 22 nodes, \d+ versions\n$/);

    const restored = await tempDir();
    const r = await trove(["restore", archive, "--data", restored, "-q"]);
    expect(r).toEqual({ code: 0, stdout: "", stderr: "" });

    const before = await server(data);
    const after = await server(restored);
    for (const path of [
      "/home/?recursive=true&include-deleted=true&include-blob-uuid=true",
      "/home/docs/f0.json",
      "/home/docs/f2.json",
      "/home/docs/f2.json?versions=true",
    ]) {
      const [a, b] = [await get(before, path), await get(after, path)];
      expect(b.status).toBe(200);
      expect({ path, ...b, body: b.body.toString("base64") }).toEqual({ path, ...a, body: a.body.toString("base64") });
    }
    expect((await get(after, "/home/docs/f1.json")).status).toBe(404);
  }, 300_000);

  it("exit codes (docs/cli.md): 2 for usage, 3 for a missing archive, 1 for a damaged one naming the part, 8 for a non-empty target, 1 for a running server's data directory", async () => {
    const data = await filledDataDir(2);
    const dir = await tempDir();
    const archive = join(dir, "a.tar");
    expect((await trove(["backup", "--data", data])).code).toBe(2);
    expect((await trove(["backup", "--data", data, "--mongodb-url", "mongodb://x", "-o", archive])).code).toBe(2);
    expect((await trove(["backup", "--data", data, "-o", archive, "--bogus"])).code).toBe(2);
    expect((await trove(["restore", archive, "--data", join(dir, "r")])).code).toBe(3);
    expect((await trove(["backup", "verify", join(dir, "nope.tar")])).code).toBe(3);

    expect((await trove(["backup", "--data", data, "-o", archive, "-q"])).code).toBe(0);
    const bytes = await import("node:fs/promises").then((fs) => fs.readFile(archive));
    const flipped = Buffer.from(bytes);
    // A byte inside the first blob: its header is the block that starts with its entry name.
    const at = flipped.indexOf("blobs/") + 512 + 1000;
    flipped.writeUInt8(flipped.readUInt8(at) ^ 1, at);
    await writeFile(join(dir, "flipped.tar"), flipped);
    const bad = await trove(["backup", "verify", join(dir, "flipped.tar")]);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^trove backup verify: (part \S+ does not match its checksum|damaged after \S+)/);

    const refused = await trove(["restore", archive, "--data", data]);
    expect(refused).toMatchObject({
      code: 8,
      stderr: "trove restore: the target is not empty: it holds 1 store; a restore goes into an empty one\n",
    });

    await server(data);
    const busy = await trove(["backup", "--data", data, "-o", join(dir, "b.tar"), "-q"]);
    expect(busy.code).toBe(1);
    expect(busy.stderr).toMatch(/in use by another process/);
  }, 300_000);

  it("secrets stay out unless --include-secrets asks for them; then a restore --data puts the development issuer's key file back (issue 28, What users get 1)", async () => {
    const data = await filledDataDir(2);
    const key = `${JSON.stringify({ client_id: "trove-dev-x", client_secret: "s3cret", signing_key: { kty: "EC" } })}\n`;
    await writeFile(join(data, "dev-issuer.json"), key, { mode: 0o600 });
    const dir = await tempDir();
    expect((await trove(["backup", "--data", data, "-o", join(dir, "plain.tar"), "-q"])).code).toBe(0);
    expect((await readFile(join(dir, "plain.tar"))).includes("s3cret")).toBe(false);
    expect((await trove(["backup", "status", join(dir, "plain.tar")])).stdout).toContain("secrets:   none\n");
    expect((await trove(["restore", join(dir, "plain.tar"), "--data", join(dir, "r1"), "-q"])).code).toBe(0);
    await expect(stat(join(dir, "r1", "dev-issuer.json"))).rejects.toThrow(/ENOENT/);

    expect(
      (await trove(["backup", "--data", data, "-o", join(dir, "secret.tar"), "--include-secrets", "-q"])).code,
    ).toBe(0);
    expect((await trove(["backup", "status", join(dir, "secret.tar")])).stdout).toContain("secrets:   included\n");
    expect((await trove(["restore", join(dir, "secret.tar"), "--data", join(dir, "r2"), "-q"])).code).toBe(0);
    expect(JSON.parse(await readFile(join(dir, "r2", "dev-issuer.json"), "utf8"))).toEqual(JSON.parse(key));
    expect((await stat(join(dir, "r2", "dev-issuer.json"))).mode & 0o777).toBe(0o600);
  }, 300_000);

  it("a killed backup gives an archive that verify rejects and restore refuses; the target stays marked and serve refuses it (issue 28, Tests 4)", async () => {
    const data = await filledDataDir(40);
    const dir = await tempDir();
    const child: ChildProcess = spawn(process.execPath, [CLI, "backup", "--data", data, "-o", "-", "-q"], {
      stdio: ["ignore", "pipe", "ignore"],
    });
    // stdout is not read past 300 KB: the backup waits on the pipe, and is killed there.
    const got: Buffer[] = [];
    let size = 0;
    await new Promise<void>((resolve) => {
      child.stdout?.on("data", (b: Buffer) => {
        got.push(b);
        size += b.byteLength;
        if (size >= 300_000) {
          child.stdout?.pause();
          resolve();
        }
      });
    });
    const gone = new Promise((r) => child.once("exit", r));
    child.kill("SIGKILL");
    await gone;
    const archive = join(dir, "killed.tar");
    await writeFile(archive, Buffer.concat(got));

    const verified = await trove(["backup", "verify", archive]);
    expect(verified.code).toBe(1);
    expect(verified.stderr).toMatch(/^trove backup verify: the archive is truncated (inside|after) \S+/);

    const target = join(dir, "target");
    const restored = await trove(["restore", archive, "--data", target, "-q"]);
    expect(restored.code).toBe(1);
    expect(restored.stderr).toMatch(/^trove restore: the archive is truncated/);

    const served = await trove(["serve", "--data", target, "--port", "0", "--log-level", "silent"]);
    expect(served.code).toBe(7);
    expect(served.stderr).toMatch(/the restore has not finished: run the same trove restore again/);
  }, 300_000);
});
