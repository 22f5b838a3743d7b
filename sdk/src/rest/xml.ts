// The REST v2 XML documents, parsed into typed values with fast-xml-parser:
// directory listings (`resources`) and store listings (`stores`, `store`).

import { XMLParser } from "fast-xml-parser";

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

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: "@_",
  parseAttributeValue: false,
  parseTagValue: false,
  trimValues: false,
  isArray: (name) => name === "resource" || name === "store" || name === "feature" || name === "setting",
});

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
  const doc = parser.parse(xml) as Node;
  if (!("resources" in doc)) throw new Error("not a directory listing: no resources element");
  return children(doc.resources, "resource").map((r) => {
    const access = attr(r, "access");
    const size = attr(r, "size");
    const blob = attr(r, "blob");
    const entry: ListingEntry = {
      name: attr(r, "name") ?? "",
      tag: attr(r, "tag") ?? "",
      type: attr(r, "type") ?? "",
      deleted: attr(r, "deleted") === "true",
      directory: attr(r, "directory") === "true",
      lastModified: new Date(attr(r, "last-modified") ?? 0),
      md5: attr(r, "md5") ?? "",
    };
    if (access !== undefined) entry.access = access === "" ? [] : access.split(",");
    if (size !== undefined) entry.size = Number(size);
    if (blob !== undefined) entry.blob = blob;
    return entry;
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
  const doc = parser.parse(xml) as Node;
  if ("stores" in doc) return children(doc.stores, "store").map(storeOf);
  if ("store" in doc) return children(doc, "store").map(storeOf);
  throw new Error("not a store listing: no stores or store element");
}
