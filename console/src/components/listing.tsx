// The directory listing: sortable columns (name, type, size, last modified, tag, MD5), deleted
// entries marked, and only the rows in view rendered, so a directory of 10,000 entries scrolls smoothly.

import { useLayoutEffect, useRef, useState } from "preact/hooks";
import type { Resource } from "../../../sdk/src/gen/trove/resources/v2/resources_pb.js";
import { formatSize, formatTime } from "../lib/format.js";
import { browseHref } from "../lib/paths.js";
import { ariaSort, type Sort, type SortKey } from "../lib/sort.js";
import { visibleRows } from "../lib/virtual.js";

export const ROW_HEIGHT = 34;

const COLUMNS: Array<{ key: SortKey; label: string }> = [
  { key: "name", label: "Name" },
  { key: "type", label: "Type" },
  { key: "size", label: "Size" },
  { key: "modified", label: "Last modified" },
  { key: "tag", label: "Tag" },
  { key: "md5", label: "MD5" },
];

export interface ListingProps {
  store: string;
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
  return (
    <tr class={entry.deleted ? "deleted" : undefined} aria-rowindex={props.index + 2} data-name={entry.name}>
      <td class="name">
        {entry.deleted ? (
          <span>
            {label} <span class="badge">deleted</span>
          </span>
        ) : entry.directory ? (
          <a href={browseHref(props.store, entry.path)}>{label}</a>
        ) : (
          <button type="button" class="link" onClick={() => props.onOpen(entry)}>
            {label}
          </button>
        )}
      </td>
      <td class="type">{entry.directory ? "directory" : entry.type}</td>
      <td class="size">{entry.directory ? "" : formatSize(entry.size)}</td>
      <td class="modified">{formatTime(entry.lastModifiedMillis)}</td>
      <td class="tag">
        <code>{entry.tag}</code>
      </td>
      <td class="md5">
        <code>{entry.md5}</code>
      </td>
      <td class="actions">
        {!entry.deleted && !entry.directory && (
          <button
            type="button"
            class="secondary"
            onClick={() => props.onDownload(entry)}
            aria-label={`Download ${entry.name}`}
          >
            Download
          </button>
        )}
        {!entry.deleted && (
          <button
            type="button"
            class="danger"
            onClick={() => props.onDelete(entry)}
            aria-label={`Delete ${entry.name}`}
          >
            Delete
          </button>
        )}
      </td>
    </tr>
  );
}
