// The report document, field by field as the spec's tables (docs/insights.md lists the
// decisions the spec leaves open: missing flag, problems, additional fields, path form).

import type { ResourceType } from "./resource-format.js";

/** Version of the report format, carried by every report document. */
export const REPORT_FORMAT_VERSION = "1.0";

export const ADDITIONAL_FIELDS = ["lastPromotedDate", "lastPromotedBy"] as const;
export type AdditionalField = (typeof ADDITIONAL_FIELDS)[number];

export interface ReferenceEntry {
  /** Name of the referenced resource: its file name without the extension. */
  name: string;
  /** The reference as written in the referring document. */
  relativePath: string;
  /** The referenced resource's path within the environment, with a leading "/". */
  absolutePath: string;
  /** Present, and true, only when no design resource exists at absolutePath. */
  missing?: true;
}

export interface ThemeEntry extends ReferenceEntry {
  isDefault: boolean;
}

export interface ResourceEntry {
  type: ResourceType;
  name: string;
  extension: string;
  path: string;
  created: string;
  lastModified: string;
  size: number;
  tags: Record<string, string>;
  pluggableObjects: ReferenceEntry[];
  contentBlocks: ReferenceEntry[];
  /** The data model the resource names; null when it names none. */
  datamodel: ReferenceEntry | null;
  themes: ThemeEntry[];
  /** Only when requested: ISO 8601 time of the last promotion into this environment, or null. */
  lastPromotedDate?: string | null;
  /** Only when requested: who last promoted the resource into this environment, or null. */
  lastPromotedBy?: string | null;
  /** Present only when the document has problems (not valid JSON, a bad reference, ...). */
  problems?: string[];
}

export interface ReportDocument {
  version: string;
  created: string;
  creator: string;
  projectID: string;
  projectName: string;
  environmentID: string;
  environmentName: string;
  resources: ResourceEntry[];
}

/** The kinds of reference a resource entry holds, by the type of resource they point to. */
export type ReferenceKind = Exclude<ResourceType, "template">;

/** Calls `visit` for every reference of an entry with its kind, in the entry's field order. */
export function forEachReference(
  entry: ResourceEntry,
  visit: (kind: ReferenceKind, reference: ReferenceEntry) => void,
): void {
  for (const reference of entry.pluggableObjects) visit("pluggableObject", reference);
  for (const reference of entry.contentBlocks) visit("contentBlock", reference);
  if (entry.datamodel !== null) visit("datamodel", entry.datamodel);
  for (const reference of entry.themes) visit("theme", reference);
}
