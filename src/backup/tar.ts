// The tar framing of a backup archive (docs/backup.md): POSIX ustar headers of 512 bytes, each
// entry's bytes padded to a block, two zero blocks at the end. Written here rather than taken from
// a package because the archive needs only regular files with names under 100 bytes, and a reader
// that refuses anything else (a bad header checksum names the entry it follows).

export const BLOCK = 512;
const NAME_BYTES = 100;
/** The largest size the 11 octal digits of a ustar header hold; larger sizes use base-256 (GNU). */
const OCTAL_SIZE_LIMIT = 8 ** 11;

export class TarFormatError extends Error {
  override name = "TarFormatError";
}

/** The header block of a regular file of `size` bytes named `name` (ASCII, at most 100 bytes). */
export function tarHeader(name: string, size: number, mtime: number): Uint8Array {
  const nameBytes = Buffer.from(name, "utf8");
  if (nameBytes.byteLength > NAME_BYTES || nameBytes.byteLength === 0) {
    throw new TarFormatError(`entry name ${JSON.stringify(name)} does not fit a ustar header`);
  }
  const h = Buffer.alloc(BLOCK);
  nameBytes.copy(h, 0);
  octal(h, 100, 8, 0o644);
  octal(h, 108, 8, 0);
  octal(h, 116, 8, 0);
  if (size < OCTAL_SIZE_LIMIT) octal(h, 124, 12, size);
  else base256(h, 124, 12, size);
  octal(h, 136, 12, Math.floor(mtime / 1000));
  h.write("        ", 148, "latin1");
  h.write("0", 156, "latin1");
  h.write("ustar\u000000", 257, "latin1");
  h.write("trove", 265, "latin1");
  h.write("trove", 297, "latin1");
  let sum = 0;
  for (const b of h) sum += b;
  h.write(`${sum.toString(8).padStart(6, "0")}\u0000 `, 148, "latin1");
  return h;
}

/** Zero bytes that complete an entry of `size` bytes to a whole block. */
export function tarPadding(size: number): Uint8Array {
  const rest = size % BLOCK;
  return new Uint8Array(rest === 0 ? 0 : BLOCK - rest);
}

/** The end of an archive: two zero blocks. */
export function tarEnd(): Uint8Array {
  return new Uint8Array(2 * BLOCK);
}

export interface TarEntryHeader {
  name: string;
  size: number;
}

/**
 * Reads a header block: the entry it starts, or null for a zero block (the end). Throws
 * TarFormatError for anything that is not the header of a regular file with a valid checksum.
 */
export function parseTarHeader(h: Uint8Array): TarEntryHeader | null {
  if (h.every((b) => b === 0)) return null;
  const buf = Buffer.from(h.buffer, h.byteOffset, h.byteLength);
  let sum = 0;
  for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 0x20 : (buf[i] as number);
  const recorded = parseOctal(buf, 148, 8);
  if (recorded !== sum) throw new TarFormatError("a header's checksum does not match its bytes");
  if (buf.toString("latin1", 257, 262) !== "ustar") throw new TarFormatError("a header is not a ustar header");
  const type = buf.toString("latin1", 156, 157);
  if (type !== "0" && type !== "\u0000") throw new TarFormatError(`an entry is not a regular file (type ${type})`);
  const end = buf.indexOf(0, 0);
  const name = buf.toString("utf8", 0, end < 0 || end > NAME_BYTES ? NAME_BYTES : end);
  const size = ((buf[124] as number) & 0x80) !== 0 ? parseBase256(buf, 124, 12) : parseOctal(buf, 124, 12);
  return { name, size };
}

function octal(h: Buffer, offset: number, length: number, value: number): void {
  h.write(`${value.toString(8).padStart(length - 1, "0")}\u0000`, offset, "latin1");
}

function base256(h: Buffer, offset: number, length: number, value: number): void {
  let v = value;
  for (let i = offset + length - 1; i > offset; i--) {
    h[i] = v % 256;
    v = Math.floor(v / 256);
  }
  h[offset] = 0x80;
}

function parseOctal(h: Buffer, offset: number, length: number): number {
  const text = h
    .toString("latin1", offset, offset + length)
    .replace(/[\0 ]+$/, "")
    .trim();
  if (!/^[0-7]+$/.test(text)) throw new TarFormatError("a header holds a number that is not octal");
  return Number.parseInt(text, 8);
}

function parseBase256(h: Buffer, offset: number, length: number): number {
  let v = (h[offset] as number) & 0x7f;
  for (let i = offset + 1; i < offset + length; i++) v = v * 256 + (h[i] as number);
  if (!Number.isSafeInteger(v)) throw new TarFormatError("a header holds a size too large");
  return v;
}
