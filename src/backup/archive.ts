// The backup archive container (docs/backup.md): a tar stream whose first entry names the kind and
// the format version, then the parts, then a manifest with the sha256 of every part and a last
// entry holding the manifest's own sha256. Written and read as streams: a part's bytes pass
// through, only its checksum stays.

import { createHash, type Hash } from "node:crypto";
import { BLOCK, parseTarHeader, TarFormatError, tarEnd, tarHeader, tarPadding } from "./tar.js";

export const ARCHIVE_KIND = "trove-backup";
/** The format this build writes, and the newest it reads. */
export const FORMAT_VERSION = 1;
export const KIND_ENTRY = "TROVE-BACKUP";
export const MANIFEST_ENTRY = "MANIFEST.json";
export const MANIFEST_SUM_ENTRY = "MANIFEST.sha256";
/** A JSON part (the kind entry, the manifest) is read into memory: never more than this. */
const MAX_JSON_PART = 256 * 1024 * 1024;

/** Something wrong with an archive; `part` names the entry where it was found ("" before any). */
export class ArchiveError extends Error {
  override name = "ArchiveError";
  readonly part: string;
  constructor(part: string, message: string) {
    super(message);
    this.part = part;
  }
}

export function isArchiveError(e: unknown): e is ArchiveError {
  return e instanceof ArchiveError;
}

/** One entry of the archive: bytes in memory, or a stream of exactly `size` bytes. */
export interface ArchivePart {
  name: string;
  size: number;
  body: Uint8Array | AsyncIterable<Uint8Array>;
}

export interface ManifestPart {
  name: string;
  size: number;
  sha256: string;
}

/** What the kind entry holds. */
export interface ArchiveKind {
  kind: string;
  format: number;
  troveVersion: string;
  created: number;
}

/** The manifest: the kind entry's fields, what the writer's caller describes, and every part's checksum. */
export interface Manifest<Contents = unknown> extends ArchiveKind {
  contents: Contents;
  parts: ManifestPart[];
}

export interface ArchiveWriterOptions<Contents> {
  troveVersion: string;
  created: number;
  /** Called once every part is written: what the manifest says of the contents (counts, event ids). */
  describe(): Contents;
}

/**
 * The archive's bytes, as they are made: the kind entry, each part of `parts` (a streamed part
 * must yield exactly its size, else the archive ends there with an error), the manifest, its
 * checksum, the end blocks.
 */
export async function* writeArchive<Contents>(
  parts: AsyncIterable<ArchivePart>,
  options: ArchiveWriterOptions<Contents>,
): AsyncGenerator<Uint8Array> {
  const mtime = options.created;
  const listed: ManifestPart[] = [];
  const kind: ArchiveKind = {
    kind: ARCHIVE_KIND,
    format: FORMAT_VERSION,
    troveVersion: options.troveVersion,
    created: options.created,
  };
  const json = (value: unknown) => Buffer.from(`${JSON.stringify(value)}\n`, "utf8");
  async function* entry(part: ArchivePart): AsyncGenerator<Uint8Array> {
    yield tarHeader(part.name, part.size, mtime);
    const hash = createHash("sha256");
    let written = 0;
    const chunks = part.body instanceof Uint8Array ? [part.body] : part.body;
    for await (const chunk of chunks) {
      written += chunk.byteLength;
      if (written > part.size) break;
      hash.update(chunk);
      yield chunk;
    }
    if (written !== part.size) {
      throw new ArchiveError(part.name, `part ${part.name} gave ${written} bytes where ${part.size} were announced`);
    }
    yield tarPadding(part.size);
    listed.push({ name: part.name, size: part.size, sha256: hash.digest("hex") });
  }
  const kindBytes = json(kind);
  yield* entry({ name: KIND_ENTRY, size: kindBytes.byteLength, body: kindBytes });
  for await (const part of parts) {
    if (part.name === KIND_ENTRY || part.name === MANIFEST_ENTRY || part.name === MANIFEST_SUM_ENTRY) {
      throw new ArchiveError(part.name, `part name ${part.name} is reserved`);
    }
    yield* entry(part);
  }
  const manifest: Manifest<Contents> = { ...kind, contents: options.describe(), parts: listed };
  const manifestBytes = json(manifest);
  const sum = Buffer.from(`${createHash("sha256").update(manifestBytes).digest("hex")}\n`, "latin1");
  yield tarHeader(MANIFEST_ENTRY, manifestBytes.byteLength, mtime);
  yield manifestBytes;
  yield tarPadding(manifestBytes.byteLength);
  yield tarHeader(MANIFEST_SUM_ENTRY, sum.byteLength, mtime);
  yield sum;
  yield tarPadding(sum.byteLength);
  yield tarEnd();
}

/** A part as the reader hands it: its body must be read (or left: the reader skips the rest). */
export interface ReadPart {
  name: string;
  size: number;
  body: AsyncIterable<Uint8Array>;
}

/** The bytes of an archive, read exactly: blocks and bodies cut from the source's chunks as they come. */
class ByteSource {
  private readonly it: AsyncIterator<Uint8Array>;
  private pending: Uint8Array = new Uint8Array(0);
  /** Bytes consumed so far. */
  offset = 0;

  constructor(source: AsyncIterable<Uint8Array>) {
    this.it = source[Symbol.asyncIterator]();
  }

  /** Up to `max` bytes, fewer only at the end of the source (then an empty array). */
  async next(max: number): Promise<Uint8Array> {
    while (this.pending.byteLength === 0) {
      const r = await this.it.next();
      if (r.done) return new Uint8Array(0);
      this.pending = r.value;
    }
    const n = Math.min(max, this.pending.byteLength);
    const out = this.pending.subarray(0, n);
    this.pending = this.pending.subarray(n);
    this.offset += n;
    return out;
  }

  /** Exactly `n` bytes, or null when the source ends first. */
  async exact(n: number): Promise<Uint8Array | null> {
    const first = await this.next(n);
    if (first.byteLength === n) return first;
    if (first.byteLength === 0) return null;
    const out = new Uint8Array(n);
    out.set(first, 0);
    let filled = first.byteLength;
    while (filled < n) {
      const more = await this.next(n - filled);
      if (more.byteLength === 0) return null;
      out.set(more, filled);
      filled += more.byteLength;
    }
    return out;
  }

  async close(): Promise<void> {
    await this.it.return?.();
  }
}

/**
 * Reads an archive and checks it as it goes: the kind entry first (another kind, or a newer
 * format, is refused before anything else is read), each part's sha256, then the manifest (its
 * own checksum, and every part it lists, in order, with the size and sha256 read). `parts()`
 * yields the parts between the kind entry and the manifest; it throws ArchiveError naming the
 * part at the first thing wrong. Only when it has ended without an error is `manifest` set and the
 * whole archive known good.
 */
export class ArchiveReader<Contents = unknown> {
  private readonly bytes: ByteSource;
  kind: ArchiveKind | undefined;
  manifest: Manifest<Contents> | undefined;
  /** Bytes of the archive read so far. */
  get offset(): number {
    return this.bytes.offset;
  }

  constructor(source: AsyncIterable<Uint8Array>) {
    this.bytes = new ByteSource(source);
  }

  async *parts(): AsyncGenerator<ReadPart> {
    const read: ManifestPart[] = [];
    let last = "";
    try {
      const first = await this.header(last);
      if (!first) throw new ArchiveError("", "the archive is empty");
      if (first.name !== KIND_ENTRY) {
        throw new ArchiveError(first.name, `not a Trove backup: its first entry is ${first.name}, not ${KIND_ENTRY}`);
      }
      const kindBytes = await this.json(first, read);
      this.kind = parseKind(kindBytes);
      last = KIND_ENTRY;
      for (;;) {
        const h = await this.header(last);
        if (!h) throw new ArchiveError(last, `the archive ends after ${last} without its manifest: it is incomplete`);
        if (h.name === MANIFEST_ENTRY) {
          const manifestBytes = await this.json(h, []);
          const sumHeader = await this.header(MANIFEST_ENTRY);
          if (!sumHeader || sumHeader.name !== MANIFEST_SUM_ENTRY) {
            throw new ArchiveError(
              MANIFEST_ENTRY,
              `the manifest is not followed by ${MANIFEST_SUM_ENTRY}: the archive is incomplete`,
            );
          }
          const sum = Buffer.from(await this.json(sumHeader, []))
            .toString("latin1")
            .trim();
          if (createHash("sha256").update(manifestBytes).digest("hex") !== sum) {
            throw new ArchiveError(MANIFEST_ENTRY, "the manifest does not match its checksum: the archive is damaged");
          }
          const manifest = JSON.parse(Buffer.from(manifestBytes).toString("utf8")) as Manifest<Contents>;
          checkManifest(manifest, read);
          const end = await this.bytes.exact(BLOCK);
          if (!end || end.some((b) => b !== 0)) {
            throw new ArchiveError(MANIFEST_SUM_ENTRY, "the archive does not end after its manifest");
          }
          this.manifest = manifest;
          return;
        }
        if (h.name === KIND_ENTRY || h.name === MANIFEST_SUM_ENTRY) {
          throw new ArchiveError(h.name, `entry ${h.name} appears where a part was expected`);
        }
        const hash = createHash("sha256");
        const body = this.body(h, hash);
        yield { name: h.name, size: h.size, body };
        for await (const _ of body) {
          // the consumer left part of the body: skip it, still hashing
        }
        read.push({ name: h.name, size: h.size, sha256: hash.digest("hex") });
        last = h.name;
      }
    } finally {
      await this.bytes.close();
    }
  }

  /** The next header, or null at the end blocks; `after` names the entry before it in errors. */
  private async header(after: string): Promise<{ name: string; size: number } | null> {
    const block = await this.bytes.exact(BLOCK);
    const where = after === "" ? "at its start" : `after ${after}`;
    if (!block) throw new ArchiveError(after, `the archive is truncated ${where}`);
    try {
      return parseTarHeader(block);
    } catch (e) {
      if (e instanceof TarFormatError) {
        throw new ArchiveError(
          after,
          `${after === "" ? "not a Trove backup (not a tar archive)" : "damaged"} ${where}: ${e.message}`,
        );
      }
      throw e;
    }
  }

  private body(h: { name: string; size: number }, hash: Hash): AsyncIterable<Uint8Array> {
    const bytes = this.bytes;
    let left = h.size;
    let padded = false;
    return {
      [Symbol.asyncIterator]: () => ({
        async next(): Promise<IteratorResult<Uint8Array>> {
          if (left > 0) {
            const chunk = await bytes.next(Math.min(left, 1024 * 1024));
            if (chunk.byteLength === 0) throw new ArchiveError(h.name, `the archive is truncated inside ${h.name}`);
            left -= chunk.byteLength;
            hash.update(chunk);
            return { done: false, value: chunk };
          }
          if (!padded) {
            padded = true;
            const pad = tarPadding(h.size).byteLength;
            if (pad > 0 && !(await bytes.exact(pad))) {
              throw new ArchiveError(h.name, `the archive is truncated inside ${h.name}`);
            }
          }
          return { done: true, value: undefined };
        },
      }),
    };
  }

  private async json(h: { name: string; size: number }, read: ManifestPart[]): Promise<Uint8Array> {
    if (h.size > MAX_JSON_PART) throw new ArchiveError(h.name, `${h.name} is larger than ${MAX_JSON_PART} bytes`);
    const hash = createHash("sha256");
    const out = Buffer.alloc(h.size);
    let at = 0;
    for await (const chunk of this.body(h, hash)) {
      out.set(chunk, at);
      at += chunk.byteLength;
    }
    read.push({ name: h.name, size: h.size, sha256: hash.digest("hex") });
    return out;
  }
}

function parseKind(bytes: Uint8Array): ArchiveKind {
  let kind: ArchiveKind;
  try {
    kind = JSON.parse(Buffer.from(bytes).toString("utf8")) as ArchiveKind;
  } catch {
    throw new ArchiveError(KIND_ENTRY, `${KIND_ENTRY} is not JSON: the archive is damaged`);
  }
  if (kind?.kind !== ARCHIVE_KIND) {
    throw new ArchiveError(KIND_ENTRY, `not a Trove backup: the archive is of kind ${JSON.stringify(kind?.kind)}`);
  }
  if (!Number.isInteger(kind.format) || kind.format < 1) {
    throw new ArchiveError(KIND_ENTRY, `${KIND_ENTRY} names no format version: the archive is damaged`);
  }
  if (kind.format > FORMAT_VERSION) {
    throw new ArchiveError(
      KIND_ENTRY,
      `the archive is in backup format ${kind.format}, written by Trove ${kind.troveVersion}; this Trove reads format ${FORMAT_VERSION} and older: use a newer Trove`,
    );
  }
  return kind;
}

/** The parts the manifest lists must be the parts read, in order, with their sizes and checksums. */
function checkManifest(manifest: Manifest, read: readonly ManifestPart[]): void {
  if (manifest.kind !== ARCHIVE_KIND || !Array.isArray(manifest.parts)) {
    throw new ArchiveError(MANIFEST_ENTRY, "the manifest is not a Trove backup manifest");
  }
  const count = Math.max(manifest.parts.length, read.length);
  for (let i = 0; i < count; i++) {
    const listed = manifest.parts[i];
    const got = read[i];
    if (!got)
      throw new ArchiveError(listed?.name ?? MANIFEST_ENTRY, `part ${listed?.name} is missing from the archive`);
    if (!listed) throw new ArchiveError(got.name, `part ${got.name} is not listed in the manifest`);
    if (listed.name !== got.name) {
      throw new ArchiveError(got.name, `part ${got.name} is where the manifest lists ${listed.name}`);
    }
    if (listed.size !== got.size || listed.sha256 !== got.sha256) {
      throw new ArchiveError(
        got.name,
        `part ${got.name} does not match its checksum in the manifest: the archive is damaged`,
      );
    }
  }
}
