// The dependency graph of a report without the page: nodes (resources and missing targets), edges
// (references), the edges on a cycle (strongly connected components), and a layered layout
// (referrers above what they use; back edges of cycles ignored for the layering).

import type { ReportEntry } from "./insights-model.js";

export interface GraphNode {
  path: string;
  type: string;
  missing: boolean;
  x: number;
  y: number;
}

export interface GraphEdge {
  from: string;
  to: string;
  cycle: boolean;
}

export interface GraphLayout {
  nodes: GraphNode[];
  edges: GraphEdge[];
  width: number;
  height: number;
}

export const NODE_WIDTH = 200;
export const NODE_HEIGHT = 28;
const GAP_X = 16;
const GAP_Y = 70;
const MARGIN = 10;

/** The graph of the report, or of `root` and what it uses (directly or not) when given. */
export function layoutGraph(entries: ReportEntry[], root?: string): GraphLayout {
  const type = new Map<string, string>();
  const out = new Map<string, string[]>();
  for (const e of entries) {
    type.set(e.path, e.type);
    const targets: string[] = [];
    const refs = [...(e.datamodel ? [e.datamodel] : []), ...e.themes, ...e.contentBlocks, ...e.pluggableObjects];
    for (const r of refs) if (!targets.includes(r.absolutePath)) targets.push(r.absolutePath);
    out.set(e.path, targets);
  }
  let paths = [...new Set([...out.keys(), ...[...out.values()].flat()])];
  if (root !== undefined) {
    const keep = new Set<string>();
    const visit = (p: string) => {
      if (keep.has(p)) return;
      keep.add(p);
      for (const t of out.get(p) ?? []) visit(t);
    };
    visit(root);
    paths = paths.filter((p) => keep.has(p));
  }
  const inGraph = new Set(paths);
  const edges: GraphEdge[] = [];
  for (const from of paths)
    for (const to of out.get(from) ?? []) if (inGraph.has(to)) edges.push({ from, to, cycle: false });

  const component = stronglyConnected(paths, out);
  for (const e of edges) {
    const c = component.get(e.from);
    e.cycle = e.from === e.to || (c !== undefined && c === component.get(e.to) && componentSize(component, c) > 1);
  }

  // Layers: the longest path from a node nobody refers to, without the back edges of a depth-first
  // walk that starts from those nodes (so a cycle is drawn top-down, with one edge going back up).
  const layer = new Map<string, number>();
  const incoming = new Map<string, string[]>(paths.map((p) => [p, []]));
  for (const e of backEdgesRemoved(paths, edges)) incoming.get(e.to)?.push(e.from);
  const depth = (p: string, seen: Set<string>): number => {
    const known = layer.get(p);
    if (known !== undefined) return known;
    if (seen.has(p)) return 0;
    seen.add(p);
    const parents = incoming.get(p) ?? [];
    const d = parents.length === 0 ? 0 : Math.max(...parents.map((q) => depth(q, seen))) + 1;
    seen.delete(p);
    layer.set(p, d);
    return d;
  };
  for (const p of paths) depth(p, new Set());

  const rows: string[][] = [];
  for (const p of [...paths].sort()) {
    const d = layer.get(p) ?? 0;
    rows[d] ??= [];
    rows[d].push(p);
  }
  // Each row ordered by the mean position of its referrers in the rows above (one barycentre pass).
  const position = new Map<string, number>();
  rows.forEach((row, d) => {
    if (d > 0) {
      const mean = (p: string) => {
        const xs = (incoming.get(p) ?? []).map((q) => position.get(q) ?? 0);
        return xs.length === 0 ? 0 : xs.reduce((a, b) => a + b, 0) / xs.length;
      };
      row.sort((a, b) => mean(a) - mean(b) || (a < b ? -1 : 1));
    }
    row.forEach((p, i) => {
      position.set(p, i);
    });
  });
  const widest = Math.max(1, ...rows.map((r) => r?.length ?? 0));
  const width = MARGIN * 2 + widest * (NODE_WIDTH + GAP_X) - GAP_X;
  const nodes: GraphNode[] = [];
  rows.forEach((row, d) => {
    const offset = (width - (row.length * (NODE_WIDTH + GAP_X) - GAP_X)) / 2;
    row.forEach((p, i) => {
      nodes.push({
        path: p,
        type: type.get(p) ?? "missing",
        missing: !type.has(p),
        x: offset + i * (NODE_WIDTH + GAP_X),
        y: MARGIN + d * (NODE_HEIGHT + GAP_Y),
      });
    });
  });
  const height = MARGIN * 2 + rows.length * (NODE_HEIGHT + GAP_Y) - GAP_Y;
  return { nodes, edges, width, height };
}

function backEdgesRemoved(paths: string[], edges: GraphEdge[]): GraphEdge[] {
  const out = new Map<string, GraphEdge[]>(paths.map((p) => [p, []]));
  const referred = new Set<string>();
  for (const e of edges) {
    out.get(e.from)?.push(e);
    referred.add(e.to);
  }
  const state = new Map<string, "open" | "done">();
  const back = new Set<GraphEdge>();
  const walk = (p: string) => {
    state.set(p, "open");
    for (const e of out.get(p) ?? []) {
      const s = state.get(e.to);
      if (s === "open") back.add(e);
      else if (s === undefined) walk(e.to);
    }
    state.set(p, "done");
  };
  for (const p of paths) if (!referred.has(p) && !state.has(p)) walk(p);
  for (const p of paths) if (!state.has(p)) walk(p);
  return edges.filter((e) => !back.has(e));
}

function componentSize(component: Map<string, number>, c: number): number {
  let n = 0;
  for (const v of component.values()) if (v === c) n++;
  return n;
}

/** Tarjan's strongly connected components: each node's component number. */
function stronglyConnected(nodes: string[], out: Map<string, string[]>): Map<string, number> {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const onStack = new Set<string>();
  const stack: string[] = [];
  const component = new Map<string, number>();
  let next = 0;
  let count = 0;
  const strong = (v: string) => {
    index.set(v, next);
    low.set(v, next);
    next++;
    stack.push(v);
    onStack.add(v);
    for (const w of out.get(v) ?? []) {
      if (!index.has(w)) {
        strong(w);
        low.set(v, Math.min(low.get(v) ?? 0, low.get(w) ?? 0));
      } else if (onStack.has(w)) {
        low.set(v, Math.min(low.get(v) ?? 0, index.get(w) ?? 0));
      }
    }
    if (low.get(v) === index.get(v)) {
      for (;;) {
        const w = stack.pop() as string;
        onStack.delete(w);
        component.set(w, count);
        if (w === v) break;
      }
      count++;
    }
  };
  for (const v of nodes) if (!index.has(v)) strong(v);
  return component;
}

/** The label of a node: the file name, shortened to fit the box. */
export function nodeLabel(path: string): string {
  const name = path.slice(path.lastIndexOf("/") + 1);
  return name.length > 26 ? `${name.slice(0, 25)}…` : name;
}
