// The report builder: the report document and its resource, reference and theme entries as the
// spec's tables give them, the missing-reference flag, the additional fields, and one bad
// resource never spoiling the report.

import { describe, expect, it } from "vitest";
import { UnavailableError } from "../../src/domain/errors.js";
import { buildReport, createResourceFormat, REPORT_FORMAT_VERSION } from "../../src/insights/index.js";
import { memorySource, REPORT_OPTIONS } from "./memory-source.js";

const EXAMPLE = {
  "templates/invoice.template": {
    tags: { authors: "Lena Vogt", department: "Billing", status: "approved" },
    datamodel: "../models/invoice.datamodel",
    themes: [{ path: "../themes/print.theme" }, { path: "../themes/corporate.theme", default: true }],
    body: { flow: [{ $block: "../blocks/lines.block" }, { $block: "../blocks/terms.block" }] },
  },
  "blocks/lines.block": { body: { table: { $plugin: "../plugins/table.plugin" } } },
  "plugins/table.plugin": { implementation: { runtime: "builtin", entry: "layout.table" } },
  "models/invoice.datamodel": { fields: { total: { type: "number" } } },
  "themes/corporate.theme": { tags: { description: "House style" } },
  "themes/print.theme": {},
  "images/logo.png": { content: new Uint8Array([0x89, 0x50, 0x4e, 0x47]) },
};

describe("Report document", () => {
  it("carries version, created, creator, projectID, projectName, environmentID, environmentName, resources", async () => {
    const report = await buildReport(memorySource(EXAMPLE), REPORT_OPTIONS);
    expect(Object.keys(report)).toEqual([
      "version",
      "created",
      "creator",
      "projectID",
      "projectName",
      "environmentID",
      "environmentName",
      "resources",
    ]);
    expect(report).toMatchObject({
      version: REPORT_FORMAT_VERSION,
      created: "2026-03-01T12:00:00.000Z",
      creator: "alice@acme.example",
      projectID: REPORT_OPTIONS.projectID,
      projectName: "acme-letters",
      environmentID: REPORT_OPTIONS.environmentID,
      environmentName: "production",
    });
    expect(REPORT_FORMAT_VERSION).toBe("1.0");
  });

  it("resources: every design resource, sorted by path; other files are left out and never opened", async () => {
    const source = memorySource(EXAMPLE);
    const report = await buildReport(source, REPORT_OPTIONS);
    expect(report.resources.map((r) => r.path)).toEqual([
      "/blocks/lines.block",
      "/models/invoice.datamodel",
      "/plugins/table.plugin",
      "/templates/invoice.template",
      "/themes/corporate.theme",
      "/themes/print.theme",
    ]);
    expect(source.opened).not.toContain("images/logo.png");
  });

  it("created defaults to the time generation starts", async () => {
    const before = Date.now();
    const { created } = await buildReport(memorySource({}), { ...REPORT_OPTIONS, created: undefined });
    expect(Date.parse(created)).toBeGreaterThanOrEqual(before);
    expect(created).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
  });
});

describe("Resource entry", () => {
  it("type, name, extension, path, created, lastModified, size, tags, pluggableObjects, contentBlocks, datamodel, themes", async () => {
    const report = await buildReport(memorySource(EXAMPLE), REPORT_OPTIONS);
    const template = report.resources.find((r) => r.type === "template");
    expect(template).toEqual({
      type: "template",
      name: "invoice",
      extension: "template",
      path: "/templates/invoice.template",
      created: "2026-01-15T09:30:00.123Z",
      lastModified: "2026-02-20T14:05:06.789Z",
      size: Buffer.byteLength(JSON.stringify(EXAMPLE["templates/invoice.template"])),
      tags: { authors: "Lena Vogt", department: "Billing", status: "approved" },
      pluggableObjects: [],
      contentBlocks: [
        { name: "lines", relativePath: "../blocks/lines.block", absolutePath: "/blocks/lines.block" },
        { name: "terms", relativePath: "../blocks/terms.block", absolutePath: "/blocks/terms.block", missing: true },
      ],
      datamodel: {
        name: "invoice",
        relativePath: "../models/invoice.datamodel",
        absolutePath: "/models/invoice.datamodel",
      },
      themes: [
        { name: "print", relativePath: "../themes/print.theme", absolutePath: "/themes/print.theme", isDefault: false },
        {
          name: "corporate",
          relativePath: "../themes/corporate.theme",
          absolutePath: "/themes/corporate.theme",
          isDefault: true,
        },
      ],
    });
    expect(Object.keys(template ?? {})).toEqual([
      "type",
      "name",
      "extension",
      "path",
      "created",
      "lastModified",
      "size",
      "tags",
      "pluggableObjects",
      "contentBlocks",
      "datamodel",
      "themes",
    ]);
  });

  it("type is one of template, contentBlock, pluggableObject, datamodel, theme; resources that name none get datamodel null and empty lists", async () => {
    const report = await buildReport(memorySource(EXAMPLE), REPORT_OPTIONS);
    expect(report.resources.map((r) => r.type)).toEqual([
      "contentBlock",
      "datamodel",
      "pluggableObject",
      "template",
      "theme",
      "theme",
    ]);
    const theme = report.resources.find((r) => r.path === "/themes/print.theme");
    expect(theme).toMatchObject({ tags: {}, pluggableObjects: [], contentBlocks: [], datamodel: null, themes: [] });
  });

  it("the extension comes from the configured map", async () => {
    const format = createResourceFormat({ extensions: { "tpl.json": "template" } });
    const report = await buildReport(
      memorySource({
        "a/Letter.tpl.json": { datamodel: "m.datamodel", themes: [{ path: "t.theme", default: true }], body: {} },
      }),
      { ...REPORT_OPTIONS, format },
    );
    expect(report.resources[0]).toMatchObject({ type: "template", name: "Letter", extension: "tpl.json" });
  });
});

describe("Reference entry", () => {
  it("name, relativePath (may start with ../), absolutePath (path within the environment)", async () => {
    const report = await buildReport(memorySource(EXAMPLE), REPORT_OPTIONS);
    const block = report.resources.find((r) => r.path === "/blocks/lines.block");
    expect(block?.pluggableObjects).toEqual([
      { name: "table", relativePath: "../plugins/table.plugin", absolutePath: "/plugins/table.plugin" },
    ]);
  });

  it('a reference to a missing resource is still listed, with "missing": true', async () => {
    const report = await buildReport(
      memorySource({
        "t.template": {
          datamodel: "gone.datamodel",
          themes: [{ path: "gone.theme", default: true }],
          body: [{ $plugin: "gone.plugin" }, { $block: "gone.block" }],
        },
      }),
      REPORT_OPTIONS,
    );
    const [entry] = report.resources;
    expect(entry?.pluggableObjects).toEqual([
      { name: "gone", relativePath: "gone.plugin", absolutePath: "/gone.plugin", missing: true },
    ]);
    expect(entry?.contentBlocks).toEqual([
      { name: "gone", relativePath: "gone.block", absolutePath: "/gone.block", missing: true },
    ]);
    expect(entry?.datamodel).toEqual({
      name: "gone",
      relativePath: "gone.datamodel",
      absolutePath: "/gone.datamodel",
      missing: true,
    });
    expect(entry?.themes).toEqual([
      { name: "gone", relativePath: "gone.theme", absolutePath: "/gone.theme", isDefault: true, missing: true },
    ]);
    // A missing target is a fact about the environment, not a problem of the document.
    expect(entry?.problems).toBeUndefined();
  });

  it("a resource used several times is listed once, at its first use", async () => {
    const report = await buildReport(
      memorySource({
        "b/a.block": { body: [{ $block: "x.block" }, { $block: "./x.block" }, { $block: "../b/x.block" }] },
        "b/x.block": { body: {} },
      }),
      REPORT_OPTIONS,
    );
    expect(report.resources[0]?.contentBlocks).toEqual([
      { name: "x", relativePath: "x.block", absolutePath: "/b/x.block" },
    ]);
  });
});

describe("Theme entry", () => {
  it("a reference entry plus isDefault, which marks the default theme of the resource", async () => {
    const report = await buildReport(memorySource(EXAMPLE), REPORT_OPTIONS);
    const template = report.resources.find((r) => r.type === "template");
    expect(template?.themes.filter((t) => t.isDefault).map((t) => t.name)).toEqual(["corporate"]);
    expect(Object.keys(template?.themes[0] ?? {})).toEqual(["name", "relativePath", "absolutePath", "isDefault"]);
  });
});

describe("Report request: additionalFields (lastPromotedDate, lastPromotedBy)", () => {
  const source = () =>
    memorySource({
      "a.theme": { content: {}, promotion: { date: "2026-02-28T17:45:00.000Z", by: "bob@acme.example" } },
      "b.theme": { content: {}, promotion: { date: Date.UTC(2026, 1, 1), by: "carol@acme.example" } },
      "c.theme": {},
    });

  it("are placed on each resource entry, after themes, when requested", async () => {
    const report = await buildReport(source(), {
      ...REPORT_OPTIONS,
      additionalFields: ["lastPromotedDate", "lastPromotedBy"],
    });
    expect(report.resources.map((r) => [r.lastPromotedDate, r.lastPromotedBy])).toEqual([
      ["2026-02-28T17:45:00.000Z", "bob@acme.example"],
      ["2026-02-01T00:00:00.000Z", "carol@acme.example"],
      [null, null],
    ]);
    expect(Object.keys(report.resources[0] ?? {}).slice(-3)).toEqual(["themes", "lastPromotedDate", "lastPromotedBy"]);
  });

  it("only the requested ones; none when none is requested", async () => {
    const one = await buildReport(source(), { ...REPORT_OPTIONS, additionalFields: ["lastPromotedBy"] });
    expect(one.resources[0]).not.toHaveProperty("lastPromotedDate");
    expect(one.resources[0]?.lastPromotedBy).toBe("bob@acme.example");
    const none = await buildReport(source(), REPORT_OPTIONS);
    expect(none.resources[0]).not.toHaveProperty("lastPromotedDate");
    expect(none.resources[0]).not.toHaveProperty("lastPromotedBy");
  });
});

describe("a bad resource never spoils the report", () => {
  it("invalid JSON, invalid UTF-8, a failed read and an oversized document each become problems of their entry", async () => {
    const report = await buildReport(
      memorySource({
        "a.block": { content: '{"body": [' },
        "b.block": { content: new Uint8Array([0x7b, 0xff, 0x7d]) },
        "c.block": { content: {}, fails: new Error("blob 1f0c... not found") },
        "d.block": { content: { body: "x".repeat(2_000) } },
        "e.block": { content: { body: [] } },
      }),
      { ...REPORT_OPTIONS, maxDocumentBytes: 1_000 },
    );
    expect(report.resources.map((r) => [r.path, r.problems])).toEqual([
      ["/a.block", [expect.stringMatching(/^not valid JSON: /)]],
      ["/b.block", ["not valid UTF-8 text"]],
      ["/c.block", ["could not be read: blob 1f0c... not found"]],
      ["/d.block", ["not parsed: 2011 bytes, more than the 1000 a design resource may have"]],
      ["/e.block", undefined],
    ]);
    expect(report.resources[0]).toMatchObject({ type: "contentBlock", name: "a", tags: {}, contentBlocks: [] });
    expect(Object.keys(report.resources[0] ?? {}).at(-1)).toBe("problems");
  });

  it("a UTF-8 byte-order mark is ignored", async () => {
    const report = await buildReport(
      memorySource({
        "a.theme": { content: new Uint8Array([0xef, 0xbb, 0xbf, ...Buffer.from('{"tags":{"a":"b"}}')]) },
      }),
      REPORT_OPTIONS,
    );
    expect(report.resources[0]).toMatchObject({ tags: { a: "b" } });
    expect(report.resources[0]?.problems).toBeUndefined();
  });

  it("a source whose size is stale is read only up to the limit", async () => {
    const big = {
      async *list() {
        yield {
          path: "big.block",
          size: 10,
          created: 0,
          lastModified: 0,
          async *open() {
            for (let i = 0; i < 1_000; i++) yield new Uint8Array(1_024);
            throw new Error("read past the limit");
          },
        };
      },
    };
    const report = await buildReport(big, { ...REPORT_OPTIONS, maxDocumentBytes: 4_096 });
    expect(report.resources[0]?.problems).toEqual(["not parsed: more than the 4096 bytes a design resource may have"]);
  });

  it("a storage that is unavailable fails the whole report (its job is retried)", async () => {
    const source = memorySource({ "a.block": { content: {}, fails: new UnavailableError("database unreachable") } });
    await expect(buildReport(source, REPORT_OPTIONS)).rejects.toThrow(UnavailableError);
  });

  it("a resource listed twice is reported once", async () => {
    const twice = {
      async *list() {
        for (const path of ["a.theme", "/a.theme"]) {
          yield {
            path,
            size: 2,
            created: 0,
            lastModified: 0,
            open: async function* () {
              yield Buffer.from("{}");
            },
          };
        }
      },
    };
    const report = await buildReport(twice, REPORT_OPTIONS);
    expect(report.resources.map((r) => r.path)).toEqual(["/a.theme"]);
  });

  it("generation can be stopped between two resources, and reports its progress", async () => {
    const progress: number[] = [];
    const controller = new AbortController();
    const source = memorySource({ "a.theme": {}, "b.theme": {}, "c.theme": {} });
    await expect(
      buildReport(source, {
        ...REPORT_OPTIONS,
        signal: controller.signal,
        onProgress: (n) => {
          progress.push(n);
          if (n === 2) controller.abort();
        },
      }),
    ).rejects.toThrow();
    expect(progress).toEqual([1, 2]);
    expect(source.opened).toEqual(["a.theme", "b.theme"]);
  });
});
