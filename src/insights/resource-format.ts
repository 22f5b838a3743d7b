// Design resources: their five types and the file-extension map that gives a resource its type
// (docs/resources.md). The defaults are the extensions src/domain/mime.ts types as
// application/vnd.trove.*+json; a deployment may add, replace or remove extensions.

import { BadRequestError } from "../domain/errors.js";

export const RESOURCE_TYPES = ["template", "contentBlock", "pluggableObject", "datamodel", "theme"] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];

/** Extension (without the dot, lower case) to type. */
export const DEFAULT_EXTENSIONS: Readonly<Record<string, ResourceType>> = Object.freeze({
  template: "template",
  block: "contentBlock",
  plugin: "pluggableObject",
  datamodel: "datamodel",
  theme: "theme",
});

/** What a type is called in problems and docs. */
export const TYPE_LABELS: Readonly<Record<ResourceType, string>> = Object.freeze({
  template: "template",
  contentBlock: "content block",
  pluggableObject: "pluggable object",
  datamodel: "data model",
  theme: "theme",
});

export function isResourceType(value: unknown): value is ResourceType {
  return typeof value === "string" && (RESOURCE_TYPES as readonly string[]).includes(value);
}

/** A file name split by the extension map. */
export interface ClassifiedName {
  type: ResourceType;
  /** The name without the extension and its dot. */
  name: string;
  /** The extension as written in the file name, without the dot. */
  extension: string;
}

export interface ResourceFormat {
  /** The type of a file name or path, or undefined when it is not a design resource. */
  classify(nameOrPath: string): ClassifiedName | undefined;
  /** The extensions (lower case, without dot) mapped to a type; the first is the preferred one. */
  extensionsOf(type: ResourceType): readonly string[];
  /** The whole map, extension to type. */
  readonly extensions: Readonly<Record<string, ResourceType>>;
}

export interface ResourceFormatOptions {
  /**
   * Extensions to add or change (`{ tpl: "template" }`), or to remove (`{ plugin: null }`).
   * An extension may contain dots (`"template.json"`): the longest matching one wins.
   */
  extensions?: Readonly<Record<string, ResourceType | null>>;
  /** Start from an empty map instead of DEFAULT_EXTENSIONS. */
  replaceDefaults?: boolean;
}

const EXTENSION = /^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/;

function normalizeExtension(raw: string): string {
  const ext = (raw.startsWith(".") ? raw.slice(1) : raw).toLowerCase();
  if (!EXTENSION.test(ext)) {
    throw new BadRequestError(
      `invalid design-resource extension ${JSON.stringify(raw)}: use letters, digits, '_' or '-', parts separated by '.'`,
    );
  }
  return ext;
}

export function createResourceFormat(options: ResourceFormatOptions = {}): ResourceFormat {
  const map = new Map<string, ResourceType>(options.replaceDefaults ? [] : Object.entries(DEFAULT_EXTENSIONS));
  for (const [raw, type] of Object.entries(options.extensions ?? {})) {
    const ext = normalizeExtension(raw);
    if (type === null) {
      map.delete(ext);
    } else if (isResourceType(type)) {
      map.set(ext, type);
    } else {
      throw new BadRequestError(
        `unknown design-resource type ${JSON.stringify(type)} for extension ${JSON.stringify(raw)}: use one of ${RESOURCE_TYPES.join(", ")}`,
      );
    }
  }
  // Longest first, so "template.json" wins over "json".
  const ordered = [...map.keys()].sort((a, b) => b.length - a.length || (a < b ? -1 : 1));
  const extensions = Object.freeze(Object.fromEntries([...map.entries()]));
  const byType = new Map<ResourceType, string[]>(RESOURCE_TYPES.map((t) => [t, []]));
  for (const [ext, type] of map) byType.get(type)?.push(ext);

  return {
    extensions,
    extensionsOf: (type) => byType.get(type) ?? [],
    classify(nameOrPath) {
      const name = nameOrPath.slice(nameOrPath.lastIndexOf("/") + 1);
      const lower = name.toLowerCase();
      for (const ext of ordered) {
        // The name must keep at least one character before the dot: ".template" is a hidden file.
        if (lower.length > ext.length + 1 && lower.endsWith(ext) && lower[lower.length - ext.length - 1] === ".") {
          const type = map.get(ext);
          if (type === undefined) continue;
          return {
            type,
            name: name.slice(0, name.length - ext.length - 1),
            extension: name.slice(name.length - ext.length),
          };
        }
      }
      return undefined;
    },
  };
}

export const DEFAULT_FORMAT: ResourceFormat = createResourceFormat();
