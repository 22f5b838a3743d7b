// What every benchmark prints and measures alike: medians, padded columns, ratios, and a
// process's CPU time.

import { readFileSync } from "node:fs";

export function median(xs) {
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
}

export function pad(text, width, right = false) {
  const s = String(text);
  return right ? s.padStart(width) : s.padEnd(width);
}

/** A ratio with two significant digits at least: MongoDB's PUT is far below 0.01x. */
export function times(ratio) {
  return `${ratio >= 0.1 || Number.isNaN(ratio) ? ratio.toFixed(2) : ratio.toPrecision(2)}x`;
}

/** utime + stime of a process, in seconds (/proc/{pid}/stat counts clock ticks of 10 ms). */
export function cpuSeconds(pid) {
  const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}
