// Peak memory of `trove push`, `pull` and `mirror` (issue 31): V8's young generation is kept at
// its first size instead of growing to 2 x 64 MiB.

import { setFlagsFromString } from "node:v8";

/**
 * Measured on a pull of 10,020 files (docs/benchmarks.md): the live heap is about 22 MiB all
 * along (a heap snapshot mid-run), but V8 doubles the young generation each time enough objects
 * survived its collections since the last growth, which a run of thousands of requests always
 * reaches: it grew to 128 MiB, about 130 of the 300 MiB resident. The growth factor is read when
 * the young generation would grow (unlike --max-semi-space-size, read only at start-up), so it can
 * be set here, by the commands that run long; `trove serve` and the SDK's functions are left alone.
 */
export function keepYoungGenerationSmall(): void {
  setFlagsFromString("--semi-space-growth-factor=1");
}
