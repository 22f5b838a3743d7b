// Questions asked of a generated report (the spec: "the report can be queried, for example to
// find dependencies between resources"). Pure functions over the report document.

import { NotFoundError } from "../domain/errors.js";
import { environmentPath } from "./reference-path.js";
import { forEachReference, type ReferenceEntry, type ReferenceKind, type ReportDocument } from "./report-document.js";
import type { ResourceType } from "./resource-format.js";

export interface GraphNode {
  path: string;
  type: ResourceType;
  /** True for a path that references point to but no design resource exists at. */
  missing: boolean;
}

export interface GraphEdge {
  from: string;
  to: string;
  kind: ReferenceKind;
  /** For a theme reference: whether it is the referring template's default theme. */
  isDefault?: boolean;
}

/** The dependency graph of a report: resources (and missing targets) and direct references. */
export interface DependencyGraph {
  /** Resources in report order, then missing targets in order of first reference. */
  nodes: Map<string, GraphNode>;
  /** Edges from each node, in the order of the referring entry's fields. */
  outgoing: Map<string, GraphEdge[]>;
  /** Edges to each node, in report order of the referring resources. */
  incoming: Map<string, GraphEdge[]>;
}

const graphs = new WeakMap<ReportDocument, DependencyGraph>();

/**
 * The graph of a report, computed once per report object: a generated report is never changed
 * (build a new report, or copy it, rather than editing one that was queried).
 */
export function dependencyGraph(report: ReportDocument): DependencyGraph {
  let graph = graphs.get(report);
  if (graph === undefined) {
    graph = computeGraph(report);
    graphs.set(report, graph);
  }
  return graph;
}

function computeGraph(report: ReportDocument): DependencyGraph {
  const nodes = new Map<string, GraphNode>();
  const outgoing = new Map<string, GraphEdge[]>();
  const incoming = new Map<string, GraphEdge[]>();
  for (const entry of report.resources) {
    nodes.set(entry.path, { path: entry.path, type: entry.type, missing: false });
    outgoing.set(entry.path, []);
    incoming.set(entry.path, []);
  }
  const add = (
    from: GraphEdge[],
    path: string,
    kind: ReferenceKind,
    reference: ReferenceEntry,
    isDefault?: boolean,
  ) => {
    const to = reference.absolutePath;
    let into = incoming.get(to);
    if (into === undefined) {
      nodes.set(to, { path: to, type: kind, missing: true });
      outgoing.set(to, []);
      into = [];
      incoming.set(to, into);
    }
    const edge: GraphEdge = isDefault === undefined ? { from: path, to, kind } : { from: path, to, kind, isDefault };
    from.push(edge);
    into.push(edge);
  };
  // The order of forEachReference: pluggable objects, content blocks, data model, themes.
  for (const entry of report.resources) {
    const from = outgoing.get(entry.path) as GraphEdge[];
    for (const r of entry.pluggableObjects) add(from, entry.path, "pluggableObject", r);
    for (const r of entry.contentBlocks) add(from, entry.path, "contentBlock", r);
    if (entry.datamodel !== null) add(from, entry.path, "datamodel", entry.datamodel);
    for (const r of entry.themes) add(from, entry.path, "theme", r, r.isDefault === true);
  }
  return { nodes, outgoing, incoming };
}

export interface RelatedResource {
  path: string;
  type: ResourceType;
  /** 1 for a direct reference, 2 for a reference of a reference, ... */
  depth: number;
  /** Present, and true, when no design resource exists at the path. */
  missing?: true;
}

export interface RelatedResources {
  /** The resource asked about. */
  resource: string;
  /** Resources at depth 1. */
  direct: RelatedResource[];
  /** Direct and transitive, each once at its smallest depth, nearest first. */
  all: RelatedResource[];
}

function related(report: ReportDocument, path: string, direction: "outgoing" | "incoming"): RelatedResources {
  const graph = dependencyGraph(report);
  const start = environmentPath(path);
  if (!graph.nodes.has(start)) throw new NotFoundError(`no resource ${start} in the report, and nothing refers to it`);
  const all: RelatedResource[] = [];
  const seen = new Set([start]);
  let frontier = [start];
  for (let depth = 1; frontier.length > 0; depth++) {
    const next: string[] = [];
    for (const node of frontier) {
      for (const edge of graph[direction].get(node) ?? []) {
        const other = direction === "outgoing" ? edge.to : edge.from;
        if (seen.has(other)) continue;
        seen.add(other);
        next.push(other);
        const info = graph.nodes.get(other) as GraphNode;
        const item: RelatedResource = { path: other, type: info.type, depth };
        if (info.missing) item.missing = true;
        all.push(item);
      }
    }
    frontier = next;
  }
  return { resource: start, direct: all.filter((r) => r.depth === 1), all };
}

/** What a resource uses: directly, and through what it uses. */
export function dependenciesOf(report: ReportDocument, path: string): RelatedResources {
  return related(report, path, "outgoing");
}

/** Where a resource is used: directly, and by what uses those. */
export function dependentsOf(report: ReportDocument, path: string): RelatedResources {
  return related(report, path, "incoming");
}

export interface UnusedResource {
  path: string;
  type: ResourceType;
}

/** Resources that no template uses, directly or through content blocks (templates excluded). */
export function unusedResources(report: ReportDocument): UnusedResource[] {
  const graph = dependencyGraph(report);
  const used = new Set<string>();
  const stack = report.resources.filter((e) => e.type === "template").map((e) => e.path);
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    for (const edge of graph.outgoing.get(node) ?? []) {
      if (!used.has(edge.to)) {
        used.add(edge.to);
        stack.push(edge.to);
      }
    }
  }
  return report.resources
    .filter((e) => e.type !== "template" && !used.has(e.path))
    .map((e) => ({ path: e.path, type: e.type }));
}

export interface MissingReference {
  /** The referring resource. */
  path: string;
  kind: ReferenceKind;
  name: string;
  relativePath: string;
  absolutePath: string;
}

/** References that point to no design resource, in report order. */
export function missingReferences(report: ReportDocument): MissingReference[] {
  const out: MissingReference[] = [];
  for (const entry of report.resources) {
    forEachReference(entry, (kind, reference) => {
      if (reference.missing === true) {
        const { name, relativePath, absolutePath } = reference;
        out.push({ path: entry.path, kind, name, relativePath, absolutePath });
      }
    });
  }
  return out;
}

export interface ReferenceCycle {
  /** Every resource of one strongly connected group, sorted by path. */
  resources: string[];
  /** One concrete cycle through the group's first resource, which it starts and ends with. */
  cycle: string[];
}

/**
 * Groups of resources that use one another in a circle (strongly connected components with
 * more than one resource, or a resource that uses itself), sorted by their first path.
 */
export function referenceCycles(report: ReportDocument): ReferenceCycle[] {
  const graph = dependencyGraph(report);
  const adjacency = new Map<string, string[]>();
  for (const [node, edges] of graph.outgoing) adjacency.set(node, [...new Set(edges.map((e) => e.to))]);
  const targets = (node: string) => adjacency.get(node) ?? [];
  // Tarjan's algorithm, iterative: deep chains of blocks must not overflow the call stack.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const groups: string[][] = [];
  let counter = 0;
  for (const root of graph.nodes.keys()) {
    if (index.has(root)) continue;
    const work: { node: string; next: string[]; i: number }[] = [];
    const enter = (node: string) => {
      index.set(node, counter);
      low.set(node, counter);
      counter++;
      stack.push(node);
      onStack.add(node);
      work.push({ node, next: targets(node), i: 0 });
    };
    enter(root);
    while (work.length > 0) {
      const frame = work[work.length - 1] as { node: string; next: string[]; i: number };
      if (frame.i < frame.next.length) {
        const to = frame.next[frame.i++] as string;
        if (!index.has(to)) enter(to);
        else if (onStack.has(to)) low.set(frame.node, Math.min(low.get(frame.node) ?? 0, index.get(to) ?? 0));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent.node, Math.min(low.get(parent.node) ?? 0, low.get(frame.node) ?? 0));
      if (low.get(frame.node) === index.get(frame.node)) {
        const group: string[] = [];
        for (;;) {
          const member = stack.pop() as string;
          onStack.delete(member);
          group.push(member);
          if (member === frame.node) break;
        }
        const selfLoop = group.length === 1 && targets(frame.node).includes(frame.node);
        if (group.length > 1 || selfLoop) groups.push(group.sort(compare));
      }
    }
  }
  return groups
    .sort((a, b) => compare(a[0] as string, b[0] as string))
    .map((resources) => ({ resources, cycle: shortestCycle(resources, targets) }));
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The shortest way from the group's first resource back to itself, staying in the group. */
function shortestCycle(group: string[], targets: (node: string) => string[]): string[] {
  const members = new Set(group);
  const start = group[0] as string;
  const previous = new Map<string, string>();
  let frontier = [start];
  while (frontier.length > 0) {
    const next: string[] = [];
    for (const node of frontier) {
      for (const to of targets(node)) {
        if (!members.has(to)) continue;
        if (to === start) {
          const path = [start];
          for (let at: string | undefined = node; at !== undefined && at !== start; at = previous.get(at)) {
            path.push(at);
          }
          path.push(start);
          return [start, ...path.slice(1, -1).reverse(), start];
        }
        if (!previous.has(to)) {
          previous.set(to, node);
          next.push(to);
        }
      }
    }
    frontier = next;
  }
  return [start, start];
}
