// Properties of the path rules (src/domain/path.ts) for any text a client sends: bad text is a
// BadRequestError and nothing else, a valid path comes back unchanged, and normalizing is idempotent.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import {
  joinPath,
  MAX_NAME_BYTES,
  MAX_PATH_BYTES,
  parsePath,
  validateSegment,
  validateStoreName,
} from "../../src/domain/path.js";
import {
  hostileText,
  longText,
  RUNS,
  refusesOnlyWithBadRequest,
  SEED,
  validPath,
  validStoreName,
} from "../support/client-input.js";

describe("path rules, for any text", () => {
  it("parsePath, validateSegment and validateStoreName refuse only with a BadRequestError", () => {
    fc.assert(
      fc.property(fc.oneof(hostileText(), longText()), (text) => {
        refusesOnlyWithBadRequest(() => parsePath(text));
        refusesOnlyWithBadRequest(() => validateSegment(text));
        refusesOnlyWithBadRequest(() => validateStoreName(text));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("joinPath refuses only with a BadRequestError, whatever the segments", () => {
    fc.assert(
      fc.property(fc.array(hostileText(16), { maxLength: 10 }), (segments) => {
        refusesOnlyWithBadRequest(() => joinPath(segments));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("what parsePath accepts is already normal: parsing it again gives it back", () => {
    fc.assert(
      fc.property(hostileText(), (text) => {
        let path: string;
        try {
          path = parsePath(text);
        } catch {
          return;
        }
        expect(parsePath(path)).toBe(path);
        expect(path.startsWith("/") || path.endsWith("/")).toBe(false);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("a path longer than the limits is refused, never cut", () => {
    fc.assert(
      fc.property(longText(), (text) => {
        let path: string;
        try {
          path = parsePath(text);
        } catch {
          return;
        }
        expect(Buffer.byteLength(path)).toBeLessThanOrEqual(MAX_PATH_BYTES);
        for (const name of path.split("/")) expect(Buffer.byteLength(name)).toBeLessThanOrEqual(MAX_NAME_BYTES);
      }),
      { seed: SEED, numRuns: 200 },
    );
  });
});

describe("valid paths", () => {
  it("a valid path parses to itself, with or without a leading and a trailing slash", () => {
    fc.assert(
      fc.property(validPath, (segments) => {
        const path = segments.join("/");
        expect(joinPath(segments)).toBe(path);
        expect(parsePath(path)).toBe(path);
        expect(parsePath(`/${path}`)).toBe(path);
        expect(parsePath(`${path}/`)).toBe(path);
        expect(parsePath(`/${path}/`)).toBe(path);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("a valid store name is accepted unchanged", () => {
    fc.assert(
      fc.property(validStoreName, (name) => {
        expect(validateStoreName(name)).toBe(name);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});
