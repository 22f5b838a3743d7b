// Blob files read and written in large chunks (issue 14, 1 MiB and 64 MiB GET/PUT): whatever the
// sizes of the chunks a client sends, the file holds the bytes sent with their MD5; a read gives
// them back byte for byte in chunks of at most 1 MiB, with or without the size known, stops
// early without leaving its file open, and a missing blob is NotFoundError.

import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, readlink, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { NotFoundError } from "../../src/domain/errors.js";
import { BlobFiles } from "../../src/storage/local/blob-files.js";

const MiB = 1024 * 1024;
let root: string;
let blobs: BlobFiles;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "trove-blob-files-"));
  blobs = new BlobFiles(root);
  await blobs.init();
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

/** `data` cut into chunks of the sizes given, in turn. */
async function* cut(data: Buffer, sizes: number[]): AsyncIterable<Uint8Array> {
  for (let at = 0, i = 0; at < data.length; i++) {
    const size = sizes[i % sizes.length] as number;
    yield data.subarray(at, at + size);
    at += size;
  }
}

async function readAll(chunks: AsyncIterable<Uint8Array>): Promise<{ data: Buffer; sizes: number[] }> {
  const parts: Buffer[] = [];
  for await (const chunk of chunks) parts.push(Buffer.from(chunk));
  return { data: Buffer.concat(parts), sizes: parts.map((p) => p.length) };
}

const md5 = (data: Buffer) => createHash("md5").update(data).digest("base64");

describe("blob files in large chunks (issue 14: 1 MiB and 64 MiB GET/PUT)", () => {
  for (const size of [64 * 1024 + 1, MiB, 3 * MiB + 12_345]) {
    it(`${size} bytes sent in uneven chunks are stored with their MD5 and read back byte for byte`, async () => {
      const data = randomBytes(size);
      const info = await blobs.write(cut(data, [1, 65_536, 333_333, 7]), { maxSize: 10 * MiB });
      expect(info).toMatchObject({ size, md5: md5(data), inline: null });
      expect((await readFile(blobs.pathOf(info.blob))).equals(data)).toBe(true);
      for (const known of [size, undefined]) {
        const back = await readAll(blobs.read(info.blob, known));
        expect(back.data.equals(data)).toBe(true);
        expect(Math.max(...back.sizes)).toBeLessThanOrEqual(MiB);
        expect(back.sizes.slice(0, -1).every((s) => s === MiB)).toBe(true);
      }
    });
  }

  it("a read stopped after its first chunk closes its file (the blob can be read again and removed)", async () => {
    const data = randomBytes(3 * MiB);
    const info = await blobs.write(cut(data, [MiB]), { maxSize: 10 * MiB });
    for (let i = 0; i < 3; i++) {
      for await (const chunk of blobs.read(info.blob, data.length)) {
        expect(Buffer.from(chunk).equals(data.subarray(0, MiB))).toBe(true);
        break;
      }
    }
    const fds = await readdir("/proc/self/fd").catch(() => []);
    const open = await Promise.all(fds.map((fd) => readlink(`/proc/self/fd/${fd}`).catch(() => "")));
    expect(open.filter((target) => target.includes(info.blob))).toEqual([]);
    await blobs.remove(info.blob);
    await expect(readAll(blobs.read(info.blob, data.length))).rejects.toBeInstanceOf(NotFoundError);
  });

  it("an upload that fails midway leaves no temporary file", async () => {
    async function* failing(): AsyncIterable<Uint8Array> {
      yield randomBytes(2 * MiB);
      yield randomBytes(MiB);
      throw new Error("client went away");
    }
    await expect(blobs.write(failing(), { maxSize: 10 * MiB })).rejects.toThrow("client went away");
    expect(await readdir(blobs.tempDir)).toEqual([]);
  });
});
