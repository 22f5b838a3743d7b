// The CLI's progress bar: drawn on a terminal only, and only for work that lasts.

import { describe, expect, it } from "vitest";
import { createProgress } from "../../sdk/src/cli/progress.js";

function fakeStream(isTTY: boolean) {
  const writes: string[] = [];
  return {
    writes,
    stream: { isTTY, columns: 100, write: (s: string) => writes.push(s) } as unknown as NodeJS.WriteStream,
  };
}

describe("progress bar", () => {
  it("on a terminal, after half a second, draws the bar with percentage and amount, and clears it", () => {
    let clock = 0;
    const { stream, writes } = fakeStream(true);
    const p = createProgress("put big.bin", { stream, enabled: true, now: () => clock });
    p.update(1024, 4 * 1024 * 1024);
    expect(writes).toEqual([]);
    clock = 1000;
    p.update(2 * 1024 * 1024, 4 * 1024 * 1024);
    expect(writes).toHaveLength(1);
    expect(writes[0]).toMatch(/^\rput big\.bin \[#{12}\.{12}\] 50% 2\.0 MiB\/4\.0 MiB 2\.0 MiB\/s/);
    p.finish();
    expect(writes.at(-1)).toBe("\r\x1b[K");
  });

  it("draws nothing when the stream is not a terminal, or when disabled (-q)", () => {
    let clock = 0;
    for (const [isTTY, enabled] of [
      [false, true],
      [true, false],
    ] as const) {
      const { stream, writes } = fakeStream(isTTY);
      const p = createProgress("get", { stream, enabled, now: () => clock });
      clock += 5000;
      p.update(10, 100);
      p.finish();
      expect(writes).toEqual([]);
    }
  });
});
