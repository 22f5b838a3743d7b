// Builds the report document of one environment from a ResourceSource, one resource at a time:
// each design resource is read, parsed and reduced to its entry before the next is opened, so
// memory grows with the number of resources, never with the size of their contents.

import { HistoryPurgedError, UnavailableError } from "../domain/errors.js";
import { type DesignResourceContent, parseDesignResource } from "./design-resource.js";
import { environmentPath } from "./reference-path.js";
import {
  type AdditionalField,
  forEachReference,
  REPORT_FORMAT_VERSION,
  type ReportDocument,
  type ResourceEntry,
} from "./report-document.js";
import { DEFAULT_FORMAT, type ResourceFormat } from "./resource-format.js";
import type { ResourceSource, SourceResource } from "./resource-source.js";

/** Documents larger than this are listed with a problem instead of being parsed. */
export const DEFAULT_MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

export interface ReportOptions {
  creator: string;
  projectID: string;
  projectName: string;
  environmentID: string;
  environmentName: string;
  /** Fields to add to each resource entry (validated by parseReportRequest). */
  additionalFields?: readonly AdditionalField[];
  /** The report's creation time; by default the time generation starts. */
  created?: Date;
  /** The extension map; DEFAULT_FORMAT by default. */
  format?: ResourceFormat;
  maxDocumentBytes?: number;
  /** Called after each design resource is read, with the number read so far (for job leases). */
  onProgress?: (resourcesRead: number) => void | Promise<void>;
  /** Stops generation between two resources. */
  signal?: AbortSignal;
}

function iso(ms: number, what: string, problems: string[]): string {
  const date = new Date(ms);
  if (Number.isFinite(ms) && !Number.isNaN(date.getTime())) return date.toISOString();
  problems.push(`${what} time unknown (${String(ms)})`);
  return new Date(0).toISOString();
}

const UTF8 = new TextDecoder("utf-8", { fatal: true });

type Contents = { text: string } | { problem: string };

async function readContents(resource: SourceResource, maxBytes: number): Promise<Contents> {
  if (resource.size > maxBytes) {
    return { problem: `not parsed: ${resource.size} bytes, more than the ${maxBytes} a design resource may have` };
  }
  const chunks: Uint8Array[] = [];
  let total = 0;
  try {
    for await (const chunk of resource.open()) {
      total += chunk.byteLength;
      // The listed size may be stale: never hold more than the limit.
      if (total > maxBytes) {
        return { problem: `not parsed: more than the ${maxBytes} bytes a design resource may have` };
      }
      chunks.push(chunk);
    }
  } catch (error) {
    // A backend that is down fails the whole report (its job is retried), not one entry; so does
    // an earlier moment whose history was purged meanwhile (a moment is whole or refused).
    if (error instanceof UnavailableError || error instanceof HistoryPurgedError) throw error;
    return { problem: `could not be read: ${(error as Error).message}` };
  }
  try {
    const bytes = chunks.length === 1 ? (chunks[0] as Uint8Array) : Buffer.concat(chunks, total);
    return { text: UTF8.decode(bytes) };
  } catch {
    return { problem: "not valid UTF-8 text" };
  }
}

function promotionDate(date: string | number): string {
  if (typeof date === "number") return new Date(date).toISOString();
  return date;
}

export async function buildReport(source: ResourceSource, options: ReportOptions): Promise<ReportDocument> {
  const format = options.format ?? DEFAULT_FORMAT;
  const maxBytes = options.maxDocumentBytes ?? DEFAULT_MAX_DOCUMENT_BYTES;
  const additional = new Set(options.additionalFields ?? []);
  const created = (options.created ?? new Date()).toISOString();
  const entries = new Map<string, ResourceEntry>();

  for await (const resource of source.list()) {
    options.signal?.throwIfAborted();
    const path = environmentPath(resource.path);
    const classified = format.classify(path);
    // Not a design resource (an image, a README, ...), or listed twice: not part of the report.
    if (classified === undefined || entries.has(path)) continue;

    const problems: string[] = [];
    const contents = await readContents(resource, maxBytes);
    let content: DesignResourceContent;
    if ("text" in contents) {
      content = parseDesignResource(contents.text, path, classified.type, format);
    } else {
      content = { tags: {}, pluggableObjects: [], contentBlocks: [], datamodel: null, themes: [], problems: [] };
      problems.push(contents.problem);
    }
    problems.push(...content.problems);

    const entry: ResourceEntry = {
      type: classified.type,
      name: classified.name,
      extension: classified.extension,
      path,
      created: iso(resource.created, "creation", problems),
      lastModified: iso(resource.lastModified, "modification", problems),
      size: resource.size,
      tags: content.tags,
      pluggableObjects: content.pluggableObjects,
      contentBlocks: content.contentBlocks,
      datamodel: content.datamodel,
      themes: content.themes,
    };
    if (additional.has("lastPromotedDate")) {
      entry.lastPromotedDate = resource.promotion ? promotionDate(resource.promotion.date) : null;
    }
    if (additional.has("lastPromotedBy")) entry.lastPromotedBy = resource.promotion?.by ?? null;
    if (problems.length > 0) entry.problems = problems;
    entries.set(path, entry);
    await options.onProgress?.(entries.size);
  }

  // Only now is every resource known: flag the references that point to nothing. (A missing
  // target is a fact about the environment, not a problem of the document: no `problems` line.)
  for (const entry of entries.values()) {
    forEachReference(entry, (_kind, reference) => {
      if (!entries.has(reference.absolutePath)) reference.missing = true;
    });
  }

  const resources = [...entries.values()].sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
  return {
    version: REPORT_FORMAT_VERSION,
    created,
    creator: options.creator,
    projectID: options.projectID,
    projectName: options.projectName,
    environmentID: options.environmentID,
    environmentName: options.environmentName,
    resources,
  };
}
