// Properties of the REST resource request parsers (src/rest/resources.ts), for any target and query:
// bad text is a BadRequestError and nothing else, a percent-encoded valid path comes back as the
// path, and a valid query comes back as the flags it sets, however it is encoded or ordered.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { DATA_PREFIX, parseQuery, parseTarget } from "../../src/rest/resources.js";
import {
  hostileText,
  longText,
  RUNS,
  refusesOnlyWithBadRequest,
  SEED,
  validPath,
  validStoreName,
} from "../support/client-input.js";

const FLAGS = ["recursive", "include-access", "include-blob-uuid", "include-deleted"] as const;
const MEDIA_TYPES = ["text/plain", "application/xml", "image/svg+xml", "application/vnd.example+json"];

describe("parseTarget, for any path", () => {
  it("refuses only with a BadRequestError", () => {
    fc.assert(
      fc.property(fc.oneof(hostileText(), longText()), (rest) => {
        refusesOnlyWithBadRequest(() => parseTarget(`${DATA_PREFIX}${rest}`));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("a valid store and path, each segment percent-encoded, parse back to themselves", () => {
    fc.assert(
      fc.property(validStoreName, validPath, fc.boolean(), (store, segments, directory) => {
        const encoded = `${DATA_PREFIX}${store}/${segments.map(encodeURIComponent).join("/")}${directory ? "/" : ""}`;
        expect(parseTarget(encoded)).toEqual({ store, path: segments.join("/"), directory });
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("the store alone names its root directory", () => {
    fc.assert(
      fc.property(validStoreName, fc.boolean(), (store, slash) => {
        expect(parseTarget(`${DATA_PREFIX}${store}${slash ? "/" : ""}`)).toEqual({ store, path: "", directory: true });
      }),
      { seed: SEED, numRuns: 200 },
    );
  });
});

describe("parseQuery, for any query", () => {
  it("refuses only with a BadRequestError", () => {
    fc.assert(
      fc.property(fc.oneof(hostileText(), longText()), fc.boolean(), (query, mark) => {
        refusesOnlyWithBadRequest(() => parseQuery(mark ? `?${query}` : query));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("a flag is true or false; any other value is refused", () => {
    fc.assert(
      fc.property(fc.constantFrom(...FLAGS), hostileText(16), (flag, value) => {
        const search = `?${new URLSearchParams([[flag, value]])}`;
        if (value === "true" || value === "false") expect(parseQuery(search).flags[flag]).toBe(value === "true");
        else expect(() => parseQuery(search)).toThrow(`query parameter ${flag} must be true or false`);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("valid parameters, in any order and however encoded, give back what they set", () => {
    const parameters = fc.record(
      {
        recursive: fc.boolean(),
        "include-access": fc.boolean(),
        "include-blob-uuid": fc.boolean(),
        "include-deleted": fc.boolean(),
        "override-mime": fc.constantFrom(...MEDIA_TYPES),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(parameters, fc.boolean(), fc.boolean(), (set, shuffle, encodeAll) => {
        const entries = Object.entries(set).map(([k, v]) => [k, String(v)] as [string, string]);
        if (shuffle) entries.reverse();
        const search = encodeAll
          ? entries.map(([k, v]) => `${percentEncodeAll(k)}=${percentEncodeAll(v)}`).join("&")
          : new URLSearchParams(entries).toString();
        const q = parseQuery(search === "" ? "" : `?${search}`);
        for (const flag of FLAGS) expect(q.flags[flag]).toBe(set[flag] ?? false);
        expect(q.overrideMime).toBe(set["override-mime"]);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("a parameter given twice is refused, whatever its values", () => {
    fc.assert(
      fc.property(fc.constantFrom(...FLAGS, "override-mime"), hostileText(8), hostileText(8), (name, a, b) => {
        expect(() =>
          parseQuery(
            `?${new URLSearchParams([
              [name, a],
              [name, b],
            ])}`,
          ),
        ).toThrow(/given twice|must be true or false|is not a media type/);
      }),
      { seed: SEED, numRuns: 200 },
    );
  });
});

/** Every byte as %XX, as some clients send them. */
function percentEncodeAll(text: string): string {
  return [...Buffer.from(text)].map((b) => `%${b.toString(16).toUpperCase().padStart(2, "0")}`).join("");
}
