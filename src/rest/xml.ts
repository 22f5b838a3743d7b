// The spec's XML formats: directory listings, store listings, and the store
// configuration a client sends (in the listing's own shape).

import type { Resource, RestoreChange, Version } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import type { Store } from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import { XMLBuilder, XMLParser, XMLValidator } from "fast-xml-parser";
import { BadRequestError } from "../domain/errors.js";
import { jsonDepth, MAX_JSON_DEPTH, quoteValue } from "../domain/json-body.js";

export const XML_TYPE = "application/xml; charset=utf-8";
export const XML_DECLARATION = '<?xml version="1.0" encoding="UTF-8"?>\n';

const builder = new XMLBuilder({
  ignoreAttributes: false,
  attributeNamePrefix: "@",
  suppressEmptyNode: true,
  suppressBooleanAttributes: false,
  format: false,
});

export interface ListingOptions {
  /** Path of the listed directory: entry names are relative to it. */
  base: string;
  includeAccess: boolean;
  includeBlob: boolean;
}

/** What XMLBuilder writes for each of these characters in an attribute's value (and nothing else). */
const ATTRIBUTE_ESCAPES: Record<string, string> = {
  "&": "&amp;",
  ">": "&gt;",
  "<": "&lt;",
  "'": "&apos;",
  '"': "&quot;",
};
const NEEDS_ESCAPE = /[&<>'"]/;

/** An attribute's value as XMLBuilder (with this module's options) writes it. */
function attributeValue(value: string): string {
  return NEEDS_ESCAPE.test(value) ? value.replace(/[&<>'"]/g, (c) => ATTRIBUTE_ESCAPES[c] as string) : value;
}

/**
 * One `resource` element of a directory listing: the text XMLBuilder made of
 * `{ resource: { "@name": ..., ... } }` with this module's options, written out directly (the
 * builder's generic walk was most of the time of a listing of 1,000 entries; issue 14). The
 * attributes' order, escaping and the empty element are the builder's, byte for byte
 * (test/rest/listing-xml.test.ts compares the two).
 */
export function resourceElement(r: Resource, options: ListingOptions): string {
  const name = options.base === "" ? r.path : r.path.slice(options.base.length + 1);
  let s = `<resource name="${attributeValue(name)}" tag="${attributeValue(r.tag)}" type="${r.directory ? "" : attributeValue(r.type)}"`;
  if (options.includeAccess) s += ` access="${attributeValue(r.access.join(","))}"`;
  if (r.deleted) s += ' deleted="true"';
  if (r.directory) s += ' directory="true"';
  else s += ` size="${r.size}"`;
  s += ` last-modified="${new Date(Number(r.lastModifiedMillis)).toISOString()}" md5="${r.directory ? "" : attributeValue(r.md5)}"`;
  if (options.includeBlob && !r.directory && r.blob !== "") s += ` blob="${attributeValue(r.blob)}"`;
  return `${s}/>`;
}

export function storeElement(s: Store): string {
  const element = {
    "@name": s.name,
    "@type": s.type,
    "@tag": s.tag,
    ...(s.deleted ? { "@deleted": "true" } : {}),
    "@directory": "true",
    "database-settings": "",
    "store-features": { feature: s.features },
    "store-settings": { setting: s.settings.map((x) => ({ name: x.name, value: x.value })) },
  };
  // suppressEmptyNode would drop empty values; keep <value></value> for them. A CR in a value is
  // written as a reference: a parser reads a literal one as LF (XML 1.0, 2.11).
  return (builder.build({ store: element }) as string).replace(/<value\/>/g, "<value></value>").replace(/\r/g, "&#13;");
}

export function storesDocument(stores: readonly Store[]): string {
  return `${XML_DECLARATION}<stores>${stores.map(storeElement).join("")}</stores>\n`;
}

/** Deepest element nesting accepted in a store configuration (it needs 5). */
export const MAX_XML_DEPTH = 100;
/** Most characters that entity references may expand to in one body. */
export const MAX_XML_EXPANSION = 100_000;

const parser = new XMLParser({
  ignoreAttributes: false,
  maxNestedTags: MAX_XML_DEPTH,
  // No DTD reaches the parser (parseStoreXml refuses it); these bound the predefined entities.
  processEntities: { enabled: true, maxExpandedLength: MAX_XML_EXPANSION, maxTotalExpansions: MAX_XML_EXPANSION },
  // Character references (&#13;, &#x26;) are XML and must be decoded; fast-xml-parser ties them to
  // this option, which also accepts HTML's named entities (harmless in a store configuration).
  htmlEntities: true,
  attributeNamePrefix: "@",
  parseTagValue: false,
  parseAttributeValue: false,
  // A setting's value is kept as written: a listing sent back must compare equal to the server's
  // own values, spaces included. Names and the store's attributes are trimmed where they are read.
  trimValues: false,
  isArray: (name) => name === "setting" || name === "feature" || name === "store",
});

export interface StoreBody {
  name?: string;
  type?: string;
  settings: Array<{ name: string; value: string }>;
}

type XmlNode = Record<string, unknown>;

function text(v: unknown, what: string): string {
  if (v === undefined || v === "") return "";
  if (typeof v === "string") return v;
  throw new BadRequestError(`${what} must be text`);
}

/** Element names that would reach an object's prototype if a parser ever used them as keys. */
const RESERVED_NAMES = /<\/?\s*(__proto__|constructor|prototype)[\s/>]/;

/**
 * Parses a store configuration sent as XML: a `store` element, alone or inside `stores`.
 * Every way the text can be wrong is a BadRequestError: a DOCTYPE (no DTD, so no external,
 * parameter or expanding entities), nesting deeper than MAX_XML_DEPTH, reserved element names,
 * malformed XML, and anything else the parser refuses.
 */
export function parseStoreXml(body: string): StoreBody {
  if (/<!DOCTYPE/i.test(body)) {
    throw new BadRequestError("a DOCTYPE is not accepted in a store configuration (no DTD, no entity declarations)");
  }
  const reserved = RESERVED_NAMES.exec(body);
  if (reserved) throw new BadRequestError(`an element may not be named ${reserved[1]}`);
  const depth = xmlDepth(body);
  if (depth > MAX_XML_DEPTH) {
    throw new BadRequestError(`the XML is nested ${depth} elements deep; at most ${MAX_XML_DEPTH} are accepted`);
  }
  let doc: XmlNode;
  try {
    const valid = XMLValidator.validate(body);
    if (valid !== true) {
      throw new BadRequestError(`malformed XML at line ${valid.err.line}, column ${valid.err.col}: ${valid.err.msg}`);
    }
    doc = parser.parse(body) as XmlNode;
  } catch (err) {
    if (err instanceof BadRequestError) throw err;
    // The parser's own refusals (limits, names, entities) are about the text, not the server.
    throw new BadRequestError(`the XML is not accepted: ${(err as Error).message}`);
  }
  return storeFromDocument(doc);
}

/**
 * The deepest element nesting of XML text, counted without parsing: `<name` opens, `</` and
 * `/>` close; comments, CDATA, declarations and processing instructions are skipped. Only an
 * upper bound's worth of precision is needed: it keeps deep text away from the parser.
 */
export function xmlDepth(text: string): number {
  let depth = 0;
  let deepest = 0;
  let i = 0;
  while (true) {
    i = text.indexOf("<", i);
    if (i < 0 || i + 1 >= text.length) return deepest;
    const next = text[i + 1];
    if (text.startsWith("<!--", i)) {
      const end = text.indexOf("-->", i + 4);
      if (end < 0) return deepest;
      i = end + 3;
    } else if (text.startsWith("<![CDATA[", i)) {
      const end = text.indexOf("]]>", i + 9);
      if (end < 0) return deepest;
      i = end + 3;
    } else if (next === "?" || next === "!") {
      i += 2;
    } else if (next === "/") {
      depth--;
      i += 2;
    } else {
      const end = text.indexOf(">", i + 1);
      if (end < 0) return deepest;
      if (text[end - 1] !== "/") {
        depth++;
        if (depth > deepest) deepest = depth;
      }
      i = end + 1;
    }
  }
}

function storeFromDocument(doc: XmlNode): StoreBody {
  let stores = doc.store as XmlNode[] | undefined;
  if (!stores && doc.stores && typeof doc.stores === "object") stores = (doc.stores as XmlNode).store as XmlNode[];
  if (stores?.length !== 1 || typeof stores[0] !== "object") {
    throw new BadRequestError("the XML body must hold exactly one store element");
  }
  const store = stores[0] as XmlNode;
  const settingsNode = store["store-settings"];
  const settings: StoreBody["settings"] = [];
  if (settingsNode && typeof settingsNode === "object") {
    for (const s of ((settingsNode as XmlNode).setting as XmlNode[] | undefined) ?? []) {
      if (typeof s !== "object" || s === null) throw new BadRequestError("a setting needs a name and a value element");
      const name = text(s.name, "setting name").trim();
      if (name === "") throw new BadRequestError("a setting needs a name element");
      settings.push({ name, value: text(s.value, `value of setting ${name}`) });
    }
  }
  return {
    name: text(store["@name"], "store@name").trim(),
    type: text(store["@type"], "store@type").trim(),
    settings,
  };
}

/** Parses a store configuration sent as JSON: {"name", "type", "settings": {name: value} | [{name, value}]}. */
export function parseStoreJson(body: string): StoreBody {
  const depth = jsonDepth(body);
  if (depth > MAX_JSON_DEPTH) {
    throw new BadRequestError(`the JSON is nested ${depth} levels deep; at most ${MAX_JSON_DEPTH} are accepted`);
  }
  let doc: unknown;
  try {
    doc = JSON.parse(body);
  } catch (err) {
    throw new BadRequestError(`malformed JSON: ${(err as Error).message}`);
  }
  if (typeof doc !== "object" || doc === null || Array.isArray(doc))
    throw new BadRequestError("the JSON body must be an object");
  const o = doc as Record<string, unknown>;
  for (const key of Object.keys(o)) {
    if (!["name", "type", "settings"].includes(key)) throw new BadRequestError(`unknown field ${quoteValue(key)}`);
  }
  const str = (v: unknown, what: string) => {
    if (v === undefined) return undefined;
    if (typeof v !== "string") throw new BadRequestError(`${what} must be a string`);
    return v;
  };
  const settings: StoreBody["settings"] = [];
  if (Array.isArray(o.settings)) {
    for (const s of o.settings) {
      const e = s as Record<string, unknown>;
      settings.push({ name: str(e?.name, "setting name") ?? "", value: str(e?.value, "setting value") ?? "" });
    }
  } else if (o.settings !== undefined) {
    if (typeof o.settings !== "object" || o.settings === null) throw new BadRequestError("settings must be an object");
    for (const [name, value] of Object.entries(o.settings))
      settings.push({ name, value: str(value, `setting ${name}`) ?? "" });
  }
  return { name: str(o.name, "name"), type: str(o.type, "type"), settings };
}

/** One `version` element of a resource's versions (docs/history.md). */
export function versionElement(v: Version, includeBlob: boolean): string {
  const r = v.resource;
  if (!r) return "";
  let s = `<version tag="${attributeValue(r.tag)}" size="${r.size}" md5="${attributeValue(r.md5)}" type="${attributeValue(r.type)}"`;
  s += ` last-modified="${new Date(Number(r.lastModifiedMillis)).toISOString()}" event="${r.eventId}"`;
  s += ` operation="${v.operation}" user="${attributeValue(v.user)}"`;
  if (v.current) s += ' current="true"';
  if (includeBlob && r.blob !== "") s += ` blob="${attributeValue(r.blob)}"`;
  return `${s}/>`;
}

/** The opening tag of a versions document. */
export function versionsStart(store: string, path: string): string {
  return `${XML_DECLARATION}<versions store="${attributeValue(store)}" path="${attributeValue(path)}">`;
}

/** What a subtree restore changed, or would change with dry-run (docs/history.md). */
export function restoreDocument(
  store: string,
  path: string,
  asOf: bigint,
  dryRun: boolean,
  changes: readonly RestoreChange[],
): string {
  const items = changes
    .map(
      (c) =>
        `<change path="${attributeValue(c.path)}" operation="${c.operation}" directory="${c.directory ? "true" : "false"}"/>`,
    )
    .join("");
  return `${XML_DECLARATION}<restore store="${attributeValue(store)}" path="${attributeValue(path)}" as-of="${asOf}" dry-run="${dryRun}" changes="${changes.length}">${items}</restore>\n`;
}
