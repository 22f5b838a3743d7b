// The MIME type a resource gets when its writer names none: from the extension.
// Trove's own table comes first (the design-resource types of docs/resources.md, and the
// types Trove has always given); every other extension is looked up in the maintained
// mime-db database (through `mime-types`); an unknown one is application/octet-stream.

import { lookup } from "mime-types";

const TROVE_TYPES: Record<string, string> = {
  json: "application/json",
  xml: "application/xml",
  txt: "text/plain",
  md: "text/markdown",
  html: "text/html",
  htm: "text/html",
  css: "text/css",
  js: "text/javascript",
  csv: "text/csv",
  svg: "image/svg+xml",
  png: "image/png",
  jpg: "image/jpeg",
  jpeg: "image/jpeg",
  gif: "image/gif",
  webp: "image/webp",
  pdf: "application/pdf",
  zip: "application/zip",
  ttf: "font/ttf",
  otf: "font/otf",
  woff: "font/woff",
  woff2: "font/woff2",
  // YAML's registered type (RFC 9512); mime-db still maps the extensions to text/yaml.
  yaml: "application/yaml",
  yml: "application/yaml",
  // Design resources (see docs/resources.md).
  template: "application/vnd.trove.template+json",
  block: "application/vnd.trove.content-block+json",
  plugin: "application/vnd.trove.pluggable-object+json",
  datamodel: "application/vnd.trove.data-model+json",
  theme: "application/vnd.trove.theme+json",
};

export const DEFAULT_TYPE = "application/octet-stream";

/**
 * The type for a resource name, from its last extension, in any case. A name without one (or a
 * hidden file such as `.json`, whose whole name is the "extension") is application/octet-stream.
 */
export function typeFromName(name: string): string {
  const dot = name.lastIndexOf(".");
  if (dot <= 0 || dot === name.length - 1) return DEFAULT_TYPE;
  const extension = name.slice(dot + 1).toLowerCase();
  if (Object.hasOwn(TROVE_TYPES, extension)) return TROVE_TYPES[extension] as string;
  // Only the extension is looked up: lookup("json") of a name without a dot would match.
  return lookup(extension) || DEFAULT_TYPE;
}

// RFC 9110 media-type: token "/" token *( OWS ";" OWS parameter ). A quoted-string holds
// no control characters other than tab: a type must be a valid header value and XML text.
const TOKEN = "[!#$%&'*+.^_`|~0-9A-Za-z-]+";
const QUOTED = '"([\\t !#-\\[\\]-~\\x80-\\xff]|\\\\[\\t -~\\x80-\\xff])*"';
const MEDIA_TYPE = new RegExp(`^${TOKEN}/${TOKEN}([ \\t]*;[ \\t]*${TOKEN}=(${TOKEN}|${QUOTED}))*$`);

export function isMediaType(value: string): boolean {
  return value.length <= 255 && MEDIA_TYPE.test(value);
}
