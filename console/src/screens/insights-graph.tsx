// The dependency graph of a report, its own chunk (loaded when asked for): an SVG drawn here with a
// layered layout (insights-layout.ts), zoomable, missing targets and cycle edges marked, a click on
// a node opening its folder; exported as SVG (this drawing), DOT and Mermaid (ExportGraph).

import { useMemo, useRef, useState } from "preact/hooks";
import { GraphFormat, type ReportKey } from "../../../sdk/src/gen/trove/insights/v1/reports_pb.js";
import { errorText } from "../components/dialog.js";
import { ErrorLine } from "../components/error-line.js";
import { useApp } from "../context.js";
import { browseHref } from "../lib/paths.js";
import { layoutGraph, NODE_HEIGHT, NODE_WIDTH, nodeLabel } from "./insights-layout.js";
import type { ReportEntry } from "./insights-model.js";

const ZOOMS = [0.25, 0.4, 0.6, 0.8, 1, 1.25, 1.6];

export interface GraphProps {
  entries: ReportEntry[];
  reportKey: ReportKey;
  store: string;
  environmentName: string;
}

export function DependencyGraph(props: GraphProps) {
  const { clients, navigate } = useApp();
  const [root, setRoot] = useState("");
  const [zoom, setZoom] = useState(2);
  const [exported, setExported] = useState<{ format: string; text: string }>();
  const [error, setError] = useState<string>();
  const svg = useRef<SVGSVGElement>(null);
  const layout = useMemo(() => layoutGraph(props.entries, root || undefined), [props.entries, root]);
  const at = new Map(layout.nodes.map((n) => [n.path, n]));
  const scale = ZOOMS[zoom] ?? 1;

  const open = (path: string) => {
    const dir = path.slice(0, path.lastIndexOf("/") + 1);
    navigate(browseHref(props.store, `${props.environmentName}${dir}`));
  };

  const exportAs = async (format: "SVG" | "DOT" | "Mermaid") => {
    setError(undefined);
    try {
      if (format === "SVG") {
        setExported({ format, text: new XMLSerializer().serializeToString(svg.current as SVGSVGElement) });
        return;
      }
      const r = await clients.reports.exportGraph({
        key: props.reportKey,
        format: format === "DOT" ? GraphFormat.DOT : GraphFormat.MERMAID,
        root,
      });
      setExported({ format, text: r.text });
    } catch (err) {
      setError(errorText(err));
    }
  };
  const download = useMemo(
    () =>
      exported &&
      URL.createObjectURL(
        new Blob([exported.text], { type: exported.format === "SVG" ? "image/svg+xml" : "text/plain" }),
      ),
    [exported],
  );

  return (
    <section aria-labelledby="graph-title" class="graph">
      <h2 id="graph-title">Dependency graph</h2>
      <div class="toolbar">
        <label for="graph-root">Neighbourhood of</label>
        <select id="graph-root" value={root} onChange={(e) => setRoot((e.target as HTMLSelectElement).value)}>
          <option value="">the whole environment</option>
          {props.entries.map((e) => (
            <option key={e.path} value={e.path}>
              {e.path}
            </option>
          ))}
        </select>
        <button type="button" class="secondary" onClick={() => setZoom(Math.max(0, zoom - 1))} disabled={zoom === 0}>
          Zoom out
        </button>
        <button
          type="button"
          class="secondary"
          onClick={() => setZoom(Math.min(ZOOMS.length - 1, zoom + 1))}
          disabled={zoom === ZOOMS.length - 1}
        >
          Zoom in
        </button>
        <span>{Math.round(scale * 100)} %</span>
      </div>
      <p class="hint">
        {layout.nodes.length} resources, {layout.edges.length} references;{" "}
        {layout.nodes.filter((n) => n.missing).length} missing (dashed, red),{" "}
        {layout.edges.filter((e) => e.cycle).length} references on a cycle (red). Click a resource to open its folder.
      </p>
      <div class="graph-canvas">
        <svg
          ref={svg}
          xmlns="http://www.w3.org/2000/svg"
          role="img"
          aria-label={`Dependency graph: ${layout.nodes.length} resources`}
          width={layout.width * scale}
          height={layout.height * scale}
          viewBox={`0 0 ${layout.width} ${layout.height}`}
          font-family="sans-serif"
          font-size="11"
        >
          <defs>
            <marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto">
              <path d="M0,0 L10,5 L0,10 z" fill="#555" />
            </marker>
            <marker
              id="arrow-cycle"
              viewBox="0 0 10 10"
              refX="10"
              refY="5"
              markerWidth="6"
              markerHeight="6"
              orient="auto"
            >
              <path d="M0,0 L10,5 L0,10 z" fill="#b00020" />
            </marker>
          </defs>
          {layout.edges.map((e) => {
            const a = at.get(e.from);
            const b = at.get(e.to);
            if (!a || !b) return null;
            const down = b.y >= a.y;
            const x1 = a.x + NODE_WIDTH / 2;
            const y1 = down ? a.y + NODE_HEIGHT : a.y;
            const x2 = b.x + NODE_WIDTH / 2;
            const y2 = down ? b.y : b.y + NODE_HEIGHT;
            const bend = a.y === b.y ? -40 : 0;
            return (
              <path
                key={`${e.from}>${e.to}`}
                class={e.cycle ? "edge cycle" : "edge"}
                data-from={e.from}
                data-to={e.to}
                d={`M${x1},${y1} C${x1},${(y1 + y2) / 2 + bend} ${x2},${(y1 + y2) / 2 + bend} ${x2},${y2}`}
                fill="none"
                stroke={e.cycle ? "#b00020" : "#888"}
                stroke-width={e.cycle ? 2 : 1}
                marker-end={e.cycle ? "url(#arrow-cycle)" : "url(#arrow)"}
              />
            );
          })}
          {layout.nodes.map((n) => (
            // biome-ignore lint/a11y/useSemanticElements: an SVG group cannot be a <button>
            <g
              key={n.path}
              class={n.missing ? "node missing" : "node"}
              data-path={n.path}
              role="button"
              tabIndex={n.missing ? -1 : 0}
              aria-label={n.missing ? `${n.path} (missing)` : `Open ${n.path}`}
              onClick={() => !n.missing && open(n.path)}
              onKeyDown={(e) => {
                if (!n.missing && (e.key === "Enter" || e.key === " ")) {
                  e.preventDefault();
                  open(n.path);
                }
              }}
            >
              <title>{n.missing ? `${n.path} (missing)` : `${n.path} (${n.type})`}</title>
              <rect
                x={n.x}
                y={n.y}
                width={NODE_WIDTH}
                height={NODE_HEIGHT}
                rx="4"
                fill={n.missing ? "#fdecee" : "#eef3fb"}
                stroke={n.missing ? "#b00020" : "#3a5a8c"}
                stroke-dasharray={n.missing ? "4 3" : undefined}
              />
              <text x={n.x + 8} y={n.y + 18} fill={n.missing ? "#b00020" : "#111"}>
                {nodeLabel(n.path)}
              </text>
            </g>
          ))}
        </svg>
      </div>
      <div class="buttons">
        <button type="button" class="secondary" onClick={() => exportAs("SVG")}>
          Export SVG
        </button>
        <button type="button" class="secondary" onClick={() => exportAs("DOT")}>
          Export DOT
        </button>
        <button type="button" class="secondary" onClick={() => exportAs("Mermaid")}>
          Export Mermaid
        </button>
      </div>
      <ErrorLine text={error} />
      {exported && (
        <div class="form">
          <label for="graph-export">{exported.format}</label>
          <textarea id="graph-export" readOnly rows={8} value={exported.text} />
          <a
            href={download}
            download={`graph.${exported.format === "Mermaid" ? "mmd" : exported.format.toLowerCase()}`}
          >
            Download {exported.format}
          </a>
        </div>
      )}
    </section>
  );
}
