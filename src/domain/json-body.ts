// JSON request bodies: nesting is bounded before anything recursive sees the value, and
// values quoted back in a reason are bounded too (a client's mistake is a 400, never a 500).

import { BadRequestError } from "./errors.js";

/** Deepest nesting of objects and arrays accepted in a JSON body (Trove's own bodies need 3). */
export const MAX_JSON_DEPTH = 32;

/**
 * The nesting depth of JSON text, counted without parsing (brackets outside strings). It is
 * only meaningful for text that parses; `parseJsonBody` checks it first, so that a deeply
 * nested value never reaches JSON.parse, JSON.stringify or a recursive check.
 */
export function jsonDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) {
      depth++;
      if (depth > deepest) deepest = depth;
    } else if (c === 0x7d || c === 0x5d) depth--;
  }
  return deepest;
}

/** Parses a JSON body; malformed or too deeply nested text is a BadRequestError naming `what`. */
export function parseJsonBody(text: string, what: string, maxDepth = MAX_JSON_DEPTH): unknown {
  const depth = jsonDepth(text);
  if (depth > maxDepth) {
    throw new BadRequestError(`the ${what} is nested ${depth} levels deep; at most ${maxDepth} are accepted`);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new BadRequestError(`the ${what} is not valid JSON: ${(err as Error).message}`);
  }
}

/** A value as JSON for a reason, cut to `max` characters; never throws. */
export function quoteValue(value: unknown, max = 100): string {
  let text: string;
  try {
    text = JSON.stringify(value) ?? String(value);
  } catch {
    text = Array.isArray(value) ? "an array" : typeof value;
  }
  return text.length > max ? `${text.slice(0, max)}…` : text;
}
