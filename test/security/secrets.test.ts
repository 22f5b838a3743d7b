// Secrets at rest and in answers (issue 12, item 7): owner-only files whatever the umask,
// also for a data directory made before; connection strings redacted by a real parser.

import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { redactConnectionUrl } from "../../src/storage/mongodb/connection-url.js";
import { SqliteStorage } from "../../src/storage/sqlite/sqlite-storage.js";

const mode = (path: string) => statSync(path).mode & 0o777;

describe("SQLite data directory", () => {
  let root = "";
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  it.each([0o000, 0o022, 0o002])(
    "is owner-only with umask %o, database, WAL, SHM and blobs included",
    async (umask) => {
      root = mkdtempSync(join(tmpdir(), "trove-secrets-"));
      const dataDir = join(root, "data");
      const previous = process.umask(umask);
      try {
        const storage = await SqliteStorage.open({ dataDir });
        await storage.createStore({ name: "s", type: "recursive", settings: {} }, Date.now());
        expect(mode(dataDir)).toBe(0o700);
        // No trove.db-shm: the exclusive locking mode keeps the WAL index in memory.
        for (const f of ["trove.db", "trove.db-wal"])
          expect({ f, mode: mode(join(dataDir, f)) }).toEqual({ f, mode: 0o600 });
        expect(mode(join(dataDir, "blobs"))).toBe(0o700);
        expect(mode(join(dataDir, "tmp"))).toBe(0o700);
        await storage.close();
      } finally {
        process.umask(previous);
      }
    },
  );

  it("an existing world-readable data directory is tightened when opened", async () => {
    root = mkdtempSync(join(tmpdir(), "trove-secrets-"));
    const dataDir = join(root, "data");
    mkdirSync(join(dataDir, "blobs", "ab"), { recursive: true });
    writeFileSync(join(dataDir, "trove.db"), "");
    chmodSync(dataDir, 0o755);
    chmodSync(join(dataDir, "trove.db"), 0o644);
    chmodSync(join(dataDir, "blobs", "ab"), 0o755);
    const storage = await SqliteStorage.open({ dataDir });
    expect([mode(dataDir), mode(join(dataDir, "trove.db")), mode(join(dataDir, "blobs", "ab"))]).toEqual([
      0o700, 0o600, 0o700,
    ]);
    await storage.close();
  });
});

describe("database-connection-url redaction", () => {
  it.each([
    ["a plain password", "mongodb://alice:s3cret@db:27017/trove", "mongodb://alice:********@db:27017/trove", "s3cret"],
    [
      "a password with / and #",
      "mongodb://alice:p%2Fa%23ss@db/trove",
      "mongodb://alice:********@db/trove",
      "p%2Fa%23ss",
    ],
    [
      "tlsCertificateKeyFilePassword and proxyPassword",
      "mongodb://db1,db2:27018/trove?tls=true&tlsCertificateKeyFilePassword=kp1&proxyUsername=p&proxyPassword=pp2",
      "mongodb://db1,db2:27018/trove?tls=true&tlsCertificateKeyFilePassword=********&proxyUsername=p&proxyPassword=********",
      "kp1",
    ],
    [
      "AWS_SESSION_TOKEN in authMechanismProperties",
      "mongodb+srv://AKIA:secretkey@cluster.example.net/?authMechanism=MONGODB-AWS&authMechanismProperties=SERVICE_NAME:x,AWS_SESSION_TOKEN:tok123",
      "mongodb+srv://AKIA:********@cluster.example.net/?authMechanism=MONGODB-AWS&authMechanismProperties=SERVICE_NAME%3Ax%2CAWS_SESSION_TOKEN%3A********",
      "tok123",
    ],
  ])("%s", (_what, url, shown, secret) => {
    const redacted = redactConnectionUrl(url);
    expect(redacted).toBe(shown);
    expect(redacted).not.toContain(secret);
  });

  it("a string that does not parse is not shown at all", () => {
    const redacted = redactConnectionUrl("mongodb://alice:pa/ss#word@db/trove");
    expect(redacted).not.toMatch(/pa\/ss|word|alice/);
  });
});
