// Entity tags: how they are made, and how If-Match / If-None-Match compare.
// Tags are stored unquoted; the ETag header carries them quoted (strong).

import { randomFillSync } from "node:crypto";
import { BadRequestError } from "./errors.js";

const TAG_BYTES = 9;
// One call into the CSPRNG per 512 tags: a PUT makes a tag for the resource and one for each
// ancestor directory, and each randomBytes call costs more than the tag itself.
const pool = Buffer.allocUnsafe(TAG_BYTES * 512);
let poolOffset = pool.length;

/** A new random tag: 72 bits, 12 base64url characters. */
export function newTag(): string {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const start = poolOffset;
  poolOffset += TAG_BYTES;
  return pool.toString("base64url", start, poolOffset);
}

export function quoteTag(tag: string): string {
  return `"${tag}"`;
}

/**
 * Parses an If-Match / If-None-Match header value: a comma-separated list of
 * quoted or unquoted tags (a W/ prefix is accepted and ignored), or "*". Each tag it gives
 * back parses to itself again.
 */
export function parseTagList(header: string): string[] {
  const out: string[] = [];
  for (const raw of header.split(",")) {
    let t = raw.trim();
    if (t === "") continue;
    if (t.startsWith("W/")) t = t.slice(2);
    const quoted = t.startsWith('"');
    if (quoted) {
      if (t.length < 2 || !t.endsWith('"')) throw new BadRequestError(`malformed entity tag ${raw.trim()}`);
      t = t.slice(1, -1);
    }
    // The services parse the tags they are given again (they take tags as clients send them): a
    // tag must come out the same, so a quoted "*" may not become the wildcard, nor "W/x" the tag
    // x. None of these is a tag this server makes; refusing them rather than letting them match
    // nothing keeps a client that quotes * in If-None-Match from overwriting what it meant to create.
    if (quoted && t === "*") {
      throw new BadRequestError('entity tag "*" is not a tag this server makes: send * unquoted to match any');
    }
    if (t === "" || t.startsWith("W/") || t.includes('"') || /[\s\u0000-\u001f]/.test(t)) {
      throw new BadRequestError(`malformed entity tag ${raw.trim()}`);
    }
    out.push(t);
  }
  if (out.length === 0) throw new BadRequestError("empty entity tag list");
  return out;
}

/** True when a stored tag (or its absence) satisfies a list of tags; "*" matches any existing one. */
export function tagMatches(list: readonly string[], tag: string | undefined): boolean {
  if (tag === undefined) return false;
  return list.some((t) => t === "*" || t === tag);
}
