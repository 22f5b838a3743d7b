// Comparing two sides (docs/insights.md, Comparing environments), the pure part: the files added,
// removed and changed by MD5, and the references added and removed between two dependency graphs
// made by the report builder from small fixtures whose answers are known.

import { describe, expect, it } from "vitest";
import {
  buildReport,
  type DependencyGraph,
  dependencyGraph,
  diffReferences,
  diffResources,
} from "../../src/insights/index.js";
import { memorySource, REPORT_OPTIONS } from "./memory-source.js";

async function graphOf(resources: Record<string, unknown>): Promise<DependencyGraph> {
  return dependencyGraph(await buildReport(memorySource(resources), REPORT_OPTIONS));
}

const PLUGIN = { implementation: { runtime: "builtin", entry: "x" } };

describe("diffResources: files added, removed and changed (by MD5), in path order", () => {
  it("lists each difference once with the MD5 of each side where it exists", () => {
    const from = [
      { path: "/t/a.template", md5: "A" },
      { path: "/b/old.block", md5: "O" },
      { path: "/b/same.block", md5: "S" },
      { path: "/logo.png", md5: "L1" },
    ];
    const to = [
      { path: "/b/same.block", md5: "S" },
      { path: "/t/a.template", md5: "A2" },
      { path: "/b/new.block", md5: "N" },
      { path: "/logo.png", md5: "L2" },
    ];
    expect(diffResources(from, to)).toEqual([
      { kind: "added", path: "/b/new.block", toMd5: "N" },
      { kind: "removed", path: "/b/old.block", fromMd5: "O" },
      { kind: "changed", path: "/logo.png", fromMd5: "L1", toMd5: "L2" },
      { kind: "changed", path: "/t/a.template", fromMd5: "A", toMd5: "A2" },
    ]);
  });

  it("compares paths with or without a leading slash alike; equal sides differ in nothing", () => {
    const files = [
      { path: "b/x.block", md5: "X" },
      { path: "/t/y.template", md5: "Y" },
    ];
    expect(diffResources(files, [...files].reverse())).toEqual([]);
    expect(diffResources([{ path: "b/x.block", md5: "X" }], [{ path: "/b/x.block", md5: "X" }])).toEqual([]);
    expect(diffResources([], [])).toEqual([]);
  });

  it("an empty side: everything added, or everything removed", () => {
    const files = [
      { path: "/b/x.block", md5: "X" },
      { path: "/a.template", md5: "A" },
    ];
    expect(diffResources([], files).map((d) => `${d.kind} ${d.path}`)).toEqual([
      "added /a.template",
      "added /b/x.block",
    ]);
    expect(diffResources(files, []).map((d) => `${d.kind} ${d.path}`)).toEqual([
      "removed /a.template",
      "removed /b/x.block",
    ]);
  });
});

describe("diffReferences: the edges one graph has and the other lacks", () => {
  const BEFORE = {
    "t/a.template": {
      datamodel: "../d/m.datamodel",
      themes: [{ path: "../th/x.theme", default: true }],
      body: [{ $block: "../b/one.block" }, { $plugin: "../p/p1.plugin" }],
    },
    "b/one.block": { body: [{ $block: "./two.block" }] },
    "b/two.block": { body: [] },
    "p/p1.plugin": PLUGIN,
    "d/m.datamodel": { fields: {} },
    "th/x.theme": {},
    "th/y.theme": {},
  };

  it("two graphs of the same documents: no difference", async () => {
    expect(diffReferences(await graphOf(BEFORE), await graphOf(BEFORE))).toEqual([]);
  });

  it("a reference edited, one document deleted, one added: removed before added, by referring path then target", async () => {
    const after = {
      ...BEFORE,
      // one.block now uses three.block instead of two.block, and a plugin.
      "b/one.block": { body: [{ $block: "./three.block" }, { $plugin: "../p/p1.plugin" }] },
      "b/three.block": { body: [] },
    } as Record<string, unknown>;
    delete after["b/two.block"];
    expect(diffReferences(await graphOf(BEFORE), await graphOf(after))).toEqual([
      { kind: "added", path: "/b/one.block", referenceKind: "contentBlock", target: "/b/three.block" },
      { kind: "removed", path: "/b/one.block", referenceKind: "contentBlock", target: "/b/two.block" },
      { kind: "added", path: "/b/one.block", referenceKind: "pluggableObject", target: "/p/p1.plugin" },
    ]);
  });

  it("a target that went missing is the same reference (the file is what was removed); a new reference to nothing is flagged missing", async () => {
    const after = { ...BEFORE } as Record<string, unknown>;
    delete after["b/two.block"];
    after["t/b.template"] = { datamodel: "../d/gone.datamodel", body: [] };
    expect(diffReferences(await graphOf(BEFORE), await graphOf(after))).toEqual([
      { kind: "added", path: "/t/b.template", referenceKind: "datamodel", target: "/d/gone.datamodel", missing: true },
    ]);
    // The other way round, the reference that had no target is removed, flagged missing on its side.
    expect(diffReferences(await graphOf(after), await graphOf(BEFORE))).toEqual([
      {
        kind: "removed",
        path: "/t/b.template",
        referenceKind: "datamodel",
        target: "/d/gone.datamodel",
        missing: true,
      },
    ]);
  });

  it("a new default theme is the old default removed and the new one added", async () => {
    const after = {
      ...BEFORE,
      "t/a.template": {
        ...(BEFORE["t/a.template"] as object),
        themes: [{ path: "../th/x.theme" }, { path: "../th/y.theme", default: true }],
      },
    };
    expect(diffReferences(await graphOf(BEFORE), await graphOf(after))).toEqual([
      { kind: "removed", path: "/t/a.template", referenceKind: "theme", target: "/th/x.theme", isDefault: true },
      { kind: "added", path: "/t/a.template", referenceKind: "theme", target: "/th/x.theme" },
      { kind: "added", path: "/t/a.template", referenceKind: "theme", target: "/th/y.theme", isDefault: true },
    ]);
  });

  it("a document naming the same target twice makes one reference", async () => {
    const twice = { ...BEFORE, "b/one.block": { body: [{ $block: "./two.block" }, { $block: "two.block" }] } };
    expect(diffReferences(await graphOf(BEFORE), await graphOf(twice))).toEqual([]);
    const none = { ...BEFORE, "b/one.block": { body: [] } };
    expect(diffReferences(await graphOf(twice), await graphOf(none))).toEqual([
      { kind: "removed", path: "/b/one.block", referenceKind: "contentBlock", target: "/b/two.block" },
    ]);
  });
});
