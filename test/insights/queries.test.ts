// Queries over a generated report ("the report can be queried, for example to find
// dependencies between resources"), one per kind, against a small fixture whose answers
// are known, and the graph exports.
//
//   /t/a.template ── p1, one.block, missing.block (absent), m.datamodel, x.theme (default)
//   /t/b.template ── two.block, m.datamodel, x.theme (default), y.theme
//   /b/one.block  ── two.block, p2
//   /b/two.block  ── p1
//   /b/three.block <-> /b/four.block (a cycle no template uses); /b/self.block uses itself
//   unused: p3, unused.datamodel, z.theme

import { beforeAll, describe, expect, it } from "vitest";
import { NotFoundError } from "../../src/domain/errors.js";
import {
  buildReport,
  dependenciesOf,
  dependentsOf,
  missingReferences,
  type ReportDocument,
  referenceCycles,
  toDot,
  toMermaid,
  unusedResources,
} from "../../src/insights/index.js";
import { memorySource, REPORT_OPTIONS } from "./memory-source.js";

const PLUGIN = { implementation: { runtime: "builtin", entry: "x" } };
const FIXTURE = {
  "t/a.template": {
    datamodel: "../d/m.datamodel",
    themes: [{ path: "../th/x.theme", default: true }],
    body: [{ $block: "../b/one.block" }, { $block: "../b/missing.block" }, { $plugin: "../p/p1.plugin" }],
  },
  "t/b.template": {
    datamodel: "../d/m.datamodel",
    themes: [{ path: "../th/x.theme", default: true }, { path: "../th/y.theme" }],
    body: { main: { $block: "../b/two.block" } },
  },
  "b/one.block": { body: [{ $block: "./two.block" }, { $plugin: "../p/p2.plugin" }] },
  "b/two.block": { body: [{ $plugin: "../p/p1.plugin" }] },
  "b/three.block": { body: [{ $block: "four.block" }] },
  "b/four.block": { body: [{ $block: "three.block" }] },
  "b/self.block": { body: [{ $block: "self.block" }] },
  "p/p1.plugin": PLUGIN,
  "p/p2.plugin": PLUGIN,
  "p/p3.plugin": PLUGIN,
  "d/m.datamodel": { fields: {} },
  "d/unused.datamodel": { fields: {} },
  "th/x.theme": {},
  "th/y.theme": {},
  "th/z.theme": {},
};

let report: ReportDocument;
beforeAll(async () => {
  report = await buildReport(memorySource(FIXTURE), REPORT_OPTIONS);
});

describe("dependencies of a resource (direct and transitive)", () => {
  it("lists what a template uses, nearest first, each once, missing ones flagged", () => {
    expect(dependenciesOf(report, "/t/a.template")).toEqual({
      resource: "/t/a.template",
      direct: [
        { path: "/p/p1.plugin", type: "pluggableObject", depth: 1 },
        { path: "/b/one.block", type: "contentBlock", depth: 1 },
        { path: "/b/missing.block", type: "contentBlock", depth: 1, missing: true },
        { path: "/d/m.datamodel", type: "datamodel", depth: 1 },
        { path: "/th/x.theme", type: "theme", depth: 1 },
      ],
      all: [
        { path: "/p/p1.plugin", type: "pluggableObject", depth: 1 },
        { path: "/b/one.block", type: "contentBlock", depth: 1 },
        { path: "/b/missing.block", type: "contentBlock", depth: 1, missing: true },
        { path: "/d/m.datamodel", type: "datamodel", depth: 1 },
        { path: "/th/x.theme", type: "theme", depth: 1 },
        { path: "/p/p2.plugin", type: "pluggableObject", depth: 2 },
        { path: "/b/two.block", type: "contentBlock", depth: 2 },
      ],
    });
  });

  it("terminates on cycles and accepts a path without leading slash", () => {
    expect(dependenciesOf(report, "b/three.block").all).toEqual([
      { path: "/b/four.block", type: "contentBlock", depth: 1 },
    ]);
    expect(dependenciesOf(report, "/b/self.block").all).toEqual([]);
  });

  it("an unknown resource is NotFound", () => {
    expect(() => dependenciesOf(report, "/b/nope.block")).toThrow(NotFoundError);
    expect(() => dependenciesOf(report, "/b/nope.block")).toThrow(
      "no resource /b/nope.block in the report, and nothing refers to it",
    );
  });
});

describe("dependents of a resource (where used)", () => {
  it("lists what uses a plugin, directly and through blocks", () => {
    expect(dependentsOf(report, "/p/p1.plugin")).toEqual({
      resource: "/p/p1.plugin",
      direct: [
        { path: "/b/two.block", type: "contentBlock", depth: 1 },
        { path: "/t/a.template", type: "template", depth: 1 },
      ],
      all: [
        { path: "/b/two.block", type: "contentBlock", depth: 1 },
        { path: "/t/a.template", type: "template", depth: 1 },
        { path: "/b/one.block", type: "contentBlock", depth: 2 },
        { path: "/t/b.template", type: "template", depth: 2 },
      ],
    });
  });

  it("answers for a missing resource that something refers to", () => {
    expect(dependentsOf(report, "/b/missing.block").all).toEqual([
      { path: "/t/a.template", type: "template", depth: 1 },
    ]);
  });

  it("a theme used by two templates", () => {
    expect(dependentsOf(report, "/th/x.theme").direct.map((r) => r.path)).toEqual(["/t/a.template", "/t/b.template"]);
    expect(dependentsOf(report, "/th/z.theme").all).toEqual([]);
  });
});

describe("resources no template uses", () => {
  it("lists every non-template resource that no template reaches, directly or through blocks", () => {
    expect(unusedResources(report)).toEqual([
      { path: "/b/four.block", type: "contentBlock" },
      { path: "/b/self.block", type: "contentBlock" },
      { path: "/b/three.block", type: "contentBlock" },
      { path: "/d/unused.datamodel", type: "datamodel" },
      { path: "/p/p3.plugin", type: "pluggableObject" },
      { path: "/th/z.theme", type: "theme" },
    ]);
  });
});

describe("references that point to nothing", () => {
  it("lists each missing reference with its referring resource and kind", () => {
    expect(missingReferences(report)).toEqual([
      {
        path: "/t/a.template",
        kind: "contentBlock",
        name: "missing",
        relativePath: "../b/missing.block",
        absolutePath: "/b/missing.block",
      },
    ]);
  });
});

describe("cycles", () => {
  it("finds each group of resources that use one another, with one concrete cycle", () => {
    expect(referenceCycles(report)).toEqual([
      { resources: ["/b/four.block", "/b/three.block"], cycle: ["/b/four.block", "/b/three.block", "/b/four.block"] },
      { resources: ["/b/self.block"], cycle: ["/b/self.block", "/b/self.block"] },
    ]);
  });

  it("gives the shortest cycle through the group's first resource", async () => {
    // a -> b -> c -> a and a -> c: one group; the shortest way back from a is a, c, a.
    const ring = await buildReport(
      memorySource({
        "a.block": { body: [{ $block: "b.block" }, { $block: "c.block" }] },
        "b.block": { body: [{ $block: "c.block" }] },
        "c.block": { body: [{ $block: "a.block" }] },
        "d.block": { body: [{ $block: "a.block" }] },
      }),
      REPORT_OPTIONS,
    );
    expect(referenceCycles(ring)).toEqual([
      { resources: ["/a.block", "/b.block", "/c.block"], cycle: ["/a.block", "/c.block", "/a.block"] },
    ]);
  });

  it("handles a chain of 20,000 blocks without overflowing the stack", async () => {
    const chain: Record<string, unknown> = {};
    for (let i = 0; i < 20_000; i++) chain[`c/${i}.block`] = { body: { $block: `${(i + 1) % 20_000}.block` } };
    const long = await buildReport(memorySource(chain), REPORT_OPTIONS);
    const cycles = referenceCycles(long);
    expect(cycles).toHaveLength(1);
    expect(cycles[0]?.resources).toHaveLength(20_000);
    expect(cycles[0]?.cycle).toHaveLength(20_001);
  });
});

describe("export of the dependency graph", () => {
  const SMALL = {
    'l/say "hi".template': {
      datamodel: "m.datamodel",
      themes: [{ path: "t.theme", default: true }],
      body: [{ $block: "b.block" }, { $plugin: "gone.plugin" }],
    },
    "l/b.block": { body: {} },
    "l/m.datamodel": { fields: {} },
    "l/t.theme": {},
  };

  it("Graphviz DOT: shapes by type, missing targets dashed, default themes bold", async () => {
    const small = await buildReport(memorySource(SMALL), REPORT_OPTIONS);
    expect(toDot(small)).toBe(
      [
        'digraph "acme-letters/production" {',
        "  rankdir=LR;",
        '  node [fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=8];',
        '  "/l/b.block" [shape=component, tooltip="contentBlock"];',
        '  "/l/m.datamodel" [shape=cylinder, tooltip="datamodel"];',
        '  "/l/say \\"hi\\".template" [shape=box, tooltip="template"];',
        '  "/l/t.theme" [shape=note, tooltip="theme"];',
        '  "/l/gone.plugin" [shape=hexagon, tooltip="pluggableObject", style=dashed, color=red, fontcolor=red, xlabel="missing"];',
        '  "/l/say \\"hi\\".template" -> "/l/gone.plugin" [label="pluggableObject"];',
        '  "/l/say \\"hi\\".template" -> "/l/b.block" [label="contentBlock"];',
        '  "/l/say \\"hi\\".template" -> "/l/m.datamodel" [label="datamodel"];',
        '  "/l/say \\"hi\\".template" -> "/l/t.theme" [label="theme", style=bold];',
        "}",
        "",
      ].join("\n"),
    );
  });

  it("Mermaid flowchart: one node per resource, labelled with its path", async () => {
    const small = await buildReport(memorySource(SMALL), REPORT_OPTIONS);
    expect(toMermaid(small)).toBe(
      [
        "flowchart LR",
        '  n0("/l/b.block"):::contentBlock',
        '  n1[("/l/m.datamodel")]:::datamodel',
        '  n2["/l/say #quot;hi#quot;.template"]:::template',
        '  n3>"/l/t.theme"]:::theme',
        '  n4{{"/l/gone.plugin"}}:::pluggableObject',
        "  class n4 missing",
        "  n2 -->|pluggableObject| n4",
        "  n2 -->|contentBlock| n0",
        "  n2 -->|datamodel| n1",
        "  n2 ==>|theme| n3",
        "  classDef template fill:#dbeafe,stroke:#1d4ed8",
        "  classDef contentBlock fill:#dcfce7,stroke:#15803d",
        "  classDef pluggableObject fill:#fef3c7,stroke:#b45309",
        "  classDef datamodel fill:#ede9fe,stroke:#6d28d9",
        "  classDef theme fill:#fce7f3,stroke:#be185d",
        "  classDef missing stroke:#dc2626,stroke-dasharray:4 3,color:#dc2626",
        "",
      ].join("\n"),
    );
  });

  it("root limits the graph to one resource and what it uses", () => {
    const dot = toDot(report, { root: "/b/one.block" });
    expect(dot.match(/^ {2}"[^"]+" \[/gm)).toEqual([
      '  "/b/one.block" [',
      '  "/p/p2.plugin" [',
      '  "/b/two.block" [',
      '  "/p/p1.plugin" [',
    ]);
    expect(toMermaid(report, { root: "/b/one.block" }).match(/ -->/g)).toHaveLength(3);
    expect(() => toMermaid(report, { root: "/nope.block" })).toThrow(NotFoundError);
  });
});
