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
// Tuned so that edges run between boxes, never over a name: room between the boxes of a rank for
// the edges passing it (nodesep, edgesep), and between ranks for the bends (ranksep).
const SPACING: Record<Direction, { nodesep: number; ranksep: number }> = {
  TB: { nodesep: 24, ranksep: 70 },
  LR: { nodesep: 14, ranksep: 110 },
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

/** What the drawing shows: a resource's neighbourhood, the problems, or (asked for) everything. */
export type GraphScope = { kind: "focus"; path: string } | { kind: "problems" } | { kind: "all" };

/**
 * The part of the graph a scope shows. A focus: the resource, what it uses (directly or not, as
 * ExportGraph's `root`) and what uses it directly. The problems: every missing target with the
 * resources that refer to it, and every reference on a cycle with its two ends. Edges between the
 * nodes kept are kept.
 */
export function scopedGraph(entries: ReportEntry[], scope: GraphScope): DependencyGraphModel {
  const all = dependencyGraph(entries);
  if (scope.kind === "all") return all;
  const keep = new Set<string>();
  if (scope.kind === "focus") {
    for (const n of dependencyGraph(entries, scope.path).nodes) keep.add(n.path);
    for (const e of all.edges) if (e.to === scope.path) keep.add(e.from);
  } else {
    const missing = new Set(all.nodes.filter((n) => n.missing).map((n) => n.path));
    for (const e of all.edges) {
      if (missing.has(e.to) || e.cycle) {
        keep.add(e.from);
        keep.add(e.to);
      }
    }
  }
  return {
    nodes: all.nodes.filter((n) => keep.has(n.path)),
    edges: all.edges.filter((e) => keep.has(e.from) && keep.has(e.to)),
  };
}

/** Whether the report has problems (a missing target or a cycle) to open the graph on. */
export function hasProblems(entries: ReportEntry[]): boolean {
  const g = dependencyGraph(entries);
  return g.nodes.some((n) => n.missing) || g.edges.some((e) => e.cycle);
}

/** Places the graph with dagre in one direction: referrers before (above, or left of) what they use. */
export function placeGraph(graph: DependencyGraphModel, direction: Direction): GraphLayout {
  const g = new graphlib.Graph({});
  g.setGraph({ rankdir: direction, ...SPACING[direction], edgesep: 12, marginx: MARGIN, marginy: MARGIN });
  g.setDefaultEdgeLabel(() => ({}));
  for (const n of graph.nodes) g.setNode(n.path, { width: NODE_WIDTH, height: NODE_HEIGHT });
  for (const e of graph.edges) g.setEdge(e.from, e.to);
  dagreLayout(g);
  const nodes = graph.nodes.map((n) => {
    const placed = g.node(n.path);
    // dagre gives the centre.
    return { ...n, x: (placed.x ?? 0) - NODE_WIDTH / 2, y: (placed.y ?? 0) - NODE_HEIGHT / 2 };
  });
  const at = new Map(nodes.map((n) => [n.path, n]));
  const edges = graph.edges.map((e) => {
    const routed = ((g.edge(e.from, e.to) as { points?: Point[] }).points ?? []).map(({ x, y }) => ({ x, y }));
    const from = at.get(e.from);
    const to = at.get(e.to);
    return { ...e, points: from && to && e.from !== e.to ? withPorts(routed, from, to, direction) : routed };
  });
  const label = g.graph();
  return { nodes, edges, width: label.width ?? 0, height: label.height ?? 0, direction };
}

/** How far an edge runs straight out of its referrer and into its target, in the gap between ranks. */
const STUB = 12;

/**
 * An edge that leaves its referrer's side facing the next rank, at its middle, and enters its
 * target's facing side at its middle, each with a short straight stub; dagre's bends in between
 * lie in the gaps between ranks. Dagre ends a route where the line to the target's centre meets
 * its box, which for a target many rows away is its top or bottom: the last stretch then ran along
 * the target's rank, over the names of the resources there (issue 30). A reference against the
 * flow (on a cycle) keeps dagre's route.
 */
function withPorts(points: Point[], from: Point, to: Point, direction: Direction): Point[] {
  const inner = points.slice(1, -1);
  if (direction === "LR") {
    if (from.x + NODE_WIDTH > to.x) return points;
    const y1 = from.y + NODE_HEIGHT / 2;
    const y2 = to.y + NODE_HEIGHT / 2;
    const out = from.x + NODE_WIDTH;
    return [
      { x: out, y: y1 },
      { x: out + STUB, y: y1 },
      ...inner.filter((p) => p.x > out + STUB && p.x < to.x - STUB),
      { x: to.x - STUB, y: y2 },
      { x: to.x, y: y2 },
    ];
  }
  if (from.y + NODE_HEIGHT > to.y) return points;
  const x1 = from.x + NODE_WIDTH / 2;
  const x2 = to.x + NODE_WIDTH / 2;
  const out = from.y + NODE_HEIGHT;
  return [
    { x: x1, y: out },
    { x: x1, y: out + STUB },
    ...inner.filter((p) => p.y > out + STUB && p.y < to.y - STUB),
    { x: x2, y: to.y - STUB },
    { x: x2, y: to.y },
  ];
}

/** The scale at which a layout fits `width` (never enlarged past 100 %). */
export function fitScale(layout: { width: number }, width: number): number {
  return layout.width <= 0 ? 1 : Math.min(1, width / layout.width);
}

/** "Fit all": the scale at which the whole layout shows in a frame of `width` x `height` (at most 100 %). */
export function fitAllScale(layout: { width: number; height: number }, width: number, height: number): number {
  return Math.min(fitScale(layout, width), layout.height <= 0 ? 1 : Math.min(1, height / layout.height));
}

/**
 * The graph laid out in `direction`, or (by default) in the direction whose drawing is the larger
 * once fitted to VIEW_WIDTH; top to bottom when both fit. A wide environment (many resources using
 * the same few blocks) reads left to right: its ranks become columns, and the frame scrolls down.
 */
export function layoutGraph(entries: ReportEntry[], scope: GraphScope, direction?: Direction): GraphLayout {
  const graph = scopedGraph(entries, scope);
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

/** How each kind is drawn (the legend's and the Resources tab's chips' colours): fill, stroke, shape. */
export const KIND_STYLES: Record<string, { label: string; fill: string; stroke: string; shape: string }> = {
  template: { label: "template", fill: "#e6effb", stroke: "#1a4f9c", shape: "rectangle" },
  block: { label: "block", fill: "#e5f4ea", stroke: "#1d6b3a", shape: "pill" },
  plugin: { label: "plugin", fill: "#fdf0dc", stroke: "#7a4a00", shape: "parallelogram" },
  datamodel: { label: "data model", fill: "#f2e8f8", stroke: "#6a2c8c", shape: "hexagon" },
  theme: { label: "theme", fill: "#fbe8f0", stroke: "#8a2350", shape: "tab" },
  other: { label: "other", fill: "#f2f4f7", stroke: "#4a4a4a", shape: "rectangle" },
};

/** The outline of a node's box of `shape`, `w` x `h`, as an SVG path (inset half a pixel). */
export function shapePath(shape: string, w: number, h: number): string {
  const a = 0.5;
  const b = w - 0.5;
  const c = h - 0.5;
  const m = h / 2;
  switch (shape) {
    case "pill":
      return `M${a + m},${a} H${b - m} A${m - a},${m - a} 0 0 1 ${b - m},${c} H${a + m} A${m - a},${m - a} 0 0 1 ${a + m},${a} Z`;
    case "parallelogram":
      return `M${a + 8},${a} H${b} L${b - 8},${c} H${a} Z`;
    case "hexagon":
      return `M${a + 8},${a} H${b - 8} L${b},${m} L${b - 8},${c} H${a + 8} L${a},${m} Z`;
    case "tab":
      return `M${a},${a} H${b - 10} L${b},${a + 10} V${c} H${a} Z`;
    default:
      return `M${a + 2},${a} H${b - 2} Q${b},${a} ${b},${a + 2} V${c - 2} Q${b},${c} ${b - 2},${c} H${a + 2} Q${a},${c} ${a},${c - 2} V${a + 2} Q${a},${a} ${a + 2},${a} Z`;
  }
}
