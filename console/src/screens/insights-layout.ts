// The dependency graph of a report without the page: nodes (resources and missing targets), edges
// (references), the edges on a cycle (strongly connected components), and the layout, by dagre
// (@dagrejs/dagre: layered, crossings reduced, cycles broken for the ranking, each edge routed as a
// polyline). Top to bottom or left to right, whichever reads larger at the console's width.

import { layout as dagreLayout, graphlib } from "@dagrejs/dagre";
import type { ReportEntry } from "./insights-model.js";

export type Direction = "TB" | "LR";

export interface Point {
  x: number;
  y: number;
}

export interface GraphNode {
  path: string;
  type: string;
  missing: boolean;
  /** The box's top left corner. */
  x: number;
  y: number;
}

export interface GraphEdge {
  from: string;
  to: string;
  cycle: boolean;
  /** The route from the referrer's box to the target's, at least two points. */
  points: Point[];
}

export interface GraphLayout {
  nodes: GraphNode[];
  edges: GraphEdge[];
  width: number;
  height: number;
  direction: Direction;
}

/** The graph before layout: which resources, which references, which of them on a cycle. */
export interface DependencyGraphModel {
  nodes: { path: string; type: string; missing: boolean }[];
  edges: { from: string; to: string; cycle: boolean }[];
}

export const NODE_WIDTH = 180;
export const NODE_HEIGHT = 26;
/** The width the layout is chosen for: the graph's frame in a 1024 px wide window. */
export const VIEW_WIDTH = 960;
const MARGIN = 10;
const SPACING: Record<Direction, { nodesep: number; ranksep: number }> = {
  TB: { nodesep: 16, ranksep: 60 },
  LR: { nodesep: 8, ranksep: 90 },
};

/** The graph of the report, or of `root` and what it uses (directly or not) when given. */
export function dependencyGraph(entries: ReportEntry[], root?: string): DependencyGraphModel {
  const type = new Map<string, string>();
  const out = new Map<string, string[]>();
  for (const e of entries) {
    type.set(e.path, e.type);
    const targets: string[] = [];
    const refs = [...(e.datamodel ? [e.datamodel] : []), ...e.themes, ...e.contentBlocks, ...e.pluggableObjects];
    for (const r of refs) if (!targets.includes(r.absolutePath)) targets.push(r.absolutePath);
    out.set(e.path, targets);
  }
  let paths = [...new Set([...out.keys(), ...[...out.values()].flat()])].sort();
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
  const component = stronglyConnected(paths, out);
  const size = new Map<number, number>();
  for (const c of component.values()) size.set(c, (size.get(c) ?? 0) + 1);
  const edges: DependencyGraphModel["edges"] = [];
  for (const from of paths) {
    for (const to of out.get(from) ?? []) {
      if (!inGraph.has(to)) continue;
      const c = component.get(from) as number;
      edges.push({ from, to, cycle: from === to || (c === component.get(to) && (size.get(c) ?? 0) > 1) });
    }
  }
  const nodes = paths.map((path) => ({ path, type: type.get(path) ?? "missing", missing: !type.has(path) }));
  return { nodes, edges };
}

/** Places the graph with dagre in one direction: referrers before (above, or left of) what they use. */
export function placeGraph(graph: DependencyGraphModel, direction: Direction): GraphLayout {
  const g = new graphlib.Graph({});
  g.setGraph({ rankdir: direction, ...SPACING[direction], edgesep: 8, marginx: MARGIN, marginy: MARGIN });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of graph.nodes) g.setNode(n.path, { width: NODE_WIDTH, height: NODE_HEIGHT });
  for (const e of graph.edges) g.setEdge(e.from, e.to);
  dagreLayout(g);
  const nodes = graph.nodes.map((n) => {
    const placed = g.node(n.path);
    // dagre gives the centre.
    return { ...n, x: (placed.x ?? 0) - NODE_WIDTH / 2, y: (placed.y ?? 0) - NODE_HEIGHT / 2 };
  });
  const edges = graph.edges.map((e) => ({
    ...e,
    points: ((g.edge(e.from, e.to) as { points?: Point[] }).points ?? []).map(({ x, y }) => ({ x, y })),
  }));
  const label = g.graph();
  return { nodes, edges, width: label.width ?? 0, height: label.height ?? 0, direction };
}

/** The scale at which a layout fits `width` (never enlarged past 100 %). */
export function fitScale(layout: { width: number }, width: number): number {
  return layout.width <= 0 ? 1 : Math.min(1, width / layout.width);
}

/**
 * The graph laid out in `direction`, or (by default) in the direction whose drawing is the larger
 * once fitted to VIEW_WIDTH; top to bottom when both fit. A wide environment (many resources using
 * the same few blocks) reads left to right: its ranks become columns, and the frame scrolls down.
 */
export function layoutGraph(entries: ReportEntry[], root?: string, direction?: Direction): GraphLayout {
  const graph = dependencyGraph(entries, root);
  if (direction) return placeGraph(graph, direction);
  const tb = placeGraph(graph, "TB");
  if (fitScale(tb, VIEW_WIDTH) === 1) return tb;
  const lr = placeGraph(graph, "LR");
  return fitScale(lr, VIEW_WIDTH) > fitScale(tb, VIEW_WIDTH) ? lr : tb;
}

/** An edge's route as an SVG path: straight ends, the bends smoothed (quadratic through midpoints). */
export function edgePath(points: Point[]): string {
  const [first, ...rest] = points;
  if (!first) return "";
  const r = (n: number) => Math.round(n * 10) / 10;
  let d = `M${r(first.x)},${r(first.y)}`;
  for (let i = 0; i < rest.length - 1; i++) {
    const p = rest[i] as Point;
    const q = rest[i + 1] as Point;
    d += ` Q${r(p.x)},${r(p.y)} ${r((p.x + q.x) / 2)},${r((p.y + q.y) / 2)}`;
  }
  const last = rest[rest.length - 1];
  if (last) d += ` L${r(last.x)},${r(last.y)}`;
  return d;
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

/** Room for a node's name in its box, and the width of an average character of the 11 px label. */
export const LABEL_ROOM = NODE_WIDTH - 14;
const CHAR_WIDTH = 6.2;

/**
 * The label of a node: its file name, whole (so that what is seen is part of the node's accessible
 * name), with the length to squeeze it into when it would not fit, at most to 70 % (the box clips
 * the rest of a longer name).
 */
export function nodeLabel(path: string): { text: string; squeeze?: number } {
  const text = path.slice(path.lastIndexOf("/") + 1);
  const natural = text.length * CHAR_WIDTH;
  return natural <= LABEL_ROOM ? { text } : { text, squeeze: Math.round(Math.max(LABEL_ROOM, natural * 0.7)) };
}
