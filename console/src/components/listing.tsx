// The directory listing: sortable columns (name, type, size, modified, tag, MD5), deleted
// entries marked, and only the rows in view rendered, so a directory of 10,000 entries scrolls smoothly.

import { useLayoutEffect, useRef, useState } from "preact/hooks";
import type { Resource } from "../../../sdk/src/gen/trove/resources/v2/resources_pb.js";
import { formatShortTime, formatSize, formatTime } from "../lib/format.js";
import { typeLabel } from "../lib/kinds.js";
import { asOfHref, browseHref } from "../lib/paths.js";
import { ariaSort, type Sort, type SortKey } from "../lib/sort.js";
import { visibleRows } from "../lib/virtual.js";

export const ROW_HEIGHT = 34;

const COLUMNS: Array<{ key: SortKey; label: string }> = [
  { key: "name", label: "Name" },
  { key: "type", label: "Type" },
  { key: "size", label: "Size" },
  { key: "modified", label: "Modified" },
  { key: "tag", label: "Tag" },
  { key: "md5", label: "MD5" },
];

export interface ListingProps {
  store: string;
  /** Set when the listing shows a directory as it was (docs/history.md): read-only, links keep the moment. */
  asOf?: string;
  entries: Resource[];
  sort: Sort;
  onSort(key: SortKey): void;
  onOpen(entry: Resource): void;
  onDownload(entry: Resource): void;
  onDelete(entry: Resource): void;
}

export function Listing(props: ListingProps) {
  const { entries } = props;
  const scroller = useRef<HTMLTableSectionElement>(null);
  const [view, setView] = useState({ top: 0, height: 600 });
  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return;
    const measure = () => setView({ top: el.scrollTop, height: el.clientHeight });
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(el);
    return () => observer.disconnect();
  }, []);
  const window = visibleRows(view.top, view.height, ROW_HEIGHT, entries.length);

  const after = Math.max(0, (entries.length - window.end) * ROW_HEIGHT);

  return (
    <table class="listing" aria-label="Directory contents" aria-rowcount={entries.length + 1}>
      <thead>
        <tr aria-rowindex={1}>
          {COLUMNS.map((c) => (
            <th key={c.key} scope="col" class={c.key} aria-sort={ariaSort(props.sort, c.key)}>
              <button type="button" class="sort" onClick={() => props.onSort(c.key)}>
                {c.label}
                <span aria-hidden="true">
                  {props.sort.key === c.key ? (props.sort.direction === "asc" ? " ▲" : " ▼") : ""}
                </span>
              </button>
            </th>
          ))}
          <th scope="col" class="actions">
            <span class="visually-hidden">Actions</span>
          </th>
        </tr>
      </thead>
      <tbody
        ref={scroller}
        onScroll={(e) => setView({ top: e.currentTarget.scrollTop, height: e.currentTarget.clientHeight })}
      >
        {entries.length === 0 && (
          <tr class="empty">
            <td>This directory is empty.</td>
          </tr>
        )}
        {window.offset > 0 && <tr class="spacer" style={{ height: `${window.offset}px` }} />}
        {entries.slice(window.start, window.end).map((entry, i) => (
          <Row key={entry.path} {...props} entry={entry} index={window.start + i} />
        ))}
        {after > 0 && <tr class="spacer" style={{ height: `${after}px` }} />}
      </tbody>
    </table>
  );
}

function Row(props: ListingProps & { entry: Resource; index: number }) {
  const { entry } = props;
  const label = entry.directory ? `${entry.name}/` : entry.name;
  const type = entry.directory ? "directory" : entry.type || "no media type";
  const millis = Number(entry.lastModifiedMillis);
  // Long values end with an ellipsis on screen (CSS); the whole text stays in the DOM, so it is the
  // accessible name of the link or button, and in a tooltip (title) for the mouse.
  return (
    <tr class={entry.deleted ? "deleted" : undefined} aria-rowindex={props.index + 2} data-name={entry.name}>
      <td class="name">
        {entry.deleted ? (
          <span class="deleted-name">
            <span class="cut" title={label}>
              {label}
            </span>{" "}
            <span class="badge">deleted</span>
          </span>
        ) : entry.directory ? (
          <a class="cut" href={asOfHref(browseHref(props.store, entry.path), props.asOf)} title={label}>
            {label}
          </a>
        ) : (
          <button type="button" class="link cut" onClick={() => props.onOpen(entry)} title={label}>
            {label}
          </button>
        )}
      </td>
      <td class="type">
        {/* The kind or the type's readable form on screen; the media type whole in the tooltip. */}
        <span class="cut" title={type}>
          {typeLabel(entry.type, entry.directory)}
        </span>
      </td>
      <td class="size">
        {!entry.directory && (
          <span title={`${Number(entry.size).toLocaleString()} bytes`}>{formatSize(entry.size)}</span>
        )}
      </td>
      <td class="modified">
        {millis > 0 && (
          <time dateTime={new Date(millis).toISOString()} title={formatTime(millis)}>
            {formatShortTime(millis)}
          </time>
        )}
      </td>
      <td class="tag">
        <code class="cut" title={entry.tag}>
          {entry.tag}
        </code>
      </td>
      <td class="md5">
        <code class="cut" title={entry.md5}>
          {entry.md5}
        </code>
      </td>
      <td class="actions">
        {/* Icons, to leave the width to the names; the accessible name and the tooltip say what and which. */}
        {!entry.deleted && !entry.directory && (
          <button
            type="button"
            class="secondary icon"
            onClick={() => props.onDownload(entry)}
            aria-label={`Download ${entry.name}`}
            title={`Download ${entry.name}`}
          >
            <Icon path={DOWNLOAD} />
          </button>
        )}
        {!entry.deleted && !props.asOf && (
          <button
            type="button"
            class="danger icon"
            onClick={() => props.onDelete(entry)}
            aria-label={`Delete ${entry.name}`}
            title={`Delete ${entry.name}`}
          >
            <Icon path={TRASH} />
          </button>
        )}
      </td>
    </tr>
  );
}

/** An arrow down onto a tray. */
const DOWNLOAD = "M8 1.5v8.5M4.5 6.5 8 10l3.5-3.5M2.5 11v2.5h11V11";
/** A bin with its lid. */
const TRASH = "M2.5 4h11M6 4V2.5h4V4M4 4l.7 9.5h6.6L12 4M6.8 6.5v4.5M9.2 6.5v4.5";

function Icon(props: { path: string }) {
  return (
    <svg viewBox="0 0 16 16" width="16" height="16" aria-hidden="true" focusable="false">
      <path
        d={props.path}
        fill="none"
        stroke="currentColor"
        stroke-width="1.6"
        stroke-linecap="round"
        stroke-linejoin="round"
      />
    </svg>
  );
}
