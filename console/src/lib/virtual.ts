// Which rows of a long list to render: those in view plus a margin, so 10,000 entries cost a few dozen nodes.

export interface RowWindow {
  /** First row to render (inclusive) and the row after the last one. */
  start: number;
  end: number;
  /** Offset of the first rendered row from the top of the list, in pixels. */
  offset: number;
}

export function visibleRows(
  scrollTop: number,
  viewport: number,
  rowHeight: number,
  count: number,
  overscan = 8,
): RowWindow {
  if (count === 0 || rowHeight <= 0) return { start: 0, end: 0, offset: 0 };
  const first = Math.floor(Math.max(0, scrollTop) / rowHeight);
  const start = Math.max(0, Math.min(count - 1, first) - overscan);
  const end = Math.min(count, first + Math.ceil(Math.max(0, viewport) / rowHeight) + 1 + overscan);
  return { start, end, offset: start * rowHeight };
}

/** The scrollTop that brings row `index` into view, or undefined when it is already in view. */
export function scrollToRow(index: number, scrollTop: number, viewport: number, rowHeight: number): number | undefined {
  const top = index * rowHeight;
  if (top < scrollTop) return top;
  if (top + rowHeight > scrollTop + viewport) return top + rowHeight - viewport;
  return undefined;
}
