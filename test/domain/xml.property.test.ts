// Properties of the store configuration parsers (src/rest/xml.ts, XML and JSON, then the rules of
// src/domain/store.ts), for any body: bad text, however deep or odd, is a BadRequestError and
// nothing else, and a store configuration the server writes parses back to the same configuration.

import { create } from "@bufbuild/protobuf";
import { StoreSchema } from "@trove/sdk/gen/trove/resources/v2/stores_pb.js";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { BadRequestError } from "../../src/domain/errors.js";
import { resolveStoreConfig } from "../../src/domain/store.js";
import { parseStoreJson, parseStoreXml, storeElement, storesDocument, XML_DECLARATION } from "../../src/rest/xml.js";
import {
  hostileText,
  longText,
  RUNS,
  refusesOnlyWithBadRequest,
  SEED,
  validStoreName,
} from "../support/client-input.js";

const NAMES = ["store", "stores", "store-settings", "setting", "name", "value", "store-features", "feature", "x"];
const HOSTILE_NAMES = ["__proto__", "constructor", "prototype", "hasOwnProperty", "toString", "a:b", "_", "é"];

/** XML-like text: elements nested to any depth, attributes, entities, comments, CDATA and stray markup. */
const xmlish: fc.Arbitrary<string> = fc.letrec<{ node: string }>((tie) => ({
  node: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    hostileText(12),
    fc.constantFrom("&amp;", "&lt;", "&#38;", "&#x26;", "&#0;", "&bogus;", "<!-- c -->", "<![CDATA[<x>]]>", "<?pi x?>"),
    fc
      .tuple(
        fc.constantFrom(...NAMES, ...HOSTILE_NAMES),
        fc.array(fc.tuple(fc.constantFrom("name", "type", "tag", "@x", "__proto__"), hostileText(8)), { maxLength: 3 }),
        fc.array(tie("node"), { maxLength: 4 }),
      )
      .map(
        ([name, attributes, children]) =>
          `<${name}${attributes.map(([k, v]) => ` ${k}="${v}"`).join("")}>${children.join("")}</${name}>`,
      ),
  ),
})).node;

/** Elements nested `depth` deep, closed or left open, with a store element somewhere in the chain. */
const deepXml = fc
  .tuple(fc.integer({ min: 1, max: 5000 }), fc.constantFrom(...NAMES, ...HOSTILE_NAMES), fc.boolean())
  .map(
    ([depth, name, closed]) =>
      `${`<${name}>`.repeat(depth)}<store name="a"/>${closed ? `</${name}>`.repeat(depth) : ""}`,
  );

/** Documents with a DTD: internal, external and parameter entities, and the billion laughs. */
const withDoctype = fc
  .tuple(
    fc.constantFrom(
      '<!DOCTYPE store [<!ENTITY e SYSTEM "file:///etc/passwd">]>',
      '<!DOCTYPE store [<!ENTITY % p SYSTEM "http://127.0.0.1:1/x.dtd"> %p;]>',
      '<!DOCTYPE store [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]>',
      '<!doctype store SYSTEM "http://example.com/store.dtd">',
      "<!DOCTYPE store>",
    ),
    fc.constantFrom("&e;", "&c;&c;&c;&c;", "", "%p;"),
  )
  .map(([doctype, use]) => `${XML_DECLARATION}${doctype}<store name="${use}" type="recursive"/>`);

/** Many entity and character references, up to what a 64 KiB body holds. */
const manyEntities = fc
  .tuple(
    fc.constantFrom("&amp;", "&lt;", "&#65;", "&#x1F600;", "&#0;", "&#xD800;"),
    fc.integer({ min: 1000, max: 13_000 }),
  )
  .map(
    ([entity, n]) =>
      `<store name="a"><store-settings><setting><name>keep-deleted</name><value>${entity.repeat(n)}</value></setting></store-settings></store>`,
  );

describe("parseStoreXml, for any body", () => {
  it("refuses only with a BadRequestError: any text", () => {
    fc.assert(
      fc.property(fc.oneof(hostileText(), longText()), (body) => {
        refusesOnlyWithBadRequest(() => parseStoreXml(body));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("refuses only with a BadRequestError: XML-like text, hostile element names and entities", () => {
    fc.assert(
      fc.property(xmlish, (body) => {
        refusesOnlyWithBadRequest(() => parseStoreXml(body));
        refusesOnlyWithBadRequest(() => parseStoreXml(`${XML_DECLARATION}<stores>${body}</stores>`));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("refuses only with a BadRequestError: deep nesting and DTDs", () => {
    fc.assert(
      fc.property(fc.oneof(deepXml, withDoctype), (body) => {
        refusesOnlyWithBadRequest(() => parseStoreXml(body));
      }),
      { seed: SEED, numRuns: 200 },
    );
  });

  it("refuses only with a BadRequestError: many entity and character references", () => {
    fc.assert(
      fc.property(manyEntities, (body) => {
        refusesOnlyWithBadRequest(() => parseStoreXml(body));
      }),
      { seed: SEED, numRuns: 30 },
    );
    const past = `<store name="a"><store-settings><setting><name>n</name><value>${"&amp;".repeat(100_001)}</value></setting></store-settings></store>`;
    expect(() => parseStoreXml(past)).toThrow(BadRequestError);
  });

  it("what it accepts, the store rules refuse only with a BadRequestError", () => {
    fc.assert(
      fc.property(xmlish, (body) => {
        let parsed: ReturnType<typeof parseStoreXml>;
        try {
          parsed = parseStoreXml(body);
        } catch {
          return;
        }
        refusesOnlyWithBadRequest(() => resolveStoreConfig({ ...parsed, name: parsed.name ?? "" }, undefined, {}));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});

describe("parseStoreJson, for any body", () => {
  const deepJson = fc
    .tuple(fc.integer({ min: 1, max: 10_000 }), fc.constantFrom("[", '{"settings":', '{"a":['))
    .map(([depth, open]) => `${open.repeat(depth)}1`);

  it("refuses only with a BadRequestError: any text, any JSON value, deep nesting", () => {
    fc.assert(
      fc.property(fc.oneof(hostileText(), longText(), fc.json(), deepJson), (body) => {
        refusesOnlyWithBadRequest(() => parseStoreJson(body));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });

  it("refuses only with a BadRequestError: objects with the fields of a store, of any types", () => {
    const field = fc.oneof(fc.jsonValue(), hostileText(8), fc.constant("__proto__"));
    const body = fc.record(
      {
        name: field,
        type: field,
        settings: fc.oneof(
          fc.jsonValue(),
          fc.array(fc.oneof(fc.jsonValue(), fc.record({ name: field, value: field }, { requiredKeys: [] }))),
          fc.dictionary(fc.oneof(hostileText(8), fc.constantFrom("__proto__", "constructor")), field),
        ),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(body, (object) => {
        const text = JSON.stringify(object);
        refusesOnlyWithBadRequest(() => parseStoreJson(text));
        let parsed: ReturnType<typeof parseStoreJson>;
        try {
          parsed = parseStoreJson(text);
        } catch {
          return;
        }
        refusesOnlyWithBadRequest(() => resolveStoreConfig({ ...parsed, name: parsed.name ?? "" }, undefined, {}));
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});

describe("a store configuration the server writes parses back to itself", () => {
  /** Text a setting can hold in XML 1.0: no control characters but tab, LF and CR; no U+FFFE, U+FFFF. */
  const settingText = fc
    .string({ unit: "binary", maxLength: 30 })
    .map((s) => s.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\ufffe\uffff]/g, "?"));
  const config = fc.record({
    name: validStoreName,
    type: fc.constantFrom("recursive", "snapshot"),
    keepDeleted: fc.tuple(fc.integer({ min: 0, max: 999_999 }), fc.constantFrom("", "ms", "s", "m", "h", "d")),
    reported: fc.uniqueArray(
      fc.tuple(
        fc.constantFrom("filesystem-location", "database-driver", "database-connection-url", "database-username"),
        settingText,
      ),
      { selector: ([name]) => name, maxLength: 4 },
    ),
  });

  it("XML: storeElement, alone or in a stores document, then parseStoreXml and the store rules", () => {
    fc.assert(
      fc.property(config, fc.boolean(), ({ name, type, keepDeleted, reported }, inList) => {
        const settings = [
          { name: "keep-deleted", value: `${keepDeleted[0]}${keepDeleted[1]}` },
          ...reported.map(([n, value]) => ({ name: n, value })),
        ];
        const store = create(StoreSchema, { name, type, tag: "t", features: ["sync"], settings });
        const xml = inList ? storesDocument([store]) : `${XML_DECLARATION}${storeElement(store)}\n`;
        const parsed = parseStoreXml(xml);
        expect(parsed).toEqual({ name, type, settings });
        const resolved = resolveStoreConfig(
          { name, type: parsed.type, settings: parsed.settings },
          undefined,
          Object.fromEntries(reported),
        );
        expect(resolved).toEqual({
          name,
          type,
          settings: { "keep-deleted": settings[0]?.value, "keep-versions": "30d" },
        });
      }),
      { seed: SEED, numRuns: 500 },
    );
  });

  it("JSON: name, type and settings as an object or a list parse back to themselves", () => {
    fc.assert(
      fc.property(config, fc.boolean(), ({ name, type, keepDeleted, reported }, asList) => {
        const settings = [
          { name: "keep-deleted", value: `${keepDeleted[0]}${keepDeleted[1]}` },
          ...reported.map(([n, value]) => ({ name: n, value })),
        ];
        const body = JSON.stringify({
          name,
          type,
          settings: asList ? settings : Object.fromEntries(settings.map((s) => [s.name, s.value])),
        });
        expect(parseStoreJson(body)).toEqual({ name, type, settings });
      }),
      { seed: SEED, numRuns: RUNS },
    );
  });
});
