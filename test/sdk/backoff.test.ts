// Issue 30: the pause before a reconnection (watch, mirror): exponential, with jitter, capped.

import { describe, expect, it } from "vitest";
import { createBackoff } from "../../sdk/src/backoff.js";

describe("createBackoff (issue 30: reconnect with exponential backoff, jitter, capped)", () => {
  it("each ceiling doubles from 250 ms up to the cap; a pause is half its ceiling plus up to the other half", () => {
    const low = createBackoff({ random: () => 0 });
    expect(Array.from({ length: 9 }, () => low.next())).toEqual([125, 250, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
    const high = createBackoff({ random: () => 0.999_999 });
    expect(Array.from({ length: 9 }, () => high.next())).toEqual([
      250, 500, 1000, 2000, 4000, 8000, 10_000, 10_000, 10_000,
    ]);
  });

  it("reset after a success starts again from the first pause; the cap is an option", () => {
    const b = createBackoff({ random: () => 0, maxMs: 1000 });
    expect([b.next(), b.next(), b.next(), b.next(), b.next()]).toEqual([125, 250, 500, 500, 500]);
    b.reset();
    expect(b.next()).toBe(125);
  });

  it("two clients that failed together wait different times (jitter)", () => {
    const randoms = [0.1, 0.9];
    const pauses = randoms.map((r) => createBackoff({ random: () => r }).next());
    expect(pauses[0]).not.toBe(pauses[1]);
  });
});
