// A blob's MD5 computed on a worker thread that reads the file back as it is written (issue 14,
// PUT of 1 MiB and 64 MiB): concurrent uploads of any size, inline or not, get the MD5 of exactly
// the bytes sent; an upload that fails midway, or whose hashing worker stops, fails without a
// temporary file left and without harming the next upload.

import { createHash, randomBytes } from "node:crypto";
import { mkdtemp, readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { BlobFiles, fileHasher, INLINE_MAX } from "../../src/storage/local/blob-files.js";

const MiB = 1024 * 1024;
let root: string;
let blobs: BlobFiles;

beforeEach(async () => {
  root = await mkdtemp(join(tmpdir(), "trove-file-hasher-"));
  blobs = new BlobFiles(root);
  await blobs.init();
});

afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const md5 = (data: Uint8Array) => createHash("md5").update(data).digest("base64");

/** `data` in chunks of `size` bytes, with a turn of the event loop between them. */
async function* chunks(data: Buffer, size: number): AsyncIterable<Uint8Array> {
  for (let at = 0; at < data.length; at += size) {
    await new Promise((r) => setImmediate(r));
    yield data.subarray(at, at + size);
  }
}

describe("blob MD5 on a worker thread (issue 14: PUT of 1 MiB and 64 MiB)", () => {
  it("concurrent uploads of sizes around the inline limit and the write batch each get the MD5 of their bytes", async () => {
    const sizes = [0, 1, INLINE_MAX, INLINE_MAX + 1, MiB - 1, MiB, MiB + 1, 3 * MiB + 12_345, 9 * MiB];
    const uploads = sizes.map((size, i) => ({
      size,
      data: randomBytes(size),
      chunk: [65_536, 16_384, 333_333][i % 3],
    }));
    const infos = await Promise.all(
      uploads.map((u) => blobs.write(chunks(u.data, u.chunk as number), { maxSize: 20 * MiB })),
    );
    for (const [i, info] of infos.entries()) {
      const u = uploads[i] as (typeof uploads)[number];
      expect(info.size, `${u.size} bytes`).toBe(u.size);
      expect(info.md5, `${u.size} bytes`).toBe(md5(u.data));
      if (u.size <= INLINE_MAX) expect(Buffer.from(info.inline ?? []).equals(u.data)).toBe(true);
      else expect((await readFile(blobs.pathOf(info.blob))).equals(u.data)).toBe(true);
    }
    expect(await readdir(blobs.tempDir)).toEqual([]);
  }, 60_000);

  it("an upload that fails midway leaves no temporary file, and the uploads around it get their MD5", async () => {
    const before = randomBytes(2 * MiB + 5);
    const after = randomBytes(3 * MiB);
    async function* failing(): AsyncIterable<Uint8Array> {
      yield randomBytes(2 * MiB);
      await new Promise((r) => setTimeout(r, 20));
      throw new Error("client went away");
    }
    const [a, failed, b] = await Promise.allSettled([
      blobs.write(chunks(before, 65_536), { maxSize: 10 * MiB }),
      blobs.write(failing(), { maxSize: 10 * MiB }),
      blobs.write(chunks(after, 65_536), { maxSize: 10 * MiB }),
    ]);
    expect(failed.status).toBe("rejected");
    expect((failed as PromiseRejectedResult).reason.message).toBe("client went away");
    expect(a.status === "fulfilled" && a.value.md5).toBe(md5(before));
    expect(b.status === "fulfilled" && b.value.md5).toBe(md5(after));
    expect(await readdir(blobs.tempDir)).toEqual([]);
  }, 60_000);

  it("an upload whose hashing worker stops fails, leaves no temporary file, and the next upload is hashed by a new worker", async () => {
    let release: () => void = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    async function* slow(): AsyncIterable<Uint8Array> {
      yield randomBytes(2 * MiB);
      await held;
      yield randomBytes(MiB);
    }
    const upload = blobs.write(slow(), { maxSize: 10 * MiB });
    upload.catch(() => {});
    // The writer creates the file, then gives the worker its job, then writes the first 2 MiB:
    // once the file holds them, the worker has the job (the file merely existing is too early,
    // which once let the job start on the new worker after the close below).
    const written = async () => {
      const [name] = await readdir(blobs.tempDir);
      return name === undefined ? 0 : (await stat(join(blobs.tempDir, name)).catch(() => ({ size: 0 }))).size;
    };
    for (let i = 0; i < 4000 && (await written()) < 2 * MiB; i++) {
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(await readdir(blobs.tempDir)).toHaveLength(1);
    expect(await written()).toBe(2 * MiB);
    await fileHasher.close();
    release();
    await expect(upload).rejects.toThrow("the hashing worker stopped");
    expect(await readdir(blobs.tempDir)).toEqual([]);

    const data = randomBytes(2 * MiB + 1);
    const info = await blobs.write(chunks(data, 65_536), { maxSize: 10 * MiB });
    expect(info.md5).toBe(md5(data));
  }, 60_000);
});
