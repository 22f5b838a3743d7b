// A resource's history (docs/history.md, ListVersions): each state with its time, user, size and
// operation, newest first; view or download any of them, compare two text states side by side,
// and restore one (Restore with the version's tag) after a confirmation that names what changes.

import { useEffect, useMemo, useState } from "preact/hooks";
import type { Version } from "../../../sdk/src/gen/trove/resources/v2/resources_pb.js";
import { isText, readResource, saveAs } from "../content.js";
import { useApp } from "../context.js";
import { formatSize, formatTime } from "../lib/format.js";
import { diffLines, type SideBySideRow, sideBySide, splitLines } from "../lib/line-diff.js";
import { baseName } from "../lib/paths.js";
import { ColumnHeads } from "./column-heads.js";
import { ConfirmButtons, Dialog, errorText } from "./dialog.js";
import { ErrorLine } from "./error-line.js";

/** Largest state the history shows or compares in the page (as the viewer). */
const MAX_TEXT = 2 * 1024 * 1024;

/** A state in words: "2026-11-27 18:40:02 by developer (1.2 KiB)". */
export function describeVersion(v: Version): string {
  const r = v.resource;
  const when = formatTime(r?.lastModifiedMillis ?? 0n);
  const who = v.user ? ` by ${v.user}` : "";
  return v.operation === "delete"
    ? `the deletion of ${when}${who}`
    : `the version of ${when}${who} (${formatSize(r?.size ?? 0n)})`;
}

export function HistoryDialog(props: { store: string; path: string; onClose(): void; onRestored(): void }) {
  const { clients } = useApp();
  const [versions, setVersions] = useState<Version[]>();
  const [error, setError] = useState<string>();
  const [status, setStatus] = useState("");
  const [left, setLeft] = useState<string>();
  const [right, setRight] = useState<string>();
  const [shown, setShown] = useState<{ title: string; rows?: SideBySideRow[]; text?: string; note?: string }>();
  const [restoring, setRestoring] = useState<Version>();
  const [version, setVersion] = useState(0);

  useEffect(() => {
    const abort = new AbortController();
    (async () => {
      const all: Version[] = [];
      for await (const page of clients.resources.listVersions(
        { store: props.store, path: props.path },
        { signal: abort.signal },
      ))
        all.push(...page.versions);
      setVersions(all);
      // The two newest file states are compared by default.
      const files = all.filter((v) => v.operation !== "delete");
      setRight(files[0]?.resource?.tag);
      setLeft(files[1]?.resource?.tag);
    })().catch((err) => {
      if (!abort.signal.aborted) setError(errorText(err));
    });
    return () => abort.abort();
  }, [props.store, props.path, version]);

  const byTag = (tag: string | undefined) => versions?.find((v) => v.resource?.tag === tag);
  const textOf = async (v: Version) => {
    const r = v.resource;
    if (!r) return undefined;
    if (!isText(r.type) || Number(r.size) > MAX_TEXT) return undefined;
    return (await readResource(clients, props.store, props.path, undefined, { version: r.tag })).bytes.text();
  };

  const view = async (v: Version) => {
    setError(undefined);
    try {
      const text = await textOf(v);
      setShown(
        text === undefined
          ? {
              title: describeVersion(v),
              note: "This version is not text (or larger than 2 MiB): download it to see it.",
            }
          : { title: describeVersion(v), text },
      );
    } catch (err) {
      setError(errorText(err));
    }
  };

  const download = async (v: Version) => {
    try {
      const r = v.resource;
      const bytes = (await readResource(clients, props.store, props.path, undefined, { version: r?.tag ?? "" })).bytes;
      saveAs(bytes, baseName(props.path));
    } catch (err) {
      setError(errorText(err));
    }
  };

  const compare = async () => {
    setError(undefined);
    const a = byTag(left);
    const b = byTag(right);
    if (!a || !b) {
      setError("Choose two versions to compare: one as Old, one as New.");
      return;
    }
    try {
      const [ta, tb] = await Promise.all([textOf(a), textOf(b)]);
      if (ta === undefined || tb === undefined) {
        setShown({ title: "Comparison", note: "Only text versions up to 2 MiB are compared." });
        return;
      }
      const ops = diffLines(splitLines(ta), splitLines(tb));
      setShown(
        ops
          ? { title: `${describeVersion(a)} → ${describeVersion(b)}`, rows: sideBySide(ops) }
          : { title: "Comparison", note: "These versions differ in too many lines to compare here." },
      );
    } catch (err) {
      setError(errorText(err));
    }
  };

  const current = versions?.find((v) => v.current);
  return (
    <Dialog title={`History of /${props.path}`} wide onClose={props.onClose}>
      <ErrorLine text={error} />
      <p class="status" role="status">
        {status}
      </p>
      {versions === undefined && !error && <p class="loading">Loading the history…</p>}
      {versions && (
        <div class="history-frame">
          <table class="grid history" aria-label={`Versions of /${props.path}, newest first`}>
            <ColumnHeads columns={["Time", "User", "Size", "Operation", "Old", "New"]} actions />
            <tbody>
              {versions.map((v) => {
                const r = v.resource;
                const tag = r?.tag ?? "";
                const when = formatTime(r?.lastModifiedMillis ?? 0n);
                // Two states may share a second: the tag's start tells them apart to a screen reader.
                const which = `${when}, tag ${tag.slice(0, 8)}`;
                const file = v.operation !== "delete";
                return (
                  <tr key={tag} data-tag={tag} class={v.current ? "current" : undefined}>
                    <th scope="row">
                      <time dateTime={new Date(Number(r?.lastModifiedMillis ?? 0n)).toISOString()}>{when}</time>
                      {v.current && <span class="badge">current</span>}
                    </th>
                    <td>{v.user || <span class="hint">unknown</span>}</td>
                    <td title={`${Number(r?.size ?? 0n).toLocaleString()} bytes`}>
                      {file ? formatSize(r?.size ?? 0n) : ""}
                    </td>
                    <td>{v.operation === "delete" ? "deleted" : "written"}</td>
                    {(
                      [
                        ["old", "from", left, setLeft],
                        ["new", "to", right, setRight],
                      ] as const
                    ).map(([side, word, picked, pick]) => (
                      <td key={side}>
                        {file && (
                          <input
                            type="radio"
                            name={`history-${side}`}
                            aria-label={`Compare ${word} the version of ${which}`}
                            checked={picked === tag}
                            onChange={() => pick(tag)}
                          />
                        )}
                      </td>
                    ))}
                    <td class="actions">
                      {file && (
                        <>
                          <button
                            type="button"
                            class="secondary"
                            onClick={() => view(v)}
                            aria-label={`View the version of ${which}`}
                          >
                            View
                          </button>
                          <button
                            type="button"
                            class="secondary"
                            onClick={() => download(v)}
                            aria-label={`Download the version of ${which}`}
                          >
                            Download
                          </button>
                          {!v.current && (
                            <button
                              type="button"
                              class="danger"
                              onClick={() => setRestoring(v)}
                              aria-label={`Restore the version of ${which}`}
                            >
                              Restore
                            </button>
                          )}
                        </>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <div class="buttons">
        <button type="button" class="secondary" onClick={compare} disabled={!versions}>
          Compare Old and New
        </button>
        <button type="button" class="secondary" onClick={props.onClose}>
          Close
        </button>
      </div>
      {shown && <Shown {...shown} />}
      {restoring && (
        <RestoreVersion
          store={props.store}
          path={props.path}
          version={restoring}
          current={current}
          onClose={() => setRestoring(undefined)}
          onRestored={(text) => {
            setRestoring(undefined);
            setStatus(text);
            setShown(undefined);
            setVersion((n) => n + 1);
            props.onRestored();
          }}
        />
      )}
    </Dialog>
  );
}

function Shown(props: { title: string; rows?: SideBySideRow[]; text?: string; note?: string }) {
  const changed = useMemo(() => props.rows?.filter((r) => r.kind !== "same").length ?? 0, [props.rows]);
  return (
    <section class="version-view" aria-labelledby="version-view-title">
      <h3 id="version-view-title">{props.title}</h3>
      {props.note && <p>{props.note}</p>}
      {props.text !== undefined && (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard (axe scrollable-region-focusable)
        <section class="version-text" tabIndex={0} aria-label="Contents of this version">
          <pre>{props.text}</pre>
        </section>
      )}
      {props.rows && (
        <>
          <p class="hint">
            {changed === 0
              ? "The two versions have the same lines."
              : `${changed} ${changed === 1 ? "line differs" : "lines differ"}.`}
          </p>
          {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrolling region must be reachable by keyboard (axe scrollable-region-focusable) */}
          <section class="diff-frame" tabIndex={0} aria-label="Side-by-side comparison">
            <table class="diff" aria-label="Old lines on the left, new lines on the right">
              <colgroup>
                <col class="number" />
                <col />
                <col class="number" />
                <col />
              </colgroup>
              <thead>
                <tr>
                  <th scope="col" colSpan={2}>
                    Old
                  </th>
                  <th scope="col" colSpan={2}>
                    New
                  </th>
                </tr>
              </thead>
              <tbody>
                {props.rows.map((r, i) => (
                  <tr key={i} class={r.kind}>
                    <td class="number">{r.left?.number ?? ""}</td>
                    <td class={`line${r.left && r.kind !== "same" ? " removed" : ""}`}>
                      {r.left && r.kind !== "same" && <span class="visually-hidden">removed: </span>}
                      {r.left?.line ?? ""}
                    </td>
                    <td class="number">{r.right?.number ?? ""}</td>
                    <td class={`line${r.right && r.kind !== "same" ? " added" : ""}`}>
                      {r.right && r.kind !== "same" && <span class="visually-hidden">added: </span>}
                      {r.right?.line ?? ""}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
        </>
      )}
    </section>
  );
}

function RestoreVersion(props: {
  store: string;
  path: string;
  version: Version;
  current: Version | undefined;
  onClose(): void;
  onRestored(text: string): void;
}) {
  const { clients } = useApp();
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const { current } = props;
  const restore = async () => {
    setBusy(true);
    setError(undefined);
    try {
      // Against the current state the confirmation named: a change made meanwhile is refused.
      const r = await clients.resources.restore({
        store: props.store,
        path: props.path,
        version: props.version.resource?.tag ?? "",
        ifMatch: current && current.operation !== "delete" ? [current.resource?.tag ?? ""] : [],
      });
      props.onRestored(`Restored ${describeVersion(props.version)}: new tag ${r.resource?.tag ?? ""}.`);
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };
  const replaces =
    !current || current.operation === "delete"
      ? `/${props.path} is deleted now: it comes back`
      : `It replaces the current version (${formatTime(current.resource?.lastModifiedMillis ?? 0n)}${current.user ? ` by ${current.user}` : ""}, ${formatSize(current.resource?.size ?? 0n)})`;
  return (
    <Dialog title={`Restore /${props.path}?`} onClose={props.onClose}>
      <ErrorLine text={error} />
      <p>
        {`${describeVersion(props.version)[0]?.toUpperCase()}${describeVersion(props.version).slice(1)}`} becomes
        current again, as a new change. {replaces}; the replaced version stays in the history, and followers of the
        store see the change.
      </p>
      <ConfirmButtons onConfirm={restore} onCancel={props.onClose} disabled={busy}>
        Restore
      </ConfirmButtons>
    </Dialog>
  );
}
