// The insights screen's logic without the page: the report document's shape (docs/insights.md),
// its rows as the Resources tab shows them, filtered and sorted.

export interface ReportReference {
  name: string;
  relativePath: string;
  absolutePath: string;
  missing?: boolean;
}

export interface ReportEntry {
  type: string;
  name: string;
  path: string;
  tags: Record<string, string>;
  pluggableObjects: ReportReference[];
  contentBlocks: ReportReference[];
  datamodel: ReportReference | null;
  themes: ReportReference[];
  lastPromotedDate?: string | null;
  lastPromotedBy?: string | null;
}

export interface ReportDocument {
  projectName: string;
  environmentName: string;
  resources: ReportEntry[];
}

export interface ReportRow {
  path: string;
  type: string;
  tags: string;
  references: { path: string; missing: boolean }[];
  lastPromoted: string;
}

/** One row per resource: its tags as `key=value`, every reference once (data model, themes, blocks, plugins). */
export function reportRows(entries: ReportEntry[]): ReportRow[] {
  return entries.map((e) => {
    const refs = [...(e.datamodel ? [e.datamodel] : []), ...e.themes, ...e.contentBlocks, ...e.pluggableObjects];
    const seen = new Set<string>();
    const references: ReportRow["references"] = [];
    for (const r of refs) {
      if (seen.has(r.absolutePath)) continue;
      seen.add(r.absolutePath);
      references.push({ path: r.absolutePath, missing: r.missing === true });
    }
    const promoted =
      e.lastPromotedDate == null
        ? "never"
        : `${e.lastPromotedDate}${e.lastPromotedBy ? ` by ${e.lastPromotedBy}` : ""}`;
    return {
      path: e.path,
      type: e.type,
      tags: Object.entries(e.tags ?? {})
        .map(([k, v]) => `${k}=${v}`)
        .join(", "),
      references,
      lastPromoted: promoted,
    };
  });
}

export interface ResourceSort {
  key: "path" | "type" | "references" | "promoted";
  direction: "asc" | "desc";
}

const collator = new Intl.Collator("en", { numeric: true, sensitivity: "base" });

/**
 * The Resources tab's rows: those whose path or tags contain `text` (case aside) and whose type is
 * `type` (all when empty), sorted by the column, then by path.
 */
export function resourceTable(
  rows: ReportRow[],
  filter: { text: string; type: string },
  sort: ResourceSort,
): ReportRow[] {
  const text = filter.text.trim().toLowerCase();
  const kept = rows.filter(
    (r) =>
      (filter.type === "" || r.type === filter.type) &&
      (text === "" || r.path.toLowerCase().includes(text) || r.tags.toLowerCase().includes(text)),
  );
  const by = (a: ReportRow, b: ReportRow): number => {
    switch (sort.key) {
      case "type":
        return collator.compare(a.type, b.type);
      case "references":
        return a.references.length - b.references.length;
      case "promoted":
        return collator.compare(a.lastPromoted, b.lastPromoted);
      default:
        return 0;
    }
  };
  const sign = sort.direction === "asc" ? 1 : -1;
  return kept.sort((a, b) => sign * (by(a, b) || collator.compare(a.path, b.path)));
}
