// The dependency graph of a report as Graphviz DOT or Mermaid flowchart text, for people to
// look at: node shape by resource type, missing targets dashed, default themes bold.

import { NotFoundError } from "../domain/errors.js";
import { environmentPath } from "./reference-path.js";
import type { ReportDocument } from "./report-document.js";
import { type DependencyGraph, dependencyGraph, type GraphEdge, type GraphNode } from "./report-queries.js";
import type { ResourceType } from "./resource-format.js";

export interface GraphExportOptions {
  /** Only this resource and what it uses, directly or transitively. */
  root?: string;
}

/** The nodes and edges to draw: the whole graph, or what `root` reaches. */
function selection(report: ReportDocument, options: GraphExportOptions): { nodes: GraphNode[]; edges: GraphEdge[] } {
  const graph: DependencyGraph = dependencyGraph(report);
  if (options.root === undefined) {
    return { nodes: [...graph.nodes.values()], edges: [...graph.outgoing.values()].flat() };
  }
  const root = environmentPath(options.root);
  if (!graph.nodes.has(root)) throw new NotFoundError(`no resource ${root} in the report, and nothing refers to it`);
  const reached = new Set([root]);
  const order = [root];
  for (let i = 0; i < order.length; i++) {
    for (const edge of graph.outgoing.get(order[i] as string) ?? []) {
      if (!reached.has(edge.to)) {
        reached.add(edge.to);
        order.push(edge.to);
      }
    }
  }
  return {
    nodes: order.map((p) => graph.nodes.get(p) as GraphNode),
    edges: order.flatMap((p) => graph.outgoing.get(p) ?? []),
  };
}

const DOT_SHAPES: Record<ResourceType, string> = {
  template: "box",
  contentBlock: "component",
  pluggableObject: "hexagon",
  datamodel: "cylinder",
  theme: "note",
};

function dotString(text: string): string {
  return `"${text.replaceAll("\\", "\\\\").replaceAll('"', '\\"')}"`;
}

/** Graphviz DOT: `dot -Tsvg` draws it. */
export function toDot(report: ReportDocument, options: GraphExportOptions = {}): string {
  const { nodes, edges } = selection(report, options);
  const lines = [
    `digraph ${dotString(`${report.projectName}/${report.environmentName}`)} {`,
    "  rankdir=LR;",
    '  node [fontname="Helvetica", fontsize=10];',
    '  edge [fontname="Helvetica", fontsize=8];',
  ];
  for (const node of nodes) {
    const attributes = [`shape=${DOT_SHAPES[node.type]}`, `tooltip=${dotString(node.type)}`];
    if (node.missing) attributes.push('style=dashed, color=red, fontcolor=red, xlabel="missing"');
    lines.push(`  ${dotString(node.path)} [${attributes.join(", ")}];`);
  }
  for (const edge of edges) {
    const attributes = [`label=${dotString(edge.kind)}`];
    if (edge.isDefault) attributes.push("style=bold");
    lines.push(`  ${dotString(edge.from)} -> ${dotString(edge.to)} [${attributes.join(", ")}];`);
  }
  lines.push("}");
  return `${lines.join("\n")}\n`;
}

const MERMAID_SHAPES: Record<ResourceType, [string, string]> = {
  template: ["[", "]"],
  contentBlock: ["(", ")"],
  pluggableObject: ["{{", "}}"],
  datamodel: ["[(", ")]"],
  theme: [">", "]"],
};

function mermaidLabel(text: string): string {
  // Inside a quoted Mermaid label only '"' needs an entity.
  return `"${text.replaceAll('"', "#quot;")}"`;
}

/** A Mermaid flowchart; node ids are n0, n1, ... and each label is the resource's path. */
export function toMermaid(report: ReportDocument, options: GraphExportOptions = {}): string {
  const { nodes, edges } = selection(report, options);
  const ids = new Map(nodes.map((node, i) => [node.path, `n${i}`]));
  const lines = ["flowchart LR"];
  for (const node of nodes) {
    const [open, close] = MERMAID_SHAPES[node.type];
    lines.push(`  ${ids.get(node.path)}${open}${mermaidLabel(node.path)}${close}:::${node.type}`);
  }
  const missing = nodes.filter((n) => n.missing).map((n) => ids.get(n.path));
  if (missing.length > 0) lines.push(`  class ${missing.join(",")} missing`);
  for (const edge of edges) {
    const arrow = edge.isDefault ? `==>|${edge.kind}|` : `-->|${edge.kind}|`;
    lines.push(`  ${ids.get(edge.from)} ${arrow} ${ids.get(edge.to)}`);
  }
  lines.push(
    "  classDef template fill:#dbeafe,stroke:#1d4ed8",
    "  classDef contentBlock fill:#dcfce7,stroke:#15803d",
    "  classDef pluggableObject fill:#fef3c7,stroke:#b45309",
    "  classDef datamodel fill:#ede9fe,stroke:#6d28d9",
    "  classDef theme fill:#fce7f3,stroke:#be185d",
    "  classDef missing stroke:#dc2626,stroke-dasharray:4 3,color:#dc2626",
  );
  return `${lines.join("\n")}\n`;
}
