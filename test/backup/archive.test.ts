// The archive container (docs/backup.md, "The container"): what a reader accepts and what it
// refuses, each bad archive naming the part where it went wrong.

import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import {
  ArchiveError,
  type ArchivePart,
  ArchiveReader,
  FORMAT_VERSION,
  KIND_ENTRY,
  MANIFEST_ENTRY,
  writeArchive,
} from "../../src/backup/archive.js";
import { tarHeader, tarPadding } from "../../src/backup/tar.js";

const CREATED = 1_800_000_000_000;

async function* streamOf(bytes: Uint8Array, chunk = 333): AsyncIterable<Uint8Array> {
  for (let i = 0; i < bytes.byteLength; i += chunk) yield bytes.subarray(i, i + chunk);
}

async function collect(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const out: Buffer[] = [];
  for await (const c of chunks) out.push(Buffer.from(c));
  return Buffer.concat(out);
}

const blob = Buffer.alloc(5000, 7);
blob[4999] = 1;

async function* sampleParts(): AsyncIterable<ArchivePart> {
  yield { name: "stores/0001/store.json", size: 14, body: Buffer.from('{"name":"one"}') };
  yield { name: "blobs/0b0e5f3e-2a9f-4c1e-9f3a-3b1d2c4e5f60", size: blob.byteLength, body: streamOf(blob, 1000) };
}

async function sample(): Promise<Buffer> {
  return collect(writeArchive(sampleParts(), { troveVersion: "0.1.0", created: CREATED, describe: () => ({ n: 2 }) }));
}

async function readAll(bytes: Uint8Array): Promise<{ reader: ArchiveReader; parts: Map<string, Buffer> }> {
  const reader = new ArchiveReader(streamOf(bytes, 777));
  const parts = new Map<string, Buffer>();
  for await (const part of reader.parts()) parts.set(part.name, await collect(part.body));
  return { reader, parts };
}

async function refusal(bytes: Uint8Array): Promise<ArchiveError> {
  try {
    await readAll(bytes);
  } catch (e) {
    if (e instanceof ArchiveError) return e;
    throw e;
  }
  throw new Error("the archive was accepted");
}

function flip(bytes: Buffer, at: number): void {
  bytes.writeUInt8((bytes.readUInt8(at) ^ 0x01) & 0xff, at);
}

/** Where the body of the entry named `name` starts. */
function bodyOffset(archive: Buffer, name: string): number {
  for (let at = 0; at < archive.byteLength; at += 512) {
    if (archive.toString("utf8", at, at + name.length) === name && archive[at + name.length] === 0) return at + 512;
  }
  throw new Error(`no entry ${name}`);
}

describe("backup archive container (docs/backup.md)", () => {
  it("round trip: the parts come back byte for byte, the manifest lists each with its sha256", async () => {
    const archive = await sample();
    expect(archive.byteLength % 512).toBe(0);
    const { reader, parts } = await readAll(archive);
    expect([...parts.keys()]).toEqual(["stores/0001/store.json", "blobs/0b0e5f3e-2a9f-4c1e-9f3a-3b1d2c4e5f60"]);
    expect(parts.get("blobs/0b0e5f3e-2a9f-4c1e-9f3a-3b1d2c4e5f60")?.equals(blob)).toBe(true);
    expect(reader.kind).toEqual({
      kind: "trove-backup",
      format: FORMAT_VERSION,
      troveVersion: "0.1.0",
      created: CREATED,
    });
    expect(reader.manifest?.contents).toEqual({ n: 2 });
    expect(reader.manifest?.parts.map((p) => p.name)).toEqual([
      KIND_ENTRY,
      "stores/0001/store.json",
      "blobs/0b0e5f3e-2a9f-4c1e-9f3a-3b1d2c4e5f60",
    ]);
    expect(reader.manifest?.parts[2]?.sha256).toBe(createHash("sha256").update(blob).digest("hex"));
  });

  it("a part left unread by the consumer is still checked", async () => {
    const reader = new ArchiveReader(streamOf(await sample()));
    for await (const _ of reader.parts()) {
      // bodies not read
    }
    expect(reader.manifest?.parts).toHaveLength(3);
  });

  it("truncated: refused, naming the part it ends in", async () => {
    const archive = await sample();
    const cut = bodyOffset(archive, "blobs/0b0e5f3e-2a9f-4c1e-9f3a-3b1d2c4e5f60") + 100;
    const e = await refusal(archive.subarray(0, cut));
    expect(e.part).toBe("blobs/0b0e5f3e-2a9f-4c1e-9f3a-3b1d2c4e5f60");
    expect(e.message).toBe("the archive is truncated inside blobs/0b0e5f3e-2a9f-4c1e-9f3a-3b1d2c4e5f60");
  });

  it("truncated before the manifest (a killed backup): refused as incomplete", async () => {
    const archive = await sample();
    const cut = bodyOffset(archive, MANIFEST_ENTRY) - 512;
    const e = await refusal(archive.subarray(0, cut));
    expect(e.part).toBe("blobs/0b0e5f3e-2a9f-4c1e-9f3a-3b1d2c4e5f60");
    expect(e.message).toMatch(/truncated after blobs\/0b0e5f3e/);
  });

  it("one flipped byte in a part: refused, naming that part", async () => {
    const archive = await sample();
    flip(archive, bodyOffset(archive, "blobs/0b0e5f3e-2a9f-4c1e-9f3a-3b1d2c4e5f60") + 4000);
    const e = await refusal(archive);
    expect(e.part).toBe("blobs/0b0e5f3e-2a9f-4c1e-9f3a-3b1d2c4e5f60");
    expect(e.message).toBe(
      "part blobs/0b0e5f3e-2a9f-4c1e-9f3a-3b1d2c4e5f60 does not match its checksum in the manifest: the archive is damaged",
    );
  });

  it("one flipped byte in the manifest: refused, naming the manifest", async () => {
    const archive = await sample();
    flip(archive, bodyOffset(archive, MANIFEST_ENTRY) + 3);
    const e = await refusal(archive);
    expect(e.part).toBe(MANIFEST_ENTRY);
  });

  it("one flipped byte in a header: refused, naming the part before it", async () => {
    const archive = await sample();
    flip(archive, bodyOffset(archive, "blobs/0b0e5f3e-2a9f-4c1e-9f3a-3b1d2c4e5f60") - 512 + 5);
    const e = await refusal(archive);
    expect(e.part).toBe("stores/0001/store.json");
    expect(e.message).toMatch(/damaged after stores\/0001\/store.json: a header's checksum does not match/);
  });

  function withKind(kind: object): Buffer {
    const body = Buffer.from(JSON.stringify(kind));
    return Buffer.concat([
      tarHeader(KIND_ENTRY, body.byteLength, CREATED),
      body,
      tarPadding(body.byteLength),
      Buffer.alloc(1024),
    ]);
  }

  it("a newer format version: refused at once, saying which format this Trove reads", async () => {
    const e = await refusal(
      withKind({ kind: "trove-backup", format: FORMAT_VERSION + 1, troveVersion: "9.0.0", created: CREATED }),
    );
    expect(e.part).toBe(KIND_ENTRY);
    expect(e.message).toBe(
      `the archive is in backup format ${FORMAT_VERSION + 1}, written by Trove 9.0.0; this Trove reads format ${FORMAT_VERSION} and older: use a newer Trove`,
    );
  });

  it("an archive of another kind: refused at once", async () => {
    const e = await refusal(withKind({ kind: "etcd-snapshot", format: 1 }));
    expect(e.part).toBe(KIND_ENTRY);
    expect(e.message).toBe('not a Trove backup: the archive is of kind "etcd-snapshot"');
  });

  it("a tar archive that is not a backup: refused, naming its first entry", async () => {
    const body = Buffer.from("hello");
    const tar = Buffer.concat([tarHeader("README", 5, CREATED), body, tarPadding(5), Buffer.alloc(1024)]);
    const e = await refusal(tar);
    expect(e.message).toBe("not a Trove backup: its first entry is README, not TROVE-BACKUP");
  });

  it("a file that is not tar at all: refused", async () => {
    const e = await refusal(Buffer.alloc(2048, 0x41));
    expect(e.message).toMatch(/^not a Trove backup \(not a tar archive\) at its start/);
  });

  it("a streamed part shorter than announced ends the archive with an error naming it", async () => {
    async function* short(): AsyncIterable<ArchivePart> {
      yield { name: "blobs/x", size: 10, body: streamOf(Buffer.alloc(4)) };
    }
    const out = writeArchive(short(), { troveVersion: "0.1.0", created: CREATED, describe: () => ({}) });
    await expect(collect(out)).rejects.toThrow("part blobs/x gave 4 bytes where 10 were announced");
  });
});
