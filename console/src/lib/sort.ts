// Sorting a directory listing by a column: directories first, then the column, then the name;
// names compare as people read them (file2 before file10).

import { typeLabel } from "./kinds.js";

export type SortKey = "name" | "type" | "size" | "modified" | "tag" | "md5";
export type SortDirection = "asc" | "desc";

export interface Sort {
  key: SortKey;
  direction: SortDirection;
}

/** What a row needs for sorting (the generated Resource has these fields). */
export interface Sortable {
  name: string;
  directory: boolean;
  deleted: boolean;
  type: string;
  size: bigint | number;
  lastModifiedMillis: bigint | number;
  tag: string;
  md5: string;
}

const collator = new Intl.Collator("en", { numeric: true, sensitivity: "base" });

function compareBy(key: SortKey, a: Sortable, b: Sortable): number {
  switch (key) {
    case "name":
      return collator.compare(a.name, b.name);
    case "type":
      // By what the column shows ("block", "JSON"), then by the media type.
      return collator.compare(typeLabel(a.type), typeLabel(b.type)) || collator.compare(a.type, b.type);
    case "size":
      return Number(a.size) - Number(b.size);
    case "modified":
      return Number(a.lastModifiedMillis) - Number(b.lastModifiedMillis);
    case "tag":
      return a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : 0;
    case "md5":
      return a.md5 < b.md5 ? -1 : a.md5 > b.md5 ? 1 : 0;
  }
}

/** A new array, sorted; the input is left as it is. */
export function sortListing<T extends Sortable>(entries: readonly T[], sort: Sort): T[] {
  const sign = sort.direction === "asc" ? 1 : -1;
  return [...entries].sort((a, b) => {
    if (a.directory !== b.directory) return a.directory ? -1 : 1;
    const primary = compareBy(sort.key, a, b) * sign;
    if (primary !== 0) return primary;
    return collator.compare(a.name, b.name) || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  });
}

/** The sort after a click on a column's header: the same column flips, another starts ascending. */
export function nextSort(current: Sort, key: SortKey): Sort {
  if (current.key === key) return { key, direction: current.direction === "asc" ? "desc" : "asc" };
  return { key, direction: "asc" };
}

/** The aria-sort of a column header. */
export function ariaSort(current: Sort, key: SortKey): "ascending" | "descending" | "none" {
  if (current.key !== key) return "none";
  return current.direction === "asc" ? "ascending" : "descending";
}
