// What every benchmark prints and measures alike: medians, padded columns, ratios, and a
// process's CPU time.

import { readdirSync, readFileSync } from "node:fs";

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

/**
 * utime + stime of a process and of all its live descendants, in seconds: Apache httpd serves
 * from child processes (and their threads), which the parent's own counters do not include.
 */
export function treeCpuSeconds(pid) {
  const children = new Map();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const parent = Number(readFileSync(`/proc/${entry}/stat`, "utf8").split(") ")[1].split(" ")[1]);
      children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
    } catch {
      // the process ended while the list was read
    }
  }
  let total = 0;
  for (const queue = [pid]; queue.length > 0; ) {
    const next = queue.pop();
    try {
      total += cpuSeconds(next);
    } catch {
      continue;
    }
    queue.push(...(children.get(next) ?? []));
  }
  return total;
}
