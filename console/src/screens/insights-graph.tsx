// The dependency graph of a report, its own chunk (loaded with the Graph tab): a resource's
// neighbourhood or the problems, never the whole environment unless asked for; laid out by dagre
// (insights-layout.ts), drawn here as an SVG with each kind's shape and colour and a legend, fitted
// whole into the frame ("fit all"), zoomable, dragged to pan; missing targets and cycle edges
// marked; a click (or Enter) on a node opens its folder; exported as files: SVG (this drawing),
// DOT and Mermaid (ExportGraph).

import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "preact/hooks";
import { GraphFormat, type ReportKey } from "../../../sdk/src/gen/trove/insights/v1/reports_pb.js";
import { errorText } from "../components/dialog.js";
import { ErrorLine } from "../components/error-line.js";
import { saveAs } from "../content.js";
import { useApp } from "../context.js";
import { kindOfReportType } from "../lib/kinds.js";
import { browseHref } from "../lib/paths.js";
import {
  type Direction,
  edgePath,
  fitAllScale,
  type GraphScope,
  hasProblems,
  KIND_STYLES,
  layoutGraph,
  NODE_HEIGHT,
  NODE_WIDTH,
  nodeLabel,
  shapePath,
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
  /** The resource whose neighbourhood opens (`?path=`); "" for none. */
  focus: string;
  /** `problems`: the missing references and cycles with their neighbours; `all`: everything (asked for). */
  show: string;
  /** The graph tab's URL with this query (its own place for each focus). */
  hrefFor(query: Record<string, string>): string;
}

export function DependencyGraph(props: GraphProps) {
  const { clients, navigate } = useApp();
  const [direction, setDirection] = useState<Direction | "">("");
  // undefined: "fit all", the whole drawing in the frame.
  const [zoom, setZoom] = useState<number>();
  const [frameSize, setFrameSize] = useState({ width: VIEW_WIDTH, height: 600 });
  const [error, setError] = useState<string>();
  const svg = useRef<SVGSVGElement>(null);
  const frame = useRef<HTMLElement>(null);
  const drag = useRef<{ x: number; y: number; left: number; top: number; moved: boolean } | undefined>(undefined);
  const problems = useMemo(() => hasProblems(props.entries), [props.entries]);
  // Never the whole environment unless asked for: a resource's neighbourhood, else the problems.
  const scope: GraphScope | undefined = props.focus
    ? { kind: "focus", path: props.focus }
    : props.show === "all"
      ? { kind: "all" }
      : props.show === "problems" || problems
        ? { kind: "problems" }
        : undefined;
  const layout = useMemo(
    () => (scope ? layoutGraph(props.entries, scope, direction || undefined) : undefined),
    [props.entries, props.focus, props.show, direction],
  );
  const fitted = layout ? Math.max(MIN_ZOOM, fitAllScale(layout, frameSize.width, frameSize.height)) : 1;
  const scale = zoom ?? fitted;

  useLayoutEffect(() => {
    const el = frame.current;
    if (!el) return;
    const measure = () =>
      setFrameSize({ width: Math.max(100, el.clientWidth - 4), height: Math.max(100, el.clientHeight - 4) });
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(el);
    return () => observer.disconnect();
  }, [layout !== undefined]);
  useEffect(() => setZoom(undefined), [props.focus, props.show]);

  const open = (path: string) => {
    const dir = path.slice(0, path.lastIndexOf("/") + 1);
    navigate(browseHref(props.store, `${props.environmentName}${dir}`));
  };
  const zoomOut = () => setZoom([...ZOOMS].reverse().find((z) => z < scale - 0.001) ?? MIN_ZOOM);
  const zoomIn = () => setZoom(ZOOMS.find((z) => z > scale + 0.001) ?? MAX_ZOOM);

  const exportAs = async (format: "SVG" | "DOT" | "Mermaid") => {
    setError(undefined);
    const name = `graph-${props.environmentName}${props.focus ? `-${nodeLabel(props.focus).text}` : props.show === "all" ? "" : "-problems"}`;
    try {
      if (format === "SVG") {
        // At 100 %, whatever the zoom on screen, with the XML declaration a file wants.
        const copy = (svg.current as SVGSVGElement).cloneNode(true) as SVGSVGElement;
        copy.setAttribute("width", String(Math.ceil(layout?.width ?? 0)));
        copy.setAttribute("height", String(Math.ceil(layout?.height ?? 0)));
        const text = `<?xml version="1.0" encoding="UTF-8"?>\n${new XMLSerializer().serializeToString(copy)}`;
        saveAs(new Blob([text], { type: "image/svg+xml" }), `${name}.svg`);
        return;
      }
      const r = await clients.reports.exportGraph({
        key: props.reportKey,
        format: format === "DOT" ? GraphFormat.DOT : GraphFormat.MERMAID,
        root: props.focus,
      });
      saveAs(new Blob([r.text], { type: "text/plain" }), `${name}.${format === "DOT" ? "dot" : "mmd"}`);
    } catch (err) {
      setError(errorText(err));
    }
  };

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
      <h2 id="graph-title" class="visually-hidden">
        Dependency graph
      </h2>
      <div class="toolbar">
        <label for="graph-root">Show</label>
        <select
          id="graph-root"
          value={props.focus ? `focus:${props.focus}` : scope?.kind === "all" ? "all" : scope ? "problems" : ""}
          onChange={(e) => {
            const v = e.currentTarget.value;
            navigate(props.hrefFor(v.startsWith("focus:") ? { path: v.slice(6) } : v === "" ? {} : { show: v }));
          }}
        >
          {!scope && <option value="">choose a resource…</option>}
          <option value="problems">the problems (missing references, cycles)</option>
          {props.entries.map((e) => (
            <option key={e.path} value={`focus:${e.path}`}>
              around {e.path}
            </option>
          ))}
          <option value="all">the whole environment ({props.entries.length} resources)</option>
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
        <button type="button" class="secondary" onClick={zoomOut} disabled={!layout || scale <= MIN_ZOOM}>
          Zoom out
        </button>
        <button type="button" class="secondary" onClick={zoomIn} disabled={!layout || scale >= MAX_ZOOM}>
          Zoom in
        </button>
        <button
          type="button"
          class="secondary"
          onClick={() => setZoom(undefined)}
          disabled={!layout || zoom === undefined}
        >
          Fit all
        </button>
        <span aria-live="polite">{Math.round(scale * 100)} %</span>
      </div>
      <Legend />
      {!layout && (
        <p>
          No missing reference and no cycle in this report. Choose a resource above to see what it uses and what uses
          it, or the whole environment.
        </p>
      )}
      {layout && (
        <p class="hint">
          {scope?.kind === "focus"
            ? `Around ${props.focus}: what it uses and what uses it directly. `
            : scope?.kind === "problems"
              ? "The problems, with the resources they concern. "
              : "The whole environment. "}
          {layout.nodes.length} resources, {layout.edges.length} references, drawn{" "}
          {layout.direction === "LR" ? "left to right" : "top to bottom"};{" "}
          {layout.nodes.filter((n) => n.missing).length} missing, {layout.edges.filter((e) => e.cycle).length}{" "}
          references on a cycle. Click a resource to open its folder; drag to pan.
        </p>
      )}
      {layout && (
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
                  <NodeBox x={n.x} y={n.y} path={n.path} type={n.type} missing />
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
                  <NodeBox x={n.x} y={n.y} path={n.path} type={n.type} missing={false} />
                </g>
              ))}
          </svg>
        </section>
      )}
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
    </section>
  );
}

/** A resource's box in its kind's shape and colours, and its name (a nested <svg>: its viewport clips a name too long for the box); a missing target dashed and red. */
function NodeBox(props: { x: number; y: number; path: string; type: string; missing: boolean }) {
  const label = nodeLabel(props.path);
  const style =
    KIND_STYLES[kindOfReportType(props.type) ?? "other"] ?? (KIND_STYLES.other as (typeof KIND_STYLES)[string]);
  return (
    // biome-ignore lint/a11y/noSvgWithoutTitle: a viewport that clips the box, not an image; the node around it is named
    <svg x={props.x} y={props.y} width={NODE_WIDTH} height={NODE_HEIGHT} overflow="hidden">
      <path
        d={shapePath(props.missing ? "rectangle" : style.shape, NODE_WIDTH, NODE_HEIGHT)}
        fill={props.missing ? "#fdecee" : style.fill}
        stroke={props.missing ? "#b00020" : style.stroke}
        stroke-width={props.missing ? 2 : 1.2}
        stroke-dasharray={props.missing ? "4 3" : undefined}
      />
      <text
        x={NODE_WIDTH / 2}
        y="17"
        text-anchor="middle"
        fill={props.missing ? "#b00020" : "#111"}
        textLength={label.squeeze}
        lengthAdjust={label.squeeze ? "spacingAndGlyphs" : undefined}
      >
        {label.text}
      </text>
    </svg>
  );
}

/** What the colours and shapes mean: each kind, a missing target, a reference on a cycle. */
function Legend() {
  const w = 46;
  const h = 18;
  return (
    <ul class="legend" aria-label="Legend">
      {Object.entries(KIND_STYLES).map(([kind, style]) => (
        <li key={kind}>
          <svg width={w} height={h} viewBox={`0 0 ${w} ${h}`} aria-hidden="true">
            <path d={shapePath(style.shape, w, h)} fill={style.fill} stroke={style.stroke} stroke-width="1.2" />
          </svg>
          {style.label}
        </li>
      ))}
      <li>
        <svg width={w} height={h} viewBox={`0 0 ${w} ${h}`} aria-hidden="true">
          <path
            d={shapePath("rectangle", w, h)}
            fill="#fdecee"
            stroke="#b00020"
            stroke-width="2"
            stroke-dasharray="4 3"
          />
        </svg>
        missing
      </li>
      <li>
        <svg width={w} height={h} viewBox={`0 0 ${w} ${h}`} aria-hidden="true">
          <path d={`M2,${h / 2} H${w - 4}`} stroke="#b00020" stroke-width="2" />
          <path d={`M${w - 8},${h / 2 - 4} L${w - 2},${h / 2} L${w - 8},${h / 2 + 4} z`} fill="#b00020" />
        </svg>
        on a cycle
      </li>
    </ul>
  );
}
