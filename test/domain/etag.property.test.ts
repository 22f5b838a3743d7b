// Properties of the entity-tag list parser (src/domain/etag.ts), for any If-Match / If-None-Match
// value: bad text is a BadRequestError and nothing else, a quoted tag comes back as itself, and
// a list parsed once is parsed the same way again.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BadRequestError } from "../../src/domain/errors.js";
import { newTag, parseTagList, quoteTag, tagMatches } from "../../src/domain/etag.js";
import { hostileText, longText, RUNS, refusesOnlyWithBadRequest, SEED } from "../support/client-input.js";

/**
 * Tags as the server makes them, and any other opaque tag a client may quote (RFC 9110 etagc, no
 * comma) except those that could not parse to themselves again: "*" and tags starting with W/.
 */
const tag = fc.oneof(
  fc.constant(null).map(() => newTag()),
  fc.constantFrom("**", "W", "w/x", "x/W/", "\u0085", "é"),
  fc
    .string({
      unit: fc.constantFrom(..."!#$%&'()*+-./0123456789:;<=>?@AWZaz[]^_`{|}~é€😀"),
      minLength: 1,
      maxLength: 20,
    })
    .filter((t) => t !== "*" && !t.startsWith("W/")),
);

describe("parseTagList, for any header value", () => {
  it("refuses only with a BadRequestError", () => {
    fc.assert(
      fc.property(fc.oneof(hostileText(), longText()), (header) => {
        refusesOnlyWithBadRequest(() => parseTagList(header));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("what it accepts is a non-empty list of tags without quotes, spaces or control characters", () => {
    fc.assert(
      fc.property(hostileText(), (header) => {
        let tags: string[];
        try {
          tags = parseTagList(header);
        } catch {
          return;
        }
        expect(tags.length).toBeGreaterThan(0);
        for (const t of tags) expect(t).not.toMatch(/["\s\u0000-\u001f]/);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("each tag it gives back parses to itself again (the services parse what they are given)", () => {
    fc.assert(
      fc.property(hostileText(), (header) => {
        let tags: string[];
        try {
          tags = parseTagList(header);
        } catch {
          return;
        }
        for (const t of tags) expect(parseTagList(t)).toEqual([t]);
        expect(parseTagList(tags.join(","))).toEqual(tags);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("a list it accepts, quoted again, parses to the same list", () => {
    fc.assert(
      fc.property(hostileText(), (header) => {
        let tags: string[];
        try {
          tags = parseTagList(header);
        } catch {
          return;
        }
        expect(parseTagList(tags.map((t) => (t === "*" ? t : quoteTag(t))).join(", "))).toEqual(tags);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});

describe("quoteTag and parseTagList", () => {
  it("a quoted tag parses back to the tag, weak or strong, alone or in a list", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(tag, fc.boolean(), fc.constantFrom(",", ", ", " ,\t", ",,")), { minLength: 1, maxLength: 6 }),
        (items) => {
          const header = items.map(
            ([t, weak], i) => `${i > 0 ? items[i - 1]?.[2] : ""}${weak ? "W/" : ""}${quoteTag(t)}`,
          );
          expect(parseTagList(header.join(""))).toEqual(items.map(([t]) => t));
        },
      ),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("a parsed list matches the stored tag it quotes, and no other", () => {
    fc.assert(
      fc.property(tag, tag, (sent, stored) => {
        const list = parseTagList(quoteTag(sent));
        expect(tagMatches(list, sent)).toBe(true);
        expect(tagMatches(list, stored)).toBe(sent === stored);
        expect(tagMatches(list, undefined)).toBe(false);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it('a quoted "*", a quoted W/ tag and an empty tag are refused, never taken for another tag', () => {
    fc.assert(
      fc.property(tag, fc.constantFrom('"*"', 'W/"*"', '"W/x"', 'W/"W/x"', "W/W/x", '""', 'W/""'), (other, odd) => {
        expect(() => parseTagList(`${quoteTag(other)}, ${odd}`)).toThrow(BadRequestError);
      }),
      { seed: SEED, numRuns: 200 },
    );
    expect(() => parseTagList('"*"')).toThrow(
      'entity tag "*" is not a tag this server makes: send * unquoted to match any',
    );
  });

  it("* matches any existing tag and no missing one", () => {
    fc.assert(
      fc.property(tag, (stored) => {
        expect(tagMatches(parseTagList("*"), stored)).toBe(true);
        expect(tagMatches(parseTagList("*"), undefined)).toBe(false);
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});
