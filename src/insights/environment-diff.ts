// What changed between two sides of a comparison (docs/insights.md, Comparing environments): the
// files added, removed and changed (by MD5), and the references added and removed, each side's
// references being the edges of its dependency graph (report-queries.ts). Pure functions.

import { environmentPath } from "./reference-path.js";
import type { ReferenceKind } from "./report-document.js";
import type { DependencyGraph, GraphEdge } from "./report-queries.js";

/** A file of one side: its path within the environment and the MD5 of its contents. */
export interface SideFile {
  path: string;
  md5: string;
}

export type ResourceDiffKind = "added" | "removed" | "changed";

export interface ResourceDiff {
  kind: ResourceDiffKind;
  /** Path within the environment, starting with "/". */
  path: string;
  /** MD5 on the side compared from; absent for an added file. */
  fromMd5?: string;
  /** MD5 on the side compared to; absent for a removed file. */
  toMd5?: string;
}

export interface ReferenceDiff {
  kind: "added" | "removed";
  /** The referring resource. */
  path: string;
  referenceKind: ReferenceKind;
  /** The referenced path. */
  target: string;
  /** Present, and true, when no design resource is at the target on the side that has the reference. */
  missing?: true;
  /** Present, and true, for a template's default theme. */
  isDefault?: true;
}

function byPath<T extends { path: string }>(a: T, b: T): number {
  return a.path < b.path ? -1 : a.path > b.path ? 1 : 0;
}

/**
 * The files added (only on `to`), removed (only on `from`) and changed (on both, with another
 * MD5), in path order. Paths are compared as environment paths (a leading "/" is added).
 */
export function diffResources(from: Iterable<SideFile>, to: Iterable<SideFile>): ResourceDiff[] {
  const before = new Map<string, string>();
  for (const f of from) before.set(environmentPath(f.path), f.md5);
  const diffs: ResourceDiff[] = [];
  const seen = new Set<string>();
  for (const f of to) {
    const path = environmentPath(f.path);
    if (seen.has(path)) continue;
    seen.add(path);
    const md5 = before.get(path);
    if (md5 === undefined) diffs.push({ kind: "added", path, toMd5: f.md5 });
    else if (md5 !== f.md5) diffs.push({ kind: "changed", path, fromMd5: md5, toMd5: f.md5 });
  }
  for (const [path, md5] of before) {
    if (!seen.has(path)) diffs.push({ kind: "removed", path, fromMd5: md5 });
  }
  return diffs.sort(byPath);
}

/**
 * One reference of a graph, as a comparison identifies it: who refers, how, to what, and for a
 * theme whether it is the default one (a new default theme is a reference removed and one added).
 */
function referenceKey(edge: GraphEdge): string {
  return [edge.from, edge.kind, edge.to, edge.isDefault === true ? "default" : ""].join("\n");
}

function referencesOf(graph: DependencyGraph): Map<string, GraphEdge> {
  const edges = new Map<string, GraphEdge>();
  for (const out of graph.outgoing.values()) {
    for (const edge of out) {
      const key = referenceKey(edge);
      // A document that names the same target twice makes one reference.
      if (!edges.has(key)) edges.set(key, edge);
    }
  }
  return edges;
}

function referenceDiff(kind: ReferenceDiff["kind"], edge: GraphEdge, graph: DependencyGraph): ReferenceDiff {
  const diff: ReferenceDiff = { kind, path: edge.from, referenceKind: edge.kind, target: edge.to };
  if (graph.nodes.get(edge.to)?.missing === true) diff.missing = true;
  if (edge.isDefault === true) diff.isDefault = true;
  return diff;
}

/**
 * The references `to` has and `from` lacks (added) and the other way round (removed), ordered by
 * referring path, then target, then kind, a removed one before an added one. A reference whose
 * target went missing (or came back) is the same reference: that is a file removed (or added).
 */
export function diffReferences(from: DependencyGraph, to: DependencyGraph): ReferenceDiff[] {
  const before = referencesOf(from);
  const after = referencesOf(to);
  const diffs: ReferenceDiff[] = [];
  for (const [key, edge] of before) if (!after.has(key)) diffs.push(referenceDiff("removed", edge, from));
  for (const [key, edge] of after) if (!before.has(key)) diffs.push(referenceDiff("added", edge, to));
  const order = (d: ReferenceDiff) => [d.path, d.target, d.referenceKind, d.kind === "removed" ? "0" : "1"];
  return diffs.sort((a, b) => {
    const x = order(a);
    const y = order(b);
    for (let i = 0; i < x.length; i++) {
      const p = x[i] as string;
      const q = y[i] as string;
      if (p !== q) return p < q ? -1 : 1;
    }
    return 0;
  });
}
