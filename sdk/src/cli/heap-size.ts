// Peak memory of `trove push`, `pull` and `mirror` (issue 31): V8's young generation is kept at
// its first size, and the old generation grows by half of what is live after a collection
// instead of by V8's own factor (up to 4x on a machine with memory to spare).

import { setFlagsFromString } from "node:v8";

/**
 * Measured on a pull of 10,020 files (docs/benchmarks.md): the live heap is about 20 MiB all
 * along, but a run of thousands of requests leaves garbage at a steady rate.
 * - V8 doubles the young generation each time enough objects survived its collections since the
 *   last growth, which such a run always reaches: it grew to 128 MiB, about 130 of the 300 MiB
 *   resident. The growth factor is read when the young generation would grow (unlike
 *   --max-semi-space-size, read only at start-up), so it can be set here.
 * - With the young generation small, requests in flight survive into the old generation, which
 *   V8 lets grow to 50-60 MiB (heapTotal) before its first full collection: a peak of 166-176 MiB.
 *   `--heap-growing-percent`, read at each full collection, keeps heapTotal at 25-30 MiB and the
 *   peak at 120-130 MiB, for about 10 % more client CPU (10, 25 and 50 % measured alike: 50).
 * Set by the commands that run long; `trove serve` and the SDK's functions are left alone.
 */
export function keepHeapSmall(): void {
  setFlagsFromString("--semi-space-growth-factor=1");
  setFlagsFromString("--heap-growing-percent=50");
}
