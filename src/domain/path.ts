// Resource paths: what a valid name is, and how a store path is split.
// A path is kept as a string without leading or trailing slash; "" is the root.

import { BadRequestError } from "./errors.js";

export const MAX_NAME_BYTES = 255;
export const MAX_PATH_BYTES = 4096;
const STORE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
// C0 controls, DEL and C1 controls.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const NOT_XML = /[\uFFFE\uFFFF]/;

export function validateStoreName(name: string): string {
  if (!STORE_NAME.test(name)) {
    throw new BadRequestError(
      `invalid store name ${JSON.stringify(name)}: use 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit`,
    );
  }
  return name;
}

export function validateSegment(segment: string): string {
  if (segment === "") throw new BadRequestError("empty path segment (double slash)");
  if (segment === "." || segment === "..") {
    throw new BadRequestError(`path segment ${JSON.stringify(segment)} is not allowed`);
  }
  if (CONTROL.test(segment)) {
    throw new BadRequestError("path contains a control character");
  }
  if (segment.includes("/")) throw new BadRequestError("a name cannot contain '/'");
  if (!segment.isWellFormed()) throw new BadRequestError("path is not valid Unicode");
  // Not XML 1.0 characters: one such name would make every listing of its directory unreadable.
  if (NOT_XML.test(segment)) throw new BadRequestError("path contains U+FFFE or U+FFFF, which XML cannot carry");
  if (Buffer.byteLength(segment) > MAX_NAME_BYTES) {
    throw new BadRequestError(`name longer than ${MAX_NAME_BYTES} bytes`);
  }
  return segment;
}

/** Validates a path given as segments and returns it joined ("" for the root). */
export function joinPath(segments: readonly string[]): string {
  for (const s of segments) validateSegment(s);
  const path = segments.join("/");
  if (Buffer.byteLength(path) > MAX_PATH_BYTES) {
    throw new BadRequestError(`path longer than ${MAX_PATH_BYTES} bytes`);
  }
  return path;
}

/** Normalizes a path given as text ("a/b", "/a/b/", "") into the stored form. */
export function parsePath(text: string): string {
  let t = text;
  if (t.startsWith("/")) t = t.slice(1);
  if (t.endsWith("/")) t = t.slice(0, -1);
  return t === "" ? "" : joinPath(t.split("/"));
}

export function parentOf(path: string): string | undefined {
  if (path === "") return undefined;
  const i = path.lastIndexOf("/");
  return i < 0 ? "" : path.slice(0, i);
}

export function nameOf(path: string): string {
  return path.slice(path.lastIndexOf("/") + 1);
}

/** Every ancestor directory of a path, nearest first, the root last. */
export function ancestorsOf(path: string): string[] {
  const out: string[] = [];
  for (let p = parentOf(path); p !== undefined; p = parentOf(p)) out.push(p);
  return out;
}

/** Bounds of the paths strictly below a directory, for range queries on a sorted index. */
export function descendantRange(dir: string): { low: string; high: string } {
  // "/" is U+002F and "0" is U+0030: every path below `dir/` sorts in [dir/, dir0).
  return dir === "" ? { low: "", high: "\u{10FFFF}" } : { low: `${dir}/`, high: `${dir}0` };
}

/**
 * Paths in the order the databases sort them: binary UTF-8, which is code-point order. JavaScript's
 * `<` compares UTF-16 units, which puts a character above U+FFFF (a surrogate pair) before
 * U+E000-U+FFFF; the two are swapped here, without encoding.
 */
export function comparePaths(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return x >= 0xd800 && y >= 0xd800 ? codePointRank(x) - codePointRank(y) : x - y;
  }
  return a.length - b.length;
}

/** A UTF-16 unit from U+D800 up, ranked so that surrogates come after U+E000-U+FFFF. */
function codePointRank(unit: number): number {
  return unit >= 0xe000 ? unit - 0x800 : unit + 0x2000;
}
