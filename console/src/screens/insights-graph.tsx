// The dependency graph of a report, its own chunk (loaded when asked for): laid out by dagre
// (insights-layout.ts), drawn here as an SVG, fitted to the frame's width, zoomable, dragged to
// pan; missing targets and cycle edges marked; a click (or Enter) on a node opens its folder;
// exported as SVG (this drawing), DOT and Mermaid (ExportGraph).

import { useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { GraphFormat, type ReportKey } from "../../../sdk/src/gen/trove/insights/v1/reports_pb.js";
import { errorText } from "../components/dialog.js";
import { ErrorLine } from "../components/error-line.js";
import { useApp } from "../context.js";
import { browseHref } from "../lib/paths.js";
import {
  type Direction,
  edgePath,
  fitScale,
  layoutGraph,
  NODE_HEIGHT,
  NODE_WIDTH,
  nodeLabel,
  VIEW_WIDTH,
} from "./insights-layout.js";
import type { ReportEntry } from "./insights-model.js";

const ZOOMS = [0.25, 0.33, 0.5, 0.67, 0.8, 1, 1.25, 1.6, 2];
const MIN_ZOOM = ZOOMS[0] as number;
const MAX_ZOOM = ZOOMS[ZOOMS.length - 1] as number;

export interface GraphProps {
  entries: ReportEntry[];
  reportKey: ReportKey;
  store: string;
  environmentName: string;
}

export function DependencyGraph(props: GraphProps) {
  const { clients, navigate } = useApp();
  const [root, setRoot] = useState("");
  const [direction, setDirection] = useState<Direction | "">("");
  // undefined: fitted to the frame's width.
  const [zoom, setZoom] = useState<number>();
  const [frameWidth, setFrameWidth] = useState(VIEW_WIDTH);
  const [exported, setExported] = useState<{ format: string; text: string }>();
  const [error, setError] = useState<string>();
  const svg = useRef<SVGSVGElement>(null);
  const frame = useRef<HTMLElement>(null);
  const drag = useRef<{ x: number; y: number; left: number; top: number; moved: boolean } | undefined>(undefined);
  const layout = useMemo(
    () => layoutGraph(props.entries, root || undefined, direction || undefined),
    [props.entries, root, direction],
  );
  const scale = zoom ?? Math.max(MIN_ZOOM, fitScale(layout, frameWidth));

  useLayoutEffect(() => {
    const el = frame.current;
    if (!el) return;
    const measure = () => setFrameWidth(Math.max(100, el.clientWidth - 4));
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(el);
    return () => observer.disconnect();
  }, []);

  const open = (path: string) => {
    const dir = path.slice(0, path.lastIndexOf("/") + 1);
    navigate(browseHref(props.store, `${props.environmentName}${dir}`));
  };
  const zoomOut = () => setZoom([...ZOOMS].reverse().find((z) => z < scale - 0.001) ?? MIN_ZOOM);
  const zoomIn = () => setZoom(ZOOMS.find((z) => z > scale + 0.001) ?? MAX_ZOOM);

  const exportAs = async (format: "SVG" | "DOT" | "Mermaid") => {
    setError(undefined);
    try {
      if (format === "SVG") {
        // At 100 %, whatever the zoom on screen.
        const copy = (svg.current as SVGSVGElement).cloneNode(true) as SVGSVGElement;
        copy.setAttribute("width", String(Math.ceil(layout.width)));
        copy.setAttribute("height", String(Math.ceil(layout.height)));
        setExported({ format, text: new XMLSerializer().serializeToString(copy) });
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

  // Drag to pan: the frame scrolls.
  const onPointerDown = (e: PointerEvent) => {
    const el = frame.current;
    if (!el || e.button !== 0) return;
    drag.current = { x: e.clientX, y: e.clientY, left: el.scrollLeft, top: el.scrollTop, moved: false };
  };
  const onPointerMove = (e: PointerEvent) => {
    const d = drag.current;
    const el = frame.current;
    if (!d || !el || (e.buttons & 1) === 0) return;
    const dx = e.clientX - d.x;
    const dy = e.clientY - d.y;
    if (!d.moved && Math.abs(dx) + Math.abs(dy) < 5) return;
    if (!d.moved) el.setPointerCapture(e.pointerId);
    d.moved = true;
    el.scrollLeft = d.left - dx;
    el.scrollTop = d.top - dy;
  };

  return (
    <section aria-labelledby="graph-title" class="graph">
      <h2 id="graph-title">Dependency graph</h2>
      <div class="toolbar">
        <label for="graph-root">Neighbourhood of</label>
        <select
          id="graph-root"
          value={root}
          onChange={(e) => {
            setRoot((e.target as HTMLSelectElement).value);
            setZoom(undefined);
          }}
        >
          <option value="">the whole environment</option>
          {props.entries.map((e) => (
            <option key={e.path} value={e.path}>
              {e.path}
            </option>
          ))}
        </select>
        <label for="graph-direction">Direction</label>
        <select
          id="graph-direction"
          value={direction}
          onChange={(e) => {
            setDirection((e.target as HTMLSelectElement).value as Direction | "");
            setZoom(undefined);
          }}
        >
          <option value="">automatic</option>
          <option value="TB">top to bottom</option>
          <option value="LR">left to right</option>
        </select>
      </div>
      <div class="toolbar">
        <button type="button" class="secondary" onClick={zoomOut} disabled={scale <= MIN_ZOOM}>
          Zoom out
        </button>
        <button type="button" class="secondary" onClick={zoomIn} disabled={scale >= MAX_ZOOM}>
          Zoom in
        </button>
        <button type="button" class="secondary" onClick={() => setZoom(undefined)} disabled={zoom === undefined}>
          Fit to width
        </button>
        <span aria-live="polite">{Math.round(scale * 100)} %</span>
      </div>
      <p class="hint">
        {layout.nodes.length} resources, {layout.edges.length} references, drawn{" "}
        {layout.direction === "LR" ? "left to right" : "top to bottom"}; {layout.nodes.filter((n) => n.missing).length}{" "}
        missing (dashed, red), {layout.edges.filter((e) => e.cycle).length} references on a cycle (red). Click a
        resource to open its folder; drag to pan.
      </p>
      <section
        class="graph-canvas"
        ref={frame}
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling frame is focusable, so that the keyboard scrolls it
        tabIndex={0}
        aria-label="Dependency graph drawing (scrolls)"
        onPointerDown={onPointerDown}
        onPointerMove={onPointerMove}
      >
        <svg
          ref={svg}
          xmlns="http://www.w3.org/2000/svg"
          aria-label={`Dependency graph: ${layout.nodes.length} resources`}
          data-direction={layout.direction}
          width={Math.ceil(layout.width * scale)}
          height={Math.ceil(layout.height * scale)}
          viewBox={`0 0 ${Math.ceil(layout.width)} ${Math.ceil(layout.height)}`}
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
          {layout.edges.map((e) => (
            <path
              key={`${e.from}>${e.to}`}
              class={e.cycle ? "edge cycle" : "edge"}
              data-from={e.from}
              data-to={e.to}
              d={edgePath(e.points)}
              fill="none"
              stroke={e.cycle ? "#b00020" : "#888"}
              stroke-width={e.cycle ? 2 : 1}
              marker-end={e.cycle ? "url(#arrow-cycle)" : "url(#arrow)"}
            />
          ))}
          {layout.nodes
            .filter((n) => n.missing)
            .map((n) => (
              <g key={n.path} class="node missing" data-path={n.path}>
                <title>{`${n.path} (missing)`}</title>
                <NodeBox x={n.x} y={n.y} path={n.path} missing />
              </g>
            ))}
          {layout.nodes
            .filter((n) => !n.missing)
            .map((n) => (
              // biome-ignore lint/a11y/useSemanticElements: an SVG group cannot be a <button>
              <g
                key={n.path}
                class="node"
                data-path={n.path}
                role="button"
                // Lower case: an SVG attribute is set as written, and only `tabindex` makes it focusable.
                tabindex={0}
                aria-label={`Open ${n.path}`}
                // A drag that moved (to pan) is not a click on the node it started on.
                onClick={() => !drag.current?.moved && open(n.path)}
                onKeyDown={(e) => {
                  if (e.key === "Enter" || e.key === " ") {
                    e.preventDefault();
                    open(n.path);
                  }
                }}
              >
                <title>{`${n.path} (${n.type})`}</title>
                <NodeBox x={n.x} y={n.y} path={n.path} missing={false} />
              </g>
            ))}
        </svg>
      </section>
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

/** A resource's box and its name (a nested <svg>: its viewport clips a name too long for the box); a missing target dashed and red. */
function NodeBox(props: { x: number; y: number; path: string; missing: boolean }) {
  const label = nodeLabel(props.path);
  return (
    // biome-ignore lint/a11y/noSvgWithoutTitle: a viewport that clips the box, not an image; the node around it is named
    <svg x={props.x} y={props.y} width={NODE_WIDTH} height={NODE_HEIGHT} overflow="hidden">
      <rect
        x="0.5"
        y="0.5"
        width={NODE_WIDTH - 1}
        height={NODE_HEIGHT - 1}
        rx="4"
        fill={props.missing ? "#fdecee" : "#eef3fb"}
        stroke={props.missing ? "#b00020" : "#3a5a8c"}
        stroke-dasharray={props.missing ? "4 3" : undefined}
      />
      <text
        x="7"
        y="17"
        fill={props.missing ? "#b00020" : "#111"}
        textLength={label.squeeze}
        lengthAdjust={label.squeeze ? "spacingAndGlyphs" : undefined}
      >
        {label.text}
      </text>
    </svg>
  );
}
