// A listing's `resource` elements are written directly instead of through XMLBuilder (issue 14,
// listing 1,000 entries): the text must stay byte for byte what the builder made, for any name,
// tag, type, digest, blob, access list and flag, markup characters and non-ASCII included.

import type { Resource } from "@trove/sdk/gen/trove/resources/v2/resources_pb.js";
import fc from "fast-check";
import { XMLBuilder, XMLParser } from "fast-xml-parser";
import { describe, expect, it } from "vitest";
import { type ListingOptions, resourceElement } from "../../src/rest/xml.js";

// The builder and the object resourceElement built before issue 14's change, kept as the reference.
const builder = new XMLBuilder({
  ignoreAttributes: false,
  attributeNamePrefix: "@",
  suppressEmptyNode: true,
  suppressBooleanAttributes: false,
  format: false,
});

function builtElement(r: Resource, options: ListingOptions): string {
  const name = options.base === "" ? r.path : r.path.slice(options.base.length + 1);
  const a: Record<string, string> = { "@name": name, "@tag": r.tag, "@type": r.directory ? "" : r.type };
  if (options.includeAccess) a["@access"] = r.access.join(",");
  if (r.deleted) a["@deleted"] = "true";
  if (r.directory) a["@directory"] = "true";
  if (!r.directory) a["@size"] = String(r.size);
  a["@last-modified"] = new Date(Number(r.lastModifiedMillis)).toISOString();
  a["@md5"] = r.directory ? "" : r.md5;
  if (options.includeBlob && !r.directory && r.blob !== "") a["@blob"] = r.blob;
  return builder.build({ resource: a }) as string;
}

const text = fc.oneof(
  fc.string({ unit: fc.constantFrom("a", "&", "<", ">", "'", '"', ";", " ", "\t", "é", "𝄞", "=", "/") }),
  fc.string({ unit: "grapheme" }),
  fc.string({ unit: "binary" }),
);

const resource = fc
  .record({
    base: fc.constantFrom("", "dir", "a/b"),
    name: text,
    directory: fc.boolean(),
    deleted: fc.boolean(),
    tag: text,
    type: text,
    size: fc.bigInt({ min: 0n, max: 2n ** 62n }),
    md5: text,
    blob: fc.oneof(fc.constant(""), text),
    modified: fc.integer({ min: 0, max: 8_640_000_000_000_000 }),
    access: fc.array(fc.constantFrom("read", "write", "delete", "a&b", '"q"')),
  })
  .map(({ base, name, modified, ...r }) => ({
    base,
    resource: {
      $typeName: "trove.resources.v2.Resource",
      store: "home",
      path: base === "" ? name : `${base}/${name}`,
      name,
      createdMillis: 0n,
      lastModifiedMillis: BigInt(modified),
      eventId: 1n,
      ...r,
    } as Resource,
  }));

describe("listing XML written directly (issue 14: list 1,000 entries at least at Apache's rate)", () => {
  it("each resource element is byte for byte what XMLBuilder made, for any contents", () => {
    fc.assert(
      fc.property(resource, fc.boolean(), fc.boolean(), ({ base, resource: r }, includeAccess, includeBlob) => {
        const options = { base, includeAccess, includeBlob };
        expect(resourceElement(r, options)).toBe(builtElement(r, options));
      }),
      { numRuns: 2000 },
    );
  });

  it("markup characters in a name are escaped and read back as written", () => {
    const r = {
      $typeName: "trove.resources.v2.Resource",
      store: "home",
      path: `a<b>&"c'.txt`,
      name: `a<b>&"c'.txt`,
      directory: false,
      deleted: false,
      tag: "t1",
      type: "text/plain",
      size: 3n,
      md5: "abc",
      blob: "",
      createdMillis: 0n,
      lastModifiedMillis: 0n,
      eventId: 1n,
      access: [],
    } as Resource;
    const xml = resourceElement(r, { base: "", includeAccess: false, includeBlob: false });
    expect(xml).toBe(
      '<resource name="a&lt;b&gt;&amp;&quot;c&apos;.txt" tag="t1" type="text/plain" size="3" last-modified="1970-01-01T00:00:00.000Z" md5="abc"/>',
    );
    const parsed = new XMLParser({ ignoreAttributes: false, attributeNamePrefix: "" }).parse(xml);
    expect(parsed.resource.name).toBe(`a<b>&"c'.txt`);
  });
});
