// The design-resource format (docs/resources.md): type by extension, references anywhere in
// a body resolved against the referring resource, tags, and the problems of bad documents.

import { describe, expect, it } from "vitest";
import { BadRequestError } from "../../src/domain/errors.js";
import {
  createResourceFormat,
  DEFAULT_FORMAT,
  parseDesignResource,
  resolveReference,
} from "../../src/insights/index.js";

const TEMPLATE = "/templates/letters/reminder.template";

function template(extra: Record<string, unknown> = {}) {
  return {
    datamodel: "../../datamodels/invoice.datamodel",
    themes: [{ path: "../../themes/corporate.theme", default: true }],
    body: {},
    ...extra,
  };
}

describe("type by file extension", () => {
  it("maps .template, .block, .plugin, .datamodel and .theme by default, in any case", () => {
    expect(DEFAULT_FORMAT.classify("/a/invoice.template")).toEqual({
      type: "template",
      name: "invoice",
      extension: "template",
    });
    expect(DEFAULT_FORMAT.classify("footer.block")?.type).toBe("contentBlock");
    expect(DEFAULT_FORMAT.classify("qr.plugin")?.type).toBe("pluggableObject");
    expect(DEFAULT_FORMAT.classify("customer.datamodel")?.type).toBe("datamodel");
    expect(DEFAULT_FORMAT.classify("Brand.THEME")).toEqual({ type: "theme", name: "Brand", extension: "THEME" });
  });

  it("leaves out files that are not design resources", () => {
    for (const name of ["logo.png", "README.md", "invoice.template.bak", ".template", "template", "a.json"]) {
      expect(DEFAULT_FORMAT.classify(name)).toBeUndefined();
    }
  });

  it("is configurable: add, remap and remove extensions; the longest extension wins", () => {
    const format = createResourceFormat({
      extensions: { ".tpl": "template", "block.json": "contentBlock", json: "theme", plugin: null },
    });
    expect(format.classify("a.tpl")?.type).toBe("template");
    expect(format.classify("a.template")?.type).toBe("template");
    expect(format.classify("footer.block.json")).toEqual({
      type: "contentBlock",
      name: "footer",
      extension: "block.json",
    });
    expect(format.classify("dark.json")?.type).toBe("theme");
    expect(format.classify("qr.plugin")).toBeUndefined();
    expect(format.extensionsOf("template")).toEqual(["template", "tpl"]);
  });

  it("replaceDefaults starts from an empty map", () => {
    const format = createResourceFormat({ replaceDefaults: true, extensions: { tpl: "template" } });
    expect(format.classify("a.template")).toBeUndefined();
    expect(format.extensions).toEqual({ tpl: "template" });
  });

  it("refuses a bad extension or an unknown type with a clear error", () => {
    expect(() => createResourceFormat({ extensions: { "a b": "template" } })).toThrow(BadRequestError);
    expect(() => createResourceFormat({ extensions: { x: "layout" as never } })).toThrow(
      'unknown design-resource type "layout" for extension "x": use one of template, contentBlock, pluggableObject, datamodel, theme',
    );
  });
});

describe("references are paths relative to the referring resource", () => {
  it("resolves ./ and ../ against the referring resource's directory", () => {
    expect(resolveReference(TEMPLATE, "../../blocks/footer.block")).toEqual({
      ok: true,
      absolutePath: "/blocks/footer.block",
    });
    expect(resolveReference(TEMPLATE, "footer.block")).toEqual({
      ok: true,
      absolutePath: "/templates/letters/footer.block",
    });
    expect(resolveReference(TEMPLATE, "./parts/../parts/a.block")).toEqual({
      ok: true,
      absolutePath: "/templates/letters/parts/a.block",
    });
    expect(resolveReference("/top.template", "b.block")).toEqual({ ok: true, absolutePath: "/b.block" });
  });

  it("refuses absolute paths, paths above the environment, empty segments and directories", () => {
    expect(resolveReference(TEMPLATE, "/blocks/footer.block")).toEqual({
      ok: false,
      reason: "starts with '/': references are relative to the referring resource",
    });
    expect(resolveReference(TEMPLATE, "../../../x.block")).toEqual({
      ok: false,
      reason: "goes above the top of the environment",
    });
    expect(resolveReference(TEMPLATE, "a//b.block")).toMatchObject({ ok: false });
    expect(resolveReference(TEMPLATE, "blocks/")).toMatchObject({ ok: false });
    expect(resolveReference(TEMPLATE, "")).toEqual({ ok: false, reason: "is empty" });
  });
});

describe("a template", () => {
  it("names one data model, themes with one default, and uses blocks and plugins anywhere in its body", () => {
    const content = parseDesignResource(
      JSON.stringify(
        template({
          tags: { authors: "Lena Vogt", status: "approved" },
          themes: [
            { path: "../../themes/corporate.theme", default: true },
            { path: "../../themes/print.theme", default: false },
            { path: "../../themes/email.theme" },
          ],
          body: {
            header: [{ $block: "../../blocks/letterhead.block" }],
            flow: [
              { paragraph: ["Total: ", { $plugin: "../../plugins/currency.plugin", with: { value: "total" } }] },
              { when: "x", do: [{ deep: { deeper: [{ $block: "parts/terms.block" }] } }] },
              { $block: "../../blocks/letterhead.block" },
            ],
          },
          layout: { margin: { $plugin: "../../plugins/page-number.plugin" } },
        }),
      ),
      TEMPLATE,
      "template",
    );
    expect(content).toEqual({
      tags: { authors: "Lena Vogt", status: "approved" },
      pluggableObjects: [
        { name: "currency", relativePath: "../../plugins/currency.plugin", absolutePath: "/plugins/currency.plugin" },
        {
          name: "page-number",
          relativePath: "../../plugins/page-number.plugin",
          absolutePath: "/plugins/page-number.plugin",
        },
      ],
      contentBlocks: [
        { name: "letterhead", relativePath: "../../blocks/letterhead.block", absolutePath: "/blocks/letterhead.block" },
        { name: "terms", relativePath: "parts/terms.block", absolutePath: "/templates/letters/parts/terms.block" },
      ],
      datamodel: {
        name: "invoice",
        relativePath: "../../datamodels/invoice.datamodel",
        absolutePath: "/datamodels/invoice.datamodel",
      },
      themes: [
        {
          name: "corporate",
          relativePath: "../../themes/corporate.theme",
          absolutePath: "/themes/corporate.theme",
          isDefault: true,
        },
        {
          name: "print",
          relativePath: "../../themes/print.theme",
          absolutePath: "/themes/print.theme",
          isDefault: false,
        },
        {
          name: "email",
          relativePath: "../../themes/email.theme",
          absolutePath: "/themes/email.theme",
          isDefault: false,
        },
      ],
      problems: [],
    });
  });

  it("without a data model, themes or body: each is a problem", () => {
    const { problems } = parseDesignResource("{}", TEMPLATE, "template");
    expect(problems).toEqual([
      "/datamodel: missing; a template names exactly one data model",
      "/themes: missing; a template names one or more themes, one of them the default",
      "/body: missing; a template has a body",
    ]);
  });

  it("with two data models: a problem", () => {
    const { problems, datamodel } = parseDesignResource(
      JSON.stringify(template({ datamodel: ["../../datamodels/a.datamodel", "../../datamodels/b.datamodel"] })),
      TEMPLATE,
      "template",
    );
    expect(datamodel).toBeNull();
    expect(problems).toEqual([
      "/datamodel: a template names exactly one data model, as one relative path string, not an array",
    ]);
  });

  it("with no default theme, or two: a problem; the themes are still listed", () => {
    const none = parseDesignResource(
      JSON.stringify(template({ themes: [{ path: "../../themes/a.theme" }] })),
      TEMPLATE,
      "template",
    );
    expect(none.themes).toHaveLength(1);
    expect(none.problems).toEqual(['/themes: exactly one theme must be marked "default": true (found 0)']);
    const two = parseDesignResource(
      JSON.stringify(
        template({
          themes: [
            { path: "../../themes/a.theme", default: true },
            { path: "../../themes/b.theme", default: true },
          ],
        }),
      ),
      TEMPLATE,
      "template",
    );
    expect(two.themes.map((t) => t.isDefault)).toEqual([true, true]);
    expect(two.problems).toEqual(['/themes: exactly one theme must be marked "default": true (found 2)']);
  });

  it("with an empty themes array, a theme named twice, or a theme that is not an object: problems", () => {
    expect(parseDesignResource(JSON.stringify(template({ themes: [] })), TEMPLATE, "template").problems).toEqual([
      '/themes: must be a non-empty array of {"path": ..., "default": true|false}',
    ]);
    const twice = parseDesignResource(
      JSON.stringify(
        template({
          themes: [{ path: "../../themes/a.theme", default: true }, { path: "../../themes/./a.theme" }, "b.theme"],
        }),
      ),
      TEMPLATE,
      "template",
    );
    expect(twice.themes).toHaveLength(1);
    expect(twice.problems).toEqual([
      "/themes/1/path: theme /themes/a.theme is named twice",
      '/themes/2: a theme is an object {"path": ..., "default": true|false}, not a string',
    ]);
  });
});

describe("content blocks, pluggable objects, data models and themes", () => {
  it("a content block uses other blocks and plugins, and may name its data model", () => {
    const content = parseDesignResource(
      JSON.stringify({
        datamodel: "../datamodels/customer.datamodel",
        body: [{ $block: "address.block" }, { $plugin: "../plugins/barcode.plugin" }],
      }),
      "/blocks/letterhead.block",
      "contentBlock",
    );
    expect(content.problems).toEqual([]);
    expect(content.contentBlocks.map((r) => r.absolutePath)).toEqual(["/blocks/address.block"]);
    expect(content.pluggableObjects.map((r) => r.absolutePath)).toEqual(["/plugins/barcode.plugin"]);
    expect(content.datamodel?.absolutePath).toBe("/datamodels/customer.datamodel");
  });

  it("a content block names no themes", () => {
    const { problems, themes } = parseDesignResource(
      JSON.stringify({ body: {}, themes: [{ path: "a.theme", default: true }] }),
      "/blocks/a.block",
      "contentBlock",
    );
    expect(themes).toEqual([]);
    expect(problems).toEqual(["/themes: a content block does not name themes"]);
  });

  it("pluggable objects, data models and themes use nothing: references in them are problems", () => {
    const plugin = parseDesignResource(
      JSON.stringify({ implementation: { runtime: "builtin", entry: "x" }, parameters: { a: { $block: "x.block" } } }),
      "/plugins/a.plugin",
      "pluggableObject",
    );
    expect(plugin.contentBlocks).toEqual([]);
    expect(plugin.problems).toEqual(["/parameters/a/$block: a pluggable object does not use content blocks"]);
    const model = parseDesignResource(
      JSON.stringify({ fields: {}, datamodel: "b.datamodel" }),
      "/datamodels/a.datamodel",
      "datamodel",
    );
    expect(model.problems).toEqual(["/datamodel: a data model does not name a data model"]);
    const theme = parseDesignResource(JSON.stringify({ colors: { $plugin: "a.plugin" } }), "/themes/a.theme", "theme");
    expect(theme.problems).toEqual(["/colors/$plugin: a theme does not use pluggable objects"]);
  });

  it("a pluggable object says how it runs; a data model lists its fields", () => {
    expect(parseDesignResource("{}", "/plugins/a.plugin", "pluggableObject").problems).toEqual([
      "/implementation: missing or not an object; a pluggable object says how it runs",
    ]);
    expect(
      parseDesignResource('{"implementation": {"runtime": ""}}', "/plugins/a.plugin", "pluggableObject").problems,
    ).toEqual([
      "/implementation/runtime: must be a non-empty string",
      "/implementation/entry: must be a non-empty string",
    ]);
    expect(parseDesignResource("{}", "/datamodels/a.datamodel", "datamodel").problems).toEqual([
      "/fields: missing or not an object; a data model lists its fields",
    ]);
    expect(parseDesignResource("{}", "/themes/a.theme", "theme").problems).toEqual([]);
  });
});

describe("tags and bad documents", () => {
  it("tags are string keys to string values; other values are problems and left out", () => {
    const { tags, problems } = parseDesignResource(
      JSON.stringify({ tags: { authors: "A; B", "a/b": "ok", version: 3, notes: null } }),
      "/themes/a.theme",
      "theme",
    );
    expect(tags).toEqual({ authors: "A; B", "a/b": "ok" });
    expect(problems).toEqual([
      "/tags/version: a tag value must be a string, not a number",
      "/tags/notes: a tag value must be a string, not null",
    ]);
    const proto = parseDesignResource('{"tags": {"__proto__": "x", "constructor": "y"}}', "/themes/a.theme", "theme");
    expect(JSON.stringify(proto.tags)).toBe('{"__proto__":"x","constructor":"y"}');
    expect(parseDesignResource('{"tags": ["a"]}', "/themes/a.theme", "theme").problems).toEqual([
      "/tags: must be an object of string values, not an array",
    ]);
  });

  it("invalid JSON or a document that is not an object is described, never thrown", () => {
    const broken = parseDesignResource('{"body": [', "/blocks/a.block", "contentBlock");
    expect(broken.problems).toHaveLength(1);
    expect(broken.problems[0]).toMatch(/^not valid JSON: /);
    expect(parseDesignResource("[1]", "/blocks/a.block", "contentBlock")).toEqual({
      tags: {},
      pluggableObjects: [],
      contentBlocks: [],
      datamodel: null,
      themes: [],
      problems: ["the document must be a JSON object, not an array"],
    });
  });

  it("a bad reference is a problem that says where it is; the others are still read", () => {
    const { contentBlocks, problems } = parseDesignResource(
      JSON.stringify({
        body: [
          { $block: "/blocks/abs.block" },
          { $block: "../../../../up.block" },
          { $block: 42 },
          { $block: "../themes/dark.theme" },
          { $block: "ok.block" },
        ],
      }),
      "/blocks/a.block",
      "contentBlock",
    );
    expect(contentBlocks.map((r) => r.absolutePath)).toEqual(["/themes/dark.theme", "/blocks/ok.block"]);
    expect(problems).toEqual([
      `/body/0/$block: reference "/blocks/abs.block" starts with '/': references are relative to the referring resource`,
      `/body/1/$block: reference "../../../../up.block" goes above the top of the environment`,
      "/body/2/$block: a reference must be a relative path string, not a number",
      `/body/3/$block: reference "../themes/dark.theme" is a theme; a content block ends with .block`,
    ]);
  });

  it("locations in problems are JSON Pointers", () => {
    const { problems } = parseDesignResource(
      JSON.stringify({ body: { "a/b": { "c~d": [{ $plugin: "x.png" }] } } }),
      "/blocks/a.block",
      "contentBlock",
    );
    expect(problems).toEqual([
      `/body/a~1b/c~0d/0/$plugin: reference "x.png" is not a design resource; a pluggable object ends with .plugin`,
    ]);
  });

  it("deeply nested bodies are read without overflowing the stack", () => {
    const depth = 10_000;
    const text = `{"body": ${"[".repeat(depth)}{"$block": "deep.block"}${"]".repeat(depth)}}`;
    const { contentBlocks, problems } = parseDesignResource(text, "/blocks/a.block", "contentBlock");
    expect(problems).toEqual([]);
    expect(contentBlocks.map((r) => r.absolutePath)).toEqual(["/blocks/deep.block"]);
  });
});
