// Reads one design-resource document (docs/resources.md): its tags and its direct references,
// resolved to environment paths, with every problem found. Never throws on bad content: a
// document that cannot be read is still described, with its problems.

import { baseName, resolveReference } from "./reference-path.js";
import type { ReferenceEntry, ThemeEntry } from "./report-document.js";
import { DEFAULT_FORMAT, type ResourceFormat, type ResourceType, TYPE_LABELS } from "./resource-format.js";

/** Keys that mark a reference anywhere in a template's or content block's document. */
export const BLOCK_KEY = "$block";
export const PLUGIN_KEY = "$plugin";

export interface DesignResourceContent {
  tags: Record<string, string>;
  pluggableObjects: ReferenceEntry[];
  contentBlocks: ReferenceEntry[];
  datamodel: ReferenceEntry | null;
  themes: ThemeEntry[];
  /** What is wrong with the document; empty when nothing is. */
  problems: string[];
}

function emptyContent(problems: string[]): DesignResourceContent {
  return { tags: {}, pluggableObjects: [], contentBlocks: [], datamodel: null, themes: [], problems };
}

/** Parses the text of the resource at `path` (an environment path) of the given type. */
export function parseDesignResource(
  text: string,
  path: string,
  type: ResourceType,
  format: ResourceFormat = DEFAULT_FORMAT,
): DesignResourceContent {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    return emptyContent([`not valid JSON: ${(error as Error).message}`]);
  }
  return readDesignResource(value, path, type, format);
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return `a ${typeof value}`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** JSON Pointer (RFC 6901) of a location in the document. */
function pointer(parts: readonly (string | number)[]): string {
  return parts.map((p) => `/${String(p).replaceAll("~", "~0").replaceAll("/", "~1")}`).join("");
}

const USES: Record<ResourceType, { blocks: boolean; datamodel: "required" | "optional" | "no"; themes: boolean }> = {
  template: { blocks: true, datamodel: "required", themes: true },
  contentBlock: { blocks: true, datamodel: "optional", themes: false },
  pluggableObject: { blocks: false, datamodel: "no", themes: false },
  datamodel: { blocks: false, datamodel: "no", themes: false },
  theme: { blocks: false, datamodel: "no", themes: false },
};

/** Reads an already parsed document. */
export function readDesignResource(
  value: unknown,
  path: string,
  type: ResourceType,
  format: ResourceFormat = DEFAULT_FORMAT,
): DesignResourceContent {
  if (!isObject(value)) return emptyContent([`the document must be a JSON object, not ${describe(value)}`]);
  const out = emptyContent([]);
  const problems = out.problems;
  const label = TYPE_LABELS[type];
  const uses = USES[type];

  /**
   * A reference entry for `relative`, or undefined (with a problem) when it cannot be resolved.
   * `at` spells the location, only when there is a problem to report.
   */
  const reference = (relative: unknown, at: () => string, expected: ResourceType): ReferenceEntry | undefined => {
    if (typeof relative !== "string") {
      problems.push(`${at()}: a reference must be a relative path string, not ${describe(relative)}`);
      return undefined;
    }
    const resolved = resolveReference(path, relative);
    if (!resolved.ok) {
      problems.push(`${at()}: reference ${JSON.stringify(relative)} ${resolved.reason}`);
      return undefined;
    }
    const target = format.classify(resolved.absolutePath);
    if (target?.type !== expected) {
      const extensions = format
        .extensionsOf(expected)
        .map((e) => `.${e}`)
        .join(", ");
      const found = target === undefined ? "is not a design resource" : `is a ${TYPE_LABELS[target.type]}`;
      problems.push(
        `${at()}: reference ${JSON.stringify(relative)} ${found}; a ${TYPE_LABELS[expected]} ends with ${extensions || "(no extension configured)"}`,
      );
    }
    return {
      name: target?.name ?? baseName(resolved.absolutePath),
      relativePath: relative,
      absolutePath: resolved.absolutePath,
    };
  };

  if ("$schema" in value && typeof value.$schema !== "string") {
    problems.push(`/$schema: must be a string, not ${describe(value.$schema)}`);
  }

  // Tags: string keys to string values; the valid ones are kept.
  if ("tags" in value) {
    if (isObject(value.tags)) {
      for (const [key, tag] of Object.entries(value.tags)) {
        // A "__proto__" tag must stay a tag, not become the object's prototype.
        if (typeof tag === "string")
          Object.defineProperty(out.tags, key, { value: tag, enumerable: true, writable: true, configurable: true });
        else problems.push(`${pointer(["tags", key])}: a tag value must be a string, not ${describe(tag)}`);
      }
    } else {
      problems.push(`/tags: must be an object of string values, not ${describe(value.tags)}`);
    }
  }

  // Data model: one relative path.
  if ("datamodel" in value) {
    if (uses.datamodel === "no") {
      problems.push(`/datamodel: a ${label} does not name a data model`);
    } else if (typeof value.datamodel !== "string") {
      problems.push(
        `/datamodel: a ${label} names exactly one data model, as one relative path string, not ${describe(value.datamodel)}`,
      );
    } else {
      out.datamodel = reference(value.datamodel, () => "/datamodel", "datamodel") ?? null;
    }
  } else if (uses.datamodel === "required") {
    problems.push(`/datamodel: missing; a ${label} names exactly one data model`);
  }

  // Themes: one or more, exactly one of them the default.
  if ("themes" in value) {
    if (!uses.themes) {
      problems.push(`/themes: a ${label} does not name themes`);
    } else if (!Array.isArray(value.themes) || value.themes.length === 0) {
      problems.push(`/themes: must be a non-empty array of {"path": ..., "default": true|false}`);
    } else {
      const seen = new Set<string>();
      let defaults = 0;
      value.themes.forEach((theme: unknown, i: number) => {
        const where = pointer(["themes", i]);
        if (!isObject(theme)) {
          problems.push(`${where}: a theme is an object {"path": ..., "default": true|false}, not ${describe(theme)}`);
          return;
        }
        if ("default" in theme && typeof theme.default !== "boolean") {
          problems.push(`${where}/default: must be true or false, not ${describe(theme.default)}`);
        }
        const isDefault = theme.default === true;
        if (isDefault) defaults++;
        const entry = reference(theme.path, () => `${where}/path`, "theme");
        if (entry === undefined) return;
        if (seen.has(entry.absolutePath)) {
          problems.push(`${where}/path: theme ${entry.absolutePath} is named twice`);
          return;
        }
        seen.add(entry.absolutePath);
        out.themes.push({ ...entry, isDefault });
      });
      if (defaults !== 1) {
        problems.push(`/themes: exactly one theme must be marked "default": true (found ${defaults})`);
      }
    }
  } else if (uses.themes) {
    problems.push(`/themes: missing; a ${label} names one or more themes, one of them the default`);
  }

  // Type-specific required members.
  if ((type === "template" || type === "contentBlock") && !("body" in value)) {
    problems.push(`/body: missing; a ${label} has a body`);
  }
  if (type === "pluggableObject") {
    const impl = value.implementation;
    if (!isObject(impl)) {
      problems.push(`/implementation: missing or not an object; a pluggable object says how it runs`);
    } else {
      for (const key of ["runtime", "entry"]) {
        if (typeof impl[key] !== "string" || impl[key] === "") {
          problems.push(`/implementation/${key}: must be a non-empty string`);
        }
      }
    }
  }
  if (type === "datamodel" && !isObject(value.fields)) {
    problems.push(`/fields: missing or not an object; a data model lists its fields`);
  }

  // Content blocks and pluggable objects: "$block" and "$plugin" members anywhere in the
  // document but its tags, data model and themes. Iterative, in document order.
  const seenBlocks = new Set<string>();
  const seenPlugins = new Set<string>();
  // A location is kept as a link to its parent and spelled out only for a reference or a problem.
  // Only arrays and objects are stacked: the text of a body (most of its bytes) is never visited.
  type Location = { key: string | number; parent: Location | undefined };
  const spell = (location: Location, last: string): string => {
    const parts: (string | number)[] = [last];
    for (let l: Location | undefined = location; l !== undefined; l = l.parent) parts.push(l.key);
    return pointer(parts.reverse());
  };
  const use = (node: Record<string, unknown>, at: Location, key: string, kind: "contentBlock" | "pluggableObject") => {
    if (!uses.blocks) {
      problems.push(`${spell(at, key)}: a ${label} does not use ${TYPE_LABELS[kind]}s`);
      return;
    }
    const entry = reference(node[key], () => spell(at, key), kind);
    const seen = kind === "contentBlock" ? seenBlocks : seenPlugins;
    if (entry !== undefined && !seen.has(entry.absolutePath)) {
      seen.add(entry.absolutePath);
      (kind === "contentBlock" ? out.contentBlocks : out.pluggableObjects).push(entry);
    }
  };
  const stack: { node: object; at: Location }[] = [];
  const keys = Object.keys(value);
  for (let i = keys.length - 1; i >= 0; i--) {
    const key = keys[i] as string;
    const child = value[key];
    if (typeof child === "object" && child !== null && key !== "tags" && key !== "datamodel" && key !== "themes") {
      stack.push({ node: child, at: { key, parent: undefined } });
    }
  }
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const { node, at } = item;
    if (Array.isArray(node)) {
      for (let i = node.length - 1; i >= 0; i--) {
        const child: unknown = node[i];
        if (typeof child === "object" && child !== null) stack.push({ node: child, at: { key: i, parent: at } });
      }
      continue;
    }
    const record = node as Record<string, unknown>;
    if (BLOCK_KEY in record) use(record, at, BLOCK_KEY, "contentBlock");
    if (PLUGIN_KEY in record) use(record, at, PLUGIN_KEY, "pluggableObject");
    const members = Object.keys(record);
    for (let i = members.length - 1; i >= 0; i--) {
      const key = members[i] as string;
      const child = record[key];
      if (typeof child === "object" && child !== null && key !== BLOCK_KEY && key !== PLUGIN_KEY) {
        stack.push({ node: child, at: { key, parent: at } });
      }
    }
  }
  return out;
}
