// An in-memory ResourceSource for tests: documents given as values (serialized here) or as
// raw text, with fixed times so reports are reproducible.

import type { ResourceSource, SourceResource } from "../../src/insights/index.js";

export const CREATED = Date.UTC(2026, 0, 15, 9, 30, 0, 123);
export const MODIFIED = Date.UTC(2026, 1, 20, 14, 5, 6, 789);

export interface MemoryResource {
  /** A JSON value to serialize, or the exact text (string) or bytes of the resource. */
  content: unknown;
  promotion?: SourceResource["promotion"];
  /** Open fails with this error. */
  fails?: Error;
}

export function memorySource(
  resources: Record<string, unknown | MemoryResource>,
): ResourceSource & { opened: string[] } {
  const opened: string[] = [];
  return {
    opened,
    async *list() {
      for (const [path, value] of Object.entries(resources)) {
        const resource: MemoryResource =
          typeof value === "object" && value !== null && "content" in value
            ? (value as MemoryResource)
            : { content: value };
        const bytes =
          resource.content instanceof Uint8Array
            ? resource.content
            : Buffer.from(typeof resource.content === "string" ? resource.content : JSON.stringify(resource.content));
        yield {
          path,
          size: bytes.byteLength,
          created: CREATED,
          lastModified: MODIFIED,
          promotion: resource.promotion,
          async *open() {
            opened.push(path);
            if (resource.fails) throw resource.fails;
            yield bytes;
          },
        };
      }
    },
  };
}

export const REPORT_OPTIONS = {
  creator: "alice@acme.example",
  projectID: "0b6f3c1e-5a7d-4c2b-9e8f-1a2b3c4d5e6f",
  projectName: "acme-letters",
  environmentID: "7d9e1f20-3b4c-4d5e-8f60-718293a4b5c6",
  environmentName: "production",
  created: new Date(Date.UTC(2026, 2, 1, 12, 0, 0, 0)),
};
