// The report builder holds one resource at a time: a source of 2,000 content blocks of
// 256 KiB each (500 MiB in all, generated on the fly and never held whole) is reported on
// while the heap stays within a small bound. Memory may grow with the number of resources
// (their entries), never with the size of their contents.

import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { buildReport, type SourceResource } from "../../src/insights/index.js";
import { REPORT_OPTIONS } from "./memory-source.js";

const KiB = 1024;
const MiB = 1024 * KiB;
const COUNT = 2_000;
const SIZE = 256 * KiB;
const CHUNK = 64 * KiB;
const LIMIT = 64 * MiB;

// A gc() for this process only, so the baseline and the end state are measured without garbage.
setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** One content block of exactly SIZE bytes: a body of filler text that uses the next block. */
function* blockChunks(i: number): Generator<Uint8Array> {
  const head = Buffer.from(`{"tags":{"n":"${i}"},"body":{"$block":"${(i + 1) % COUNT}.block","text":"`);
  const tail = Buffer.from(`"}}`);
  let left = SIZE - head.length - tail.length;
  yield head;
  while (left > 0) {
    const n = Math.min(CHUNK, left);
    // A fresh buffer per chunk, as a file or network read would give.
    yield Buffer.alloc(n, 97 + (i % 26));
    left -= n;
  }
  yield tail;
}

function mib(bytes: number): string {
  return `${(bytes / MiB).toFixed(1)} MiB`;
}

function used(): number {
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}

describe("report generation memory", () => {
  it("does not grow with the size of the resources' content (2,000 x 256 KiB, heap growth < 64 MiB)", async () => {
    let peak = 0;
    let live = 0;
    const source = {
      async *list(): AsyncGenerator<SourceResource> {
        for (let i = 0; i < COUNT; i++) {
          peak = Math.max(peak, used());
          yield {
            path: `blocks/${i}.block`,
            size: SIZE,
            created: 0,
            lastModified: 0,
            async *open() {
              let n = 0;
              for (const chunk of blockChunks(i)) {
                // Every 25th resource, part-way through its contents: what is still reachable on the
                // heap (where parsed documents live; freed Buffers leave arrayBuffers with a lag).
                if (i % 25 === 0 && n++ === 2) {
                  gc();
                  live = Math.max(live, process.memoryUsage().heapUsed);
                }
                peak = Math.max(peak, used());
                yield chunk;
              }
            },
          };
        }
      },
    };
    gc();
    const before = used();
    const heapBefore = process.memoryUsage().heapUsed;
    const report = await buildReport(source, REPORT_OPTIONS);
    gc();
    const after = used();

    expect(report.resources).toHaveLength(COUNT);
    expect(report.resources[0]).toMatchObject({ size: SIZE, tags: { n: "0" } });
    expect(report.resources.every((r) => r.problems === undefined && r.contentBlocks.length === 1)).toBe(true);
    // Held at the end: only the entries (a few hundred bytes each; measured 2-15 MiB with the
    // collector's slack on a loaded machine), never the 500 MiB of content.
    expect(after - before).toBeLessThan(32 * MiB);
    // While reading: the entries so far and the resource being read, nothing else.
    expect(live - heapBefore).toBeLessThan(32 * MiB);
    // At any time, garbage included: far less than the 500 MiB that went through.
    expect(peak - before).toBeLessThan(LIMIT);
    console.log(
      `memory: ${((COUNT * SIZE) / MiB).toFixed(0)} MiB read; growth: peak ${mib(peak - before)}, ` +
        `reachable while reading ${mib(live - heapBefore)}, retained ${mib(after - before)}`,
    );
  });
});
