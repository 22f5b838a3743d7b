// A line diff for the history's side-by-side comparison: Myers' O(ND) algorithm on lines, after
// the common head and tail are set aside, bounded (a pair too different to compare says so rather
// than take the page's memory), and its result as the rows of two columns.

export type DiffOp = { kind: "same" | "removed" | "added"; line: string };

/** The most edits the diff looks for; past it the texts are "too different" (about 2 MiB of traces). */
export const MAX_EDITS = 1500;

/** The lines of a text: "\n" or "\r\n" ends a line; a last line without one still counts. */
export function splitLines(text: string): string[] {
  if (text === "") return [];
  const lines = text.split(/\r?\n/);
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

/**
 * The edit script from `a` to `b`, in order: every line of both, each once, as same, removed (from
 * a) or added (in b). Undefined when more than `maxEdits` lines differ.
 */
export function diffLines(a: string[], b: string[], maxEdits = MAX_EDITS): DiffOp[] | undefined {
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const x = a.slice(head, a.length - tail);
  const y = b.slice(head, b.length - tail);
  const middle = myers(x, y, maxEdits);
  if (!middle) return undefined;
  return [
    ...a.slice(0, head).map((line) => ({ kind: "same" as const, line })),
    ...middle,
    ...a.slice(a.length - tail).map((line) => ({ kind: "same" as const, line })),
  ];
}

function myers(a: string[], b: string[], maxEdits: number): DiffOp[] | undefined {
  const n = a.length;
  const m = b.length;
  if (n === 0) return b.map((line) => ({ kind: "added", line }));
  if (m === 0) return a.map((line) => ({ kind: "removed", line }));
  const max = Math.min(n + m, maxEdits);
  const offset = max + 1;
  const v = new Int32Array(2 * max + 3);
  const trace: Int32Array[] = [];
  for (let d = 0; d <= max; d++) {
    trace.push(v.slice());
    for (let k = -d; k <= d; k += 2) {
      let px =
        k === -d || (k !== d && (v[offset + k - 1] as number) < (v[offset + k + 1] as number))
          ? (v[offset + k + 1] as number)
          : (v[offset + k - 1] as number) + 1;
      let py = px - k;
      while (px < n && py < m && a[px] === b[py]) {
        px++;
        py++;
      }
      v[offset + k] = px;
      if (px >= n && py >= m) return backtrack(trace, a, b, offset);
    }
  }
  return undefined;
}

/** Walks the saved frontiers back from (n, m) to (0, 0), collecting the script in reverse. */
function backtrack(trace: Int32Array[], a: string[], b: string[], offset: number): DiffOp[] {
  const out: DiffOp[] = [];
  let px = a.length;
  let py = b.length;
  for (let d = trace.length - 1; d >= 0; d--) {
    const v = trace[d] as Int32Array;
    const k = px - py;
    const prevK =
      k === -d || (k !== d && (v[offset + k - 1] as number) < (v[offset + k + 1] as number)) ? k + 1 : k - 1;
    const prevX = d === 0 ? 0 : (v[offset + prevK] as number);
    const prevY = prevX - prevK;
    while (px > prevX && py > prevY) {
      out.push({ kind: "same", line: a[px - 1] as string });
      px--;
      py--;
    }
    if (d > 0) {
      if (px === prevX) out.push({ kind: "added", line: b[py - 1] as string });
      else out.push({ kind: "removed", line: a[px - 1] as string });
    }
    px = prevX;
    py = prevY;
  }
  return out.reverse();
}

/** One row of the side-by-side view: the left line (older), the right line (newer), by number. */
export interface SideBySideRow {
  kind: "same" | "changed" | "removed" | "added";
  left?: { number: number; line: string };
  right?: { number: number; line: string };
}

/** The script as two columns: removals beside the additions that replace them, same lines level. */
export function sideBySide(ops: DiffOp[]): SideBySideRow[] {
  const rows: SideBySideRow[] = [];
  let left = 0;
  let right = 0;
  for (let i = 0; i < ops.length; ) {
    const op = ops[i] as DiffOp;
    if (op.kind === "same") {
      rows.push({ kind: "same", left: { number: ++left, line: op.line }, right: { number: ++right, line: op.line } });
      i++;
      continue;
    }
    const removed: string[] = [];
    const added: string[] = [];
    while (i < ops.length && (ops[i] as DiffOp).kind !== "same") {
      const o = ops[i] as DiffOp;
      (o.kind === "removed" ? removed : added).push(o.line);
      i++;
    }
    for (let j = 0; j < Math.max(removed.length, added.length); j++) {
      const l = removed[j];
      const r = added[j];
      rows.push({
        kind: l !== undefined && r !== undefined ? "changed" : l !== undefined ? "removed" : "added",
        left: l !== undefined ? { number: ++left, line: l } : undefined,
        right: r !== undefined ? { number: ++right, line: r } : undefined,
      });
    }
  }
  return rows;
}
