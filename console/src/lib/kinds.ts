// What a resource is, in words a designer uses: the design-resource kind its media type names
// (template, block, plugin, data model, theme; docs/resources.md), or the media type's readable
// form (JSON, PDF, PNG image). The browse listing's Type column and the insights chips read it.

/** The design-resource kinds, with the report document's type names (docs/insights.md). */
export type DesignKind = "template" | "block" | "plugin" | "datamodel" | "theme";

export const DESIGN_KINDS: { kind: DesignKind; label: string; reportType: string; media: string }[] = [
  { kind: "template", label: "template", reportType: "template", media: "application/vnd.trove.template+json" },
  { kind: "block", label: "block", reportType: "contentBlock", media: "application/vnd.trove.content-block+json" },
  {
    kind: "plugin",
    label: "plugin",
    reportType: "pluggableObject",
    media: "application/vnd.trove.pluggable-object+json",
  },
  { kind: "datamodel", label: "data model", reportType: "datamodel", media: "application/vnd.trove.data-model+json" },
  { kind: "theme", label: "theme", reportType: "theme", media: "application/vnd.trove.theme+json" },
];

/** The design kind of a report document's `type` (`contentBlock` is a block); undefined for another type. */
export function kindOfReportType(type: string): DesignKind | undefined {
  return DESIGN_KINDS.find((k) => k.reportType === type)?.kind;
}

/** The label of a report document's `type`: "data model" for `datamodel`; another type as it is. */
export function reportTypeLabel(type: string): string {
  return DESIGN_KINDS.find((k) => k.reportType === type)?.label ?? (type || "unknown");
}

const READABLE: Record<string, string> = {
  "application/json": "JSON",
  "application/xml": "XML",
  "text/xml": "XML",
  "application/pdf": "PDF",
  "application/zip": "ZIP archive",
  "application/gzip": "gzip archive",
  "application/octet-stream": "binary",
  "application/javascript": "JavaScript",
  "text/javascript": "JavaScript",
  "application/yaml": "YAML",
  "text/yaml": "YAML",
  "text/plain": "text",
  "text/html": "HTML",
  "text/css": "CSS",
  "text/csv": "CSV",
  "text/markdown": "Markdown",
  "image/svg+xml": "SVG image",
  "font/woff2": "WOFF2 font",
  "font/woff": "WOFF font",
  "font/ttf": "TrueType font",
  "font/otf": "OpenType font",
};

/**
 * The Type column's words for a listing entry: "folder", a design kind ("template"), a known media
 * type's name ("JSON", "PNG image"), or for another one its subtype without vendor prefixes and
 * with its structured suffix said ("presentationml.presentation", "foo (JSON)").
 */
export function typeLabel(type: string, directory = false): string {
  if (directory) return "folder";
  const media = type.split(";")[0]?.trim().toLowerCase() ?? "";
  if (media === "") return "unknown";
  const design = DESIGN_KINDS.find((k) => k.media === media);
  if (design) return design.label;
  const known = READABLE[media];
  if (known) return known;
  const [top, sub = ""] = media.split("/");
  if (top === "image" || top === "audio" || top === "video" || top === "font") {
    return `${sub.replace(/^(x-|vnd\.)/, "").toUpperCase()} ${top}`;
  }
  const plus = sub.lastIndexOf("+");
  const base = (plus < 0 ? sub : sub.slice(0, plus)).replace(/^(x-|vnd\.)/, "");
  const suffix = plus < 0 ? "" : (READABLE[`application/${sub.slice(plus + 1)}`] ?? sub.slice(plus + 1).toUpperCase());
  if (top === "text" && base !== "") return suffix ? `${base} (${suffix})` : `${base} text`;
  return suffix ? `${base} (${suffix})` : base || media;
}
