// Properties of the poll parameter parser (src/rest/poll.ts), for any query: bad text is a
// BadRequestError and nothing else, and valid cursors and a valid wait come back exactly.

import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BadRequestError } from "../../src/domain/errors.js";
import { parsePollQuery } from "../../src/rest/poll.js";
import {
  hostileText,
  longText,
  RUNS,
  refusesOnlyWithBadRequest,
  SEED,
  validStoreName,
} from "../support/client-input.js";

const eventId = fc.bigInt({ min: 0n, max: 10n ** 16n - 1n });
/** A wait as the spec writes it: whole seconds, or seconds with up to three decimals. */
const wait = fc
  .tuple(fc.integer({ min: 0, max: 99_999 }), fc.option(fc.integer({ min: 0, max: 999 }), { nil: undefined }))
  .map(([seconds, millis]) => ({
    text:
      millis === undefined
        ? String(seconds)
        : `${seconds}.${String(millis).padStart(3, "0").replace(/0+$/, "") || "0"}`,
    millis: seconds * 1000 + (millis ?? 0),
  }));

describe("parsePollQuery, for any query", () => {
  it("refuses only with a BadRequestError", () => {
    fc.assert(
      fc.property(fc.oneof(hostileText(), longText()), fc.boolean(), (query, mark) => {
        refusesOnlyWithBadRequest(() => parsePollQuery(mark ? `?${query}` : query));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("a store or wait value is refused with a BadRequestError or read back exactly", () => {
    fc.assert(
      fc.property(fc.constantFrom("store", "wait"), hostileText(24), (name, value) => {
        let q: ReturnType<typeof parsePollQuery>;
        try {
          q = parsePollQuery(`?${new URLSearchParams([[name, value]])}`);
        } catch (err) {
          expect(err).toBeInstanceOf(BadRequestError);
          return;
        }
        if (name === "wait") {
          expect(q.waitMillis).toBe(Math.max(1, Math.round(Number(value) * 1000)));
        } else {
          const [cursor] = q.cursors;
          expect(value).toBe(`${cursor?.store}:${value.slice(value.lastIndexOf(":") + 1)}`);
          expect(cursor?.eventId).toBe(BigInt(value.slice(value.lastIndexOf(":") + 1)));
        }
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("valid cursors and a wait give back the same stores, event ids and wait in milliseconds", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(validStoreName, eventId), { maxLength: 8 }),
        fc.option(wait, { nil: undefined }),
        (cursors, w) => {
          const params = new URLSearchParams(
            cursors.map(([store, id]): [string, string] => ["store", `${store}:${id}`]),
          );
          if (w !== undefined) params.append("wait", w.text);
          const q = parsePollQuery(`?${params}`);
          expect(q.cursors).toEqual(cursors.map(([store, id]) => ({ store, eventId: id })));
          expect(q.waitMillis).toBe(w === undefined ? 0 : Math.max(1, w.millis));
        },
      ),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("an event id beyond 16 digits, a negative or fractional one, is refused", () => {
    fc.assert(
      fc.property(
        validStoreName,
        fc.oneof(
          fc.bigInt({ min: 10n ** 16n, max: 10n ** 30n }).map(String),
          fc.bigInt({ min: -(10n ** 16n), max: -1n }).map(String),
          fc.tuple(eventId, fc.integer({ min: 0, max: 999 })).map(([i, f]) => `${i}.${f}`),
        ),
        (store, id) => {
          expect(() => parsePollQuery(`?store=${store}:${id}`)).toThrow("store must be {store name}:{event id}");
        },
      ),
      { seed: SEED, numRuns: 300 },
    );
  });
});
