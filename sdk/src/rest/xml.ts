// The REST v2 XML documents, parsed into typed values with fast-xml-parser: directory listings
// (`resources`), store listings (`stores`, `store`), and history's `versions` and `restore`
// (docs/history.md).

import { createRequire } from "node:module";
import type { XMLParser } from "fast-xml-parser";

/** One entry of a directory listing. */
export interface ListingEntry {
  /** Name, or with `recursive`, the path relative to the listed directory (`sub/a.txt`). */
  name: string;
  /** The entry's tag (its ETag, unquoted). */
  tag: string;
  /** MIME type of a file; "" for a directory. */
  type: string;
  /** Only with `includeAccess`: what the caller may do to the entry. */
  access?: string[];
  /** Only with `includeDeleted`: a recently deleted entry (a tombstone). */
  deleted: boolean;
  directory: boolean;
  /** Size in bytes of a file; undefined for a directory. */
  size?: number;
  lastModified: Date;
  /** Base64 MD5 of a file; "" for a directory. */
  md5: string;
  /** Only with `includeBlobUuid`: the blob UUID of a file. */
  blob?: string;
}

export interface StoreInfo {
  name: string;
  type: string;
  /** Tag of the store's root directory. */
  tag: string;
  deleted: boolean;
  /** e.g. ["sync", "sync-recursive"] */
  features: string[];
  /** name -> value, e.g. { "keep-deleted": "7d", ... } */
  settings: Record<string, string>;
}

/** One state of a resource, as `GET {resource}?versions=true` lists them (newest first). */
export interface VersionEntry {
  /** The state's tag: `getVersion` and `restore` take it. */
  tag: string;
  /** Size in bytes (0 for a deletion). */
  size: number;
  /** Base64 MD5 of the contents. */
  md5: string;
  type: string;
  lastModified: Date;
  /** The id of the event that made this state. */
  event: number;
  /** "modify": contents written; "delete": the state is a deletion (a tombstone). */
  operation: "modify" | "delete";
  /** The subject of the token that made the change; "" when not known (made before history). */
  user: string;
  /** The live state of the path. */
  current: boolean;
  /** Only with `includeBlobUuid`: the blob UUID of the state. */
  blob?: string;
}

/** One change of a subtree restore, in the order made. */
export interface SubtreeChange {
  /** The path from the store's root (no leading /). */
  path: string;
  operation: "create" | "modify" | "delete";
  directory: boolean;
}

/** What `PUT {directory}/?restore-as-of=` answered: the changes made, or with `dryRun` the ones it would make. */
export interface SubtreeRestore {
  store: string;
  /** The directory restored ("" for the store's root). */
  path: string;
  /** The event the moment stands for. */
  asOf: number;
  dryRun: boolean;
  changes: SubtreeChange[];
}

const ELEMENTS_THAT_REPEAT = new Set(["resource", "store", "feature", "setting", "version", "change"]);

let documentParser: XMLParser | undefined;

/**
 * fast-xml-parser, loaded when a store list, versions or restore document is first parsed: the
 * listings push, pull and mirror read do not need it, and loading it adds about 8 MiB to the
 * process (issue 31: the client's peak memory).
 */
function parser(): XMLParser {
  if (documentParser === undefined) {
    const load = createRequire(import.meta.url);
    const { XMLParser: Parser } = load("fast-xml-parser") as typeof import("fast-xml-parser");
    documentParser = new Parser({
      ignoreAttributes: false,
      attributeNamePrefix: "@_",
      parseAttributeValue: false,
      parseTagValue: false,
      trimValues: false,
      isArray: (name, _path, _leaf, isAttribute) => isAttribute !== true && ELEMENTS_THAT_REPEAT.has(name),
    });
  }
  return documentParser;
}

type Node = Record<string, unknown>;

function attr(node: Node, name: string): string | undefined {
  const v = node[`@_${name}`];
  return v === undefined ? undefined : String(v);
}

function children(node: unknown, name: string): Node[] {
  if (node === null || typeof node !== "object") return [];
  const v = (node as Node)[name];
  return Array.isArray(v) ? (v as Node[]) : [];
}

function textOf(v: unknown): string {
  if (v === undefined || v === null) return "";
  if (typeof v === "object") return String((v as Node)["#text"] ?? "");
  return String(v);
}

export function parseListing(xml: string): ListingEntry[] {
  const reader = new ListingReader();
  const entries = reader.push(xml);
  reader.end();
  return entries;
}

/** An element (or the text before one) longer than this is not a listing's: refused, not buffered. */
const MAX_ELEMENT_CHARS = 1024 * 1024;

/**
 * A directory listing read as it arrives, chunk by chunk: `push` gives the entries whose elements
 * are complete, `end` checks that the document was complete (its `resources` element closed), so
 * a listing cut short is an error rather than a shorter listing. Holds only the text of one
 * unfinished element (at most MAX_ELEMENT_CHARS), whatever the listing's size (issue 31).
 */
export class ListingReader {
  private rest = "";
  private opened = false;
  private closed = false;

  push(text: string): ListingEntry[] {
    let xml = this.rest + text;
    if (!this.opened) {
      const root = /<resources([\s>]|\/>)/.exec(xml);
      if (root === null) {
        if (xml.length > MAX_ELEMENT_CHARS) throw new Error("not a directory listing: no resources element");
        this.rest = xml;
        return [];
      }
      this.opened = true;
      if (root[1] === "/>") this.closed = true;
      xml = xml.slice(root.index + root[0].length);
    }
    const entries: ListingEntry[] = [];
    let end = 0;
    RESOURCE_ELEMENT.lastIndex = 0;
    for (let m = RESOURCE_ELEMENT.exec(xml); m !== null; m = RESOURCE_ELEMENT.exec(xml)) {
      entries.push(entryOf(m[1] ?? ""));
      end = RESOURCE_ELEMENT.lastIndex;
    }
    // What follows the last whole element: kept from its last "<" (an element begun), if any.
    const tail = xml.slice(end);
    if (/<\/resources\s*>/.test(tail)) this.closed = true;
    const open = tail.lastIndexOf("<");
    this.rest = open < 0 ? "" : tail.slice(open);
    if (this.rest.length > MAX_ELEMENT_CHARS) throw new Error("not a directory listing: an element of over 1 MiB");
    return entries;
  }

  /** The document ended: it must have been a whole listing. */
  end(): void {
    if (!this.opened) throw new Error("not a directory listing: no resources element");
    if (!this.closed && !/<\/resources\s*>/.test(this.rest)) {
      throw new Error("the directory listing ended before its end (no </resources>): it was cut short");
    }
  }
}

function entryOf(attributes: string): ListingEntry {
  const attrs = new Map<string, string>();
  for (const a of attributes.matchAll(ATTRIBUTE)) attrs.set(a[1] as string, unescapeXml(a[2] ?? a[3] ?? ""));
  const access = attrs.get("access");
  const size = attrs.get("size");
  const blob = attrs.get("blob");
  const entry: ListingEntry = {
    name: attrs.get("name") ?? "",
    tag: attrs.get("tag") ?? "",
    type: attrs.get("type") ?? "",
    deleted: attrs.get("deleted") === "true",
    directory: attrs.get("directory") === "true",
    lastModified: new Date(attrs.get("last-modified") ?? 0),
    md5: attrs.get("md5") ?? "",
  };
  if (access !== undefined) entry.access = access === "" ? [] : access.split(",");
  if (size !== undefined) entry.size = Number(size);
  if (blob !== undefined) entry.blob = blob;
  return entry;
}

/**
 * A `resource` element (self-closing, as the server writes it, or not: its end tag is skipped):
 * its attributes, whose quoted values may hold any character but their quote. Read directly, not
 * through fast-xml-parser's document tree: a listing of 100,000 entries is a 15 MiB text whose
 * tree took 28 MiB more, and 2.1 s to parse against 0.4 s now (docs/benchmarks.md, issue 31,
 * session 13).
 */
const RESOURCE_ELEMENT = /<resource((?:\s+[^\s=/>]+\s*=\s*(?:"[^"]*"|'[^']*'))*)\s*\/?>/g;
const ATTRIBUTE = /([^\s=]+)\s*=\s*(?:"([^"]*)"|'([^']*)')/g;
const NAMED_ENTITIES: Record<string, string> = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };

/** An attribute's value with XML's predefined entities and character references decoded. */
function unescapeXml(value: string): string {
  if (!value.includes("&")) return value;
  return value.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (whole, ref: string) => {
    if (ref.startsWith("#")) {
      const code = ref[1] === "x" ? Number.parseInt(ref.slice(2), 16) : Number(ref.slice(1));
      return code <= 0x10ffff ? String.fromCodePoint(code) : whole;
    }
    return NAMED_ENTITIES[ref] ?? whole;
  });
}

function storeOf(s: Node): StoreInfo {
  const settings: Record<string, string> = {};
  for (const setting of children(s["store-settings"], "setting")) {
    settings[textOf(setting.name)] = textOf(setting.value);
  }
  return {
    name: attr(s, "name") ?? "",
    type: attr(s, "type") ?? "",
    tag: attr(s, "tag") ?? "",
    deleted: attr(s, "deleted") === "true",
    features: children(s["store-features"], "feature").map(textOf),
    settings,
  };
}

/** A `stores` document, or a single `store` element. */
export function parseStores(xml: string): StoreInfo[] {
  const doc = parser().parse(xml) as Node;
  if ("stores" in doc) return children(doc.stores, "store").map(storeOf);
  if ("store" in doc) return children(doc, "store").map(storeOf);
  throw new Error("not a store listing: no stores or store element");
}

/** A `versions` document: the states of one resource, newest first. */
export function parseVersions(xml: string): VersionEntry[] {
  const doc = parser().parse(xml) as Node;
  if (!("versions" in doc)) throw new Error("not a versions document: no versions element");
  return children(doc.versions, "version").map((v) => {
    const blob = attr(v, "blob");
    const entry: VersionEntry = {
      tag: attr(v, "tag") ?? "",
      size: Number(attr(v, "size") ?? 0),
      md5: attr(v, "md5") ?? "",
      type: attr(v, "type") ?? "",
      lastModified: new Date(attr(v, "last-modified") ?? 0),
      event: Number(attr(v, "event") ?? 0),
      operation: attr(v, "operation") === "delete" ? "delete" : "modify",
      user: attr(v, "user") ?? "",
      current: attr(v, "current") === "true",
    };
    if (blob !== undefined) entry.blob = blob;
    return entry;
  });
}

const OPERATIONS: ReadonlySet<string> = new Set(["create", "modify", "delete"]);

/** A `restore` document: what a subtree restore changed (or would change). */
export function parseRestore(xml: string): SubtreeRestore {
  const doc = parser().parse(xml) as Node;
  const restore = doc.restore;
  if (restore === null || typeof restore !== "object") throw new Error("not a restore document: no restore element");
  const r = restore as Node;
  return {
    store: attr(r, "store") ?? "",
    path: attr(r, "path") ?? "",
    asOf: Number(attr(r, "as-of") ?? 0),
    dryRun: attr(r, "dry-run") === "true",
    changes: children(r, "change").map((c) => {
      const operation = attr(c, "operation") ?? "";
      if (!OPERATIONS.has(operation)) throw new Error(`a restore change with operation ${JSON.stringify(operation)}`);
      return {
        path: attr(c, "path") ?? "",
        operation: operation as SubtreeChange["operation"],
        directory: attr(c, "directory") === "true",
      };
    }),
  };
}
