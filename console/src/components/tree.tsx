// The folder tree beside the listing: the store's directories, expanded along the open path and on
// demand, each a link; expansion buttons say their state (aria-expanded).

import { useEffect, useState } from "preact/hooks";
import { useApp } from "../context.js";
import { baseName, browseHref } from "../lib/paths.js";

export function FolderTree(props: { store: string; path: string; version: number }) {
  return (
    <nav class="tree" aria-label="Folders">
      <ul>
        <Folder store={props.store} dir="" open={props.path} version={props.version} />
      </ul>
    </nav>
  );
}

function Folder(props: { store: string; dir: string; open: string; version: number }) {
  const { clients } = useApp();
  const onPath = props.dir === "" || props.open === props.dir || props.open.startsWith(`${props.dir}/`);
  const [expanded, setExpanded] = useState(onPath);
  const [children, setChildren] = useState<string[]>();
  useEffect(() => {
    if (onPath) setExpanded(true);
  }, [onPath]);
  useEffect(() => {
    if (!expanded) return;
    const abort = new AbortController();
    (async () => {
      const dirs: string[] = [];
      for await (const page of clients.resources.list(
        { store: props.store, path: props.dir },
        { signal: abort.signal },
      )) {
        for (const e of page.entries) if (e.directory && !e.deleted) dirs.push(e.path);
      }
      dirs.sort((a, b) => a.localeCompare(b, "en", { numeric: true }));
      setChildren(dirs);
    })().catch(() => {
      if (!abort.signal.aborted) setChildren([]);
    });
    return () => abort.abort();
  }, [expanded, props.store, props.dir, props.version]);
  const label = props.dir === "" ? props.store : baseName(props.dir);
  const current = props.open === props.dir;
  return (
    <li>
      <button
        type="button"
        class="toggle"
        aria-expanded={expanded}
        aria-label={`${expanded ? "Collapse" : "Expand"} ${label}`}
        onClick={() => setExpanded(!expanded)}
      >
        <span aria-hidden="true">{expanded ? "▾" : "▸"}</span>
      </button>
      <a href={browseHref(props.store, props.dir)} aria-current={current ? "page" : undefined}>
        {label}
      </a>
      {expanded && children && children.length > 0 && (
        <ul>
          {children.map((d) => (
            <Folder key={d} store={props.store} dir={d} open={props.open} version={props.version} />
          ))}
        </ul>
      )}
    </li>
  );
}
