// What a client may send, as fast-check arbitraries for the property tests of the parsers a request
// goes through (test/domain/*.property.test.ts): hostile text, and valid names and paths; and the
// property they share: a parser refuses bad text with a BadRequestError (a 400 with a reason), nothing else.

import fc from "fast-check";
import { BadRequestError } from "../../src/domain/errors.js";
import { MAX_NAME_BYTES, MAX_PATH_BYTES } from "../../src/domain/path.js";

/** Each property runs from a fixed seed, so that a failure replays; runs are bounded to keep `npm test` fast. */
export const SEED = 20_240_612;
export const RUNS = 1000;

/** Single UTF-16 code units, lone surrogates included: JavaScript strings may hold any of them. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));

/** Pieces that mean something to one parser or another. */
const PIECES = [
  "/",
  "//",
  ".",
  "..",
  "%",
  "%2F",
  "%00",
  "%C3%A9",
  "%ZZ",
  "%E0%A4",
  "?",
  "&",
  "=",
  ":",
  ",",
  ";",
  '"',
  "W/",
  "*",
  " ",
  "\t",
  "\r\n",
  "\u0000",
  "\u007f",
  "\u0085",
  "\u00a0",
  "\u2028",
  "\ufeff",
  "\ufffe",
  "\uffff",
  "\ud800",
  "\udc00",
  "é",
  "😀",
  "<",
  ">",
  "</",
  "/>",
  "&amp;",
  "&#0;",
  "&#x10FFFF;",
  "&lt;",
  "<!--",
  "-->",
  "<![CDATA[",
  "]]>",
  "<?xml",
  "?>",
  "<!DOCTYPE",
  "<!ENTITY",
  "__proto__",
  "constructor",
  "prototype",
  "{",
  "}",
  "[",
  "]",
  "\\",
  "true",
  "false",
  "1e999",
  "-1",
  "99999999999999999999",
];

/** Any string: arbitrary code points, lone surrogates, control characters, and the pieces parsers care about. */
export function hostileText(maxLength = 64): fc.Arbitrary<string> {
  return fc.oneof(
    fc.string({ unit: "binary", maxLength }),
    fc.string({ unit: codeUnit, maxLength }),
    fc.string({ unit: fc.constantFrom(...PIECES), maxLength }),
    fc.string({ unit: fc.oneof(fc.constantFrom(...PIECES), fc.string({ unit: "binary", maxLength: 3 })), maxLength }),
  );
}

/** Hostile text repeated into something very long (up to about 100,000 characters). */
export function longText(): fc.Arbitrary<string> {
  return fc
    .tuple(hostileText(16), fc.integer({ min: 100, max: 6000 }))
    .map(([s, n]) => (s === "" ? "a" : s).repeat(n).slice(0, 100_000));
}

/** A name the path rules accept: no '/', no control character, well-formed, XML-safe, not "." or "..", at most 255 bytes. */
export const validSegment = fc
  .string({ unit: "binary", minLength: 1, maxLength: 40 })
  .map((s) => s.replace(/[/\u0000-\u001f\u007f-\u009f\ufffe\uffff]/g, "_"))
  .filter((s) => s !== "." && s !== ".." && Buffer.byteLength(s) <= MAX_NAME_BYTES);

/** The segments of a valid resource path (at least one), at most 4096 bytes joined. */
export const validPath = fc
  .array(validSegment, { minLength: 1, maxLength: 8 })
  .filter((segments) => Buffer.byteLength(segments.join("/")) <= MAX_PATH_BYTES);

export const validStoreName = fc.stringMatching(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/);

/** Calls `parse`; any error but a BadRequestError fails the property. */
export function refusesOnlyWithBadRequest(parse: () => unknown): void {
  try {
    parse();
  } catch (err) {
    if (err instanceof BadRequestError) return;
    throw err;
  }
}
