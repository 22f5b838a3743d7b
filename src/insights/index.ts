// Content insights: the design-resource format, report generation, queries over a report,
// and the checks of the report API's inputs. Storage-independent: I/O only through
// ResourceSource (file-source.ts reads a local directory).

export {
  BLOCK_KEY,
  type DesignResourceContent,
  PLUGIN_KEY,
  parseDesignResource,
  readDesignResource,
} from "./design-resource.js";
export {
  diffReferences,
  diffResources,
  type ReferenceDiff,
  type ResourceDiff,
  type ResourceDiffKind,
  type SideFile,
} from "./environment-diff.js";
export { type FileSourceOptions, fileSource } from "./file-source.js";
export { type GraphExportOptions, toDot, toMermaid } from "./graph-export.js";
export { baseName, environmentPath, type Resolution, resolveReference } from "./reference-path.js";
export { buildReport, DEFAULT_MAX_DOCUMENT_BYTES, type ReportOptions } from "./report-builder.js";
export {
  ADDITIONAL_FIELDS,
  type AdditionalField,
  forEachReference,
  REPORT_FORMAT_VERSION,
  type ReferenceEntry,
  type ReferenceKind,
  type ReportDocument,
  type ResourceEntry,
  type ThemeEntry,
} from "./report-document.js";
export {
  type DependencyGraph,
  dependenciesOf,
  dependencyGraph,
  dependentsOf,
  type GraphEdge,
  type GraphNode,
  type MissingReference,
  missingReferences,
  type ReferenceCycle,
  type RelatedResource,
  type RelatedResources,
  referenceCycles,
  type UnusedResource,
  unusedResources,
} from "./report-queries.js";
export {
  type GetReportInput,
  isUuid,
  parseGetReportInput,
  parseReportRequest,
  type ReportRequest,
} from "./report-request.js";
export {
  DAY_MS,
  DEFAULT_REPORT_AVAILABILITY_MS,
  isReportAvailable,
  REPORT_STATUSES,
  type ReportReference,
  type ReportState,
  type ReportStatus,
  type ReportStatusRecord,
  reportExpiresAt,
  reportReference,
  reportStatusRecord,
} from "./report-status.js";
export {
  type ClassifiedName,
  createResourceFormat,
  DEFAULT_EXTENSIONS,
  DEFAULT_FORMAT,
  isResourceType,
  RESOURCE_TYPES,
  type ResourceFormat,
  type ResourceFormatOptions,
  type ResourceType,
  TYPE_LABELS,
} from "./resource-format.js";
export type { ResourceSource, SourceResource } from "./resource-source.js";
