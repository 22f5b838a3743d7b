// The insights screen's logic without the page: the report document's shape (docs/insights.md),
// its rows as the table shows them, and the queries' answers as lines.

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

export interface QueryResult {
  title: string;
  rows: string[];
}

export const queryRows = {
  related: (all: { path: string; type: string; depth: number; missing: boolean }[]): string[] =>
    all.map(
      (r) => `${r.path} (${r.type || "unknown"}${r.depth ? `, depth ${r.depth}` : ""}${r.missing ? ", missing" : ""})`,
    ),
  missing: (refs: { path: string; kind: string; absolutePath: string }[]): string[] =>
    refs.map((r) => `${r.path} → ${r.absolutePath} (${r.kind}, missing)`),
  cycles: (cycles: { cycle: string[] }[]): string[] => cycles.map((c) => c.cycle.join(" → ")),
};
